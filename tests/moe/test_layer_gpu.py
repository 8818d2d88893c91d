"""GPU tests of QuantMoE on the real grouped GEMM (mixgemm.moe.prepack_experts / fused_moe): random quantized
experts in each checkpoint format, prepacked, run through QuantMoE and compared with reference_fused_moe on
their dequantized weights under the same routing."""

from __future__ import annotations

import pytest
import torch

from mixgemm import formats, moe
from mixgemm.checkpoint.writer import layer_tensors
from mixgemm.moe.layer import QuantMoE
from mixgemm.moe.reference import reference_fused_moe
from mixgemm.moe.topk_router import TopKRouter

from moe_helpers import relative_error

pytestmark = pytest.mark.gpu
DEVICE = "cuda"
TOLERANCE = {torch.float16: 5e-3, torch.bfloat16: 3e-2}


def random_projection(E, K, N, G, dtype, method, bits, symmetric, seed):
    """E experts of one projection: prepack_experts' per-expert tensors (on the GPU) and the dense float32
    weights [E, K, N] they hold. Symmetric experts are passed without zeros (qzeros=None: scale-only)."""
    gen = torch.Generator().manual_seed(seed)
    qweights, scales, zeros, dense = [], [], [], []
    for _ in range(E):
        w = (torch.randn(K, N, generator=gen) / K ** 0.5).to(dtype)
        q, s, z = (*formats.quantize_sym(w, G, bits), None) if symmetric else formats.quantize_asym(w, G, bits)
        t = layer_tensors(method, q, s, z, bits)
        qweights.append(t["qweight"].to(DEVICE))
        scales.append(t["scales"].to(DEVICE))
        zeros.append(t["qzeros"].to(DEVICE))
        dense.append(formats.dequantize(q, s, z, G, bits=bits).float())
    return qweights, scales, None if symmetric else zeros, torch.stack(dense).to(DEVICE)


def build_layer(E, hidden, inter, G, dtype, method, bits, symmetric, top_k=2):
    fmt = "awq" if method == "awq" else "gptq"
    q13, s13, z13, w13 = random_projection(E, hidden, 2 * inter, G, dtype, method, bits, symmetric, seed=1)
    q2, s2, z2, w2 = random_projection(E, inter, hidden, G, dtype, method, bits, symmetric, seed=2)
    e13 = moe.prepack_experts(q13, s13, z13, G, format=fmt, bits=bits, gated=True)
    e2 = moe.prepack_experts(q2, s2, z2, G, format=fmt, bits=bits)
    torch.manual_seed(3)
    router = TopKRouter(torch.randn(E, hidden, device=DEVICE, dtype=dtype) / hidden ** 0.5, top_k, renormalize=True)
    return QuantMoE(router, e13, e2), w13, w2


@pytest.mark.parametrize("method,bits,symmetric,dtype", [
    ("awq", 4, False, torch.float16), ("awq", 4, True, torch.float16), ("awq", 4, False, torch.bfloat16),
    ("gptq", 4, True, torch.float16), ("gptq", 8, False, torch.float16),
])
@pytest.mark.parametrize("tokens", [1, 7, 64, 300])
def test_quant_moe_matches_the_reference(method, bits, symmetric, dtype, tokens):
    E, hidden, inter, G = 8, 512, 256, 64
    layer, w13, w2 = build_layer(E, hidden, inter, G, dtype, method, bits, symmetric)
    x = torch.randn(tokens, hidden, device=DEVICE).to(dtype)
    with torch.no_grad():
        out = layer(x)
        _, weights, ids = layer.gate(x)
    ref = reference_fused_moe(x, w13, w2, weights, ids)
    assert out.shape == x.shape and out.dtype == dtype and torch.isfinite(out).all()
    assert relative_error(out, ref) < TOLERANCE[dtype], (method, bits, tokens)


def test_quant_moe_keeps_the_input_shape():
    layer, w13, w2 = build_layer(4, 256, 128, 64, torch.float16, "awq", 4, False)
    x = torch.randn(2, 5, 256, device=DEVICE).half()
    with torch.no_grad():
        out = layer(x)
        _, weights, ids = layer.gate(x.reshape(-1, 256))
    assert out.shape == (2, 5, 256)
    ref = reference_fused_moe(x.reshape(-1, 256), w13, w2, weights, ids).reshape(2, 5, 256)
    assert relative_error(out, ref) < TOLERANCE[torch.float16]
