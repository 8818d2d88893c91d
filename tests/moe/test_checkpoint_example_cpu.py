"""The MoE example's loading path on the CPU (transformers' model code, our MoE writer and loader), with the
kernel entry points replaced by their pure-PyTorch references. Skipped where transformers is not installed;
tests/moe/test_checkpoint_load_gpu.py runs the whole example on the GPU."""

from __future__ import annotations

import importlib.util
import pathlib

import pytest

from moe_helpers import use_cpu_kernels

EXAMPLE = pathlib.Path(__file__).resolve().parents[2] / "examples" / "quantized_moe.py"


@pytest.mark.parametrize("family,methods", [("mixtral", ("awq",)), ("qwen3_moe", ("gptq", "compressed-tensors"))])
def test_moe_example_loads_its_checkpoints_on_cpu(monkeypatch, tmp_path, family, methods):
    pytest.importorskip("transformers")
    use_cpu_kernels(monkeypatch)
    spec = importlib.util.spec_from_file_location("quantized_moe", EXAMPLE)
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    results = example.run("tiny", family, methods, out=str(tmp_path), new_tokens=2, bench_steps=0, device="cpu")
    for method in methods:
        r = results[method]
        assert r["moe_blocks"] == 2 and r["replaced"] == 2 + 2 * 4, (method, r)
        assert r["median_token_err_vs_dequantized"] < 1e-2, (method, r)
        assert len(r["generated"]) == 2
