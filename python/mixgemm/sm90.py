"""The sm90 path (Hopper): prepack to its layout, its compiled configs, and its GEMM entry point.

CUTLASS 3.x warp-specialized wgmma + TMA mixed-input kernels (cpp/include/mixgemm/sm90/), built for
sm_90a only. The kernel computes the transposed problem ``y^T = W^T x^T`` so the narrow weight is the
register-sourced operand; the weight is stored in the layout of :mod:`mixgemm.sm90_layout` as signed codes,
and zero points become an additive offset ``(bias - z) * s`` (bias 8 / 128; see ``sm90_layout.sign_offsets``).

Rules (checked here and again in C++): ``N`` a multiple of the config's ``tile_n`` (64 or 128; prepack
needs a multiple of 64), ``K`` a multiple of 64, ``group_size`` a multiple of 64 dividing ``K`` or ``K``
itself (per-channel), any ``M``; fp16 or bf16 activations, int4 or int8 weights.
"""

from __future__ import annotations

import dataclasses
import functools

import torch

from . import _checks, sm90_layout
from ._checks import ACT_DTYPES
from ._runtime import current_stream, extension
from .packing import PackedWeight, _act_order_permutation, gptq_reads_v1

LAYOUT = "sm90"
_TILE_K = 64  # the kernel's k-tile (128 bytes of 16-bit x)
_MIN_TILE_N = 64  # the narrowest compiled weight tile (ping-pong)


@dataclasses.dataclass(frozen=True)
class Sm90Config:
    """One compiled sm90 kernel family, in the library's naming (tile_m tokens, tile_n weight columns).

    ``schedule``: "coop" (two consumer warpgroups share a 128-wide weight tile) or "pingpong" (they
    alternate 64-wide tiles); ``scheduler``: "persistent" or "streamk"; ``modes``: the conversion modes
    compiled for it ("scale": scale-only, "offset": with folded zero points).
    """

    tile_m: int
    tile_n: int
    tile_k: int
    cluster_m: int
    cluster_n: int
    schedule: str
    scheduler: str
    modes: tuple[str, ...] = ()

    @property
    def key(self) -> tuple:
        """The tuple the extension takes."""
        return (self.tile_m, self.tile_n, self.tile_k, self.cluster_m, self.cluster_n, self.schedule, self.scheduler)

    @property
    def name(self) -> str:
        return (f"sm90_{self.tile_m}x{self.tile_n}x{self.tile_k}_c{self.cluster_m}x{self.cluster_n}_"
                f"{self.schedule}_{self.scheduler}")


def available() -> bool:
    """Whether this build holds the sm90 kernels (built with 90a in MIXGEMM_CUDA_ARCHS)."""
    return bool(extension().sm90_available())


def compiled_sm90_configs(dtype: torch.dtype = torch.float16, bits: int = 4) -> list[Sm90Config]:
    """Every sm90 config compiled for activation ``dtype`` and ``bits``-bit weights (empty without sm_90a)."""
    if dtype not in ACT_DTYPES:
        raise ValueError(f"compiled_sm90_configs: dtype must be float16 or bfloat16, got {dtype}")
    if bits not in (4, 8):
        raise ValueError(f"compiled_sm90_configs: bits must be 4 or 8, got {bits!r}")
    return list(_compiled(dtype == torch.bfloat16, bits))


@functools.cache
def _compiled(bf16: bool, bits: int) -> tuple[Sm90Config, ...]:
    modes: dict[tuple, list[str]] = {}
    for key, mode in extension().gemm_sm90_configs(bf16, bits):
        modes.setdefault(tuple(key), []).append(mode)
    return tuple(Sm90Config(*key, modes=tuple(sorted(m))) for key, m in modes.items())


def _check_sizes(fn: str, K: int, N: int, G: int) -> None:
    if N == 0 or N % _MIN_TILE_N:
        raise ValueError(f"{fn}: N must be a positive multiple of {_MIN_TILE_N} for the sm90 layout, got {N}")
    if K == 0 or K % _TILE_K:
        raise ValueError(f"{fn}: K must be a positive multiple of {_TILE_K} for the sm90 kernels, got {K}")
    if G != K and (G % _TILE_K or K % G):
        raise ValueError(f"{fn}: group_size must be K or a multiple of {_TILE_K} dividing K on the sm90 path "
                         f"(scales are reloaded per whole 64-deep k-tile), got {G}")


def prepack_sm90(
    qweight: torch.Tensor,
    scales: torch.Tensor,
    qzeros: torch.Tensor | None = None,
    group_size: int | None = None,
    *,
    format: str = "awq",
    gptq_v1: bool | None = None,
    g_idx: torch.Tensor | None = None,
    bits: int = 4,
) -> PackedWeight:
    """Like :func:`mixgemm.prepack` (same arguments and checkpoint formats, GPTQ zeros read the same way:
    v1 for ``format="gptq"``, as stored for ``"gptq_v2"``), into the sm90 layout.

    Pure PyTorch gathers (memory bound, like the sm80 prepack kernel), so it runs wherever the tensors
    are; the result is a :class:`PackedWeight` with ``layout="sm90"``.
    """
    from . import formats

    fn = "prepack_sm90"
    if format not in ("awq", "gptq", "gptq_v2"):
        raise ValueError(f"{fn}: format must be 'awq', 'gptq' or 'gptq_v2', got {format!r}")
    v1 = gptq_reads_v1(fn, format, gptq_v1)
    if format == "gptq_v2":
        format = "gptq"  # the same packing; only the zeros' reading (v1 above) differs
    if bits not in (4, 8):
        raise ValueError(f"{fn}: bits must be 4 or 8, got {bits!r}")
    if bits == 8 and format != "gptq":
        raise ValueError(f"{fn}: 8-bit weights come in the GPTQ layout; pass format='gptq'")
    if g_idx is not None and format != "gptq":
        raise ValueError(f"{fn}: g_idx (act-order) is a GPTQ field; pass format='gptq'")
    cuda = qweight.device.type == "cuda" if isinstance(qweight, torch.Tensor) else True
    _checks.check_tensor(fn, "qweight", qweight, (torch.int32,), 2, cuda=cuda)
    _checks.check_tensor(fn, "scales", scales, ACT_DTYPES, 2, cuda=cuda)
    if qzeros is not None:
        _checks.check_tensor(fn, "qzeros", qzeros, (torch.int32,), 2, cuda=cuda)
        _checks.check_same_device(fn, qweight=qweight, scales=scales, qzeros=qzeros)
    else:
        _checks.check_same_device(fn, qweight=qweight, scales=scales)
    N = scales.shape[1]
    per_word = 32 // bits
    if format == "awq":
        K = qweight.shape[0]
        _checks.check_shape(fn, "qweight", qweight, (K, N // 8), "[K, N/8] with N = scales.shape[1]")
    else:
        K = qweight.shape[0] * per_word
        _checks.check_shape(fn, "qweight", qweight, (K // per_word, N), f"[K/{per_word}, N] with N = scales.shape[1]")
    G = _checks.group_size_of(fn, K, scales.shape[0])
    if group_size is not None and group_size != G:
        raise ValueError(f"{fn}: group_size = {group_size} disagrees with K / scales.shape[0] = {G}")
    _check_sizes(fn, K, N, G)
    if qzeros is not None:
        _checks.check_shape(fn, "qzeros", qzeros, (scales.shape[0], N // per_word),
                            f"[K/G, N/{per_word}], one row per scale row")

    if format == "awq":
        q = formats.unpack_awq(qweight)
        zeros = formats.unpack_awq(qzeros) if qzeros is not None else None
    elif bits == 4:
        q = formats.unpack_gptq_qweight(qweight)
        zeros = formats.unpack_gptq_zeros(qzeros, v1=v1) if qzeros is not None else None
    else:
        q = formats.unpack_gptq_qweight_int8(qweight)
        zeros = formats.unpack_gptq_zeros_int8(qzeros, v1=v1) if qzeros is not None else None
    perm = None
    if g_idx is not None:
        _checks.check_same_device(fn, qweight=qweight, g_idx=g_idx)
        perm = _act_order_permutation(fn, g_idx, K, scales.shape[0])
        if perm is not None:
            q = q.index_select(0, perm)
    packed = sm90_layout.pack_sm90(q, bits)
    offsets = sm90_layout.sign_offsets(scales, zeros, bits)
    return PackedWeight(packed, scales.clone(), offsets, G, bits, scales.dtype, N, K, perm,
                        layout=LAYOUT, scale_only=zeros is None)


def check_sm90_weight(fn: str, packed: object) -> None:
    """``packed`` must be a consistent sm90-layout PackedWeight (a weight of another layout never reaches
    an sm90 kernel)."""
    if not isinstance(packed, PackedWeight):
        raise ValueError(f"{fn}: packed must be a PackedWeight from mixgemm.sm90.prepack_sm90, got "
                         f"{type(packed).__name__}")
    if packed.layout != LAYOUT:
        raise ValueError(f"{fn}: packed is in the {packed.layout!r} layout; the sm90 kernels take only 'sm90' "
                         "weights (from prepack_sm90)")
    if packed.act_dtype not in ACT_DTYPES or packed.bits not in (4, 8):
        raise ValueError(f"{fn}: packed.act_dtype must be float16/bfloat16 and packed.bits 4 or 8")
    for name in ("n", "k", "group_size"):
        value = getattr(packed, name)
        if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
            raise ValueError(f"{fn}: packed.{name} must be a positive int, got {value!r}")
    _check_sizes(fn, packed.k, packed.n, packed.group_size)
    shape = sm90_layout.packed_shape(packed.k, packed.n, packed.bits)
    _checks.check_tensor(fn, "packed.packed", packed.packed, (torch.int32,), 4)
    _checks.check_shape(fn, "packed.packed", packed.packed, shape, f"the sm90 layout of {packed.bits}-bit weights")
    for name in ("scales", "offsets"):
        t = getattr(packed, name)
        _checks.check_tensor(fn, f"packed.{name}", t, (packed.act_dtype,), 2)
        _checks.check_shape(fn, f"packed.{name}", t, (packed.k // packed.group_size, packed.n), "[K/G, N]")
    _checks.check_same_device(fn, packed=packed.packed, scales=packed.scales, offsets=packed.offsets)
    if packed.perm is not None:
        _checks.check_tensor(fn, "packed.perm", packed.perm, (torch.int64,), 1)
        _checks.check_shape(fn, "packed.perm", packed.perm, (packed.k,), "one source column of x per row of K")


def default_config(M: int, packed: PackedWeight) -> Sm90Config:
    """A simple pick until the dispatcher's tuning covers the path: the persistent, cluster 1 x 1 config
    whose token tile is the smallest one >= M (the largest when none is), among those that tile N."""
    configs = [c for c in compiled_sm90_configs(packed.act_dtype, packed.bits) if packed.n % c.tile_n == 0]
    if not configs:
        raise ValueError(f"gemm_sm90: no compiled sm90 config fits N = {packed.n} for {packed.act_dtype} "
                         f"int{packed.bits} (is 90a in MIXGEMM_CUDA_ARCHS?)")
    plain = [c for c in configs if c.scheduler == "persistent" and (c.cluster_m, c.cluster_n) == (1, 1)] or configs
    fitting = [c for c in plain if c.tile_m >= M]
    if fitting:
        return min(fitting, key=lambda c: (c.tile_m, c.schedule != "coop"))
    return max(plain, key=lambda c: (c.tile_m, c.schedule == "coop"))


def gemm_sm90(x: torch.Tensor, packed: PackedWeight, bias: torch.Tensor | None = None,
              config: Sm90Config | None = None) -> torch.Tensor:
    """``y = x @ dequant(W) + bias`` on the sm90 path. ``x``: contiguous CUDA ``[..., K]`` in
    ``packed.act_dtype``; ``packed`` from :func:`prepack_sm90`; ``bias`` ``[N]`` or None; ``config`` one of
    :func:`compiled_sm90_configs` or None (:func:`default_config`). Returns ``[..., N]``."""
    fn = "gemm_sm90"
    check_sm90_weight(fn, packed)
    if not isinstance(x, torch.Tensor) or x.dim() < 1:
        raise ValueError(f"{fn}: x must be a torch.Tensor with at least one dimension")
    if x.shape[-1] != packed.k:
        raise ValueError(f"{fn}: x.shape[-1] must equal the weight's K = {packed.k}, got {x.shape[-1]}")
    _checks.check_tensor(fn, "x", x, (packed.act_dtype,), x.dim())
    lead = x.shape[:-1]
    x2 = x.reshape(-1, packed.k)
    _checks.check_same_device(fn, x=x, packed=packed.packed)
    if bias is not None:
        _checks.check_tensor(fn, "bias", bias, (packed.act_dtype,), 1)
        _checks.check_shape(fn, "bias", bias, (packed.n,), "one value per output column")
        _checks.check_same_device(fn, x=x, bias=bias)
    if config is not None and not isinstance(config, Sm90Config):
        raise ValueError(f"{fn}: config must be an Sm90Config or None, got {type(config).__name__}")
    if packed.perm is not None:
        x2 = x2.index_select(1, packed.perm)
    M, N, K = x2.shape[0], packed.n, packed.k
    out = torch.empty((M, N), dtype=packed.act_dtype, device=x.device)
    if M == 0:
        return out.reshape(*lead, N)
    _checks.check_device_supported(fn, x.device)
    if torch.cuda.get_device_capability(x.device) != (9, 0):
        raise RuntimeError(f"{fn}: the sm90 kernels run on compute capability 9.0 (H100/H200) only")
    cfg = config if config is not None else default_config(M, packed)
    compiled = {c.key: c for c in compiled_sm90_configs(packed.act_dtype, packed.bits)}
    if cfg.key not in compiled:
        names = ", ".join(c.name for c in compiled.values()) or "none (build without 90a)"
        raise ValueError(f"{fn}: config {cfg.name} is not compiled into this build; compiled: {names}")
    modes = compiled[cfg.key].modes
    # Scale-only weights use the scale-only kernel where it is compiled, else the offset kernel with their
    # all-zero offsets (same result).
    use_offsets = not (packed.scale_only and "scale" in modes)
    if use_offsets and "offset" not in modes:
        raise ValueError(f"{fn}: config {cfg.name} has no zero-point kernel in this build")
    bf16 = packed.act_dtype == torch.bfloat16
    nbytes = extension().gemm_sm90_workspace_size(cfg.key, M, N, K, packed.group_size, bf16, packed.bits,
                                                  use_offsets)
    workspace = torch.empty(nbytes, dtype=torch.uint8, device=x.device) if nbytes else None
    extension().gemm_sm90(
        cfg.key, x2.data_ptr(), packed.packed.data_ptr(), packed.scales.data_ptr(),
        packed.offsets.data_ptr() if use_offsets else 0, bias.data_ptr() if bias is not None else 0,
        out.data_ptr(), workspace.data_ptr() if workspace is not None else 0, nbytes,
        M, N, K, packed.group_size, bf16, packed.bits, current_stream(x.device),
    )
    return out.reshape(*lead, N)
