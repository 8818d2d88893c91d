"""reference_fused_moe, the float32 MoE the kernels and layers are checked against, against two independent
computations: a token-by-token, slot-by-slot float64 loop written from the formula, and transformers' own
experts module (Mixtral's fused-expert forward) on the same weights."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from mixgemm.moe.reference import reference_fused_moe


def random_problem(T=9, hidden=32, inter=16, E=5, k=2, seed=0):
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(T, hidden, generator=gen)
    w13 = torch.randn(E, hidden, 2 * inter, generator=gen) / hidden ** 0.5
    w2 = torch.randn(E, inter, hidden, generator=gen) / inter ** 0.5
    ids = torch.stack([torch.randperm(E, generator=gen)[:k] for _ in range(T)])
    weights = torch.rand(T, k, generator=gen)
    return x, w13, w2, weights, ids


def formula(x, w13, w2, weights, ids):
    """out[t] = sum_j w[t, j] * (silu(x W1) * (x W3)) W2 of expert ids[t, j], one (t, j) at a time, float64."""
    inter = w2.shape[1]
    out = torch.zeros(x.shape, dtype=torch.float64)
    for t in range(x.shape[0]):
        for j in range(ids.shape[1]):
            e = int(ids[t, j])
            gate = x[t].double() @ w13[e, :, :inter].double()
            up = x[t].double() @ w13[e, :, inter:].double()
            out[t] += float(weights[t, j]) * ((F.silu(gate) * up) @ w2[e].double())
    return out


def test_matches_the_formula_token_by_token():
    x, w13, w2, weights, ids = random_problem()
    out = reference_fused_moe(x, w13, w2, weights, ids)
    assert out.dtype == torch.float32 and out.shape == x.shape
    torch.testing.assert_close(out.double(), formula(x, w13, w2, weights, ids), rtol=1e-5, atol=1e-5)


def test_gate_columns_come_first():
    """Swapping the gate and up halves changes the result (silu is not symmetric), so the layout is pinned."""
    x, w13, w2, weights, ids = random_problem(seed=1)
    inter = w2.shape[1]
    swapped = torch.cat([w13[..., inter:], w13[..., :inter]], dim=-1)
    out, out_swapped = (reference_fused_moe(x, w, w2, weights, ids) for w in (w13, swapped))
    assert not torch.allclose(out, out_swapped, rtol=1e-2, atol=1e-3)


def test_one_expert_chosen_twice_counts_twice():
    x, w13, w2, weights, ids = random_problem(T=3, k=2, seed=2)
    ids[:, 1] = ids[:, 0]
    torch.testing.assert_close(reference_fused_moe(x, w13, w2, weights, ids).double(),
                               formula(x, w13, w2, weights, ids), rtol=1e-5, atol=1e-5)


def test_fp16_input_is_computed_in_float32():
    x, w13, w2, weights, ids = random_problem(seed=3)
    out = reference_fused_moe(x.half(), w13.half(), w2.half(), weights, ids)
    assert out.dtype == torch.float32
    torch.testing.assert_close(out.double(), formula(x.half().float(), w13.half().float(), w2.half().float(),
                                                     weights, ids), rtol=1e-4, atol=1e-4)


def test_matches_transformers_mixtral_experts():
    """transformers' fused experts module stores gate_up_proj [E, 2I, H] (gate rows first) and down_proj
    [E, H, I]: its forward on the same routing is an independent implementation of the same sum."""
    transformers = pytest.importorskip("transformers")
    from transformers.models.mixtral.modeling_mixtral import MixtralExperts

    config = transformers.MixtralConfig(hidden_size=32, intermediate_size=16, num_local_experts=5)
    experts = MixtralExperts(config)
    x, w13, w2, weights, ids = random_problem()
    with torch.no_grad():
        experts.gate_up_proj.copy_(w13.transpose(1, 2))
        experts.down_proj.copy_(w2.transpose(1, 2))
        theirs = experts(x, ids, weights)
    torch.testing.assert_close(reference_fused_moe(x, w13, w2, weights, ids), theirs, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("change,message", [
    (lambda p: {**p, "x": p["x"][0]}, "x must be a 2-D tensor"),
    (lambda p: {**p, "w2_dense": p["w2_dense"][:, :, :-1]}, "w2_dense must be \\[E, inter, hidden\\]"),
    (lambda p: {**p, "w13_dense": p["w13_dense"][:, :, :-2]}, "w13_dense must be \\[E, hidden, 2 \\* inter\\]"),
    (lambda p: {**p, "topk_ids": p["topk_ids"][:-1]}, "topk_weights and topk_ids must both be \\[T, k\\]"),
    (lambda p: {**p, "topk_ids": p["topk_ids"].float()}, "topk_ids must hold integer expert indices"),
    (lambda p: {**p, "topk_ids": p["topk_ids"] + 5}, "topk_ids must lie in 0 .. 4"),
])
def test_bad_arguments_are_named(change, message):
    x, w13, w2, weights, ids = random_problem()
    args = change({"x": x, "w13_dense": w13, "w2_dense": w2, "topk_weights": weights, "topk_ids": ids})
    with pytest.raises(ValueError, match=message):
        reference_fused_moe(**args)
