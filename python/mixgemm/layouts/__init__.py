"""The weight layouts: one module each, with the same interface (``NAME``, ``N_MULTIPLE``, ``K_MULTIPLE``,
``packed_shape``, ``described_shape``, ``pack``, ``unpack``, ``offsets``).

  * ``sm80``: our mma.sync layout, ``[N/64, K/16, 32, 4 * bits/4]`` words of unsigned codes, read by the sm80
    path, the decode path and the dequant path;
  * ``sm90``: the CUTLASS 3.x register-sourced wgmma operand order, ``[K/16, N/16, 32, bits/4]`` words of signed
    codes, read by the sm90 path and, through the same fragment code, the sm80 path's small tiles, the decode
    path and the dequant path.

A :class:`~mixgemm.PackedWeight` carries its layout's name, and which paths read a layout is the shape-rule
table's to say (mixgemm.shape_rules). The C++ twin of each is cpp/mixgemm/layout/.
"""

from __future__ import annotations

import types

import torch

from . import sm80, sm90

LAYOUTS: dict[str, types.ModuleType] = {sm80.NAME: sm80, sm90.NAME: sm90}


def layout(name: str) -> types.ModuleType:
    """The module of layout ``name``; ValueError for another name."""
    try:
        return LAYOUTS[name]
    except (KeyError, TypeError):
        raise ValueError(f"layout must be one of {tuple(LAYOUTS)}, got {name!r}") from None


def bits_of_packed(name: str, packed: torch.Tensor) -> int | None:
    """The weight width whose packed tensor in layout ``name`` has ``packed``'s words per lane (its last
    dimension), or None: packed_shape read backwards, for callers that hold only the tensor (the custom ops'
    schema carries no bit width)."""
    if not isinstance(packed, torch.Tensor) or packed.dim() != 4:
        return None
    module = layout(name)
    for bits in (4, 8):
        if packed.shape[-1] == module.packed_shape(module.K_MULTIPLE, module.N_MULTIPLE, bits)[-1]:
            return bits
    return None
