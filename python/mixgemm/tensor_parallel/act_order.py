"""Row-parallel shards of GPTQ act-order layers (``desc_act``: ``g_idx`` puts each row of K in any group).

A contiguous range of rows (what a row-parallel rank takes, since its input columns come contiguous from the
column-parallel layer before it) then holds parts of many groups. mixgemm's kernels read groups of equal size,
contiguous after prepack's permutation of K, so:

* a **closed** shard, one holding every row of each group it touches (act-order quantized per shard, or
  ``static_groups``), keeps those groups: their scale rows, and ``g_idx`` renumbered; prepack permutes as
  for any act-order layer;
* any other shard is **regrouped**: its rows sorted by group, each group's rows split into groups of
  ``G' = gcd(G, 32)`` (32: the kernel paths' smallest group) whose last one is padded with zero rows (code =
  the group's zero point), and the padded weight stored in plain group order. The layer gathers its input
  through ``input_index`` (row -> input column; pad rows read column 0, times 0). The padded K is at most
  ``K/world + (G' - 1) * groups touched``, rounded up to 64: for G = 128 and random act-order about 25% more
  rows at TP 2 (each group's ~64 rows rounded to 64 or 96), more at higher TP. Exact, at that cost.

Plain-order (AWQ, or GPTQ without act-order) row shards are regrouped the same way, with ``g_idx = k // G``,
when cutting them at whole groups would leave groups smaller than the kernel paths' 32 rows (Qwen2.5-72B's
down_proj at TP 8: shards of 3696 rows start a multiple of 16 rows into a group, so the cut needs groups of
gcd(128, 3696) = 16): only their first and last groups are partial, so that costs a few padded rows and the
input gather, where groups of 16 would leave only the dequant path, which expands the whole weight on every
call.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Optional

import torch

from .. import formats
from .geometry import ShardGeometry, check_runs, kernel_rule, padded
from .slicing import slice_qweight


@dataclasses.dataclass
class ActOrderShard:
    qweight: torch.Tensor
    scales: torch.Tensor
    qzeros: Optional[torch.Tensor]
    g_idx: Optional[torch.Tensor]
    format: str
    geometry: ShardGeometry
    input_index: Optional[torch.Tensor]


def is_plain_order(g_idx: torch.Tensor, group_size: int) -> bool:
    """Whether ``g_idx`` is the plain ``k // G`` (GPTQ writes it for every layer, act-order or not)."""
    return torch.equal(g_idx.long(), torch.arange(g_idx.shape[0], device=g_idx.device) // group_size)


def row_shard(g: ShardGeometry, fmt: str, qweight, scales: torch.Tensor, qzeros: Optional[torch.Tensor],
              g_idx: torch.Tensor, act_order: bool = True) -> ActOrderShard:
    """The row shard ``g`` (columns: all N) of an act-order GPTQ layer, or (``act_order=False``, ``g_idx`` the
    plain ``k // G``) a plain-order one to regroup; ``scales`` and ``qzeros`` whole (every group may hold rows
    of this shard), ``g_idx`` the full layer's."""
    qweight_rows = slice_qweight(g, fmt, qweight)
    # Everything on the device the weight's rows were read to (g_idx may come from elsewhere, such as a file).
    rows_g = g_idx[g.k_start: g.k_start + g.k_size].long().to(qweight_rows.device)
    scales = scales.to(qweight_rows.device)
    qzeros = None if qzeros is None else qzeros.to(qweight_rows.device)
    groups = scales.shape[0]
    counts = torch.bincount(rows_g, minlength=groups)
    touched = counts.nonzero().flatten()
    closed = bool((counts[touched] == g.group_size).all())
    if act_order and closed and g.k_size % kernel_rule().k_multiple == 0:
        # K needs no padding (whole groups, a multiple of 64 rows); N may (padded() checks the rules).
        geometry = padded(dataclasses.replace(g, shard_group=g.group_size))
        renumber = torch.full((groups,), -1, dtype=torch.long, device=rows_g.device)
        renumber[touched] = torch.arange(touched.numel(), device=rows_g.device)
        return ActOrderShard(qweight_rows, scales.index_select(0, touched),
                             None if qzeros is None else qzeros.index_select(0, touched),
                             renumber[rows_g].to(torch.int32), fmt, geometry, None)
    return _regroup(g, fmt, qweight_rows, scales, qzeros, rows_g, counts, touched)


def regroup_geometry(g: ShardGeometry, counts: torch.Tensor) -> tuple[ShardGeometry, torch.Tensor]:
    """The geometry of the regrouped shard ``g`` whose rows fall ``counts[t]`` into each group t, and the rows
    each group gets (its count rounded up to whole groups of ``gcd(G, 32)``). K is padded to the kernel
    rule's multiple with whole zero groups; N as for any shard."""
    rule = kernel_rule()
    small = math.gcd(g.group_size, rule.group_multiple)
    slots = (counts + small - 1) // small * small
    used = int(slots.sum())
    weight_k = used + -used % math.lcm(rule.k_multiple, small)
    geometry = dataclasses.replace(g, shard_group=small, k_pad=weight_k - g.k_size, n_pad=-g.n_size % rule.n_multiple)
    check_runs(geometry)
    return geometry, slots


def _regroup(g: ShardGeometry, fmt: str, qweight_rows: torch.Tensor, scales: torch.Tensor,
             qzeros: Optional[torch.Tensor], rows_g: torch.Tensor, counts: torch.Tensor,
             touched: torch.Tensor) -> ActOrderShard:
    bits, device = g.bits, rows_g.device
    geometry, slots = regroup_geometry(g, counts)
    small, used, weight_k = geometry.shard_group, int(slots.sum()), geometry.weight_k
    codes, zeros = _unpack(fmt, bits, qweight_rows, qzeros)  # codes [K/world, N]: this shard only
    mid = 1 << (bits - 1)

    # Destination of each row: its group's first slot + its place among the group's rows (stable order).
    order = torch.sort(rows_g, stable=True).indices
    sorted_g = rows_g[order]
    first_row = torch.cumsum(counts, 0) - counts
    first_slot = torch.cumsum(slots, 0) - slots
    dest = first_slot[sorted_g] + torch.arange(g.k_size, device=device) - first_row[sorted_g]

    # The group of each padded row (-1: trailing zero groups), which gives pad rows their group's zero code.
    slot_group = torch.full((weight_k,), -1, dtype=torch.long, device=device)
    slot_group[:used] = torch.repeat_interleave(torch.arange(counts.numel(), device=device), slots)
    new_codes = torch.full((weight_k, codes.shape[1]), mid, dtype=torch.uint8, device=device)
    if zeros is not None:
        real = slot_group >= 0
        new_codes[real] = zeros.index_select(0, slot_group[real])
    new_codes[dest] = codes.index_select(0, order)

    group_of = slot_group[::small]  # one per new group
    real_group = group_of >= 0
    new_scales = scales.new_zeros(weight_k // small, scales.shape[1])
    new_scales[real_group] = scales.index_select(0, group_of[real_group])
    new_qzeros = None
    if zeros is not None:
        new_zeros = torch.full((weight_k // small, zeros.shape[1]), mid, dtype=torch.uint8, device=device)
        new_zeros[real_group] = zeros.index_select(0, group_of[real_group])
        pack_z = formats.pack_gptq_zeros if bits == 4 else formats.pack_gptq_zeros_int8
        new_qzeros = pack_z(new_zeros, v1=False)
    pack_q = formats.pack_gptq_qweight if bits == 4 else formats.pack_gptq_qweight_int8
    index = torch.zeros(weight_k, dtype=torch.long, device=device)
    index[dest] = order
    return ActOrderShard(pack_q(new_codes), new_scales, new_qzeros, None, "gptq_v2", geometry, index)


def _unpack(fmt: str, bits: int, qweight_rows: torch.Tensor, qzeros: Optional[torch.Tensor]):
    """Codes ``[rows, N]`` and zero points ``[groups, N]`` as the format means them (GPTQ v1: stored + 1)."""
    if fmt == "awq":
        return formats.unpack_awq(qweight_rows), None if qzeros is None else formats.unpack_awq(qzeros)
    unpack_q = formats.unpack_gptq_qweight if bits == 4 else formats.unpack_gptq_qweight_int8
    unpack_z = formats.unpack_gptq_zeros if bits == 4 else formats.unpack_gptq_zeros_int8
    return unpack_q(qweight_rows), None if qzeros is None else unpack_z(qzeros, v1=fmt == "gptq")
