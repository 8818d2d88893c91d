"""Where kernels run: the compiled extension and the stream of a device (shared by every entry point)."""

from __future__ import annotations

import torch


def current_stream(device: torch.device) -> int:
    """The handle of ``device``'s current CUDA stream, which every launch uses (CUDA-graph capture too)."""
    return torch.cuda.current_stream(device).cuda_stream


def extension():
    """``mixgemm._C``, imported on first use."""
    from . import _C

    return _C
