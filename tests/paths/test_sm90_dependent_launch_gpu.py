"""The sm90 path's programmatic dependent launches (cpp/mixgemm/core/cutlass_run.h): each GEMM may start while
the kernel before it on the stream finishes, and its producer warps wait (griddepcontrol.wait) before their first
global load. These tests put GEMMs back to back on one stream, with no synchronisation and no other kernel in
between, each reading the previous one's output, over every compiled sm90 kernel and split-K: a load before the
wait would read the NaN the output was allocated over, or stale values; a split flag read early would hang or sum
partials too soon. (The decode path's dependent launches have their own tests in test_decode_gpu.py.)

Tolerances as in test_sm90_gpu.py (gpu_helpers.MODEL_TOL, MATH_TOL), each output against float64 with its
actual input.
"""

from __future__ import annotations

import pytest
import torch

import mixgemm
from gpu_helpers import check_model_and_math, poison_allocator, random_activations, random_int_checkpoint
from test_sm90_gpu import _gemm_sm90, _model_weight, _require_sm90, _sm90_configs, _weight

pytestmark = pytest.mark.gpu

K = N = 1024  # a chain needs K == N; 8 weight tiles of 128 columns, 16 k-tiles of 64
G = 128
LINKS = 4  # GEMMs per chain


def _chain_configs(dtype):
    """Every compiled sm90 config, and each stream-K one also split three ways (split-K's partials and flags)."""
    configs = _sm90_configs(dtype)
    return configs + [c.with_split_k(3) for c in configs if c.scheduler == "streamk"]


def _windows(configs, length):
    """Runs of `length` consecutive configs, each starting at the previous one's last, so that every config runs
    in some chain after a different one (a short last run wraps around inside its chain)."""
    return [configs[i:i + length] for i in range(0, max(len(configs) - 1, 1), length - 1)]


def _chain(weights, x, configs):
    """y_i = y_(i-1) @ W_i, the i-th call with configs[i % len(configs)], back to back: the outputs' NaN blocks
    are filled first, all at once (a fill before each call would be the kernel each GEMM follows), so nothing
    but the GEMMs runs between them."""
    poison_allocator(x.shape[0] * N * 2, blocks=len(weights))
    outs = []
    for i, (packed, _, _) in enumerate(weights):
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
    """One chain per config (the same kernel back to back), then chains of consecutive configs (_windows)."""
    _require_sm90()
    dtype = torch.float16
    torch.manual_seed(M)
    weights = [_weight(K, N, G, dtype, 4, True) for _ in range(LINKS)]
    configs = _chain_configs(dtype)
    x = random_activations(M, K, dtype) * 0.25  # |y| grows 2-3x per link at K = 1024
    for chain_configs in [[c] for c in configs] + _windows(configs, LINKS):
        outs = _chain(weights, x, chain_configs)
        torch.cuda.synchronize()
        _check_chain(x, outs, weights, chain_configs, dtype)


def test_first_call_after_prepack_reads_the_new_weight():
    """prepack's last kernel writes the weight (or its scales) just before the GEMM that reads it: no
    synchronisation and no other kernel in between."""
    _require_sm90()
    dtype = torch.float16
    M = 128
    x = random_activations(M, K, dtype)
    for i, config in enumerate(_chain_configs(dtype)):
        torch.manual_seed(i)
        args, keywords, math_w = random_int_checkpoint(K, N, G, dtype, 4, True)
        # The references come from a first prepack of the checkpoint; the GEMM reads a second, fresh one.
        model_w = _model_weight(mixgemm.prepack(*args, **keywords, layout="sm90"), dtype, True)
        poison_allocator(max(M * N * 2, K * N // 2), blocks=8)  # the new weight's buffers and the output in NaN
        packed = mixgemm.prepack(*args, **keywords, layout="sm90")
        out = _gemm_sm90(x, packed, config=config)
        check_model_and_math(out, x, None, model_w, math_w, dtype, config.name)


def test_chain_in_a_cuda_graph():
    """Captured, the launches become programmatic graph edges: each replay, with fresh x, matches eager bit for
    bit (every kernel here is deterministic). One graph per run of consecutive configs, so every config is in
    one."""
    _require_sm90()
    dtype = torch.float16
    torch.manual_seed(3)
    links = 6
    weights = [_weight(K, N, G, dtype, 4, True) for _ in range(links)]
    for configs in _windows(_chain_configs(dtype), links):
        static_x = random_activations(100, K, dtype) * 0.25
        _chain(weights, static_x, configs)  # warm-up outside the capture
        torch.cuda.synchronize()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            static_outs = _chain(weights, static_x, configs)
        for _ in range(2):
            static_x.copy_(random_activations(100, K, dtype) * 0.25)
            graph.replay()
            eager = _chain(weights, static_x, configs)
            torch.cuda.synchronize()
            _check_chain(static_x, static_outs, weights, configs, dtype)
            for got, want in zip(static_outs, eager):
                assert torch.equal(got, want)
