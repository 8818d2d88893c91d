"""Validated kernel entry points: the standalone dequantize and the mixed-input GEMM (DESIGN.md s. 4).

Every function checks its arguments (see ``_checks``) before any device pointer reaches the extension,
allocates outputs and workspaces through PyTorch's allocator (so CUDA-graph capture works), and launches
on the current stream of the tensors' device.
"""

from __future__ import annotations

import torch

from . import _checks
from ._checks import ACT_DTYPES
from ._runtime import current_stream, extension
from .config import GemmConfig
from .packing import PackedWeight, check_packed_weight, check_packed_tensors


def awq_dequantize(qweight: torch.Tensor, scales: torch.Tensor, qzeros: torch.Tensor) -> torch.Tensor:
    """Dequantizes AWQ int4 weights to a dense ``[K, N]`` matrix of the scales' dtype (fp16 or bf16).

    Args keep vLLM's signature: ``qweight`` int32 ``[K, N/8]``, ``scales`` fp16/bf16 ``[K/G, N]``,
    ``qzeros`` int32 ``[K/G, N/8]``, all contiguous CUDA tensors. ``W = (q - z) * s``, bit-exact with the
    float64 value rounded once to the output dtype.
    """
    fn = "awq_dequantize"
    _checks.check_tensor(fn, "qweight", qweight, (torch.int32,), 2)
    _checks.check_tensor(fn, "scales", scales, ACT_DTYPES, 2)
    _checks.check_tensor(fn, "qzeros", qzeros, (torch.int32,), 2)
    _checks.check_same_device(fn, qweight=qweight, scales=scales, qzeros=qzeros)
    K, N = qweight.shape[0], scales.shape[1]
    _checks.check_shape(fn, "qweight", qweight, (K, N // 8), "[K, N/8] with N = scales.shape[1]")
    if N % 8 != 0 or N == 0:
        raise ValueError(f"{fn}: scales.shape[1] = N must be a positive multiple of 8, got {N}")
    if K == 0:
        raise ValueError(f"{fn}: qweight must have at least one row (K >= 1)")
    _checks.group_size_of(fn, K, scales.shape[0])
    _checks.check_shape(fn, "qzeros", qzeros, (scales.shape[0], N // 8), "[K/G, N/8], one row per scale row")
    _checks.check_device_supported(fn, qweight.device)

    out = torch.empty((K, N), dtype=scales.dtype, device=qweight.device)
    extension().awq_dequantize(
        qweight.data_ptr(), scales.data_ptr(), qzeros.data_ptr(), out.data_ptr(),
        K, N, K // scales.shape[0], scales.dtype == torch.bfloat16, current_stream(qweight.device),
    )
    return out


# ---------------------------------------------------------------------------------------------------
# GEMM


# Serial split-K semaphores, per (device, stream): zero-initialised once; every kernel leaves them zero
# again, so the hot path needs no memset (and CUDA-graph replays stay valid). Per stream because two
# serial GEMMs running at once on different streams must not share tile counters.
_semaphores: dict[tuple[torch.device, int], torch.Tensor] = {}
_MIN_SEMAPHORES = 4096


def _semaphore_buffer(device: torch.device, count: int) -> torch.Tensor:
    key = (device, current_stream(device))
    buffer = _semaphores.get(key)
    if buffer is None or buffer.numel() < count:
        buffer = torch.zeros(max(count, _MIN_SEMAPHORES), dtype=torch.int32, device=device)
        _semaphores[key] = buffer
    return buffer


def resolve_config(x_rows: int, packed: PackedWeight, config) -> GemmConfig:
    """``config="auto"`` -> the tuned choice if cached, else the heuristic; a GemmConfig is checked."""
    from . import tuning

    compiled = _check_config_arg(config, packed.act_dtype, packed.bits)
    if config == "auto":
        device = packed.packed.device
        # The tuner times int4 weights; int8 ones take the heuristic.
        tuned = tuning.lookup(torch.cuda.get_device_name(device), x_rows, packed.n, packed.k,
                              packed.group_size, packed.act_dtype) if packed.bits == 4 else None
        # A cache written by another build may name a tile this build lacks, or a split-K this K cannot
        # take: such an entry is stale, not an error, so the heuristic takes over.
        if tuned is not None and _fits(tuned, compiled, x_rows, packed.k):
            return tuned
        sms = torch.cuda.get_device_properties(device).multi_processor_count
        return tuning.heuristic_config(compiled, x_rows, packed.n, packed.k, sms)
    if config.path == "gemv" and x_rows > config.tile_m:
        raise ValueError(f"gemm: config {config.name} (decode path) takes at most {config.tile_m} rows of x, "
                         f"got M = {x_rows}")
    return config


def _fits(config: GemmConfig, compiled: list[GemmConfig], x_rows: int, K: int) -> bool:
    """Whether a (cached) config is compiled here and can take this M and K."""
    if (config.path, config.tile) not in {(c.path, c.tile) for c in compiled}:
        return False
    if config.path == "gemv":  # a split per 64-deep batch at most; rows up to the kernel's tile_m
        return x_rows <= config.tile_m and config.split_k <= K // config.warp_k
    return config.split_k <= K // config.tile_k


def _check_config_arg(config, act_dtype: torch.dtype, bits: int = 4) -> list[GemmConfig]:
    """``config`` must be "auto" or a GemmConfig compiled for ``act_dtype`` and ``bits``; returns the
    compiled list."""
    from .config import compiled_configs

    compiled = compiled_configs(act_dtype, bits, path=None)
    if isinstance(config, str):
        if config != "auto":
            raise ValueError(f"gemm: config must be 'auto' or a GemmConfig, got {config!r}")
    elif not isinstance(config, GemmConfig):
        raise ValueError(f"gemm: config must be 'auto' or a GemmConfig, got {type(config).__name__}")
    elif (config.path, config.tile) not in {(c.path, c.tile) for c in compiled}:
        names = ", ".join(c.name for c in compiled)
        raise ValueError(f"gemm: config {config.name} is not compiled into this build; compiled: {names}")
    return compiled


def gemm(x: torch.Tensor, packed: PackedWeight, bias: torch.Tensor | None = None, config="auto") -> torch.Tensor:
    """``y = x @ dequant(W) + bias`` with our CUTLASS-2.x-style mixed-input kernel.

    ``x``: contiguous CUDA ``[..., K]`` in ``packed.act_dtype``; ``bias``: ``[N]`` or None; ``config``:
    ``"auto"`` or a :class:`~mixgemm.config.GemmConfig`. Returns ``[..., N]``.
    """
    fn = "gemm"
    check_packed_weight(fn, packed)
    if not isinstance(x, torch.Tensor) or x.dim() < 1:
        raise ValueError(f"{fn}: x must be a torch.Tensor with at least one dimension")
    if x.shape[-1] != packed.k:
        raise ValueError(f"{fn}: x.shape[-1] must equal the weight's K = {packed.k}, got {x.shape[-1]}")
    if not x.is_contiguous():
        # Report the first broken rule in the usual order (dtype, device, then contiguity).
        _checks.check_tensor(fn, "x", x, (packed.act_dtype,), x.dim())
    lead = x.shape[:-1]
    x2 = x.reshape(-1, packed.k)
    _checks.check_tensor(fn, "x", x2, (packed.act_dtype,), 2)
    check_packed_tensors(fn, packed)
    _checks.check_same_device(fn, x=x, packed=packed.packed)
    if bias is not None:
        _checks.check_tensor(fn, "bias", bias, (packed.act_dtype,), 1)
        _checks.check_shape(fn, "bias", bias, (packed.n,), "one value per output column")
        _checks.check_same_device(fn, x=x, bias=bias)
    if packed.perm is not None:
        x2 = x2.index_select(1, packed.perm)  # act-order: x's columns in the permuted K order
    M, N, K = x2.shape[0], packed.n, packed.k
    out = torch.empty((M, N), dtype=packed.act_dtype, device=x.device)
    if M == 0:
        _check_config_arg(config, packed.act_dtype, packed.bits)  # nothing to launch; a bad config still errs
        return out.reshape(*lead, N)
    _checks.check_device_supported(fn, x.device)
    cfg = resolve_config(M, packed, config)

    _launch(cfg, x2, packed, bias, out)
    return out.reshape(*lead, N)


def _launch(cfg: GemmConfig, x2: torch.Tensor, packed: PackedWeight, bias, out: torch.Tensor) -> None:
    """Sizes the workspace of ``cfg``'s path and launches its kernel(s) on the current stream."""
    ext = extension()
    M, N, K = x2.shape[0], packed.n, packed.k
    if cfg.path == "gemv":
        floats, semaphore_count = ext.gemv_workspace_size(M, N, cfg.split_k)
    else:
        floats, semaphore_count = ext.gemm_workspace_size(cfg.tile, M, N, cfg.split_k, cfg.split_k_mode)
    workspace = torch.empty(floats, dtype=torch.float32, device=x2.device) if floats else None
    semaphores = _semaphore_buffer(x2.device, semaphore_count) if semaphore_count else None
    pointers = (
        x2.data_ptr(), packed.packed.data_ptr(), packed.scales.data_ptr(), packed.offsets.data_ptr(),
        bias.data_ptr() if bias is not None else 0, out.data_ptr(),
        workspace.data_ptr() if workspace is not None else 0,
        semaphores.data_ptr() if semaphores is not None else 0,
    )
    bf16, stream = packed.act_dtype == torch.bfloat16, current_stream(x2.device)
    if cfg.path == "gemv":
        ext.gemv(cfg.gemv_key, *pointers, M, N, K, packed.group_size, cfg.split_k, bf16, stream, packed.bits)
    else:
        ext.gemm(cfg.tile, *pointers, M, N, K, packed.group_size, cfg.split_k, cfg.split_k_mode, bf16, stream,
                 packed.bits)
