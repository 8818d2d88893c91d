"""The in-tree baseline: our re-implementation of vLLM's AWQ GEMM design (``m16nXk32``).

It exists to be measured against. ``awq_gemm`` keeps vLLM's signature and semantics: the kernel writes
``split_k_iters`` fp16 partial products and the result is their sum over the split dimension.
"""

from __future__ import annotations

import torch

from . import _checks
from ._runtime import current_stream, device_guard, extension

# The kernel's tiles: 16 rows of x per block, 32 K-rows per main-loop step, 64 or 128 columns per block.
_K_STEP = 32
_N_TILE_MIN = 64


def awq_gemm(
    x: torch.Tensor,
    qweight: torch.Tensor,
    scales: torch.Tensor,
    qzeros: torch.Tensor,
    split_k_iters: int = 8,
) -> torch.Tensor:
    """``x @ dequant(W)`` for fp16 ``x [M, K]`` and AWQ int4 weights, the vLLM way. Returns fp16 ``[M, N]``."""
    fn = "baseline.awq_gemm"
    _checks.check_tensor(fn, "x", x, (torch.float16,), 2)
    _checks.check_tensor(fn, "qweight", qweight, (torch.int32,), 2)
    _checks.check_tensor(fn, "scales", scales, (torch.float16,), 2)
    _checks.check_tensor(fn, "qzeros", qzeros, (torch.int32,), 2)
    _checks.check_same_device(fn, x=x, qweight=qweight, scales=scales, qzeros=qzeros)
    if not isinstance(split_k_iters, int) or isinstance(split_k_iters, bool) or split_k_iters < 1:
        raise ValueError(f"{fn}: split_k_iters must be a positive int, got {split_k_iters!r}")
    M, K = x.shape
    N = scales.shape[1]
    _checks.check_shape(fn, "qweight", qweight, (K, N // 8), "[K, N/8] with K = x.shape[1], N = scales.shape[1]")
    if K % _K_STEP != 0:
        raise ValueError(f"{fn}: K = x.shape[1] must be a multiple of {_K_STEP}, got {K}")
    if N % _N_TILE_MIN != 0:
        raise ValueError(f"{fn}: N = scales.shape[1] must be a multiple of {_N_TILE_MIN}, got {N}")
    group_size = _checks.group_size_of(fn, K, scales.shape[0])
    if group_size % _K_STEP != 0:
        raise ValueError(f"{fn}: group size K / scales.shape[0] = {group_size} must be a multiple of {_K_STEP}")
    _checks.check_shape(fn, "qzeros", qzeros, (scales.shape[0], N // 8), "[K/G, N/8], one row per scale row")
    _checks.check_device_supported(fn, x.device)

    if M == 0:
        return torch.empty((0, N), dtype=x.dtype, device=x.device)
    partials = torch.empty((split_k_iters, M, N), dtype=torch.float16, device=x.device)
    with device_guard(x.device):
        extension().peers.awq_gemm_baseline(
            x.data_ptr(), qweight.data_ptr(), scales.data_ptr(), qzeros.data_ptr(), partials.data_ptr(),
            M, N, K, group_size, split_k_iters, current_stream(x.device),
        )
    return partials.sum(0)


def awq_dequant_matmul(x: torch.Tensor, qweight: torch.Tensor, scales: torch.Tensor, qzeros: torch.Tensor) -> torch.Tensor:
    """vLLM's large-M path: dequantize the whole weight, then one cuBLAS fp16 matmul."""
    from .ops import awq_dequantize

    return torch.matmul(x, awq_dequantize(qweight, scales, qzeros))
