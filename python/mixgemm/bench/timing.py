"""The timing protocol of DESIGN.md section 7.

* Weights are rotated across enough copies that together they exceed 256 MB, so the 50 MB L2 never
  holds the weight a call is about to read: every call streams it from HBM, as in a real model where
  the previous layer's weights evicted this one's.
* One CUDA graph captures the calls, cycling through the copies. Replaying it removes Python and launch
  overhead, which would otherwise dominate the few-microsecond decode GEMMs.
* The graph is replayed several times and each replay timed with CUDA events; a replay's time divided
  by the calls it holds is one sample. We report the median of >= 7 samples, with min and max.
* A sample pays some costs once, whatever its length: the host's enqueue of the replay, and the first
  call's start with no call before it to overlap. A short GPU sleep ahead of the start event hides the
  first (the replay is queued while the GPU is busy), and a sample holds whole passes over the copies
  until it lasts MIN_SAMPLE_US, which spreads the second thin (see MIN_SAMPLE_US).

The calls run back to back, each launched right after the one before. :func:`time_after_elementwise` times
them in a model's order instead, each after the elementwise kernel that writes its input
(``sweep --after-elementwise``).

If capture fails (an op that cannot be captured), the same calls are timed as eager launches and the
result says so: such numbers include launch overhead and are not comparable at small sizes.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import statistics
from typing import Callable, Sequence

import torch

MIN_REPS = 7
# Beyond this many calls per graph the capture itself gets slow while adding no accuracy.
MAX_COPIES = 1024
L2_SAFE_BYTES = 256 << 20
# A sample's once-per-replay costs, measured on an H100 (docs/perf-notes/2026-11-26-replay-fixed-cost.md): the
# host's enqueue of a replay reads 14 us on a one-call graph of a tiny kernel (17.5 us a sample, 3.3 with the GPU
# kept busy meanwhile); with the enqueue hidden, a split GEMM still pays ~24 us a sample (8192x28672, M = 16:
# 58.3 us a call over 3 calls a sample, 50.4 over 64), its first call starting with nothing to overlap. At 1 ms a
# sample such a cost is 2.4% of it; a kernel that overlaps nothing with its predecessor pays far less (the tiny
# kernel above: 1.33 us a call at 16 calls a sample, 1.22 at 64, its enqueue hidden).
MIN_SAMPLE_US = 1000.0
# GPU cycles to sleep ahead of each sample's start event, so the replay is enqueued before the GPU gets to it: at
# least 50 us at the H100's and the H200's 1.98 GHz, over three times the 14 us enqueue above.
HIDE_ENQUEUE_CYCLES = 100_000


def round_order(items: Sequence, round_index: int) -> list:
    """``items`` in the order of interleaved round ``round_index``: each round starts one item later, so no peer or
    config of a cell is always timed first while the GPU's clock and power drift over the rounds."""
    items = list(items)
    first = round_index % len(items) if items else 0
    return items[first:] + items[:first]


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


def passes_for_floor(sample_us: float, calls: int, closures: int) -> int:
    """How many calls a sample needs to last :data:`MIN_SAMPLE_US`, given that ``calls`` calls took ``sample_us``:
    ``calls`` itself if they did, else whole passes over the ``closures`` (so no copy is read twice in a row, within
    a replay or across two), at most :data:`MAX_COPIES` calls (and at least one pass)."""
    if sample_us >= MIN_SAMPLE_US:
        return calls
    per_call = max(sample_us, 1e-3) / calls
    passes = math.ceil(MIN_SAMPLE_US / per_call / closures)
    return closures * max(1, min(passes, MAX_COPIES // closures))


def capture_graph(run: Callable[[], None]) -> torch.cuda.CUDAGraph:
    """A CUDA graph of what ``run`` launches, replayed once (uploaded) and ready to time."""
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        run()
    # The first replay uploads the graph to the device; keep it out of the samples.
    graph.replay()
    torch.cuda.synchronize()
    return graph


def sample_us(launch: Callable[[], None], hide_enqueue: bool) -> float:
    """One launch's time in microseconds, between CUDA events; ``hide_enqueue``: the GPU sleeps first, so a
    graph replay is queued before it gets to the start event (:data:`HIDE_ENQUEUE_CYCLES`)."""
    start = torch.cuda.Event(enable_timing=True)
    end = torch.cuda.Event(enable_timing=True)
    if hide_enqueue:
        torch.cuda._sleep(HIDE_ENQUEUE_CYCLES)
    start.record()
    launch()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) * 1e3  # ms -> us


# A one-pass sample still holds what a sample pays once, so the per-call time read off it is high and one
# lengthening falls short of the floor (0.65-0.98 ms in the H100 runs of a single lengthening); each further one
# reads its per-call time off a longer sample.
MAX_LENGTHENINGS = 3


def _lengthen(graph: torch.cuda.CUDAGraph, calls: Callable[[int], Callable[[], None]], count: int,
              closures: int) -> tuple[torch.cuda.CUDAGraph, int, str | None]:
    """``graph`` (of ``count`` calls) recaptured with whole passes over the ``closures`` until a sample lasts
    :data:`MIN_SAMPLE_US` (or :data:`MAX_COPIES` calls): the graph, its count, and a note where a longer capture
    failed (the last graph that captured is kept)."""
    for _ in range(MAX_LENGTHENINGS):
        wanted = passes_for_floor(sample_us(graph.replay, True), count, closures)
        if wanted == count:
            break
        graph = None  # the short graph's memory goes before the longer one is captured
        try:
            graph = capture_graph(calls(wanted))
        except Exception as exc:  # noqa: BLE001 - keep the length that captured, and say why
            torch.cuda.synchronize()
            return capture_graph(calls(count)), count, (f"a sample of {wanted} calls failed to capture "
                                                   f"({type(exc).__name__}: {exc}); kept {count}")
        count = wanted
    return graph, count, None


def time_fn(
    fn_per_copy: Sequence[Callable[[], object]] | Callable[[], object],
    copies: int | None = None,
    warmup: int = 2,
    reps: int = MIN_REPS,
    use_graph: bool = True,
) -> Timing:
    """Times the closures in ``fn_per_copy`` (one per weight copy) under the protocol above.

    ``copies`` is the number of calls per sample, exactly; they cycle through the closures. By default a sample
    holds whole passes over the closures, one or as many as it takes to last :data:`MIN_SAMPLE_US` under a CUDA
    graph (measured and recaptured at most :data:`MAX_LENGTHENINGS` times; eager launches keep one pass). A
    single callable is accepted as a list of one (useful when one buffer is already larger than L2). ``warmup``
    passes over all calls run first, eagerly: they load kernels, create cuBLAS handles and let the allocator
    settle before capture.
    """
    fns = [fn_per_copy] if callable(fn_per_copy) else list(fn_per_copy)
    if not fns:
        raise ValueError("time_fn: need at least one closure")
    calls_per_sample = len(fns) if copies is None else int(copies)
    if calls_per_sample < 1:
        raise ValueError(f"time_fn: copies must be >= 1, got {copies}")
    if reps < MIN_REPS:
        raise ValueError(f"time_fn: reps must be >= {MIN_REPS} (the protocol's median of >= 7), got {reps}")

    def calls(n: int) -> Callable[[], None]:
        return _eager([fns[i % len(fns)] for i in range(n)])

    run_eager = calls(calls_per_sample)

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
            graph = capture_graph(run_eager)
        except Exception as exc:  # noqa: BLE001 - any capture failure falls back, and is reported
            graph = None
            note = f"CUDA graph capture failed ({type(exc).__name__}: {exc}); timed eager launches"
            torch.cuda.synchronize()
        if graph is not None and copies is None:
            graph, calls_per_sample, note = _lengthen(graph, calls, calls_per_sample, len(fns))
        if graph is not None:
            launch = graph.replay
    else:
        note = "CUDA graphs disabled; timed eager launches"

    used_graph = graph is not None
    samples = [sample_us(launch, used_graph) / calls_per_sample for _ in range(reps)]
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

    Back to back, a GEMM launched as a programmatic dependent (the decode and sm90 paths, the sm80 path's small
    tiles) starts under the previous call's tail and hides its own launch and prologue; in a model the kernel before
    a projection is a norm, an activation or attention, which does not let it unless it releases its dependents
    early (docs/perf-notes/2026-11-26-model-order.md). The result's samples are the
    pair's less the elementwise kernel's median; its note says how much was taken off. ``copies`` as for
    :func:`time_fn` (calls per sample, cycling through the closures; by default as many as the pairs' sample takes
    to last :data:`MIN_SAMPLE_US`); the kernel alone is timed over as many calls as the pairs were, so the share of
    a sample's once-paid costs that the kernel carries cancels, and what is left is the GEMM's own first start
    spread over the same calls."""
    h = x * 0.5
    r = x - h  # exact (Sterbenz), so h + r rounds back to x exactly: the closures' input is unchanged

    def write_input() -> None:
        torch.add(h, r, out=x)

    def pair(fn: Callable[[], object]) -> object:
        write_input()
        return fn()

    fns = [fn_per_copy] if callable(fn_per_copy) else list(fn_per_copy)
    together = time_fn([functools.partial(pair, fn) for fn in fns], copies, warmup=warmup, reps=reps,
                       use_graph=use_graph)
    alone = time_fn([write_input], together.calls_per_sample, warmup=warmup, reps=reps, use_graph=use_graph)
    shift = alone.median_us
    notes = [f"after an elementwise kernel writing x ({shift:.2f} us alone, subtracted)", together.note, alone.note]
    return Timing(
        median_us=together.median_us - shift, min_us=together.min_us - shift, max_us=together.max_us - shift,
        samples_us=[s - shift for s in together.samples_us], calls_per_sample=together.calls_per_sample,
        graph=together.graph and alone.graph, note="; ".join(n for n in notes if n), subtracted_us=shift,
    )
