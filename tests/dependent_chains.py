"""Chains of GEMMs back to back, for the tests of the paths that launch as programmatic dependents
(paths/test_sm90_dependent_launch_gpu.py, paths/test_sm80_dependent_start_gpu.py): y_i = y_(i-1) @ W_i on one
stream with nothing between the calls, each link checked against float64 with its own input (gpu_helpers'
tolerances), and the same chain captured in a CUDA graph against eager, bit for bit.

``weights`` are (PackedWeight, kernel-model weight, mathematical weight) triples of K == N (a chain needs it).
"""

from __future__ import annotations

import torch

import mixgemm
from gpu_helpers import check_model_and_math, poison_allocator


def windows(configs, length):
    """Runs of `length` consecutive configs, each starting at the previous one's last, so that every config runs
    in some chain after a different one (a short last run wraps around inside its chain)."""
    return [configs[i:i + length] for i in range(0, max(len(configs) - 1, 1), length - 1)]


def chain(weights, x, configs):
    """y_i = y_(i-1) @ W_i, the i-th call with configs[i % len(configs)], back to back: the outputs' NaN blocks
    are filled first, all at once (a fill before each call would be the kernel each GEMM follows), so nothing
    but the GEMMs runs between them."""
    poison_allocator(x.shape[0] * weights[0][0].n * 2, blocks=len(weights))
    outs = []
    for i, (packed, _, _) in enumerate(weights):
        x = mixgemm.gemm(x, packed, config=configs[i % len(configs)])
        outs.append(x)
    return outs


def check_chain(x, outs, weights, configs):
    for i, (inp, out, (_, model_w, math_w)) in enumerate(zip([x] + outs[:-1], outs, weights)):
        # The chain's values grow with each call; every link is checked against its own input.
        assert torch.isfinite(inp).all() and inp.abs().max() < 6e4, "the chain left fp16 range"
        check_model_and_math(out, inp, None, model_w, math_w, x.dtype, f"link {i}: {configs[i % len(configs)].name}")


def check_chain_in_a_cuda_graph(weights, configs, fresh_x):
    """The chain captured in a CUDA graph (the launches become programmatic graph edges): each of two replays, with
    a fresh x from ``fresh_x()``, passes check_chain and matches eager bit for bit (every kernel here is
    deterministic)."""
    static_x = fresh_x()
    chain(weights, static_x, configs)  # warm-up outside the capture
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        static_outs = chain(weights, static_x, configs)
    for _ in range(2):
        static_x.copy_(fresh_x())
        graph.replay()
        eager = chain(weights, static_x, configs)
        torch.cuda.synchronize()
        check_chain(static_x, static_outs, weights, configs)
        for got, want in zip(static_outs, eager):
            assert torch.equal(got, want)
