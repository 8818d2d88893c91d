"""One token's MoE layer in two launches: the decode GEMV's direct mode (cpp/mixgemm/decode/gemv_kernel.cuh,
``GemvParams::Grouped``), with no routing pass and no separate top-k sum.

A router's top-k names ``top_k`` distinct experts for a token, so with one token sorting its slots by expert
gains nothing: block z of each GEMV is slot z and reads expert ``topk_ids[z]``'s weights. The gate/up GEMV
writes ``SiLU(gate) * up`` per slot; the down GEMV's blocks of the token store their fp32 rows and count their
arrivals per 64-column strip, and the last one sums them times the top-k weights in slot order (deterministic).
At decode every launch costs about as much as reading an expert, so the routing kernel and the sum were a
quarter of the layer (docs/perf-notes/2026-11-26-moe-sm90-form.md, "Decode").
"""

from __future__ import annotations

import torch

from .. import device, workspace
from .._runtime import current_stream, device_guard
from . import heuristic
from .experts import ExpertWeights

FLOAT32_BYTES = 4


def fused_moe_one_token(x: torch.Tensor, w13: ExpertWeights, w2: ExpertWeights, topk_weights: torch.Tensor,
                        topk_ids: torch.Tensor, config13: str, config2: str) -> torch.Tensor:
    """The layer for x ``[1, hidden]``: topk_ids ``[1, top_k]`` (int32/int64, contiguous), topk_weights float32
    ``[1, top_k]`` contiguous; the configs are decode-form names (the heuristic's for 8-row blocks)."""
    top_k = topk_ids.shape[1]
    h = torch.empty((top_k, w13.out_features), dtype=x.dtype, device=x.device)
    _launch(config13, w13, x, h, topk_ids, rows_by_token=True, weights=None, fold=False)
    y = torch.empty((1, w2.n), dtype=x.dtype, device=x.device)
    _launch(config2, w2, h, y, topk_ids, rows_by_token=False, weights=topk_weights, fold=True)
    return y


def _launch(config: str, experts: ExpertWeights, x: torch.Tensor, out: torch.Tensor, topk_ids: torch.Tensor, *,
            rows_by_token: bool, weights: torch.Tensor | None, fold: bool) -> None:
    from .. import _C

    slots = topk_ids.numel()
    sm_count = device.facts("mixgemm.moe.fused_moe", x.device).sm_count
    split_k = heuristic.split_for_direct(slots, experts.n, experts.k, sm_count)
    stream = current_stream(x.device)
    scratch_ptr = semaphores_ptr = 0
    if split_k > 1 or fold:
        strips = experts.n // heuristic.DECODE_STRIP_N
        scratch = workspace.scratch(x.device, stream, FLOAT32_BYTES * split_k * slots * experts.n)
        # A semaphore per (token, strip) when folding, per (slot, strip) when only K is split.
        counters = workspace.semaphores(x.device, stream, (1 if fold else slots) * strips)
        scratch_ptr, semaphores_ptr = scratch.data_ptr(), counters.data_ptr()
    with device_guard(x.device):
        _C.moe.grouped_gemv_direct(config, experts.key.as_tuple(), experts.gated, fold, x.data_ptr(),
                                   experts.packed.data_ptr(), experts.scales.data_ptr(), experts.offsets.data_ptr(),
                                   out.data_ptr(), topk_ids.data_ptr(), topk_ids.dtype == torch.int64,
                                   topk_ids.shape[1], experts.num_experts, rows_by_token,
                                   0 if weights is None else weights.data_ptr(), x.shape[0], experts.n, experts.k,
                                   experts.group_size, slots, experts.packed.stride(0), experts.scales.stride(0),
                                   split_k, scratch_ptr, semaphores_ptr, stream)
