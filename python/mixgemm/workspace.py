"""The scratch kernels need besides their operands, per (device, stream): split-K's fp32 partials and the
semaphores of serial split-K and stream-K. Allocated through PyTorch's allocator, so CUDA-graph capture works.
"""

from __future__ import annotations

import torch

from ._runtime import stream_capturing

# Semaphores: zero-initialised once; every kernel leaves them zero again, so the hot path needs no memset (and
# CUDA-graph replays stay valid). Per stream because two split GEMMs running at once on different streams must
# not share counters.
_semaphores: dict[tuple[torch.device, int], torch.Tensor] = {}
_MIN_SEMAPHORES = 4096
# A buffer outgrown by a larger call is kept, never freed: a CUDA graph captured while it was current launches
# with its address on every replay, and memory handed back to the allocator could be reused and hold non-zero
# words. Each replacement is at least twice as large, so few are kept.
_outgrown_semaphores: list[torch.Tensor] = []

# Workspaces, reused by eager calls: allocating one per call cost the host as much as the launch (issue 9). Calls
# on one stream run in order and every kernel writes its workspace before reading it (the flags that say what is
# written live among the semaphores), so one buffer serves them all. Under CUDA-graph capture each call allocates
# its own, from the graph's pool, so a replay never shares memory with eager calls or with another graph; and a
# workspace above _MAX_CACHED_BYTES (split-K at large M, where the kernel dwarfs an allocation) is allocated per
# call as well, so no large buffer outlives its call.
_workspaces: dict[tuple[torch.device, int], torch.Tensor] = {}
_MAX_CACHED_BYTES = 64 << 20
_MIN_BYTES = 1 << 20


def _stream_buffer(cache: dict, device: torch.device, stream: int, count: int, allocate) -> torch.Tensor:
    """``cache``'s buffer for (device, stream), first replaced by ``allocate(device)`` when it is missing or holds
    fewer than ``count`` elements (``allocate`` sizes it)."""
    key = (device, stream)
    buffer = cache.get(key)
    if buffer is None or buffer.numel() < count:
        buffer = cache[key] = allocate(device)
    return buffer


def semaphores(device: torch.device, stream: int, count: int) -> torch.Tensor:
    """At least ``count`` zeroed int32 counters for calls on ``stream``."""
    outgrown = _semaphores.get((device, stream))
    floor = 0 if outgrown is None else 2 * outgrown.numel()
    buffer = _stream_buffer(_semaphores, device, stream, count,
                            lambda d: torch.zeros(max(count, _MIN_SEMAPHORES, floor), dtype=torch.int32, device=d))
    if outgrown is not None and buffer is not outgrown:
        _outgrown_semaphores.append(outgrown)
    return buffer


def scratch(device: torch.device, stream: int, nbytes: int) -> torch.Tensor:
    """A buffer of at least ``nbytes`` bytes for one call on ``stream``."""
    if nbytes > _MAX_CACHED_BYTES or stream_capturing():
        return torch.empty(nbytes, dtype=torch.uint8, device=device)
    return _stream_buffer(_workspaces, device, stream, nbytes,
                          lambda d: torch.empty(max(nbytes, _MIN_BYTES), dtype=torch.uint8, device=d))
