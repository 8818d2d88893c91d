"""One rank's shard of an AWQ or GPTQ layer, cut straight out of the packed tensors: nothing is unpacked.

The cuts that keep words whole (ShardGeometry guarantees them):

* AWQ ``qweight [K, N/8]``: K is not packed, so any rows; N is packed 8 columns to a word (in AWQ's
  interleaved order, but within the word), so a cut at a multiple of 8 columns is a cut between words;
* GPTQ ``qweight [K/P, N]`` (P = 32 / bits: 8 for int4, 4 for int8): N is not packed; K is packed P rows to a
  word, so rows at multiples of P;
* ``scales [K/G, N]``, ``qzeros [K/G, N/P]`` (both formats pack zeros P columns to a word): the groups that
  hold the shard's rows, each repeated ``G / shard_group`` times when the shard's groups are smaller than the
  checkpoint's (see geometry.py), and columns as the qweight's.
"""

from __future__ import annotations

from typing import Optional

import torch

from .geometry import ShardGeometry
from .sources import read
from .spec import COLUMN


def slice_qweight(g: ShardGeometry, fmt: str, qweight) -> torch.Tensor:
    """The shard's rows and columns of ``qweight`` (``fmt`` "awq" or a GPTQ format)."""
    per_word = 32 // g.bits
    k0, k1, n0, n1 = g.k_start, g.k_start + g.k_size, g.n_start, g.n_start + g.n_size
    if fmt == "awq":
        return read(qweight, slice(k0, k1), slice(n0 // per_word, n1 // per_word))
    return read(qweight, slice(k0 // per_word, k1 // per_word), slice(n0, n1))


def slice_group_rows(g: ShardGeometry, tensor, packed_columns: bool) -> Optional[torch.Tensor]:
    """The shard's rows of a per-group tensor (``scales``, or ``qzeros`` with ``packed_columns``), in the
    shard's group size, and its columns."""
    if tensor is None:
        return None
    per_word = 32 // g.bits if packed_columns else 1
    first, stop, skip = g.group_rows
    rows = read(tensor, slice(first, stop), slice(g.n_start // per_word, (g.n_start + g.n_size) // per_word))
    return refine_groups(rows, g.group_size // g.shard_group, skip, g.k_size // g.shard_group)


def refine_groups(rows: torch.Tensor, repeat: int, skip: int, count: int) -> torch.Tensor:
    """Rows of groups of G as rows of groups of G / ``repeat`` (each row ``repeat`` times; exact, since the
    smaller groups share the larger one's scale and zero point), ``count`` of them from the ``skip``-th."""
    if repeat > 1:
        rows = rows.repeat_interleave(repeat, dim=0)
    return rows[skip: skip + count].contiguous()


def slice_bias(g: ShardGeometry, bias) -> Optional[torch.Tensor]:
    """Column-parallel: the shard's entries. Row-parallel: the whole bias on rank 0 and none elsewhere, so the
    all-reduce adds it exactly once."""
    if bias is None:
        return None
    if g.spec.style == COLUMN:
        return read(bias, slice(g.n_start, g.n_start + g.n_size))
    return read(bias) if g.spec.rank == 0 else None
