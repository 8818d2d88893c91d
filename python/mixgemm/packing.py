"""Prepack: AWQ / GPTQ checkpoints -> a weight layout, and the PackedWeight that holds the result.

``prepack`` reads a checkpoint's tensors as its format says (:func:`checkpoint_codes`), chooses the layout
(``layout="auto"``: the sm90 layout on a Hopper GPU whose build holds sm90 kernels that fit the weight, else the
sm80 layout; mixgemm.layouts has both), refuses a weight that no kernel path can run (mixgemm.shape_rules) or
whose scales or offsets are not finite, and packs it with the layout's packer.
"""

from __future__ import annotations

import dataclasses
import warnings

import torch

from . import _checks, layouts, shape_rules
from ._checks import ACT_DTYPES
from ._runtime import current_stream, device_guard
from .kernel_key import KernelKey


@dataclasses.dataclass
class PackedWeight:
    """A weight in one of the layouts of :mod:`mixgemm.layouts`, ready for :func:`mixgemm.gemm`.

    ``packed``: int32 words in ``layout`` (``layouts.layout(layout).packed_shape(k, n, bits)``); ``scales`` and
    ``offsets``: ``[K/G, N]`` in ``act_dtype``, the kernels computing ``W = q * scale + offset`` on the layout's
    codes (unsigned in the sm80 layout: offset ``-z * s``; signed in the sm90 layout: offset ``(bias - z) * s``,
    zero for symmetric weights).
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
    # The layout ``packed`` is in (mixgemm.layouts): a weight reaches only the kernels that read it.
    layout: str = "sm80"
    # True when the checkpoint had no zero points (symmetric weights): on the sm90 layout the offsets are then
    # all zero and a scale-only kernel may run (the key's quant mode says which kernels take the weight).
    scale_only: bool = False

    @property
    def key(self) -> KernelKey:
        """The kernel key of this weight: signed codes without zero points need no offset (quant "scale");
        every other weight adds its offsets ("scale_offset")."""
        quant = "scale" if self.scale_only and self.layout == "sm90" else "scale_offset"
        return KernelKey.of(self.act_dtype, self.bits, self.layout, quant)


GPTQ_FORMATS = ("gptq", "gptq_v2")
FORMATS = ("awq",) + GPTQ_FORMATS


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


def _warn_on_symmetric_mismatch(stored_zeros: torch.Tensor, bits: int, v1: bool) -> None:
    from . import formats

    message = formats.symmetric_zeros_mismatch(stored_zeros, bits, v1)
    if message is not None:
        warnings.warn(f"prepack: {message}", formats.ZeroPointFormatWarning, stacklevel=4)


def _check_holds(fn: str, layout: str, K: int, N: int, k_source: str = "K", n_source: str = "N") -> None:
    """The layout can hold a K x N weight (whole strips or blocks of whole slabs); ``k_source`` and ``n_source``
    say where K and N came from."""
    module = layouts.layout(layout)
    if N == 0 or N % module.N_MULTIPLE:
        raise ValueError(f"{fn}: {n_source} must be a positive multiple of {module.N_MULTIPLE} for the {layout} "
                         f"layout, got {N}")
    if K == 0 or K % module.K_MULTIPLE:
        raise ValueError(f"{fn}: {k_source} must be a positive multiple of {module.K_MULTIPLE} for the {layout} "
                         f"layout, got {K}")


def check_weight_shape(fn: str, layout: str, K: int, N: int, group_size: int) -> None:
    """What prepack requires of a weight's shape: ``layout`` holds it and some kernel path runs it
    (mixgemm.shape_rules). For callers that check a shape before they have tensors (the profiler's --shape)."""
    _check_holds(fn, layout, K, N)
    if not isinstance(group_size, int) or group_size < 1 or K % group_size:
        raise ValueError(f"{fn}: group_size must be a positive divisor of K = {K}, got {group_size}")
    shape_rules.check_runnable(fn, layout, N, K, group_size)


def _check_scales_and_zeros_shape(fn: str, K: int, N: int, scales, qzeros, values_per_word: int,
                                  group_size: int | None) -> int:
    """A group size that divides K (and matches ``group_size`` when given) and packed qzeros' shape; returns
    the group size."""
    G = _checks.group_size_of(fn, K, scales.shape[0])
    if group_size is not None and group_size != G:
        raise ValueError(f"{fn}: group_size = {group_size} disagrees with K / scales.shape[0] = {G}")
    if qzeros is not None:
        _checks.check_shape(fn, "qzeros", qzeros, (scales.shape[0], N // values_per_word),
                            f"[K/G, N/{values_per_word}], one row per scale row")
    return G


def _checkpoint_shape(fn: str, qweight, scales, qzeros, group_size: int | None, format: str, g_idx, bits: int,
                      cuda: bool) -> tuple[int, int, int]:
    """Validates a checkpoint's tensors (types, devices, shapes) without reading their values: ``(K, N, G)``."""
    # PyTorch or the prepack kernel reads these tensors, never the GEMM kernels (they read the fresh packed
    # copies, which gemm checks): no 16-byte alignment rule, so a slice of a checkpoint packs as it is.
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
    else:
        K = qweight.shape[0] * per_word
        _checks.check_shape(fn, "qweight", qweight, (K // per_word, N), f"[K/{per_word}, N] with N = scales.shape[1]")
    if N == 0 or K == 0:
        raise ValueError(f"{fn}: the weight is empty (K = {K}, N = {N})")
    return K, N, _check_scales_and_zeros_shape(fn, K, N, scales, qzeros, per_word, group_size)


def checkpoint_codes(fn: str, qweight, scales, qzeros, group_size: int | None, format: str, v1: bool, g_idx,
                     bits: int, cuda: bool = True
                     ) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor | None, int]:
    """A checkpoint's tensors, validated, as ``(q, zeros, perm, G)``: unsigned codes ``q [K, N]`` (K in the
    act-order permuted order when ``g_idx`` asks for one), the zero points ``[K/G, N]`` as the format means
    them (GPTQ v1 zeros already +1; None for symmetric weights), the K permutation or None, and the group
    size. ``cuda=False`` lets the PyTorch packers run on CPU tensors."""
    from . import formats

    K, N, G = _checkpoint_shape(fn, qweight, scales, qzeros, group_size, format, g_idx, bits, cuda)
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


def _check_finite(fn: str, name: str, values: torch.Tensor) -> None:
    """NaN or infinite scales (or offsets that overflow the activation dtype) would make every output of the
    layer NaN, silently: refused once, here, rather than checked on every call."""
    if not bool(torch.isfinite(values).all()):
        bad = int((~torch.isfinite(values)).sum())
        raise ValueError(f"{fn}: {name} holds {bad} NaN or infinite value(s); a quantized weight's {name} must be "
                         f"finite")


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
    """Rewrites an AWQ (default) or GPTQ checkpoint's int4 (or GPTQ int8) weight into a layout on the GPU.

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
    fits them, else the sm80 layout. ``"sm80"`` or ``"sm90"`` force one. :func:`gemm` then runs the paths
    that read the weight's layout.

    Refused with a ValueError naming the rule: a shape no kernel path can run in the chosen layout (each
    path's rule is in mixgemm.shape_rules; one that only the dequant path runs is taken), NaN or infinite
    scales or offsets.
    """
    fn = "prepack"
    if format not in FORMATS:
        raise ValueError(f"{fn}: format must be 'awq', 'gptq' (v1 zeros) or 'gptq_v2', got {format!r}")
    v1 = gptq_reads_v1(fn, format, gptq_v1)
    if bits not in (4, 8) or isinstance(bits, bool):
        raise ValueError(f"{fn}: bits must be 4 or 8, got {bits!r}")
    if layout not in ("auto",) + tuple(layouts.LAYOUTS):
        raise ValueError(f"{fn}: layout must be 'auto', 'sm80' or 'sm90', got {layout!r}")
    if bits == 8 and format not in GPTQ_FORMATS:
        raise ValueError(f"{fn}: 8-bit weights come in the GPTQ layout; pass format='gptq' or 'gptq_v2'")
    if layout == "auto":
        layout = auto_layout(qweight, scales, format, bits)
    # The sm80 int4 packer is a GPU kernel that reads AWQ packing, so AWQ tensors go to it as they are (no
    # unpacked copy of K x N codes); every other weight is decoded into codes first.
    on_gpu = layout == "sm80" and bits == 4
    cuda = on_gpu or (qweight.device.type == "cuda" if isinstance(qweight, torch.Tensor) else True)
    if on_gpu and format == "awq":
        K, N, G = _checkpoint_shape(fn, qweight, scales, qzeros, group_size, format, g_idx, bits, cuda)
        codes, perm = None, None
    else:
        codes, zeros, perm, G = checkpoint_codes(fn, qweight, scales, qzeros, group_size, format, v1, g_idx, bits,
                                                 cuda=cuda)
        K, N = codes.shape
    k_source = "qweight.shape[0]" if format == "awq" else f"{32 // bits} * qweight.shape[0]"
    _check_holds(fn, layout, K, N, f"K = {k_source}", "N = scales.shape[1]")
    shape_rules.check_runnable(fn, layout, N, K, G)
    _check_finite(fn, "scales", scales)
    if cuda:
        _checks.check_device_supported(fn, qweight.device)
    if on_gpu:
        if codes is not None:  # GPTQ int4: back into AWQ packing, the form the kernel reads
            from . import formats

            qweight = formats.pack_awq(codes)
            qzeros = formats.pack_awq(zeros) if zeros is not None else None
        with device_guard(qweight.device):
            packed, offsets = layouts.sm80.pack_awq_int4_on_gpu(qweight, scales, qzeros, current_stream(qweight.device))
    else:
        module = layouts.layout(layout)
        packed, offsets = module.pack(codes, bits), module.offsets(scales, zeros, bits)
    _check_finite(fn, "offsets (the folded zero points in the activation dtype)", offsets)
    # A copy of the scales: the kernels read them with 16-byte loads, and the caller's may be an unaligned slice.
    return PackedWeight(packed, scales.clone(), offsets, G, bits, scales.dtype, N, K, perm, layout=layout,
                        scale_only=qzeros is None)


def auto_layout(qweight, scales, format: str = "awq", bits: int = 4) -> str:
    """The layout ``prepack(..., layout="auto")`` gives these checkpoint tensors: "sm90" where the sm90
    kernels can run the weight on the GPU holding it, else "sm80". Malformed arguments give "sm80", whose
    prepack then names what is wrong."""
    from .paths import sm90

    if not (isinstance(qweight, torch.Tensor) and isinstance(scales, torch.Tensor)) or scales.dim() != 2:
        return "sm80"
    if qweight.device.type != "cuda" or qweight.dim() != 2 or scales.shape[0] == 0:
        return "sm80"
    if scales.dtype not in ACT_DTYPES or bits not in (4, 8):
        return "sm80"
    K = qweight.shape[0] if format == "awq" else qweight.shape[0] * (32 // bits)
    N, groups = scales.shape[1], scales.shape[0]
    if K % groups:
        return "sm80"
    key = KernelKey.of(scales.dtype, bits, "sm90")
    return "sm90" if sm90.PATH.takes_weight(qweight.device, key, K, N, K // groups) else "sm80"


def check_packed_weight(fn: str, packed: object) -> None:
    """A PackedWeight's fields must be sane (its tensors are check_packed_tensors'): a hand-made or corrupted one
    would otherwise send a kernel out of bounds."""
    if not isinstance(packed, PackedWeight):
        raise ValueError(f"{fn}: packed must be a PackedWeight from mixgemm.prepack, got {type(packed).__name__}")
    if packed.layout not in layouts.LAYOUTS:
        raise ValueError(f"{fn}: packed.layout must be 'sm80' or 'sm90', got {packed.layout!r}")
    if packed.act_dtype not in ACT_DTYPES:
        raise ValueError(f"{fn}: packed.act_dtype must be float16 or bfloat16, got {packed.act_dtype}")
    if packed.bits not in (4, 8) or isinstance(packed.bits, bool):
        raise ValueError(f"{fn}: packed.bits must be 4 or 8, got {packed.bits!r}")
    for name in ("n", "k", "group_size"):
        value = getattr(packed, name)
        if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
            raise ValueError(f"{fn}: packed.{name} must be a positive int, got {value!r}")
    module = layouts.layout(packed.layout)
    n, k, g = packed.n, packed.k, packed.group_size
    if n % module.N_MULTIPLE or k % module.K_MULTIPLE or k % g:
        raise ValueError(
            f"{fn}: packed has n = {n}, k = {k}, group_size = {g}: in the {packed.layout} layout n must be a "
            f"multiple of {module.N_MULTIPLE}, k of {module.K_MULTIPLE}, and group_size must divide k"
        )


def check_packed_tensors(fn: str, packed: PackedWeight) -> None:
    """The tensors of a PackedWeight (whose fields passed check_packed_weight) match n, k, group_size."""
    n, k, g = packed.n, packed.k, packed.group_size
    module = layouts.layout(packed.layout)
    _checks.check_tensor(fn, "packed.packed", packed.packed, (torch.int32,), 4)
    _checks.check_shape(fn, "packed.packed", packed.packed, module.packed_shape(k, n, packed.bits),
                        f"{module.described_shape(packed.bits)} for {packed.bits}-bit weights")
    for name in ("scales", "offsets"):
        t = getattr(packed, name)
        _checks.check_tensor(fn, f"packed.{name}", t, (packed.act_dtype,), 2)
        _checks.check_shape(fn, f"packed.{name}", t, (k // g, n), "[K/G, N]")
    _checks.check_same_device(fn, packed=packed.packed, scales=packed.scales, offsets=packed.offsets)
    if packed.perm is not None:
        _checks.check_tensor(fn, "packed.perm", packed.perm, (torch.int64,), 1)
        _checks.check_shape(fn, "packed.perm", packed.perm, (k,), "one source column of x per row of K")
        _checks.check_same_device(fn, packed=packed.packed, perm=packed.perm)
