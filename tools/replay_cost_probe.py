"""What a timing sample pays once per graph replay (docs/perf-notes/2026-11-26-replay-fixed-cost.md).

For a tiny kernel, cuBLAS fp16 and mixgemm (auto) on a few shapes: the per-call time of one CUDA graph of n calls
(cycling through weight copies) at several n, timed plainly (start event, replay, end event) and with the GPU kept
busy by a sleep while the replay is enqueued. What a sample pays once shows as the per-call time falling with n.

    python tools/replay_cost_probe.py            # on the GPU machine, mixgemm installed
"""

from __future__ import annotations

import statistics

import torch

import mixgemm
from mixgemm.bench.timing import HIDE_ENQUEUE_CYCLES, copies_for

SHAPES = ((8192, 28672, 16), (4096, 4096, 16), (8192, 28672, 256))
COUNTS = (1, 4, 16, 64)
REPS = 9
G = 128


def per_call_us(calls, n: int, hide_enqueue: bool) -> float:
    """Median over REPS replays of one graph of ``n`` calls (cycling ``calls``), per call."""
    for _ in range(2):
        for i in range(n):
            calls[i % len(calls)]()
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for i in range(n):
            calls[i % len(calls)]()
    graph.replay()
    torch.cuda.synchronize()
    samples = []
    for _ in range(REPS):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        if hide_enqueue:
            torch.cuda._sleep(HIDE_ENQUEUE_CYCLES)
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        samples.append(start.elapsed_time(end) * 1e3 / n)
    return statistics.median(samples)


def probe(name: str, calls, default: int) -> None:
    for n in sorted({default, *COUNTS}):
        plain, hidden = per_call_us(calls, n, False), per_call_us(calls, n, True)
        print(f"{name:28s} calls {n:3d}  plain {plain:9.2f}  enqueue hidden {hidden:9.2f} us a call", flush=True)


def main() -> None:
    torch.manual_seed(0)
    dev = torch.device("cuda")
    print(torch.cuda.get_device_name(dev))
    tiny = torch.zeros(1, device=dev)
    probe("tiny add (1 element)", [lambda: tiny.add_(1)], 1)
    for K, N, M in SHAPES:
        x = torch.randn(M, K, device=dev, dtype=torch.half)
        dense = copies_for(K * N * 2)
        weights = [torch.randn(K, N, device=dev, dtype=torch.half) * 0.02 for _ in range(min(dense, 4))]
        probe(f"cublas {K}x{N} M={M}", [lambda w=w: torch.matmul(x, w) for w in weights], dense)
        del weights
        packed = min(copies_for(K * N // 2), 16)
        packs = [mixgemm.prepack(torch.randint(-2**31, 2**31 - 1, (K, N // 8), dtype=torch.int32, device=dev),
                                 torch.rand(K // G, N, device=dev, dtype=torch.half) * 0.01,
                                 torch.randint(-2**31, 2**31 - 1, (K // G, N // 8), dtype=torch.int32, device=dev))
                 for _ in range(packed)]
        probe(f"mixgemm {K}x{N} M={M}", [lambda p=p: mixgemm.gemm(x, p) for p in packs], packed)
        del packs
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
