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


def configs_of(experts, block_m=None):
    """Every compiled config that takes the experts: decode form, sm80 tiles, and (sm90 layout, a shape it
    takes) the sm90 form's."""
    names = [name for _, _, name in heuristic.compiled_tiles(experts.key)]
    if heuristic.sm90_form_fits(experts.n, experts.k, experts.group_size):
        names += [name for _, name in heuristic.sm90_configs(experts.key)]
    return [name for name in names if block_m is None or heuristic.block_height(name) == block_m]


def run_all_configs(x, experts, weights, ids, x_rows, topk_weights=None):
    E = experts.num_experts
    ref = reference_grouped(x, weights, ids, x_rows, topk_weights, gated=experts.gated)
    configs = configs_of(experts)
    if experts.layout == "sm90" and heuristic.sm90_form_fits(experts.n, experts.k, experts.group_size):
        assert any(heuristic.is_sm90_form(c) for c in configs), "no sm90 form compiled"
    for config in configs:
        block_m = heuristic.block_height(config)
        r = moe.route(ids, E, block_m)
        poison_allocator(ref.numel() * 2)
        out = moe.grouped_gemm(x, experts, r, x_rows=x_rows, topk_weights=topk_weights, config=config)
        assert out.shape == ref.shape
        err = relative_error(out, ref)
        assert err < MATH_TOL[x.dtype], f"{config} x_rows={x_rows}: relative error {err:.2e}"


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("bits,zeros", [(4, True), (4, False), (8, True), (8, False)])
@pytest.mark.parametrize("gated", [False, True])
@pytest.mark.parametrize("layout", ["sm80", "sm90"])
def test_every_key_and_config(dtype, bits, zeros, gated, layout):
    E, K, N, G, T, top_k = 8, 256, 256, 64, 45, 2
    experts, weights = random_experts(E, K, N, G, dtype, bits, zeros, gated, layout)
    ids, w = random_routing(T, E, top_k)
    x = torch.randn(T, K, device="cuda", dtype=dtype)
    run_all_configs(x, experts, weights, ids, "token", w)
    xs = torch.randn(T * top_k, K, device="cuda", dtype=dtype)
    run_all_configs(xs, experts, weights, ids, "slot")


@pytest.mark.parametrize("G", [32, 64, 128, 512])
@pytest.mark.parametrize("layout", ["sm80", "sm90"])
def test_group_sizes_and_per_channel(G, layout):
    E, K, N, T, top_k = 4, 512, 128, 20, 2
    experts, weights = random_experts(E, K, N, G, torch.float16, layout=layout)
    ids, w = random_routing(T, E, top_k)
    run_all_configs(torch.randn(T, K, device="cuda", dtype=torch.float16), experts, weights, ids, "token", w)


@pytest.mark.parametrize("case", ["one_token", "top1", "all_on_one_expert", "many_experts_top8", "ragged"])
@pytest.mark.parametrize("layout", ["sm80", "sm90"])
def test_routing_edge_cases(case, layout):
    E, top_k, T = {"one_token": (8, 2, 1), "top1": (8, 1, 77), "all_on_one_expert": (16, 1, 200),
                   "many_experts_top8": (128, 8, 33), "ragged": (64, 6, 131)}[case]
    K, N, G = 128, 256, 64
    experts, weights = random_experts(E, K, N, G, torch.float16, gated=True, layout=layout)
    if case == "all_on_one_expert":
        ids = torch.full((T, top_k), 3, dtype=torch.int32, device="cuda")
        w = torch.ones(T, top_k, device="cuda")
    else:
        ids, w = random_routing(T, E, top_k)
    run_all_configs(torch.randn(T, K, device="cuda", dtype=torch.float16), experts, weights, ids, "token", w)


@pytest.mark.parametrize("gated", [False, True])
@pytest.mark.parametrize("layout", ["sm80", "sm90"])
def test_forced_split_k_sums_every_split(gated, layout):
    # The heuristic splits K only at decode; here every sm80 tile of the grouped schedule runs 3 and 5 splits of
    # K = 512 (8 k-tiles: the last of 5 splits has none), whose last split sums the slots (tile_output.cuh's
    # sum_slots), against float64 and bit-equal from call to call.
    E, K, N, G, T, top_k = 8, 512, 256, 128, 37, 2
    experts, weights = random_experts(E, K, N, G, torch.float16, gated=gated, layout=layout)
    ids, w = random_routing(T, E, top_k)
    x = torch.randn(T, K, device="cuda", dtype=torch.float16)
    ref = reference_grouped(x, weights, ids, "token", w, gated=gated)
    tiles = [c for c in configs_of(experts) if not (heuristic.is_sm90_form(c) or heuristic.is_decode_form(c))]
    assert tiles, "no sm80 tile of the grouped schedule compiled"
    for config in tiles:
        r = moe.route(ids, E, heuristic.block_height(config))
        for split_k in (3, 5):
            poison_allocator(ref.numel() * 2)
            out = moe.grouped_gemm(x, experts, r, topk_weights=w, config=config, split_k=split_k)
            err = relative_error(out, ref)
            assert err < MATH_TOL[x.dtype], f"{config} split_k={split_k}: relative error {err:.2e}"
            again = moe.grouped_gemm(x, experts, r, topk_weights=w, config=config, split_k=split_k)
            assert torch.equal(out, again), f"{config} split_k={split_k}"


@pytest.mark.parametrize("layout", ["sm80", "sm90"])
def test_deterministic(layout):
    E, K, N, G, T, top_k = 32, 512, 256, 128, 300, 4
    experts, _ = random_experts(E, K, N, G, torch.bfloat16, gated=True, layout=layout)
    ids, w = random_routing(T, E, top_k)
    x = torch.randn(T, K, device="cuda", dtype=torch.bfloat16)
    for config in configs_of(experts):
        r = moe.route(ids, E, heuristic.block_height(config))
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
            experts.key)} else moe.route(ids, E, 64), config=configs_of(experts, 16)[0])
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


def test_sm90_form_rules():
    """The sm90 form takes unpadded routings and no K split; its weights must be in the sm90 layout."""
    E, K, N, G = 4, 128, 128, 64
    experts, _ = random_experts(E, K, N, G, torch.float16, layout="sm90")
    config = next(name for _, name in heuristic.sm90_configs(experts.key))
    ids, w = random_routing(5, E, 2)
    x = torch.randn(5, K, device="cuda", dtype=torch.float16)
    with pytest.raises(ValueError, match="takes blocks of 1 rows but the routing was built for block_m = 16"):
        moe.grouped_gemm(x, experts, moe.route(ids, E, 16), config=config)
    with pytest.raises(ValueError, match="does not split K"):
        moe.grouped_gemm(x, experts, moe.route(ids, E, 1), config=config, split_k=2)
    sm80, _ = random_experts(E, K, N, G, torch.float16, layout="sm80")
    with pytest.raises(ValueError, match="not compiled into this build for fp16-int4-sm80"):
        moe.grouped_gemm(x, sm80, moe.route(ids, E, 1), config=config)
