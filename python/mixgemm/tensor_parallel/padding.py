"""Zero columns and rows that make a shard's N and K multiples of what the weight layouts hold (geometry.py
says how many). Padding is appended in packed form, so nothing is unpacked: zero words are codes 0, and the
padded groups' and columns' scales are 0, so every padded weight is exactly 0 whatever the format reads as its
zero point (AWQ, GPTQ v1 or v2, symmetric).

A zero column's output is 0 and is narrowed away; a zero row multiplies whatever input column the layer feeds
it (``input_index`` points pad rows at column 0) by 0, adding nothing.
"""

from __future__ import annotations

from typing import Optional

import torch

from .geometry import ShardGeometry


def pad_columns(t: Optional[torch.Tensor], count: int) -> Optional[torch.Tensor]:
    """``count`` zero columns appended to a 2-D tensor (packed words or scales)."""
    if t is None or count == 0:
        return t
    return torch.cat([t, t.new_zeros(t.shape[0], count)], dim=1)


def pad_rows(t: Optional[torch.Tensor], count: int) -> Optional[torch.Tensor]:
    if t is None or count == 0:
        return t
    return torch.cat([t, t.new_zeros(count, *t.shape[1:])], dim=0)


def pad_shard(g: ShardGeometry, fmt: str, qweight: torch.Tensor, scales: torch.Tensor,
              qzeros: Optional[torch.Tensor], k_pad: Optional[int] = None):
    """``(qweight, scales, qzeros)`` of a shard of ``g.k_size + k_pad`` x ``g.n_size`` rows/columns padded to
    ``g.weight_k`` x ``g.weight_n`` (``k_pad`` defaults to ``g.k_pad``; 0 when the rows are already there)."""
    per_word = 32 // g.bits
    k_pad = g.k_pad if k_pad is None else k_pad
    n_words = g.n_pad // per_word
    if fmt == "awq":
        qweight = pad_rows(pad_columns(qweight, n_words), k_pad)
    else:
        qweight = pad_rows(pad_columns(qweight, g.n_pad), k_pad // per_word)
    groups = k_pad // g.shard_group
    scales = pad_rows(pad_columns(scales, g.n_pad), groups)
    qzeros = pad_rows(pad_columns(qzeros, n_words), groups)
    return qweight, scales, qzeros


def pad_bias(g: ShardGeometry, bias: Optional[torch.Tensor]) -> Optional[torch.Tensor]:
    if bias is None or g.n_pad == 0:
        return bias
    return torch.cat([bias, bias.new_zeros(g.n_pad)])


def input_index(g: ShardGeometry, device) -> Optional[torch.Tensor]:
    """The columns of the shard's input each row of the padded weight reads: its own, then column 0 for the
    zero rows. None when K is not padded (the input goes to the GEMM as it is)."""
    if g.k_pad == 0:
        return None
    return torch.cat([torch.arange(g.k_size, device=device), torch.zeros(g.k_pad, dtype=torch.long, device=device)])
