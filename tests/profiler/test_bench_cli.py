"""The profiler without a GPU: argument parsing, metrics, reports and plots, and each subcommand's flow
with the GPU parts (peer construction, timing) replaced by fakes."""

from __future__ import annotations

import csv
import json
import math
import statistics

import pytest
import torch

from mixgemm import device, tuning_cache
from mixgemm.bench import cli, metrics, peers, report, timing
from mixgemm.kernel_key import KernelKey
from mixgemm.paths import PATHS, DecodeConfig, DequantConfig, GemmProblem, Gpu, Sm80Config, Sm90Config, base, sm80


def _parse_error(capsys, argv) -> str:
    with pytest.raises(SystemExit) as info:
        cli.parse_args(argv)
    assert info.value.code == 2
    return capsys.readouterr().err


# ---------------------------------------------------------------------------------------------------
# Argument parsing


def test_bench_defaults_are_design_protocol():
    args = cli.parse_args(["bench"])
    assert args.shapes == list(cli.DESIGN_SHAPES)
    assert args.m == [1, 8, 16, 32, 64, 128, 256, 512, 1024, 4096]
    assert args.peers == ["mixgemm", "mixgemm_sm80", "vllm_style", "vllm_dequant_matmul", "cublas_fp16", "cutlass2_fp16",
                          "torch_int4"]
    assert (args.group_size, args.dtype, args.config, args.reps) == (128, "fp16", "auto", 7)
    assert str(args.out) == "mixgemm-bench"


def test_bench_quick_and_explicit_lists():
    args = cli.parse_args(["bench", "--shapes", "quick"])
    assert args.shapes == [(4096, 4096), (8192, 28672)] and args.m == [1, 16, 128, 4096]
    args = cli.parse_args(["bench", "--shapes", "1024x2048, 4096X4096", "--m", "1,3", "--peers", "mixgemm,cublas_fp16",
                           "--dtype", "bf16", "--group-size", "64", "--out", "runs/x", "--read-bw", "2.5"])
    assert args.shapes == [(1024, 2048), (4096, 4096)] and args.m == [1, 3]
    assert args.peers == ["mixgemm", "cublas_fp16"] and args.dtype == "bf16" and args.group_size == 64
    assert str(args.out) == "runs/x" and args.read_bw == 2.5


@pytest.mark.parametrize("bad", ["4096", "4096x", "x4096", "4096x4096x2", "0x4096", "-64x64", "abcx64", "4096*4096"])
def test_bad_shape_is_a_clear_argparse_error(capsys, bad):
    # "--opt=value" so that "-64x64" is not taken for an option.
    err = _parse_error(capsys, ["bench", f"--shapes={bad}"])
    assert "argument --shapes" in err and "expected KxN" in err
    err = _parse_error(capsys, ["sweep", f"--shape={bad}"])
    assert "argument --shape" in err and "expected KxN" in err


def test_shape_rules_are_checked_after_parsing(capsys):
    # A shape is checked as prepack checks a weight (packing.check_weight_shape): the layout holds it and some
    # kernel path runs it.
    err = _parse_error(capsys, ["bench", "--shapes", "4096x100"])
    assert "python -m mixgemm bench: error" in err and "multiple of 64" in err
    err = _parse_error(capsys, ["tune", "--shape", "4160x64"])
    assert "python -m mixgemm tune: error" in err and "--group-size 128" in err
    assert "group_size must be a positive divisor of K = 4160, got 128" in err
    err = _parse_error(capsys, ["dequant", "--shape", "4096x4096", "--group-size", "100"])
    assert "--group-size 100" in err and "group_size must be a positive divisor of K = 4096, got 100" in err
    err = _parse_error(capsys, ["bench", "--shapes", "4096x4096", "--group-size", "8"])
    assert "no kernel path runs a weight of K = 4096, N = 4096, group_size = 8" in err
    assert "dequant path: group_size must be a multiple of 16" in err
    err = _parse_error(capsys, ["sweep", "--shape", "4100x64"])
    assert "must be a positive multiple of 16 for the sm80 layout, got 4100" in err
    assert "--group-size must be a positive integer, got 0" in _parse_error(capsys, ["bench", "--group-size", "0"])


def test_shapes_only_the_dequant_path_runs_are_accepted():
    # What prepack accepts, the profiler does: K = 80 and groups of 16 run on the dequant path only.
    assert cli.parse_args(["bench", "--shapes", "80x64", "--group-size", "16"]).shapes == [(80, 64)]
    assert cli.parse_args(["sweep", "--shape", "4096x4096", "--group-size", "16"]).group_size == 16


@pytest.mark.parametrize("argv, text", [
    (["bench", "--m", "1,0"], "invalid M list"),
    (["bench", "--m", "1,,2"], "invalid M list"),
    (["bench", "--peers", "mixgemm,marlin"], "unknown peer"),
    (["bench", "--reps", "5"], ">= 7"),
    (["bench", "--dtype", "fp32"], "invalid choice"),
    (["bench", "--peak-tflops", "0"], "positive number"),
    (["bench", "--config", "16x128"], "invalid config"),
    (["sweep"], "--shape"),
    ([], "required"),
])
def test_other_argument_errors(capsys, argv, text):
    assert text in _parse_error(capsys, argv)


def test_dequant_sweep_tune_arguments(tmp_path):
    args = cli.parse_args(["dequant"])
    assert args.command == "dequant" and args.shape == (8192, 28672)
    args = cli.parse_args(["sweep", "--shape", "4096x11008", "--m", "1,16", "--group-size", "64", "--no-plots"])
    assert (args.shape, args.m, args.group_size, args.no_plots) == ((4096, 11008), [1, 16], 64, True)
    args = cli.parse_args(["sweep", "--shape", "4096x4096"])
    assert args.m == list(cli.DESIGN_MS)
    args = cli.parse_args(["tune", "--shape", "4096x4096", "--m", "1", "--cache", str(tmp_path / "t.json")])
    assert args.cache == tmp_path / "t.json"
    assert cli.parse_args(["tune", "--shape", "4096x4096"]).cache is None


def test_layout_arguments(capsys):
    assert cli.parse_args(["sweep", "--shape", "4096x4096"]).layout == "all"
    assert cli.parse_args(["tune", "--shape", "4096x4096"]).layout == "auto"
    for command in ("sweep", "tune"):
        for layout in ("auto", "sm80", "sm90", "all"):
            assert cli.parse_args([command, "--shape", "4096x4096", "--layout", layout]).layout == layout
        err = _parse_error(capsys, [command, "--shape", "4096x4096", "--layout", "sm91"])
        assert "argument --layout: invalid choice: 'sm91'" in err
    assert "unrecognized arguments: --layout" in _parse_error(capsys, ["bench", "--layout", "sm80"])


@pytest.mark.parametrize("own, choice, expected", [
    ("sm80", "auto", ["sm80"]), ("sm80", "all", ["sm80"]), ("sm80", "sm80", ["sm80"]), ("sm80", "sm90", ["sm90"]),
    ("sm90", "auto", ["sm90"]), ("sm90", "all", ["sm80", "sm90"]), ("sm90", "sm80", ["sm80"]),
    ("sm90", "sm90", ["sm90"]),
])
def test_sweep_layouts(monkeypatch, own, choice, expected):
    asked = []
    monkeypatch.setattr(peers, "auto_layout", lambda K, N, G, dtype: asked.append((K, N, G, dtype)) or own)
    assert cli.sweep_layouts(choice, 4096, 11008, 128, torch.float16) == expected
    assert asked == [(4096, 11008, 128, torch.float16)]  # the GPU's own layout, for this shape


def test_mixgemm_sm80_peer(monkeypatch):
    built = []
    monkeypatch.setattr(peers, "mixgemm_peer", lambda *args, **kwargs: built.append((args, kwargs)) or ["closure"])
    monkeypatch.setattr(peers, "auto_layout", lambda K, N, G, dtype: "sm80")
    with pytest.raises(peers.PeerUnavailable, match="prepack's auto layout is sm80 on this GPU: the same as mixgemm"):
        peers.mixgemm_sm80_peer(1, 4096, 4096, 128, torch.float16, 3)
    assert peers.build("mixgemm_sm80", 1, 4096, 4096, 128, torch.float16, 3) == (
        None, "prepack's auto layout is sm80 on this GPU: the same as mixgemm")
    monkeypatch.setattr(peers, "auto_layout", lambda K, N, G, dtype: "sm90")
    assert peers.mixgemm_sm80_peer(16, 4096, 11008, 128, torch.float16, 3) == ["closure"]
    assert built == [((16, 4096, 11008, 128, torch.float16, 3), {"layout": "sm80"})]  # (M, N, K, ...) as given
    assert cli.PEER_NAMES.index("mixgemm_sm80") == cli.PEER_NAMES.index("mixgemm") + 1
    assert set(peers.PEERS) == set(cli.PEER_NAMES + cli.YARDSTICK_NAMES)


A100 = Gpu("NVIDIA A100-SXM4-80GB", 108, (8, 0))
H100 = Gpu("NVIDIA H100 80GB HBM3", 132, (9, 0))


def test_config_names_round_trip():
    # Every case a sweep of this build times has a name the --config flag parses back to it.
    named = 0
    for layout in ("sm80", "sm90"):
        for M in (1, 64):
            for config in cli.sweep_cases(4096, 4096, 128, M, KernelKey(layout=layout), H100):
                assert cli.parse_config(config.name) == config
                named += 1
    assert named > 0
    assert cli.parse_config("auto") == "auto"
    assert cli.parse_config("decode") == "decode"  # a path's name: its heuristic's choice
    args = cli.parse_args(["bench", "--config", "16x128x64_w16x32x64_s4_k4p"])
    assert args.config == Sm80Config(16, 128, 64, 16, 32, 64, 4, 4, "parallel")
    assert cli.parse_args(["bench", "--config", "decode_m8_w4_k2s"]).config == DecodeConfig(8, 4, 2)
    assert cli.parse_args(["bench", "--config", "dequant_cublas"]).config == DequantConfig()


# A hand-made build for the sweep's composition: one sm80 tile, one decode kernel (both layouts), a persistent and
# a stream-K sm90 kernel (the sm90 layout); sm80 tiles are not compiled for the sm90 layout here.
SM80 = Sm80Config(64, 128, 64, 64, 32, 64, 4)
DECODE_M8 = DecodeConfig(8, 4)
SM90_PERSISTENT = Sm90Config(128, 64, 1, 1, "pingpong", "persistent")
SM90_STREAM_K = Sm90Config(64, 128, 1, 1, "coop", "streamk")


def registry(configs, sm90_layout_tiles=()):
    """A stand-in for ``paths.base._compiled_configs(path, key)``: the configs of ``path`` among ``configs``, for
    every key of a layout the path reads; the sm80 path's on the sm90 layout only for ``sm90_layout_tiles``."""
    def compiled(path, key):
        return tuple(c for c in configs if c.path == path.name and key.layout in path.layouts
                     and (c.path != "sm80" or key.layout == "sm80" or c.kernel_name in sm90_layout_tiles))
    return compiled


@pytest.fixture
def hand_build(monkeypatch):
    monkeypatch.setattr(base, "_compiled_configs", registry((SM80, DECODE_M8, SM90_PERSISTENT, SM90_STREAM_K)))


def _splits(cases, config):
    """(split_k, mode) of each case of ``config``'s kernel, in the sweep's order."""
    return [(c.split_k, c.split_k_mode) for c in cases if c.path == config.path and c.kernel_name == config.kernel_name]


def test_sweep_splits_respect_k(hand_build):
    # No split past one k-tile per split: at K = 64 nothing splits K (stream-K grids share the tiles instead).
    cases = cli.sweep_cases(64, 4096, 64, 1, KernelKey(), H100)
    assert [(k, mode) for k, mode in _splits(cases, SM80) if mode != "streamk"] == [(1, "none")]
    assert _splits(cases, DECODE_M8) == [(1, "none")]
    cases = cli.sweep_cases(256, 4096, 128, 1, KernelKey(), H100)
    assert [(k, mode) for k, mode in _splits(cases, SM80) if mode != "streamk"] == [
        (1, "none"), (2, "serial"), (2, "parallel"), (4, "serial"), (4, "parallel")]
    assert _splits(cases, DECODE_M8) == [(1, "none"), (2, "serial"), (4, "serial")]  # in-kernel (serial) only
    cases = cli.sweep_cases(4096, 4096, 128, 1, KernelKey(), H100)
    assert [k for k, mode in _splits(cases, SM80) if mode != "streamk"] == [1, 2, 2, 4, 4, 8, 8, 16, 16]
    assert _splits(cases, DequantConfig()) == [(1, "none")]  # one cuBLAS GEMM, never split
    assert PATHS["dequant"].split_variants(DequantConfig(), GemmProblem(1, 4096, 4096, 128), H100) == [DequantConfig()]


def test_sweep_adds_stream_k_grids_for_the_sm80_path(hand_build):
    # 1..4 blocks per SM of the GPU, where the problem has a unit of work for every block.
    cases = cli.sweep_cases(4096, 4096, 128, 64, KernelKey(), A100)
    assert [k for k, mode in _splits(cases, SM80) if mode == "streamk"] == [108, 216, 324, 432]
    assert all(mode != "streamk" for _, mode in _splits(cases, DECODE_M8))
    # 64 x 4096 x 64: 32 tiles of one k-tile each, so only the grids of at most 32 blocks.
    few_units = cli.sweep_cases(64, 4096, 64, 64, KernelKey(), Gpu("small", 8, (8, 0)))
    assert [k for k, mode in _splits(few_units, SM80) if mode == "streamk"] == [8, 16, 24, 32]
    assert SM80.stream_k_units(64, 4096, 64) == 32


def test_sweep_cases_keep_to_the_paths_that_run_the_problem(hand_build):
    # Each layout's paths only, each config only where it fits: decode up to its 8 rows, an sm90 config only where
    # its weight tile divides N, the dequant path everywhere.
    def paths_of(cases):
        return {c.path for c in cases}

    assert paths_of(cli.sweep_cases(1024, 1088, 64, 1, KernelKey(), H100)) == {"sm80", "decode", "dequant"}
    assert paths_of(cli.sweep_cases(1024, 1088, 64, 9, KernelKey(), H100)) == {"sm80", "dequant"}
    sm90 = cli.sweep_cases(1024, 1088, 64, 64, KernelKey(layout="sm90"), H100)
    assert paths_of(sm90) == {"sm90", "dequant"}  # no sm80 tile compiled for the layout; 64 rows: no decode
    assert {c.kernel_name for c in sm90 if c.path == "sm90"} == {SM90_PERSISTENT.kernel_name}  # 128 misses 1088
    # A shape only the dequant path runs (K = 80: no 64-deep k-tile).
    assert cli.sweep_cases(80, 1024, 16, 4, KernelKey(), H100) == [DequantConfig()]


def test_sweep_of_sm90_configs_splits_stream_k_only(hand_build):
    # A persistent sm90 config never splits K; stream-K configs split serially, every way up to 6
    # (paths.sm90.MAX_SPLIT_K: each split the heuristic can pick), and never past one k-tile per split; from 3 ways
    # with the reduce-scatter too, where the splits fit one wave (8 tiles here: all of them).
    from mixgemm.paths import sm90

    cases = cli.sweep_cases(1024, 1024, 128, 64, KernelKey(layout="sm90"), H100)
    assert _splits(cases, SM90_PERSISTENT) == [(1, "none")]
    assert _splits(cases, SM90_STREAM_K) == ([(1, "none")] + [(k, "serial") for k in range(2, 7)]
                                             + [(k, "reduce_scatter") for k in range(3, 7)])
    assert sm90.MAX_SPLIT_K == 6
    assert _splits(cli.sweep_cases(128, 1024, 128, 64, KernelKey(layout="sm90"), H100), SM90_STREAM_K) == [
        (1, "none"), (2, "serial")]


# ---------------------------------------------------------------------------------------------------
# Metrics and the copy count


def test_metrics_hand_computed():
    M, N, K, G = 16, 4096, 4096, 128
    # int4 weights 4096*4096/2, scales+offsets 2 tensors x 2 B x 32 x 4096, x and y 2 B x 16 x 4096 each.
    expected_bytes = 8_388_608 + 524_288 + 131_072 + 131_072
    assert metrics.gemm_bytes(M, N, K, G) == expected_bytes == 9_175_040
    assert metrics.gemm_flops(M, N, K) == 2 * 16 * 4096 * 4096 == 536_870_912
    problem = metrics.Problem(M, N, K, G)
    # Bandwidth bound: 9.175 MB / 3.0 TB/s = 3.0583 us > 0.767 us of compute at 700 TFLOP/s.
    assert problem.floor_us == pytest.approx(9_175_040 / 3.0e12 * 1e6)
    assert problem.floor_us == pytest.approx(3.05835, rel=1e-5)
    rates = problem.rates(2 * problem.floor_us)
    assert rates.pct_of_floor == pytest.approx(50.0)
    assert rates.gbps == pytest.approx(1500.0)
    assert rates.tflops == pytest.approx(536_870_912 / (2 * problem.floor_us * 1e-6) / 1e12)
    assert problem.weight_bytes == 8_388_608 + 524_288


def test_metrics_compute_bound_and_ceiling_override():
    problem = metrics.Problem(4096, 28672, 8192, 128)
    assert problem.floor_us == pytest.approx(2 * 4096 * 28672 * 8192 / 700e12 * 1e6)  # ~2749 us
    slow_memory = metrics.Problem(1, 4096, 4096, 128, metrics.Ceilings(read_bw_tbs=1.5))
    assert slow_memory.floor_us == pytest.approx(2 * metrics.Problem(1, 4096, 4096, 128).floor_us)
    with pytest.raises(ValueError):
        metrics.Ceilings(read_bw_tbs=0)
    with pytest.raises(ValueError):
        metrics.rates(0.0, 1, 1, 1.0)


def test_copies_exceed_256_mb():
    assert timing.copies_for(8_912_896) == 31  # one 4096x4096 int4 weight: 31 x 8.9 MB > 256 MB
    assert timing.copies_for(64 << 20) == 5  # 4 x 64 MB is exactly 256 MB, not more
    assert timing.copies_for(300 << 20) == 1
    assert timing.copies_for(1) == timing.MAX_COPIES
    for size in (1 << 20, 3_000_000, 100 << 20):
        assert timing.copies_for(size) * size > 256 << 20
    with pytest.raises(ValueError):
        timing.copies_for(0)


# ---------------------------------------------------------------------------------------------------
# Reports and plots from fake timings


def _fake_bench_records():
    records = []
    for M, times in ((1, {"mixgemm": 4.0, "vllm_style": 20.0, "cublas_fp16": 14.0}),
                     (16, {"mixgemm": 5.0, "vllm_style": 30.0, "cublas_fp16": 15.0})):
        problem = metrics.Problem(M, 4096, 4096, 128)
        for peer, t in times.items():
            rates = problem.rates(t)
            config = "16x256x64_w16x64x64_s3_k16p" if peer == "mixgemm" else None
            records.append({"K": 4096, "N": 4096, "M": M, "G": 128, "dtype": "fp16", "peer": peer, "status": "ok",
                            "config": config, "time_us": t, "tflops": rates.tflops, "gbps": rates.gbps,
                            "pct_floor": rates.pct_of_floor, "floor_us": problem.floor_us, "samples_us": [t] * 7})
        records.append({"K": 4096, "N": 4096, "M": M, "G": 128, "dtype": "fp16", "peer": "torch_int4",
                        "status": "unavailable", "time_us": None, "reason": "no int4 here", "max_us": math.nan})
    return records


def test_table_and_speedups():
    records = _fake_bench_records()
    report.add_speedups(records)
    by = {(r["M"], r["peer"]): r for r in records}
    assert by[(1, "mixgemm")]["speedup"] == 1.0
    assert by[(1, "vllm_style")]["speedup"] == pytest.approx(5.0)
    assert by[(16, "cublas_fp16")]["speedup"] == pytest.approx(3.0)
    assert by[(16, "torch_int4")]["speedup"] is None
    table = report.format_table(records)
    lines = table.splitlines()
    assert lines[0].split() == ["K", "x", "N", "M", "peer", "config", "us", "TFLOP/s", "GB/s", "%", "floor",
                                "mixgemm", "speedup"]
    assert set(lines[1]) <= {"-", " "}
    assert "" in lines  # a blank line between the M = 1 and M = 16 blocks
    ours = next(line for line in lines if " mixgemm " in line and line.split()[1] == "1")
    assert ours.split()[2:4] == ["mixgemm", "16x256x64_w16x64x64_s3_k16p"]  # the config column, after peer
    vllm = next(line for line in lines if " vllm_style " in line and line.split()[1] == "1")
    assert vllm.split()[0] == "4096x4096" and vllm.endswith("5.00x") and "20.00" in vllm
    unavailable = next(line for line in lines if "torch_int4" in line)
    assert "n/a" in unavailable
    # Fixed width: every data row is as wide as the header or narrower only by stripped trailing blanks.
    assert max(len(line) for line in lines) == len(lines[1])


def test_json_and_csv_writers(tmp_path):
    records = _fake_bench_records()
    report.add_speedups(records)
    json_path = report.write_json(tmp_path / "sub" / "bench.json", records, {"gpu": "fake", "nan": math.nan})
    data = json.loads(json_path.read_text())  # strict JSON: NaN was written as null
    assert data["meta"] == {"gpu": "fake", "nan": None}
    assert len(data["results"]) == len(records)
    assert data["results"][0]["samples_us"] == [4.0] * 7
    assert data["results"][3]["max_us"] is None
    csv_path = report.write_csv(tmp_path / "bench.csv", records)
    rows = list(csv.DictReader(csv_path.open()))
    assert len(rows) == len(records)
    assert list(rows[0])[:6] == ["K", "N", "M", "G", "dtype", "peer"]
    assert "samples_us" not in rows[0]  # lists stay in the JSON
    assert float(rows[1]["time_us"]) == 20.0 and rows[3]["time_us"] == "" and rows[3]["reason"] == "no int4 here"


def _fake_sweep_records():
    records = []
    for M in (1, 16, 128, 4096):
        for stages in (3, 4):
            for split_k in (1, 2, 4):
                for mode in (("none",) if split_k == 1 else ("serial", "parallel")):
                    for tile_m in (16, 64):
                        config = Sm80Config(tile_m, 128, 64, 16, 32, 64, stages).with_split_k(split_k, mode)
                        t = 10.0 * M ** 0.5 / split_k + stages + tile_m / 16 + (mode == "parallel")
                        records.append({"K": 4096, "N": 4096, "M": M, "peer": "mixgemm", "status": "ok",
                                        "config": config.name, "tile": config.with_split_k(1).name,
                                        "stages": stages, "split_k": split_k, "split_k_mode": mode, "time_us": t})
        records.append({"K": 4096, "N": 4096, "M": M, "peer": "mixgemm:auto", "status": "ok", "config": "x",
                        "time_us": 12.0 * M ** 0.5})
    records.append({"K": 4096, "N": 4096, "M": 1, "peer": "mixgemm", "status": "error", "time_us": None,
                    "stages": 5, "split_k": 16})
    return records


def _assert_png(path):
    assert path.is_file() and path.stat().st_size > 1000
    assert path.read_bytes()[:4] == b"\x89PNG"


def test_plots_from_fake_timings(tmp_path):
    records = _fake_sweep_records()
    line = report.plot_time_vs_m(records, tmp_path / "plots" / "time_vs_m.png", "fake 4096x4096")
    heat = report.plot_stages_splitk_heatmap(records, tmp_path / "plots" / "heat.png", "fake 4096x4096")
    _assert_png(line)
    _assert_png(heat)


def test_heatmap_needs_sweep_records(tmp_path):
    with pytest.raises(ValueError, match="no timed sweep records"):
        report.plot_stages_splitk_heatmap(_fake_bench_records(), tmp_path / "h.png")


# ---------------------------------------------------------------------------------------------------
# Subcommand flows on CPU: the peers and the timer are fakes, everything else is the real code.


class _FakeGPU:
    """Stands in for peers.build and timing.time_fn: each case 'runs' in a time given by a formula.

    By default it is no Hopper: prepack's auto layout is sm80, so the mixgemm_sm80 peer (ours on the sm80
    layout where the GPU's own layout is another) does not apply, as peers.mixgemm_sm80_peer says."""

    def __init__(self, unavailable=("torch_int4",), layout="sm80"):
        self.unavailable = set(unavailable)
        self.layout = layout  # what peers.auto_layout answers
        self.built = []

    def auto_layout(self, K, N, G, dtype):
        return self.layout

    def build(self, name, M, N, K, G, dtype, copies, **options):
        self.built.append((name, M, options.get("config")))
        if name in self.unavailable:
            return None, "fake: not on this machine"
        if name == "mixgemm_sm80" and self.layout == "sm80":
            return None, "fake: auto layout is sm80"
        closures = peers.Closures([lambda: None] * copies)
        if name in ("mixgemm", "mixgemm_sm80"):
            layout = "sm80" if name == "mixgemm_sm80" else options.get("layout", "auto")
            layout = self.layout if layout == "auto" else layout
            self.layouts.append(layout)
            config = options.get("config", "auto")
            config = self.AUTO[layout] if config == "auto" else config
            assert layout in PATHS[config.path].layouts, (layout, config)  # a weight runs only its layout's paths
            closures.config = config.name
            closures.fake_us = self.mixgemm_us(M, config)
        else:
            closures.fake_us = {"vllm_style": 30.0}.get(name, 15.0) + 0.01 * M
        return closures, None

    layouts: list  # the layout of each mixgemm case built (set per instance in the fixture)
    # What the fake "auto" picks per weight layout, like the heuristic would: a 16-row tile, no split.
    AUTO = {"sm80": Sm80Config(16, 128, 64, 16, 32, 64, 4), "sm90": Sm90Config(128, 64, 1, 1, "pingpong",
                                                                                 "persistent")}
    SM_COUNT = 2  # the sweep's stream-K grids: 2, 4, 6 and 8 blocks
    # The kernel set the fake GPU "compiled" (sm80 tiles of the minimal set of cpp/generator/kernel_sets.py).
    CONFIGS = (AUTO["sm80"], Sm80Config(64, 128, 64, 32, 64, 64, 4), Sm80Config(128, 128, 64, 64, 64, 64, 3))
    DEQUANT_US = 40.0  # the dequant path (always compiled): slower than every kernel at these M

    @staticmethod
    def mixgemm_us(M, config):
        # Padded rows and tiles cost time, split-K helps, parallel mode pays for its reduction: the
        # winner is the 16-row tile at M = 1 and the 64-row tile at M = 64, both with split-K 16 serial.
        if config.path == "dequant":
            return _FakeGPU.DEQUANT_US + 0.01 * M
        rows = config.rows if config.path == "decode" else config.tile_m
        tiles = math.ceil(M / rows)
        # Stream-K grids cost what no split does.
        split = 1 if config.split_k_mode == "streamk" else config.split_k
        return (5.0 + tiles * rows / 16 + 2 * tiles + 8.0 / split
                + (config.split_k_mode == "parallel"))

    @staticmethod
    def time_fn(closures, copies=None, warmup=2, reps=7, use_graph=True):
        t = closures.fake_us
        return timing.Timing(t, t * 0.98, t * 1.05, [t] * reps, len(closures), use_graph, None)


def fake_device(monkeypatch):
    """The GPU the sweep reads its facts of (mixgemm.device.facts): the fake's name and SM count."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: "Fake GPU")
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(device, "facts", lambda fn, dev: Gpu("Fake GPU", _FakeGPU.SM_COUNT, (9, 0)))


@pytest.fixture
def fake_gpu(monkeypatch, tmp_path):
    fake = _FakeGPU()
    fake.layouts = []
    monkeypatch.setattr(peers, "build", fake.build)
    monkeypatch.setattr(peers, "auto_layout", fake.auto_layout)
    monkeypatch.setattr(timing, "time_fn", fake.time_fn)
    fake_device(monkeypatch)
    monkeypatch.setenv("MIXGEMM_CACHE", str(tmp_path / "cache" / "tuned.json"))
    # A fixed kernel set (every path's compiled configs, per kernel key), so the fake timings have the same
    # winners whichever set this build compiled.
    fake.configs = list(_FakeGPU.CONFIGS)
    monkeypatch.setattr(base, "_compiled_configs", lambda path, key: registry(fake.configs)(path, key))
    return fake


def test_bench_flow(fake_gpu, tmp_path, capsys):
    out = tmp_path / "bench"
    assert cli.main(["bench", "--shapes", "1024x1024", "--m", "1,16", "--out", str(out)]) == 0
    data = json.loads((out / "bench.json").read_text())
    assert data["meta"]["gpu"] == "Fake GPU" and data["meta"]["protocol"]["reps"] == 7
    results = data["results"]
    assert len(results) == 2 * 7
    assert [r["peer"] for r in results[:7]] == list(cli.PEER_NAMES)
    ok = {(r["M"], r["peer"]): r for r in results if r["status"] == "ok"}
    assert set(p for _, p in ok) == {"mixgemm", "vllm_style", "vllm_dequant_matmul", "cublas_fp16", "cutlass2_fp16"}
    assert ok[(1, "mixgemm")]["config"] == "16x128x64_w16x32x64_s4"
    assert ok[(1, "mixgemm")]["time_us"] == _FakeGPU.mixgemm_us(1, _FakeGPU.AUTO["sm80"]) == 16.0
    assert ok[(1, "vllm_style")]["speedup"] == pytest.approx(30.01 / 16.0)
    assert ok[(16, "cublas_fp16")]["pct_floor"] == pytest.approx(
        100 * metrics.Problem(16, 1024, 1024, 128).floor_us / 15.16)
    skipped = [r for r in results if r["peer"] == "torch_int4"]
    assert all(r["status"] == "unavailable" and r["reason"] == "fake: not on this machine" for r in skipped)
    sm80 = [r for r in results if r["peer"] == "mixgemm_sm80"]
    assert len(sm80) == 2 and all(r["status"] == "unavailable" and r["reason"] == "fake: auto layout is sm80"
                                  for r in sm80)
    assert len(list(csv.DictReader((out / "bench.csv").open()))) == 14
    printed = capsys.readouterr().out.rstrip().splitlines()
    assert printed[-1].split()[:3] == ["1024x1024", "16", "torch_int4"]  # the table is printed last
    assert any("torch_int4: fake: not on this machine" in line for line in printed)


def test_bench_rounds_interleave_the_peers(fake_gpu, tmp_path, monkeypatch):
    # Every call runs "hotter" than the one before (a clock drifting down): one peer after another per
    # round, each peer built once, and each reports the median of its rounds.
    order = []

    def drifting(closures, copies=None, warmup=2, reps=7, use_graph=True):
        order.append(closures.fake_us)
        t = closures.fake_us * (1 + 0.01 * len(order))
        return timing.Timing(t, t, t, [t] * reps, len(closures), use_graph, None)

    monkeypatch.setattr(timing, "time_fn", drifting)
    out = tmp_path / "rounds"
    assert cli.main(["bench", "--shapes", "1024x1024", "--m", "16", "--peers", "mixgemm,cublas_fp16,torch_int4",
                     "--rounds", "3", "--out", str(out)]) == 0
    ours, cublas = _FakeGPU.mixgemm_us(16, _FakeGPU.AUTO["sm80"]), 15.0 + 0.01 * 16
    assert order == [ours, cublas] * 3  # interleaved; the unavailable peer never runs
    assert [name for name, _, _ in fake_gpu.built] == ["mixgemm", "cublas_fp16", "torch_int4"]  # built once each
    data = json.loads((out / "bench.json").read_text())
    assert data["meta"]["protocol"]["interleaved_rounds"] == 3
    by_peer = {r["peer"]: r for r in data["results"]}
    assert by_peer["mixgemm"]["round_medians_us"] == pytest.approx([ours * 1.01, ours * 1.03, ours * 1.05])
    assert by_peer["mixgemm"]["time_us"] == pytest.approx(ours * 1.03)  # the median round
    assert by_peer["cublas_fp16"]["time_us"] == pytest.approx(cublas * 1.04)
    assert by_peer["torch_int4"]["status"] == "unavailable"
    with pytest.raises(SystemExit):
        cli.parse_args(["bench", "--rounds", "0"])


def test_bench_passes_a_fixed_config(fake_gpu, tmp_path):
    name = "16x128x64_w16x32x64_s4_k2s"
    cli.main(["bench", "--shapes", "1024x1024", "--m", "1", "--peers", "mixgemm", "--config", name,
              "--out", str(tmp_path)])
    assert [c.name for n, _, c in fake_gpu.built if n == "mixgemm"] == [name]


def test_sweep_flow(fake_gpu, tmp_path, capsys):
    out = tmp_path / "sweep"
    assert cli.main(["sweep", "--shape", "1024x1024", "--m", "1,64", "--out", str(out)]) == 0
    results = json.loads((out / "sweep.json").read_text())["results"]
    # Per M: auto, then each sm80 tile unsplit, split-K 2..16 in both modes and stream-K over 2..8 blocks, and
    # the dequant path (no decode kernel in this build).
    variants = len(_FakeGPU.CONFIGS) * (1 + 2 * 4 + 4) + 1
    assert [r["peer"] for r in results] == (["mixgemm:auto"] + ["mixgemm"] * variants) * 2
    gpu = Gpu("Fake GPU", _FakeGPU.SM_COUNT, (9, 0))
    for M in (1, 64):  # the cases are cli.sweep_cases's, in its order
        assert [r["config"] for r in results if r["M"] == M and r["peer"] == "mixgemm"] == [
            c.name for c in cli.sweep_cases(1024, 1024, 128, M, KernelKey(), gpu)]
    assert {r["path"] for r in results if r["peer"] == "mixgemm"} == {"sm80", "dequant"}
    # Split-K 1..16, and stream-K over 1..4 blocks per SM of the fake's two.
    assert {r["split_k"] for r in results if r["peer"] == "mixgemm"} == {1, 2, 4, 6, 8, 16}
    modes = {r["split_k_mode"] for r in results if r["peer"] == "mixgemm"}
    assert modes == {"none", "serial", "parallel", "streamk"}
    assert "16x128x64_w16x32x64_s4_sk6" in {r["config"] for r in results if r["peer"] == "mixgemm"}
    assert (out / "sweep.csv").stat().st_size > 0
    _assert_png(out / "sweep_time_vs_m.png")
    _assert_png(out / "sweep_stages_splitk.png")
    printed = capsys.readouterr().out
    assert "16x128x64_w16x32x64_s4_k16s" in printed  # the fake's winner at M = 1 heads the table


def test_sweep_times_each_layouts_first_case_twice_and_keeps_the_second(fake_gpu, monkeypatch, tmp_path):
    # The first timing after a layout's weight copies are made is thrown away: here it reads 10% high, as the
    # H100 sweep's did, and must reach no record.
    timed = []

    def first_one_high(closures, copies=None, warmup=2, reps=7, use_graph=True):
        t = closures.fake_us * (1.1 if not timed else 1.0)
        timed.append(closures.config)
        return timing.Timing(t, t, t, [t] * reps, len(closures), use_graph, None)

    monkeypatch.setattr(timing, "time_fn", first_one_high)
    out = tmp_path / "sweep"
    assert cli.main(["sweep", "--shape", "1024x1024", "--m", "1,64", "--no-plots", "--out", str(out)]) == 0
    results = json.loads((out / "sweep.json").read_text())["results"]
    assert len(timed) == len(results) + 1  # one layout (sm80): one throwaway timing, of the first case
    assert timed[0] == timed[1] == results[0]["config"]
    assert results[0]["peer"] == "mixgemm:auto"
    assert results[0]["time_us"] == pytest.approx(_FakeGPU.mixgemm_us(1, _FakeGPU.AUTO["sm80"]))


def test_tune_flow_fills_the_cache_that_auto_reads(fake_gpu, tmp_path, capsys):
    cache = tmp_path / "my-cache.json"
    assert cli.main(["tune", "--shape", "1024x1024", "--m", "1,16,64", "--no-plots", "--cache", str(cache),
                     "--out", str(tmp_path / "t")]) == 0
    assert (tmp_path / "t" / "tune.json").is_file()
    entries = tuning_cache.load_cache(cache)
    assert len(entries) == 3
    # Filed under the kernel key of the sweep's weights: int4 with zero points, the GPU's own layout.
    assert all(key.endswith("|fp16-int4-sm80-scale_offset") for key in entries)
    best_m1 = tuning_cache.lookup("Fake GPU", 1, 1024, 1024, 128, KernelKey(), path=cache)
    assert best_m1 == Sm80Config(16, 128, 64, 16, 32, 64, 4, 16, "serial")
    best_m64 = tuning_cache.lookup("Fake GPU", 64, 1024, 1024, 128, KernelKey.of(torch.float16), path=cache)
    assert best_m64.tile_m == 64 and (best_m64.split_k, best_m64.split_k_mode) == (16, "serial")
    assert tuning_cache.lookup("Fake GPU", 2, 1024, 1024, 128, KernelKey(), path=cache) is None  # bucket 2 not tuned
    assert tuning_cache.lookup("Fake GPU", 1, 1024, 1024, 128, KernelKey("bf16"), path=cache) is None  # another key
    printed = capsys.readouterr().out
    assert "cached 3 choice(s) for 'Fake GPU'" in printed
    assert printed.rstrip().splitlines()[-3].split()[-1] == "1.88x"  # M = 1: auto 16 us vs tuned 8.5 us


# On a fake Hopper: the sm90 layout is the GPU's own, with its own kernels (one sm90 tile divides N = 1088,
# the other does not) and the decode kernels, which read both layouts.
SM90_FITS = Sm90Config(128, 64, 1, 1, "pingpong", "persistent")
SM90_TOO_WIDE = Sm90Config(64, 128, 1, 1, "coop", "streamk")
DECODE = DecodeConfig(8, 4)


@pytest.fixture
def fake_hopper(fake_gpu):
    fake_gpu.layout = "sm90"
    fake_gpu.configs += [DECODE, SM90_FITS, SM90_TOO_WIDE]
    return fake_gpu


def test_sweep_covers_each_layout_with_its_own_paths(fake_hopper, tmp_path):
    out = tmp_path / "sweep"
    # K = 64: a single k-tile, so nothing splits K (test_sweep_of_the_sm90_layout_with_a_deep_k: larger K);
    # the sm80 tiles' stream-K grids of 2..8 blocks share their 9 or more tiles.
    assert cli.main(["sweep", "--shape", "64x1088", "--group-size", "64", "--m", "1,64", "--no-plots",
                     "--out", str(out)]) == 0
    results = json.loads((out / "sweep.json").read_text())["results"]
    grids = [_FakeGPU.SM_COUNT * per_sm for per_sm in sm80.SWEEP_STREAM_K_BLOCKS_PER_SM]
    sm80_tiles = sorted([c.name for c in _FakeGPU.CONFIGS] +
                        [c.with_split_k(b, "streamk").name for c in _FakeGPU.CONFIGS for b in grids])
    dequant = DequantConfig().name  # the dequant path reads both layouts and runs every M
    sm80_cases = 1 + len(sm80_tiles) + 1  # auto, the tiles, dequant
    assert [r["layout"] for r in results] == (["sm80"] * (sm80_cases + 1) + ["sm90"] * 4 + ["sm80"] * sm80_cases
                                              + ["sm90"] * 3)
    by = {(M, layout): sorted(r["config"] for r in results if r["M"] == M and r["layout"] == layout
                              and r["peer"] == "mixgemm") for M in (1, 64) for layout in ("sm80", "sm90")}
    assert by[(1, "sm80")] == sorted(sm80_tiles + [DECODE.name, dequant])  # decode only where M fits its 8 rows
    assert by[(64, "sm80")] == sorted(sm80_tiles + [dequant])
    assert by[(1, "sm90")] == sorted([DECODE.name, SM90_FITS.name, dequant])  # SM90_TOO_WIDE's 128 columns miss N
    assert by[(64, "sm90")] == sorted([SM90_FITS.name, dequant])
    autos = [r for r in results if r["peer"] == "mixgemm:auto"]
    assert [(r["M"], r["layout"], r["config"]) for r in autos] == [
        (1, "sm80", _FakeGPU.AUTO["sm80"].name), (1, "sm90", _FakeGPU.AUTO["sm90"].name),
        (64, "sm80", _FakeGPU.AUTO["sm80"].name), (64, "sm90", _FakeGPU.AUTO["sm90"].name)]
    assert fake_hopper.layouts == [r["layout"] for r in results]  # each case built on its layout's weight
    assert {r["path"] for r in results if r["peer"] == "mixgemm" and r["layout"] == "sm90"} == {"decode", "sm90",
                                                                                                "dequant"}
    # Only the GPU's own layout when asked.
    assert cli.main(["sweep", "--shape", "64x1088", "--group-size", "64", "--m", "64", "--no-plots",
                     "--layout", "auto", "--out", str(out)]) == 0
    assert {r["layout"] for r in json.loads((out / "sweep.json").read_text())["results"]} == {"sm90"}


def test_tune_keeps_a_winner_per_layout(fake_hopper, tmp_path, capsys):
    cache = tmp_path / "cache.json"
    assert cli.main(["tune", "--shape", "64x1088", "--group-size", "64", "--m", "1,64", "--layout", "all",
                     "--no-plots", "--cache", str(cache), "--out", str(tmp_path / "t")]) == 0
    entries = tuning_cache.load_cache(cache)
    assert len(entries) == 4 and sum(key.endswith("|fp16-int4-sm90-scale_offset") for key in entries) == 2
    look = lambda M, layout: tuning_cache.lookup("Fake GPU", M, 1088, 64, 64, KernelKey(layout=layout),  # noqa: E731
                                                 path=cache)
    # M = 1: the decode kernel (15.5 us) beats the 16-row tile (16 us) on both layouts.
    assert look(1, "sm80") == look(1, "sm90") == DECODE
    # M = 64: each layout's own winner; neither is the other's.
    assert look(64, "sm80") == Sm80Config(64, 128, 64, 32, 64, 64, 4)
    assert look(64, "sm90") == SM90_FITS
    printed = capsys.readouterr().out.rstrip().splitlines()
    assert "cached 4 choice(s) for 'Fake GPU'" in "\n".join(printed)
    header = next(line for line in printed if "tuned config" in line)
    assert header.split()[:3] == ["layout", "M", "bucket"]
    rows = [line.split() for line in printed[printed.index(header) + 2:]]
    assert [(r[0], r[1], r[3]) for r in rows] == [("sm80", "1", DECODE.name), ("sm80", "64", look(64, "sm80").name),
                                                   ("sm90", "1", DECODE.name), ("sm90", "64", SM90_FITS.name)]


def test_sweep_of_the_sm90_layout_with_a_deep_k(fake_hopper, tmp_path):
    # N = 1024: both sm90 tiles fit. A persistent sm90 config never splits K; stream-K configs split serially, every
    # way up to 6 (paths.sm90.MAX_SPLIT_K), and never past one k-tile per split.
    assert cli.main(["sweep", "--shape", "1024x1024", "--m", "64", "--layout", "sm90", "--no-plots",
                     "--out", str(tmp_path)]) == 0
    results = json.loads((tmp_path / "sweep.json").read_text())["results"]
    sm90 = {(r["config"], r["split_k"], r["split_k_mode"]) for r in results if r.get("path") == "sm90"}
    assert sm90 == {(SM90_FITS.name, 1, "none"), (SM90_TOO_WIDE.name, 1, "none")} | {
        (SM90_TOO_WIDE.with_split_k(k).name, k, "serial") for k in range(2, 7)}
    assert SM90_TOO_WIDE.with_split_k(4).name == "sm90_64x128x64_c1x1_coop_streamk_k4s"
    assert all(r["status"] == "ok" for r in results)


def test_dequant_flow(monkeypatch, tmp_path, capsys):
    """Bytes and bandwidths of the dequant report: a copy at 2.4 TB/s, a dequantize at 2.0 TB/s."""
    def fake_closures(us):
        closures = peers.Closures([lambda: None])
        closures.fake_us = us
        return closures

    K, N = 8192, 28672
    moved = K * N // 2 + 2 * K * N
    monkeypatch.setattr(peers, "copy_closures", lambda nbytes, copies: fake_closures(2 * nbytes / 2.4e12 * 1e6))
    monkeypatch.setattr(peers, "dequant_closures", lambda *a: fake_closures(moved / 2.0e12 * 1e6))
    monkeypatch.setattr(timing, "time_fn", _FakeGPU.time_fn)
    fake_device(monkeypatch)
    assert cli.main(["dequant", "--out", str(tmp_path)]) == 0
    results = json.loads((tmp_path / "dequant.json").read_text())["results"]
    by = {r["op"]: r for r in results}
    assert by["copy 1 GiB (read+write)"]["bytes"] == 2 << 30
    assert by["copy 1 GiB (read+write)"]["gbps"] == pytest.approx(2400.0)
    assert by["copy same bytes"]["bytes"] == moved
    assert by["awq_dequantize"]["bytes"] == moved
    assert by["awq_dequantize"]["gbps"] == pytest.approx(2000.0)
    assert by["awq_dequantize"]["pct_copy_bw"] == pytest.approx(100 * 2.0 / 2.4)
    assert (tmp_path / "dequant.csv").is_file()
    last = capsys.readouterr().out.rstrip().splitlines()[-1].split()
    assert last[0] == "awq_dequantize" and last[-1] == "83.3"


def test_main_without_gpu(monkeypatch, capsys):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert cli.main(["bench", "--shapes", "quick"]) == 2
    assert "no CUDA GPU" in capsys.readouterr().err


def test_describe_keeps_reasons_short():
    exc = RuntimeError("first line\n" + "dispatcher dump\n" * 100)
    assert peers.describe(exc) == "RuntimeError: first line"
    assert len(peers.describe(ValueError("x" * 1000))) == 240


# ---------------------------------------------------------------------------------------------------
# overhead: eager per-call host cost


def test_overhead_arguments(capsys):
    args = cli.parse_args(["overhead"])
    assert (args.shape, args.m, args.group_size, args.dtype) == ((4096, 4096), 1, 128, "fp16")
    assert (args.calls, args.warmup, args.repeat) == (3000, 200, 5)
    args = cli.parse_args(["overhead", "--shape", "8192x28672", "--m", "16", "--calls", "100", "--warmup", "0",
                           "--repeat", "3", "--dtype", "bf16"])
    assert (args.shape, args.m, args.calls, args.warmup, args.repeat, args.dtype) == (
        (8192, 28672), 16, 100, 0, 3, "bf16")
    for argv, text in [(["overhead", "--calls", "0"], "integer >= 1"), (["overhead", "--m", "1,16"], "integer >= 1"),
                       (["overhead", "--shape", "4096x100"], "multiple of 64"),
                       (["overhead", "--group-size", "48"], "group_size must be a positive divisor of K = 4096, got 48"),
                       (["overhead", "--group-size", "8"], "no kernel path runs a weight of K = 4096, N = 4096"),
                       (["overhead", "--reps", "7"], "unrecognized arguments")]:
        assert text in _parse_error(capsys, argv)


def test_overhead_flow(monkeypatch, tmp_path, capsys):
    from mixgemm.bench import overhead

    built = []

    def fake_cases(K, N, M, G, dtype, device="cuda"):
        built.append((K, N, M, G, dtype))
        return [(label, lambda: None) for label in (overhead.REFERENCE, "mixgemm.gemm", "QuantLinear")]

    costs = iter([20.0, 24.0, 30.0, 19.0, 25.0, 31.0, 21.0, 23.0, 29.0])  # 3 repeats x 3 calls, interleaved
    seen = []

    def fake_time(call, calls, warmup):
        seen.append((calls, warmup))
        return next(costs)

    monkeypatch.setattr(overhead, "build_cases", fake_cases)
    monkeypatch.setattr(overhead, "time_per_call", fake_time)
    fake_device(monkeypatch)
    assert cli.main(["overhead", "--shape", "1024x2048", "--m", "4", "--calls", "50", "--warmup", "5",
                     "--repeat", "3", "--out", str(tmp_path)]) == 0
    assert built == [(1024, 2048, 4, 128, torch.float16)] and seen == [(50, 5)] * 9
    data = json.loads((tmp_path / "overhead.json").read_text())
    assert data["meta"]["gpu"] == "Fake GPU" and data["meta"]["protocol"]["cuda_graph"] is False
    by = {r["call"]: r for r in data["results"]}
    assert by["torch.matmul"]["us_per_call"] == 20.0 and by["torch.matmul"]["vs_matmul"] == 1.0
    assert by["mixgemm.gemm"]["samples_us"] == [24.0, 25.0, 23.0] and by["mixgemm.gemm"]["min_us"] == 23.0
    assert by["QuantLinear"]["vs_matmul"] == pytest.approx(30.0 / 20.0)
    assert len(list(csv.DictReader((tmp_path / "overhead.csv").open()))) == 3
    last = capsys.readouterr().out.rstrip().splitlines()[-1].split()
    assert last == ["QuantLinear", "30.0", "29.0", "1.50x"]


# ---------------------------------------------------------------------------------------------------
# sweep --rounds: every case of a cell timed in each round, the order rotated, each record its median round


class _FakeClosures(list):
    config = "fake-auto"
    note = None


@pytest.fixture
def fake_sweep(monkeypatch):
    """A sweep of three sm80 configs and auto on one layout with the GPU, the builds and the timer faked: each
    timing of a case returns the next of its ``times`` (us) and is logged in ``timed``."""
    configs = [SM80.with_split_k(k, "parallel" if k > 1 else "none") for k in (1, 2, 4)]
    monkeypatch.setattr(cli, "sweep_layouts", lambda choice, K, N, G, dtype: ["sm80"])
    monkeypatch.setattr(cli, "sweep_cases", lambda K, N, G, M, key, gpu: list(configs))
    monkeypatch.setattr(device, "facts", lambda fn, dev: H100)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(cli, "_meta", lambda args, argv: {})
    monkeypatch.setattr(peers, "build", lambda name, M, N, K, G, dtype, copies, config, layout:
                        (_FakeClosures(["auto" if config == "auto" else config.name]), None))
    names = ["auto"] + [c.name for c in configs]
    # A throwaway timing first (the sweep's settling one), then three rounds.
    times = {name: [99.0, 10.0 + i, 30.0 + i, 20.0 + i] for i, name in enumerate(names)}
    timed = []

    def fake_time_fn(closures, warmup, reps, use_graph):
        name = closures[0]
        t = times[name][sum(1 for n in timed if n == name) + (name != "auto")]
        timed.append(name)
        return timing.Timing(t, t, t, [t], 1, use_graph)

    monkeypatch.setattr(timing, "time_fn", fake_time_fn)
    return names, timed


def test_sweep_rounds_interleave_the_cases_of_a_cell(fake_sweep, tmp_path):
    names, timed = fake_sweep
    args = cli.parse_args(["sweep", "--shape", "4096x4096", "--m", "16", "--rounds", "3", "--no-plots",
                           "--out", str(tmp_path)])
    records = cli.sweep(args)
    # The first case timed once to settle, then three rounds over all four cases, each round starting one later.
    assert timed[0] == "auto"
    assert [timed[1 + 4 * r: 5 + 4 * r] for r in range(3)] == [names, names[1:] + names[:1], names[2:] + names[:2]]
    # Each record reports its median round (rounds of 10 + i, 30 + i, 20 + i us: the 20 + i one), not the throwaway.
    assert [(r["peer"], r["time_us"]) for r in records] == [("mixgemm:auto", 20.0)] + [
        ("mixgemm", 20.0 + i) for i in (1, 2, 3)]
    assert [r["round_medians_us"] for r in records][1] == [11.0, 31.0, 21.0]
    assert json.loads((tmp_path / "sweep.json").read_text())["results"][0]["time_us"] == 20.0


def test_sweep_one_round_times_each_case_once(fake_sweep, tmp_path):
    names, timed = fake_sweep
    assert cli.parse_args(["sweep", "--shape", "4096x4096"]).rounds == 1
    assert cli.parse_args(["tune", "--shape", "4096x4096", "--rounds", "2"]).rounds == 2
    args = cli.parse_args(["sweep", "--shape", "4096x4096", "--m", "16", "--no-plots", "--out", str(tmp_path)])
    records = cli.sweep(args)
    assert timed == ["auto"] + names
    assert [r["time_us"] for r in records] == [10.0, 11.0, 12.0, 13.0]


# ---------------------------------------------------------------------------------------------------
# sweep / tune --after-elementwise: each case timed after the kernel that writes its input


def test_after_elementwise_is_a_sweep_and_tune_option(capsys):
    for command in ("sweep", "tune"):
        assert cli.parse_args([command, "--shape", "4096x4096"]).after_elementwise is False
        assert cli.parse_args([command, "--shape", "4096x4096", "--after-elementwise"]).after_elementwise is True
    assert "unrecognized arguments: --after-elementwise" in _parse_error(capsys, ["bench", "--after-elementwise"])


def test_time_after_elementwise_subtracts_the_elementwise_kernel(monkeypatch):
    # The fake timer makes its calls as the real one does (cycling the closures; left to choose, four passes over
    # them, as the real one lengthens a short sample) and prices a sample as the real one would: per call, the
    # kernel's time plus the replay's fixed 8 us spread over the sample's calls. A pair costs 12 + i us in sample
    # i, the elementwise kernel alone 2.5; both must make the same number of calls for the fixed cost to cancel.
    seen, calls_made = [], []

    def fake_time_fn(fns, copies=None, warmup=2, reps=7, use_graph=True):
        calls = 4 * len(fns) if copies is None else copies
        for i in range(calls):
            fns[i % len(fns)]()
        calls_made.append(calls)
        is_pair = getattr(fns[0], "func", None) is not None and fns[0].func.__name__ == "pair"
        samples = [(12.0 + i if is_pair else 2.5) + 8.0 / calls for i in range(reps)]
        return timing.Timing(statistics.median(samples), min(samples), max(samples), samples, calls, use_graph, None)

    monkeypatch.setattr(timing, "time_fn", fake_time_fn)
    x = torch.randn(4, 64).half()
    x[0, :4] = torch.tensor([6e-8, -6e-8, 1e-7, 65504.0])  # fp16 subnormals and the largest value halve and add back
    before = x.clone()
    result = timing.time_after_elementwise([lambda: seen.append(x.clone())] * 3, x)
    assert calls_made == [12, 12]  # the kernel alone over as many calls as the pairs' timer chose
    assert result.median_us == pytest.approx(15.0 - 2.5) and result.min_us == pytest.approx(9.5)
    assert result.samples_us == pytest.approx([9.5 + i for i in range(7)]) and result.calls_per_sample == 12
    assert "3.17 us alone, subtracted" in result.note  # 2.5 + 8 / 12: the kernel and its share of the replay
    # The elementwise kernel rewrote x before every GEMM call, to the very values it held.
    assert len(seen) == 12 and all(torch.equal(s, before) for s in seen) and torch.equal(x, before)
    # More calls per sample than closures: both timings make them.
    assert timing.time_after_elementwise([lambda: None] * 3, x, copies=32).median_us == pytest.approx(12.5)
    assert calls_made[2:] == [32, 32]


def test_sweep_after_elementwise_times_every_case_in_the_models_order(fake_gpu, monkeypatch, tmp_path):
    timed = []

    def fake_after(closures, x, warmup=2, reps=7, use_graph=True):
        timed.append(closures.config)
        t = closures.fake_us + 2.0  # what the order adds (the sm90 GEMM's hidden prologue, say)
        return timing.Timing(t, t, t, [t] * reps, len(closures), use_graph, "after an elementwise kernel")

    monkeypatch.setattr(timing, "time_after_elementwise", fake_after)
    out = tmp_path / "sweep"
    assert cli.main(["sweep", "--shape", "1024x1024", "--m", "1", "--no-plots", "--after-elementwise",
                     "--out", str(out)]) == 0
    data = json.loads((out / "sweep.json").read_text())
    assert data["meta"]["protocol"]["order"] == "after_elementwise"
    assert data["meta"]["protocol"]["min_sample_us"] == timing.MIN_SAMPLE_US
    assert data["meta"]["protocol"]["enqueue_hidden_cycles"] == timing.HIDE_ENQUEUE_CYCLES
    ok = [r for r in data["results"] if r["status"] == "ok"]
    # The record names what it holds: calls per sample (the fake's one per copy), not the copies.
    assert all(r["calls_per_sample"] >= 1 and "copies" not in r for r in ok)
    assert len(timed) == len(ok) + 1  # every case, and the layout's throwaway first timing
    auto = next(r for r in ok if r["peer"] == "mixgemm:auto")
    assert auto["time_us"] == pytest.approx(_FakeGPU.mixgemm_us(1, _FakeGPU.AUTO["sm80"]) + 2.0)
    assert "after an elementwise kernel" in auto["note"]
    # Without the option the same sweep times back to back.
    assert cli.main(["sweep", "--shape", "1024x1024", "--m", "1", "--no-plots", "--out", str(tmp_path / "b")]) == 0
    assert json.loads((tmp_path / "b" / "sweep.json").read_text())["meta"]["protocol"]["order"] == "back_to_back"
    assert len(timed) == len(ok) + 1
