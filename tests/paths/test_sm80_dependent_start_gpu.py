"""The sm80 path's small tiles as programmatic dependents (cpp/mixgemm/sm80/kernel/dependent_start.cuh): from
compute capability 9.0 the 16- and 32-row tiles, every split, launch so that a GEMM's blocks may be placed while the
kernel before it on the stream finishes; they ask L2 for their first weight lines, then wait (griddepcontrol.wait)
before they touch x, the output or the split-K slots and semaphores. The parallel split's reduction kernel follows
as a dependent too, and waits before it reads the partials (kernel/splitk_reduce.cuh). The launcher gives each
block the SM's share of shared memory for its grid (sm80/launch.cuh), so a grid of few blocks admits few per SM.

These tests put GEMMs back to back on one stream, with no synchronisation and no other kernel in between, each
reading the previous one's output, on both weight layouts: a load before the wait would read the NaN its input was
allocated over, or stale values; a semaphore read early would hang or sum partials too soon. The same chains run
where the launch is an ordinary one (before 9.0) and must pass there too. A chain needs K == N, so N here fills whole
tiles; the prologue's prefetch on a partial column tile runs in test_sm80_on_sm90_layout_gpu.py and test_sm80_gpu.py
(N = 320, 192), whose calls take the same launch. Tolerances as in test_sm80_gpu.py (gpu_helpers.MODEL_TOL,
MATH_TOL), each output against float64 with its actual input.
"""

from __future__ import annotations

import pytest
import torch

import mixgemm
from dependent_chains import chain, check_chain, check_chain_in_a_cuda_graph, windows
from gpu_helpers import (check_model_and_math, kernel_model_weight, poison_allocator, random_activations,
                         random_int_checkpoint)

pytestmark = pytest.mark.gpu

K = N = 1024  # a chain needs K == N: 16 k-tiles of 64, 8 column tiles of 128
G = 128
LINKS = 4  # GEMMs per chain
DEPENDENT_MAX_TILE_M = 32  # kStartsAsDependent in dependent_start.cuh
# Every split mode; the parallel split's two kernels (the GEMM writing partials, the reduction reading them, each a
# dependent) run here after and before the other splits, and after one another. Five
# serial splits of the 16 k-tiles leave the last one none (4, 4, 4, 4, 0): it prefetches nothing and still waits.
SPLITS = ((1, "none"), (3, "serial"), (5, "serial"), (2, "parallel"), (5, "streamk"))


def _small_tile_configs(layout):
    """The compiled sm80 configs of the tiles that start as dependents on `layout`'s weights, in every split; the
    test skips where there is no GPU or the build compiles none."""
    if not torch.cuda.is_available():
        pytest.skip("no CUDA GPU")
    configs = [c for c in mixgemm.compiled_configs(torch.float16, 4, path="sm80", layout=layout)
               if c.tile_m <= DEPENDENT_MAX_TILE_M]
    if not configs:
        pytest.skip(f"this build compiles no sm80 tile of up to {DEPENDENT_MAX_TILE_M} rows for the {layout} layout")
    return [c.with_split_k(k, mode) for c in configs for k, mode in SPLITS]


def _weight(layout):
    """A random AWQ checkpoint with zero points prepacked to `layout`, the kernels' model of it and the
    mathematical weight."""
    args, keywords, math_w = random_int_checkpoint(K, N, G, torch.float16, 4, True)
    packed = mixgemm.prepack(*args, **keywords, layout=layout)
    return packed, kernel_model_weight(packed), math_w


@pytest.mark.parametrize("M", [9, 16, 32])
@pytest.mark.parametrize("layout", ["sm80", "sm90"])
def test_each_call_reads_the_previous_calls_output(layout, M):
    """One chain per config (the same kernel back to back), then chains of consecutive configs; at M <= 16 also
    after and before the decode path's kernels, the other dependents of these rows."""
    configs = _small_tile_configs(layout)
    torch.manual_seed(M + (layout == "sm90"))
    weights = [_weight(layout) for _ in range(LINKS)]
    x = random_activations(M, K, torch.float16) * 0.25  # |y| grows 2-3x per link at K = 1024
    decode = [c for c in mixgemm.compiled_configs(torch.float16, 4, path="decode", layout=layout) if c.rows >= M]
    mixed = [c for i, tile in enumerate(configs) for c in (tile, decode[i % len(decode)])] if decode else configs
    for chain_configs in [[c] for c in configs] + windows(mixed, LINKS):
        outs = chain(weights, x, chain_configs)
        torch.cuda.synchronize()
        check_chain(x, outs, weights, chain_configs)


@pytest.mark.parametrize("layout", ["sm80", "sm90"])
def test_first_call_after_a_kernel_writes_the_weight(layout):
    """Elementwise kernels overwrite a packed weight's offsets, scales and (last) codes with another checkpoint's,
    and the GEMM follows the last of them with nothing in between: it must compute with the new weight. Those kernels
    are ordinary launches, as prepack's are, so the GEMM cannot start before they end; its L2 prefetch of the weight
    would be harmless even if it did (L2 is where their stores land), which no kernel here can show."""
    configs = _small_tile_configs(layout)
    x = random_activations(16, K, torch.float16)
    for i, config in enumerate(configs):
        torch.manual_seed(i)
        stale, _, _ = _weight(layout)
        fresh, model_w, math_w = _weight(layout)
        mixgemm.gemm(x, stale, config=config)  # the stale weight's lines in L2, and its call's buffers cached
        torch.cuda.synchronize()
        poison_allocator(16 * N * 2)
        torch.mul(fresh.offsets, 1, out=stale.offsets)
        torch.mul(fresh.scales, 1, out=stale.scales)
        torch.bitwise_xor(fresh.packed, 0, out=stale.packed)
        out = mixgemm.gemm(x, stale, config=config)
        check_model_and_math(out, x, None, model_w, math_w, torch.float16, config.name)


@pytest.mark.parametrize("layout", ["sm80", "sm90"])
def test_chain_in_a_cuda_graph(layout):
    """Captured, the launches become programmatic graph edges: each replay, with fresh x, matches eager bit for bit
    (every split here sums in a fixed order). One graph per run of consecutive configs."""
    configs = _small_tile_configs(layout)
    torch.manual_seed(3)
    links = 6
    weights = [_weight(layout) for _ in range(links)]
    for chain_configs in windows(configs, links):
        check_chain_in_a_cuda_graph(weights, chain_configs, lambda: random_activations(16, K, torch.float16) * 0.25)
