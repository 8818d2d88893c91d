"""Checkpoint tensors as the slicers read them: anything with a ``shape`` that returns a torch tensor for a
tuple of slices. A torch tensor is one already; :class:`SafetensorsSlice` reads only the sliced bytes of a
tensor in a safetensors file (so a rank never reads, let alone holds on a GPU, the other ranks' shards); and
:class:`Transposed` shows a tensor as its transpose, which is how a compressed-tensors layer becomes a GPTQ one.

compressed-tensors "pack-quantized" stores exactly GPTQ's packing, transposed: ``weight_packed [N, K/P]``
packs K in natural order like GPTQ's ``qweight [K/P, N]``, ``weight_zero_point [N/P, K/G]`` packs N in
natural order like GPTQ's ``qzeros [K/G, N/P]`` (holding z itself: ``gptq_v2``), ``weight_scale [N, K/G]`` is
``scales [K/G, N]`` transposed. So its shards are cut as GPTQ v2 shards of the transposed tensors.
"""

from __future__ import annotations

import torch


class SafetensorsSlice:
    """Tensor ``key`` of an open safetensors file, read slice by slice (``safe_open(...).get_slice``)."""

    def __init__(self, handle, key: str) -> None:
        self._slice = handle.get_slice(key)
        self.key = key
        self.shape = tuple(self._slice.get_shape())

    def __getitem__(self, index) -> torch.Tensor:
        return self._slice[index]


class Transposed:
    """A 2-D tensor source seen transposed: ``Transposed(t)[a, b] == t[b, a].t()``."""

    def __init__(self, source) -> None:
        self.source = source
        rows, cols = source.shape
        self.shape = (cols, rows)

    def __getitem__(self, index) -> torch.Tensor:
        rows, cols = index if isinstance(index, tuple) else (index, slice(None))
        return torch.as_tensor(self.source[cols, rows]).t()


def read(source, *index) -> torch.Tensor:
    """``source[index]`` as a contiguous torch tensor (a copy for a torch tensor, so a shard never keeps the
    whole tensor alive through a view)."""
    if source is None:
        return None
    part = source[index] if index else source[:]
    part = torch.as_tensor(part)
    return part.clone(memory_format=torch.contiguous_format) if isinstance(source, torch.Tensor) else part.contiguous()


def shape_of(source) -> tuple:
    return tuple(source.shape)
