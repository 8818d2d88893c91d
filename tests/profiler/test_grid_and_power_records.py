"""The DESIGN-grid table of BENCHMARKS.md (tools/record_grid.py) and the power probe's arithmetic
(tools/power_clock_probe.py), CPU only."""

from __future__ import annotations

import json
import pathlib

import pytest

from tool_modules import load_tool

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_grid_table_of_record():
    # The run of M = 1..4096, then M = 1024 and 4096 again with the multicast pair, then M = 8 and 16 with the
    # split-K sum in the kernel, then two M = 16 cells with the bandwidth-scaled split, then six cells with the
    # conversion two k-blocks ahead (a later file wins its cells).
    b = ROOT / "benchmarks"
    grid = load_tool("record_grid").grid_table
    first = grid([str(b / "2026-11-27-h100-grid-peers.json")])
    assert "in 51 of 60 cells in both variants, 54 with zero points" in first
    pair = grid([str(b / "2026-11-27-h100-grid-peers.json"), str(b / "2026-11-27-h100-grid-x-multicast-peers.json")])
    assert "in 54 of 60 cells in both variants, 57 with zero points" in pair
    # Of the third run, M = 8 and 16: at M = 32 it ran the 32-row tiles' split-K summed in the kernel, which `auto`
    # does not take (the first run's M = 32 cells are its picks).
    third = [str(b / "2026-11-27-h100-grid-peers.json"), str(b / "2026-11-27-h100-grid-x-multicast-peers.json"),
             str(b / "2026-11-27-h100-grid-m8-32-serial-split-peers.json") + "@8,16"]
    assert "in 55 of 60 cells in both variants, 58 with zero points" in grid(third)
    # Then 8192x8192 and 28672x8192 at M = 16 with the split scaled by the H100's bandwidth (4 splits, not 8).
    fourth = third + [str(b / "2026-11-27-h100-m16-bandwidth-split-grid-peers.json")]
    assert "in 55 of 60 cells in both variants, 58 with zero points" in grid(fourth)
    # Then the three 4096-wide weights at M = 128 and 256 with the 128 x 128 tiles converting two k-blocks ahead.
    fifth = fourth + [str(b / "2026-11-27-h100-sm90-two-ahead-peers.json")]
    assert "in 57 of 60 cells in both variants, 60 with zero points" in grid(fifth)
    # Then M = 512 on 4096x4096 and 11008x4096 after the ping-pong tile's whole tiles moved to our x load loop (the
    # run's M = 256 cells are 128 x 128 tiles the change does not touch).
    sixth = fifth + [str(b / "2026-11-27-h100-row-block-loop-peers.json") + "@512"]
    assert "in 58 of 60 cells in both variants, 60 with zero points" in grid(sixth)
    # Then 4096x4096 M = 16 with the 16-row tiles split serially below 32 Mi elements (stream-K 0.918x before).
    seventh = sixth + [str(b / "2026-11-28-h100-m16-serial-split-grid-peers.json")]
    assert "| 4096x4096 | 16 | 8.20 | 8.20 | 9.43 vLLM Marlin zp | 0.869 | 0.869 | `16x128x64_w16x32x64_s4_k8s` |" in (
        grid(seventh))
    # Then every shape at M = 16 with the 16- and 32-row tiles starting as programmatic dependents (8192x28672's
    # 16 x 256 parallel split still launched ordinarily).
    table = grid(seventh + [str(b / "2026-11-28-h100-sm80-dependent-start-grid-peers.json")])
    rows = [line for line in table.splitlines()[2:] if line.startswith("|")]
    assert len(rows) == 6 * 10  # six shapes, ten M values
    assert "in 58 of 60 cells in both variants, 60 with zero points" in table
    assert "| 4096x4096 | 16 | 6.97 | 6.93 | 9.41 vLLM Marlin sym | 0.740 | 0.737 | `16x128x64_w16x32x64_s4_k8s` |" in table
    assert "| 11008x4096 | 512 | 63.17 | 63.17 | 65.39 cuBLAS fp16 | 0.966 | 0.966 |" in table
    assert "| 8192x8192 | 16 | 16.23 | 16.16 | 17.84 Marlin sym | 0.910 | 0.906 | `16x128x64_w16x32x64_s4_k4s` |" in table
    assert "| 8192x28672 | 16 | 50.79 | 50.90 | 52.75 Machete sym | 0.963 | 0.965 | `16x256x64_w16x64x64_s3_k2p` |" in table
    assert "| 4096x11008 | 256 | 37.92 | 37.82 | 38.97 cuBLAS fp16 | 0.973 | 0.971 |" in table
    m4096 = [row for row in rows if "| 4096 |" in row]
    assert len(m4096) == 6 and all("c1x2" in row for row in m4096)  # auto's config at M = 4096: the pair
    # The 16-row split-K cells sum in the kernel (serial, "_k<n>s"); 8192x8192 M = 16 was the one behind before.
    m16_split = [row for row in rows if "| 16 |" in row and "16x128x64_w16x32x64_s4_k" in row]
    assert m16_split and all(row.rstrip(" |`").endswith("s") for row in m16_split)
    m32_split = [row for row in rows if "| 32 |" in row and "32x128x64_w32x32x64_s4_k" in row]
    assert m32_split and all(row.rstrip(" |`").endswith("p") for row in m32_split)  # 32-row tiles: the pair
    # Then M = 32 on the three weights whose 32-row split was summed in the kernel as a dependent (the serial split,
    # which `auto` took until the pair's two kernels launched as dependents too): 0.82x-0.97x with the ordinary pair.
    table = grid(seventh + [str(b / f"2026-11-28-h100-{run}-grid-peers.json")
                            for run in ("sm80-dependent-start", "m32-serial-split")])
    assert "in 58 of 60 cells in both variants, 60 with zero points" in table
    assert "| 4096x4096 | 32 | 8.89 | 8.95 | 10.54 vLLM Marlin zp | 0.844 | 0.850 | `32x128x64_w32x32x64_s4_k4s` |" in table
    assert "| 11008x4096 | 32 | 16.25 | 15.78 | 19.96 vLLM Marlin zp | 0.814 | 0.791 | `32x128x64_w32x32x64_s4_k8s` |" in (
        table)
    assert "| 8192x8192 | 32 | 21.72 | 21.72 | 23.19 Marlin sym | 0.937 | 0.937 | `32x128x64_w32x32x64_s4_k8p` |" in table
    assert table in (ROOT / "BENCHMARKS.md").read_text()


def test_h200_grid_table_of_record():
    b = ROOT / "benchmarks"
    before = load_tool("record_grid").grid_table([str(b / "2026-11-27-h200-grid-serial-split-peers.json")])
    assert "in 55 of 60 cells in both variants, 55 with zero points" in before
    # The M = 128 / 256 rows re-run after the 128 x 128 tiles converted two k-blocks ahead.
    table = load_tool("record_grid").grid_table([str(b / "2026-11-27-h200-grid-serial-split-peers.json"),
                                             str(b / "2026-11-27-h200-m128-256-two-ahead-peers.json")])
    assert len([line for line in table.splitlines()[2:] if line.startswith("|")]) == 60
    assert "in 56 of 60 cells in both variants, 56 with zero points" in table
    assert "| 4096x11008 | 256 | 37.14 | 37.03 | 37.26 cuBLAS fp16 | 0.997 | 0.994 |" in table
    # The ping-pong cells (and their shapes' other M = 256 / 512 cells) after the x load loop change.
    table = load_tool("record_grid").grid_table([str(b / "2026-11-27-h200-grid-serial-split-peers.json"),
                                             str(b / "2026-11-27-h200-m128-256-two-ahead-peers.json"),
                                             str(b / "2026-11-27-h200-row-block-loop-peers.json")])
    assert "in 58 of 60 cells in both variants, 58 with zero points" in table
    assert "| 11008x4096 | 512 | 62.14 | 62.23 | 64.37 cuBLAS fp16 | 0.965 | 0.967 |" in table
    # 2026-11-28: the changed and behind cells (28672x8192 M = 128, 4096x4096 M = 256, 4096x11008 M = 4096), then
    # 4096x4096 M = 16 with the 16-row serial split.
    runs = [str(b / name) for name in ("2026-11-27-h200-grid-serial-split-peers.json",
                                       "2026-11-27-h200-m128-256-two-ahead-peers.json",
                                       "2026-11-27-h200-row-block-loop-peers.json",
                                       "2026-11-28-h200-grid-cells-peers.json")]

    def after(name: str) -> str:
        """The table once the run ``name`` is added to ``runs``: still 60 cells, 59 ahead in both variants."""
        runs.append(str(b / name))
        table = load_tool("record_grid").grid_table(runs)
        assert len([line for line in table.splitlines()[2:] if line.startswith("|")]) == 60
        assert "in 59 of 60 cells in both variants, 60 with zero points" in table
        return table

    table = after("2026-11-28-h200-m16-serial-split-grid-peers.json")
    assert "| 4096x4096 | 256 | 16.45 | 16.52 | 16.90 cuBLAS fp16 | 0.973 | 0.977 |" in table
    assert "| 4096x4096 | 16 | 7.95 | 7.93 | 9.47 vLLM Marlin zp | 0.840 | 0.838 | `16x128x64_w16x32x64_s4_k8s` |" in table
    assert "| 8192x8192 | 32 | 20.98 | 21.08 | 23.45 Marlin sym | 0.895 | 0.899 | `32x128x64_w32x32x64_s4_k8s` |" in table
    # Then M = 32 on the four weights up to 64 Mi elements with the 32-row tiles' dependent pair.
    table = after("2026-11-28-h200-m32-dependent-pair-grid-peers.json")
    assert "| 8192x8192 | 32 | 19.63 | 19.59 | 23.35 Marlin sym | 0.841 | 0.839 | `32x128x64_w32x32x64_s4_k4p` |" in table
    # Then 4096x11008 M = 32 with the pair's reduction loading its partials in batches.
    table = after("2026-11-28-h200-split-k-reduction-batch-grid-peers.json")
    assert "| 4096x11008 | 32 | 15.24 | 15.21 | 17.94 Marlin sym | 0.850 | 0.848 | `32x128x64_w32x32x64_s4_k4p` |" in table
    # Then M = 1, 8 and 16 on be0960e's build: the decode kernel's split-major grid and the M <= 2 fast-DRAM rule.
    table = after("2026-11-28-h200-decode-split-major-grid-peers.json")
    assert "| 11008x4096 | 1 | 8.92 | 8.92 | 15.98 gemlite zp | 0.558 | 0.558 | `decode_m8_w4_k8s` |" in table
    assert "| 28672x8192 | 8 | 35.15 | 35.24 | 44.09 vLLM Marlin sym | 0.797 | 0.799 | `decode_m8_w8_k2s` |" in table
    assert "| 4096x4096 | 128 | 13.38 | 13.43 | 13.58 cuBLAS fp16 | 0.986 | 0.990 |" in table
    # Then 4096x4096 M = 128 with 128 x 128 split 4 by the fast-DRAM busiest-SM rule.
    table = after("2026-11-28-h200-busiest-sm-m128-grid-peers.json")
    assert ("| 4096x4096 | 128 | 13.27 | 13.26 | 13.61 cuBLAS fp16 | 0.975 | 0.974 | "
            "`sm90_128x128x64_c1x1_coop_streamk_k4r` |") in table
    assert table.split("\n\nAt or ahead")[0] in (ROOT / "BENCHMARKS.md").read_text()


def test_grid_table_reproduces_the_run_before_the_1ms_samples():
    b = ROOT / "benchmarks"
    table = load_tool("record_grid").grid_table([str(b / "2026-11-26-h100-grid-6-shapes-pdl-peers.json"),
                                             str(b / "2026-11-26-h100-grid-m16-64-rule-peers.json")])
    assert "in 52 of 60 cells in both variants, 55 with zero points" in table


def _rec(K, N, M, peer, us, ok=True, note=None):
    return {"K": K, "N": N, "M": M, "peer": peer, "median_us": us, "ok": ok, "note": note}


def test_grid_best_peer_rules(tmp_path):
    run = tmp_path / "run.json"
    run.write_text(json.dumps({"results": [
        # M = 64: cuBLAS is not yet a target, a peer that failed its check is no rival.
        _rec(64, 128, 64, "mixgemm[zp]", 10.0, note="config=a"), _rec(64, 128, 64, "mixgemm[sym]", 10.5),
        _rec(64, 128, 64, "cublas_fp16", 5.0), _rec(64, 128, 64, "ist_marlin[sym]", 4.0, ok=False),
        _rec(64, 128, 64, "machete[sym]", 10.2), _rec(64, 128, 64, "read_floor", 3.0),  # a yardstick, no rival
        # M = 128: cuBLAS is.
        _rec(64, 128, 128, "mixgemm[zp]", 10.0, note="config=b"), _rec(64, 128, 128, "mixgemm[sym]", 9.0),
        _rec(64, 128, 128, "cublas_fp16", 9.5), _rec(64, 128, 128, "machete[zp]", 12.0),
        # M = 256: our scale-only run is missing, so the cell is left out and counted as such.
        _rec(64, 128, 256, "mixgemm[zp]", 10.0), _rec(64, 128, 256, "machete[zp]", 12.0)]}))
    table = load_tool("record_grid").grid_table([str(run)])
    assert "| 64x128 | 256 |" not in table and "Left out: 1 cell without" in table
    assert "| 64x128 | 64 | 10.00 | 10.50 | 10.20 Machete sym | 0.980 | **1.029** | `a` |" in table
    assert "| 64x128 | 128 | 10.00 | 9.00 | 9.50 cuBLAS fp16 | **1.053** | 0.947 | `b` |" in table
    assert "in 0 of 2 cells in both variants, 1 with zero points" in table
    # A later file's cell replaces the whole cell: ours and every peer.
    later = tmp_path / "later.json"
    later.write_text(json.dumps({"results": [
        _rec(64, 128, 64, "mixgemm[zp]", 9.0, note="config=c"), _rec(64, 128, 64, "mixgemm[sym]", 9.0),
        _rec(64, 128, 64, "vllm_marlin[zp]", 9.0)]}))
    table = load_tool("record_grid").grid_table([str(run), str(later)])
    assert "| 64x128 | 64 | 9.00 | 9.00 | 9.00 vLLM Marlin zp | 1.000 | 1.000 | `c` |" in table
    assert "in 1 of 2 cells in both variants" in table
    # FILE@M,...: only those rows of the file count; the others keep the earlier file's cell.
    grid = load_tool("record_grid").grid_table
    both = tmp_path / "both.json"
    both.write_text(json.dumps({"results": json.loads(later.read_text())["results"] + [
        _rec(64, 128, 128, "mixgemm[zp]", 1.0, note="config=d"), _rec(64, 128, 128, "mixgemm[sym]", 1.0),
        _rec(64, 128, 128, "cublas_fp16", 9.5)]}))
    table = grid([str(run), f"{both}@128"])
    assert "| 64x128 | 64 | 10.00 | 10.50 | 10.20 Machete sym |" in table  # the first file's M = 64
    assert "| 64x128 | 128 | 1.00 | 1.00 | 9.50 cuBLAS fp16 |" in table  # the later file's M = 128
    for bad, message in ((f"{both}@sixteen", "comma list of M"), (f"{both}@", "comma list of M"),
                         (f"{both}@7", r"no passing rows at M = \[7\]")):
        with pytest.raises(SystemExit, match=message):
            grid([bad])
    # A file whose own path holds '@' is read whole.
    folder = tmp_path / "runs@2"
    folder.mkdir()
    (folder / "run.json").write_text(run.read_text())
    assert grid([str(folder / "run.json")]) == grid([str(run)])


def test_power_summary_per_call_cycles_and_energy():
    probe = load_tool("power_clock_probe")
    cap = probe.THROTTLE_BITS["sw_power_cap"]
    # 1000 calls in 3000 ms: 3000 us a call; at 1300 MHz that is 3.9 M cycles; at 700 W, 2100 mJ.
    samples = [(1300, 690.0, cap), (1250, 700.0, cap), (1350, 710.0, 0)]
    row = probe.summarize(3000.0, 1000, samples)
    assert row["us_per_call"] == pytest.approx(3000.0)
    assert row["sm_mhz"] == pytest.approx(1300.0) and row["sm_mhz_min"] == 1250
    assert row["mcycles_per_call"] == pytest.approx(3.9)
    assert row["watts"] == pytest.approx(700.0) and row["mj_per_call"] == pytest.approx(2100.0)
    assert row["throttled_share"] == {"sw_power_cap": pytest.approx(2 / 3, abs=1e-3)}
    with pytest.raises(ValueError, match="NVML samples"):
        probe.summarize(1.0, 10, [])


def test_power_table_of_record():
    probe = load_tool("power_clock_probe")
    rows = json.loads((ROOT / "benchmarks" / "2026-11-27-h100-power-clock-m4096.json").read_text())["results"]
    table = probe.report(rows)
    assert len(table.splitlines()) == 2 + 2 * 4  # two shapes, four peers
    assert "| 8192x28672 | 4096 | mixgemm[zp] | 2988 | 1276 | 3.812 |" in table
    assert table in (ROOT / "docs" / "perf-notes" / "2026-11-27-grid-on-1ms-samples-and-power-cap.md").read_text()


def test_the_multicast_rule_is_what_its_power_record_says():
    # python/mixgemm/paths/sm90.py derives _X_MULTICAST_MIN_M from these ratios: the pair's time over the single
    # CTA's per M (means of the rounds). At M = 2048 the single CTA is auto's pick (not timed by name), except on
    # 4096x11008, where auto runs the stream-K twin.
    rows = json.loads((ROOT / "benchmarks" / "2026-11-27-h100-power-x-multicast.json").read_text())["results"]
    pair, single = (f"mixgemm[zp]@sm90_256x128x64_c1x{n}_coop_persistent" for n in (2, 1))
    ratios: dict = {}
    for (K, N, M), peers in load_tool("power_clock_probe").cell_means(rows).items():
        base = peers.get(single) or ((K, N) != (4096, 11008) and peers.get("mixgemm[zp]"))
        if pair in peers and base:
            ratios.setdefault(M, []).append(peers[pair]["us_per_call"] / base["us_per_call"])
    ranges = {M: (round(min(r), 3), round(max(r), 3), len(r)) for M, r in ratios.items()}
    assert ranges == {512: (0.998, 1.016, 6), 1024: (0.987, 1.006, 6), 2048: (0.979, 0.99, 5),
                      4096: (0.972, 0.976, 3)}
    comment = (ROOT / "python" / "mixgemm" / "paths" / "sm90.py").read_text()
    for text in ("0.972x-0.976x", "0.979x-0.990x", "0.987x-1.006x", "0.998x-1.016x"):
        assert text in comment


@pytest.mark.parametrize("argv, message", [
    (["--peers", ",", "--peers-dir", "."], "--peers names no peer"),
    (["--shapes", "64x64"], "--peers-dir is needed"),
    (["--report", "/nonexistent/power.json"], "--report /nonexistent/power.json: not a record"),
])
def test_power_probe_bad_arguments_name_the_argument(argv, message):
    with pytest.raises(SystemExit, match=message):
        load_tool("power_clock_probe").main(argv)


@pytest.mark.parametrize("argv, message", [
    (["--shapes", "8192", "--peers-dir", "."], "argument --shapes: invalid shape '8192'"),
    (["--ms", "0", "--peers-dir", "."], "argument --ms: invalid M list '0'"),
])
def test_power_probe_parses_shapes_and_ms_as_the_bench_cli_does(argv, message, capsys):
    with pytest.raises(SystemExit):
        load_tool("power_clock_probe").main(argv)
    assert message in capsys.readouterr().err


def test_power_record_is_steady_and_at_the_cap():
    """The committed run: every window throttled by the power cap all along, and each peer's two rounds within 0.6%
    of each other - the steady state the peers harness's short samples do not reach."""
    rows = json.loads((ROOT / "benchmarks" / "2026-11-27-h100-power-clock-m4096.json").read_text())["results"]
    assert rows and all(r["throttled_share"].get("sw_power_cap") == 1.0 for r in rows)
    by_peer = {}
    for r in rows:
        by_peer.setdefault((r["K"], r["N"], r["peer"]), []).append(r["us_per_call"])
    for times in by_peer.values():
        assert len(times) == 2 and max(times) / min(times) < 1.006
