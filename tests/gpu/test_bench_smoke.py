"""The profiler end to end on a small shape: every GPU path of bench, sweep and tune runs and reports
finite positive times measured through CUDA graphs."""

from __future__ import annotations

import json
import math

import pytest
import torch

import mixgemm
from mixgemm import ops, tuning
from mixgemm.bench import cli

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


def test_sweep_small_shape(tmp_path):
    assert cli.main(["sweep", "--shape", SHAPE, "--m", "16", "--out", str(tmp_path)]) == 0
    results = _results(tmp_path / "sweep.json")
    swept = [r for r in results if r["peer"] == "mixgemm"]
    # Every path of every layout this GPU runs competes (--layout all: sm80, and sm90 on Hopper), each on the
    # layout it reads; decode (gemv) configs only where M = 16 fits their rows, with serial split-K only.
    layouts = cli.sweep_layouts("all", 1024, 1024, 128, torch.float16)
    assert {r["layout"] for r in swept} == set(layouts)
    configs = [(layout, c) for layout in layouts
               for c in mixgemm.compiled_configs(torch.float16, path=None, layout=layout)
               if c.path != "gemv" or c.tile_m >= 16]
    assert len(swept) == sum(len(cli.split_settings(1024, c)) for _, c in configs)
    assert {(r["layout"], r["path"]) for r in swept} == {(layout, c.path) for layout, c in configs}
    # Every compiled config runs at every split setting of this K (split-K 16 = K / 64 included).
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
    tuned = tuning.lookup(torch.cuda.get_device_name(), 16, 1024, 1024, 128, torch.float16, layout=packed.layout)
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
