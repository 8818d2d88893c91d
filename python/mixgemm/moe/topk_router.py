"""Softmax top-k routing, the router of Mixtral and Qwen2/Qwen3-MoE, as a module with the call contract of
transformers' routers: ``router(hidden [T, hidden]) -> (router_logits [T, E], topk_weights [T, k], topk_ids [T, k])``.

:class:`~mixgemm.moe.QuantMoE` calls whatever router it is given through that contract. Loading a transformers
model keeps the model's own router module (its routing is then the model's by construction, and transformers'
``output_router_logits`` still records it); this one is for building a QuantMoE without transformers.

The families differ in renormalisation: Mixtral always divides the top-k probabilities by their sum,
Qwen2-MoE and Qwen3-MoE only when their config's ``norm_topk_prob`` is true. They also differ in the weights'
dtype: Mixtral's router returns them in float32, as this one does, while Qwen's rounds them to the logits'
dtype (fp16 / bf16) first, so this router matches a Qwen router to that rounding, not bit for bit.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def softmax_topk(router_logits: torch.Tensor, top_k: int, *, renormalize: bool):
    """``(topk_weights float32 [T, k], topk_ids int64 [T, k])``: the ``top_k`` largest softmax probabilities of
    ``router_logits [T, E]`` (computed in float32, as the models do, so fp16 logits do not tie or underflow),
    divided by their sum when ``renormalize``."""
    probs = F.softmax(router_logits, dim=-1, dtype=torch.float32)
    weights, ids = torch.topk(probs, top_k, dim=-1)
    if renormalize:
        weights = weights / weights.sum(dim=-1, keepdim=True)
    return weights, ids


class TopKRouter(torch.nn.Module):
    """A dense router ``logits = hidden @ weight.T`` (``weight [E, hidden]``, as a Linear without bias stores
    it) followed by :func:`softmax_topk`."""

    def __init__(self, weight: torch.Tensor, top_k: int, *, renormalize: bool) -> None:
        super().__init__()
        if not isinstance(weight, torch.Tensor) or weight.dim() != 2 or not weight.dtype.is_floating_point:
            got = f"{weight.dtype} {tuple(weight.shape)}" if isinstance(weight, torch.Tensor) else type(weight).__name__
            raise ValueError(f"TopKRouter: weight must be a 2-D float tensor [num_experts, hidden], got {got}")
        if isinstance(top_k, bool) or not isinstance(top_k, int) or not 1 <= top_k <= weight.shape[0]:
            raise ValueError(f"TopKRouter: top_k must be an int in 1 .. num_experts = {weight.shape[0]}, got {top_k!r}")
        self.weight = torch.nn.Parameter(weight, requires_grad=False)
        self.top_k = top_k
        self.num_experts = weight.shape[0]
        self.renormalize = bool(renormalize)

    def forward(self, hidden_states: torch.Tensor):
        logits = F.linear(hidden_states.reshape(-1, self.weight.shape[1]), self.weight)
        weights, ids = softmax_topk(logits, self.top_k, renormalize=self.renormalize)
        return logits, weights, ids

    def extra_repr(self) -> str:
        return f"num_experts={self.num_experts}, top_k={self.top_k}, renormalize={self.renormalize}"
