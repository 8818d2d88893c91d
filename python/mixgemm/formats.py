"""Reference (pure PyTorch) implementations of the int4 and int8 weight formats.

Everything in this module is the *ground truth* the CUDA kernels and the CPU
fallbacks are tested against, so it favours obviousness over speed.  All
functions are vectorised torch code and run on whatever device their inputs
live on.

Logical model
-------------
A quantised linear weight is described by three logical tensors, all indexed
like the dense weight ``W`` of shape ``[K, N]`` (K = input features, the
reduction dimension of the GEMM; N = output features):

* ``q``      - integer codes, ``uint8`` ``[K, N]`` in ``0 .. 2**bits - 1``;
* ``scales`` - float ``[K/G, N]``, one per group of ``G`` consecutive K rows
  and per column;
* ``zeros``  - integer zero points, ``uint8`` ``[K/G, N]`` in the same range as
  ``q`` (absent for symmetric quantisation, where the zero is the constant
  ``2**(bits-1)``).

and dequantise as ``W[k, n] = (q[k, n] - z[g(k), n]) * s[g(k), n]`` with
``g(k) = k // G`` (or ``g_idx[k]`` for GPTQ "act-order" checkpoints).

Packed int4 layouts
-------------------
Eight 4-bit codes are packed into one ``int32``; "nibble i" means bits
``4i .. 4i+3``.  Because the tensors are *signed* int32, a code >= 8 in nibble 7
sets the sign bit and the packed word is negative.  The packers therefore do
their bit arithmetic in int64 and wrap the result into the int32 range
explicitly, and the unpackers mask back to 32 unsigned bits first.

* **AWQ** (``qweight [K, N/8]``, ``qzeros [K/G, N/8]``): packed along N with an
  interleaved order: nibble ``i`` of word ``c`` holds logical column
  ``8c + AWQ_ORDER[i]``, ``AWQ_ORDER = (0, 2, 4, 6, 1, 3, 5, 7)``.  (The
  interleave lets a kernel turn one word into fp16 pairs with a couple of
  shift/mask ops.)  Equivalently column ``j`` of a pack sits in nibble
  ``AWQ_NIBBLE_OF_COLUMN[j] = (0, 4, 1, 5, 2, 6, 3, 7)[j]``.
* **GPTQ qweight** (``[K/8, N]``): packed along K in natural order: nibble ``i``
  of row ``r`` is K-row ``8r + i``.
* **GPTQ qzeros** (``[K/G, N/8]``): packed along N in natural order: nibble
  ``i`` of word ``c`` is column ``8c + i``.  GPTQ checkpoints as AutoGPTQ and
  GPTQModel write them ("v1", ``checkpoint_format: "gptq"`` or absent) store
  ``z - 1`` instead of ``z``; only ``checkpoint_format: "gptq_v2"`` stores ``z``.
  v1 is therefore the default everywhere here (``v1=True``): we store
  ``(z - 1) mod 16`` and add the 1 back (mod 16) when unpacking, so every zero
  0..15 round-trips.  Pass ``v1=False`` for gptq_v2 zeros.

Packed int8 (GPTQ 8-bit) layouts
--------------------------------
Four 8-bit codes per ``int32``; "byte i" means bits ``8i .. 8i+7``.  A code
>= 128 in byte 3 sets the sign bit, handled exactly as for int4.

* **GPTQ qweight** (``[K/4, N]``): byte ``i`` of row ``r`` is K-row ``4r + i``.
* **GPTQ qzeros** (``[K/G, N/4]``): byte ``i`` of word ``c`` is column
  ``4c + i``; ``v1=True`` (the default, as for int4) stores ``(z - 1) mod 256``.
* Symmetric int8 codes are stored biased by 128 (``zeros=None`` means z = 128).
"""

from __future__ import annotations

import torch

__all__ = [
    "AWQ_ORDER",
    "AWQ_NIBBLE_OF_COLUMN",
    "pack_awq",
    "unpack_awq",
    "pack_gptq_qweight",
    "unpack_gptq_qweight",
    "pack_gptq_zeros",
    "unpack_gptq_zeros",
    "pack_gptq_qweight_int8",
    "unpack_gptq_qweight_int8",
    "pack_gptq_zeros_int8",
    "unpack_gptq_zeros_int8",
    "quantize_asym",
    "quantize_sym",
    "dequantize",
    "random_awq_weight",
    "random_gptq_int8_weight",
    "awq_to_gptq",
    "gptq_to_awq",
    "ZeroPointFormatWarning",
    "symmetric_zeros_mismatch",
]

# ---------------------------------------------------------------------------
# Constants
# ---------------------------------------------------------------------------

PACK = 8  # int4 codes per int32 word
NIBBLE_BITS = 4
NIBBLE_MASK = (1 << NIBBLE_BITS) - 1  # 0xF
_MAX_NIBBLE = NIBBLE_MASK  # largest storable code, 15
PACK_INT8 = 4  # int8 codes per int32 word
BYTE_BITS = 8
_MAX_BYTE = (1 << BYTE_BITS) - 1  # largest storable int8 code, 255
_WORD_BITS = 32
_U32_MASK = (1 << 32) - 1
_INT32_SPAN = 1 << 32  # subtract this from an unsigned word >= 2**31 to wrap it
_INT32_SIGN = 1 << 31

#: AWQ interleave: nibble i of a packed word holds logical column 8c + AWQ_ORDER[i].
AWQ_ORDER = (0, 2, 4, 6, 1, 3, 5, 7)

#: Inverse permutation of AWQ_ORDER: logical column j of a pack sits in nibble
#: AWQ_NIBBLE_OF_COLUMN[j].  Derived, not typed in, so the two cannot disagree.
AWQ_NIBBLE_OF_COLUMN = tuple(AWQ_ORDER.index(j) for j in range(PACK))
assert AWQ_NIBBLE_OF_COLUMN == (0, 4, 1, 5, 2, 6, 3, 7)

_HALF_TYPES = (torch.float16, torch.bfloat16)


# ---------------------------------------------------------------------------
# Argument checking helpers
# ---------------------------------------------------------------------------


def _is_integer_dtype(dtype: torch.dtype) -> bool:
    return not (dtype.is_floating_point or dtype.is_complex or dtype == torch.bool)


def _check_2d(fn: str, name: str, t: torch.Tensor) -> None:
    if not isinstance(t, torch.Tensor):
        raise ValueError(f"{fn}: {name} must be a torch.Tensor, got {type(t).__name__}")
    if t.dim() != 2:
        raise ValueError(f"{fn}: {name} must be 2-D, got shape {tuple(t.shape)}")


def _check_codes(fn: str, name: str, t: torch.Tensor, max_value: int = _MAX_NIBBLE) -> None:
    """``t`` must be a 2-D integer tensor with every entry in 0..max_value."""
    _check_2d(fn, name, t)
    if not _is_integer_dtype(t.dtype):
        raise ValueError(f"{fn}: {name} must have an integer dtype, got {t.dtype}")
    if t.numel() > 0:
        lo, hi = int(t.min()), int(t.max())
        if lo < 0 or hi > max_value:
            raise ValueError(
                f"{fn}: {name} must lie in 0..{max_value}, got values in {lo}..{hi}"
            )


def _check_packed(fn: str, name: str, t: torch.Tensor) -> None:
    _check_2d(fn, name, t)
    if t.dtype != torch.int32:
        raise ValueError(f"{fn}: {name} must have dtype torch.int32, got {t.dtype}")


def _check_divisible(fn: str, name: str, what: str, size: int, by: int) -> None:
    if size % by != 0:
        raise ValueError(f"{fn}: {name} must have {what} divisible by {by}, got {size}")


def _check_group_size(fn: str, group_size, K: int) -> None:
    if isinstance(group_size, bool) or not isinstance(group_size, int) or group_size <= 0:
        raise ValueError(f"{fn}: group_size must be a positive int, got {group_size!r}")
    if K % group_size != 0:
        raise ValueError(
            f"{fn}: group_size must divide K (the first dimension), got K={K}, "
            f"group_size={group_size}"
        )


def _check_bits(fn: str, bits) -> None:
    if isinstance(bits, bool) or not isinstance(bits, int) or not 2 <= bits <= 8:
        raise ValueError(f"{fn}: bits must be an int in 2..8, got {bits!r}")


# ---------------------------------------------------------------------------
# Core word packing (shared by every layout)
# ---------------------------------------------------------------------------
#
# A 32-bit word holds 32 // bits codes ("fields"): 8 nibbles for int4, 4 bytes
# for int8.  Field i occupies bits ``bits*i .. bits*i + bits - 1``.


def _field_shifts(bits: int, device) -> torch.Tensor:
    """Shift amounts of fields 0 .. 32/bits - 1 within a word, built per device on demand."""
    return torch.arange(_WORD_BITS // bits, dtype=torch.int64, device=device) * bits


def _pack_fields(fields: torch.Tensor, bits: int) -> torch.Tensor:
    """Pack ``[..., 32/bits]`` codes (field i = ``fields[..., i]``) into int32 ``[...]``.

    Done in int64 so that a top field with its high bit set just gives a value
    >= 2**31 (no signed overflow); the sum of the disjoint shifted fields equals
    their bitwise OR.  The unsigned 32-bit word is then mapped to the int32 with
    the same bits.
    """
    words = (fields.to(torch.int64) << _field_shifts(bits, fields.device)).sum(dim=-1)
    words = torch.where(words >= _INT32_SIGN, words - _INT32_SPAN, words)
    return words.to(torch.int32)


def _unpack_fields(words: torch.Tensor, bits: int) -> torch.Tensor:
    """Inverse of :func:`_pack_fields`: int32 ``[...]`` -> uint8 ``[..., 32/bits]``."""
    # Reinterpret as unsigned 32 bits (a negative int32 has bit 31 set).
    unsigned = words.to(torch.int64) & _U32_MASK
    fields = (unsigned.unsqueeze(-1) >> _field_shifts(bits, words.device)) & ((1 << bits) - 1)
    return fields.to(torch.uint8)


def _pack_nibbles(nibbles: torch.Tensor) -> torch.Tensor:
    """Pack ``[..., 8]`` int4 codes (nibble i = ``nibbles[..., i]``) into int32 ``[...]``."""
    return _pack_fields(nibbles, NIBBLE_BITS)


def _unpack_nibbles(words: torch.Tensor) -> torch.Tensor:
    """Inverse of :func:`_pack_nibbles`: int32 ``[...]`` -> uint8 ``[..., 8]``."""
    return _unpack_fields(words, NIBBLE_BITS)


def _pack_along_last(
    fn: str, name: str, values: torch.Tensor, column_of_field, bits: int = NIBBLE_BITS
) -> torch.Tensor:
    """Pack ``[R, C]`` along C: field i of word c holds column ``P*c + column_of_field[i]``.

    ``P = 32 // bits`` codes per word (8 for int4, 4 for int8).
    """
    per_word = _WORD_BITS // bits
    _check_codes(fn, name, values, (1 << bits) - 1)
    R, C = values.shape
    _check_divisible(fn, name, "a last dimension", C, per_word)
    packs = values.reshape(R, C // per_word, per_word)
    order = torch.tensor(column_of_field, dtype=torch.long, device=values.device)
    return _pack_fields(packs.index_select(-1, order), bits)


def _unpack_along_last(
    fn: str, name: str, packed: torch.Tensor, field_of_column, bits: int = NIBBLE_BITS
) -> torch.Tensor:
    """Inverse of :func:`_pack_along_last`: column j of a pack comes from field_of_column[j]."""
    _check_packed(fn, name, packed)
    R, W = packed.shape
    fields = _unpack_fields(packed, bits)  # [R, W, P], indexed by field
    order = torch.tensor(field_of_column, dtype=torch.long, device=packed.device)
    return fields.index_select(-1, order).reshape(R, W * (_WORD_BITS // bits))


_NATURAL = tuple(range(PACK))


# ---------------------------------------------------------------------------
# AWQ
# ---------------------------------------------------------------------------


def pack_awq(values: torch.Tensor) -> torch.Tensor:
    """Pack int4 codes ``[R, C]`` (any int dtype, 0..15) into AWQ int32 ``[R, C/8]``.

    Used for both the AWQ ``qweight`` (``[K, N]``) and ``qzeros`` (``[K/G, N]``).
    """
    return _pack_along_last("pack_awq", "values", values, AWQ_ORDER)


def unpack_awq(packed: torch.Tensor) -> torch.Tensor:
    """Unpack AWQ int32 ``[R, C/8]`` into uint8 codes ``[R, C]``."""
    return _unpack_along_last("unpack_awq", "packed", packed, AWQ_NIBBLE_OF_COLUMN)


# ---------------------------------------------------------------------------
# GPTQ
# ---------------------------------------------------------------------------


def pack_gptq_qweight(values: torch.Tensor) -> torch.Tensor:
    """Pack int4 codes ``[K, N]`` into GPTQ int32 ``[K/8, N]`` (nibble i of row r = K-row 8r+i)."""
    fn = "pack_gptq_qweight"
    _check_codes(fn, "values", values)
    K, N = values.shape
    _check_divisible(fn, "values", "a first dimension", K, PACK)
    # [K, N] -> [K/8, 8, N] -> [K/8, N, 8]: the last axis walks the 8 K-rows of a word.
    nibbles = values.reshape(K // PACK, PACK, N).transpose(1, 2)
    return _pack_nibbles(nibbles)


def unpack_gptq_qweight(packed: torch.Tensor) -> torch.Tensor:
    """Unpack GPTQ int32 ``[K/8, N]`` into uint8 codes ``[K, N]``."""
    _check_packed("unpack_gptq_qweight", "packed", packed)
    K8, N = packed.shape
    nibbles = _unpack_nibbles(packed)  # [K/8, N, 8]
    return nibbles.transpose(1, 2).reshape(K8 * PACK, N)


def pack_gptq_zeros(zeros: torch.Tensor, v1: bool = True) -> torch.Tensor:
    """Pack zero points ``[K/G, N]`` into GPTQ int32 ``[K/G, N/8]`` (natural order along N).

    With ``v1=True`` (the default: what AutoGPTQ/GPTQModel write) the stored code is
    ``(z - 1) mod 16``; ``v1=False`` stores ``z`` (``gptq_v2``).
    """
    fn = "pack_gptq_zeros"
    _check_codes(fn, "zeros", zeros)
    if v1:
        # Work in int64: z - 1 would wrap wrongly in uint8 (0 - 1 = 255, which
        # happens to be 15 mod 16, but int8 etc. behave differently).
        zeros = (zeros.to(torch.int64) - 1) % (_MAX_NIBBLE + 1)
    return _pack_along_last(fn, "zeros", zeros, _NATURAL)


def unpack_gptq_zeros(packed: torch.Tensor, v1: bool = True) -> torch.Tensor:
    """Unpack GPTQ int32 ``[K/G, N/8]`` into uint8 zero points ``[K/G, N]``.

    ``v1=True`` (the default) reads v1 checkpoints (stored ``z - 1``); ``v1=False`` returns the codes as
    stored (``gptq_v2``).
    """
    stored = _unpack_along_last("unpack_gptq_zeros", "packed", packed, _NATURAL)
    if v1:
        stored = (stored + 1) % (_MAX_NIBBLE + 1)  # uint8 arithmetic: 15 + 1 = 16 -> 0
    return stored


# ---------------------------------------------------------------------------
# GPTQ 8-bit
# ---------------------------------------------------------------------------

_NATURAL_INT8 = tuple(range(PACK_INT8))


def pack_gptq_qweight_int8(values: torch.Tensor) -> torch.Tensor:
    """Pack int8 codes ``[K, N]`` (0..255) into GPTQ int32 ``[K/4, N]``.

    Byte i (bits ``8i .. 8i+7``) of row r is K-row ``4r + i``.
    """
    fn = "pack_gptq_qweight_int8"
    _check_codes(fn, "values", values, _MAX_BYTE)
    K, N = values.shape
    _check_divisible(fn, "values", "a first dimension", K, PACK_INT8)
    # [K, N] -> [K/4, 4, N] -> [K/4, N, 4]: the last axis walks the 4 K-rows of a word.
    bytes_ = values.reshape(K // PACK_INT8, PACK_INT8, N).transpose(1, 2)
    return _pack_fields(bytes_, BYTE_BITS)


def unpack_gptq_qweight_int8(packed: torch.Tensor) -> torch.Tensor:
    """Unpack GPTQ 8-bit int32 ``[K/4, N]`` into uint8 codes ``[K, N]``."""
    _check_packed("unpack_gptq_qweight_int8", "packed", packed)
    K4, N = packed.shape
    bytes_ = _unpack_fields(packed, BYTE_BITS)  # [K/4, N, 4]
    return bytes_.transpose(1, 2).reshape(K4 * PACK_INT8, N)


def pack_gptq_zeros_int8(zeros: torch.Tensor, v1: bool = True) -> torch.Tensor:
    """Pack 8-bit zero points ``[K/G, N]`` into GPTQ int32 ``[K/G, N/4]`` (byte i = column 4c+i).

    With ``v1=True`` (the default, as GPTQ checkpoints store them) the stored code is ``(z - 1) mod 256``;
    ``v1=False`` stores ``z`` (``gptq_v2``).
    """
    fn = "pack_gptq_zeros_int8"
    _check_codes(fn, "zeros", zeros, _MAX_BYTE)
    if v1:
        zeros = (zeros.to(torch.int64) - 1) % (_MAX_BYTE + 1)
    return _pack_along_last(fn, "zeros", zeros, _NATURAL_INT8, bits=BYTE_BITS)


def unpack_gptq_zeros_int8(packed: torch.Tensor, v1: bool = True) -> torch.Tensor:
    """Unpack GPTQ 8-bit int32 ``[K/G, N/4]`` into uint8 zero points ``[K/G, N]``.

    ``v1=True`` (the default) reads stored ``z - 1``; ``v1=False`` returns the codes as stored (``gptq_v2``).
    """
    stored = _unpack_along_last(
        "unpack_gptq_zeros_int8", "packed", packed, _NATURAL_INT8, bits=BYTE_BITS
    )
    if v1:
        # int64 so that 255 + 1 = 256 -> 0 is an explicit modulo, not a uint8 overflow.
        stored = ((stored.to(torch.int64) + 1) % (_MAX_BYTE + 1)).to(torch.uint8)
    return stored


class ZeroPointFormatWarning(UserWarning):
    """GPTQ zeros that look written in the other zero-point format (v1 ``z - 1`` versus gptq_v2 ``z``)."""


def symmetric_zeros_mismatch(stored: torch.Tensor, bits: int, v1: bool) -> str | None:
    """Why GPTQ zeros (``stored``: the codes as unpacked with ``v1=False``) contradict the ``v1`` reading,
    or None.

    A symmetric GPTQ checkpoint holds one zero point everywhere, ``2**(bits-1)``: stored as
    ``2**(bits-1) - 1`` in v1 and as ``2**(bits-1)`` in gptq_v2. Read with the wrong convention, every
    weight shifts by one scale step with no other symptom, so a constant tensor holding exactly the *other*
    format's code is reported. (An asymmetric checkpoint never has one zero for every group and column in
    practice, so this has no false alarms on real weights.)
    """
    mid = 1 << (bits - 1)
    if stored.numel() == 0:
        return None
    expected, other = (mid - 1, mid) if v1 else (mid, mid - 1)
    if not bool((stored == other).all()):
        return None
    read_as, fix = ("v1 (stored z - 1)", "gptq_v2") if v1 else ("gptq_v2 (stored z)", "gptq (v1)")
    return (
        f"every stored zero point is {other}, the code of a symmetric {fix} checkpoint (z = {mid}); read as "
        f"{read_as} they mean z = {other + 1 if v1 else other}, which shifts every weight by one scale step. "
        f"If the checkpoint is {fix}, load it as such (checkpoint_format '{'gptq_v2' if v1 else 'gptq'}'); a "
        f"symmetric {read_as.split()[0]} checkpoint would store {expected}"
    )


# ---------------------------------------------------------------------------
# Format conversion
# ---------------------------------------------------------------------------


def awq_to_gptq(qweight: torch.Tensor, qzeros: torch.Tensor, v1: bool = True):
    """AWQ ``(qweight [K, N/8], qzeros [K/G, N/8])`` -> GPTQ ``(qweight [K/8, N], qzeros [K/G, N/8])``.

    Scales are shared unchanged (both formats store them as ``[K/G, N]``). The GPTQ zeros are written v1
    (``z - 1``, the default) or, with ``v1=False``, as ``gptq_v2`` (``z``).
    """
    q = unpack_awq(qweight)
    z = unpack_awq(qzeros)
    if q.shape[1] != z.shape[1]:
        raise ValueError(
            f"awq_to_gptq: qweight and qzeros must describe the same N, got "
            f"{q.shape[1]} and {z.shape[1]}"
        )
    return pack_gptq_qweight(q), pack_gptq_zeros(z, v1=v1)


def gptq_to_awq(qweight: torch.Tensor, qzeros: torch.Tensor, v1: bool = True):
    """GPTQ ``(qweight [K/8, N], qzeros [K/G, N/8])`` -> AWQ ``(qweight [K, N/8], qzeros [K/G, N/8])``.

    ``v1`` says how the *input* zeros are stored: ``z - 1`` (the default, v1) or ``z`` (``v1=False``, gptq_v2).  Act-order (``g_idx``)
    checkpoints are not representable in AWQ and must be handled by the caller.
    """
    q = unpack_gptq_qweight(qweight)
    z = unpack_gptq_zeros(qzeros, v1=v1)
    if q.shape[1] != z.shape[1]:
        raise ValueError(
            f"gptq_to_awq: qweight and qzeros must describe the same N, got "
            f"{q.shape[1]} and {z.shape[1]}"
        )
    return pack_awq(q), pack_awq(z)


# ---------------------------------------------------------------------------
# Quantisation / dequantisation
# ---------------------------------------------------------------------------


def _scale_dtype(w: torch.Tensor) -> torch.dtype:
    return w.dtype if w.dtype in _HALF_TYPES else torch.float16


def _storable_scale(exact: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """Round positive float64 scales to ``dtype`` *upwards* (and away from zero).

    The half-step error bound of the quantisers relies on the value range of a
    group fitting into ``2**bits - 1`` steps of the scale actually *stored*.
    Rounding to nearest could make the stored scale slightly smaller than the
    exact one, pushing the group's extreme value just past the last code and
    costing a little more than half a step after clamping.  Rounding up never
    does.  The floor at the smallest normal number guards constant groups
    (zero range) and ranges so small they would underflow to 0.
    """
    exact = exact.clamp(min=torch.finfo(dtype).tiny)
    stored = exact.to(dtype)
    too_small = stored.to(torch.float64) < exact
    # fp16 and bf16 are 16-bit; for positive finite values, adding 1 to the bit
    # pattern gives the next representable value up (works on every device).
    bumped = (stored.view(torch.int16) + 1).view(dtype)
    return torch.where(too_small, bumped, stored)


def _groups(fn: str, w: torch.Tensor, group_size: int) -> torch.Tensor:
    """Validate ``w [K, N]`` and view it in float64 as ``[K/G, G, N]``."""
    _check_2d(fn, "w", w)
    if not w.dtype.is_floating_point:
        raise ValueError(f"{fn}: w must have a floating-point dtype, got {w.dtype}")
    K, N = w.shape
    _check_group_size(fn, group_size, K)
    finite = torch.isfinite(w)
    if not bool(finite.all()):
        # A NaN or inf would propagate into the group's scale (or vanish in a clamp) and give codes that
        # look valid but mean nothing: refuse, and say where the first one is.
        bad = (~finite).nonzero()[0].tolist()
        raise ValueError(
            f"{fn}: w must be finite, got {int(torch.isnan(w).sum())} NaN and {int(torch.isinf(w).sum())} "
            f"inf values (the first at w[{bad[0]}, {bad[1]}])"
        )
    # float64 keeps the reference's own rounding far below the quantisation step.
    return w.to(torch.float64).reshape(K // group_size, group_size, N)


def quantize_asym(w: torch.Tensor, group_size: int, bits: int = 4):
    """Asymmetric min/max quantisation of ``w [K, N]`` in groups of ``group_size`` K rows.

    Returns ``(q uint8 [K, N], scales [K/G, N], zeros uint8 [K/G, N])`` with
    scales in ``w.dtype`` for fp16/bf16 inputs and fp16 otherwise.

    The group range is widened to include 0 (``min <= 0 <= max``), as GPTQ
    does; that keeps the zero point ``round(-min/scale)`` inside
    ``0 .. 2**bits - 1`` (so clamping it never moves the grid) and, together
    with rounding the stored scale up, guarantees
    ``|w - (q - z) * s| <= s / 2`` for every element.
    """
    fn = "quantize_asym"
    _check_bits(fn, bits)
    wg = _groups(fn, w, group_size)
    maxq = (1 << bits) - 1

    lo = wg.amin(dim=1).clamp(max=0.0)  # [K/G, N]
    hi = wg.amax(dim=1).clamp(min=0.0)
    scales = _storable_scale((hi - lo) / maxq, _scale_dtype(w))
    s = scales.to(torch.float64)

    # -lo/s <= (hi - lo)/s <= maxq because s >= the exact scale, so the clamp is
    # only a safety net.  Every w/s + z then lies in [-0.5, maxq + 0.5].
    zeros = torch.round(-lo / s).clamp(0, maxq)
    q = (torch.round(wg / s.unsqueeze(1)) + zeros.unsqueeze(1)).clamp(0, maxq)

    K, N = w.shape
    return q.reshape(K, N).to(torch.uint8), scales, zeros.to(torch.uint8)


def quantize_sym(w: torch.Tensor, group_size: int, bits: int = 4):
    """Symmetric quantisation of ``w [K, N]``; returns ``(q uint8 [K, N], scales [K/G, N])``.

    Codes are stored biased: ``q = q_signed + 2**(bits-1)``, so
    ``W = (q - 8) * s`` for int4 and ``(q - 128) * s`` for int8 (this is
    :func:`dequantize` with ``zeros=None``).

    Choice of scale: ``s = 2 * absmax / (2**bits - 1)`` (GPTQ's ``sym=True``
    convention), i.e. ``[-absmax, absmax]`` is split into ``2**bits - 1``
    steps.  Then ``|w/s| <= 2**(bits-1) - 0.5``, so every code 0..2**bits-1
    (including the otherwise unused -8) is reachable and the error is still at
    most half a step.  (The alternative ``absmax / (2**(bits-1) - 1)`` wastes
    code -8 and has a ~7% coarser step for int4.)  Scales dtype as in
    :func:`quantize_asym`.
    """
    fn = "quantize_sym"
    _check_bits(fn, bits)
    wg = _groups(fn, w, group_size)
    maxq = (1 << bits) - 1
    bias = 1 << (bits - 1)

    absmax = wg.abs().amax(dim=1)
    scales = _storable_scale(2.0 * absmax / maxq, _scale_dtype(w))
    s = scales.to(torch.float64)

    # w/s + bias lies in [0.5, maxq + 0.5]; only the top can round out of range.
    q = (torch.round(wg / s.unsqueeze(1)) + bias).clamp(0, maxq)

    K, N = w.shape
    return q.reshape(K, N).to(torch.uint8), scales


def dequantize(
    q: torch.Tensor,
    scales: torch.Tensor,
    zeros: torch.Tensor | None = None,
    group_size: int | None = None,
    g_idx: torch.Tensor | None = None,
    bits: int = 4,
    dtype: torch.dtype = torch.float64,
) -> torch.Tensor:
    """Dense ``W [K, N]`` in ``dtype`` from codes ``q [K, N]`` and per-group ``scales``/``zeros``.

    ``W[k, n] = (q[k, n] - z[g(k), n]) * s[g(k), n]`` where ``g(k) = g_idx[k]``
    if ``g_idx`` is given (it takes precedence over ``group_size``), else
    ``k // group_size``.  ``zeros=None`` means symmetric: ``z = 2**(bits-1)``.
    All arithmetic is done in ``dtype`` (scales are upcast first), so the
    default float64 result is exact up to a single rounding.
    """
    fn = "dequantize"
    _check_bits(fn, bits)
    maxq = (1 << bits) - 1
    _check_codes(fn, "q", q, maxq)
    _check_2d(fn, "scales", scales)
    if not scales.dtype.is_floating_point:
        raise ValueError(f"{fn}: scales must have a floating-point dtype, got {scales.dtype}")
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise ValueError(f"{fn}: dtype must be a floating-point torch.dtype, got {dtype!r}")
    K, N = q.shape
    n_groups = scales.shape[0]
    if scales.shape[1] != N:
        raise ValueError(
            f"{fn}: scales must have N={N} columns like q, got shape {tuple(scales.shape)}"
        )
    if zeros is not None:
        _check_codes(fn, "zeros", zeros, maxq)
        if tuple(zeros.shape) != tuple(scales.shape):
            raise ValueError(
                f"{fn}: zeros must have the same shape as scales {tuple(scales.shape)}, "
                f"got {tuple(zeros.shape)}"
            )

    if g_idx is not None:
        if not isinstance(g_idx, torch.Tensor) or g_idx.dim() != 1 or g_idx.shape[0] != K:
            shape = tuple(g_idx.shape) if isinstance(g_idx, torch.Tensor) else type(g_idx).__name__
            raise ValueError(f"{fn}: g_idx must be a 1-D tensor of length K={K}, got {shape}")
        if not _is_integer_dtype(g_idx.dtype):
            raise ValueError(f"{fn}: g_idx must have an integer dtype, got {g_idx.dtype}")
        if K > 0:
            lo, hi = int(g_idx.min()), int(g_idx.max())
            if lo < 0 or hi >= n_groups:
                raise ValueError(
                    f"{fn}: g_idx must lie in 0..{n_groups - 1} (the rows of scales), "
                    f"got values in {lo}..{hi}"
                )
        group_of_row = g_idx.to(device=q.device, dtype=torch.long)
    elif group_size is not None:
        _check_group_size(fn, group_size, K)
        if K // group_size != n_groups:
            raise ValueError(
                f"{fn}: scales must have K/group_size={K // group_size} rows, "
                f"got {n_groups}"
            )
        group_of_row = torch.arange(K, device=q.device) // group_size
    else:
        raise ValueError(f"{fn}: one of group_size or g_idx must be given")

    # Expand the per-group parameters to one row per k, then dequantise elementwise.
    s = scales.to(device=q.device, dtype=dtype).index_select(0, group_of_row)
    if zeros is None:
        z = torch.tensor(1 << (bits - 1), dtype=dtype, device=q.device)
    else:
        z = zeros.to(device=q.device, dtype=dtype).index_select(0, group_of_row)
    return (q.to(dtype) - z) * s


# ---------------------------------------------------------------------------
# Random test weights
# ---------------------------------------------------------------------------


def _check_random_weight_args(fn, K, N, group_size, dtype, k_pack: int, n_pack: int) -> None:
    for name, v in (("K", K), ("N", N)):
        if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
            raise ValueError(f"{fn}: {name} must be a positive int, got {v!r}")
    if k_pack > 1:
        _check_divisible(fn, "K", "a value", K, k_pack)
    _check_divisible(fn, "N", "a value", N, n_pack)
    _check_group_size(fn, group_size, K)
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise ValueError(f"{fn}: dtype must be a floating-point torch.dtype, got {dtype!r}")


def _random_kwargs(generator, device) -> dict:
    # Random numbers are drawn on the generator's device (torch requires that), then moved to `device`.
    gen_device = generator.device if generator is not None else torch.device(device)
    return dict(generator=generator, device=gen_device)


def _random_scales(G: int, N: int, dtype, kw: dict, divisor: float) -> torch.Tensor:
    """sign * (0.002 + 0.01 |normal|) / divisor: realistic magnitudes, both signs (kernels must not assume
    s > 0), never zero."""
    magnitude = (0.002 + 0.01 * torch.randn((G, N), dtype=torch.float32, **kw).abs()) / divisor
    sign = torch.randint(0, 2, (G, N), dtype=torch.int64, **kw) * 2 - 1
    return (sign * magnitude).to(dtype)


def random_awq_weight(
    K: int,
    N: int,
    group_size: int,
    dtype: torch.dtype = torch.float16,
    device="cpu",
    generator: torch.Generator | None = None,
) -> dict:
    """Random AWQ-packed weight: ``dict(qweight [K, N/8] int32, scales [K/G, N] dtype, qzeros [K/G, N/8] int32)``.

    Codes and zeros are uniform over 0..15 (so every nibble value, including
    the sign-bit cases, shows up).  Scales are ``sign * (0.002 + 0.01 * |normal|)``
    with a random sign: magnitudes like real checkpoints (~1e-3..5e-2), never
    zero, and negative ones to catch kernels that assume ``s > 0``.

    Random numbers are drawn on the generator's device (torch requires that)
    and moved to ``device``.
    """
    fn = "random_awq_weight"
    _check_random_weight_args(fn, K, N, group_size, dtype, k_pack=1, n_pack=PACK)
    G = K // group_size
    kw = _random_kwargs(generator, device)

    q = torch.randint(0, _MAX_NIBBLE + 1, (K, N), dtype=torch.int64, **kw)
    z = torch.randint(0, _MAX_NIBBLE + 1, (G, N), dtype=torch.int64, **kw)
    scales = _random_scales(G, N, dtype, kw, divisor=1)

    return dict(
        qweight=pack_awq(q).to(device),
        scales=scales.to(device),
        qzeros=pack_awq(z).to(device),
    )


def random_gptq_int8_weight(
    K: int,
    N: int,
    group_size: int,
    dtype: torch.dtype = torch.float16,
    device="cpu",
    generator: torch.Generator | None = None,
    symmetric: bool = False,
) -> dict:
    """Random GPTQ 8-bit weight: ``dict(qweight [K/4, N] int32, scales [K/G, N] dtype, qzeros)``.

    ``qzeros`` is int32 ``[K/G, N/4]`` (GPTQ 8-bit packing, stored v1 as
    ``z - 1`` like real checkpoints), or ``None`` when ``symmetric`` (implicit z = 128).
    Codes and zeros are uniform over 0..255, so bytes with the top bit set (and
    negative words) show up.  Scales are ``sign * (0.002 + 0.01 * |normal|) / 16``:
    the int4 recipe of :func:`random_awq_weight` made 16x smaller, because an
    int8 ``q - z`` spans 16x more steps, so dequantised weights keep the same
    ~0.1..1 magnitude (far inside fp16 range; the smallest scale, 1.25e-4, is
    still a normal fp16/bf16 number).

    Random numbers are drawn on the generator's device and moved to ``device``.
    """
    fn = "random_gptq_int8_weight"
    _check_random_weight_args(fn, K, N, group_size, dtype, k_pack=PACK_INT8, n_pack=PACK_INT8)
    G = K // group_size
    kw = _random_kwargs(generator, device)

    q = torch.randint(0, _MAX_BYTE + 1, (K, N), dtype=torch.int64, **kw)
    scales = _random_scales(G, N, dtype, kw, divisor=16)
    qzeros = None
    if not symmetric:
        z = torch.randint(0, _MAX_BYTE + 1, (G, N), dtype=torch.int64, **kw)
        qzeros = pack_gptq_zeros_int8(z).to(device)

    return dict(
        qweight=pack_gptq_qweight_int8(q).to(device),
        scales=scales.to(device),
        qzeros=qzeros,
    )
