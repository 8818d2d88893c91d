"""The fused MoE layer as the ``torch.library`` custom op ``mixgemm::fused_moe``, for torch.compile and CUDA
graphs (why custom ops at all: :mod:`mixgemm.library`)::

    mixgemm::fused_moe(Tensor x, Tensor w13_packed, Tensor w13_scales, Tensor w13_offsets, int w13_group_size,
                       Tensor w2_packed, Tensor w2_scales, Tensor w2_offsets, int w2_group_size,
                       Tensor topk_weights, Tensor topk_ids, bool scale_only, bool check_ids, str layout) -> Tensor

An :class:`~mixgemm.moe.ExpertWeights` is a dataclass the schema cannot carry, so the op takes its tensors and
rebuilds it: the experts, N and K from the scales' shape ``[E, K / G, N]``, the width from the packed shape;
``scale_only`` (which the grouped GEMM does not read: it always adds the offsets) and ``layout`` ("sm80" or
"sm90") are the two projections' shared flags.
Use :func:`fused_moe_op` (the wrapper), not ``torch.ops.mixgemm.fused_moe`` directly.
"""

# No ``from __future__ import annotations``: torch.library reads the op functions' annotations.

import torch

from .. import layouts
from ..library import _define, eager_call
from .experts import ExpertWeights
from .functional import fused_moe


def _experts_of(packed: torch.Tensor, scales: torch.Tensor, offsets: torch.Tensor, group_size: int, gated: bool,
                scale_only: bool, layout: str) -> ExpertWeights:
    E, groups, n = scales.shape
    bits = layouts.bits_of_packed(layout, packed[0]) if layout in ("sm80", "sm90") else None
    if bits is None:
        raise ValueError(f"fused_moe_op: packed experts of shape {tuple(packed.shape)} are no {layout}-layout int4 "
                         "or int8 weights (mixgemm.moe.prepack_experts)")
    return ExpertWeights(packed, scales, offsets, group_size, bits, scales.dtype, E, n, groups * group_size,
                         gated=gated, scale_only=scale_only, layout=layout)


def _fused_moe_op(x: torch.Tensor, w13_packed: torch.Tensor, w13_scales: torch.Tensor, w13_offsets: torch.Tensor,
                  w13_group_size: int, w2_packed: torch.Tensor, w2_scales: torch.Tensor, w2_offsets: torch.Tensor,
                  w2_group_size: int, topk_weights: torch.Tensor, topk_ids: torch.Tensor,
                  scale_only: bool, check_ids: bool, layout: str) -> torch.Tensor:
    w13 = _experts_of(w13_packed, w13_scales, w13_offsets, w13_group_size, True, scale_only, layout)
    w2 = _experts_of(w2_packed, w2_scales, w2_offsets, w2_group_size, False, scale_only, layout)
    return fused_moe(x, w13, w2, topk_weights, topk_ids, check_ids=check_ids)


def _fused_moe_fake(x, w13_packed, w13_scales, w13_offsets, w13_group_size, w2_packed, w2_scales, w2_offsets,
                    w2_group_size, topk_weights, topk_ids, scale_only, check_ids, layout):
    return x.new_empty((x.shape[0], w2_scales.shape[2]))


_define("fused_moe", "(Tensor x, Tensor w13_packed, Tensor w13_scales, Tensor w13_offsets, int w13_group_size, "
        "Tensor w2_packed, Tensor w2_scales, Tensor w2_offsets, int w2_group_size, Tensor topk_weights, "
        "Tensor topk_ids, bool scale_only, bool check_ids, str layout) -> Tensor", _fused_moe_op, _fused_moe_fake)


def fused_moe_op(x: torch.Tensor, w13: ExpertWeights, w2: ExpertWeights, topk_weights: torch.Tensor,
                 topk_ids: torch.Tensor, *, check_ids: bool = True) -> torch.Tensor:
    """:func:`mixgemm.moe.fused_moe` through the custom op: same arguments, same result; works in eager mode,
    under CUDA-graph capture and inside ``torch.compile(fullgraph=True)``. A plain eager call goes to
    :func:`~mixgemm.moe.fused_moe` directly (the op's dispatch costs tens of microseconds)."""
    if eager_call(x):
        return fused_moe(x, w13, w2, topk_weights, topk_ids, check_ids=check_ids)
    for name, w in (("w13", w13), ("w2", w2)):
        if not isinstance(w, ExpertWeights):
            raise ValueError(f"fused_moe_op: {name} must be a mixgemm.moe.ExpertWeights, got {type(w).__name__}")
    if w13.layout != w2.layout:
        raise ValueError(f"fused_moe_op: w13 is packed in the {w13.layout} layout, w2 in the {w2.layout}; the op "
                         "takes one layout for both (prepack_experts(..., layout=...))")
    return torch.ops.mixgemm.fused_moe(x, w13.packed, w13.scales, w13.offsets, w13.group_size, w2.packed, w2.scales,
                                       w2.offsets, w2.group_size, topk_weights, topk_ids, w13.scale_only, check_ids,
                                       w13.layout)
