"""The LLaMA example's loading path on the CPU (transformers' model code, our checkpoint writers and loader),
with the kernel entry points replaced by their pure-PyTorch references. Skipped where transformers is not
installed (CI); tests/checkpoint/test_checkpoint_gpu.py runs the whole example on the GPU."""

from __future__ import annotations

import importlib.util
import pathlib

import pytest

from mixgemm import ops, packing
from cpu_references import cpu_gemm, cpu_prepack

EXAMPLE = pathlib.Path(__file__).resolve().parents[2] / "examples" / "quantized_llama.py"


def test_llama_example_loads_each_checkpoint_kind_on_cpu(monkeypatch, tmp_path):
    pytest.importorskip("transformers")
    monkeypatch.setattr(ops, "gemm", cpu_gemm)
    monkeypatch.setattr(packing, "prepack", cpu_prepack)
    spec = importlib.util.spec_from_file_location("quantized_llama", EXAMPLE)
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    results = example.run("tiny", out=str(tmp_path), new_tokens=2, bench_steps=0, device="cpu")
    for method in example.METHODS:
        assert results[method]["replaced"] == 14
        assert results[method]["rel_err_vs_dequantized"] < 1e-2, (method, results[method])
