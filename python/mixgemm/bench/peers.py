"""What we time: our GEMM and the kernels it is compared against (DESIGN.md section 7).

A peer is a factory ``(M, N, K, G, dtype, copies) -> list of closures`` (one zero-argument closure per
weight copy, ready for :func:`mixgemm.bench.timing.time_fn`), or ``None`` when it does not apply. A
factory may instead raise :class:`PeerUnavailable` with the reason; :func:`build` turns both, and any
other failure, into a reason string so one broken peer never stops a run.

All peers solve the same problem from the same random AWQ checkpoint
(``formats.random_awq_weight``): copies of it are distinct allocations with equal contents, which is
all the L2 rotation needs. ``x`` is shared by the copies, as a layer's input is shared by nothing but is
hot in L2 when the layer runs. Weight copies are cached per shape (:func:`clear_caches` frees them), so
a sweep over M prepacks and converts each weight once.
"""

from __future__ import annotations

import functools
from typing import Callable

import torch

from .. import _checks, baseline, formats
from .._runtime import current_stream, device_guard, extension
from ..ops import awq_dequantize, gemm, resolve_config
from ..packing import prepack
from .timing import copies_for

DEVICE = "cuda"

# vLLM calls its awq_gemm kernel below this many tokens and dequant + cuBLAS above (awq.py, 256).
VLLM_AWQ_GEMM_MAX_M = 256
VLLM_SPLIT_K_ITERS = 8
# torch's tinygemm int4 kernel: its group sizes and the inner-k-tile choices its packing accepts.
_TORCH_INT4_GROUP_SIZES = (32, 64, 128, 256)
_TORCH_INT4_INNER_K_TILES = (8, 4, 2)
# bf16 activations and scales: the kernel's result vs float32 math differs by a few bf16 ulps.
_TORCH_INT4_CHECK_TOL = 2e-2


def describe(exc: BaseException, limit: int = 240) -> str:
    """``"Type: first line of the message"``, cut to ``limit`` characters: torch's dispatcher errors run
    to pages, and a reason has to fit in a report's notes."""
    lines = str(exc).strip().splitlines()
    text = f"{type(exc).__name__}: {lines[0] if lines else ''}"
    return text if len(text) <= limit else text[: limit - 3] + "..."


class PeerUnavailable(Exception):
    """A peer cannot run this problem here; the message says why (shown in the report)."""


class Closures(list):
    """A list of closures with optional facts for the report: ``note`` (e.g. a failed numerics check),
    ``config`` (the GemmConfig name our GEMM will run, so "auto" results say what auto chose) and ``x`` (our GEMM's
    input, which sweep --after-elementwise rewrites before each call)."""

    note: str | None = None
    config: str | None = None
    x: torch.Tensor | None = None


PeerFactory = Callable[..., "Closures | list | None"]


# ---------------------------------------------------------------------------------------------------
# Shared data, cached per shape: a sweep over M reuses the same weights.


@functools.lru_cache(maxsize=1)
def _awq_copies(K: int, N: int, G: int, dtype: torch.dtype, copies: int) -> tuple[dict, ...]:
    base = formats.random_awq_weight(K, N, G, dtype, device=DEVICE)
    return (base,) + tuple({name: t.clone() for name, t in base.items()} for _ in range(copies - 1))


# Two entries: a run may alternate between the auto layout and the sm80 one (the mixgemm_sm80 peer).
@functools.lru_cache(maxsize=2)
def _packed_copies(K: int, N: int, G: int, dtype: torch.dtype, copies: int, layout: str = "auto") -> tuple:
    return tuple(prepack(w["qweight"], w["scales"], w["qzeros"], G, layout=layout)
                 for w in _awq_copies(K, N, G, dtype, copies))


def auto_layout(K: int, N: int, G: int, dtype: torch.dtype) -> str:
    """The layout ``prepack(..., layout="auto")`` gives this shape on this GPU."""
    from ..kernel_key import KernelKey
    from ..paths import sm90

    key = KernelKey.of(dtype, 4, "sm90")
    return "sm90" if sm90.PATH.takes_weight(torch.device(DEVICE), key, K, N, G) else "sm80"


@functools.lru_cache(maxsize=1)
def _dense_copies(K: int, N: int, G: int, dtype: torch.dtype, copies: int) -> tuple[torch.Tensor, ...]:
    w = _awq_copies(K, N, G, dtype, copies)[0]
    dense = awq_dequantize(w["qweight"], w["scales"], w["qzeros"])
    # The dense weight is 4x the int4 bytes, so fewer copies already exceed the L2-safe total.
    count = min(copies, copies_for(dense.numel() * dense.element_size()))
    return (dense,) + tuple(dense.clone() for _ in range(count - 1))


def clear_caches() -> None:
    """Frees every cached weight copy (call between shapes; the caches hold one shape each)."""
    for cached in (_awq_copies, _packed_copies, _dense_copies, _int4pack_copies):
        cached.cache_clear()
    torch.cuda.empty_cache()


def _activations(M: int, K: int, dtype: torch.dtype) -> torch.Tensor:
    return torch.randn(M, K, device=DEVICE, dtype=torch.float32).to(dtype)


# ---------------------------------------------------------------------------------------------------
# The peers


def mixgemm_peer(M, N, K, G, dtype, copies, config="auto", layout="auto") -> Closures:
    """Ours: ``mixgemm.gemm`` on copies prepacked in ``layout`` ("auto": the GPU's own), with ``config``
    ("auto" or a GemmConfig)."""
    x = _activations(M, K, dtype)
    packed_copies = _packed_copies(K, N, G, dtype, copies, layout)
    closures = Closures(functools.partial(gemm, x, packed, config=config) for packed in packed_copies)
    closures.config = resolve_config(M, packed_copies[0], config).name
    closures.x = x
    return closures


def mixgemm_sm80_peer(M, N, K, G, dtype, copies) -> Closures:
    """Ours on the sm80 layout (its sm80 and decode paths), where the GPU's own layout is another (Hopper):
    the line ``config="auto"`` on the GPU's own layout must never fall behind."""
    if auto_layout(K, N, G, dtype) == "sm80":
        raise PeerUnavailable("prepack's auto layout is sm80 on this GPU: the same as mixgemm")
    return mixgemm_peer(M, N, K, G, dtype, copies, layout="sm80")


def vllm_style_peer(M, N, K, G, dtype, copies) -> Closures:
    """Our re-implementation of vLLM's AWQ GEMM (fp16 only), as vLLM calls it: split_k_iters = 8."""
    if dtype != torch.float16:
        raise PeerUnavailable("fp16 only (like vLLM's awq_gemm)")
    if M >= VLLM_AWQ_GEMM_MAX_M:
        raise PeerUnavailable(f"M >= {VLLM_AWQ_GEMM_MAX_M}: vLLM uses dequantize + matmul there")
    x = _activations(M, K, dtype)
    return Closures(
        functools.partial(baseline.awq_gemm, x, w["qweight"], w["scales"], w["qzeros"], VLLM_SPLIT_K_ITERS)
        for w in _awq_copies(K, N, G, dtype, copies)
    )


def vllm_dequant_matmul_peer(M, N, K, G, dtype, copies) -> Closures:
    """vLLM's large-M path: dequantize the whole weight (our kernel), then one cuBLAS matmul."""
    x = _activations(M, K, dtype)
    return Closures(
        functools.partial(baseline.awq_dequant_matmul, x, w["qweight"], w["scales"], w["qzeros"])
        for w in _awq_copies(K, N, G, dtype, copies)
    )


def cublas_fp16_peer(M, N, K, G, dtype, copies) -> Closures:
    """cuBLAS on the dense weight (``torch.matmul``), in the activation dtype: the unquantized reference."""
    x = _activations(M, K, dtype)
    return Closures(functools.partial(torch.matmul, x, w) for w in _dense_copies(K, N, G, dtype, copies))


# CUTLASS 2.x's dense fp16 GEMM compiled into the extension (cpp/mixgemm/peers/cutlass2_fp16.cu): mma.sync, the
# tile family of our 128x256 sm80 tile, so where compute bounds us it is our ceiling on this GPU. It reads
# and writes rows as 16-byte vectors of 8 halves, hence N and K in multiples of 8.
_CUTLASS2_MULTIPLE = 8


def _cutlass2_binding():
    """The extension's ``cutlass2_fp16_gemm``, or ``None`` for a build that predates it."""
    return getattr(getattr(extension(), "peers", None), "cutlass2_fp16_gemm", None)


def cutlass2_fp16_matmul(x: torch.Tensor, w: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
    """``x @ w`` by the cutlass2_fp16 peer: fp16 ``x [M, K]`` and ``w [K, N]`` (dense, row-major, as in
    ``torch.matmul``), fp32 accumulation, fp16 ``[M, N]`` result written into ``out`` when given.

    Contiguous, 16-byte aligned CUDA tensors on one device; N and K positive multiples of 8."""
    fn = "cutlass2_fp16_matmul"
    # Type, dtype, rank and layout first, then the shapes, then the device: every rule but the last can be
    # checked (and tested) without a GPU.
    _checks.check_tensor(fn, "x", x, (torch.float16,), 2, cuda=False)
    _checks.check_tensor(fn, "w", w, (torch.float16,), 2, cuda=False)
    M, K = x.shape
    N = w.shape[1]
    if w.shape[0] != K:
        raise ValueError(f"{fn}: w must be [K, N] with K = x.shape[1] = {K} rows, got shape {tuple(w.shape)}")
    for name, size in (("K = x.shape[1]", K), ("N = w.shape[1]", N)):
        if size < _CUTLASS2_MULTIPLE or size % _CUTLASS2_MULTIPLE != 0:
            raise ValueError(f"{fn}: {name} must be a positive multiple of {_CUTLASS2_MULTIPLE} "
                             f"(16-byte rows), got {size}")
    if out is not None:
        _checks.check_tensor(fn, "out", out, (torch.float16,), 2, cuda=False)
        _checks.check_shape(fn, "out", out, (M, N), "[M, N] = [x.shape[0], w.shape[1]]")
    tensors = {"x": x, "w": w} if out is None else {"x": x, "w": w, "out": out}
    for name, t in tensors.items():
        if t.device.type != "cuda":
            raise ValueError(f"{fn}: {name} must be on a CUDA device, got {t.device}")
    _checks.check_same_device(fn, **tensors)
    binding = _cutlass2_binding()
    if binding is None:
        raise RuntimeError(f"{fn}: this build of mixgemm._C has no cutlass2_fp16_gemm (it predates the peer); "
                           "rebuild the extension")
    _checks.check_device_supported(fn, x.device)

    if out is None:
        out = torch.empty((M, N), dtype=torch.float16, device=x.device)
    if M > 0:
        with device_guard(x.device):
            binding(x.data_ptr(), w.data_ptr(), out.data_ptr(), M, N, K, current_stream(x.device))
    return out


def cutlass2_fp16_peer(M, N, K, G, dtype, copies) -> Closures:
    """CUTLASS 2.x's dense fp16 GEMM (128x256x64 mma.sync tile, 3 stages) on the same dense weight copies as
    cublas_fp16, into one preallocated output: the mma.sync ceiling our sm80 path is read against."""
    if dtype != torch.float16:
        raise PeerUnavailable("fp16 only (one CUTLASS 2.x instantiation is compiled in)")
    if N % _CUTLASS2_MULTIPLE != 0 or K % _CUTLASS2_MULTIPLE != 0:
        raise PeerUnavailable(f"needs N and K multiples of {_CUTLASS2_MULTIPLE} (16-byte rows)")
    if _cutlass2_binding() is None:
        raise PeerUnavailable("this build of mixgemm._C has no cutlass2_fp16_gemm (it predates the peer)")
    x = _activations(M, K, dtype)
    out = torch.empty((M, N), dtype=dtype, device=DEVICE)
    return Closures(functools.partial(cutlass2_fp16_matmul, x, w, out) for w in _dense_copies(K, N, G, dtype, copies))


def _read_floor_binding():
    """The extension's ``read_floor``, or ``None`` for a build that predates it."""
    return getattr(getattr(extension(), "peers", None), "read_floor", None)


def read_floor(tensors, folded: torch.Tensor | None = None) -> torch.Tensor:
    """Reads every byte of 1 to 3 CUDA tensors once, with nothing else to do: the read_floor peer's kernel
    (cpp/mixgemm/peers/read_floor.cu). Returns ``folded``, int32 ``[READ_FLOOR_MAX_BLOCKS]``, each block's xor
    of the 32-bit words it read: the xor of all entries is the xor of every word of every tensor, when
    the entries past the grid were zero (a new ``folded`` is zeroed here; one passed in is reused as is).

    Tensors: contiguous, on one CUDA device, 16-byte aligned, a positive multiple of 16 bytes each."""
    fn = "read_floor"
    tensors = list(tensors)
    if not 1 <= len(tensors) <= 3:
        raise ValueError(f"{fn}: tensors must hold 1 to 3 tensors, got {len(tensors)}")
    for i, t in enumerate(tensors):
        name = f"tensors[{i}]"
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{fn}: {name} must be a torch.Tensor, got {type(t).__name__}")
        if t.device.type != "cuda" or not t.is_contiguous():
            raise ValueError(f"{fn}: {name} must be a contiguous CUDA tensor, got {t.device} "
                             f"{'contiguous' if t.is_contiguous() else 'non-contiguous'}")
        nbytes = t.numel() * t.element_size()
        if nbytes == 0 or nbytes % 16 or t.data_ptr() % 16:
            raise ValueError(f"{fn}: {name} must be 16-byte aligned and a positive multiple of 16 bytes, "
                             f"got {nbytes} bytes at an address {t.data_ptr() % 16} bytes past 16")
    binding = _read_floor_binding()
    if binding is None:
        raise RuntimeError(f"{fn}: this build of mixgemm._C has no read_floor (it predates the peer); "
                           "rebuild the extension")
    device = tensors[0].device
    blocks = extension().peers.READ_FLOOR_MAX_BLOCKS
    if folded is None:
        folded = torch.zeros(blocks, dtype=torch.int32, device=device)
    else:
        _checks.check_tensor(fn, "folded", folded, (torch.int32,), 1)
        _checks.check_shape(fn, "folded", folded, (blocks,), "[READ_FLOOR_MAX_BLOCKS]")
    _checks.check_same_device(fn, folded=folded, **{f"tensors[{i}]": t for i, t in enumerate(tensors)})
    with device_guard(device):
        binding([(t.data_ptr(), t.numel() * t.element_size()) for t in tensors], folded.data_ptr(),
                current_stream(device))
    return folded


def read_floor_peer(M, N, K, G, dtype, copies) -> Closures:
    """No GEMM: a kernel that only reads what the decode path must, each copy's packed weight, scales and
    offsets in the GPU's own layout. x and the output, a few KB at decode sizes, are left out. Its time is
    how close to DESIGN.md's bytes / 3.0 TB/s floor a single launch reading these bytes gets on this GPU."""
    if _read_floor_binding() is None:
        raise PeerUnavailable("this build of mixgemm._C has no read_floor (it predates the peer)")
    packed_copies = _packed_copies(K, N, G, dtype, copies)
    folded = torch.zeros(extension().peers.READ_FLOOR_MAX_BLOCKS, dtype=torch.int32,
                         device=packed_copies[0].packed.device)
    return Closures(functools.partial(read_floor, (p.packed, p.scales, p.offsets), folded) for p in packed_copies)


# torch's int4 path ("tinygemm", as used by gpt-fast and torchao's int4 weight-only): bf16 activations,
# weight codes q in 0..15 with W = (q - 8) * scale + zero, scales_and_zeros bf16 [K/G, N, 2].
# Its Python surface is private and has changed across releases, so it is probed in a guarded try and
# any failure makes the peer unavailable with the reason instead of crashing the run.


def _tinygemm_pack(q_nk: torch.Tensor, inner_k_tiles: int) -> torch.Tensor:
    """Codes ``[N, K]`` (0..15) -> the kernel's int32 tiles via ``torch._convert_weight_to_int4pack``.

    torch >= 2.5 takes uint8 ``[N, K/2]`` with the even k in the high nibble; older releases took int32
    ``[N, K]``. Try the current form first and fall back, keeping both errors if neither works.
    """
    q = q_nk.to(torch.int32)
    packed_bytes = ((q[:, ::2] << 4) | q[:, 1::2]).to(torch.uint8).contiguous()
    try:
        return torch._convert_weight_to_int4pack(packed_bytes, inner_k_tiles)
    except Exception as current:  # noqa: BLE001 - probing a private API
        try:
            return torch._convert_weight_to_int4pack(q.contiguous(), inner_k_tiles)
        except Exception as legacy:  # noqa: BLE001
            raise PeerUnavailable(
                f"torch._convert_weight_to_int4pack rejected uint8 [N, K/2] ({describe(current, 120)}) "
                f"and int32 [N, K] ({describe(legacy, 120)})"
            ) from None


@functools.lru_cache(maxsize=1)
def _int4pack_copies(K: int, N: int, G: int, dtype: torch.dtype, copies: int):
    """``(packed copies, scales_and_zeros copies, note)`` for the tinygemm kernel, from the shared weight."""
    for name in ("_convert_weight_to_int4pack", "_weight_int4pack_mm"):
        if not hasattr(torch, name):
            raise PeerUnavailable(f"torch {torch.__version__} has no torch.{name}")
    if G not in _TORCH_INT4_GROUP_SIZES:
        raise PeerUnavailable(f"group size {G} not in {_TORCH_INT4_GROUP_SIZES}")
    inner_k_tiles = next((t for t in _TORCH_INT4_INNER_K_TILES if K % (16 * t) == 0), None)
    if inner_k_tiles is None or N % 8 != 0:
        raise PeerUnavailable("needs K % 32 == 0 and N % 8 == 0")

    w = _awq_copies(K, N, G, dtype, copies)[0]
    q = formats.unpack_awq(w["qweight"])  # [K, N] uint8
    z = formats.unpack_awq(w["qzeros"]).float()  # [K/G, N]
    s = w["scales"].float()
    # (q - z) * s == (q - 8) * s + (8 - z) * s: tinygemm's "zero" is the offset at code 8.
    scales_and_zeros = torch.stack([s, (8 - z) * s], dim=-1).to(torch.bfloat16).contiguous()
    packed = _tinygemm_pack(q.t().contiguous(), inner_k_tiles)

    # One small call both proves the API works and checks we fed it the format it expects: a wrong
    # guess would still time, but the report must not present it as a working int4 GEMM unflagged.
    x = _activations(8, K, torch.bfloat16)
    try:
        out = torch._weight_int4pack_mm(x, packed, G, scales_and_zeros)
    except Exception as exc:  # noqa: BLE001 - probing a private API
        raise PeerUnavailable(f"torch._weight_int4pack_mm failed: {describe(exc)}") from None
    reference = x.float() @ formats.dequantize(q, s, formats.unpack_awq(w["qzeros"]), group_size=G,
                                               dtype=torch.float32)
    error = (torch.linalg.vector_norm(out.float() - reference) / torch.linalg.vector_norm(reference)).item()
    note = None
    if not error < _TORCH_INT4_CHECK_TOL:
        note = f"torch_int4: numerics check failed (relative error {error:.3g}); timing kept, format may be wrong"

    count = min(copies, copies_for(packed.numel() * packed.element_size() + scales_and_zeros.numel() * 2))
    copies_out = [(packed, scales_and_zeros)] + [(packed.clone(), scales_and_zeros.clone()) for _ in range(count - 1)]
    return copies_out, note


def torch_int4_peer(M, N, K, G, dtype, copies) -> Closures:
    """torch's built-in int4 weight-only GEMM (``torch._weight_int4pack_mm``), always with bf16 activations."""
    copies_out, note = _int4pack_copies(K, N, G, dtype, copies)
    x = _activations(M, K, torch.bfloat16)
    closures = Closures(
        functools.partial(torch._weight_int4pack_mm, x, packed, G, sz) for packed, sz in copies_out
    )
    closures.note = note
    return closures


PEERS: dict[str, PeerFactory] = {
    "mixgemm": mixgemm_peer,
    "mixgemm_sm80": mixgemm_sm80_peer,
    "vllm_style": vllm_style_peer,
    "vllm_dequant_matmul": vllm_dequant_matmul_peer,
    "cublas_fp16": cublas_fp16_peer,
    "cutlass2_fp16": cutlass2_fp16_peer,
    "torch_int4": torch_int4_peer,
    "read_floor": read_floor_peer,
}


def build(name: str, M: int, N: int, K: int, G: int, dtype: torch.dtype, copies: int, **options):
    """``(closures, None)`` ready to time, or ``(None, reason)``. Calls the first closure once, so a
    peer that fails at launch (a shape rule, a missing kernel) is reported here, not mid-timing."""
    factory = PEERS[name]
    try:
        closures = factory(M, N, K, G, dtype, copies, **options)
        if closures is None:
            return None, "not applicable to this problem"
        if not closures:
            return None, "no closures"
        closures[0]()
        torch.cuda.synchronize()
    except PeerUnavailable as exc:
        return None, str(exc)
    except Exception as exc:  # noqa: BLE001 - a broken peer is reported, never fatal to the run
        return None, describe(exc)
    return closures, None


# ---------------------------------------------------------------------------------------------------
# The standalone dequantize and its yardstick, a device-to-device copy


def dequant_closures(K: int, N: int, G: int, dtype: torch.dtype, copies: int) -> Closures:
    """``mixgemm.awq_dequantize`` on each weight copy (each call writes a fresh ``[K, N]`` output)."""
    return Closures(
        functools.partial(awq_dequantize, w["qweight"], w["scales"], w["qzeros"])
        for w in _awq_copies(K, N, G, dtype, copies)
    )


def copy_closures(nbytes: int, copies: int) -> Closures:
    """``dst.copy_(src)`` of ``nbytes`` bytes, one source/destination pair per copy (16-byte multiple)."""
    numel = max(1, nbytes // 16)
    pairs = [(torch.empty(numel, 16, dtype=torch.uint8, device=DEVICE),
              torch.empty(numel, 16, dtype=torch.uint8, device=DEVICE)) for _ in range(copies)]
    for src, _ in pairs:
        src.random_(0, 256)
    return Closures(functools.partial(dst.copy_, src) for src, dst in pairs)
