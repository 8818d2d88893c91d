"""The timing protocol of DESIGN.md section 7.

* Weights are rotated across enough copies that together they exceed 256 MB, so the 50 MB L2 never
  holds the weight a call is about to read: every call streams it from HBM, as in a real model where
  the previous layer's weights evicted this one's.
* One CUDA graph captures one call per copy, in turn. Replaying it removes Python and launch overhead,
  which would otherwise dominate the few-microsecond decode GEMMs.
* The graph is replayed several times and each replay timed with CUDA events; a replay's time divided
  by the calls it holds is one sample. We report the median of >= 7 samples, with min and max.

The calls run back to back, each launched right after the one before. :func:`time_after_elementwise` times
them in a model's order instead, each after the elementwise kernel that writes its input
(``sweep --after-elementwise``).

If capture fails (an op that cannot be captured), the same calls are timed as eager launches and the
result says so: such numbers include launch overhead and are not comparable at small sizes.
"""

from __future__ import annotations

import dataclasses
import functools
import statistics
from typing import Callable, Sequence

import torch

MIN_REPS = 7
# Beyond this many calls per graph the capture itself gets slow while adding no accuracy.
MAX_COPIES = 1024
L2_SAFE_BYTES = 256 << 20


def copies_for(bytes_per_copy: int, min_total: int = L2_SAFE_BYTES) -> int:
    """How many copies of ``bytes_per_copy`` bytes it takes to exceed ``min_total`` bytes (at least 1)."""
    if bytes_per_copy <= 0:
        raise ValueError(f"copies_for: bytes_per_copy must be positive, got {bytes_per_copy}")
    return max(1, min(MAX_COPIES, min_total // bytes_per_copy + 1))


@dataclasses.dataclass
class Timing:
    """Per-call time in microseconds over ``reps`` samples, and how it was measured."""

    median_us: float
    min_us: float
    max_us: float
    samples_us: list[float]
    calls_per_sample: int
    graph: bool
    note: str | None = None
    subtracted_us: float | None = None  # time_after_elementwise: the elementwise kernel's time taken off each sample

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)


def _eager(calls: Sequence[Callable[[], object]]) -> Callable[[], None]:
    def run() -> None:
        for call in calls:
            call()
    return run


def time_fn(
    fn_per_copy: Sequence[Callable[[], object]] | Callable[[], object],
    copies: int | None = None,
    warmup: int = 2,
    reps: int = MIN_REPS,
    use_graph: bool = True,
) -> Timing:
    """Times the closures in ``fn_per_copy`` (one per weight copy) under the protocol above.

    ``copies`` is the number of calls per sample; they cycle through the closures, so it defaults to
    ``len(fn_per_copy)`` (each copy once). A single callable is accepted as a list of one (useful when
    one buffer is already larger than L2). ``warmup`` passes over all calls run first, eagerly: they
    load kernels, create cuBLAS handles and let the allocator settle before capture.
    """
    fns = [fn_per_copy] if callable(fn_per_copy) else list(fn_per_copy)
    if not fns:
        raise ValueError("time_fn: need at least one closure")
    calls_per_sample = len(fns) if copies is None else int(copies)
    if calls_per_sample < 1:
        raise ValueError(f"time_fn: copies must be >= 1, got {copies}")
    if reps < MIN_REPS:
        raise ValueError(f"time_fn: reps must be >= {MIN_REPS} (the protocol's median of >= 7), got {reps}")
    run_eager = _eager([fns[i % len(fns)] for i in range(calls_per_sample)])

    # Warm up on a side stream, as torch.cuda.graph's documentation asks: lazily created state (cuBLAS
    # workspaces, our split-K semaphores) must exist before capture, or it would be allocated inside it.
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(max(1, warmup)):
            run_eager()
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()

    launch, graph, note = run_eager, None, None
    if use_graph:
        try:
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                run_eager()
            # The first replay uploads the graph to the device; keep it out of the samples.
            graph.replay()
            torch.cuda.synchronize()
            launch = graph.replay
        except Exception as exc:  # noqa: BLE001 - any capture failure falls back, and is reported
            graph = None
            note = f"CUDA graph capture failed ({type(exc).__name__}: {exc}); timed eager launches"
            torch.cuda.synchronize()
    else:
        note = "CUDA graphs disabled; timed eager launches"

    samples = []
    for _ in range(reps):
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        launch()
        end.record()
        end.synchronize()
        samples.append(start.elapsed_time(end) * 1e3 / calls_per_sample)  # ms -> us, per call
    used_graph = graph is not None
    del graph, launch  # frees the graph's private memory pool before the caller times the next peer
    return Timing(
        median_us=statistics.median(samples), min_us=min(samples), max_us=max(samples),
        samples_us=samples, calls_per_sample=calls_per_sample, graph=used_graph, note=note,
    )


def time_after_elementwise(
    fn_per_copy: Sequence[Callable[[], object]],
    x: torch.Tensor,
    copies: int | None = None,
    warmup: int = 2,
    reps: int = MIN_REPS,
    use_graph: bool = True,
) -> Timing:
    """Times the closures as a model runs them: each after an ordinary elementwise kernel that writes their input
    ``x`` (``x = h + r``, leaving its values as they are), less that kernel timed alone under the same protocol.

    Back to back, a GEMM launched as a programmatic dependent (the sm90 path) starts under the previous call's
    tail and hides its own launch and prologue; in a model the kernel before a projection is a norm, an activation
    or attention, which does not let it (docs/perf-notes/2026-11-26-model-order.md). The result's samples are the
    pair's less the elementwise kernel's median; its note says how much was taken off. ``copies`` as for
    :func:`time_fn` (calls per sample, cycling through the closures); both timings make that many calls, so the
    graph replay's own fixed cost, which :func:`time_fn` spreads over the calls of a sample, cancels."""
    h = x * 0.5
    r = x - h  # exact (Sterbenz), so h + r rounds back to x exactly: the closures' input is unchanged

    def write_input() -> None:
        torch.add(h, r, out=x)

    def pair(fn: Callable[[], object]) -> object:
        write_input()
        return fn()

    fns = [fn_per_copy] if callable(fn_per_copy) else list(fn_per_copy)
    calls = len(fns) if copies is None else copies
    together = time_fn([functools.partial(pair, fn) for fn in fns], calls, warmup=warmup, reps=reps,
                       use_graph=use_graph)
    alone = time_fn([write_input], calls, warmup=warmup, reps=reps, use_graph=use_graph)
    shift = alone.median_us
    notes = [f"after an elementwise kernel writing x ({shift:.2f} us alone, subtracted)", together.note, alone.note]
    return Timing(
        median_us=together.median_us - shift, min_us=together.min_us - shift, max_us=together.max_us - shift,
        samples_us=[s - shift for s in together.samples_us], calls_per_sample=together.calls_per_sample,
        graph=together.graph and alone.graph, note="; ".join(n for n in notes if n), subtracted_us=shift,
    )
