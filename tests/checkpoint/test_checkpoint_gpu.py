"""GPU tests of checkpoint loading: each checkpoint kind written by our writers, loaded through
mixgemm.checkpoint onto the GPU and run by our kernels against a float64 reference; and the LLaMA example
end to end on a tiny config (needs transformers, skipped without it)."""

from __future__ import annotations

import importlib.util
import pathlib

import pytest
import torch

from mixgemm import formats
from mixgemm.checkpoint import load_layer
from mixgemm.checkpoint.writer import layer_tensors, quantization_config, write_checkpoint
from mixgemm.nn import QuantLinear

from gpu_helpers import DEVICE, relative_error

pytestmark = pytest.mark.gpu
EXAMPLE = pathlib.Path(__file__).resolve().parents[2] / "examples" / "quantized_llama.py"


@pytest.mark.parametrize("method,bits,G,symmetric", [
    ("awq", 4, 128, False), ("gptq", 4, 128, True), ("gptq", 4, 64, False), ("gptq", 8, 128, False),
    ("compressed-tensors", 4, 128, False), ("compressed-tensors", 4, None, True),
    ("compressed-tensors", 8, None, True), ("compressed-tensors", 8, 64, False),
])
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_load_layer_matches_float64_reference(tmp_path, method, bits, G, symmetric, dtype):
    K, N = 512, 384
    w = torch.randn(K, N).to(dtype)
    q, s, z = (*formats.quantize_sym(w, G or K, bits), None) if symmetric else formats.quantize_asym(w, G or K, bits)
    bias = torch.randn(N).to(dtype)
    tensors = {f"model.proj.{k}": v for k, v in layer_tensors(method, q, s, z, bits).items()}
    tensors["model.proj.bias"] = bias
    write_checkpoint(tmp_path, {}, quantization_config(method, bits, G, symmetric), tensors)
    layer = load_layer(tmp_path, "model.proj", dtype=dtype)
    x = torch.randn(33, K, device=DEVICE).to(dtype)
    ref = x.double() @ formats.dequantize(q, s, z, G or K, bits=bits).to(DEVICE) + bias.double().to(DEVICE)
    assert relative_error(layer(x), ref) < {torch.float16: 3e-3, torch.bfloat16: 2e-2}[dtype]


def test_gptq_v1_file_loads_right_with_defaults(tmp_path):
    """The issue's case on the real kernels: a v1 GPTQ layer (zeros stored z - 1) with default arguments."""
    from safetensors.torch import save_file

    K, N, G = 256, 128, 64
    q, s, z = formats.quantize_asym(torch.randn(K, N).half(), G)
    t = layer_tensors("gptq", q, s, z)  # v1 zeros
    save_file({f"l.{k}": v for k, v in t.items()}, str(tmp_path / "l.safetensors"))
    x = torch.randn(8, K, device=DEVICE).half()
    ref = x.double() @ formats.dequantize(q, s, z, G).to(DEVICE)
    assert relative_error(QuantLinear.from_safetensors(tmp_path / "l.safetensors", "l", format="gptq")(x), ref) < 3e-3
    moved = {k: v.to(DEVICE) for k, v in t.items()}
    assert relative_error(QuantLinear.from_gptq(moved["qweight"], moved["scales"], moved["qzeros"])(x), ref) < 3e-3


def test_llama_example_tiny(tmp_path):
    pytest.importorskip("transformers")
    spec = importlib.util.spec_from_file_location("quantized_llama", EXAMPLE)
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    results = example.run("tiny", out=str(tmp_path), new_tokens=4, bench_steps=16)
    for method in example.METHODS:
        r = results[method]
        assert r["replaced"] == 14  # 2 layers x (q, k, v, o, gate, up, down)
        assert "model.safetensors.index.json" in r["files"]
        # The error of loading and of our kernels only (the fp16 reference holds the dequantized weights).
        assert r["rel_err_vs_dequantized"] < 2e-2, (method, r)
        assert len(r["generated"]) == 4 and r["decode_tok_s"] > 0
    assert results["fp16"]["decode_tok_s"] > 0
