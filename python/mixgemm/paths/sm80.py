"""The sm80 path: the CUTLASS 2.x-style mma.sync GEMM (cpp/mixgemm/sm80), any M, on either weight layout (the
sm90 layout with the tiles of small M only, which the build lists for it).

Config: a threadblock tile (tile_m x tile_n x 64), a warp tile, pipeline stages, and a split of K: data-parallel
(``split_k`` 1), split-K (``"serial"``: the tile's last split sums the partials in split order, one launch;
``"parallel"``: a second kernel sums them) or stream-K (``"streamk"``: ``split_k`` resident blocks share every
tile's k-tiles; a cut tile is summed in block order). Every mode is deterministic.
"""

from __future__ import annotations

import dataclasses
import math
import re

from ..kernel_key import KernelKey
from .base import (FAST_DRAM_BANDWIDTH, SPLIT_SUFFIX, GemmConfig, GemmProblem, Gpu, KernelPath, check_positive_ints,
                   check_split, split_of)

TILE_K = 64  # the main loop's k-tile


@dataclasses.dataclass(frozen=True)
class Sm80Config(GemmConfig):
    """An sm80-path kernel: threadblock tile, warp tile (each warp takes all of the tile's rows), stages, split."""

    tile_m: int
    tile_n: int
    tile_k: int
    warp_m: int
    warp_n: int
    warp_k: int
    stages: int
    split_k: int = 1
    split_k_mode: str = "none"

    path = "sm80"

    def __post_init__(self) -> None:
        check_positive_ints(self, ("tile_m", "tile_n", "tile_k", "warp_m", "warp_n", "warp_k", "stages"))
        check_split("Sm80Config", self.split_k, self.split_k_mode, ("none", "serial", "parallel", "streamk"))

    @property
    def kernel_name(self) -> str:
        return (f"{self.tile_m}x{self.tile_n}x{self.tile_k}_w{self.warp_m}x{self.warp_n}x{self.warp_k}"
                f"_s{self.stages}")

    def output_tiles(self, M: int, N: int) -> int:
        """The threadblock tiles covering an M x N output."""
        return -(-M // self.tile_m) * -(-N // self.tile_n)

    def stream_k_units(self, M: int, N: int, K: int) -> int:
        """The units of work a stream-K grid of this tile shares for an M x N x K problem: one k-tile of one output
        tile each, at most one block per unit (cpp/mixgemm/sm80/kernel/stream_k_partition.h)."""
        return self.output_tiles(M, N) * (K // self.tile_k)


_NAME = re.compile(r"(\d+)x(\d+)x(\d+)_w(\d+)x(\d+)x(\d+)_s(\d+)" + SPLIT_SUFFIX)

# ---------------------------------------------------------------------------------------------------------
# The heuristic: a tile by M bucket, then how K is split. Each constant below says why it is what it is and which
# measurement fixed it; the full evidence is in the perf note it names (docs/perf-notes/, index in its README). The
# first rules were chosen by tools/path_probe.py on an H100 over the DESIGN shapes
# (2026-11-23-sm80-tile-loader-warp-tiles.md, 2026-11-24-sm80-stream-k.md, 2026-11-24-sm80-mainloop-instructions.md).

# Preferred threadblock tile (tile_m, tile_n) per M bucket, best first. Small M is bandwidth bound: 16-row tiles waste
# the fewest mma rows. At M = 64..256 64 x 128 (four 64 x 32 warps) was within 7% of the best tile in every cell; from
# M = 1024 128 x 256 (eight 128 x 32 warps) the best or within 2.5% of it.
_PREFERENCE = (
    (16, ((16, 256), (16, 128), (16, 64), (32, 128), (64, 128))),
    (32, ((32, 128), (64, 128), (16, 256))),
    (256, ((64, 128), (64, 256), (32, 128), (128, 128))),
    (math.inf, ((128, 256), (128, 128), (64, 128))),
)
# M <= 16 starts at 16 x 128 on both layouts (4 stages; on the sm80 layout it beat 16 x 256 by 4-7% on all four shapes
# probed). The sm90 layout's widest weights, whose 128-column tiles outnumber the SMs (8192x28672: 224 on 132), take
# 16 x 256 instead: any split of 16 x 128 puts 3.4 or more blocks on an SM, and the H100 and the H200 disagreed on which
# split won (by up to 8%), where 16 x 256 over 2 stream-K blocks per SM took 1.055x / 1.018x the best config
# (H100 / H200; 2026-11-26-m16-m32-split-k-sm90-layout.md). A short K (_SHORT_K_TILES below) keeps 16 x 128: unsplit on
# 1024x28672 it took 0.86x-0.87x the time of 16 x 256 unsplit (H100, H200; 2026-11-28-16-row-short-k-one-wave.md).
_SMALL_M_FIRST = {"sm80": (16, 128), "sm90": (16, 128)}


# Those 16 x 256 tiles split 2 ways on a GPU of under 4 TB/s, else stream-K over 2 blocks per SM: a faster DRAM needs
# more bytes in flight to cover its latency (Little's law), which stream-K's 264 blocks keep and two splits' 224 do not.
# On 8192x28672 at M = 16 two splits took 0.95x-0.97x stream-K's time on the H100 (3.35 TB/s) and 1.05x on the H200
# (4.8 TB/s); the bound lies between (2026-11-26-m17-64-sm90-after-dependent-launch.md). A GPU whose bandwidth the
# driver does not report keeps stream-K. The bound is base.FAST_DRAM_BANDWIDTH.


def _widest(layout: str, N: int, sm_count: int) -> bool:
    """Whether a weight's 128-column tiles outnumber the SMs on the sm90 layout (see above)."""
    return layout == "sm90" and math.ceil(N / _SMALL_M_FIRST["sm90"][1]) > sm_count


def _small_m_first(layout: str, N: int, K: int, sm_count: int) -> tuple[int, int]:
    """The first 16-row tile for M <= 16 on ``layout`` (see above): 16 x 256 on the widest weights, unless K is
    short (_SHORT_K_TILES below), where 16 x 128 takes the short-K rule."""
    return (16, 256) if _widest(layout, N, sm_count) and not _short_k(K) else _SMALL_M_FIRST[layout]
# 16 x 128, and 32 x 128 on the sm90 layout, take the 4 stages their rules were measured with (32 x 128 over one
# stream-K block per SM: 0.97x the time of 3 stages, 4096x4096 M = 32, H200). Other tiles take the shallowest count of 3
# or more: within noise of each other, and the least shared memory a block.
_PREFERRED_STAGES = {(16, 128): 4}
_PREFERRED_STAGES_SM90_LAYOUT = {**_PREFERRED_STAGES, (32, 128): 4}
# On the sm90 layout dispatch.py brings M = 17..32 on weights up to 64 Mi elements, and M = 33..64 where the sm90 GEMM's
# tiles are too few or too short, to this path. At M = 33..64 32 x 128 in two row tiles was the best tile swept
# (8192x1280, 1024x8192; H100 and H200), ahead of 64 x 128.
_SM90_LAYOUT_MID_M_FIRST = (32, 128)
_SM90_LAYOUT_MID_M = 64
_LARGE_M = 4096  # an M of the last bucket: _pick_tile(configs, _LARGE_M, ...) is the large-M tile

# Split-K where no other rule applies: up to M = 64 the weight stream dominates (2 M flops per 0.5-byte weight is under
# the H100's mma.sync-to-DRAM balance of ~170 flop/byte), so K is split until there are about this many blocks per SM
# (the best split of 16-row tiles at M = 16 gave 1.9-2.9), each split keeping enough k-tiles to fill its pipeline.
_BLOCKS_PER_SM = {16: 3, 32: 6, 64: 4}
_MIN_K_TILES_PER_SPLIT = {16: 4, 32: 4}
_MIN_K_TILES_PER_SPLIT_LARGE = 8
_MAX_SPLIT_K = 16
# There the second kernel sums the splits: it beat the in-kernel sum at every decode shape swept, against the in-kernel
# sum of before 2026-11-27 (one fragment's splits at a time). The sm80 layout has not been re-measured against the
# batched sum the sm90 layout's rule below takes.
_SPLIT_MODE = "parallel"
# In the sm90 layout's split-K rule below, 16-row grids of 32 tiles or more split at most 8 ways sum in the kernel
# (serial): the tile's last split loads up to 16 float4 a thread of slots before adding any (tile_output.cuh: 4 slots of
# a 16 x 128 tile, 2 of a 32 x 128 one), so 8 splits of 16 rows take two L2 round trips and the second launch goes; at
# the same tile and split serial took 0.91x-1.00x the pair's time back to back (H100). Everything else takes the pair
# (the GEMM, then the reduction kernel; both start as programmatic dependents): the 32-row tiles, where the pair took
# 0.97x-0.98x the serial split's time, and 16 splits, where the serial sum lost everywhere measured with both launched
# ordinarily (1.00x-1.18x, 32-row tiles) (2026-11-28-m32-pair-as-dependent.md,
# 2026-11-27-serial-split-k-sum-of-slots.md). With both launched as dependents, 16 serial splits of 16-row tiles were
# 1.1%-1.9% ahead of the pair of 16 on three grids of 16 tiles (N = 2048, K of 11008 and more, H200); the floor of 32
# tiles keeps those on the pair (2026-11-28-split-k-reduction-batch-of-8.md).
_SERIAL_TILE_M = 16
_SERIAL_MIN_TILES = 32
_SERIAL_MAX_SPLIT_K = 8

# Stream-K: (tile_m, tile_n) -> (blocks per SM, least k-tiles per block). Up to M = 256 resident blocks sharing every
# tile's k-tiles spread the tail that whole tiles leave (64 x 128 at M = 64: 0.87x-0.91x the split-K grid's time);
# above, concurrent blocks work on tiles far apart and lose L2 reuse (up to 1.11x slower at M = 4096). Each block needs
# enough k-tiles to fill its pipeline.
_STREAM_K = {(16, 64): (2, 8), (16, 128): (4, 8), (16, 256): (2, 8), (64, 128): (2, 16), (64, 256): (2, 16),
             (128, 128): (1, 16), (128, 256): (1, 16)}
# On the sm90 layout 16 x 128 blocks read their B fragments by ldmatrix from a layout made for wgmma, and 2 blocks per
# SM beat 4 by 1-11% (8192x2560 M = 16: 10.6 against 11.4 us; 2026-11-26-small-m-sm90-layout-tiles.md). 32 x 128
# (M = 17..64) takes one block per SM where the split-K rule below does not apply: within 1% of the best config swept on
# 4096x4096 and 2048x8192, 1.07x on 1024x8192 (2026-11-26-small-weights-m32.md), which at M = 17..32 takes unsplit
# 16-row tiles instead (below).
_STREAM_K_SM90_LAYOUT = {**_STREAM_K, (16, 128): (2, 8), (32, 128): (1, 8)}
_STREAM_K_MAX_M = 256

# The sm90 layout's split-K rule, for 16 x 128 (M <= 16, weights from 32 Mi elements; below, the serial split) and
# 32 x 128 (M <= 64): the largest split of SWEEP_SPLIT_KS that leaves every split at least 12 k-tiles (a 4-stage
# pipeline stays full; 8 on narrow weights and below 32 Mi elements, below) and the grid at most 4 blocks per SM (more
# lost on the H100: 8192x14336 M = 16, 8 splits, 1.08x), where that is 4 splits or more. Over 14 cells at M = 16 and 14
# at M = 32 on both GPUs it was within 6.4% of the best config (mean 1.01x / 1.02x), where stream-K (M = 16) and the
# sm90 GEMM (M = 32) had taken up to 1.09x / 1.23x (2026-11-26-m16-m32-split-k-sm90-layout.md). Under 4 splits (K under
# 3072, or more column tiles than SMs) the grid is too small or too crowded and stream-K spreads the k-tiles better, but
# for the rules below (a short K, the short stream-K rows, the one-wave pair). 32 x 128 keeps the rule to M = 64 (two
# row tiles): on 8192x1280 at M = 64 its 16 splits took 0.98x the time of the sm90 GEMM launched as a dependent
# (2026-11-26-m17-64-sm90-after-dependent-launch.md).
_SPLIT_K_SM90_LAYOUT_MAX_M = {(16, 128): 16, (32, 128): _SM90_LAYOUT_MID_M}  # tile -> the rows the rule takes
_SPLIT_K_SM90_LAYOUT_16_ROWS_FROM = 32 << 20  # weight elements: below, the serial split, or the pair on few tiles
_SPLIT_K_MIN_K_TILES = 12
# Below 32 Mi elements the 16-row tiles split where the serial sum applies (32 tiles or more, at most 8 splits), at
# least 8 k-tiles a split: the fastest config or within 0.5% at M = 16 on the H100 on 2048x8192, 3072x8192, 3584x8192,
# 4096x4096 and 4096x5120 and on the H200 on 4096x4096, where 16 x 128 stream-K took 1.063x-1.102x
# (2026-11-28-16-row-serial-split-small-weights.md). The 32 Mi bound and the 12 k-tiles above were measured with the
# second kernel's sum; from 32 Mi elements the splits keep 12 k-tiles, as measured there. Grids of under 32 tiles take
# the pair by the rule above: as dependents, the fastest config or within 1.2% on seven of the ten short grids swept at
# M = 16 (H200), where the fastest stream-K grid took 1.08x-1.16x; the misses are listed in
# tests/dispatch/test_heuristic_against_sweeps.py (2026-11-28-narrow-grids-dependent-pair.md,
# 2026-11-28-split-k-reduction-batch-of-8.md).
_SERIAL_MIN_K_TILES = 8
_SPLIT_K_MAX_BLOCKS_PER_SM = 4
_SPLIT_K_MIN_SPLITS = 4
# A K too short for 4 serial splits of 8 k-tiles (under 32 k-tiles: K < 2048): 16 x 128 grids of 32 tiles or more split
# serially into the most splits that keep the grid within one wave, each split 3 k-tiles or more, and run unsplit where
# 2 splits would pass one wave or K has under 12 k-tiles. Stream-K's blocks there get 8 k-tiles or fewer and a fixup
# each, which so short a k-loop does not repay, and a second wave of splits only adds partial sums. The pick was the
# fastest config on the fifteen cells it was read off (ten H200 weights with K = 1024-1792, five of them on the H100
# too), where stream-K took 1.035x-1.30x, and within 1.9% out of sample. 512x8192 (8 k-tiles) ran faster unsplit than
# split (4.23 against 5.03 us on the H100; stream-K over 132 blocks 5.23) and 768x4096 (12) fastest split 4 ways: the
# floor of 12 lies between (2026-11-28-16-row-short-k-one-wave.md). At 132 SMs the 12 k-tiles and the 32 tiles already
# give every split 3 k-tiles; the bound holds the rule on more SMs. Grids of under 32 tiles keep stream-K (the serial
# sum's bound; untimed here).
_SHORT_K_TILES = _SPLIT_K_MIN_SPLITS * _SERIAL_MIN_K_TILES
_SHORT_K_SPLIT_FROM_K_TILES = 12
_SHORT_K_MIN_K_TILES_PER_SPLIT = 3
# Of the splits that rule allows, the 16-row tiles take the largest within 4 blocks per SM scaled by the GPU's DRAM
# bandwidth over the H200's 4.8 TB/s (a faster GPU stays within the rule's own 4; at least 4 splits): every block
# streams its weight at the same rate, so the blocks a GPU needs in flight to cover DRAM latency grow with its bandwidth
# (Little's law). On the 64-column-tile weights at M = 16, 8 splits (3.9 blocks per SM) took 0.96x-0.99x the time of 4
# on the H200 and 1.01x-1.03x on the H100 (3.35 TB/s: a scaled bound of 2.8)
# (2026-11-27-serial-split-k-sum-of-slots.md). A GPU whose bandwidth is unknown keeps 4 blocks per SM.
_SPLIT_K_16_ROWS_FULL_GRID_BANDWIDTH = 4.8e12  # bytes per second
# One row of 32-row tiles (M = 17..32) takes at most 3 blocks per SM, on both GPUs: 8 splits were the fastest 32 x 128
# split at 2.4 blocks per SM or fewer and at 2.9 (8192x6144, H200, M = 24 / 32), and lost to 4 splits at 3.4 (H200) and
# 3.9 (8 took 1.03x-1.12x the time of 4), serial split and pair alike (2026-11-28-m32-serial-split-as-dependent.md,
# 2026-11-28-m32-pair-as-dependent.md, 2026-11-28-split-k-reduction-batched-loads.md). Splits of under 12 k-tiles hold a
# lower bound (the narrow weights' below). Two rows of 32-row tiles (M = 33..64) were not timed against it and keep 4.
_SPLIT_K_32_ROWS_ONE_ROW_MAX_BLOCKS_PER_SM = 3
# Narrow weights, whose one row of tiles split 16 ways stays within 2.5 blocks per SM (20 column tiles or fewer on 132
# SMs), split 8 k-tiles deep: each split adds few blocks. 8192x1280 took 0.92x-0.98x the time at 16 splits of 8 k-tiles
# as at 8 of 16 at M = 16..64 (both GPUs; 2026-11-26-m16-m32-split-k-sm90-layout.md,
# 2026-11-26-m17-64-sm90-after-dependent-launch.md), and 8192x2560 and 10240x2560 (2.4 blocks per SM) took 16 splits
# fastest at M = 12..32 (H200). On 8192x3072 (2.9 blocks per SM) 16 splits of 8 k-tiles took 1.12x the time of 8 of 16
# at M = 32, where 8192x6144 took 8 splits of 16 k-tiles fastest at the same 2.9: a short split's fixed cost weighs on
# fewer k-tiles. The bound lies between 2.4 and 2.9. The rule reads it as a property of the weight's columns, for both
# tile heights and for two rows of tiles; two rows were partly swept, with two listed misses
# (2026-11-28-narrow-grids-dependent-pair.md, 2026-11-28-split-k-reduction-batched-loads.md).
_SPLIT_K_NARROW_MAX_BLOCKS_PER_SM = 2.5
_SPLIT_K_NARROW_MIN_K_TILES = 8
# Where the split-K rule finds too few splits for 32 x 128 at M = 17..32 and their stream-K grid would give each block
# under 12 k-tiles (the split's minimum, for the same pipeline reason), two rows of unsplit 16 x 128 tiles take the
# problem where they fit one wave: on 1024x8192 (stream-K blocks of 8 k-tiles) they took 0.91x / 0.90x the 32 x 128
# stream-K grid's time back to back / after an elementwise kernel (H100), where 2048x8192 (15.5 k-tiles a block) kept
# 32 x 128 ahead by 10%. The bound of 12 lies between the two (2026-11-26-replay-fixed-cost.md).
_SHORT_STREAM_K_ROWS_MAX_M = 32
# Where those blocks get 12 k-tiles or more but fewer than 4 splits of 12 qualify, one row of 32 x 128 tiles splits 2
# ways (the pair) where the splits fill between 3/4 of the SMs and one wave: 2048x8192 at M = 32 (64 tiles of
# 32 k-tiles: 128 blocks of 16) took 2 splits fastest on the H200, stream-K over 132 blocks 1.06x
# (2026-11-28-narrow-grids-dependent-pair.md).
_ONE_WAVE_PAIR_SPLIT = 2
# A grid fills one wave where it leaves under a quarter of the SMs idle.
_ONE_WAVE_MIN_FILL = 0.75
# 128-row stream-K tiles take M = 65..256 where every SM gets this many k-tiles of them.
_STREAM_K_LARGE_TILE_MIN_UNITS_PER_SM = 16

# The sweep's split-K counts and stream-K grids (blocks per SM).
SWEEP_SPLIT_KS = (2, 4, 8, 16)
SWEEP_STREAM_K_BLOCKS_PER_SM = (1, 2, 3, 4)


def _with_preferred_stages(matches: list[Sm80Config], layout: str) -> Sm80Config:
    """Of one tile's compiled configs, the one at the stage count measured for it on ``layout`` (above), else the
    shallowest of 3 or more."""
    stages = _PREFERRED_STAGES_SM90_LAYOUT if layout == "sm90" else _PREFERRED_STAGES
    preferred = [c for c in matches if c.stages == stages.get((c.tile_m, c.tile_n))]
    return (preferred or sorted(matches, key=lambda c: (c.stages < 3, c.stages)))[0]


def _pick_tile(configs: list[Sm80Config], M: int, layout: str, N: int, K: int, sm_count: int) -> Sm80Config:
    for bound, tiles in _PREFERENCE:
        if M <= bound:
            first = None
            if bound == _PREFERENCE[0][0]:  # the weight layout's own first choice, then the rest in order
                first = _small_m_first(layout, N, K, sm_count)
            elif layout == "sm90" and M <= _SM90_LAYOUT_MID_M:
                first = _SM90_LAYOUT_MID_M_FIRST
            if first is not None:
                tiles = (first,) + tuple(t for t in tiles if t != first)
            for tile_m, tile_n in tiles:
                matches = [c for c in configs if (c.tile_m, c.tile_n) == (tile_m, tile_n)]
                if matches:
                    return _with_preferred_stages(matches, layout)
            break
    # Nothing preferred was compiled: the nearest tile height.
    return min(configs, key=lambda c: (abs(c.tile_m - min(M, 128)), -c.tile_n))


def _stream_k(config: Sm80Config, M: int, N: int, K: int, sm_count: int, layout: str = "sm80") -> Sm80Config | None:
    """``config`` as the stream-K grid the rule above gives it, or None where the rule does not apply."""
    rule = _STREAM_K_SM90_LAYOUT if layout == "sm90" else _STREAM_K
    if (config.tile_m, config.tile_n) not in rule or M > _STREAM_K_MAX_M:
        return None
    per_sm, least = rule[config.tile_m, config.tile_n]
    blocks = min(per_sm * sm_count, config.stream_k_units(M, N, K) // least)
    return config.with_split_k(blocks, "streamk") if blocks >= 2 else None  # one block: no grid to share


def _summed_in_kernel(config: Sm80Config, tiles: int, split_k: int) -> bool:
    """Whether the tile's last split sums ``split_k`` splits of ``tiles`` output tiles in the kernel (serial; the
    _SERIAL_* rule above) rather than a second kernel (parallel)."""
    return config.tile_m == _SERIAL_TILE_M and tiles >= _SERIAL_MIN_TILES and split_k <= _SERIAL_MAX_SPLIT_K


def _short_k(K: int) -> bool:
    """Whether K is too short for 4 serial splits of 8 k-tiles (_SHORT_K_TILES above)."""
    return K // TILE_K < _SHORT_K_TILES


def _short_k_split(config: Sm80Config, tiles: int, K: int, sm_count: int) -> Sm80Config | None:
    """``config`` (16 x 128 on a short K) split serially within one wave, unsplit where its ``tiles`` fill the wave
    alone or K has under 12 k-tiles, or None (stream-K) where the grid is too small for the serial sum
    (_SHORT_K_TILES above)."""
    if not _summed_in_kernel(config, tiles, 1):
        return None
    k_tiles = K // config.tile_k
    splits = [k for k in SWEEP_SPLIT_KS if k <= _SERIAL_MAX_SPLIT_K and tiles * k <= sm_count
              and k_tiles >= max(k * _SHORT_K_MIN_K_TILES_PER_SPLIT, _SHORT_K_SPLIT_FROM_K_TILES)]
    split_k = max(splits, default=1)
    return config.with_split_k(split_k, "serial" if split_k > 1 else "none")


def _sm90_layout_split_k(config: Sm80Config, M: int, N: int, K: int, sm_count: int,
                         memory_bandwidth: float) -> Sm80Config | None:
    """``config`` split-K as the sm90 layout's rules above give it (the 16- and 32-row tiles; the widest weights'
    16 x 256 tiles by the GPU's bandwidth; 16 x 128 on a short K, unsplit where its tiles fill the wave), or None where
    no rule applies."""
    if ((config.tile_m, config.tile_n) == (16, 256) and M <= 16 and _widest("sm90", N, sm_count)
            and 0 < memory_bandwidth < FAST_DRAM_BANDWIDTH
            and K // config.tile_k >= 2 * _SPLIT_K_MIN_K_TILES):
        return config.with_split_k(2, "parallel")
    if M > _SPLIT_K_SM90_LAYOUT_MAX_M.get((config.tile_m, config.tile_n), 0):
        return None
    tiles = config.output_tiles(M, N)
    if (config.tile_m, config.tile_n) == _SMALL_M_FIRST["sm90"] and _short_k(K):
        return _short_k_split(config, tiles, K, sm_count)
    # Below 32 Mi elements a grid of 32 tiles or more splits serially alone; a smaller one takes the pair (see above).
    serial_only = (config.tile_m == 16 and K * N < _SPLIT_K_SM90_LAYOUT_16_ROWS_FROM
                   and tiles >= _SERIAL_MIN_TILES)
    if serial_only and not _summed_in_kernel(config, tiles, _SPLIT_K_MIN_SPLITS):
        return None
    narrow = config.output_tiles(1, N) * max(SWEEP_SPLIT_KS) <= _SPLIT_K_NARROW_MAX_BLOCKS_PER_SM * sm_count
    min_k_tiles = _SPLIT_K_NARROW_MIN_K_TILES if narrow else _SPLIT_K_MIN_K_TILES

    def least_k_tiles(split_k: int) -> int:  # a split's fewest k-tiles
        return _SERIAL_MIN_K_TILES if serial_only and _summed_in_kernel(config, tiles, split_k) else min_k_tiles

    splits = [k for k in SWEEP_SPLIT_KS if K // config.tile_k >= least_k_tiles(k) * k
              and tiles * k <= _SPLIT_K_MAX_BLOCKS_PER_SM * sm_count]
    if not splits or max(splits) < _SPLIT_K_MIN_SPLITS:
        return None
    # Every split above keeps to 4 blocks per SM; the 16-row tiles scale it, one row of 32-row tiles lowers it to 3.
    per_sm = _SPLIT_K_MAX_BLOCKS_PER_SM
    if config.tile_m == 16:
        if memory_bandwidth > 0:
            per_sm *= memory_bandwidth / _SPLIT_K_16_ROWS_FULL_GRID_BANDWIDTH
    elif M <= config.tile_m:  # one row of 32-row tiles (see above)
        per_sm = _SPLIT_K_32_ROWS_ONE_ROW_MAX_BLOCKS_PER_SM
    split_k = max(k for k in splits if k == _SPLIT_K_MIN_SPLITS or tiles * k <= per_sm * sm_count)
    return config.with_split_k(split_k, "serial" if _summed_in_kernel(config, tiles, split_k) else "parallel")


def _sm90_layout_short_stream_k_rows(configs: list[Sm80Config], stream_k: Sm80Config, M: int, N: int, K: int,
                                     sm_count: int) -> Sm80Config | None:
    """Unsplit 16 x 128 tiles in place of ``stream_k`` (the sm90 layout's 32 x 128 stream-K grid at M = 17..32)
    where that grid's blocks get under 12 k-tiles each and the 16-row tiles fill at most one wave (see above)."""
    if (stream_k.tile_m, stream_k.tile_n) != _SM90_LAYOUT_MID_M_FIRST:
        return None
    if stream_k.stream_k_units(M, N, K) >= _SPLIT_K_MIN_K_TILES * stream_k.split_k:
        return None
    rows = [c for c in configs if (c.tile_m, c.tile_n) == _SMALL_M_FIRST["sm90"]]
    if not rows or rows[0].output_tiles(M, N) > sm_count:
        return None
    return _with_preferred_stages(rows, "sm90")


def _sm90_layout_one_wave_pair(config: Sm80Config, M: int, N: int, K: int, sm_count: int) -> Sm80Config | None:
    """``config`` (one row of 32 x 128 tiles) split 2 ways as the pair where the 2 splits keep 12 k-tiles each and
    fill between 3/4 of the SMs and one wave (see above), else None."""
    if (config.tile_m, config.tile_n) != _SM90_LAYOUT_MID_M_FIRST or M > config.tile_m:
        return None
    blocks = config.output_tiles(M, N) * _ONE_WAVE_PAIR_SPLIT
    if K // config.tile_k < _ONE_WAVE_PAIR_SPLIT * _SPLIT_K_MIN_K_TILES:
        return None
    if not _ONE_WAVE_MIN_FILL * sm_count <= blocks <= sm_count:
        return None
    return config.with_split_k(_ONE_WAVE_PAIR_SPLIT, "parallel")


def heuristic(configs: list[Sm80Config], M: int, N: int, K: int, sm_count: int, layout: str = "sm80",
              memory_bandwidth: float = 0.0) -> Sm80Config:
    """A tile by M bucket (a 128-row one from M = 65 where it gives every SM 16 k-tiles); on the sm90 layout
    split-K for the 16- and 32-row tiles where the rule above finds enough splits (16 x 128 on a short K: split within
    one wave, or unsplit), and two splits of the widest weights' 16 x 256 tiles on a GPU of under 4 TB/s
    (``memory_bandwidth``, bytes per second; 0: unknown); else
    stream-K where the rule above has the tile (on the sm90 layout at M = 17..32, unsplit 16 x 128 tiles instead
    where its blocks would get under 12 k-tiles, or 2 splits of 32 x 128 where they fill one wave), else split-K until
    the grid keeps the GPU busy."""
    config = _pick_tile(configs, M, layout, N, K, sm_count)
    if 64 < M <= 256:
        large = _pick_tile(configs, _LARGE_M, layout, N, K, sm_count)
        if large.tile_m == 128 and large.stream_k_units(M, N, K) >= _STREAM_K_LARGE_TILE_MIN_UNITS_PER_SM * sm_count:
            config = large
    if layout == "sm90":
        split = _sm90_layout_split_k(config, M, N, K, sm_count, memory_bandwidth)
        if split is not None:
            return split
    stream_k = _stream_k(config, M, N, K, sm_count, layout)
    if layout == "sm90" and stream_k is not None and 16 < M <= _SHORT_STREAM_K_ROWS_MAX_M:
        rows = _sm90_layout_short_stream_k_rows(configs, stream_k, M, N, K, sm_count)
        if rows is not None:
            return rows
        pair = _sm90_layout_one_wave_pair(config, M, N, K, sm_count)
        if pair is not None:
            return pair
    if stream_k is not None:
        return stream_k
    tiles = config.output_tiles(M, N)
    k_tiles = K // config.tile_k
    if config.tile_m in _BLOCKS_PER_SM:
        want = math.ceil(_BLOCKS_PER_SM[config.tile_m] * sm_count / tiles)
    else:
        # One wave: split only when the tiles leave a quarter of the SMs idle.
        want = math.ceil(sm_count / tiles) if tiles < _ONE_WAVE_MIN_FILL * sm_count else 1
    min_k_tiles = _MIN_K_TILES_PER_SPLIT.get(config.tile_m, _MIN_K_TILES_PER_SPLIT_LARGE)
    split_k = max(1, min(want, k_tiles // min_k_tiles, _MAX_SPLIT_K))
    return config.with_split_k(split_k, "none" if split_k == 1 else _SPLIT_MODE)


class Sm80Path(KernelPath):
    name = "sm80"
    config_type = Sm80Config
    layouts = ("sm80", "sm90")

    def parse_name(self, name: str) -> Sm80Config | None:
        match = _NAME.fullmatch(name)
        if not match:
            return None
        split_k, mode = split_of(match, 8)
        return Sm80Config(*(int(v) for v in match.groups()[:7]), split_k=split_k, split_k_mode=mode)

    def fits(self, config: Sm80Config, problem: GemmProblem, key: KernelKey) -> str | None:
        reason = super().fits(config, problem, key)
        if reason is not None:
            return reason
        if config.split_k_mode == "streamk":
            units = config.stream_k_units(problem.M, problem.N, problem.K)
            if config.split_k > units:
                return f"stream-K over {config.split_k} blocks needs at least one unit of work each, got {units}"
        elif config.split_k > problem.K // config.tile_k:
            return f"split_k = {config.split_k} is more than K / {config.tile_k} = {problem.K // config.tile_k} k-tiles"
        return None

    def choose(self, configs, problem, key, gpu) -> Sm80Config | None:
        if not configs:
            return None
        return heuristic(configs, problem.M, problem.N, problem.K, gpu.sm_count, key.layout, gpu.memory_bandwidth)

    def split_variants(self, config: Sm80Config, problem: GemmProblem, gpu: Gpu) -> list[Sm80Config]:
        base = config.with_split_k(1, "none")
        variants = [base] + [base.with_split_k(k, mode) for k in SWEEP_SPLIT_KS if k <= problem.K // TILE_K
                             for mode in ("serial", "parallel")]
        units = base.stream_k_units(problem.M, problem.N, problem.K)
        variants += [base.with_split_k(per_sm * gpu.sm_count, "streamk") for per_sm in SWEEP_STREAM_K_BLOCKS_PER_SM
                     if per_sm * gpu.sm_count <= units]
        return variants


PATH = Sm80Path()
