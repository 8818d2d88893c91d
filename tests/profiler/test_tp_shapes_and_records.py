"""The profiler's tensor-parallel shape sets and the MoE / TP tables of BENCHMARKS.md (CPU only)."""

from __future__ import annotations

import pathlib

import pytest

from mixgemm.bench import cli
from mixgemm.packing import check_weight_shape
from tool_modules import load_tool

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_tp_shapes_are_llama_3_70b_per_rank_gemms():
    hidden, inter, q, kv = 8192, 28672, 64 * 128, 8 * 128
    for w in (2, 4, 8):
        expected = [(hidden, (q + 2 * kv) // w), (q // w, hidden), (hidden, 2 * inter // w), (inter // w, hidden)]
        assert cli.parse_shapes(f"tp{w}") == expected
    assert cli.parse_shapes("tp") == [s for w in (2, 4, 8) for s in cli.parse_shapes(f"tp{w}")]
    for K, N in cli.parse_shapes("tp"):
        check_weight_shape("tp shape", "sm80", K, N, 128)  # every shard runs on the sm80 layout's paths


def test_bench_moe_parses_without_a_gpu():
    args = cli.parse_args(["bench-moe", "--models", "qwen3", "--ms", "1,16"])
    assert args.command == "bench-moe" and args.models == "qwen3" and args.ms == "1,16"


def test_moe_table_of_record():
    table = load_tool("record_moe_tp").moe_table([str(ROOT / "benchmarks" / "2026-11-26-h100-moe-sm90.json")])
    rows = [line for line in table.splitlines()[2:] if line.startswith("|")]
    assert len(rows) == 3 * 8  # three models, eight token counts
    assert "| sm80 layout |" in table.splitlines()[0]  # the run with the sm80-layout peer gets its column
    assert table in (ROOT / "BENCHMARKS.md").read_text()


def test_tp_table_of_record():
    b = ROOT / "benchmarks"
    # Read floors of issue 34's run, M = 16 re-run on 2026-11-27 (its design file holds 8192x28672, a shard too).
    floors = ",".join(str(b / f) for f in ("2026-11-26-h100-tp-shards-floor.json",
                                           "2026-11-27-h100-m8-16-read-floor-design.json",
                                           "2026-11-27-h100-m8-16-read-floor-tp.json"))
    peers = [str(b / "2026-11-26-h100-tp-shards-partial-peers.json"),
                                     str(b / "2026-11-26-h100-tp-shards-peers.json"),
                                     str(b / "2026-11-26-h100-tp-shards-pdl-peers.json"),
                                     str(b / "2026-11-26-h100-tp-m16-64-rule-peers.json"),
                                     str(b / "2026-11-26-h100-bandwidth-split-peers.json"),
                                     str(b / "2026-11-26-h100-sample-floor-peers-first.json"),
                                     str(b / "2026-11-26-h100-sample-floor-peers.json"),
                                     str(b / "2026-11-27-h100-tp-shards-peers.json"),
                                     str(b / "2026-11-27-h100-tp-m1024-x-multicast-peers.json"),
                                     str(b / "2026-11-27-h100-m16-bandwidth-split-tp-peers.json"),
                                     str(b / "2026-11-27-h100-tp-narrow-m128-two-ahead-peers.json"),
                                     str(b / "2026-11-27-h100-tp-narrow-tall-split-peers.json"),
                                     str(b / "2026-11-27-h100-tp-narrow-split-6-peers.json"),
                                     str(b / "2026-11-27-h100-tp-narrow-uneven-split-peers.json"),
                                     str(b / "2026-11-27-h100-tp-narrow-split-6-above-128-rows-peers.json"),
                                     str(b / "2026-11-28-h100-m16-serial-split-tp-peers.json"),
                                     str(b / "2026-11-28-h100-m16-short-k-peers.json")]
    table = load_tool("record_moe_tp").tp_table(floors, peers)
    assert "in 90 of 96 cells" in table
    # The last two runs re-timed M = 16: 2048x8192 and 3584x8192 split serially below 32 Mi elements (1.022x / 1.014x
    # the original Marlin with stream-K before), then 1024x8192 split within one wave (short K; stream-K 0.921x on 2026-11-27,
    # 0.933x in the first of the two).
    assert "| 2048x8192 | 16 | 7.8 | 8.2 ist_marlin[sym] | 0.948 | 1.84x |" in table
    assert "| 3584x8192 | 16 | 9.9 | 10.6 ist_marlin[sym] | 0.941 | 1.66x |" in table
    assert "| 1024x8192 | 16 | 6.0 | 6.7 ist_marlin[sym] | 0.891 | 1.91x |" in table
    # The last run re-timed 8192x1280 and 8192x2560 at M = 128, 256, 512 with the 128 x 128 tile split 6 ways above
    # 128 rows where its splits share the reduction (8192x1280 M = 256: 16.8 us and 1.076x cuBLAS before).
    assert "| 8192x1280 | 256 | 15.0 | 15.2 cublas_fp16 | 0.987 | - |" in table
    # The run before it re-timed the narrow shards at M = 128..1024 with the last of 2-3 splits running 4 k-tiles more
    # (8192x5120 M = 256: 38.2 us beside cuBLAS's 38.2 before, behind by 0.2%), beside cuBLAS and Machete only.
    assert "| 8192x5120 | 256 | 37.2 | 38.3 cublas_fp16 | 0.971 | - |" in table
    # A run before re-timed M = 64 with splits of up to 6 (the last two have no M = 64).
    assert "| 8192x1280 | 64 | 11.7 | 12.6 cublas_fp16 | 0.928 | - |" in table
    # The last run re-timed the split-K shards at M = 16 (7168x8192: behind at 8 splits summed by a second kernel).
    assert "| 7168x8192 | 16 | 15.5 | 16.1 ist_marlin[sym] | 0.960 | 1.34x |" in table
    assert "| 7168x8192 | 1 | 13.1 | 15.9 ist_marlin[sym] | 0.825 | 1.14x |" in table  # M = 1: issue 34's floor
    # A run before re-timed four shards at M = 1024 on the multicast pair, beside cuBLAS and Machete.
    assert "| 4096x8192 | 1024 | 91.5 | 92.5 cublas_fp16 | 0.989 | - |" in table
    assert "| 4096x4096 |" not in table  # a peers run and the later floor file hold DESIGN shapes too: no shards
    # Then the 16- and 32-row tiles as programmatic dependents: three shards at M = 16 and 32 beside the peers (and
    # 8192x28672 M = 16 from the grid file of the same call), and every shard's M = 16 read floor from that call (the
    # design file: 8192x28672).
    floors += "," + ",".join(str(b / f) for f in ("2026-11-28-h100-m8-16-read-floor-dependent-start-design.json",
                                                  "2026-11-28-h100-m16-read-floor-dependent-start-tp.json"))
    dependent_start = [str(b / f"2026-11-28-h100-sm80-dependent-start-{run}-peers.json") for run in ("grid", "tp")]
    table = load_tool("record_moe_tp").tp_table(floors, peers + dependent_start)
    assert "in 91 of 96 cells" in table
    assert "| 1024x8192 | 16 | 4.9 | 6.7 ist_marlin[sym] | 0.734 | 1.49x |" in table
    assert "| 1024x8192 | 32 | 5.4 | 6.5 vllm_marlin[sym] | 0.829 | - |" in table  # 1.008x before
    assert "| 2048x8192 | 32 | 8.4 | 9.0 vllm_marlin[zp] | 0.939 | - |" in table  # 1.058x before
    # 3584x8192 M = 32: its parallel split still launches ordinarily; level with vLLM Marlin (0.998x the run before).
    assert "| 3584x8192 | 32 | 12.6 | 12.6 vllm_marlin[zp] | 1.002 **behind** | - |" in table
    assert "| 8192x28672 | 16 | 50.8 | 52.7 machete[sym] | 0.963 | 1.22x |" in table
    assert "| 7168x8192 | 16 | 15.5 | 16.1 ist_marlin[sym] | 0.960 | 1.23x |" in table  # its M = 16 floor re-run only
    assert "| 4096x4096 |" not in table
    # Then M = 32 on five shards with the 32-row split summed in the kernel as a dependent (the serial split, which
    # `auto` took until the pair's two kernels launched as dependents too).
    table = load_tool("record_moe_tp").tp_table(
        floors, peers + dependent_start + [str(b / "2026-11-28-h100-m32-serial-split-tp-peers.json")])
    assert "in 92 of 96 cells" in table
    assert "| 3584x8192 | 32 | 11.8 | 12.6 vllm_marlin[zp] | 0.938 | - |" in table
    assert "| 8192x5120 | 32 | 16.4 | 19.5 vllm_marlin[zp] | 0.838 | - |" in table  # 0.896 before
    assert "| 4096x4096 |" not in table
    assert table in (ROOT / "BENCHMARKS.md").read_text()
    # The first run of issue 34 (M = 1, 16, 128, 1024, 4096) stays reproducible from its files.
    first = load_tool("record_moe_tp").tp_table(str(b / "2026-11-26-h100-tp-shards-floor.json"),
                                    [str(b / "2026-11-26-h100-tp-shards-tp2-tp4.json"),
                                     str(b / "2026-11-26-h100-tp-shards-tp8.json")])
    assert "in 33 of 56 cells" in first


def test_h200_tp_table_of_record():
    # First without the H200's floor ("-"): the shards are the first peers file's shapes (8192x28672's rows
    # copied in from that day's H200 grid runs; 8192x7168 at M = 1..64 only there). The second file, a later run of
    # 8192x7168 at M = 128..1024 beside cuBLAS and Machete, completes the table; the third re-times the narrow shards
    # at M = 128..1024 with the last of 2-3 splits running 4 k-tiles more; the fourth 8192x1280 and 8192x2560 at
    # M = 128, 256, 512 with the 128 x 128 tile split 6 ways above 128 rows where its splits share the reduction; the
    # fifth 2048x8192 and 3584x8192 at M = 16 with the 16-row tiles split serially below 32 Mi elements.
    runs = [str(ROOT / "benchmarks" / name) for name in ("2026-11-27-h200-tp-shards-peers.json",
                                                          "2026-11-27-h200-tp-8192x7168-m128-1024-peers.json",
                                                          "2026-11-27-h200-tp-narrow-uneven-split-peers.json",
                                                          "2026-11-27-h200-tp-narrow-split-6-above-128-rows-peers.json")]
    assert "in 80 of 96 cells" in load_tool("record_moe_tp").tp_table("-", runs)
    serial_split = str(ROOT / "benchmarks" / "2026-11-28-h200-m16-serial-split-tp-peers.json")
    table = load_tool("record_moe_tp").tp_table("-", runs + [serial_split])
    assert "in 82 of 96 cells" in table
    assert "| 2048x8192 | 16 | 7.6 | 8.1 ist_marlin[sym] | 0.937 | - |" in table  # from the fifth
    # The sixth: 1024x8192 M = 16 with the short-K rule's two splits (stream-K 0.936x in the first file).
    table = load_tool("record_moe_tp").tp_table("-", runs + [serial_split,
                                                 str(ROOT / "benchmarks" / "2026-11-28-h200-m16-short-k-tp-peers.json")])
    assert "in 82 of 96 cells" in table
    assert "| 1024x8192 | 16 | 5.8 | 6.6 ist_marlin[sym] | 0.881 | - |" in table
    assert "| 8192x1280 | 256 | 15.4 | 14.4 cublas_fp16 | 1.073 **behind** | - |" in table  # from the fourth
    assert "| 8192x1280 | 64 | 11.9 | 11.0 cublas_fp16 | 1.076 **behind** | - |" in table  # from the first file
    assert "| 8192x7168 | 512 | 86.2 | 90.5 cublas_fp16 | 0.952 | - |" in table  # from the second
    assert "| 8192x1280 | 1024 | 37.4 | 37.1 cublas_fp16 | 1.008 **behind** | - |" in table  # from the third
    assert "| 8192x28672 | 1024 |" in table
    assert "| 2048x8192 | 32 | 9.5 | 9.1 vllm_marlin[zp] | 1.042 **behind** | - |" in table
    # 2026-11-28: M = 32 on five shards with the 32-row tiles' dependent pair; the short grids' pair at M = 16 / 32
    # (8192x2560, 8192x1280); 2048x8192 M = 32 split 2 ways; those short grids again after the pair's reduction
    # kernel loads its partials in batches, and 8192x2560 after it loads one batch of 8 for every split count.
    later = [str(ROOT / "benchmarks" / f"2026-11-28-h200-{name}-tp-peers.json")
             for name in ("m32-dependent-pair", "narrow-pair", "one-wave-pair", "split-k-reduction-batch",
                          "split-k-reduction-batch-of-8")]
    peers = runs + [serial_split, str(ROOT / "benchmarks" / "2026-11-28-h200-m16-short-k-tp-peers.json")] + later
    table = load_tool("record_moe_tp").tp_table("-", peers)
    assert "in 83 of 96 cells" in table
    assert "| 2048x8192 | 32 | 8.0 | 9.1 vllm_marlin[zp] | 0.883 | - |" in table
    assert "| 8192x2560 | 16 | 8.0 | 13.1 vllm_marlin[zp] | 0.609 | - |" in table  # one batch of 8 (last file)
    assert "| 8192x2560 | 32 | 10.2 | 14.7 vllm_marlin[zp] | 0.693 | - |" in table
    assert "| 8192x1280 | 16 | 6.4 | 10.7 cublas_fp16 | 0.599 | - |" in table
    assert "| 8192x7168 | 32 | 19.4 | 23.5 machete[sym] | 0.824 | - |" in table
    # Then 8192x1280 and 1024x8192 at M = 64 / 128 on the picks of 2026-11-28 (the sm80 32-row tiles at M = 64), and
    # 2048x8192 M = 128 with 128 x 128 split 2 by the fast-DRAM busiest-SM rule.
    peers += [str(ROOT / "benchmarks" / f"2026-11-28-h200-{name}-tp-peers.json")
              for name in ("narrow-m64-128", "busiest-sm-m128")]
    table = load_tool("record_moe_tp").tp_table("-", peers)
    assert "in 85 of 96 cells" in table
    assert "| 8192x1280 | 64 | 9.9 | 11.0 cublas_fp16 | 0.902 | - |" in table
    assert "| 1024x8192 | 64 | 6.8 | 7.0 cublas_fp16 | 0.978 | - |" in table
    assert "| 2048x8192 | 128 | 11.5 | 11.3 cublas_fp16 | 1.014 **behind** | - |" in table
    # The H200's read floor (2026-11-28, a bench run at M = 1 and 16 on the TP shards, with the decode kernel's dense
    # grid numbered split-major and the M <= 2 fast-DRAM rule): the floor column, the same cells and count.
    floors = str(ROOT / "benchmarks" / "2026-11-28-h200-m1-16-read-floor-tp-split-major.json")
    with_floor = load_tool("record_moe_tp").tp_table(floors, peers)
    assert "in 85 of 96 cells" in with_floor
    assert "| 8192x28672 | 1 | 36.0 | 44.6 vllm_marlin[sym] | 0.808 | 1.13x |" in with_floor
    assert "| 1024x8192 | 1 | 3.5 | 5.7 gemlite[sym] | 0.611 | 1.13x |" in with_floor
    assert "| 8192x1280 | 16 | 6.4 | 10.7 cublas_fp16 | 0.599 | 1.78x |" in with_floor
    assert with_floor.count("x |") == 24  # a floor for M = 1 and 16 of all 12 shards, none elsewhere
    body = with_floor.rsplit("\n", 1)[0].strip()  # BENCHMARKS.md states the count in its own sentence
    assert body in (ROOT / "BENCHMARKS.md").read_text()


def test_tp_table_reads_summary_rows_and_skips_our_other_variant(tmp_path):
    import json
    floor = tmp_path / "floor.json"
    floor.write_text(json.dumps({"results": [
        {"K": 64, "N": 128, "M": 1, "peer": "read_floor", "time_us": 2.0},
        {"K": 64, "N": 128, "M": 1, "peer": "mixgemm", "time_us": 3.0}]}))
    runs = tmp_path / "runs.json"  # per-peer rows: mixgemm[sym] is ours, never "the best other peer"
    runs.write_text(json.dumps({"results": [
        {"K": K, "N": 128, "M": 1, "peer": p, "median_us": t, "ok": True}
        for K in (64, 256)  # 256x128 is not a shard of the bench run: left out
        for p, t in (("mixgemm[zp]", 4.0), ("mixgemm[sym]", 1.0), ("machete[zp]", 5.0))]}))
    summary = tmp_path / "summary.json"  # a later run's printed summary of another cell
    summary.write_text(json.dumps({"rows": [
        {"K": 64, "N": 128, "M": 16, "mixgemm_zp_us": 6.0, "best_peer": "ist_marlin[sym]", "best_peer_us": 5.0}]}))
    table = load_tool("record_moe_tp").tp_table(str(floor), [str(runs), str(summary)])
    assert "| 64x128 | 1 | 4.0 | 5.0 machete[zp] | 0.800 | 1.50x |" in table
    assert "| 64x128 | 16 | 6.0 | 5.0 ist_marlin[sym] | 1.200 **behind** | - |" in table
    assert "in 1 of 2 cells" in table and "256x128" not in table
    # A later run of a cell replaces the whole cell (ours and the peers), so a ratio never mixes two runs.
    later = tmp_path / "later.json"
    later.write_text(json.dumps({"rows": [
        {"K": 64, "N": 128, "M": 1, "mixgemm_zp_us": 4.5, "best_peer": "gemlite[zp]", "best_peer_us": 6.0}]}))
    table = load_tool("record_moe_tp").tp_table(str(floor), [str(runs), str(summary), str(later)])
    assert "| 64x128 | 1 | 4.5 | 6.0 gemlite[zp] | 0.750 | 1.50x |" in table


@pytest.mark.parametrize("bad", ["tp3", "tp16"])
def test_unknown_tp_sets_are_shapes_or_errors(bad):
    with pytest.raises(Exception):
        cli.parse_shapes(bad)
