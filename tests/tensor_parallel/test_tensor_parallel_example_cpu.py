"""examples/tensor_parallel_llama.py's loading path on the CPU, one process (TP 1 against the tp=(0, 1) load),
with the kernels' references in place; the two-process run needs GPUs (see the example's docstring)."""

from __future__ import annotations

import importlib.util
import pathlib
import sys

import pytest
import torch

from mixgemm import ops, packing
from cpu_references import cpu_gemm, cpu_prepack

EXAMPLES = pathlib.Path(__file__).resolve().parents[2] / "examples"


def test_example_runs_on_one_cpu_process(monkeypatch, tmp_path):
    pytest.importorskip("transformers")
    monkeypatch.setattr(ops, "gemm", cpu_gemm)
    monkeypatch.setattr(packing, "prepack", cpu_prepack)
    monkeypatch.syspath_prepend(str(EXAMPLES))
    spec = importlib.util.spec_from_file_location("tensor_parallel_llama", EXAMPLES / "tensor_parallel_llama.py")
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    try:
        results = example.run(0, 1, torch.device("cpu"), "tiny", "gptq", 128, str(tmp_path), steps=0)
    finally:
        sys.modules.pop("quantized_llama", None)
    assert results["rel_err_vs_tp1"] < 1e-3 and results["world"] == 1
