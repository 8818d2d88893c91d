"""The sm90 form of the grouped GEMM (cpp/mixgemm/moe/sm90/): CUTLASS 3.x's pointer-array wgmma mixed-input kernel
over sm90-layout experts, for experts that get many tokens each.

TMA moves boxes of consecutive rows, so the form works on rows sorted by expert (a routing with ``block_m = 1``:
each expert's slots one unpadded run from ``expert_start[e]``): x's rows are gathered into that order, the
products come out in it, and :func:`combine` sums them back per token (or, with ``top_k = 1``, puts them back
in slot order). The gated projection's ``SiLU(gate) * up`` is a pass between the GEMMs (:func:`silu_mul`).
Every pass reads the device-side count of rows in use, never the host: CUDA graphs replay with any routing.
"""

from __future__ import annotations

import torch

from .. import device, workspace
from .._runtime import current_stream, device_guard
from .experts import ExpertWeights
from .routing import Routing


def gather(x: torch.Tensor, rows: torch.Tensor, routing: Routing) -> torch.Tensor:
    """``out[p] = x[rows[p]]`` for the sorted positions in use (``rows``: the routing's token_of or slot_of),
    ``[num_slots, k]``; rows past the positions in use are left unwritten."""
    from .. import _C

    out = torch.empty((routing.num_slots, x.shape[1]), dtype=x.dtype, device=x.device)
    with device_guard(x.device):
        _C.moe.gather_rows(x.data_ptr(), x.shape[0], rows.data_ptr(), routing.num_padded.data_ptr(), out.data_ptr(),
                           routing.num_slots, x.shape[1], current_stream(x.device))
    return out


def gemm_sorted(xs: torch.Tensor, experts: ExpertWeights, routing: Routing, config: str) -> torch.Tensor:
    """Row p of the result ``[num_slots, experts.n]`` = ``xs[p] @ dequant(W[expert of p])`` for the positions in
    use (gated weights: the gate and up columns still interleaved in runs of 8)."""
    from .. import _C

    fn = "mixgemm.moe.grouped_gemm (sm90 form)"
    if routing.block_m != 1:
        raise ValueError(f"{fn}: config {config} needs an unpadded routing (block_m = 1), got block_m = "
                         f"{routing.block_m}")
    out = torch.empty((routing.num_slots, experts.n), dtype=xs.dtype, device=xs.device)
    sm_count = device.facts(fn, xs.device).sm_count
    key = experts.key.as_tuple()
    stream = current_stream(xs.device)
    nbytes = _C.moe.sm90_workspace_bytes(config, key, experts.num_experts, sm_count)
    scratch = workspace.scratch(xs.device, stream, nbytes)
    with device_guard(xs.device):
        _C.moe.sm90_grouped_gemm(config, key, xs.data_ptr(), experts.packed.data_ptr(), experts.scales.data_ptr(),
                                 experts.offsets.data_ptr(), out.data_ptr(), routing.expert_start.data_ptr(),
                                 experts.num_experts, routing.num_slots, experts.n, experts.k, experts.group_size,
                                 experts.expert_bytes, experts.scales.stride(0), scratch.data_ptr(), nbytes, sm_count,
                                 stream)
    return out


def silu_mul(h: torch.Tensor, experts: ExpertWeights, routing: Routing) -> torch.Tensor:
    """``SiLU(gate) * up`` of a gated projection's sorted rows ``[num_slots, 2 x inter]`` (runs of 8 interleaved),
    ``[num_slots, inter]``."""
    from .. import _C

    inter = h.shape[1] // 2
    out = torch.empty((h.shape[0], inter), dtype=h.dtype, device=h.device)
    with device_guard(h.device):
        _C.moe.silu_mul_runs(experts.key.as_tuple(), h.data_ptr(), routing.num_padded.data_ptr(), out.data_ptr(),
                             h.shape[0], inter, current_stream(h.device))
    return out


def combine(sorted_rows: torch.Tensor, experts: ExpertWeights, routing: Routing, weights: torch.Tensor | None,
            top_k: int) -> torch.Tensor:
    """``y[t] = sum_j weights[t, j] * sorted_rows[position of slot t * top_k + j]`` (fp32 sum in j order; weights
    None: 1), ``[num_slots / top_k, n]``: with ``top_k = routing.top_k`` the MoE layer's output per token, with
    ``top_k = 1`` the rows back in slot order."""
    from .. import _C

    tokens = routing.num_slots // top_k
    y = torch.empty((tokens, sorted_rows.shape[1]), dtype=sorted_rows.dtype, device=sorted_rows.device)
    with device_guard(y.device):
        _C.moe.combine_rows(experts.key.as_tuple(), sorted_rows.data_ptr(),
                            sorted_rows.shape[0], routing.position_of.data_ptr(),
                            0 if weights is None else weights.data_ptr(), y.data_ptr(), tokens, top_k,
                            sorted_rows.shape[1], current_stream(y.device))
    return y
