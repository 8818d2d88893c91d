"""The grouped GEMM (every compiled tile, both epilogues) against float64 per-slot products: each key, zero
points and scale-only, group sizes down to 32 and per-channel, token- and slot-indexed x, top-k weights,
routing edge cases; outputs poisoned so an unwritten row fails."""

from __future__ import annotations

import pytest
import torch

import mixgemm.moe as moe
from gpu_helpers import MATH_TOL, poison_allocator, relative_error
from mixgemm.moe import heuristic
from moe_gpu_helpers import random_experts, random_routing, reference_grouped

pytestmark = pytest.mark.gpu


def configs_of(key, block_m=None):
    return [name for m, _, name in heuristic.compiled_tiles(key) if block_m is None or m == block_m]


def run_all_configs(x, experts, weights, ids, x_rows, topk_weights=None):
    E = experts.num_experts
    ref = reference_grouped(x, weights, ids, x_rows, topk_weights, gated=experts.gated)
    for config in configs_of(experts.key):
        block_m = heuristic.tile_of(config)[0]
        r = moe.route(ids, E, block_m)
        poison_allocator(ref.numel() * 2)
        out = moe.grouped_gemm(x, experts, r, x_rows=x_rows, topk_weights=topk_weights, config=config)
        assert out.shape == ref.shape
        err = relative_error(out, ref)
        assert err < MATH_TOL[x.dtype], f"{config} x_rows={x_rows}: relative error {err:.2e}"


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("bits,zeros", [(4, True), (4, False), (8, True), (8, False)])
@pytest.mark.parametrize("gated", [False, True])
def test_every_key_and_config(dtype, bits, zeros, gated):
    E, K, N, G, T, top_k = 8, 256, 192, 64, 45, 2
    experts, weights = random_experts(E, K, N, G, dtype, bits, zeros, gated)
    ids, w = random_routing(T, E, top_k)
    x = torch.randn(T, K, device="cuda", dtype=dtype)
    run_all_configs(x, experts, weights, ids, "token", w)
    xs = torch.randn(T * top_k, K, device="cuda", dtype=dtype)
    run_all_configs(xs, experts, weights, ids, "slot")


@pytest.mark.parametrize("G", [32, 128, 512])
def test_group_sizes_and_per_channel(G):
    E, K, N, T, top_k = 4, 512, 128, 20, 2
    experts, weights = random_experts(E, K, N, G, torch.float16)
    ids, w = random_routing(T, E, top_k)
    run_all_configs(torch.randn(T, K, device="cuda", dtype=torch.float16), experts, weights, ids, "token", w)


@pytest.mark.parametrize("case", ["one_token", "top1", "all_on_one_expert", "many_experts_top8", "ragged"])
def test_routing_edge_cases(case):
    E, top_k, T = {"one_token": (8, 2, 1), "top1": (8, 1, 77), "all_on_one_expert": (16, 1, 200),
                   "many_experts_top8": (128, 8, 33), "ragged": (64, 6, 131)}[case]
    K, N, G = 128, 128, 64
    experts, weights = random_experts(E, K, N, G, torch.float16, gated=True)
    if case == "all_on_one_expert":
        ids = torch.full((T, top_k), 3, dtype=torch.int32, device="cuda")
        w = torch.ones(T, top_k, device="cuda")
    else:
        ids, w = random_routing(T, E, top_k)
    run_all_configs(torch.randn(T, K, device="cuda", dtype=torch.float16), experts, weights, ids, "token", w)


def test_deterministic():
    E, K, N, G, T, top_k = 32, 512, 256, 128, 300, 4
    experts, _ = random_experts(E, K, N, G, torch.bfloat16, gated=True)
    ids, w = random_routing(T, E, top_k)
    x = torch.randn(T, K, device="cuda", dtype=torch.bfloat16)
    for config in configs_of(experts.key):
        r = moe.route(ids, E, heuristic.tile_of(config)[0])
        first = moe.grouped_gemm(x, experts, r, topk_weights=w, config=config)
        for _ in range(3):
            again = moe.grouped_gemm(x, experts, moe.route(ids, E, r.block_m), topk_weights=w, config=config)
            assert torch.equal(first, again), config


def test_bad_inputs_get_clear_errors():
    E, K, N, G = 4, 128, 128, 64
    experts, _ = random_experts(E, K, N, G, torch.float16)
    ids, w = random_routing(5, E, 2)
    r = moe.route(ids, E, 16)
    x = torch.randn(5, K, device="cuda", dtype=torch.float16)
    with pytest.raises(ValueError, match="x must have dtype float16"):
        moe.grouped_gemm(x.bfloat16(), experts, r)
    with pytest.raises(ValueError, match="x must have shape \\(10, 128\\)"):
        moe.grouped_gemm(x, experts, r, x_rows="slot")
    with pytest.raises(ValueError, match="x_rows must be one of"):
        moe.grouped_gemm(x, experts, r, x_rows="row")
    with pytest.raises(ValueError, match="topk_weights must have shape \\(5, 2\\)"):
        moe.grouped_gemm(x, experts, r, topk_weights=w[:4].contiguous())
    with pytest.raises(ValueError, match="routing is over 8 experts, the weights hold 4"):
        moe.grouped_gemm(x, experts, moe.route(ids, 8, 16))
    with pytest.raises(ValueError, match="takes blocks of 16 rows but the routing was built for block_m"):
        moe.grouped_gemm(x, experts, moe.route(ids, E, 32) if 32 in {m for m, _, _ in heuristic.compiled_tiles(
            experts.key)} else moe.route(ids, E, 64), config=configs_of(experts.key, 16)[0])
    with pytest.raises(ValueError, match="must be a mixgemm.moe.ExpertWeights"):
        moe.grouped_gemm(x, object(), r)


def test_prepack_experts_refuses_mismatched_experts():
    from gpu_helpers import random_int_checkpoint

    a, _, _ = random_int_checkpoint(128, 128, 64, torch.float16, 4, True)
    b, _, _ = random_int_checkpoint(128, 192, 64, torch.float16, 4, True)
    with pytest.raises(ValueError, match="expert 1 is \\[K=128, N=192\\]"):
        moe.prepack_experts([a[0], b[0]], [a[1], b[1]], [a[2], b[2]], 64)
    with pytest.raises(ValueError, match="scales holds 1 experts, qweights 2"):
        moe.prepack_experts([a[0], a[0]], [a[1]], [a[2], a[2]], 64)
    with pytest.raises(ValueError, match="either every expert has zero points or none"):
        moe.prepack_experts([a[0], a[0]], [a[1], a[1]], [a[2], None], 64)
