"""compressed-tensors "pack-quantized" layers (llm-compressor's W4A16 / W8A16), as vLLM reads them.

Per quantized linear with weight ``W`` of torch shape ``[N, K]`` (out, in features), the checkpoint holds:

* ``weight_packed`` int32 ``[N, ceil(K / P)]``, ``P = 32 / bits`` codes per word, packed along K: field ``i``
  (bits ``bits*i ..``) of word ``c`` is input column ``P*c + i``. Codes are the signed quantized values
  shifted by ``2**(bits-1)``, i.e. unsigned ``0 .. 2**bits - 1`` (our biased codes ``q``).
* ``weight_scale`` ``[N, K/G]`` (strategy "group") or ``[N, 1]`` ("channel"), in the model's float dtype.
* ``weight_zero_point`` (asymmetric only) int32 ``[ceil(N / P), K/G]``: the signed zero points, shifted the
  same way and packed along N (field ``i`` of word ``r`` is output row ``P*r + i``).
* ``weight_shape`` ``[2]`` = ``(N, K)``; ``weight_g_idx`` ``[K]`` (act-order "group": the group of each input
  column; -1 in every entry marks an unset index, i.e. plain column order; a -1 among valid indices is refused).

Dequantized, ``W[n, k] = (q[n, k] - z[n, g(k)]) * s[n, g(k)]`` with ``z = 2**(bits-1)`` when symmetric: the
same arithmetic as GPTQ's, transposed. So a layer converts exactly into GPTQ terms with zeros stored as ``z``
(``gptq_v2``), which is what :func:`to_gptq` returns. :func:`layer_tensors` is our own writer of the layout,
used by the tests and the example to make checkpoints.
"""

from __future__ import annotations

import torch

from .. import formats

_WORD_BITS = 32


def _per_word(bits: int) -> int:
    if bits not in (4, 8):
        raise ValueError(f"compressed-tensors: num_bits must be 4 or 8 for mixgemm, got {bits!r}")
    return _WORD_BITS // bits


def pack_rows(codes: torch.Tensor, bits: int) -> torch.Tensor:
    """Unsigned codes ``[R, C]`` (C a multiple of 32/bits) -> int32 ``[R, C * bits / 32]`` packed along C."""
    per_word = _per_word(bits)
    R, C = codes.shape
    if C % per_word:
        raise ValueError(f"compressed-tensors: a packed dimension must be a multiple of {per_word}, got {C}")
    return formats._pack_fields(codes.reshape(R, C // per_word, per_word), bits)


def unpack_rows(packed: torch.Tensor, bits: int, columns: int) -> torch.Tensor:
    """Inverse of :func:`pack_rows`, dropping the padding past ``columns``: uint8 ``[R, columns]``."""
    R, W = packed.shape
    return formats._unpack_fields(packed, bits).reshape(R, W * _per_word(bits))[:, :columns]


def layer_tensors(q: torch.Tensor, scales: torch.Tensor, zeros: torch.Tensor | None, bits: int,
                  g_idx: torch.Tensor | None = None) -> dict[str, torch.Tensor]:
    """Our writer: codes ``q [K, N]`` (biased, ``0 .. 2**bits - 1``), ``scales [K/G, N]`` and ``zeros [K/G, N]``
    (None when symmetric) in mixgemm's ``[K, N]`` orientation -> the layer's pack-quantized tensors, keyed by
    suffix (``weight_packed``, ``weight_scale``, ``weight_shape`` and, when given, ``weight_zero_point`` and
    ``weight_g_idx``)."""
    K, N = q.shape
    out = {
        "weight_packed": pack_rows(q.t().contiguous(), bits),
        "weight_scale": scales.t().contiguous(),
        "weight_shape": torch.tensor([N, K], dtype=torch.int64),
    }
    if zeros is not None:
        # Packed along N: pack the [K/G, N] rows along N, then transpose to [N/P, K/G].
        out["weight_zero_point"] = pack_rows(zeros.contiguous(), bits).t().contiguous()
    if g_idx is not None:
        out["weight_g_idx"] = g_idx.to(torch.int32)
    return out


def to_gptq(name: str, t: dict[str, torch.Tensor | None], bits: int, symmetric: bool, group_size: int | None):
    """One layer's pack-quantized tensors ``t`` (by suffix; absent ones None) -> GPTQ-layout
    ``(qweight [K/P, N], scales [K/G, N], qzeros [K/G, N/P] stored as z (gptq_v2) or None, g_idx or None)``.

    ``name`` is the layer, for messages; ``group_size`` None means channel-wise. Pure PyTorch, CPU."""
    where = f"{name}"
    per_word = _per_word(bits)
    packed, scale, shape = t.get("weight_packed"), t.get("weight_scale"), t.get("weight_shape")
    for key, value in (("weight_packed", packed), ("weight_scale", scale), ("weight_shape", shape)):
        if value is None:
            raise ValueError(f"{where}: the checkpoint has no {where}.{key} (a pack-quantized layer needs "
                             "weight_packed, weight_scale and weight_shape)")
    if packed.dtype != torch.int32 or packed.dim() != 2:
        raise ValueError(f"{where}.weight_packed must be a 2-D int32 tensor, got {packed.dtype} "
                         f"{tuple(packed.shape)}")
    if shape.numel() != 2 or shape.dtype.is_floating_point:
        raise ValueError(f"{where}.weight_shape must hold the two integers (N, K), got {shape.tolist()}")
    N, K = (int(v) for v in shape.tolist())
    _check_packable(where, N, K, per_word)
    if packed.shape[0] != N or packed.shape[1] != -(-K // per_word):
        raise ValueError(f"{where}.weight_packed must have shape [N, ceil(K/{per_word})] = "
                         f"{(N, -(-K // per_word))} for weight_shape (N, K) = {(N, K)}, got {tuple(packed.shape)}")
    groups = 1 if group_size is None else (K // group_size if K % group_size == 0 else -1)
    if groups < 1:
        raise ValueError(f"{where}: group_size {group_size} must divide K = {K}")
    if scale.dim() != 2 or tuple(scale.shape) != (N, groups):
        raise ValueError(f"{where}.weight_scale must have shape [N, K/G] = {(N, groups)} "
                         f"({'channel' if group_size is None else f'group_size {group_size}'}), "
                         f"got {tuple(scale.shape)}")
    q = unpack_rows(packed, bits, K).t().contiguous()  # [K, N]
    qweight = (formats.pack_gptq_qweight(q) if bits == 4 else formats.pack_gptq_qweight_int8(q))
    zero_point = t.get("weight_zero_point")
    qzeros = None
    if not symmetric:
        if zero_point is None:
            raise ValueError(f"{where}: the config says asymmetric but the checkpoint has no "
                             f"{where}.weight_zero_point")
        expected = (-(-N // per_word), groups)
        if zero_point.dtype != torch.int32 or tuple(zero_point.shape) != expected:
            raise ValueError(f"{where}.weight_zero_point must be int32 [ceil(N/{per_word}), K/G] = {expected}, "
                             f"got {zero_point.dtype} {tuple(zero_point.shape)}")
        z = unpack_rows(zero_point.t().contiguous(), bits, N)  # [K/G, N]
        qzeros = formats.pack_gptq_zeros(z, v1=False) if bits == 4 else formats.pack_gptq_zeros_int8(z, v1=False)
    return qweight, scale.t().contiguous(), qzeros, _act_order_index(where, t.get("weight_g_idx"), K)


def _check_packable(where: str, N: int, K: int, per_word: int) -> None:
    """K (packed along in weight_packed) and N (packed along in weight_zero_point) must fill whole int32 words
    for the conversion to GPTQ's packing; checked here so the error names the layer, not a packing helper."""
    for letter, size, what in (("K", K, "input"), ("N", N, "output")):
        if size <= 0 or size % per_word:
            raise ValueError(f"{where}: weight_shape gives {letter} = {size} {what} features, which is not a positive "
                             f"multiple of {per_word} (the codes per int32 word); mixgemm needs {letter} a multiple "
                             "of 64: keep this layer dense (the config's ignore list)")


def _act_order_index(where: str, g_idx: torch.Tensor | None, K: int) -> torch.Tensor | None:
    """``weight_g_idx`` as GPTQ's g_idx, or None for plain column order.

    compressed-tensors (llm-compressor) writes ``weight_g_idx`` filled with -1 for a layer quantized without
    act-order, so an index that is -1 everywhere means plain column order. A -1 among valid group indices is
    a damaged index: reading it as plain order would silently drop the layer's act-order, so it is refused."""
    if g_idx is None:
        return None
    if g_idx.dim() != 1 or g_idx.shape[0] != K:
        raise ValueError(f"{where}.weight_g_idx must have shape [K] = ({K},), got {tuple(g_idx.shape)}")
    if g_idx.dtype.is_floating_point or g_idx.dtype == torch.bool:
        raise ValueError(f"{where}.weight_g_idx must be an integer tensor (the group of each input column), got "
                         f"{g_idx.dtype}")
    unset = g_idx == -1
    if bool(unset.all()):
        return None
    negative = g_idx < 0
    if bool(negative.any()):
        first = int(negative.nonzero()[0, 0])
        raise ValueError(f"{where}.weight_g_idx holds {int(negative.sum())} negative entries among {K} (first at "
                         f"column {first}: {int(g_idx[first])}); every entry must be a group index >= 0, or every "
                         "entry -1 (no act-order). A partly unset index is a damaged checkpoint")
    return g_idx.to(torch.int32)
