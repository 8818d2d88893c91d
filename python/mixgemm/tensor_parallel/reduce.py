"""What a sharded layer does to its output: drop the zero columns padding added, and, row-parallel, sum the
ranks' partial outputs with an all-reduce (NCCL on GPUs, whatever backend the group has otherwise).

Eagerly, and under CUDA-graph capture, the in-place ``torch.distributed.all_reduce`` (NCCL all-reduces are
capturable). Under torch.compile the functional all-reduce, which the compiler traces as one collective node
(the in-place call would need dynamo to rewrite it).
"""

from __future__ import annotations

import torch

from .spec import ShardSpec


def narrow_output(y: torch.Tensor, out_features: int) -> torch.Tensor:
    """``y`` without the padded columns, contiguous (a copy of the output: the cost of N padding)."""
    if y.shape[-1] == out_features:
        return y
    return y[..., :out_features].contiguous()


def all_reduce(y: torch.Tensor, spec: ShardSpec) -> torch.Tensor:
    """The sum of ``y`` over the ranks of ``spec.group`` (the default group when None)."""
    import torch.distributed as dist

    if torch.compiler.is_compiling():
        from torch.distributed import _functional_collectives as functional

        group = spec.group if spec.group is not None else dist.group.WORLD
        return functional.all_reduce(y, "sum", group)
    dist.all_reduce(y, group=spec.group)
    return y


def finish_output(y: torch.Tensor, out_features: int, spec: ShardSpec) -> torch.Tensor:
    y = narrow_output(y, out_features)
    return all_reduce(y, spec) if spec.reduces else y
