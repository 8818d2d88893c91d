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
from dependent_chains import chain, check_chain, check_chain_in_a_cuda_graph, windows
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


@pytest.mark.parametrize("M", [64, 300])
def test_each_call_reads_the_previous_calls_output(M):
    """One chain per config (the same kernel back to back), then chains of consecutive configs (windows)."""
    _require_sm90()
    dtype = torch.float16
    torch.manual_seed(M)
    weights = [_weight(K, N, G, dtype, 4, True) for _ in range(LINKS)]
    configs = _chain_configs(dtype)
    x = random_activations(M, K, dtype) * 0.25  # |y| grows 2-3x per link at K = 1024
    for chain_configs in [[c] for c in configs] + windows(configs, LINKS):
        outs = chain(weights, x, chain_configs)
        torch.cuda.synchronize()
        check_chain(x, outs, weights, chain_configs)


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
    for configs in windows(_chain_configs(dtype), links):
        check_chain_in_a_cuda_graph(weights, configs, lambda: random_activations(100, K, dtype) * 0.25)
