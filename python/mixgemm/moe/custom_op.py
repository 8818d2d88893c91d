"""The fused MoE layer as the ``torch.library`` custom op ``mixgemm::fused_moe``, for torch.compile and CUDA
graphs (why custom ops at all: :mod:`mixgemm.library`)::

    mixgemm::fused_moe(Tensor x, Tensor w13_packed, Tensor w13_scales, Tensor w13_offsets, int w13_group_size,
                       Tensor w2_packed, Tensor w2_scales, Tensor w2_offsets, int w2_group_size,
                       Tensor topk_weights, Tensor topk_ids, bool scale_only, bool check_ids) -> Tensor

An :class:`~mixgemm.moe.ExpertWeights` is a dataclass the schema cannot carry, so the op takes its tensors and
rebuilds it: the experts, N and K from the scales' shape ``[E, K / G, N]``, the width from the packed shape;
``scale_only`` (which the grouped GEMM does not read: it always adds the offsets) is the two projections' one flag.
Use :func:`fused_moe_op` (the wrapper), not ``torch.ops.mixgemm.fused_moe`` directly.
"""

# No ``from __future__ import annotations``: torch.library reads the op functions' annotations.

import torch

from .. import layouts
from ..library import _define, eager_call
from .experts import ExpertWeights
from .functional import fused_moe


def _experts_of(packed: torch.Tensor, scales: torch.Tensor, offsets: torch.Tensor, group_size: int, gated: bool,
                scale_only: bool) -> ExpertWeights:
    E, groups, n = scales.shape
    bits = layouts.bits_of_packed("sm80", packed[0])
    if bits is None:
        raise ValueError(f"fused_moe_op: packed experts of shape {tuple(packed.shape)} are no sm80-layout int4 or "
                         "int8 weights (mixgemm.moe.prepack_experts)")
    return ExpertWeights(packed, scales, offsets, group_size, bits, scales.dtype, E, n, groups * group_size,
                         gated=gated, scale_only=scale_only)


def _fused_moe_op(x: torch.Tensor, w13_packed: torch.Tensor, w13_scales: torch.Tensor, w13_offsets: torch.Tensor,
                  w13_group_size: int, w2_packed: torch.Tensor, w2_scales: torch.Tensor, w2_offsets: torch.Tensor,
                  w2_group_size: int, topk_weights: torch.Tensor, topk_ids: torch.Tensor,
                  scale_only: bool, check_ids: bool) -> torch.Tensor:
    w13 = _experts_of(w13_packed, w13_scales, w13_offsets, w13_group_size, True, scale_only)
    w2 = _experts_of(w2_packed, w2_scales, w2_offsets, w2_group_size, False, scale_only)
    return fused_moe(x, w13, w2, topk_weights, topk_ids, check_ids=check_ids)


def _fused_moe_fake(x, w13_packed, w13_scales, w13_offsets, w13_group_size, w2_packed, w2_scales, w2_offsets,
                    w2_group_size, topk_weights, topk_ids, scale_only, check_ids):
    return x.new_empty((x.shape[0], w2_scales.shape[2]))


_define("fused_moe", "(Tensor x, Tensor w13_packed, Tensor w13_scales, Tensor w13_offsets, int w13_group_size, "
        "Tensor w2_packed, Tensor w2_scales, Tensor w2_offsets, int w2_group_size, Tensor topk_weights, "
        "Tensor topk_ids, bool scale_only, bool check_ids) -> Tensor", _fused_moe_op, _fused_moe_fake)


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
    return torch.ops.mixgemm.fused_moe(x, w13.packed, w13.scales, w13.offsets, w13.group_size, w2.packed, w2.scales,
                                       w2.offsets, w2.group_size, topk_weights, topk_ids, w13.scale_only, check_ids)
