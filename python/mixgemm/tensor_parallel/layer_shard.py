"""One rank's shard of one quantized layer, from the full layer's checkpoint tensors (torch tensors, or lazy
sources that read only the slices asked for: sources.py) to what :func:`mixgemm.prepack` and
:class:`mixgemm.nn.QuantLinear` take: :func:`shard_checkpoint` returns a :class:`ShardedCheckpoint`, whose
:meth:`~ShardedCheckpoint.layer_shard` is the :class:`LayerShard` a QuantLinear keeps.

Formats: AWQ (``qweight [K, N/8]``), GPTQ v1/v2 (``qweight [K/P, N]``, int4 or int8, act-order ``g_idx``) and,
through :class:`~.sources.Transposed`, compressed-tensors (cut as GPTQ v2). With and without zero points.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Optional

import torch

from ..prepack_args import PrepackArgs
from . import act_order as act_order_rows
from . import padding, slicing
from .geometry import ShardGeometry, ShardShapeError, kernel_rule, padded, split_shard
from .sources import read, shape_of
from .spec import COLUMN, ShardSpec

FORMATS = ("awq", "gptq", "gptq_v2")


@dataclasses.dataclass
class LayerShard:
    """What a sharded QuantLinear holds beside its packed weight: its spec, the features its input and output
    have (the padded weight may be larger), and the input gather of a K-padded or regrouped shard."""

    spec: ShardSpec
    in_features: int
    out_features: int
    input_index: Optional[torch.Tensor] = None


@dataclasses.dataclass
class ShardedCheckpoint(PrepackArgs):
    """A shard in checkpoint form: prepack's arguments (``format`` may differ from the source's: a regrouped
    act-order shard is written as ``gptq_v2``; ``k`` and ``n`` are the shard's, padded) and its geometry."""

    geometry: ShardGeometry
    input_index: Optional[torch.Tensor] = None

    def to(self, device) -> "ShardedCheckpoint":
        moved = super().to(device)
        return dataclasses.replace(moved, input_index=None if self.input_index is None else self.input_index.to(device))

    def layer_shard(self) -> LayerShard:
        g = self.geometry
        return LayerShard(g.spec, g.k_size, g.n_size, self.input_index)

    def prepack_kwargs(self) -> dict:
        """Keywords of :func:`mixgemm.prepack` beside the three tensors."""
        kwargs = {"format": self.format, "group_size": self.geometry.shard_group}
        if self.bits != 4:
            kwargs["bits"] = self.bits
        if self.g_idx is not None:
            kwargs["g_idx"] = self.g_idx
        return kwargs


def full_shape(name: str, fmt: str, bits: int, qweight, scales, group_size: Optional[int]) -> tuple[int, int, int]:
    """``(K, N, G)`` of the full layer from its tensors' shapes (nothing is read)."""
    if fmt not in FORMATS:
        raise ValueError(f"{name}: format must be one of {FORMATS}, got {fmt!r}")
    if bits not in (4, 8) or (fmt == "awq" and bits != 4):
        raise ValueError(f"{name}: bits must be 4 (AWQ, GPTQ) or 8 (GPTQ), got {bits!r} for {fmt}")
    q_shape, s_shape = shape_of(qweight), shape_of(scales)
    if len(q_shape) != 2 or len(s_shape) != 2:
        raise ValueError(f"{name}: qweight and scales must be 2-D, got {q_shape} and {s_shape}")
    N = s_shape[1]
    K = q_shape[0] if fmt == "awq" else q_shape[0] * (32 // bits)
    expected = (K, N // 8) if fmt == "awq" else (K * bits // 32, N)
    if q_shape != expected or N % (32 // bits):
        layout = "[K, N/8]" if fmt == "awq" else f"[K/{32 // bits}, N]"
        raise ValueError(f"{name}: qweight must have shape {layout} with N = scales.shape[1] = {N}, got {q_shape}")
    groups = s_shape[0]
    if groups < 1 or K % groups:
        raise ValueError(f"{name}: scales has {groups} rows, which does not divide K = {K}")
    G = K // groups
    if group_size is not None and group_size != G:
        raise ValueError(f"{name}: group_size = {group_size} disagrees with K / scales.shape[0] = {G}")
    return K, N, G


def _check_companions(name: str, K: int, N: int, G: int, per_word: int, qzeros, g_idx, bias) -> None:
    """qzeros, g_idx and bias agree with the weight's K, N and G (from their shapes; nothing is read)."""
    expected = {"qzeros": (K // G, N // per_word), "g_idx": (K,), "bias": (N,)}
    for key, value in (("qzeros", qzeros), ("g_idx", g_idx), ("bias", bias)):
        if value is not None and shape_of(value) != expected[key]:
            raise ValueError(f"{name}.{key} must have shape {expected[key]} for K = {K}, N = {N}, group_size = {G}, "
                             f"got {shape_of(value)}")


def _check_g_idx(name: str, g_idx: torch.Tensor, K: int, G: int) -> None:
    """The full layer's g_idx gives each of the K / G groups exactly G rows (the rule prepack and the whole-layer
    loader apply), checked before a row shard indexes scales with it."""
    if g_idx.dtype.is_floating_point or g_idx.dtype == torch.bool:
        raise ValueError(f"{name}.g_idx must hold integer group indices, got {g_idx.dtype}")
    groups = K // G
    g = g_idx.long()
    if int(g.min()) < 0 or int(g.max()) >= groups or not bool((torch.bincount(g, minlength=groups) == G).all()):
        raise ValueError(f"{name}.g_idx must give each of the {groups} groups exactly group_size = {G} rows of K "
                         "(act-order permutes rows; it does not resize groups)")


def needs_regroup(cut: ShardGeometry) -> bool:
    """Whether a plain-order row shard is regrouped (act_order.py) rather than cut at its own group size: when
    that size would be below the kernel paths' smallest group, and regrouping can reach it."""
    return cut.spec.style != COLUMN and cut.shard_group < math.gcd(cut.group_size, kernel_rule().group_multiple)


def plain_geometry(name: str, spec: ShardSpec, fmt: str, bits: int, K: int, N: int, G: int) -> ShardGeometry:
    """The geometry :func:`shard_checkpoint` gives a layer without act-order, from its shape alone (checked
    against the kernel rules: ShardShapeError otherwise). For load-time checks and the README's table."""
    per_word = 32 // bits
    cut = split_shard(name, spec, K, N, G, bits, 1 if fmt == "awq" else per_word, per_word)
    if needs_regroup(cut):
        rows_g = torch.arange(cut.k_start, cut.k_start + cut.k_size) // G
        return act_order_rows.regroup_geometry(cut, torch.bincount(rows_g, minlength=K // G))[0]
    return padded(cut)


def shard_checkpoint(name: str, spec: ShardSpec, fmt: str, bits: int, qweight, scales, qzeros=None, g_idx=None,
                     bias=None, group_size: Optional[int] = None) -> ShardedCheckpoint:
    """Rank ``spec.rank``'s shard of layer ``name`` stored in ``fmt`` ("awq", "gptq" v1 zeros, "gptq_v2").

    Reads only the shard's slices of ``qweight``, ``scales``, ``qzeros`` (a row-parallel act-order shard reads
    all scale and zero rows: any group may hold its rows) and ``bias``, and ``g_idx`` whole (K integers).
    A shard that cannot be cut at whole packed words, or that no kernel path runs even padded, is a
    :class:`~.geometry.ShardShapeError` naming the layer, the rank, the shard's shape and the rule."""
    K, N, G = full_shape(name, fmt, bits, qweight, scales, group_size)
    per_word = 32 // bits
    _check_companions(name, K, N, G, per_word, qzeros, g_idx, bias)
    k_pack = 1 if fmt == "awq" else per_word
    cut = split_shard(name, spec, K, N, G, bits, k_pack, per_word)
    index = read(g_idx)
    if index is not None and fmt != "awq":
        _check_g_idx(name, index, K, G)
    if index is not None and (fmt == "awq" or act_order_rows.is_plain_order(index, G)):
        index = None  # GPTQ writes g_idx = k // G for every layer: no act-order
    if spec.style != COLUMN and (index is not None or needs_regroup(cut)):
        plain = index is None
        order = torch.arange(K) // G if plain else index
        return _act_order_row(cut, fmt, qweight, scales, qzeros, order, bias, act_order=not plain)
    g = padded(cut)
    if index is not None and g.k_pad:
        raise ShardShapeError(f"{name}: {spec.describe()}: an act-order layer's K = {K} must be a multiple of 64 "
                              "(its groups are permuted, so no zero rows can be appended to the last)")
    qw = slicing.slice_qweight(g, fmt, qweight)
    sc = slicing.slice_group_rows(g, scales, packed_columns=False)
    qz = slicing.slice_group_rows(g, qzeros, packed_columns=True)
    qw, sc, qz = padding.pad_shard(g, fmt, qw, sc, qz)
    bias = padding.pad_bias(g, slicing.slice_bias(g, bias))
    return ShardedCheckpoint(qw, sc, qz, index, bias, fmt, bits, g, padding.input_index(g, qw.device))


def _act_order_row(cut: ShardGeometry, fmt: str, qweight, scales, qzeros, g_idx: torch.Tensor, bias,
                   act_order: bool) -> ShardedCheckpoint:
    all_scales = read(scales)  # row-parallel: every column, and every group may hold rows of this shard
    all_zeros = read(qzeros)
    shard = act_order_rows.row_shard(cut, fmt, qweight, all_scales, all_zeros, g_idx, act_order)
    g = shard.geometry
    qw, sc, qz = padding.pad_shard(g, shard.format, shard.qweight, shard.scales, shard.qzeros, k_pad=0)
    bias = padding.pad_bias(g, slicing.slice_bias(g, bias))
    return ShardedCheckpoint(qw, sc, qz, shard.g_idx, bias, shard.format, g.bits, g, shard.input_index)
