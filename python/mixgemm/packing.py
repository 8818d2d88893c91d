"""Prepack: AWQ / GPTQ checkpoints -> a kernel layout, and the PackedWeight that holds the result.

Two layouts (DESIGN.md section 1), one per GEMM path, each also read by the decode path:
  * "sm80": our mma.sync layout; python/mixgemm/prepack_ref.py specifies every bit and is the PyTorch
    twin the tests compare against;
  * "sm90": the CUTLASS 3.x register-sourced wgmma operand order of python/mixgemm/sm90_layout.py.
``prepack(..., layout="auto")`` picks the sm90 layout on a Hopper GPU whose build holds sm90 kernels that
fit the weight, and the sm80 layout everywhere else: one prepack, and every kernel of that GPU reads it.
"""

from __future__ import annotations

import dataclasses
import warnings

import torch

from . import _checks
from ._checks import ACT_DTYPES
from ._runtime import current_stream, device_guard, extension
from .config import LAYOUTS

_PACKED_STRIP_N = 64  # columns per packed strip
_K_SLAB = 16  # K rows per packed slab (one mma k-step)
# Words per lane per 16 x 64 packed block: 4 sub-blocks of 16 x 16, one word each (int4) or two (int8).
_WORDS_PER_LANE = {4: 4, 8: 8}


@dataclasses.dataclass
class PackedWeight:
    """A weight in one of our kernel layouts, ready for :func:`gemm`.

    ``layout="sm80"``: ``packed`` int32 ``[N/64, K/16, 32, 4]`` for int4, ``[N/64, K/16, 32, 8]`` for int8
    (prepack_ref.py documents each bit; values stored unsigned, int8 biased by 128); ``offsets`` =
    ``-zero * scale`` (zero = 8 for symmetric int4 weights).
    ``layout="sm90"``: ``packed`` int32 ``[K/16, N/16, 32, bits/4]`` of signed codes (sm90_layout.py);
    ``offsets`` = ``(bias - zero) * scale`` (bias 8 / 128, so zero for symmetric weights).
    ``scales`` and ``offsets`` are ``[K/G, N]`` in ``act_dtype`` in both.
    """

    packed: torch.Tensor
    scales: torch.Tensor
    offsets: torch.Tensor
    group_size: int
    bits: int
    act_dtype: torch.dtype
    n: int
    k: int
    # GPTQ act-order: K was permuted at prepack time so groups are contiguous; gemm() gathers x's columns
    # with it (x[:, perm] @ W[perm] == x @ W). None for every other checkpoint.
    perm: torch.Tensor | None = None
    # gemm's memo (ops._WeightState): which tensors it validated against which field values, so a call
    # need not validate them again. Not an argument, not compared, not shown.
    _gemm_state: object = dataclasses.field(default=None, init=False, repr=False, compare=False)
    # Which kernel layout ``packed`` is in: "sm80" (this module, prepack_ref.py) or "sm90" (sm90.py,
    # sm90_layout.py). A weight reaches only the kernels of its own layout.
    layout: str = "sm80"
    # True when the checkpoint had no zero points (symmetric weights): on the sm90 layout the offsets are
    # then all zero and the cheaper scale-only kernel may run.
    scale_only: bool = False


# Symmetric (scale-only) int4 weights store q_signed + 8: W = (q - 8) * s.
_SYMMETRIC_ZERO = 8


def _check_dimensions(fn: str, K: int, N: int, k_source: str, scales, qzeros, values_per_word: int,
                      group_size: int | None) -> int:
    """The sizes the kernel layout needs (N in 64-column strips, K in 16-row slabs, a group size that
    divides K and matches ``group_size`` when given) and packed qzeros' shape; returns the group size."""
    if N == 0 or N % _PACKED_STRIP_N != 0:
        raise ValueError(f"{fn}: N = scales.shape[1] must be a positive multiple of {_PACKED_STRIP_N}, got {N}")
    if K == 0 or K % _K_SLAB != 0:
        raise ValueError(f"{fn}: K = {k_source} must be a positive multiple of {_K_SLAB}, got {K}")
    G = _checks.group_size_of(fn, K, scales.shape[0])
    if group_size is not None and group_size != G:
        raise ValueError(f"{fn}: group_size = {group_size} disagrees with K / scales.shape[0] = {G}")
    if qzeros is not None:
        _checks.check_shape(fn, "qzeros", qzeros, (scales.shape[0], N // values_per_word),
                            f"[K/G, N/{values_per_word}], one row per scale row")
    return G


def prepack_awq_tensors(
    qweight: torch.Tensor, scales: torch.Tensor, qzeros: torch.Tensor | None, group_size: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """GPU twin of ``prepack_ref.prepack_awq_reference``: ``(packed, scales, offsets)``.

    ``qzeros=None`` means symmetric weights (zero point 8).
    """
    fn = "prepack"
    if not isinstance(group_size, int) or isinstance(group_size, bool):
        raise ValueError(f"{fn}: group_size must be an int, got {group_size!r}")
    _checks.check_tensor(fn, "qweight", qweight, (torch.int32,), 2)
    _checks.check_tensor(fn, "scales", scales, ACT_DTYPES, 2)
    if qzeros is not None:
        _checks.check_tensor(fn, "qzeros", qzeros, (torch.int32,), 2)
        _checks.check_same_device(fn, qweight=qweight, scales=scales, qzeros=qzeros)
    else:
        _checks.check_same_device(fn, qweight=qweight, scales=scales)
    K, N = qweight.shape[0], scales.shape[1]
    _checks.check_shape(fn, "qweight", qweight, (K, N // 8), "[K, N/8] with N = scales.shape[1]")
    _check_dimensions(fn, K, N, "qweight.shape[0]", scales, qzeros, 8, group_size)
    _checks.check_device_supported(fn, qweight.device)

    launch_stream = current_stream(qweight.device)
    packed = torch.empty((N // _PACKED_STRIP_N, K // _K_SLAB, 32, 4), dtype=torch.int32, device=qweight.device)
    with device_guard(qweight.device):
        extension().prepack_awq_qweight(qweight.data_ptr(), packed.data_ptr(), K, N, launch_stream)
    if qzeros is None:
        # The same single rounding as the kernel's -(z * s): the product is exact in float32.
        offsets = (-(_SYMMETRIC_ZERO * scales.float())).to(scales.dtype)
    else:
        offsets = torch.empty_like(scales)
        with device_guard(qweight.device):
            extension().fold_awq_zeros(
                qzeros.data_ptr(), scales.data_ptr(), offsets.data_ptr(), scales.shape[0], N,
                scales.dtype == torch.bfloat16, launch_stream,
            )
    return packed, scales.clone(), offsets


def _act_order_permutation(fn: str, g_idx: torch.Tensor, K: int, groups: int) -> torch.Tensor | None:
    """The K permutation that makes act-order groups contiguous, or None when g_idx is the plain k // G.

    Rows are stably sorted by group; each group must then hold exactly K / groups rows, so row i of the
    permuted weight belongs to group i // G as the kernel assumes.
    """
    if not isinstance(g_idx, torch.Tensor) or g_idx.dim() != 1 or g_idx.shape[0] != K:
        raise ValueError(f"{fn}: g_idx must be a 1-D tensor of K = {K} group indices")
    if g_idx.dtype not in (torch.int32, torch.int64):
        raise ValueError(f"{fn}: g_idx must have dtype int32 or int64, got {g_idx.dtype}")
    g_idx = g_idx.long()
    G = K // groups
    if int(g_idx.min()) < 0 or int(g_idx.max()) >= groups:
        raise ValueError(f"{fn}: g_idx values must lie in [0, {groups}) (one per scale row)")
    if torch.equal(g_idx, torch.arange(K, device=g_idx.device) // G):
        return None
    counts = torch.bincount(g_idx, minlength=groups)
    if not bool((counts == G).all()):
        raise ValueError(f"{fn}: every group of g_idx must hold exactly group_size = {G} rows of K")
    return torch.sort(g_idx, stable=True).indices


GPTQ_FORMATS = ("gptq", "gptq_v2")


def gptq_reads_v1(fn: str, format: str, gptq_v1: bool | None) -> bool:
    """Whether GPTQ zeros are read v1 (stored ``z - 1``): ``format="gptq"`` means v1, as AutoGPTQ and
    GPTQModel write it and as a checkpoint without ``checkpoint_format`` is; ``"gptq_v2"`` means stored
    as ``z``. An explicit ``gptq_v1`` overrides ``"gptq"`` (the keyword predates ``"gptq_v2"``) but may
    not contradict ``"gptq_v2"``."""
    if gptq_v1 is not None and not isinstance(gptq_v1, bool):
        raise ValueError(f"{fn}: gptq_v1 must be True, False or None, got {gptq_v1!r}")
    if format == "gptq_v2":
        if gptq_v1:
            raise ValueError(f"{fn}: gptq_v1=True contradicts format='gptq_v2' (whose zeros are stored as z)")
        return False
    if format == "gptq":
        return True if gptq_v1 is None else gptq_v1
    if gptq_v1 is not None:
        raise ValueError(f"{fn}: gptq_v1 applies to GPTQ checkpoints only, got format={format!r}")
    return False


def _warn_on_symmetric_mismatch(stored_zeros: torch.Tensor, bits: int, v1: bool) -> None:
    from . import formats

    message = formats.symmetric_zeros_mismatch(stored_zeros, bits, v1)
    if message is not None:
        warnings.warn(f"prepack: {message}", formats.ZeroPointFormatWarning, stacklevel=3)


def prepack(
    qweight: torch.Tensor,
    scales: torch.Tensor,
    qzeros: torch.Tensor | None = None,
    group_size: int | None = None,
    *,
    format: str = "awq",
    gptq_v1: bool | None = None,
    g_idx: torch.Tensor | None = None,
    bits: int = 4,
    layout: str = "auto",
) -> PackedWeight:
    """Rewrites an AWQ (default) or GPTQ int4 checkpoint into a kernel layout on the GPU.

    AWQ: ``qweight`` int32 ``[K, N/8]``, ``qzeros`` int32 ``[K/G, N/8]``, ``scales`` ``[K/G, N]``.
    GPTQ: ``qweight`` int32 ``[K/8, N]`` packed along K, ``qzeros`` ``[K/G, N/8]`` in natural order, and
    optionally act-order ``g_idx`` ``[K]``: K is then permuted once here so each group is contiguous, and
    :func:`gemm` gathers x's columns to match.

    Which zeros GPTQ stores: ``format="gptq"`` reads them **v1** (stored ``z - 1``), what AutoGPTQ and
    GPTQModel write and what a checkpoint whose config has ``checkpoint_format: "gptq"`` or none holds;
    ``format="gptq_v2"`` reads them as stored (``checkpoint_format: "gptq_v2"``). ``gptq_v1=True/False``
    overrides the reading of ``format="gptq"`` (the older spelling). Constant zeros that match the other
    convention's symmetric code raise a :class:`~mixgemm.formats.ZeroPointFormatWarning`.

    ``qzeros=None`` means symmetric (scale-only) weights, ``W = (q - 8) * s``. ``group_size`` defaults to
    ``K / scales.shape[0]``. The activation dtype is the scales' dtype. ``bits=8``: GPTQ 8-bit checkpoints
    (``qweight`` int32 ``[K/4, N]``, ``qzeros`` ``[K/G, N/4]``, read as above; no zeros means symmetric,
    ``W = (q - 128) * s``).

    ``layout``: ``"auto"`` (default) packs for the GPU the tensors are on: the sm90 layout on a Hopper
    (compute capability 9.0) GPU when this build holds sm90 kernels for the dtype and width and the shape
    fits them (``N`` a multiple of a compiled tile, group size ``K`` or a multiple of 64), else the sm80
    layout. ``"sm80"`` or ``"sm90"`` force one. :func:`gemm` then runs the paths that read the weight's
    layout: sm80 weights the sm80 GEMM and the decode path, sm90 weights the sm90 GEMM and the decode path.
    """
    fn = "prepack"
    if format not in ("awq",) + GPTQ_FORMATS:
        raise ValueError(f"{fn}: format must be 'awq', 'gptq' (v1 zeros) or 'gptq_v2', got {format!r}")
    v1 = gptq_reads_v1(fn, format, gptq_v1)
    if bits not in (4, 8):
        raise ValueError(f"{fn}: bits must be 4 or 8, got {bits!r}")
    if layout not in ("auto",) + LAYOUTS:
        raise ValueError(f"{fn}: layout must be 'auto', 'sm80' or 'sm90', got {layout!r}")
    if bits == 8 and format not in GPTQ_FORMATS:
        raise ValueError(f"{fn}: 8-bit weights come in the GPTQ layout; pass format='gptq' or 'gptq_v2'")
    if layout == "auto":
        layout = auto_layout(qweight, scales, format, bits)
    if layout == "sm90":
        from . import sm90

        return sm90.prepack_to_sm90(fn, qweight, scales, qzeros, group_size, format, v1, g_idx, bits)
    if bits == 8:
        return _prepack_gptq_int8(qweight, scales, qzeros, group_size, v1, g_idx)
    _checks.check_tensor(fn, "qweight", qweight, (torch.int32,), 2)
    if qzeros is not None:
        _checks.check_tensor(fn, "qzeros", qzeros, (torch.int32,), 2)
    _checks.check_tensor(fn, "scales", scales, ACT_DTYPES, 2)
    if g_idx is not None and format not in GPTQ_FORMATS:
        raise ValueError(f"{fn}: g_idx (act-order) is a GPTQ field; pass format='gptq' or 'gptq_v2'")
    perm = None
    if format in GPTQ_FORMATS:
        from . import formats

        K = qweight.shape[0] * 8
        q = formats.unpack_gptq_qweight(qweight)  # [K, N]
        if g_idx is not None:
            _checks.check_same_device(fn, qweight=qweight, g_idx=g_idx)
            perm = _act_order_permutation(fn, g_idx, K, scales.shape[0])
            if perm is not None:
                q = q.index_select(0, perm)
        qweight = formats.pack_awq(q)
        if qzeros is not None:
            stored = formats.unpack_gptq_zeros(qzeros, v1=False)
            _warn_on_symmetric_mismatch(stored, 4, v1)
            zeros = (stored + 1) % 16 if v1 else stored  # uint8: 15 + 1 wraps to 0 via the modulo
            qzeros = formats.pack_awq(zeros)
    K = qweight.shape[0]
    if group_size is None:
        group_size = _checks.group_size_of(fn, K, scales.shape[0])
    packed, scales_out, offsets = prepack_awq_tensors(qweight, scales, qzeros, group_size)
    return PackedWeight(packed, scales_out, offsets, group_size, 4, scales.dtype, scales.shape[1], K, perm,
                        scale_only=qzeros is None)


def auto_layout(qweight, scales, format: str = "awq", bits: int = 4) -> str:
    """The layout ``prepack(..., layout="auto")`` gives these checkpoint tensors: "sm90" where the sm90
    kernels can run the weight on the GPU holding it, else "sm80". Malformed arguments give "sm80", whose
    prepack then names what is wrong."""
    from . import sm90

    if not (isinstance(qweight, torch.Tensor) and isinstance(scales, torch.Tensor)) or scales.dim() != 2:
        return "sm80"
    if qweight.device.type != "cuda" or qweight.dim() != 2 or scales.shape[0] == 0:
        return "sm80"
    K = qweight.shape[0] if format == "awq" else qweight.shape[0] * (32 // bits)
    N, groups = scales.shape[1], scales.shape[0]
    if K % groups:
        return "sm80"
    return "sm90" if sm90.fits(qweight.device, scales.dtype, bits, K, N, K // groups) else "sm80"


def checkpoint_codes(fn: str, qweight, scales, qzeros, group_size: int | None, format: str, v1: bool, g_idx,
                     bits: int, cuda: bool = True
                     ) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor | None, int]:
    """A checkpoint's tensors, validated, as ``(q, zeros, perm, G)``: unsigned codes ``q [K, N]`` (K in the
    act-order permuted order when ``g_idx`` asks for one), the zero points ``[K/G, N]`` as the format means
    them (GPTQ v1 zeros already +1; None for symmetric weights), the K permutation or None, and the group
    size. The packers of both layouts start from it (the sm80 int4 packer from the AWQ tensors instead, for
    its GPU kernel). ``cuda=False`` lets the PyTorch-only packers run on CPU tensors."""
    from . import formats

    # PyTorch reads these tensors, never our kernels (they read the fresh packed copies, which gemm checks):
    # no alignment rule, so a slice of a checkpoint packs as it is.
    _checks.check_tensor(fn, "qweight", qweight, (torch.int32,), 2, cuda=cuda, aligned=False)
    _checks.check_tensor(fn, "scales", scales, ACT_DTYPES, 2, cuda=cuda, aligned=False)
    if qzeros is not None:
        _checks.check_tensor(fn, "qzeros", qzeros, (torch.int32,), 2, cuda=cuda, aligned=False)
        _checks.check_same_device(fn, qweight=qweight, scales=scales, qzeros=qzeros)
    else:
        _checks.check_same_device(fn, qweight=qweight, scales=scales)
    if g_idx is not None and format not in GPTQ_FORMATS:
        raise ValueError(f"{fn}: g_idx (act-order) is a GPTQ field; pass format='gptq' or 'gptq_v2'")
    N = scales.shape[1]
    per_word = 32 // bits
    if format == "awq":
        K = qweight.shape[0]
        _checks.check_shape(fn, "qweight", qweight, (K, N // 8), "[K, N/8] with N = scales.shape[1]")
        source = "qweight.shape[0]"
    else:
        K = qweight.shape[0] * per_word
        _checks.check_shape(fn, "qweight", qweight, (K // per_word, N), f"[K/{per_word}, N] with N = scales.shape[1]")
        source = f"{per_word} * qweight.shape[0]"
    G = _check_dimensions(fn, K, N, source, scales, qzeros, per_word, group_size)

    zeros = None
    if format == "awq":
        q = formats.unpack_awq(qweight)
        if qzeros is not None:
            zeros = formats.unpack_awq(qzeros)
    else:
        unpack_q = formats.unpack_gptq_qweight if bits == 4 else formats.unpack_gptq_qweight_int8
        q = unpack_q(qweight)
        if qzeros is not None:
            unpack_z = formats.unpack_gptq_zeros if bits == 4 else formats.unpack_gptq_zeros_int8
            stored = unpack_z(qzeros, v1=False)
            _warn_on_symmetric_mismatch(stored, bits, v1)
            zeros = unpack_z(qzeros, v1=True) if v1 else stored
    perm = None
    if g_idx is not None:
        _checks.check_same_device(fn, qweight=qweight, g_idx=g_idx)
        perm = _act_order_permutation(fn, g_idx, K, scales.shape[0])
        if perm is not None:
            q = q.index_select(0, perm)
    return q, zeros, perm, G


def _prepack_gptq_int8(qweight, scales, qzeros, group_size, v1: bool, g_idx) -> PackedWeight:
    """int8 prepack: the PyTorch twin (prepack_ref) run on the GPU tensors. It is a handful of gathers
    over K N bytes, memory bound like the int4 kernel, so it needs no kernel of its own."""
    from . import prepack_ref

    fn = "prepack"
    q, zeros, perm, G = checkpoint_codes(fn, qweight, scales, qzeros, group_size, "gptq", v1, g_idx, 8)
    _checks.check_device_supported(fn, qweight.device)
    K, N = q.shape
    packed, scales_out, offsets = prepack_ref.prepack_int8_reference(q, scales, zeros, G)
    # A copy, as the other packers make: the kernels read it with 16-byte loads, and the caller's scales
    # may be an unaligned slice.
    return PackedWeight(packed, scales_out.clone(), offsets, G, 8, scales.dtype, N, K, perm,
                        scale_only=zeros is None)


def check_packed_weight(fn: str, packed: object) -> None:
    """A PackedWeight's fields must be sane and its tensors (check_packed_tensors) agree with them: a
    hand-made or corrupted one would otherwise send the kernel out of bounds."""
    if not isinstance(packed, PackedWeight):
        raise ValueError(f"{fn}: packed must be a PackedWeight from mixgemm.prepack, got {type(packed).__name__}")
    if packed.layout not in LAYOUTS:
        raise ValueError(f"{fn}: packed.layout must be 'sm80' or 'sm90', got {packed.layout!r}")
    if packed.act_dtype not in ACT_DTYPES:
        raise ValueError(f"{fn}: packed.act_dtype must be float16 or bfloat16, got {packed.act_dtype}")
    if packed.bits not in _WORDS_PER_LANE:
        raise ValueError(f"{fn}: packed.bits must be 4 or 8, got {packed.bits!r}")
    for name in ("n", "k", "group_size"):
        value = getattr(packed, name)
        if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
            raise ValueError(f"{fn}: packed.{name} must be a positive int, got {value!r}")
    n, k, g = packed.n, packed.k, packed.group_size
    if n % _PACKED_STRIP_N or k % _K_SLAB or k % g:
        raise ValueError(
            f"{fn}: packed has n = {n}, k = {k}, group_size = {g}: n must be a multiple of {_PACKED_STRIP_N}, "
            f"k of {_K_SLAB}, and group_size must divide k"
        )
    if packed.layout == "sm90":
        from . import sm90

        sm90.check_sizes(fn, k, n, g)


def packed_shape(layout: str, k: int, n: int, bits: int) -> tuple[tuple[int, ...], str]:
    """The shape of ``PackedWeight.packed`` in ``layout``, and how to say it in an error."""
    if layout == "sm90":
        from . import sm90_layout

        return sm90_layout.packed_shape(k, n, bits), f"[K/16, N/16, 32, {bits // 4}] (the sm90 layout)"
    words = _WORDS_PER_LANE[bits]
    return (n // _PACKED_STRIP_N, k // _K_SLAB, 32, words), f"[N/64, K/16, 32, {words}] (the sm80 layout)"


def bits_of_packed(layout: str, packed: torch.Tensor) -> int | None:
    """The weight width whose packed tensor in ``layout`` has ``packed``'s words per lane (its last
    dimension), or None: packed_shape read backwards, for callers that hold only the tensor (the custom ops'
    schema carries no bit width)."""
    if packed.dim() != 4:
        return None
    for bits in _WORDS_PER_LANE:
        if packed.shape[-1] == packed_shape(layout, _K_SLAB, _PACKED_STRIP_N, bits)[0][-1]:
            return bits
    return None


def check_packed_tensors(fn: str, packed: PackedWeight) -> None:
    """The tensors of a PackedWeight (whose fields passed check_packed_weight) match n, k, group_size."""
    n, k, g = packed.n, packed.k, packed.group_size
    shape, described = packed_shape(packed.layout, k, n, packed.bits)
    _checks.check_tensor(fn, "packed.packed", packed.packed, (torch.int32,), 4)
    _checks.check_shape(fn, "packed.packed", packed.packed, shape, f"{described} for {packed.bits}-bit weights")
    for name in ("scales", "offsets"):
        t = getattr(packed, name)
        _checks.check_tensor(fn, f"packed.{name}", t, (packed.act_dtype,), 2)
        _checks.check_shape(fn, f"packed.{name}", t, (k // g, n), "[K/G, N]")
    _checks.check_same_device(fn, packed=packed.packed, scales=packed.scales, offsets=packed.offsets)
    if packed.perm is not None:
        _checks.check_tensor(fn, "packed.perm", packed.perm, (torch.int64,), 1)
        _checks.check_shape(fn, "packed.perm", packed.perm, (k,), "one source column of x per row of K")
        _checks.check_same_device(fn, packed=packed.packed, perm=packed.perm)
