"""The sm80 weight layout ("mixgemm int4 v1" and "mixgemm int8 v1"): its constants, pack, unpack and rules, in
pure PyTorch, and the GPU packer of AWQ int4 tensors.

This module is the executable specification of the layout the sm80 path, the decode path and the dequant path
read (cpp/mixgemm/layout/sm80.cuh holds its fragment code). The CUDA prepack
kernels (cpp/mixgemm/prepack/) must reproduce these functions bit for bit, and the CPU tests
check the layout through the exact inverse `unpack_int4_kernel_layout`. Everything is vectorised and
runs on whatever device its inputs live on.

Layout, for a logical int4 matrix q [K, N] with values 0..15:

* `packed` is int32 [N/64, K/16, 32, 4], contiguous; N % 64 == 0 and K % 16 == 0.
* Word (nb, kb, lane, j) is the 32-bit B register that lane `lane` of a warp hands to
  `mma.sync.m16n8k16` for the 16(k) x 16(n) sub-block j of the 16 x 64 block (kb, nb). With
  t = lane % 4 and c = lane // 4:
      n0 = 64*nb + 16*j + c,   n1 = n0 + 8,   k0 = 16*kb + 2*t
      e  = [q(k0,n0), q(k0+1,n0), q(k0+8,n0), q(k0+9,n0),
            q(k0,n1), q(k0+1,n1), q(k0+8,n1), q(k0+9,n1)]
  i.e. the m16n8k16 B fragment (b0b1 = rows 2t, 2t+1; b2b3 = rows 2t+8, 2t+9; column lane/4) of the
  two n8 tiles of the sub-block.
* Nibble i (bits 4i..4i+3) holds e[REG_ORDER[i]]. The fast converter turns nibbles (p, p+4) into one
  half2, so pair p of its output is (e[2p], e[2p+1]): the fragment registers in mma order.
* Values are stored unsigned 0..15 (symmetric int4 is stored as q_signed + 8).

Why [N/64][K/16] with K inside: a threadblock owning a strip of 64-column blocks streams its B as one
contiguous run along K, and a warp's 16 x 64 block is 512 contiguous bytes, one 16-byte load per lane.

Layout "mixgemm int8 v1", for a logical int8 matrix q [K, N] with values 0..255:

* `packed` is int32 [N/64, K/16, 32, 8], contiguous; N % 64 == 0 and K % 16 == 0.
* Word (nb, kb, lane, w) holds the m16n8k16 B fragment of ONE n8 tile. With t = lane % 4,
  c = lane // 4, j = w // 2 (16-column sub-block 0..3) and tile = w % 2:
      n = 64*nb + 16*j + 8*tile + c,   k0 = 16*kb + 2*t
      byte i (bits 8i..8i+7) = [q(k0,n), q(k0+1,n), q(k0+8,n), q(k0+9,n)][i]   (b0 b1 | b2 b3)
  so the low half-word becomes the fragment's first register (b0b1) and the high half-word its second
  (b2b3). These are the int4 layout's fragment elements e[4*tile .. 4*tile+3] of word (nb, kb, lane, j),
  in natural order (no interleave).
* Values are stored unsigned 0..255 (symmetric int8 is stored as q_signed + 128).
* A warp's 16 x 64 block is 1024 contiguous bytes: two 16-byte loads per lane.

Scales and zero points travel beside `packed` as `scales` and `offsets` [K/G, N] in the activation
dtype, with offsets = -z * s folded at prepack time so the kernel computes W = q * s + offset. The
two layouts are told apart by the last dimension of `packed` (4 words per lane: int4, 8: int8).
"""

from __future__ import annotations

from typing import Optional, Tuple

import torch

__all__ = [
    "REG_ORDER",
    "AWQ_ORDER",
    "BLOCK_N",
    "BLOCK_K",
    "INT4_WORDS_PER_LANE",
    "INT8_WORDS_PER_LANE",
    "pack_int4_kernel_layout",
    "unpack_int4_kernel_layout",
    "pack_int8_kernel_layout",
    "unpack_int8_kernel_layout",
    "fold_zero_points",
    "prepack_awq_reference",
    "prepack_int8_reference",
    "prepack_gptq_int8_reference",
    "dequantize_packed_reference",
]

# Nibble i of a packed word holds fragment element REG_ORDER[i] (see the module docstring).
REG_ORDER = (0, 2, 4, 6, 1, 3, 5, 7)

# AWQ (vLLM/AutoAWQ) packing: nibble i of an int32 holds logical column 8c + AWQ_ORDER[i].
AWQ_ORDER = (0, 2, 4, 6, 1, 3, 5, 7)

# Columns per kernel-layout block and K rows per block (one m16n8k16 K step).
BLOCK_N = 64
BLOCK_K = 16

# Last dimension of `packed`: 32-bit words per lane per 16 x 64 block.
INT4_WORDS_PER_LANE = 4
INT8_WORDS_PER_LANE = 8

# Symmetric weights are stored biased by 2**(bits - 1), so their implicit zero point is 8 for int4
# and 128 for int8.
SYMMETRIC_ZERO = 8
SYMMETRIC_ZERO_INT8 = 128

_ACT_DTYPES = (torch.float16, torch.bfloat16)
_INT_DTYPES = (torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64)


def _inverse(order: Tuple[int, ...]) -> Tuple[int, ...]:
    """inverse[v] = i where order[i] == v: where element v sits, given what each slot holds."""
    inv = [0] * len(order)
    for slot, value in enumerate(order):
        inv[value] = slot
    return tuple(inv)


# Element m of the fragment sits in nibble _NIBBLE_OF_ELEMENT[m] (= [0, 4, 1, 5, 2, 6, 3, 7]).
_NIBBLE_OF_ELEMENT = _inverse(REG_ORDER)
# Logical column j of an AWQ pack sits in nibble _AWQ_NIBBLE_OF_COLUMN[j].
_AWQ_NIBBLE_OF_COLUMN = _inverse(AWQ_ORDER)


# --------------------------------------------------------------------------------------------
# 32-bit word <-> 32/bits fields (8 nibbles or 4 bytes). torch has no uint32, so the bit math is
# done in int64 where every 32-bit pattern is a non-negative number, and wrapped to int32 (two's
# complement) at the end: a word whose top field has its high bit set is a negative int32.
# --------------------------------------------------------------------------------------------


def _field_shifts(bits: int, device) -> torch.Tensor:
    return torch.arange(0, 32, bits, dtype=torch.int64, device=device)


def _words_to_fields(words: torch.Tensor, bits: int) -> torch.Tensor:
    """int32 [...] -> int64 [..., 32/bits], entry i = bits (bits*i) .. (bits*i + bits - 1) of the word."""
    unsigned = words.to(torch.int64) & 0xFFFFFFFF
    return (unsigned.unsqueeze(-1) >> _field_shifts(bits, words.device)) & ((1 << bits) - 1)


def _fields_to_words(fields: torch.Tensor, bits: int) -> torch.Tensor:
    """int64 [..., 32/bits] with values 0..2**bits-1 -> int32 [...], field i = entry i."""
    unsigned = (fields.to(torch.int64) << _field_shifts(bits, fields.device)).sum(dim=-1)  # disjoint: sum == OR
    signed = torch.where(unsigned >= 2**31, unsigned - 2**32, unsigned)
    return signed.to(torch.int32)


def _words_to_nibbles(words: torch.Tensor) -> torch.Tensor:
    """int32 [...] -> int64 [..., 8], entry i = bits 4i..4i+3 of the word."""
    return _words_to_fields(words, 4)


def _nibbles_to_words(nibbles: torch.Tensor) -> torch.Tensor:
    """int64 [..., 8] with values 0..15 -> int32 [...], nibble i = entry i."""
    return _fields_to_words(nibbles, 4)


# --------------------------------------------------------------------------------------------
# Validation helpers: every broken rule is a ValueError that names the argument and the rule.
# --------------------------------------------------------------------------------------------


def _require(condition: bool, message: str) -> None:
    if not condition:
        raise ValueError(message)


def _check_tensor(fn: str, name: str, value, ndim: int, dtypes, dtype_rule: str) -> None:
    _require(isinstance(value, torch.Tensor), f"{fn}: {name} must be a torch.Tensor (got {type(value).__name__})")
    _require(value.dim() == ndim, f"{fn}: {name} must be {ndim}-D (got shape {tuple(value.shape)})")
    _require(value.dtype in dtypes, f"{fn}: {name} must be {dtype_rule} (got {value.dtype})")


def _check_code_range(fn: str, name: str, values: torch.Tensor, bits: int) -> None:
    if values.numel() == 0:
        return
    top = (1 << bits) - 1
    lo, hi = int(values.min()), int(values.max())
    _require(0 <= lo and hi <= top, f"{fn}: {name} values must be in 0..{top} (got min {lo}, max {hi})")


def _check_nibble_range(fn: str, name: str, values: torch.Tensor) -> None:
    _check_code_range(fn, name, values, 4)


def _check_bits(fn: str, bits) -> None:
    _require(
        isinstance(bits, int) and not isinstance(bits, bool) and bits in (4, 8),
        f"{fn}: bits must be 4 or 8 (got {bits!r})",
    )


def _check_group_size(fn: str, group_size, K: int) -> None:
    _require(
        isinstance(group_size, int) and not isinstance(group_size, bool) and group_size > 0,
        f"{fn}: group_size must be a positive int (got {group_size!r})",
    )
    _require(K % group_size == 0, f"{fn}: group_size must divide K (got K={K}, group_size={group_size})")


# --------------------------------------------------------------------------------------------
# Kernel layout
# --------------------------------------------------------------------------------------------


def pack_int4_kernel_layout(q: torch.Tensor) -> torch.Tensor:
    """Pack logical int4 values q [K, N] (integer dtype, values 0..15) into int32 [N/64, K/16, 32, 4]."""
    fn = "pack_int4_kernel_layout"
    _check_tensor(fn, "q", q, 2, _INT_DTYPES, "an integer tensor (uint8/int8/int16/int32/int64)")
    K, N = q.shape
    _require(K > 0 and K % BLOCK_K == 0, f"{fn}: q must have K (dim 0) a positive multiple of 16 (got K={K})")
    _require(N > 0 and N % BLOCK_N == 0, f"{fn}: q must have N (dim 1) a positive multiple of 64 (got N={N})")
    _check_nibble_range(fn, "q", q)

    # Name every index bit of (k, n):  k = 16*kb + 8*h + 2*t + b   and   n = 64*nb + 16*j + 8*tile + c,
    # where t, c pick the lane (lane = 4c + t), h selects b0b1 (h=0) or b2b3 (h=1), b the row within
    # the pair, and tile the first or second n8 tile of sub-block j.
    q8 = q.to(torch.int64).reshape(K // 16, 2, 4, 2, N // 64, 4, 2, 8)
    #                              kb      h  t  b  nb      j  tile c
    # Fragment element m = 4*tile + 2*h + b  (e = [tile0: k0, k0+1, k0+8, k0+9, tile1: same]).
    frag = q8.permute(4, 0, 7, 2, 5, 6, 1, 3)  # [nb, kb, c, t, j, tile, h, b]
    frag = frag.reshape(N // 64, K // 16, 32, 4, 8)  # [nb, kb, lane, j, m]
    order = torch.tensor(REG_ORDER, dtype=torch.long, device=q.device)
    nibbles = frag.index_select(-1, order)  # nibble i <- e[REG_ORDER[i]]
    return _nibbles_to_words(nibbles).contiguous()


def unpack_int4_kernel_layout(packed: torch.Tensor) -> torch.Tensor:
    """Exact inverse of pack_int4_kernel_layout: int32 [N/64, K/16, 32, 4] -> uint8 [K, N]."""
    fn = "unpack_int4_kernel_layout"
    _check_tensor(fn, "packed", packed, 4, (torch.int32,), "int32")
    NB, KB, lanes, subs = packed.shape
    _require(
        lanes == 32 and subs == 4 and NB > 0 and KB > 0,
        f"{fn}: packed must have shape [N/64, K/16, 32, 4] with N, K > 0 (got {tuple(packed.shape)})",
    )
    nibbles = _words_to_nibbles(packed)  # [nb, kb, lane, j, nibble]
    # Element m sits in nibble _NIBBLE_OF_ELEMENT[m].
    where = torch.tensor(_NIBBLE_OF_ELEMENT, dtype=torch.long, device=packed.device)
    frag = nibbles.index_select(-1, where)  # [nb, kb, lane, j, m]
    frag = frag.reshape(NB, KB, 8, 4, 4, 2, 2, 2)  # [nb, kb, c, t, j, tile, h, b]
    q8 = frag.permute(1, 6, 3, 7, 0, 4, 5, 2)  # [kb, h, t, b, nb, j, tile, c]
    return q8.reshape(KB * BLOCK_K, NB * BLOCK_N).to(torch.uint8).contiguous()


def pack_int8_kernel_layout(q: torch.Tensor) -> torch.Tensor:
    """Pack logical int8 values q [K, N] (integer dtype, values 0..255) into int32 [N/64, K/16, 32, 8]."""
    fn = "pack_int8_kernel_layout"
    _check_tensor(fn, "q", q, 2, _INT_DTYPES, "an integer tensor (uint8/int8/int16/int32/int64)")
    K, N = q.shape
    _require(K > 0 and K % BLOCK_K == 0, f"{fn}: q must have K (dim 0) a positive multiple of 16 (got K={K})")
    _require(N > 0 and N % BLOCK_N == 0, f"{fn}: q must have N (dim 1) a positive multiple of 64 (got N={N})")
    _check_code_range(fn, "q", q, 8)

    # The same index naming as the int4 layout:  k = 16*kb + 8*h + 2*t + b,  n = 64*nb + 16*j + 8*tile + c.
    q8 = q.to(torch.int64).reshape(K // 16, 2, 4, 2, N // 64, 4, 2, 8)
    #                              kb      h  t  b  nb      j  tile c
    frag = q8.permute(4, 0, 7, 2, 5, 6, 1, 3)  # [nb, kb, c, t, j, tile, h, b]
    # lane = 4*c + t, word w = 2*j + tile, byte = 2*h + b  (b0 b1 = rows k0, k0+1; b2 b3 = k0+8, k0+9).
    frag = frag.reshape(N // 64, K // 16, 32, INT8_WORDS_PER_LANE, 4)
    return _fields_to_words(frag, 8).contiguous()


def unpack_int8_kernel_layout(packed: torch.Tensor) -> torch.Tensor:
    """Exact inverse of pack_int8_kernel_layout: int32 [N/64, K/16, 32, 8] -> uint8 [K, N]."""
    fn = "unpack_int8_kernel_layout"
    _check_tensor(fn, "packed", packed, 4, (torch.int32,), "int32")
    NB, KB, lanes, words = packed.shape
    _require(
        lanes == 32 and words == INT8_WORDS_PER_LANE and NB > 0 and KB > 0,
        f"{fn}: packed must have shape [N/64, K/16, 32, 8] with N, K > 0 (got {tuple(packed.shape)})",
    )
    frag = _words_to_fields(packed, 8)  # [nb, kb, lane, w, byte]
    frag = frag.reshape(NB, KB, 8, 4, 4, 2, 2, 2)  # [nb, kb, c, t, j, tile, h, b]
    q8 = frag.permute(1, 6, 3, 7, 0, 4, 5, 2)  # [kb, h, t, b, nb, j, tile, c]
    return q8.reshape(KB * BLOCK_K, NB * BLOCK_N).to(torch.uint8).contiguous()


# --------------------------------------------------------------------------------------------
# Scales, zero points and the AWQ / int8 entry points
# --------------------------------------------------------------------------------------------


def fold_zero_points(
    scales: torch.Tensor, zeros: Optional[torch.Tensor], act_dtype: torch.dtype, bits: int = 4
) -> torch.Tensor:
    """offsets = -z * s in act_dtype, so that W = (q - z) * s becomes the single fma q * s + offset.

    scales [K/G, N] (floating) is first rounded to act_dtype (the scale the kernel will use), the
    product is formed in float32 (exact: an 11-bit scale mantissa times a zero of at most 8 bits fits
    in 24 bits) and rounded once to act_dtype. zeros [K/G, N] holds unpacked zero points
    0..2**bits-1 (bits = 4 or 8); None means symmetric weights stored biased by 2**(bits-1), so
    z = 8 (int4) or 128 (int8).
    """
    fn = "fold_zero_points"
    _check_bits(fn, bits)
    _require(
        act_dtype in _ACT_DTYPES, f"{fn}: act_dtype must be torch.float16 or torch.bfloat16 (got {act_dtype})"
    )
    _check_tensor(
        fn, "scales", scales, 2, (torch.float16, torch.bfloat16, torch.float32, torch.float64), "a floating tensor"
    )
    s = scales.to(act_dtype).to(torch.float32)
    if zeros is None:
        z = torch.full_like(s, float(SYMMETRIC_ZERO if bits == 4 else SYMMETRIC_ZERO_INT8))
    else:
        _check_tensor(fn, "zeros", zeros, 2, _INT_DTYPES, "an integer tensor (unpacked zero points)")
        _require(
            zeros.shape == scales.shape,
            f"{fn}: zeros must have the shape of scales [K/G, N] (got {tuple(zeros.shape)} vs {tuple(scales.shape)})",
        )
        _require(zeros.device == scales.device, f"{fn}: zeros must be on the device of scales")
        _check_code_range(fn, "zeros", zeros, bits)
        z = zeros.to(torch.float32)
    # Written as -(z * s), the same expression the CUDA kernel evaluates, so even the sign of a zero
    # offset (z = 0) matches bit for bit.
    return (-(z * s)).to(act_dtype).contiguous()


def _unpack_awq(packed: torch.Tensor) -> torch.Tensor:
    """AWQ-packed int32 [R, C] -> uint8 [R, 8C]: nibble i of word (r, c) is column 8c + AWQ_ORDER[i].

    Private on purpose: mixgemm/formats.py (written in parallel) owns the public AWQ helpers; this
    copy keeps the reference self-contained and independent of it.
    """
    R, C = packed.shape
    nibbles = _words_to_nibbles(packed)  # [R, C, nibble]
    where = torch.tensor(_AWQ_NIBBLE_OF_COLUMN, dtype=torch.long, device=packed.device)
    return nibbles.index_select(-1, where).reshape(R, 8 * C).to(torch.uint8)


def _check_scales(fn, weight_name, weight, scales, K, N, group_size) -> int:
    """The group size divides K and scales are [K/G, N] on the weight's device; returns K/G."""
    _check_group_size(fn, group_size, K)
    groups = K // group_size
    _require(
        tuple(scales.shape) == (groups, N),
        f"{fn}: scales must have shape [K/group_size, N] = {(groups, N)} (got {tuple(scales.shape)})",
    )
    _require(scales.device == weight.device, f"{fn}: scales must be on the device of {weight_name}")
    return groups


def _check_scales_and_zeros(fn, qweight, scales, qzeros, K, N, group_size, values_per_word, packing):
    """_check_scales, and packed qzeros [K/G, N/values_per_word] (or None) on qweight's device."""
    groups = _check_scales(fn, "qweight", qweight, scales, K, N, group_size)
    if qzeros is None:
        return
    zero_cols = N // values_per_word
    _check_tensor(fn, "qzeros", qzeros, 2, (torch.int32,), f"int32 ({packing}, [K/G, N/{values_per_word}])")
    _require(
        tuple(qzeros.shape) == (groups, zero_cols),
        f"{fn}: qzeros must have shape [K/group_size, N/{values_per_word}] = {(groups, zero_cols)} "
        f"(got {tuple(qzeros.shape)})",
    )
    _require(qzeros.device == qweight.device, f"{fn}: qzeros must be on the device of qweight")


def prepack_awq_reference(
    qweight: torch.Tensor,
    scales: torch.Tensor,
    qzeros: Optional[torch.Tensor],
    group_size: int,
) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """AWQ tensors -> (packed, scales, offsets) in the mixgemm int4 v1 layout.

    qweight int32 [K, N/8], scales fp16/bf16 [K/G, N], qzeros int32 [K/G, N/8] (AWQ packing; None
    means symmetric, z = 8). The activation dtype is the dtype of scales. AWQ values are already
    unsigned 0..15 with a separate zero point, so they are stored unchanged (no re-biasing).
    """
    fn = "prepack_awq_reference"
    _check_tensor(fn, "qweight", qweight, 2, (torch.int32,), "int32 (AWQ packing, [K, N/8])")
    _check_tensor(fn, "scales", scales, 2, _ACT_DTYPES, "torch.float16 or torch.bfloat16 ([K/G, N])")
    K, N = qweight.shape[0], qweight.shape[1] * 8
    _require(K > 0 and K % BLOCK_K == 0, f"{fn}: qweight must have K (dim 0) a positive multiple of 16 (got K={K})")
    _require(
        N > 0 and N % BLOCK_N == 0,
        f"{fn}: qweight must have N = 8 * dim 1 a positive multiple of 64 (got N={N})",
    )
    _check_scales_and_zeros(fn, qweight, scales, qzeros, K, N, group_size, 8, "AWQ packing")
    zeros = _unpack_awq(qzeros) if qzeros is not None else None

    packed = pack_int4_kernel_layout(_unpack_awq(qweight))
    offsets = fold_zero_points(scales, zeros, scales.dtype)
    return packed, scales.contiguous(), offsets


def prepack_int8_reference(
    q: torch.Tensor,
    scales: torch.Tensor,
    zeros: Optional[torch.Tensor],
    group_size: int,
) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Logical int8 tensors -> (packed, scales, offsets) in the mixgemm int8 v1 layout.

    q uint8 (any integer dtype) [K, N] with values 0..255, scales fp16/bf16 [K/G, N], zeros integer
    [K/G, N] with values 0..255 or None (symmetric, stored biased by 128: z = 128). The activation
    dtype is the dtype of scales; offsets = -(z * s) rounded once to it.
    """
    fn = "prepack_int8_reference"
    _check_tensor(fn, "q", q, 2, _INT_DTYPES, "an integer tensor (uint8/int8/int16/int32/int64)")
    _check_tensor(fn, "scales", scales, 2, _ACT_DTYPES, "torch.float16 or torch.bfloat16 ([K/G, N])")
    K, N = q.shape
    _require(K > 0 and K % BLOCK_K == 0, f"{fn}: q must have K (dim 0) a positive multiple of 16 (got K={K})")
    _require(N > 0 and N % BLOCK_N == 0, f"{fn}: q must have N (dim 1) a positive multiple of 64 (got N={N})")
    groups = _check_scales(fn, "q", q, scales, K, N, group_size)
    if zeros is not None:
        _check_tensor(fn, "zeros", zeros, 2, _INT_DTYPES, "an integer tensor (unpacked zero points, [K/G, N])")
        _require(
            tuple(zeros.shape) == (groups, N),
            f"{fn}: zeros must have shape [K/group_size, N] = {(groups, N)} (got {tuple(zeros.shape)})",
        )
        _require(zeros.device == q.device, f"{fn}: zeros must be on the device of q")
        _check_code_range(fn, "zeros", zeros, 8)
    _check_code_range(fn, "q", q, 8)

    packed = pack_int8_kernel_layout(q)
    offsets = fold_zero_points(scales, zeros, scales.dtype, bits=8)
    return packed, scales.contiguous(), offsets


def prepack_gptq_int8_reference(
    qweight: torch.Tensor,
    scales: torch.Tensor,
    qzeros: Optional[torch.Tensor],
    group_size: int,
    v1: bool = True,
) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """GPTQ 8-bit tensors -> (packed, scales, offsets) in the mixgemm int8 v1 layout.

    qweight int32 [K/4, N] (byte i of row r = K-row 4r + i), scales fp16/bf16 [K/G, N], qzeros int32
    [K/G, N/4] (byte i of word c = column 4c + i; v1=True, the default as for every GPTQ reader: stored as
    (z - 1) mod 256; v1=False: gptq_v2, stored as z) or None
    (symmetric, z = 128). Decoded with mixgemm.formats, then as prepack_int8_reference. Act-order
    (g_idx) checkpoints need their K rows permuted by the caller first.
    """
    from .. import formats  # the GPTQ 8-bit packing is specified there

    fn = "prepack_gptq_int8_reference"
    _check_tensor(fn, "qweight", qweight, 2, (torch.int32,), "int32 (GPTQ 8-bit packing, [K/4, N])")
    _check_tensor(fn, "scales", scales, 2, _ACT_DTYPES, "torch.float16 or torch.bfloat16 ([K/G, N])")
    K, N = qweight.shape[0] * 4, qweight.shape[1]
    _require(
        K > 0 and K % BLOCK_K == 0,
        f"{fn}: qweight must have K = 4 * dim 0 a positive multiple of 16 (got K={K})",
    )
    _require(N > 0 and N % BLOCK_N == 0, f"{fn}: qweight must have N (dim 1) a positive multiple of 64 (got N={N})")
    _check_scales_and_zeros(fn, qweight, scales, qzeros, K, N, group_size, 4, "GPTQ 8-bit packing")
    zeros = formats.unpack_gptq_zeros_int8(qzeros, v1=v1) if qzeros is not None else None

    return prepack_int8_reference(formats.unpack_gptq_qweight_int8(qweight), scales, zeros, group_size)


def dequantize_packed_reference(
    packed: torch.Tensor,
    scales: torch.Tensor,
    offsets: torch.Tensor,
    group_size: int,
    dtype: torch.dtype = torch.float64,
) -> torch.Tensor:
    """W [K, N] = q * s + offset evaluated in `dtype`: the weight the GEMM kernel multiplies by.

    `packed` is either layout: [N/64, K/16, 32, 4] is mixgemm int4 v1, [N/64, K/16, 32, 8] int8 v1.
    """
    fn = "dequantize_packed_reference"
    _check_tensor(fn, "packed", packed, 4, (torch.int32,), "int32")
    words = packed.shape[-1]
    _require(
        words in (INT4_WORDS_PER_LANE, INT8_WORDS_PER_LANE),
        f"{fn}: packed must have shape [N/64, K/16, 32, 4] (int4) or [N/64, K/16, 32, 8] (int8) "
        f"(got {tuple(packed.shape)})",
    )
    if words == INT8_WORDS_PER_LANE:
        q = unpack_int8_kernel_layout(packed)
    else:
        q = unpack_int4_kernel_layout(packed)
    K, N = q.shape
    _check_tensor(fn, "scales", scales, 2, _ACT_DTYPES, "torch.float16 or torch.bfloat16 ([K/G, N])")
    _check_tensor(fn, "offsets", offsets, 2, _ACT_DTYPES, "torch.float16 or torch.bfloat16 ([K/G, N])")
    _require(
        dtype.is_floating_point if isinstance(dtype, torch.dtype) else False,
        f"{fn}: dtype must be a floating torch.dtype (got {dtype!r})",
    )
    _check_group_size(fn, group_size, K)
    groups = K // group_size
    _require(
        tuple(scales.shape) == (groups, N),
        f"{fn}: scales must have shape [K/group_size, N] = {(groups, N)} (got {tuple(scales.shape)})",
    )
    _require(
        offsets.shape == scales.shape and offsets.dtype == scales.dtype,
        f"{fn}: offsets must have the shape and dtype of scales (got {tuple(offsets.shape)} {offsets.dtype} "
        f"vs {tuple(scales.shape)} {scales.dtype})",
    )
    s = scales.to(dtype).repeat_interleave(group_size, dim=0)
    b = offsets.to(dtype).repeat_interleave(group_size, dim=0)
    return q.to(dtype) * s + b


# --------------------------------------------------------------------------------------------
# The layout interface (mixgemm.layouts): the same names in every layout module.
# --------------------------------------------------------------------------------------------

NAME = "sm80"
# What the layout can hold: 64-column strips of 16-deep slabs.
N_MULTIPLE = BLOCK_N
K_MULTIPLE = BLOCK_K
_WORDS_PER_LANE = {4: INT4_WORDS_PER_LANE, 8: INT8_WORDS_PER_LANE}


def packed_shape(K: int, N: int, bits: int) -> Tuple[int, int, int, int]:
    """The shape of a packed ``[K, N]`` weight of ``bits``-bit codes."""
    _check_bits("packed_shape", bits)
    return (N // BLOCK_N, K // BLOCK_K, 32, _WORDS_PER_LANE[bits])


def described_shape(bits: int) -> str:
    _check_bits("described_shape", bits)
    return f"[N/64, K/16, 32, {_WORDS_PER_LANE[bits]}] (the sm80 layout)"


def pack(q: torch.Tensor, bits: int = 4) -> torch.Tensor:
    """Unsigned codes ``q [K, N]`` -> the packed words."""
    _check_bits("pack", bits)
    return pack_int4_kernel_layout(q) if bits == 4 else pack_int8_kernel_layout(q)


def unpack(packed: torch.Tensor, bits: int = 4) -> torch.Tensor:
    """The packed words -> unsigned codes ``[K, N]``."""
    _check_bits("unpack", bits)
    return unpack_int4_kernel_layout(packed) if bits == 4 else unpack_int8_kernel_layout(packed)


def offsets(scales: torch.Tensor, zeros: Optional[torch.Tensor], bits: int) -> torch.Tensor:
    """The additive offsets ``[K/G, N]`` the kernels add: ``-z * s`` (unsigned codes; z = 8 / 128 when
    ``zeros`` is None)."""
    return fold_zero_points(scales, zeros, scales.dtype, bits)


def pack_awq_int4_on_gpu(qweight: torch.Tensor, scales: torch.Tensor, qzeros: Optional[torch.Tensor],
                         stream: int) -> Tuple[torch.Tensor, torch.Tensor]:
    """The GPU twin of :func:`prepack_awq_reference` (cpp/mixgemm/prepack): AWQ int4 ``qweight [K, N/8]`` (and
    ``qzeros``, None for symmetric weights) of CUDA tensors already validated -> ``(packed, offsets)``, launched
    on ``stream`` of their device (which must be current)."""
    from .._runtime import extension

    K, N = qweight.shape[0], scales.shape[1]
    packed = torch.empty(packed_shape(K, N, 4), dtype=torch.int32, device=qweight.device)
    extension().prepack_awq_qweight(qweight.data_ptr(), packed.data_ptr(), K, N, stream)
    if qzeros is None:
        # The same single rounding as the kernel's -(z * s): the product is exact in float32.
        return packed, (-(SYMMETRIC_ZERO * scales.float())).to(scales.dtype)
    folded = torch.empty_like(scales)
    act = "bf16" if scales.dtype == torch.bfloat16 else "fp16"
    extension().fold_awq_zeros(qzeros.data_ptr(), scales.data_ptr(), folded.data_ptr(), scales.shape[0], N, act,
                               stream)
    return packed, folded
