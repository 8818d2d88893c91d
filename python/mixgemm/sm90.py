"""The sm90 path (Hopper): its weight layout's prepack, whether a weight fits its kernels, and its configs.

CUTLASS 3.x warp-specialized wgmma + TMA mixed-input kernels (cpp/include/mixgemm/sm90/), built for
sm_90a only. The kernel computes the transposed problem ``y^T = W^T x^T`` so the narrow weight is the
register-sourced operand; the weight is stored in the layout of :mod:`mixgemm.sm90_layout` as signed codes,
and zero points become an additive offset ``(bias - z) * s`` (bias 8 / 128; see ``sm90_layout.sign_offsets``).

On a Hopper GPU ``mixgemm.prepack`` picks this layout by itself (``layout="auto"``) and ``mixgemm.gemm``
runs it on the sm90 kernels, or on the decode path for a few rows of x; the functions here are the path's
own entry points, for tests and for forcing the path.

Rules (checked here and again in C++): ``N`` a multiple of the config's ``tile_n`` (64 or 128; prepack
needs a multiple of 64), ``K`` a multiple of 64, ``group_size`` a multiple of 64 dividing ``K`` or ``K``
itself (per-channel), any ``M``; fp16 or bf16 activations, int4 or int8 weights.
"""

from __future__ import annotations

import functools

import torch

from . import sm90_layout
from ._checks import ACT_DTYPES
from ._runtime import extension
from .config import GemmConfig, compiled_configs
from .packing import PackedWeight, check_packed_weight, checkpoint_codes

LAYOUT = "sm90"
_TILE_K = 64  # the kernel's k-tile (128 bytes of 16-bit x)
_MIN_TILE_N = 64  # the narrowest weight tile (ping-pong)


def available() -> bool:
    """Whether this build holds the sm90 kernels (built with 90a in MIXGEMM_CUDA_ARCHS)."""
    return bool(extension().sm90_available())


def compiled_sm90_configs(dtype: torch.dtype = torch.float16, bits: int = 4) -> list[GemmConfig]:
    """Every sm90 config compiled for activation ``dtype`` and ``bits``-bit weights (empty without sm_90a)."""
    if dtype not in ACT_DTYPES:
        raise ValueError(f"compiled_sm90_configs: dtype must be float16 or bfloat16, got {dtype}")
    if bits not in (4, 8):
        raise ValueError(f"compiled_sm90_configs: bits must be 4 or 8, got {bits!r}")
    return compiled_configs(dtype, bits, path="sm90")


def check_sizes(fn: str, K: int, N: int, G: int) -> None:
    if N == 0 or N % _MIN_TILE_N:
        raise ValueError(f"{fn}: N must be a positive multiple of {_MIN_TILE_N} for the sm90 layout, got {N}")
    if K == 0 or K % _TILE_K:
        raise ValueError(f"{fn}: K must be a positive multiple of {_TILE_K} for the sm90 layout, got {K}")
    if G != K and (G % _TILE_K or K % G):
        raise ValueError(f"{fn}: group_size must be K or a multiple of {_TILE_K} dividing K on the sm90 path "
                         f"(scales are reloaded per whole 64-deep k-tile), got {G}")


@functools.cache
def _is_sm90(index: int) -> bool:
    return torch.cuda.get_device_capability(index) == (9, 0)


def fits(device: torch.device, dtype: torch.dtype, bits: int, K: int, N: int, G: int) -> bool:
    """Whether a weight of this shape on ``device`` can take the sm90 layout: a Hopper GPU, sm90 kernels
    compiled for the dtype and width with a weight tile dividing N, and K, G as :func:`check_sizes` wants."""
    if dtype not in ACT_DTYPES or bits not in (4, 8) or device.type != "cuda" or not torch.cuda.is_available():
        return False
    try:
        check_sizes("fits", K, N, G)
    except ValueError:
        return False
    configs = compiled_configs(dtype, bits, path="sm90")
    index = device.index if device.index is not None else torch.cuda.current_device()
    return any(N % c.tile_n == 0 for c in configs) and _is_sm90(index)


def prepack_to_sm90(fn: str, qweight, scales, qzeros, group_size, format: str, v1: bool, g_idx,
                    bits: int) -> PackedWeight:
    """``prepack``'s sm90 branch (its arguments' format, reading and width already checked there): pure
    PyTorch gathers (memory bound, like the sm80 prepack kernel), so it runs wherever the tensors are."""
    cuda = qweight.device.type == "cuda" if isinstance(qweight, torch.Tensor) else True
    q, zeros, perm, G = checkpoint_codes(fn, qweight, scales, qzeros, group_size, format, v1, g_idx, bits, cuda=cuda)
    K, N = q.shape
    check_sizes(fn, K, N, G)
    packed = sm90_layout.pack_sm90(q, bits)
    offsets = sm90_layout.sign_offsets(scales, zeros, bits)
    return PackedWeight(packed, scales.clone(), offsets, G, bits, scales.dtype, N, K, perm,
                        layout=LAYOUT, scale_only=zeros is None)


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
    """``mixgemm.prepack(..., layout="sm90")``: same arguments and checkpoint formats, GPTQ zeros read the
    same way (v1 for ``format="gptq"``, as stored for ``"gptq_v2"``); runs on CPU tensors too."""
    from .packing import prepack

    return prepack(qweight, scales, qzeros, group_size, format=format, gptq_v1=gptq_v1, g_idx=g_idx, bits=bits,
                   layout=LAYOUT)


def gemm_sm90(x: torch.Tensor, packed: PackedWeight, bias: torch.Tensor | None = None,
              config: GemmConfig | None = None) -> torch.Tensor:
    """``y = x @ dequant(W) + bias`` forced onto the sm90 GEMM (never the decode path). ``packed`` must be
    in the sm90 layout; ``config`` an sm90 :class:`GemmConfig` or None (the heuristic's sm90 choice)."""
    from . import ops, tuning

    fn = "gemm_sm90"
    if not isinstance(packed, PackedWeight) or packed.layout != LAYOUT:
        got = packed.layout if isinstance(packed, PackedWeight) else type(packed).__name__
        raise ValueError(f"{fn}: packed must be an sm90-layout PackedWeight (mixgemm.prepack(..., layout='sm90')), "
                         f"got {got!r}")
    if config is not None and not (isinstance(config, GemmConfig) and config.path == "sm90"):
        raise ValueError(f"{fn}: config must be an sm90 GemmConfig or None, got "
                         f"{getattr(config, 'name', type(config).__name__)}")
    if config is None:
        # The weight's fields first: the config lookup below reads its dtype and width, and a malformed
        # weight must get gemm's message, not the lookup's.
        check_packed_weight(fn, packed)
        rows = x.numel() // x.shape[-1] if isinstance(x, torch.Tensor) and x.dim() >= 1 and x.shape[-1] else 1
        rows = max(rows, 1)
        config = tuning.sm90_config(compiled_sm90_configs(packed.act_dtype, packed.bits), rows, packed.n)
        if config is None:
            raise ValueError(f"{fn}: no compiled sm90 config fits N = {packed.n} for {packed.act_dtype} "
                             f"int{packed.bits} (is 90a in MIXGEMM_CUDA_ARCHS?)")
        # The split needs the GPU's SM count; a weight off the GPU gets gemm's device error instead.
        if packed.packed.is_cuda:
            sm_count = ops._device_facts(fn, packed.packed.device)[1]
            config = tuning.sm90_split(config, rows, packed.n, packed.k, sm_count)
    return ops.gemm(x, packed, bias, config)
