"""The sm90 path's programmatic dependent launches (cpp/mixgemm/core/cutlass_run.h): each GEMM may start while
the kernel before it on the stream finishes, and its producer warps wait (griddepcontrol.wait) before their first
global load. These tests make the previous kernel's output the next call's input, on one stream with no
synchronisation, over every compiled sm90 kernel and split-K: a load before the wait would read the NaN the
output was allocated over, or stale values; a split flag read early would hang or sum partials too soon. (The
decode path's dependent launches have their own tests in test_decode_gpu.py.)

Tolerances as in test_sm90_gpu.py (gpu_helpers.MODEL_TOL, MATH_TOL), each output against float64 with its
actual input.
"""

from __future__ import annotations

import pytest
import torch

from gpu_helpers import check_model_and_math, poison_allocator, random_activations
from test_sm90_gpu import _gemm_sm90, _require_sm90, _sm90_configs, _weight

pytestmark = pytest.mark.gpu

K = N = 1024  # a chain needs K == N; 8 weight tiles of 128 columns, 16 k-tiles of 64
G = 128


def _chain_configs(dtype):
    """Every compiled sm90 config, and each stream-K one also split three ways (split-K's partials and flags)."""
    configs = _sm90_configs(dtype)
    return configs + [c.with_split_k(3) for c in configs if c.scheduler == "streamk"]


def _chain(weights, x, configs):
    """y_i = y_(i-1) @ W_i, the i-th call with configs[i % len(configs)], each output allocated over NaN."""
    outs = []
    for i, (packed, _, _) in enumerate(weights):
        poison_allocator(x.shape[0] * N * 2)
        x = _gemm_sm90(x, packed, config=configs[i % len(configs)])
        outs.append(x)
    return outs


def _check_chain(x, outs, weights, configs, dtype):
    for i, (inp, out, (_, model_w, math_w)) in enumerate(zip([x] + outs[:-1], outs, weights)):
        # The chain's values grow with each call; every link is checked against its own input.
        assert torch.isfinite(inp).all() and inp.abs().max() < 6e4, "the chain left fp16 range"
        check_model_and_math(out, inp, None, model_w, math_w, dtype, f"link {i}: {configs[i % len(configs)].name}")


@pytest.mark.parametrize("M", [64, 300])
def test_each_call_reads_the_previous_calls_output(M):
    """One chain per config (the same kernel back to back), then chains of four consecutive configs, each
    window starting at the previous one's last config (so every kernel also runs after a different one)."""
    _require_sm90()
    dtype = torch.float16
    torch.manual_seed(M)
    weights = [_weight(K, N, G, dtype, 4, True) for _ in range(4)]
    configs = _chain_configs(dtype)
    x = random_activations(M, K, dtype) * 0.25  # |y| grows 2-3x per link at K = 1024
    windows = [configs[i:i + len(weights)] for i in range(0, max(len(configs) - 1, 1), len(weights) - 1)]
    for chain_configs in [[c] for c in configs] + windows:
        outs = _chain(weights, x, chain_configs)
        torch.cuda.synchronize()
        _check_chain(x, outs, weights, chain_configs, dtype)


def test_first_call_after_prepack_reads_the_new_weight():
    """prepack's kernels write the weight just before the GEMM, with no synchronisation in between."""
    _require_sm90()
    dtype = torch.float16
    x = random_activations(128, K, dtype)
    for i, config in enumerate(_chain_configs(dtype)):
        torch.manual_seed(i)
        packed, model_w, math_w = _weight(K, N, G, dtype, 4, True)
        poison_allocator(128 * N * 2)
        check_model_and_math(_gemm_sm90(x, packed, config=config), x, None, model_w, math_w, dtype, config.name)


def test_chain_in_a_cuda_graph():
    """Captured, the launches become programmatic graph edges: each replay, with fresh x, matches eager bit for
    bit (every kernel here is deterministic). The chain's six links take the first six configs."""
    _require_sm90()
    dtype = torch.float16
    torch.manual_seed(3)
    weights = [_weight(K, N, G, dtype, 4, True) for _ in range(6)]
    configs = _chain_configs(dtype)
    static_x = random_activations(100, K, dtype) * 0.25
    _chain(weights, static_x, configs)  # warm-up outside the capture
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        static_outs = _chain(weights, static_x, configs)
    for _ in range(3):
        static_x.copy_(random_activations(100, K, dtype) * 0.25)
        graph.replay()
        eager = _chain(weights, static_x, configs)
        torch.cuda.synchronize()
        _check_chain(static_x, static_outs, weights, configs, dtype)
        for got, want in zip(static_outs, eager):
            assert torch.equal(got, want)
