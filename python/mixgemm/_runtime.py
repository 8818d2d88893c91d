"""Where kernels run: the compiled extension, the device a launch goes to and its stream (shared by every
entry point)."""

from __future__ import annotations

import contextlib

import torch


# The raw handle straight from torch's C++ side (what torch.compile's generated code uses): the public
# torch.cuda.current_stream() builds a Stream object first, microseconds that every launch would pay.
_raw_stream = getattr(torch._C, "_cuda_getCurrentRawStream", None)
_capturing = getattr(torch._C, "_cuda_isCurrentStreamCapturing", None)
_current_index = getattr(torch._C, "_cuda_getDevice", None) or torch.cuda.current_device
_extension = None
_NO_SWITCH = contextlib.nullcontext()


def device_guard(device: torch.device):
    """A context in which ``device`` is the current CUDA device, for a launch on its tensors.

    The CUDA runtime launches on the current device and refuses a stream of another one, so a tensor on a
    GPU other than the current one (a model spread over GPUs, e.g. by transformers' ``device_map="auto"``,
    while cuda:0 stays current) needs its device made current first, as torch's own operators do. When it
    already is, which is nearly always, this costs one query and enters nothing."""
    if device.index is None or _current_index() == device.index:
        return _NO_SWITCH
    return torch.cuda.device(device.index)


def current_stream(device: torch.device) -> int:
    """The handle of ``device``'s current CUDA stream, which every launch uses (CUDA-graph capture too)."""
    if _raw_stream is not None and device.index is not None:
        return _raw_stream(device.index)
    return torch.cuda.current_stream(device).cuda_stream


def stream_capturing() -> bool:
    """Whether the current CUDA stream is capturing a graph (torch.cuda.is_current_stream_capturing without
    its Python wrapper)."""
    if _capturing is not None:
        return _capturing()
    return torch.cuda.is_current_stream_capturing()


def extension():
    """``mixgemm._C``, imported on first use (kept, since an import statement costs a lookup per call)."""
    global _extension
    if _extension is None:
        from . import _C

        _extension = _C
    return _extension
