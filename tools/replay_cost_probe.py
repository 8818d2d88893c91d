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
from mixgemm.bench import timing

SHAPES = ((8192, 28672, 16), (4096, 4096, 16), (8192, 28672, 256))
COUNTS = (1, 4, 16, 64)
REPS = 9
G = 128


def per_call_us(calls, n: int, hide_enqueue: bool) -> float:
    """Median over REPS replays of one graph of ``n`` calls (cycling ``calls``), per call."""
    def run() -> None:
        for i in range(n):
            calls[i % len(calls)]()

    for _ in range(2):  # warm up: kernels loaded, workspaces made before capture
        run()
    torch.cuda.synchronize()
    graph = timing.capture_graph(run)
    return statistics.median(timing.sample_us(graph.replay, hide_enqueue) / n for _ in range(REPS))


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
        dense = timing.copies_for(K * N * 2)
        weights = [torch.randn(K, N, device=dev, dtype=torch.half) * 0.02 for _ in range(min(dense, 4))]
        probe(f"cublas {K}x{N} M={M}", [lambda w=w: torch.matmul(x, w) for w in weights], dense)
        del weights
        packed = min(timing.copies_for(K * N // 2), 16)
        packs = [mixgemm.prepack(torch.randint(-2**31, 2**31 - 1, (K, N // 8), dtype=torch.int32, device=dev),
                                 torch.rand(K // G, N, device=dev, dtype=torch.half) * 0.01,
                                 torch.randint(-2**31, 2**31 - 1, (K // G, N // 8), dtype=torch.int32, device=dev))
                 for _ in range(packed)]
        probe(f"mixgemm {K}x{N} M={M}", [lambda p=p: mixgemm.gemm(x, p) for p in packs], packed)
        del packs
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
