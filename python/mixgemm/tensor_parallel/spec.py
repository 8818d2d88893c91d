"""Which shard of a layer this process holds: :class:`ShardSpec` (rank, world size, parallel style and the
process group its partial outputs are summed over), and :func:`shard_spec`, which turns what a user passes as
``tp=`` into one, refusing anything it cannot mean with a ValueError that names the argument.

Two styles, as Megatron-LM named them:

* ``"column"``: the output features N are split; each rank computes ``x @ W[:, its columns]`` and the outputs
  stay split (q/k/v, gate/up: the next op works per head or per intermediate channel);
* ``"row"``: the input features K are split; each rank computes ``x[:, its rows] @ W[its rows, :]``, a partial
  sum of the whole output, and the ranks add theirs with an all-reduce (o_proj, down_proj).
"""

from __future__ import annotations

import dataclasses
from typing import Optional

COLUMN = "column"
ROW = "row"
STYLES = (COLUMN, ROW)


@dataclasses.dataclass(frozen=True)
class ShardSpec:
    """Rank ``rank`` of ``world_size`` holds its shard of a ``style``-parallel layer. ``group`` is the
    torch.distributed process group that row-parallel outputs are all-reduced over (None: the default group);
    its size and this process's rank in it must be ``world_size`` and ``rank``."""

    rank: int
    world_size: int
    style: str
    group: Optional[object] = None

    def __post_init__(self) -> None:
        for name in ("rank", "world_size"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int):
                raise ValueError(f"ShardSpec: {name} must be an int, got {value!r}")
        if self.world_size < 1:
            raise ValueError(f"ShardSpec: world_size must be >= 1, got {self.world_size}")
        if not 0 <= self.rank < self.world_size:
            raise ValueError(f"ShardSpec: rank must lie in 0..{self.world_size - 1} (world_size "
                             f"{self.world_size}), got {self.rank}")
        if self.style not in STYLES:
            raise ValueError(f"ShardSpec: style must be 'column' (split N: q/k/v, gate/up) or 'row' (split K: "
                             f"o_proj, down_proj), got {self.style!r}")

    @property
    def reduces(self) -> bool:
        """Whether the layer's outputs are partial sums that need an all-reduce."""
        return self.style == ROW and self.world_size > 1

    def describe(self) -> str:
        """``rank 1 of 2, row-parallel``: how messages name a shard."""
        return f"rank {self.rank} of {self.world_size}, {self.style}-parallel"


@dataclasses.dataclass(frozen=True)
class TensorParallel:
    """The ranks a model is split over, before a style is chosen per layer (``replace_quantized_linears``'s
    ``tp=``): rank ``rank`` of ``world_size``, partial sums reduced over ``group`` (None: the default group)."""

    rank: int
    world_size: int
    group: Optional[object] = None

    def __post_init__(self) -> None:
        ShardSpec(self.rank, self.world_size, COLUMN)  # the same rules, the same messages

    def shard(self, style: str) -> ShardSpec:
        return ShardSpec(self.rank, self.world_size, style, self.group)


def tensor_parallel(fn: str, tp: object) -> Optional[TensorParallel]:
    """``tp`` as a :class:`TensorParallel`, or None for no tensor parallelism. Accepted: None; a
    TensorParallel or ShardSpec; a ``(rank, world_size)`` pair; a torch.distributed ProcessGroup (this
    process's rank in it and its size; torch.distributed must be initialized)."""
    if tp is None:
        return None
    if isinstance(tp, TensorParallel):
        return tp
    if isinstance(tp, ShardSpec):
        return TensorParallel(tp.rank, tp.world_size, tp.group)
    if isinstance(tp, tuple) and len(tp) == 2:
        try:
            return TensorParallel(*tp)
        except ValueError as error:
            raise ValueError(f"{fn}: tp=(rank, world_size) = {tp!r}: {error}") from None
    if _is_process_group(tp):
        import torch.distributed as dist

        if not dist.is_initialized():
            raise ValueError(f"{fn}: tp is a process group but torch.distributed is not initialized")
        return TensorParallel(dist.get_rank(tp), dist.get_world_size(tp), tp)
    raise ValueError(f"{fn}: tp must be None, a (rank, world_size) pair, a torch.distributed ProcessGroup, a "
                     f"mixgemm.tensor_parallel.TensorParallel or ShardSpec; got {type(tp).__name__}")


def shard_spec(fn: str, tp: object, style: Optional[str]) -> Optional[ShardSpec]:
    """``tp`` and ``style`` (as a layer constructor takes them) as a :class:`ShardSpec`, or None without
    ``tp``. A ShardSpec carries its own style; ``style`` may then be omitted or must agree."""
    if tp is None:
        if style is not None:
            raise ValueError(f"{fn}: style={style!r} given without tp=; pass tp=(rank, world_size) or a process "
                             "group to shard the layer")
        return None
    if isinstance(tp, ShardSpec):
        if style is not None and style != tp.style:
            raise ValueError(f"{fn}: style={style!r} contradicts tp.style={tp.style!r}")
        return tp
    ranks = tensor_parallel(fn, tp)
    if style is None:
        raise ValueError(f"{fn}: tp= needs style='column' (split N: q/k/v, gate/up) or 'row' (split K: o_proj, "
                         "down_proj)")
    try:
        return ranks.shard(style)
    except ValueError as error:
        raise ValueError(f"{fn}: {error}") from None


def check_process_group(fn: str, spec: ShardSpec) -> None:
    """A row-parallel shard of a world larger than one sums its outputs with torch.distributed: it must be
    initialized, and the group's size and this process's rank must be the spec's. Checked when the layer is
    built, not at its first forward."""
    if not spec.reduces:
        return
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()):
        raise ValueError(f"{fn}: a row-parallel layer of world_size {spec.world_size} all-reduces its output, but "
                         "torch.distributed is not initialized; call torch.distributed.init_process_group('nccl') "
                         "first (torchrun sets its environment)")
    size, rank = dist.get_world_size(spec.group), dist.get_rank(spec.group)
    if (rank, size) != (spec.rank, spec.world_size):
        raise ValueError(f"{fn}: tp says rank {spec.rank} of {spec.world_size}, but this process is rank {rank} of "
                         f"{size} in the process group its outputs are summed over")


def _is_process_group(value: object) -> bool:
    try:
        import torch.distributed as dist
    except ImportError:
        return False
    return dist.is_available() and isinstance(value, dist.ProcessGroup)
