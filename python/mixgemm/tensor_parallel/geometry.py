"""The shape of one rank's shard of a quantized layer, worked out from the full layer's K, N and group size
before any tensor is read: which rows (K) and columns (N) it takes, its group size, the zero rows and columns
it is padded with so the kernels take it, and the refusal, naming layer, rank, shard shape and rule, of a shard
no kernel path runs.

Why groups get smaller: a row-parallel shard starts at row ``rank * K / world``. When that is not a multiple
of the group size G (Qwen2.5-72B's down_proj at TP 4: K / 4 = 7392 = 57.75 groups of 128), the first and last
groups are split between ranks. Scales and zero points are per group, so a group of G rows is also, exactly,
G / G' groups of G' rows sharing one scale: the shard uses ``G' = gcd(G, K / world)``, which divides every
shard boundary, and repeats each scale row G / G' times (the scales take G / G' times the memory; the
weight codes are unchanged).

Why padding: the sm80 path (the mma.sync GEMM, which runs on every supported GPU, and the decode path beside
it) takes N and K in multiples of 64 (mixgemm.shape_rules; the dequant path takes K in 16s, but expands the
whole weight on every call). A shard whose N is a multiple of 8 but not of 64 gets zero columns (scale 0) and
its output is narrowed back; one whose K is not a multiple of 64 gets zero rows (scale 0), and its input is
gathered to the padded width (``input_index``). Both cost the padded fraction of the GEMM plus one copy of the
output (N) or the input (K); see the README's "Tensor parallel" section. A row shard whose groups would be
smaller than that path's 32 rows is regrouped instead (act_order.py).
"""

from __future__ import annotations

import dataclasses
import math

from .. import shape_rules
from .spec import COLUMN, ShardSpec


@dataclasses.dataclass(frozen=True)
class ShardGeometry:
    """Rank ``spec.rank``'s shard of layer ``name`` (full weight ``k`` x ``n``, groups of ``group_size`` rows,
    ``bits``-bit codes): rows ``k_start .. k_start + k_size`` and columns ``n_start .. n_start + n_size`` of the
    full weight, in groups of ``shard_group`` rows, then ``k_pad`` zero rows and ``n_pad`` zero columns."""

    name: str
    spec: ShardSpec
    k: int
    n: int
    group_size: int
    bits: int
    k_start: int
    k_size: int
    n_start: int
    n_size: int
    shard_group: int
    k_pad: int = 0
    n_pad: int = 0

    @property
    def weight_k(self) -> int:
        """K of the packed shard (the kernel's), padding included."""
        return self.k_size + self.k_pad

    @property
    def weight_n(self) -> int:
        return self.n_size + self.n_pad

    @property
    def first_group(self) -> int:
        """The full weight's group that holds the shard's first row."""
        return self.k_start // self.group_size

    @property
    def group_rows(self) -> tuple[int, int, int]:
        """How the shard's scale rows come from the full weight's: ``(first, last + 1, skip)``: take full
        groups ``first .. last``, repeat each ``group_size / shard_group`` times, drop the first ``skip``."""
        last = (self.k_start + self.k_size - 1) // self.group_size
        skip = (self.k_start - self.first_group * self.group_size) // self.shard_group
        return self.first_group, last + 1, skip

    def describe(self) -> str:
        text = f"K = {self.k_size}, N = {self.n_size}, group_size = {self.shard_group}"
        if self.k_pad or self.n_pad:
            text += f" (padded to K = {self.weight_k}, N = {self.weight_n})"
        return text


class ShardShapeError(ValueError):
    """A shard that cannot be cut or run; the message names the layer, the rank, the shard and the rule."""


def plan_shard(name: str, spec: ShardSpec, K: int, N: int, group_size: int, bits: int, k_pack: int,
               n_pack: int) -> ShardGeometry:
    """The shard of rank ``spec.rank`` of a ``K x N`` layer in groups of ``group_size`` (K for per-channel)
    whose packed tensors hold ``k_pack`` codes per int32 along K (GPTQ: 32 / bits; AWQ: 1) and ``n_pack``
    along N (AWQ qweight, GPTQ and compressed-tensors zero points: 32 / bits), padded and checked against the
    kernels' shape rules (ShardShapeError otherwise)."""
    return padded(split_shard(name, spec, K, N, group_size, bits, k_pack, n_pack))


def split_shard(name: str, spec: ShardSpec, K: int, N: int, group_size: int, bits: int, k_pack: int,
                n_pack: int) -> ShardGeometry:
    """:func:`plan_shard`'s cut alone: rows and columns, group size, no padding, no kernel rule (act-order
    row shards choose their own groups)."""
    where = f"{name}: {spec.describe()}"
    W = spec.world_size
    if spec.style == COLUMN:
        size = _split(where, "N", "output", N, W, n_pack, f"the {n_pack} {bits}-bit codes an int32 packs along N")
        geometry = ShardGeometry(name, spec, K, N, group_size, bits, 0, K, spec.rank * size, size, group_size)
    else:
        size = _split(where, "K", "input", K, W, k_pack, f"the {k_pack} {bits}-bit codes an int32 packs along K")
        geometry = ShardGeometry(name, spec, K, N, group_size, bits, spec.rank * size, size, 0, N,
                                 math.gcd(group_size, size))
    return geometry


def kernel_rule():
    """The rule padding aims at: the sm80 path's on the sm80 layout (N, K multiples of 64, groups of 32)."""
    return shape_rules.rule("sm80", "sm80")


def padded(geometry: ShardGeometry) -> ShardGeometry:
    """``geometry`` with the zero rows and columns that make the sm80 path take it, and the group size that
    also divides the padded K; then checked against every kernel path's rule."""
    rule = kernel_rule()
    k_pad = -geometry.k_size % rule.k_multiple
    n_pad = -geometry.n_size % rule.n_multiple
    group = math.gcd(geometry.shard_group, k_pad) if k_pad else geometry.shard_group
    geometry = dataclasses.replace(geometry, k_pad=k_pad, n_pad=n_pad, shard_group=group)
    check_runs(geometry)
    return geometry


def check_runs(geometry: ShardGeometry) -> None:
    """Some kernel path runs the (padded) shard, by the build's shape rules; else ShardShapeError with the
    rule of each path."""
    from ..packing import check_weight_shape

    try:
        check_weight_shape("shard", "sm80", geometry.weight_k, geometry.weight_n, geometry.shard_group)
    except ValueError as error:
        rule = str(error).removeprefix("shard: ")
        raise ShardShapeError(f"{geometry.name}: {geometry.spec.describe()}: the shard {geometry.describe()} of the "
                              f"{geometry.k} x {geometry.n} weight (group_size {geometry.group_size}) cannot run: "
                              f"{rule}") from None


def _split(where: str, letter: str, what: str, size: int, world: int, pack: int, why: str) -> int:
    if size % world:
        raise ShardShapeError(f"{where}: {letter} = {size} {what} features do not split into {world} equal shards "
                              f"(rule: {letter} % world_size == 0)")
    shard = size // world
    if shard % pack:
        raise ShardShapeError(f"{where}: the shard's {letter} = {size} / {world} = {shard} is not a multiple of "
                              f"{pack} ({why}; rule: {letter} / world_size % {pack} == 0)")
    return shard
