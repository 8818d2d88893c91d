"""Argument validation shared by every public entry point.

Each check raises ``ValueError`` naming the function, the argument and the rule it broke, so a bad call
never reaches a kernel (where it would crash, hang or write garbage). Device-level problems that are not
the caller's argument (no GPU, a GPU the build has no code for) raise ``RuntimeError``.
"""

from __future__ import annotations

from typing import Iterable

import torch

# Activation (and scale) dtypes the kernels take.
ACT_DTYPES = (torch.float16, torch.bfloat16)
# 16-byte vector loads and cp.async need every base address aligned to 16 bytes.
ALIGNMENT_BYTES = 16
# Our kernels use mma.sync m16n8k16 with fp16/bf16 operands and cp.async: Ampere (sm_80) or newer.
MIN_CAPABILITY = (8, 0)


def _dtype_names(dtypes: Iterable[torch.dtype]) -> str:
    return " or ".join(str(d).replace("torch.", "") for d in dtypes)


def check_tensor(
    fn: str,
    name: str,
    t: object,
    dtypes: tuple[torch.dtype, ...],
    ndim: int,
    *,
    cuda: bool = True,
    aligned: bool = True,
) -> torch.Tensor:
    """Checks type, dtype, rank, device, contiguity and (``aligned``, for a tensor our kernels read) 16-byte
    alignment of one tensor argument."""
    if not isinstance(t, torch.Tensor):
        raise ValueError(f"{fn}: {name} must be a torch.Tensor, got {type(t).__name__}")
    if t.dtype not in dtypes:
        raise ValueError(f"{fn}: {name} must have dtype {_dtype_names(dtypes)}, got {t.dtype}")
    if t.dim() != ndim:
        raise ValueError(f"{fn}: {name} must be {ndim}-D, got shape {tuple(t.shape)}")
    if cuda and t.device.type != "cuda":
        raise ValueError(f"{fn}: {name} must be on a CUDA device, got {t.device}")
    if not t.is_contiguous():
        raise ValueError(f"{fn}: {name} must be contiguous (call .contiguous() first)")
    if aligned and t.data_ptr() % ALIGNMENT_BYTES != 0:
        raise ValueError(
            f"{fn}: {name} must start at a {ALIGNMENT_BYTES}-byte aligned address "
            "(a slice with an odd offset breaks this; call .clone())"
        )
    return t


def check_same_device(fn: str, **tensors: torch.Tensor) -> None:
    """All tensor arguments must live on one device."""
    devices = {name: t.device for name, t in tensors.items()}
    first_name, first = next(iter(devices.items()))
    for name, device in devices.items():
        if device != first:
            raise ValueError(f"{fn}: {name} is on {device} but {first_name} is on {first}; all must share a device")


def check_shape(fn: str, name: str, t: torch.Tensor, expected: tuple[int, ...], why: str) -> None:
    if tuple(t.shape) != tuple(expected):
        raise ValueError(f"{fn}: {name} must have shape {tuple(expected)} ({why}), got {tuple(t.shape)}")


def group_size_of(fn: str, K: int, groups: int) -> int:
    """The group size implied by K rows and `groups` scale rows; it must divide K exactly."""
    if groups < 1 or K % groups != 0:
        raise ValueError(f"{fn}: scales has {groups} rows, which must divide K = {K} (K / groups = group_size)")
    return K // groups


def check_device_supported(fn: str, device: torch.device) -> None:
    """The GPU must be sm_80+ and covered by an architecture compiled into the extension."""
    from . import _C

    if _C.cuda_device_count() == 0:
        raise RuntimeError(f"{fn}: no CUDA GPU is visible to mixgemm's CUDA runtime")
    capability = torch.cuda.get_device_capability(device)
    if capability < MIN_CAPABILITY:
        raise RuntimeError(
            f"{fn}: GPU {torch.cuda.get_device_name(device)} has compute capability "
            f"{capability[0]}.{capability[1]}; mixgemm needs >= {MIN_CAPABILITY[0]}.{MIN_CAPABILITY[1]}"
        )
    arch = capability[0] * 10 + capability[1]
    compiled = _C.compiled_archs()
    # A cubin for sm_XY runs on X.y >= X.Y of the same major; the PTX of the newest arch JITs forward.
    runnable = any(a // 10 == capability[0] and a <= arch for a in compiled) or max(compiled) <= arch
    if not runnable:
        raise RuntimeError(
            f"{fn}: this build holds code for sm_{compiled} only, not for the GPU's sm_{arch}; "
            "rebuild with MIXGEMM_CUDA_ARCHS including it"
        )


def check_load_device(fn: str, device: object, name: str = "device") -> torch.device:
    """The ``device`` a loader moves checkpoint tensors to must exist here. Moving to CUDA on a torch
    without CUDA (or without a visible GPU) would otherwise fail inside torch with a bare
    ``AssertionError: Torch not compiled with CUDA enabled`` that names neither the argument nor the fix."""
    try:
        parsed = torch.device(device)
    except (RuntimeError, TypeError) as error:
        raise ValueError(f"{fn}: {name} must be a torch.device or a device string such as 'cuda' or "
                         f"'cuda:1', got {device!r} ({error})") from None
    if parsed.type == "cuda":
        if torch.version.cuda is None or not torch.cuda.is_available():
            why = ("this PyTorch build has no CUDA support" if torch.version.cuda is None
                   else "no CUDA GPU is visible to PyTorch")
            raise ValueError(f"{fn}: {name}={device!r} asks for a CUDA device, but {why}; mixgemm's kernels "
                             f"need an NVIDIA GPU (sm_80+) and a CUDA build of PyTorch")
        if parsed.index is not None and parsed.index >= torch.cuda.device_count():
            raise ValueError(f"{fn}: {name}={device!r} but only {torch.cuda.device_count()} CUDA device(s) "
                             f"are visible")
    return parsed
