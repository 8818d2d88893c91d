"""The sm90 weight layout in PyTorch: its constants, pack, unpack and rules, the twin of
cpp/mixgemm/sm90/reorder_layout.cuh (the CuTe layout the sm90 path is given) and cpp/mixgemm/layout/sm90.cuh (the
fragment code the sm80, decode and dequant paths read it with).

The kernel computes y^T = W^T x^T, so the weight is stored as W^T ``[N, K]`` (K-major), as signed codes:
``q - 8`` for int4 (two's complement nibble = ``q ^ 8``) and ``q - 128`` for int8 (byte = ``q ^ 0x80``),
where ``q`` is our unsigned code (0..15 / 0..255).

Blocks of 16 (n) x 16 (k). Within a block, with ``n = g + 8 h`` and ``k = 2 t + j + 8 r``
(``g < 8``, ``t < 4``, ``h, j, r < 2``), the value belongs to lane ``4 g + t`` of the register-sourced
wgmma A fragment, as its value ``v = j + 2 h + 4 r``. Each lane's 8 values are stored contiguously
(32 bits for int4, 64 for int8) at position ``pos`` inside the lane's run:

* int4: ``pos = 4 j + 2 r + h`` (the registers hold values in the order [0, 2, 4, 6, 1, 3, 5, 7]); nibble
  ``pos`` is bits ``4 pos .. 4 pos + 3`` of the lane's int32 word.
* int8: ``pos = 4 r + 2 j + h`` (registers hold values [0, 2, 1, 3] then [4, 6, 5, 7]); byte ``pos % 4``
  of word ``pos // 4``.

Blocks are ordered N-block fastest: block ``(nb, kb)`` is ``packed[kb, nb]`` of the int32 tensor
``[K/16, N/16, 32, bits/4]`` (lane, then word). In elements, code ``(n, k)`` sits at
``256 (nb + (N/16) kb) + 32 g + 8 t + pos``: exactly the CuTe layout
``((((8,2),1),N/16),(((2,4,2),1),K/16)) : ((((32,1),0),256),(((s_j,8,s_r),0),16 N))`` with
``(s_j, s_r) = (4, 2)`` for int4 and ``(2, 4)`` for int8 that the kernel is given.
"""

from __future__ import annotations

import torch

BLOCK = 16  # rows (n) and columns (k) of one reordered block
LANES = 32
_SIGN_BIAS = {4: 8, 8: 128}


def words_per_lane(bits: int) -> int:
    if bits not in _SIGN_BIAS or isinstance(bits, bool):
        raise ValueError(f"sm90 layout: bits must be 4 or 8, got {bits!r}")
    return bits // 4  # 8 values of `bits` bits: 32 (int4) or 64 (int8) bits


def packed_shape(K: int, N: int, bits: int) -> tuple[int, int, int, int]:
    return (K // BLOCK, N // BLOCK, LANES, words_per_lane(bits))


def _check(fn: str, q: torch.Tensor, bits: int) -> tuple[int, int]:
    if bits not in _SIGN_BIAS:
        raise ValueError(f"{fn}: bits must be 4 or 8, got {bits!r}")
    if not isinstance(q, torch.Tensor) or q.dim() != 2 or q.dtype not in (torch.int32, torch.int64, torch.uint8):
        raise ValueError(f"{fn}: q must be a 2-D int32/int64/uint8 tensor of codes [K, N]")
    K, N = q.shape
    if K == 0 or N == 0 or K % BLOCK or N % BLOCK:
        raise ValueError(f"{fn}: K and N must be positive multiples of {BLOCK}, got K = {K}, N = {N}")
    return K, N


def pack_sm90(q: torch.Tensor, bits: int = 4) -> torch.Tensor:
    """Unsigned codes ``q [K, N]`` (0..2^bits - 1) -> the sm90 layout, int32 ``[K/16, N/16, 32, bits/4]``."""
    K, N = _check("pack_sm90", q, bits)
    if int(q.min()) < 0 or int(q.max()) >= (1 << bits):
        raise ValueError(f"pack_sm90: codes must lie in [0, {1 << bits})")
    signed = q.to(torch.int64) ^ _SIGN_BIAS[bits]  # (q - bias) in two's complement, `bits` wide
    wt = signed.t()  # W^T [N, K]
    # n = nb*16 + h*8 + g, k = kb*16 + r*8 + t*2 + j
    blocks = wt.reshape(N // BLOCK, 2, 8, K // BLOCK, 2, 4, 2)  # [nb, h, g, kb, r, t, j]
    if bits == 4:
        lanes = blocks.permute(3, 0, 2, 5, 6, 4, 1)  # [kb, nb, g, t, j, r, h]: pos = 4j + 2r + h
    else:
        lanes = blocks.permute(3, 0, 2, 5, 4, 6, 1)  # [kb, nb, g, t, r, j, h]: pos = 4r + 2j + h
    fields = lanes.reshape(K // BLOCK, N // BLOCK, LANES, words_per_lane(bits), 32 // bits)
    shifts = torch.arange(0, 32, bits, device=q.device, dtype=torch.int64)
    words = (fields << shifts).sum(dim=-1)  # disjoint bit fields: sum == or
    return (words - ((words >> 31) << 32)).to(torch.int32)  # reinterpret as signed 32-bit


def unpack_sm90(packed: torch.Tensor, bits: int = 4) -> torch.Tensor:
    """Inverse of :func:`pack_sm90`: int32 ``[K/16, N/16, 32, bits/4]`` -> unsigned codes ``[K, N]`` (int32)."""
    if bits not in _SIGN_BIAS:
        raise ValueError(f"unpack_sm90: bits must be 4 or 8, got {bits!r}")
    if packed.dim() != 4 or packed.shape[2:] != (LANES, words_per_lane(bits)) or packed.dtype != torch.int32:
        raise ValueError(f"unpack_sm90: packed must be int32 [K/16, N/16, 32, {words_per_lane(bits)}]")
    kb, nb = packed.shape[:2]
    shifts = torch.arange(0, 32, bits, device=packed.device, dtype=torch.int64)
    fields = (packed.to(torch.int64).unsqueeze(-1) >> shifts) & ((1 << bits) - 1)
    lanes = fields.reshape(kb, nb, 8, 4, 2, 2, 2)
    if bits == 4:
        blocks = lanes.permute(1, 6, 2, 0, 5, 3, 4)  # [kb, nb, g, t, j, r, h] -> [nb, h, g, kb, r, t, j]
    else:
        blocks = lanes.permute(1, 6, 2, 0, 4, 3, 5)  # [kb, nb, g, t, r, j, h] -> [nb, h, g, kb, r, t, j]
    wt = blocks.reshape(nb * BLOCK, kb * BLOCK)
    return (wt ^ _SIGN_BIAS[bits]).t().contiguous().to(torch.int32)


def sign_offsets(scales: torch.Tensor, zeros: torch.Tensor | None, bits: int) -> torch.Tensor:
    """The additive offset of the sm90 kernel's scale-with-zero mode, ``W = q_signed * s + offset``.

    With signed codes ``q_signed = q - bias`` (bias 8 / 128), ``(q - z) s = q_signed s + (bias - z) s``.
    ``(bias - z)`` is a small integer and ``s`` is exact in float32, so the product is exact there and is
    rounded once to the activation dtype. ``zeros=None`` (symmetric, z = bias) gives zero offsets.
    """
    if zeros is None:
        return torch.zeros_like(scales)
    return ((_SIGN_BIAS[bits] - zeros.to(torch.float32)) * scales.float()).to(scales.dtype)


# The layout interface (mixgemm.layouts): the same names in every layout module.
NAME = "sm90"
# What the layout can hold for every path that reads it: 16 x 16 blocks, walked in 64-column strips by the decode
# and dequant paths.
N_MULTIPLE = 64
K_MULTIPLE = BLOCK


def described_shape(bits: int) -> str:
    return f"[K/16, N/16, 32, {words_per_lane(bits)}] (the sm90 layout)"


def pack(q: torch.Tensor, bits: int = 4) -> torch.Tensor:
    """Unsigned codes ``q [K, N]`` -> the packed words."""
    return pack_sm90(q, bits)


def unpack(packed: torch.Tensor, bits: int = 4) -> torch.Tensor:
    """The packed words -> unsigned codes ``[K, N]``."""
    return unpack_sm90(packed, bits)


def offsets(scales: torch.Tensor, zeros: torch.Tensor | None, bits: int) -> torch.Tensor:
    """The additive offsets ``[K/G, N]`` the kernels add to the signed codes' products (zero for symmetric
    weights)."""
    return sign_offsets(scales, zeros, bits)
