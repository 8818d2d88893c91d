"""``QuantMoE``: a drop-in for the sparse mixture-of-experts block of a transformers decoder layer (Mixtral,
Qwen2-MoE, Qwen3-MoE), whose experts run as two grouped GEMMs (:func:`mixgemm.moe.fused_moe`, through its
custom op when traced) over their prepacked int4/int8 weights.

What the block computes, and so what this does (transformers 5's ``*SparseMoeBlock.forward``): flatten the
tokens, route them (``router -> (router_logits, topk_weights, topk_ids)``), sum each token's experts weighted
by its routing weights, add the shared expert if the model has one (Qwen2-MoE: ``sigmoid(shared_expert_gate(x))
* shared_expert(x)``), and return one tensor of the input's shape (not a tuple).
"""

from __future__ import annotations

from typing import Optional

import torch

from .. import moe as moe_api  # looked up at call time, so the functional API may be swapped (CPU tests)
from .functional import check_layer


class QuantMoE(torch.nn.Module):
    """``y = sum_j w[t, j] * expert_{id[t, j]}(x[t]) (+ shared expert)`` for ``x [..., hidden]`` in the experts'
    activation dtype.

    ``router``: a module called as ``router(x [T, hidden]) -> (router_logits, topk_weights, topk_ids)``: the
    model's own router (transformers 5's ``*TopKRouter``) or :class:`~mixgemm.moe.TopKRouter`; it is kept under
    the name ``gate``, as in the models, so its weight's state-dict key stays the model's. ``w13``: the gated
    gate/up :class:`~mixgemm.moe.ExpertWeights` (``k = hidden``, ``n = 2 * intermediate``); ``w2``: the down
    projection (``k = intermediate``, ``n = hidden``). ``shared_expert`` / ``shared_expert_gate``: Qwen2-MoE's
    dense expert every token takes and its one-column sigmoid gate (their Linears may be QuantLinears).

    The expert weights are plain attributes on the device they were prepacked on, not buffers: ``.to()``
    does not move them and ``state_dict()`` does not hold them (build the layer where it runs). Inference only.
    """

    def __init__(self, router: torch.nn.Module, w13, w2, *, shared_expert: Optional[torch.nn.Module] = None,
                 shared_expert_gate: Optional[torch.nn.Module] = None) -> None:
        super().__init__()
        fn = "QuantMoE"
        if not isinstance(router, torch.nn.Module):
            raise ValueError(f"{fn}: router must be a torch.nn.Module returning (router_logits, topk_weights, "
                             f"topk_ids), got {type(router).__name__}")
        check_layer(fn, w13, w2)
        _check_router(fn, router, w13)
        if shared_expert_gate is not None and shared_expert is None:
            raise ValueError(f"{fn}: shared_expert_gate needs a shared_expert to gate")
        self.gate = router
        self.w13 = w13
        self.w2 = w2
        self.shared_expert = shared_expert
        self.shared_expert_gate = shared_expert_gate
        self.num_experts = w13.num_experts
        self.hidden_size = w13.k
        self.intermediate_size = w2.k

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        shape = hidden_states.shape
        x = hidden_states.reshape(-1, shape[-1]).contiguous()
        _, topk_weights, topk_ids = self.gate(x)
        # Routers return float32 (Mixtral) or the activation dtype (Qwen); the grouped GEMM takes float32.
        # fused_moe_op: fused_moe itself in eager mode, its custom op under torch.compile / dispatch modes. The
        # ids are the router's top-k of its own experts, in range by construction: no per-layer host sync.
        out = moe_api.fused_moe_op(x, self.w13, self.w2, topk_weights.float(), topk_ids, check_ids=False)
        if self.shared_expert is not None:
            shared = self.shared_expert(x)
            if self.shared_expert_gate is not None:
                shared = torch.sigmoid(self.shared_expert_gate(x)) * shared
            out = out + shared
        return out.reshape(shape)

    def extra_repr(self) -> str:
        return (f"num_experts={self.num_experts}, hidden_size={self.hidden_size}, "
                f"intermediate_size={self.intermediate_size}, bits={self.w13.bits}, "
                f"group_size={self.w13.group_size}/{self.w2.group_size}, act_dtype={self.w13.act_dtype}")


def _check_router(fn: str, router: torch.nn.Module, w13) -> None:
    """A router that says how many experts it routes to, and over which width, must agree with w13."""
    weight = getattr(router, "weight", None)
    if isinstance(weight, torch.Tensor) and weight.dim() == 2:
        if tuple(weight.shape) != (w13.num_experts, w13.k):
            raise ValueError(f"{fn}: router weight is {tuple(weight.shape)}, but the experts need "
                             f"[num_experts, hidden] = {(w13.num_experts, w13.k)}")
