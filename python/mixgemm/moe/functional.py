"""The fused mixture-of-experts layer as one function: what vLLM's ``fused_moe`` computes, on the grouped GEMM.

    out[t] = sum_j  w[t, j] * ( SiLU(x[t] @ W_gate[e]) * (x[t] @ W_up[e]) ) @ W_down[e],   e = topk_ids[t, j]

One token: two launches, the decode GEMVs' direct mode (direct.py). Otherwise three launches and a sum: the
routing (once, shared by both projections), the gate/up grouped GEMM with SiLU(gate)
* up in its epilogue, the down grouped GEMM with the top-k weight in its epilogue, and the sum over each token's
top-k rows (a fixed-order reduction, so the result is deterministic: no atomics). Where the sm90 form runs
(many tokens per expert, sm90-layout experts), rows stay sorted by expert from the gather of x to the weighted
sum: gather, gate/up GEMM, SiLU(gate) * up, down GEMM, and the sum over each token's top-k rows.
"""

from __future__ import annotations

import torch

from .. import _checks, device
from . import heuristic, sm90_form
from .direct import fused_moe_one_token
from .experts import ExpertWeights
from .grouped import grouped_gemm
from .routing import check_topk_ids, route


def plan_tiles(num_tokens: int, top_k: int, w13: ExpertWeights, w2: ExpertWeights, sm_count: int):
    """(block_m, config of w13, config of w2) the heuristic picks for a call: the sm90 form for both projections
    (block_m 1) where it runs both, else tiles of the sm80 kernel or the GEMV."""
    slots, E = num_tokens * top_k, w13.num_experts
    sm90_13, sm90_2 = (heuristic.sm90_config_for(slots, E, w) for w in (w13, w2))
    if sm90_13 and sm90_2:
        return 1, sm90_13, sm90_2
    block_m = heuristic.block_m_for(slots, E, w13.key)
    return (block_m, heuristic.config_for(block_m, slots, E, w13.n, w13.key, sm_count),
            heuristic.config_for(block_m, slots, E, w2.n, w2.key, sm_count))


# What the layer reads of each projection: an ExpertWeights, or an object with its fields (the CPU tests'
# stand-ins for QuantMoE).
_EXPERT_FIELDS = ("num_experts", "n", "k", "gated", "act_dtype", "bits", "group_size")


def check_layer(fn: str, w13: ExpertWeights, w2: ExpertWeights) -> None:
    """The two projections make one SwiGLU expert layer: w13 ``[hidden, 2 x inter]`` gated, w2 ``[inter, hidden]``
    plain, the same experts and activation dtype. Shared by fused_moe and QuantMoE."""
    for name, w in (("w13", w13), ("w2", w2)):
        missing = [f for f in _EXPERT_FIELDS if not hasattr(w, f)]
        if missing:
            raise ValueError(f"{fn}: {name} must be an ExpertWeights (mixgemm.moe.prepack_experts), got "
                             f"{type(w).__name__} (no {', '.join(missing)})")
    if not w13.gated:
        raise ValueError(f"{fn}: w13 must be gated: the gate/up projection (prepack_experts(..., gated=True) of "
                         "the [gate | up] weights)")
    if w2.gated:
        raise ValueError(f"{fn}: w2 (the down projection) must not be gated")
    if w13.num_experts != w2.num_experts:
        raise ValueError(f"{fn}: w13 holds {w13.num_experts} experts but w2 {w2.num_experts}")
    if w13.act_dtype != w2.act_dtype:
        raise ValueError(f"{fn}: w13 is {w13.act_dtype}, w2 {w2.act_dtype}; both must share the activation dtype")
    if w13.n != 2 * w2.k or w13.k != w2.n:
        raise ValueError(f"{fn}: w13 is [K={w13.k}, N={w13.n}] and w2 [K={w2.k}, N={w2.n}]; an expert needs w13 "
                         "[hidden, 2 x intermediate] and w2 [intermediate, hidden]")


def fused_moe(x: torch.Tensor, w13: ExpertWeights, w2: ExpertWeights, topk_weights: torch.Tensor,
              topk_ids: torch.Tensor, *, check_ids: bool = True) -> torch.Tensor:
    """The MoE layer ``[tokens, hidden]`` for x ``[tokens, hidden]`` (fp16/bf16), gated w13 (``[hidden, 2 x
    inter]``, prepack_experts(..., gated=True)), w2 (``[inter, hidden]``) and the router's ``topk_weights``
    (float; renormalized or not, as the model does) and ``topk_ids`` ``[tokens, top_k]``.

    ``check_ids``: verify every id names an expert (a host sync, skipped under CUDA-graph capture and
    torch.compile). Where it is skipped or off, an id outside ``[0, experts)`` is the caller's bug the kernels
    cannot report: its slot's rows are never written, and that token's output is undefined (the kernels never
    read or write out of bounds). Routers that take the top-k of their own experts' scores cannot produce one
    (QuantMoE passes ``check_ids=False``)."""
    fn = "mixgemm.moe.fused_moe"
    check_layer(fn, w13, w2)
    _checks.check_tensor(fn, "x", x, (w13.act_dtype,), 2)
    if not isinstance(topk_ids, torch.Tensor):
        raise ValueError(f"{fn}: topk_ids must be a torch.Tensor [tokens, top_k], got {type(topk_ids).__name__}")
    if x.shape[1] != w13.k:
        raise ValueError(f"{fn}: x must be [tokens, hidden = {w13.k}], got {tuple(x.shape)}")
    if not isinstance(topk_weights, torch.Tensor) or topk_weights.shape != topk_ids.shape:
        raise ValueError(f"{fn}: topk_weights must be a tensor shaped like topk_ids {tuple(topk_ids.shape)}")
    if topk_ids.shape[0] != x.shape[0]:
        raise ValueError(f"{fn}: topk_ids has {topk_ids.shape[0]} tokens, x {x.shape[0]}")
    if not topk_weights.is_floating_point():
        raise ValueError(f"{fn}: topk_weights must be floating point, got {topk_weights.dtype}")
    tokens, top_k = topk_ids.shape
    gpu = device.facts(fn, x.device)
    block_m, config13, config2 = plan_tiles(tokens, top_k, w13, w2, gpu.sm_count)
    if tokens == 1 and heuristic.is_decode_form(config13) and heuristic.is_decode_form(config2):
        # One token: the decode GEMVs route themselves and the down one sums the top-k (direct.py).
        check_topk_ids("mixgemm.moe.fused_moe", topk_ids, w13.num_experts, check_ids)
        return fused_moe_one_token(x, w13, w2, topk_weights.float().contiguous(), topk_ids, config13, config2)
    routing = route(topk_ids, w13.num_experts, block_m, check_range=check_ids)
    if heuristic.is_sm90_form(config13):
        h = sm90_form.silu_mul(sm90_form.gemm_sorted(sm90_form.gather(x, routing.token_of, routing), w13, routing,
                                                     config13), w13, routing)
        return sm90_form.combine(sm90_form.gemm_sorted(h, w2, routing, config2), w2, routing,
                                 topk_weights.float().contiguous(), top_k)
    h = grouped_gemm(x, w13, routing, x_rows="token", config=config13)
    y = grouped_gemm(h, w2, routing, x_rows="slot", topk_weights=topk_weights.float().contiguous(), config=config2)
    return y.view(tokens, top_k, w2.n).sum(dim=1)
