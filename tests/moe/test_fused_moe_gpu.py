"""The fused MoE layer (mixgemm.moe.fused_moe) against the float32 reference loop over experts, on small
Mixtral-, Qwen3- and DeepSeek-like shapes; CUDA-graph replay with new routing; torch.compile(fullgraph=True)
through the custom op; bad layers refused."""

from __future__ import annotations

import pytest
import torch

import mixgemm.moe as moe
from gpu_helpers import poison_allocator, relative_error
from mixgemm.moe.functional import plan_tiles
from moe_gpu_helpers import random_experts, random_routing

pytestmark = pytest.mark.gpu

# The layer rounds the intermediate (SiLU(gate) * up) to the activation type before the down projection, as
# vLLM's fused_moe does; against a float32 reference that rounding dominates.
LAYER_TOL = {torch.float16: 5e-3, torch.bfloat16: 3e-2}

SHAPES = {  # (E, top_k, hidden, inter)
    "mixtral_like": (8, 2, 256, 512),
    "qwen3_like": (32, 8, 128, 192),
    "dsv2lite_like": (16, 6, 256, 320),
}


def make_layer(E, hidden, inter, dtype, bits=4, zeros=True, G=64, layout="auto"):
    w13, w13_dense = random_experts(E, hidden, 2 * inter, G, dtype, bits, zeros, gated=True, layout=layout)
    w2, w2_dense = random_experts(E, inter, hidden, G, dtype, bits, zeros, layout=w13.layout)
    return w13, w2, w13_dense, w2_dense


def check_layer(x, layer, ids, w):
    w13, w2, w13_dense, w2_dense = layer
    ref = moe.reference_fused_moe(x, w13_dense, w2_dense, w, ids)
    poison_allocator(x.shape[0] * ids.shape[1] * (w13.n + w2.n) * 2)
    out = moe.fused_moe(x, w13, w2, w, ids)
    assert out.shape == ref.shape and out.dtype == x.dtype
    err = relative_error(out, ref)
    assert err < LAYER_TOL[x.dtype], f"relative error {err:.2e}"


@pytest.mark.parametrize("shape", list(SHAPES))
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("T", [1, 4, 16, 64, 300, 1100])
@pytest.mark.parametrize("layout", ["sm80", "sm90"])
def test_fused_moe_matches_reference(shape, dtype, T, layout):
    """T = 300 and 1100 give every shape >= 64 slots per expert: the sm90 form on sm90-layout experts."""
    E, top_k, hidden, inter = SHAPES[shape]
    layer = make_layer(E, hidden, inter, dtype, layout=layout)
    if layout == "sm90" and T >= 300:
        assert plan_tiles(T, top_k, layer[0], layer[1], 132)[0] == 1, "the sm90 form should run"
    ids, w = random_routing(T, E, top_k)
    check_layer(torch.randn(T, hidden, device="cuda", dtype=dtype), layer, ids, w)


@pytest.mark.parametrize("bits,zeros,G", [(4, False, 128), (8, True, 64), (8, False, 32)])
def test_fused_moe_widths_and_scale_only(bits, zeros, G):
    E, top_k, hidden, inter = SHAPES["mixtral_like"]
    layer = make_layer(E, hidden, inter, torch.float16, bits, zeros, G)
    ids, w = random_routing(40, E, top_k)
    check_layer(torch.randn(40, hidden, device="cuda", dtype=torch.float16), layer, ids, w)


@pytest.mark.parametrize("shape,T", [("qwen3_like", 1), ("qwen3_like", 24), ("mixtral_like", 300)])
def test_cuda_graph_replays_with_new_routing(shape, T):
    """One token: the decode GEMVs' direct mode; Qwen3-like at 24 tokens: the sm80 tiles; Mixtral-like at 300:
    the sm90 form on Hopper."""
    E, top_k, hidden, inter = SHAPES[shape]
    layer = make_layer(E, hidden, inter, torch.float16)
    w13, w2 = layer[:2]
    x = torch.randn(T, hidden, device="cuda", dtype=torch.float16)
    ids, w = random_routing(T, E, top_k)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        moe.fused_moe(x, w13, w2, w, ids)  # warm up outside the capture
    torch.cuda.current_stream().wait_stream(s)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = moe.fused_moe(x, w13, w2, w, ids)
    for seed, skew in ((1, 0.0), (2, 0.5), (3, 3.0)):  # skew 3: nearly every token on the first experts
        gen = torch.Generator(device="cuda").manual_seed(seed)
        new_ids, new_w = random_routing(T, E, top_k, generator=gen, skew=skew)
        ids.copy_(new_ids)
        w.copy_(new_w)
        x.copy_(torch.randn(T, hidden, device="cuda", dtype=torch.float16, generator=gen))
        graph.replay()
        torch.cuda.synchronize()
        assert torch.equal(out, moe.fused_moe(x, w13, w2, w, ids)), f"replay {seed}"


@pytest.mark.parametrize("T", [1, 9, 300])
def test_torch_compile_fullgraph(T):
    E, top_k, hidden, inter = SHAPES["mixtral_like"]
    w13, w2, w13_dense, w2_dense = make_layer(E, hidden, inter, torch.float16)
    x = torch.randn(T, hidden, device="cuda", dtype=torch.float16)
    ids, w = random_routing(T, E, top_k)

    def layer(x, w, ids):
        return moe.fused_moe_op(x * 1.0, w13, w2, w, ids) + 0.0

    compiled = torch.compile(layer, fullgraph=True)
    assert torch.equal(compiled(x, w, ids), moe.fused_moe(x, w13, w2, w, ids))


def test_layer_rules():
    E, top_k, hidden, inter = SHAPES["mixtral_like"]
    w13, w2, *_ = make_layer(E, hidden, inter, torch.float16)
    x = torch.randn(3, hidden, device="cuda", dtype=torch.float16)
    ids, w = random_routing(3, E, top_k)
    with pytest.raises(ValueError, match="w13 must be gated: the gate/up projection"):
        moe.fused_moe(x, w2, w2, w, ids)
    with pytest.raises(ValueError, match="w2 \\(the down projection\\) must not be gated"):
        moe.fused_moe(x, w13, w13, w, ids)
    with pytest.raises(ValueError, match="x must be \\[tokens, hidden = 256\\]"):
        moe.fused_moe(x[:, :128].contiguous(), w13, w2, w, ids)
    with pytest.raises(ValueError, match="topk_ids has 2 tokens, x 3"):
        moe.fused_moe(x, w13, w2, w[:2], ids[:2].contiguous())
    with pytest.raises(ValueError, match="expert id 8"):
        moe.fused_moe(x, w13, w2, w, torch.full_like(ids, 8))


@pytest.mark.parametrize("id_dtype", [torch.int32, torch.int64])
@pytest.mark.parametrize("layout", ["sm80", "sm90"])
def test_one_token_direct_mode(id_dtype, layout):
    """One token runs the decode GEMVs without a routing pass (moe/direct.py): both id widths, both layouts,
    deterministic, and an unchecked id out of range adds nothing to the token's sum (no hang, no fault)."""
    E, top_k, hidden, inter = SHAPES["qwen3_like"]
    layer = make_layer(E, hidden, inter, torch.float16, layout=layout)
    w13, w2, w13_dense, w2_dense = layer
    ids, w = random_routing(1, E, top_k)
    ids = ids.to(id_dtype)
    x = torch.randn(1, hidden, device="cuda", dtype=torch.float16)
    check_layer(x, layer, ids, w)
    first = moe.fused_moe(x, w13, w2, w, ids)
    assert all(torch.equal(first, moe.fused_moe(x, w13, w2, w, ids)) for _ in range(3))
    bad = ids.clone()
    bad[0, 2] = E
    kept_w = w.clone()
    kept_w[0, 2] = 0.0
    ref = moe.reference_fused_moe(x, w13_dense, w2_dense, kept_w, torch.where(bad < E, bad, 0))
    out = moe.fused_moe(x, w13, w2, w, bad, check_ids=False)
    assert relative_error(out, ref) < LAYER_TOL[torch.float16]
