"""QuantMoE on the CPU, with the functional API replaced by its float32 reference on dense experts: it is a
drop-in for transformers 5's Mixtral, Qwen2-MoE (shared expert) and Qwen3-MoE blocks (same output, same
shape, a tensor rather than a tuple), and it refuses experts and routers that do not fit together.
TopKRouter reproduces the routers of those families."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from mixgemm.moe.layer import QuantMoE
from mixgemm.moe.topk_router import TopKRouter, softmax_topk

from moe_helpers import DenseExperts, relative_error, tiny_moe_config, use_cpu_kernels


def dense_experts(weight_kn: torch.Tensor, gated: bool, dtype=torch.float16) -> DenseExperts:
    E, K, N = weight_kn.shape
    return DenseExperts(weight_kn.float(), E, N, K, gated, dtype, 4, K, False, {})


def experts_of(block):
    """The block's experts as the CPU stand-in of ExpertWeights: w13 [E, H, 2I] (gate first), w2 [E, I, H]."""
    return (dense_experts(block.experts.gate_up_proj.detach().transpose(1, 2), True),
            dense_experts(block.experts.down_proj.detach().transpose(1, 2), False))


def moe_block(family: str, seed: int = 0, **overrides):
    """One MoE block of ``family``'s tiny config with top-2 routing (the block and QuantMoE share its router, so
    their routing is the same), random, fp16."""
    pytest.importorskip("transformers")
    from transformers.models.mixtral.modeling_mixtral import MixtralSparseMoeBlock
    from transformers.models.qwen2_moe.modeling_qwen2_moe import Qwen2MoeSparseMoeBlock
    from transformers.models.qwen3_moe.modeling_qwen3_moe import Qwen3MoeSparseMoeBlock

    cls = {"mixtral": MixtralSparseMoeBlock, "qwen2_moe": Qwen2MoeSparseMoeBlock,
           "qwen3_moe": Qwen3MoeSparseMoeBlock}[family]
    torch.manual_seed(seed)
    block = cls(tiny_moe_config(family, **{"num_experts_per_tok": 2, **overrides}))
    with torch.no_grad():
        for p in block.parameters():
            p.normal_(0.0, 0.05)
        block.gate.weight.normal_(0.0, 0.5)
    return block.half().eval()


@pytest.mark.parametrize("family,overrides", [
    ("mixtral", {}), ("qwen2_moe", {}), ("qwen2_moe", {"norm_topk_prob": True}), ("qwen3_moe", {}),
    ("qwen3_moe", {"norm_topk_prob": False}),
])
def test_drop_in_for_the_transformers_block(monkeypatch, family, overrides):
    use_cpu_kernels(monkeypatch)
    block = moe_block(family, **overrides)
    w13, w2 = experts_of(block)
    shared = dict(shared_expert=block.shared_expert, shared_expert_gate=block.shared_expert_gate) \
        if family == "qwen2_moe" else {}
    layer = QuantMoE(block.gate, w13, w2, **shared)
    x = torch.randn(2, 7, 256).half()
    with torch.no_grad():
        ours, theirs = layer(x), block(x)
    assert isinstance(ours, torch.Tensor) and ours.shape == x.shape and ours.dtype == x.dtype
    assert relative_error(ours, theirs) < 2e-3


def test_without_the_shared_expert_a_qwen2_block_differs(monkeypatch):
    """The shared expert's contribution is real in this test model, so the test above checks it is added."""
    use_cpu_kernels(monkeypatch)
    block = moe_block("qwen2_moe")
    layer = QuantMoE(block.gate, *experts_of(block))
    x = torch.randn(1, 5, 256).half()
    with torch.no_grad():
        assert relative_error(layer(x), block(x)) > 0.05


def test_fused_moe_gets_float32_weights_and_flat_tokens(monkeypatch):
    seen = {}

    def spy(x, w13, w2, topk_weights, topk_ids, *, check_ids=True):
        seen.update(x=x.shape, weights=topk_weights.dtype, ids=topk_ids.shape, check_ids=check_ids)
        return torch.zeros_like(x)

    block = moe_block("qwen3_moe")  # Qwen's router returns its weights in the activation dtype
    monkeypatch.setattr("mixgemm.moe.fused_moe_op", spy)
    QuantMoE(block.gate, *experts_of(block))(torch.randn(3, 4, 256).half())
    # The router's own top-k ids are in range: no per-layer host sync to check them.
    assert seen == {"x": (12, 256), "weights": torch.float32, "ids": (12, 2), "check_ids": False}


@pytest.mark.parametrize("family,overrides,renormalize", [
    ("mixtral", {}, True), ("qwen3_moe", {"norm_topk_prob": True}, True),
    ("qwen3_moe", {"norm_topk_prob": False}, False), ("qwen2_moe", {"norm_topk_prob": False}, False),
])
def test_topk_router_routes_as_the_family_does(family, overrides, renormalize):
    block = moe_block(family, **overrides).float()
    router = TopKRouter(block.gate.weight.detach().clone(), 2, renormalize=renormalize)
    x = torch.randn(17, 256)
    with torch.no_grad():
        logits, weights, ids = router(x)
        their_logits, their_weights, their_ids = block.gate(x)
    assert torch.equal(ids, their_ids)
    torch.testing.assert_close(logits, their_logits)
    torch.testing.assert_close(weights, their_weights.float())
    assert weights.dtype == torch.float32


def test_softmax_topk_renormalizes_only_when_asked():
    logits = torch.tensor([[2.0, 1.0, 0.0, -1.0]])
    w, ids = softmax_topk(logits, 2, renormalize=False)
    probs = torch.softmax(logits, -1)
    assert ids.tolist() == [[0, 1]] and torch.allclose(w, probs[:, :2])
    w, _ = softmax_topk(logits, 2, renormalize=True)
    assert torch.allclose(w.sum(-1), torch.ones(1)) and torch.allclose(w, probs[:, :2] / probs[:, :2].sum())


@pytest.mark.parametrize("top_k", [0, 5, 1.0, True])
def test_topk_router_refuses_bad_top_k(top_k):
    with pytest.raises(ValueError, match="top_k must be an int in 1 .. num_experts = 4"):
        TopKRouter(torch.zeros(4, 8), top_k, renormalize=True)


def test_topk_router_refuses_a_bad_weight():
    with pytest.raises(ValueError, match="weight must be a 2-D float tensor"):
        TopKRouter(torch.zeros(4, 8, dtype=torch.int32), 2, renormalize=True)


def _pair(E=4, H=64, inter=32):
    w13 = dense_experts(torch.zeros(E, H, 2 * inter), True)
    w2 = dense_experts(torch.zeros(E, inter, H), False)
    return w13, w2


@pytest.mark.parametrize("change,message", [
    (lambda w13, w2: (dataclasses.replace(w13, gated=False), w2), "w13 must be gated"),
    (lambda w13, w2: (w13, dataclasses.replace(w2, gated=True)), "w2 \\(the down projection\\) must not be gated"),
    (lambda w13, w2: (w13, dataclasses.replace(w2, num_experts=3)), "w13 holds 4 experts but w2 3"),
    (lambda w13, w2: (w13, dataclasses.replace(w2, act_dtype=torch.bfloat16)), "activation dtype"),
    (lambda w13, w2: (w13, dataclasses.replace(w2, k=48)), "w13 is \\[K=64, N=64\\] and w2 \\[K=48, N=64\\]"),
    (lambda w13, w2: (w13, object()), "w2 must be an ExpertWeights"),
])
def test_experts_that_do_not_fit_are_refused(change, message):
    w13, w2 = change(*_pair())
    with pytest.raises(ValueError, match=message):
        QuantMoE(TopKRouter(torch.zeros(4, 64), 2, renormalize=True), w13, w2)


def test_a_router_of_another_shape_is_refused():
    with pytest.raises(ValueError, match="router weight is \\(8, 64\\), but the experts need"):
        QuantMoE(TopKRouter(torch.zeros(8, 64), 2, renormalize=True), *_pair())
    with pytest.raises(ValueError, match="router must be a torch.nn.Module"):
        QuantMoE(lambda x: x, *_pair())
    with pytest.raises(ValueError, match="shared_expert_gate needs a shared_expert"):
        QuantMoE(TopKRouter(torch.zeros(4, 64), 2, renormalize=True), *_pair(),
                 shared_expert_gate=torch.nn.Linear(64, 1))
