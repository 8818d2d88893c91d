"""Choosing a GemmConfig for a shape: the built-in heuristic and the cache of tuned winners.

``gemm(..., config="auto")`` asks :func:`lookup` first (the winner ``python -m mixgemm tune`` stored for
this GPU and shape bucket) and falls back to :func:`heuristic_config`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import json
import math
import os
import pathlib
import tempfile
import warnings

import torch

from .config import LAYOUTS, GemmConfig

# Preferred threadblock tile (tile_m, tile_n) per M bucket, best first, from `tools/path_probe.py --paths
# sm80` on an H100 over the DESIGN shapes (BENCHMARKS.md, issue 10). Small M is bandwidth bound: 16-row
# tiles waste the fewest mma rows, and 256 columns per tile give each threadblock 8 KiB of weights per
# stage. At M = 64..256 the 64 x 128 tile (four warps of 64 x 32) was within 7% of the best tile in every
# cell (within 3% in 10 of 12); from M = 1024 up 128 x 256 (eight warps of 128 x 32) was the best or
# within 2.5% of it (128 x 128 at M = 1024 on 4096 x 4096 and 8192 x 8192).
_PREFERENCE = (
    (16, ((16, 256), (16, 128), (16, 64), (32, 128), (64, 128))),
    (32, ((32, 128), (64, 128), (16, 256))),
    (256, ((64, 128), (64, 256), (32, 128), (128, 128))),
    (math.inf, ((128, 256), (128, 128), (64, 128))),
)
# Up to M = 64 the weight stream dominates (2 M flops per 0.5-byte weight is under the H100's
# mma.sync-to-DRAM balance of about 170 flop/byte), so these tiles split K until there are about this
# many threadblocks per SM. 16-row tiles (M = 9..16 on the sm80 layout; the decode path takes M <= 8):
# 3, from a split sweep at M = 16 after issue 10's loader (BENCHMARKS.md): the best splits were 3, 12
# and 8 at 8192 x 28672, 28672 x 8192 and 8192 x 8192 (2.5, 2.9 and 1.9 blocks per SM), 6-12% faster
# than the splits of the 6 per SM the slower loader had needed. 64-row tiles: 4 (the same sweep had no
# clearly better count at M = 64 and 128; the 64-row tiles now also take M = 129..256, which is compute
# bound and was not swept: there the rule rarely splits). 32-row tiles keep the pre-loader 6 (not
# re-swept). 128-row tiles only need to cover the SMs once.
_BLOCKS_PER_SM = {16: 3, 32: 6, 64: 4}
# Each split should still stream enough k-tiles to fill its pipeline: 4 for the light 16/32-row tiles,
# 8 for 64 rows and up (at 4096 x 4096, M = 64, split 8 beat split 16 by more than 5%).
_MIN_K_TILES_PER_SPLIT = {16: 4, 32: 4}
_MIN_K_TILES_PER_SPLIT_LARGE = 8
_MAX_SPLIT_K = 16
# Split-K mode: parallel (a second, tiny reduction kernel) measured faster than serial (in-kernel
# reduction by the last split) at every decode shape swept, by 3% to 30%.
_SPLIT_MODE = "parallel"


# Decode path (M <= 8): one m8 tile, in blocks of 4 or 8 warps. The int4 kernels are held to 128
# registers, so 16 warps fit per SM (4 blocks of 4 warps or 2 of 8), and K is split until the strips x
# splits blocks make one full wave: floor(blocks per SM x SMs / strips) splits, never a partial second wave
# (on 4096 x 11008, 8 warps at split 2 make 344 blocks for 264 places: 16.1 us against 12.1 at split 1).
# Each warp keeps at least _GEMV_MIN_BATCHES_PER_WARP 64-deep batches so its two-batch pipeline fills.
# Swept on an H100 (BENCHMARKS.md, "Decode: scale after the mma, and dependent launches"), 4 warps' best
# splits were 8, 3, 8, 4, 1 and 4 for 4096x4096, 4096x11008, 11008x4096, 8192x8192, 8192x28672 and
# 28672x8192, which this rule reproduces. Two batches per warp suffice since the kernel prefetches its
# first batches into L2 before it may start (4096 x 4096 at split 8 took 6.7 us against 7.9 at split 4).
# The m16 kernel keeps four: at split 8 it took 15.2 us on 4096 x 4096 at M = 16, against 13.2 at split 4.
# From M = 9 the sm80 path's 16-row tiles were faster on both layouts (on the sm90 layout 9.8 us against
# 12.1 at 4096 x 4096, M = 16; the m16 decode kernel is compiled for the tuner to try). The decode path
# reads both layouts at the same speed (within 2% at M = 1 and 8, BENCHMARKS.md).
_GEMV_MAX_M = 8
_GEMV_WARPS_PER_SM = 16
_GEMV_MIN_BATCHES_PER_WARP = {8: 2, 16: 4}  # by the kernel's rows
# 4 or 8 warps (BENCHMARKS.md, "Decode: 8-warp blocks"). Where 8-warp blocks at half the split keep as
# many warps busy (their wave at least _GEMV_WIDE_MIN_FILL as full as 4 warps'), they won at every M: half
# the splits, half the split-K partials to write and sum (4096 x 4096: 6.00 against 6.07 us at M = 1,
# 6.83 against 7.86 at M = 8). Where they fill less, 4 warps won up to M = 4 (4096 x 11008, whose 172
# strips fill 65% of a wave of 8-warp blocks at split 1 and 98% of 4-warp blocks at split 3: 11.05 against
# 11.45 us at M = 1) and 8 warps from M = 5 (11.89 against 12.34), where each split's partial has M rows.
_GEMV_WIDE_WARPS = 8
_GEMV_WIDE_MIN_FILL = 0.9
_GEMV_WIDE_FROM_M = 5


def _gemv_config(configs: list[GemmConfig], M: int, N: int, K: int, sm_count: int) -> GemmConfig | None:
    """The decode path for M <= 8 rows: its kernel of the fewest rows, with 4 or 8 warps by the rule above,
    split by :func:`gemv_split`."""
    candidates = [c for c in configs if c.path == "gemv" and c.tile_m >= M]
    if M > _GEMV_MAX_M or not candidates:
        return None
    rows = min(c.tile_m for c in candidates)
    by_warps = {_gemv_warps(c): gemv_split(c, N, K, sm_count) for c in candidates if c.tile_m == rows}
    narrow = by_warps[min(by_warps)]
    wide = by_warps.get(_GEMV_WIDE_WARPS)
    if wide is None or wide == narrow or _gemv_fill(wide, N, sm_count) > 1:
        return narrow
    fills_as_well = _gemv_fill(wide, N, sm_count) >= _GEMV_WIDE_MIN_FILL * _gemv_fill(narrow, N, sm_count)
    return wide if fills_as_well or M >= _GEMV_WIDE_FROM_M else narrow


def _gemv_warps(config: GemmConfig) -> int:
    return config.tile_k // config.warp_k


def _gemv_fill(config: GemmConfig, N: int, sm_count: int) -> float:
    """The share of the GPU's warp places a decode config's blocks take (above 1: more than one wave)."""
    return N // config.tile_n * config.split_k * _gemv_warps(config) / (_GEMV_WARPS_PER_SM * sm_count)


def gemv_split(config: GemmConfig, N: int, K: int, sm_count: int) -> GemmConfig:
    """A decode config with the split-K the rule above gives it."""
    warps = _gemv_warps(config)
    strips = N // config.tile_n
    batches = K // config.warp_k
    one_wave = _GEMV_WARPS_PER_SM // warps * sm_count // strips
    min_batches = _GEMV_MIN_BATCHES_PER_WARP.get(config.tile_m, max(_GEMV_MIN_BATCHES_PER_WARP.values()))
    split_k = max(1, min(one_wave, batches // (warps * min_batches), _MAX_SPLIT_K))
    return config.with_split_k(split_k, "none" if split_k == 1 else "serial")


_LARGE_M = 4096  # an M of the last bucket: _pick_tile(configs, _LARGE_M) is the large-M tile
# 16 x 128 was measured with 4 stages at 4 blocks per SM (_SMALL_M_FIRST); the full build also has 3 and 5.
_PREFERRED_STAGES = {(16, 128): 4}


# M <= 16 on sm80-layout weights: 16 x 128 tiles at 4 stages and 4 stream-K blocks per SM (below) beat
# 16 x 256 at 2 per SM on all four DESIGN shapes (tools/path_probe.py, 2026-11-24, BENCHMARKS.md "sm80
# main loop: fewer instructions"): 8192 x 8192 19.6 against 21.0 us, 8192 x 28672 54.9 against 57.9,
# 28672 x 8192 53.1 against 55.2, 4096 x 4096 (256 blocks of 8 k-tiles) 9.1 against 9.9 (16 x 256 at its
# 128 blocks). On sm90-layout weights, whose B fragments come by ldmatrix, 16 x 256 keeps them: 16 x 128
# at 4 per SM took 61.7 against 56.6 us on 8192 x 28672 and 59.6 against 55.4 on 28672 x 8192.
_SMALL_M_FIRST = {"sm80": (16, 128), "sm90": (16, 256)}


def _pick_tile(configs: list[GemmConfig], M: int, layout: str = "sm80") -> GemmConfig:
    configs = [c for c in configs if c.path == "sm80"]
    for bound, tiles in _PREFERENCE:
        if M <= bound:
            if bound == _PREFERENCE[0][0]:  # the weight layout's own first choice, then the rest in order
                tiles = (_SMALL_M_FIRST[layout],) + tuple(t for t in tiles if t != _SMALL_M_FIRST[layout])
            for tile_m, tile_n in tiles:
                matches = [c for c in configs if (c.tile_m, c.tile_n) == (tile_m, tile_n)]
                if matches:
                    # Stage counts measured within noise of each other for a tile; take the shallowest
                    # of 3 or more (less shared memory per block, so more blocks per SM), except where
                    # one stage count was measured as the rule's choice.
                    preferred = [c for c in matches if c.stages == _PREFERRED_STAGES.get((tile_m, tile_n))]
                    return (preferred or sorted(matches, key=lambda c: (c.stages < 3, c.stages)))[0]
            break
    # Nothing preferred was compiled: the nearest tile height.
    return min(configs, key=lambda c: (abs(c.tile_m - min(M, 128)), -c.tile_n))


# sm90 GEMM, from tools/path_probe.py on an H100 (BENCHMARKS.md): per M bucket, the kernels to try in
# order, as (tile_m tokens, tile_n weight columns, schedule, scheduler). Up to 128 rows the token tile
# matching M with stream-K won on every DESIGN shape (the weight stream dominates, and stream-K spreads its
# 1.7-wave tail, e.g. 224 tiles of 8192 x 28672 on 132 SMs); above, 256 x 128 cooperative tiles won where
# they fill the GPU, 256 x 64 ping-pong tiles where they did not, and 128 x 128 stream-K (split K where it
# has few tiles, sm90_split) where neither does: 11008 x 4096 at M = 256 took 42.2 us split 2 ways against
# 47.9 for 128 x 64 ping-pong, which was within 3% of it on 4096 x 4096 (20.1 / 19.6 us). A ping-pong CTA
# with one tile keeps one of its two math warpgroups busy, so narrow ping-pong tiles only pay with two
# tiles or more per SM.
_SM90_CHOICES = (
    (16, ((16, 128, "coop", "streamk"), (32, 128, "coop", "streamk"))),
    (32, ((32, 128, "coop", "streamk"), (64, 128, "coop", "streamk"))),
    (64, ((64, 128, "coop", "streamk"), (32, 128, "coop", "streamk"))),
    (128, ((128, 128, "coop", "streamk"),)),
    (math.inf, ((256, 128, "coop", "persistent"), (256, 64, "pingpong", "persistent"),
                (128, 128, "coop", "streamk"))),
)
# A persistent tile shape is taken only if it makes at least this share of a wave (fewer tiles leave SMs
# idle: the next choice has more, smaller tiles); stream-K fills the GPU by construction.
_SM90_MIN_WAVE = 0.5
# A persistent grid whose last wave is short wastes the idle SMs' share: below this ratio of tiles to
# (waves x SMs), the stream-K twin of the same tile is used where compiled (8192 x 28672 at M = 512: 448
# tiles are 3.4 waves, 85%; stream-K took 325 us against 343).
_SM90_MIN_WAVE_EFFICIENCY = 0.9


def sm90_config(configs: list[GemmConfig], M: int, N: int, sm_count: int = 132) -> GemmConfig | None:
    """The sm90 GEMM config for M rows of x among ``configs``, or None when no compiled sm90 config tiles
    N. Walks M's bucket of :data:`_SM90_CHOICES`; failing those (a reduced build), the smallest compiled
    token tile that covers M, else the largest."""
    fitting = [c for c in configs if c.path == "sm90" and N % c.tile_n == 0]
    if not fitting:
        return None
    by_shape = {(c.tile_m, c.tile_n, c.schedule, c.scheduler): c
                for c in fitting if (c.cluster_m, c.cluster_n) == (1, 1)}
    choices = next(choices for bound, choices in _SM90_CHOICES if M <= bound)
    for tile_m, tile_n, schedule, scheduler in choices:
        config = by_shape.get((tile_m, tile_n, schedule, scheduler))
        if config is None:
            continue
        if scheduler == "streamk":
            return config
        tiles = math.ceil(M / tile_m) * (N // tile_n)
        if tiles < _SM90_MIN_WAVE * sm_count:
            continue
        waves = math.ceil(tiles / sm_count)
        twin = by_shape.get((tile_m, tile_n, schedule, "streamk"))
        if twin is not None and tiles / (waves * sm_count) < _SM90_MIN_WAVE_EFFICIENCY:
            return twin
        return config
    covering = [c for c in fitting if c.tile_m >= M]
    return min(covering, key=lambda c: (c.tile_m, c.scheduler != "streamk")) if covering else max(
        fitting, key=lambda c: (c.tile_m, c.tile_n))


# Split-K on the sm90 stream-K configs (CUTLASS's split-K decomposition: every tile's K cut into `split`
# runs on as many CTAs, partials added in split order). Measured on an H100 (interleaved; BENCHMARKS.md,
# "Small M on Hopper"):
# * When a config's tiles fill at most half the SMs, stream-K spreads each tile over ~132 / tiles CTAs with
#   uneven runs and a fixup chain per tile; an even split keeping tiles x split within one wave was faster:
#   4096x4096 at M = 32 (32 tiles), split 4: 15.4 against 16.5 us; 8192x8192 at M = 32..128 (64 tiles),
#   split 2: 0.91x-0.98x of stream-K's time; 11008x4096 at M = 32..64, split 4: 0.95x-0.96x.
# * Splits above 4 lost in every cell (6 and 8 took 1.1x-1.4x the best split's time): the fixup chain is
#   serial, one link per split, and each link costs about 3 us (K = 256, N = 4096, M = 128, 128 x 128
#   tiles: 8.8 us of kernel split 2 ways against 5.5 whole), against ~0.3 us per k-tile.
# * So a split needs about 16 k-tiles of its own: on N = 4096, M = 128, split 4 took 17.8 against 13.4 us
#   at K = 1024 (4 k-tiles per split), split 2 16.3 against 19.6 at K = 2048 (16 per split), and split 4
#   matched stream-K from K = 4096 on.
# * Those were measured with CUTLASS's fixup chain and its per-launch memset; without them (our scheduler,
#   cpp/include/mixgemm/sm90/self_resetting_stream_k.cuh) the rule's splits were still the best at M = 32..128
#   on the DESIGN shapes, and splits above 4, or past one wave, still lost (BENCHMARKS.md, "Hopper
#   stream-K without a memset").
SM90_MAX_SPLIT_K = 4
_SM90_MIN_K_TILES_PER_SPLIT = 16


def sm90_split(config: GemmConfig, M: int, N: int, K: int, sm_count: int = 132) -> GemmConfig:
    """``config`` with the split-K the rule above gives it: stream-K configs whose tiles fill at most half
    the SMs split K by ``sm_count // tiles``, at most 4 ways and with at least 16 k-tiles per split; others
    unchanged."""
    if config.path != "sm90" or config.scheduler != "streamk":
        return config
    tiles = math.ceil(M / config.tile_m) * (N // config.tile_n)
    split = min(SM90_MAX_SPLIT_K, sm_count // max(tiles, 1), K // config.tile_k // _SM90_MIN_K_TILES_PER_SPLIT)
    return config.with_split_k(split, "serial") if split >= 2 else config.with_split_k(1, "none")


# On the sm90 layout the sm80 path's mma.sync tiles (compiled for it for small M, tools/generate_kernels.py)
# take 9..16 rows: there the sm90 GEMM's fixed cost per launch (4-6 us of kernel floor and its fixups;
# BENCHMARKS.md, "Small M on Hopper") outweighs its faster main loop. tools/path_probe.py on an H100 over the
# DESIGN shapes:
# * M = 16: the sm80 tiles won on all six, by 2-23% over the sm90 GEMM's best split config (4096 x 4096:
#   10.5 against 11.1 us; 8192 x 8192: 22.7 against 23.1; 4096 x 11008: 16.1 against 19.8), and in an
#   earlier probe against the m16 decode kernel too (9.8 against 12.1 us on 4096 x 4096).
# * M = 32 and 64: until the sm90 GEMM lost its per-launch memset and its split-K chain (BENCHMARKS.md,
#   "Hopper stream-K without a memset"), the sm80 tiles also took these rows on small problems (M N K up to
#   1.5 Gi). Now the sm90 rule's config wins there too: 4096 x 4096 at M = 32 11.3 against 12.3 us, at
#   M = 64 12.7 against 14.2; 11008 x 4096 at M = 32 18.4 against 19.2; 4096 x 11008 at M = 32 20.9
#   against 21.5.
_SM90_LAYOUT_SM80_ROWS = 16


def _sm80_takes_sm90_layout(configs: list[GemmConfig], M: int) -> bool:
    """Whether the sm80 path's tiles take M rows of an sm90-layout weight (the rule above)."""
    return M <= _SM90_LAYOUT_SM80_ROWS and any(c.path == "sm80" for c in configs)


def _dequant_wins(M: int, layout: str) -> bool:
    """Whether the dequant path (expand the weight, then cuBLAS) is expected to beat the layout's GEMM."""
    return M >= _DEQUANT_MIN_M[layout]


def heuristic_config(configs: list[GemmConfig], M: int, N: int, K: int, sm_count: int,
                     layout: str = "sm80") -> GemmConfig:
    """A sane default for a weight in ``layout`` (``configs``: the compiled configs that read it): the decode
    path for a few rows of x; the dequant path for many rows of a large weight; else on the sm90 layout the
    sm80 path's tiles for up to 16 rows, where compiled for it; else the sm90 GEMM's
    tile by M bucket, then split-K where its tiles leave most SMs idle (:func:`sm90_split`); on the sm80
    layout a tile by M bucket, then split-K until the grid keeps the GPU busy."""
    if not configs:
        raise RuntimeError("mixgemm: this build has no compiled GEMM configs for this dtype")
    decode = _gemv_config(configs, M, N, K, sm_count)
    if decode is not None:
        return decode
    dequant = next((c for c in configs if c.path == "dequant"), None)
    if dequant is not None and _dequant_wins(M, layout):
        return dequant
    if layout == "sm90":
        if _sm80_takes_sm90_layout(configs, M):
            return _sm80_config(configs, M, N, K, sm_count, layout)
        config = sm90_config(configs, M, N, sm_count)
        if config is None:
            if dequant is not None:  # no compiled weight tile divides N: the dequant path takes any N
                return dequant
            raise RuntimeError(f"mixgemm: no compiled sm90 config tiles N = {N}")
        return sm90_split(config, M, N, K, sm_count)
    return _sm80_config(configs, M, N, K, sm_count)


# sm80 stream-K (cpp/include/mixgemm/gemm/kernel/stream_k_partition.h): a grid of resident blocks shares all
# the k-tiles of all the output tiles. tools/path_probe.py --paths sm80 --sm80-stream-k on an H100, the four
# shapes of DESIGN.md's Marlin table at M = 16..4096 (BENCHMARKS.md, "sm80 stream-K", two runs):
# * 64 x 128 tiles, 2 blocks per SM: 8192 x 28672 at M = 64 99.6-100.1 us against 109.0-115.1 for the
#   split rule's grid; 28672 x 8192 99.7-105.1 against 116.4; 4096 x 4096 at M = 128 20.3-21.3 against
#   23.8. 3 per SM was within 3% at M = 64 and up to 1.2x slower elsewhere; 1 per SM leaves the SMs short
#   of warps.
# * 128 x 256 tiles, 1 per SM (their residency), from M = 65 where every SM gets 16 k-tiles or more of them:
#   8192 x 28672 at M = 128 176.2 against 191.0 for 64 x 128 stream-K, at M = 256 342.1 against 373.3;
#   28672 x 8192 at M = 128 168.3 against 185.9. Above M = 256 they stay data-parallel: at M = 4096 stream-K
#   took 1.01x-1.11x the data-parallel time (8192 x 28672: 5804 against 5261 us; concurrent blocks then work
#   on tiles far apart and no longer share weight strips in L2), and at M = 1024 it was within the spread
#   between runs (0.84x-1.03x).
# * 16 x 256 tiles, 2 per SM: 8192 x 8192 at M = 16 21.1-21.5 against 23.6; the large shapes within 2%.
#   16 x 128 tiles (the sm80 layout's M <= 16 tile since, _SMALL_M_FIRST), 4 per SM: 8192 x 28672 54.9 us
#   against 59.5 at 2 per SM, 28672 x 8192 53.1 against 58.7, 8192 x 8192 19.6 against 20.7 (16 x 256 at 4
#   per SM lost: 58.3 against 57.9 at 2).
# * Each block needs enough k-tiles to fill its pipeline: with 7.8 per block (4096 x 4096, M = 64, 264
#   blocks) 64 x 128 took 16.6 us against 15.0 at 132 blocks; 16-row tiles lost nothing at 7.8.
# 32-row tiles (the full build's M = 17..32) were not probed and keep the split rule.
# (tile_m, tile_n): (blocks per SM, least k-tiles per block)
_STREAM_K = {(16, 64): (2, 8), (16, 128): (4, 8), (16, 256): (2, 8), (64, 128): (2, 16), (64, 256): (2, 16),
             (128, 128): (1, 16), (128, 256): (1, 16)}
_STREAM_K_MAX_M = 256
_STREAM_K_LARGE_TILE_MIN_UNITS_PER_SM = 16  # 128-row stream-K tiles take M = 65..256 from this many k-tiles


def _stream_k(config: GemmConfig, M: int, N: int, K: int, sm_count: int) -> GemmConfig | None:
    """``config`` as the stream-K grid the rule above gives it, or None where the rule does not apply."""
    if (config.tile_m, config.tile_n) not in _STREAM_K or M > _STREAM_K_MAX_M:
        return None
    per_sm, least = _STREAM_K[config.tile_m, config.tile_n]
    blocks = min(per_sm * sm_count, config.stream_k_units(M, N, K) // least)
    return config.with_split_k(blocks, "streamk") if blocks >= 2 else None  # one block: no grid to share


def _sm80_config(configs: list[GemmConfig], M: int, N: int, K: int, sm_count: int,
                 layout: str = "sm80") -> GemmConfig:
    """The sm80 path's choice for a weight in ``layout``: a tile by M bucket (a 128-row one from M = 65
    where it gives every SM 16 k-tiles), then stream-K where the rule above has the tile, else split-K
    until the grid keeps the GPU busy."""
    config = _pick_tile(configs, M, layout)
    if 64 < M <= 256:
        large = _pick_tile(configs, _LARGE_M)
        if large.tile_m == 128 and large.stream_k_units(M, N, K) >= _STREAM_K_LARGE_TILE_MIN_UNITS_PER_SM * sm_count:
            config = large
    stream_k = _stream_k(config, M, N, K, sm_count)
    if stream_k is not None:
        return stream_k
    tiles = math.ceil(M / config.tile_m) * math.ceil(N / config.tile_n)
    k_tiles = K // config.tile_k
    if config.tile_m in _BLOCKS_PER_SM:
        want = math.ceil(_BLOCKS_PER_SM[config.tile_m] * sm_count / tiles)
    else:
        # One wave: split only when the tiles leave a quarter of the SMs idle.
        want = math.ceil(sm_count / tiles) if tiles < 0.75 * sm_count else 1
    min_k_tiles = _MIN_K_TILES_PER_SPLIT.get(config.tile_m, _MIN_K_TILES_PER_SPLIT_LARGE)
    split_k = max(1, min(want, k_tiles // min_k_tiles, _MAX_SPLIT_K))
    return config.with_split_k(split_k, "none" if split_k == 1 else _SPLIT_MODE)


# Dequant path (expand the weight to a dense temporary, then one cuBLAS GEMM): from this many rows of x,
# per weight layout. The expansion streams 2.5 bytes per int4 weight (0.5 read, 2 written; measured at
# ~2.4 TB/s, e.g. 245 us for 8192 x 28672), so against cuBLAS's ~750 TFLOP/s it adds about
# 2.5 * 750e12 / (2 * M * 2.4e12) ~ 390 / M of the GEMM's time: 19% at M = 2048, 10% at 4096, 5% at 8192.
# It wins where cuBLAS outruns the layout's own GEMM by more than that. Measured on an H100 (BENCHMARKS.md,
# interleaved rounds, the six DESIGN shapes):
# * sm90 layout: the sm90 GEMM is within 0.95x-1.09x of cuBLAS up to M = 4096, so the dequant path took
#   1.05x-1.25x its time there; at M = 8192 it took 0.93x-1.01x (faster on four shapes, within 1% on two).
# * sm80 layout: the mma.sync GEMM runs at about half of cuBLAS's wgmma speed from M = 256 up; the dequant
#   path took 0.58x-0.97x its time at M = 512 and 0.61x-0.72x at 1024 (1.04x-1.42x at 256). On an A100,
#   where cuBLAS also runs mma.sync, the same arithmetic (cuBLAS ~270 TFLOP/s, our GEMM ~80% of it, 1.5 TB/s)
#   puts the break-even near M = 1024, which is why the rule starts there and not at 512 (not measured on
#   an A100: `python -m mixgemm tune` finds each GPU's own crossover).
_DEQUANT_MIN_M = {"sm90": 8192, "sm80": 1024}


# ---------------------------------------------------------------------------------------------------
# The tuned-config cache: winners of `python -m mixgemm tune`, one per (GPU, M bucket, N, K, G, dtype).
#
# File layout (JSON): {"version": 1, "entries": {key: {"config": {GemmConfig fields}, "time_us": float,
# "M": the M it was tuned at, "saved": ISO time}}}. Keys are strings so the file stays diffable and
# hand-editable; cache_key() is the only place that builds them.

_CACHE_VERSION = 1
_BUCKET_CAP = 4096
_OVERFLOW_BUCKET = f">{_BUCKET_CAP}"

# Parsed cache files: path -> ((inode, mtime_ns, size), entries). gemm() consults the cache on every
# "auto" call, so a lookup must cost one os.stat, not a JSON parse. The stat catches another process's
# save: os.replace gives the file a new inode even when the mtime granularity hides the change.
_memo: dict[str, tuple[tuple[int, int, int], dict]] = {}
# Called after every save_choice: gemm's plans (ops.clear_plans) hold configs resolved from the file as it
# was, so a tune run must drop them for the next call to see its choices.
on_save: list = []


def cache_path() -> pathlib.Path:
    """``$MIXGEMM_CACHE`` if set, else ``$XDG_CACHE_HOME/mixgemm/tuned.json`` (``~/.cache`` by default)."""
    override = os.environ.get("MIXGEMM_CACHE")
    if override:
        return pathlib.Path(override).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return pathlib.Path(base) / "mixgemm" / "tuned.json"


def m_bucket(M: int) -> str:
    """The smallest power of two >= M, up to 4096; every larger M shares the bucket ``">4096"``.

    Kernel choice changes with the tile-row count, which is what powers of two track; beyond 4096 rows
    every shape is compute bound and one choice serves all.
    """
    if isinstance(M, bool) or not isinstance(M, int) or M < 1:
        raise ValueError(f"tuning: M must be a positive int, got {M!r}")
    if M > _BUCKET_CAP:
        return _OVERFLOW_BUCKET
    return str(1 << (M - 1).bit_length())


def _dtype_name(dtype) -> str:
    names = {torch.float16: "fp16", torch.bfloat16: "bf16", "fp16": "fp16", "bf16": "bf16",
             "float16": "fp16", "bfloat16": "bf16"}
    if dtype not in names:
        raise ValueError(f"tuning: dtype must be float16/bfloat16 (or 'fp16'/'bf16'), got {dtype!r}")
    return names[dtype]


def cache_key(gpu_name: str, M: int, N: int, K: int, G: int, dtype, layout: str = "sm80") -> str:
    """The cache key of one tuned problem, e.g. ``"NVIDIA H100 80GB HBM3|M16|N4096|K4096|G128|fp16"``; a
    weight layout other than sm80 is appended (``"...|fp16|sm90"``), so keys written before layouts existed
    still name the sm80 ones."""
    if layout not in LAYOUTS:
        raise ValueError(f"tuning: layout must be 'sm80' or 'sm90', got {layout!r}")
    key = f"{gpu_name}|M{m_bucket(M)}|N{int(N)}|K{int(K)}|G{int(G)}|{_dtype_name(dtype)}"
    return key if layout == "sm80" else f"{key}|{layout}"


def load_cache(path=None) -> dict:
    """The entries of the cache file at ``path`` (default :func:`cache_path`); ``{}`` if absent.

    A file that is not valid JSON in our layout (a crash mid-write by an older tool, a hand edit) is
    treated as empty with a warning: a broken cache must never break ``gemm``; the next save rewrites it.
    """
    path = pathlib.Path(path) if path is not None else cache_path()
    try:
        text = path.read_text()
    except FileNotFoundError:
        return {}
    except OSError as exc:
        warnings.warn(f"mixgemm: cannot read tuning cache {path} ({exc}); ignoring it", stacklevel=2)
        return {}
    try:
        data = json.loads(text)
        entries = data["entries"]
        if not isinstance(entries, dict):
            raise TypeError("'entries' is not an object")
    except (ValueError, KeyError, TypeError) as exc:
        warnings.warn(f"mixgemm: tuning cache {path} is corrupt ({exc}); treating it as empty", stacklevel=2)
        return {}
    return entries


def _config_to_json(config: GemmConfig) -> dict:
    return dataclasses.asdict(config)


def _config_from_json(fields) -> GemmConfig | None:
    try:
        return GemmConfig(**fields)
    except (TypeError, ValueError):
        return None


def save_choice(gpu_name: str, M: int, N: int, K: int, G: int, dtype, config: GemmConfig,
                time_us: float | None = None, path=None, layout: str = "sm80") -> pathlib.Path:
    """Records ``config`` as the winner for its key, merged into the file's current contents.

    The file is re-read just before writing (another tuner may have saved meanwhile) and replaced
    atomically: the new JSON goes to a temporary file in the same directory, then ``os.replace`` swaps
    it in, so a reader sees the old file or the new one, never a half-written one.
    """
    if not isinstance(config, GemmConfig):
        raise ValueError(f"tuning: config must be a GemmConfig, got {type(config).__name__}")
    path = pathlib.Path(path) if path is not None else cache_path()
    key = cache_key(gpu_name, M, N, K, G, dtype, layout)
    entries = load_cache(path)
    entries[key] = {
        "config": _config_to_json(config),
        "time_us": None if time_us is None else float(time_us),
        "M": int(M),
        "saved": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps({"version": _CACHE_VERSION, "entries": entries}, indent=1, sort_keys=True)
    fd, tmp = tempfile.mkstemp(prefix=path.name + ".", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text + "\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        # Leave no stray temporary file behind; the old cache (if any) is untouched.
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    for hook in on_save:
        hook()
    return path


def _entries_memoized(path: pathlib.Path) -> dict:
    try:
        st = os.stat(path)
    except OSError:
        return {}
    stamp = (st.st_ino, st.st_mtime_ns, st.st_size)
    memo = _memo.get(str(path))
    if memo is not None and memo[0] == stamp:
        return memo[1]
    entries = load_cache(path)
    _memo[str(path)] = (stamp, entries)
    return entries


def lookup(gpu_name: str, M: int, N: int, K: int, G: int, dtype, path=None, layout: str = "sm80") -> GemmConfig | None:
    """The tuned config for this problem's bucket and weight layout, or None (no file, no entry, or an
    unreadable one)."""
    path = pathlib.Path(path) if path is not None else cache_path()
    entry = _entries_memoized(path).get(cache_key(gpu_name, M, N, K, G, dtype, layout))
    if not isinstance(entry, dict):
        return None
    fields = entry.get("config")
    return _config_from_json(fields) if isinstance(fields, dict) else None
