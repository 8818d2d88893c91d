"""The profiler end to end on a small shape: every GPU path of bench, sweep and tune runs and reports
finite positive times measured through CUDA graphs."""

from __future__ import annotations

import json
import math

import pytest
import torch

import mixgemm
from mixgemm import device, ops, paths, tuning_cache
from mixgemm.bench import cli
from mixgemm.kernel_key import KernelKey
from mixgemm.paths import PATHS, GemmProblem

pytestmark = pytest.mark.gpu

SHAPE = "1024x1024"
REQUIRED_PEERS = ("mixgemm", "vllm_style", "cublas_fp16", "cutlass2_fp16")


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
    # config="auto" reads the tuning cache: keep the user's own out of these runs, and ours out of theirs.
    path = tmp_path / "tuned.json"
    monkeypatch.setenv("MIXGEMM_CACHE", str(path))
    return path


def _results(path):
    return json.loads(path.read_text())["results"]


def _timed(record) -> bool:
    t = record.get("time_us")
    return record["status"] == "ok" and isinstance(t, float) and math.isfinite(t) and t > 0


def test_bench_small_shape(tmp_path):
    assert cli.main(["bench", "--shapes", SHAPE, "--m", "1,16", "--out", str(tmp_path)]) == 0
    results = _results(tmp_path / "bench.json")
    for peer in REQUIRED_PEERS:
        rows = [r for r in results if r["peer"] == peer]
        assert [r["M"] for r in rows] == [1, 16], peer
        for r in rows:
            assert _timed(r), r
            assert r["cuda_graph"], r  # our kernels and cuBLAS must be capturable
            assert min(r["samples_us"]) > 0 and len(r["samples_us"]) >= 7
            assert r["min_us"] <= r["time_us"] <= r["max_us"]
    for r in results:
        assert _timed(r) or r.get("reason"), r  # whatever did not run says why
    mixgemm_rows = [r for r in results if r["peer"] == "mixgemm"]
    assert all(r["config"] and r["speedup"] == 1.0 for r in mixgemm_rows)
    assert (tmp_path / "bench.csv").stat().st_size > 0


def _expected_sweep(K: int, N: int, G: int, M: int, layout: str, gpu) -> list[tuple[str, str, str]]:
    """(layout, path, config name) of every case the sweep times on ``layout``: each path's compiled configs for
    the layout's key (fp16, int4, zero points), in each split variant its path sweeps, where the path's fits check
    says it runs the problem. Built from the paths, so it holds in every kernel set (a hand count did not: 240
    rows against 236 in a full build)."""
    key = KernelKey.of(torch.float16, 4, layout)
    problem = GemmProblem(M, N, K, G)
    return [(layout, path.name, variant.name) for path in PATHS.values() for config in path.compiled(key)
            for variant in path.split_variants(config, problem, gpu) if path.fits(variant, problem, key) is None]


def test_sweep_small_shape(tmp_path):
    M, K, N, G = 16, 1024, 1024, 128
    assert cli.main(["sweep", "--shape", SHAPE, "--m", str(M), "--out", str(tmp_path)]) == 0
    results = _results(tmp_path / "sweep.json")
    swept = [r for r in results if r["peer"] == "mixgemm"]
    # Every path of every layout this GPU runs competes (--layout all: sm80, and sm90 on Hopper), each on the
    # layout it reads; decode configs only where M = 16 fits their rows, with serial split-K only.
    layouts = cli.sweep_layouts("all", K, N, G, torch.float16)
    assert {r["layout"] for r in swept} == set(layouts)
    gpu = device.facts("test", torch.device("cuda", torch.cuda.current_device()))
    expected = [case for layout in layouts for case in _expected_sweep(K, N, G, M, layout, gpu)]
    # The profiler's own list is the same one.
    assert sorted((layout, v.path, v.name) for layout in layouts
                  for v in cli.sweep_cases(K, N, G, M, KernelKey.of(torch.float16, 4, layout), gpu)) == sorted(expected)
    assert sorted((r["layout"], r["path"], r["config"]) for r in swept) == sorted(expected)
    assert {(r["layout"], r["path"]) for r in swept} >= {(layout, "sm80") for layout in layouts}
    for r in swept:
        config = paths.from_name(r["config"])
        assert (config.path, config.kernel_name, config.split_k, config.split_k_mode) == (
            r["path"], r["tile"], r["split_k"], r["split_k_mode"]), r
        if config.path == "decode":
            assert config.rows >= M and config.split_k_mode in ("none", "serial"), r
    # Split-K 16 = K / 64 is swept on the sm80 path, in both modes.
    assert {r["split_k_mode"] for r in swept if r["path"] == "sm80" and r["split_k"] == K // 64} == {"serial",
                                                                                                    "parallel"}
    # Every compiled config runs at every split setting of this K.
    assert all(_timed(r) for r in swept), [r for r in swept if not _timed(r)][:3]
    assert all(_timed(r) for r in results if r["peer"] == "mixgemm:auto")
    # matplotlib is on the GPU machine (and CI installs it): the plots are part of the smoke run.
    for name in ("sweep_time_vs_m.png", "sweep_stages_splitk.png"):
        assert (tmp_path / name).read_bytes()[:4] == b"\x89PNG"


def test_tune_feeds_auto(tmp_path, private_cache):
    assert cli.main(["tune", "--shape", SHAPE, "--m", "16", "--no-plots", "--out", str(tmp_path)]) == 0
    # tune's default layout is the GPU's own, the one prepack picks by itself.
    ckpt = mixgemm.formats.random_awq_weight(1024, 1024, 128, torch.float16, device="cuda")
    packed = mixgemm.prepack(ckpt["qweight"], ckpt["scales"], ckpt["qzeros"], 128)
    assert packed.key == KernelKey.of(torch.float16, 4, packed.layout)  # zero points: the scale+offset key
    tuned = tuning_cache.lookup(torch.cuda.get_device_name(), 16, 1024, 1024, 128, packed.key)
    assert tuned is not None
    assert private_cache.is_file()
    assert ops.resolve_config(16, packed, "auto") == tuned
    # And gemm runs with it.
    x = torch.randn(16, 1024, device="cuda", dtype=torch.float16)
    assert torch.isfinite(mixgemm.gemm(x, packed)).all()


def test_overhead_small_shape(tmp_path, capsys):
    assert cli.main(["overhead", "--shape", SHAPE, "--m", "1", "--calls", "50", "--warmup", "5", "--repeat", "2",
                     "--out", str(tmp_path)]) == 0
    results = _results(tmp_path / "overhead.json")
    calls = {r["call"] for r in results}
    assert {"torch.matmul", "mixgemm.gemm", "mixgemm.library.gemm", "torch.ops.mixgemm.gemm (custom op)",
            "QuantLinear", "baseline.awq_gemm"} == calls
    for r in results:
        assert math.isfinite(r["us_per_call"]) and r["us_per_call"] > 0 and len(r["samples_us"]) == 2, r
        assert r["vs_matmul"] > 0
    assert "QuantLinear" in capsys.readouterr().out


def test_eager_paths_agree_with_the_custom_op():
    # The fast paths (gemm, library.gemm and QuantLinear straight to ops.gemm) and the custom op compute the
    # same thing; a second call (plan and validation remembered) matches the first.
    ckpt = mixgemm.formats.random_awq_weight(1024, 1024, 128, torch.float16, device="cuda")
    packed = mixgemm.prepack(ckpt["qweight"], ckpt["scales"], ckpt["qzeros"], 128)
    layer = mixgemm.nn.QuantLinear(packed)
    for M in (1, 3, 64):
        x = torch.randn(M, 1024, device="cuda", dtype=torch.float16)
        via_op = torch.ops.mixgemm.gemm(x, packed.packed, packed.scales, packed.offsets, None, 128, 1024, 1024,
                                        "auto", packed.layout, packed.scale_only)
        for _ in range(2):
            assert torch.equal(mixgemm.gemm(x, packed), via_op)
            assert torch.equal(mixgemm.library.gemm(x, packed), via_op)
            assert torch.equal(layer(x), via_op)


def test_sweep_after_elementwise_small_shape(tmp_path):
    # Each case after the elementwise kernel that writes its input: still captured in a graph, positive, and the
    # kernel's own time named in the note.
    assert cli.main(["sweep", "--shape", SHAPE, "--m", "16", "--layout", "auto", "--no-plots", "--after-elementwise",
                     "--out", str(tmp_path)]) == 0
    data = json.loads((tmp_path / "sweep.json").read_text())
    assert data["meta"]["protocol"]["order"] == "after_elementwise"
    timed = [r for r in data["results"] if _timed(r)]
    assert timed and all(r["cuda_graph"] and "after an elementwise kernel" in r["note"] for r in timed)
    assert any(r["peer"] == "mixgemm:auto" for r in timed)
