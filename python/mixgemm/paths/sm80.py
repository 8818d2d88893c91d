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
from .base import (SPLIT_SUFFIX, GemmConfig, GemmProblem, Gpu, KernelPath, check_positive_ints, check_split,
                   split_of)

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
# The heuristic. Every rule below was chosen by tools/path_probe.py on an H100 over the DESIGN shapes; the
# studies are in docs/perf-notes/ (2026-11-23-sm80-tile-loader-warp-tiles.md, 2026-11-24-sm80-stream-k.md,
# 2026-11-24-sm80-mainloop-instructions.md).

# Preferred threadblock tile (tile_m, tile_n) per M bucket, best first. Small M is bandwidth bound: 16-row
# tiles waste the fewest mma rows. At M = 64..256 64 x 128 (four 64 x 32 warps) was within 7% of the best tile
# in every cell; from M = 1024 128 x 256 (eight 128 x 32 warps) was the best or within 2.5% of it.
_PREFERENCE = (
    (16, ((16, 256), (16, 128), (16, 64), (32, 128), (64, 128))),
    (32, ((32, 128), (64, 128), (16, 256))),
    (256, ((64, 128), (64, 256), (32, 128), (128, 128))),
    (math.inf, ((128, 256), (128, 128), (64, 128))),
)
# M <= 16: on the sm80 layout 16 x 128 tiles at 4 stages and 4 stream-K blocks per SM beat 16 x 256 on all four
# probed shapes (by 4-7%). On the sm90 layout 16 x 128 too, but for the widest weights: where its column tiles
# outnumber the SMs (8192x28672: 224 on 132), even two splits put 3.4 blocks on each SM and the H100 and the H200
# disagreed on the split (two: 1.00x / 1.08x the best config; four: 1.07x / 1.00x), while 16 x 256 over 2 stream-K
# blocks per SM took 1.05x / 1.01x; 16 x 256 keeps them (docs/perf-notes/2026-11-26-m16-m32-split-k-sm90-layout.md).
# Where K is short (_SHORT_K_TILES below) the widest weights take the short-K rule's 16 x 128 tiles: on 1024x28672
# 16 x 128 unsplit took 0.86x / 0.87x the time of 16 x 256 unsplit (H100 / H200), and 0.77x / 0.78x that of its
# stream-K.
_SMALL_M_FIRST = {"sm80": (16, 128), "sm90": (16, 128)}


# Those 16 x 256 tiles' split follows the DRAM's speed: on the H100 (3.35 TB/s) two splits took 0.95x-0.97x the
# time of stream-K over 2 blocks per SM (8192x28672, M = 16: 52.14 against 54.74 us in that study, 54.75 / 53.29
# against 56.34 / 56.41 in the two H100 sweeps of docs/perf-notes/2026-11-26-m17-64-sm90-after-dependent-launch.md),
# on the H200 (4.8 TB/s) 1.05x (49.95 against 47.58): a faster DRAM needs more bytes in flight to cover its
# latency (Little's law), which stream-K's 264 blocks keep and two splits' 224 do not. The bound sits between the
# two GPUs measured; a GPU whose bandwidth the driver does not report keeps stream-K.
_WIDEST_TWO_SPLITS_BELOW_BANDWIDTH = 4.0e12  # bytes per second


def _widest(layout: str, N: int, sm_count: int) -> bool:
    """Whether a weight's 128-column tiles outnumber the SMs on the sm90 layout (see above)."""
    return layout == "sm90" and math.ceil(N / _SMALL_M_FIRST["sm90"][1]) > sm_count


def _small_m_first(layout: str, N: int, K: int, sm_count: int) -> tuple[int, int]:
    """The first 16-row tile for M <= 16 on ``layout`` (see above): 16 x 256 on the widest weights, unless K is
    short (_SHORT_K_TILES below), where 16 x 128 takes the short-K rule."""
    return (16, 256) if _widest(layout, N, sm_count) and not _short_k(K) else _SMALL_M_FIRST[layout]
# 16 x 128 was measured with 4 stages; other tiles take the shallowest stage count of 3 or more (within noise of
# each other, and less shared memory per block). On the sm90 layout 32 x 128 takes 4 too: its split-K rule below
# was measured with 4 stages, and over one stream-K block per SM 4 stages took 0.97x the time of 3 (4096x4096,
# M = 32, H200, same interleaved run).
_PREFERRED_STAGES = {(16, 128): 4}
_PREFERRED_STAGES_SM90_LAYOUT = {**_PREFERRED_STAGES, (32, 128): 4}
# On the sm90 layout `auto` brings M = 17..32 on weights up to 64 Mi elements, and M = 33..64 where the sm90
# GEMM's tiles are too few or short, to this path (mixgemm/dispatch.py): at M = 33..64 32 x 128 in two row tiles
# was the best tile swept (8192x1280, 1024x8192; H100 and H200), ahead of 64 x 128.
_SM90_LAYOUT_MID_M_FIRST = (32, 128)
_SM90_LAYOUT_MID_M = 64
_LARGE_M = 4096  # an M of the last bucket: _pick_tile(configs, _LARGE_M, ...) is the large-M tile

# Split-K where stream-K does not apply: up to M = 64 the weight stream dominates (2 M flops per 0.5-byte
# weight is under the H100's mma.sync-to-DRAM balance of ~170 flop/byte), so K is split until there are about
# this many threadblocks per SM (16-row tiles: the best split at M = 16 gave 1.9-2.9 blocks per SM).
_BLOCKS_PER_SM = {16: 3, 32: 6, 64: 4}
# Each split should still stream enough k-tiles to fill its pipeline.
_MIN_K_TILES_PER_SPLIT = {16: 4, 32: 4}
_MIN_K_TILES_PER_SPLIT_LARGE = 8
_MAX_SPLIT_K = 16
# A second, tiny reduction kernel measured faster than the in-kernel one at every decode shape swept, with the
# in-kernel sum of before 2026-11-27 (one fragment's splits at a time); the sm80 layout has not been re-measured
# against the batched sum the sm90 layout's rule below takes.
_SPLIT_MODE = "parallel"
# The sm90 layout's split-K rule below has the tile's last split sum the partials in-kernel (serial) for the 16-row
# tiles where the grid has at least 32 output tiles and at most 8 splits, else the second kernel (parallel). The
# last split loads up to 16 float4 a thread of slots before adding any (tile_output.cuh: 4 slots of a 16 x 128 tile,
# 2 of a 32 x 128 one), so 8 splits of 16 rows take two L2 round trips, and the second launch goes. Both splits
# start as programmatic dependents (sm80/kernel/dependent_start.cuh; the pair's reduction kernel follows its GEMM as
# one and releases the next call's GEMM at its start, kernel/splitk_reduce.cuh). At the same tile and split
# (interleaved A/B, H100, docs/perf-notes/2026-11-28-m32-pair-as-dependent.md):
# - 16 x 128 at M = 16 (2 to 8 splits, 32 to 86 tiles): serial took 0.91x-1.00x the pair's time back to back and
#   0.95x-1.06x after an elementwise kernel; it keeps the serial sum, which won by up to 9% back to back.
# - 32 x 128 at M = 32 (4 and 8 splits, 32 to 64 tiles): the pair took 0.97x-0.98x the serial split's time back to
#   back and 0.91x-0.99x after an elementwise kernel, so the 32-row tiles take the pair (both launched ordinarily,
#   the two were level in the serial-sum study: 0.98x-1.03x, docs/perf-notes/2026-11-27-serial-split-k-sum-of-slots.md).
# The serial sum at 16 splits lost to the pair everywhere measured (1.00x-1.18x, 32-row, both launched ordinarily).
_SERIAL_TILE_M = 16
_SERIAL_MIN_TILES = 32
_SERIAL_MAX_SPLIT_K = 8

# Stream-K: (tile_m, tile_n) -> (blocks per SM, least k-tiles per block). Up to M = 256 a grid of resident
# blocks sharing every tile's k-tiles spread the 1.7-wave tails that whole tiles leave (64 x 128 at M = 64:
# 0.87-0.91x the split-K grid's time); above M = 256 concurrent blocks work on tiles far apart and lose L2 reuse
# (up to 1.11x slower at M = 4096). Each block needs enough k-tiles to fill its pipeline.
_STREAM_K = {(16, 64): (2, 8), (16, 128): (4, 8), (16, 256): (2, 8), (64, 128): (2, 16), (64, 256): (2, 16),
             (128, 128): (1, 16), (128, 256): (1, 16)}
# On the sm90 layout 16 x 128 blocks read their B fragments by ldmatrix from a layout made for 16-column wgmma
# blocks; 4 per SM fell 1-11% behind 2 per SM in the sweep above (e.g. 8192x2560, M = 16: 11.4 against 10.6 us).
# 32 x 128 (M = 17..64 where dispatch.py takes the sm80 tiles, or config="sm80") over one block per SM where the
# split-K rule below does not apply: within 1% of the best config swept on 4096x4096 and 2048x8192, 1.07x on
# 1024x8192 (where the split-K grid took 1.11x+; all three before the sm90 GEMM's dependent launch; 1024x8192 at
# M = 17..32 now takes unsplit 16-row tiles, below).
_STREAM_K_SM90_LAYOUT = {**_STREAM_K, (16, 128): (2, 8), (32, 128): (1, 8)}
_STREAM_K_MAX_M = 256

# On the sm90 layout 16 x 128 (weights from 32 Mi elements; below, see the serial split) and 32 x 128 tiles take split-K
# instead: the largest split of SWEEP_SPLIT_KS that leaves every split at least 12 k-tiles (8 on narrow weights and
# below 32 Mi elements, both below) and the grid at most 4 blocks per SM, where that is 4 splits or more. Over 14
# cells at M = 16 and 14 at M = 32 (H100 and H200, interleaved A/B,
# docs/perf-notes/2026-11-26-m16-m32-split-k-sm90-layout.md) it was within 6.4% of the best
# config of both GPUs (mean 1.01x / 1.02x), against up to 1.09x (M = 16, stream-K) and 1.23x (M = 32, the sm90
# GEMM) before. A split of 12+ k-tiles keeps a 4-stage pipeline full; more than 4 blocks per SM lost on the H100
# (8192x14336 M = 16, 8 splits: 1.08x). Where fewer than 4 splits qualify (K under 3072, or more column tiles
# than SMs) the grid is too small or too crowded, and stream-K spreads the k-tiles better (4096x4096 at M = 16 with
# the pair launched ordinarily; 1024x8192 and 2048x8192 at M = 32 see below), except for 16 x 128 tiles on a short K
# (_SHORT_K_TILES below). 32 x 128 keeps the rule to
# M = 64 (two row tiles): on 8192x1280 at M = 64 its 8 splits took 1.08x / 1.09x the best config (16 splits: see the
# narrow weights below) and 0.78x the sm90 GEMM's time, on both GPUs (before the sm90 GEMM's dependent launch; after
# it 16 splits took 0.98x, dispatch.py).
_SPLIT_K_SM90_LAYOUT_MAX_M = {(16, 128): 16, (32, 128): _SM90_LAYOUT_MID_M}  # tile -> the rows the rule takes
_SPLIT_K_SM90_LAYOUT_16_ROWS_FROM = 32 << 20  # weight elements: below, the serial split, or the pair on few tiles
_SPLIT_K_MIN_K_TILES = 12
# Below 32 Mi elements the 16-row tiles split too where the tile's last split can sum the partials in the kernel
# (serial: 32 or more tiles, at most 8 splits; _SERIAL_* above), and such a split needs 8 k-tiles: the 32 Mi bound
# and the 12 k-tiles were measured with the second kernel's sum, before the serial one. In sweeps of every compiled
# config at M = 16 (2026-11-28, `--layout auto`) the serial split this gives was the fastest config or within 0.5% on
# the H100 on 2048x8192 (4 splits of 8 k-tiles), 3072x8192 and 3584x8192 (4 of 12 / 14), 4096x4096 and 4096x5120
# (8 of 8; 4096x5120 at M = 12 too), where 16 x 128 stream-K took 1.063x-1.102x the fastest; on the H200 4096x4096
# took 8 splits fastest, stream-K 1.073x. From 32 Mi elements the splits keep 12 k-tiles, as measured there (8
# k-tiles would move some picks to more splits, untimed).
# Grids of under 32 tiles, too few for the serial sum, take the pair (the second kernel's sum, both launched as
# programmatic dependents) by the rule of 32 Mi elements and more. They took stream-K while the pair launched
# ordinarily (8192x2560 on the H100: stream-K 1.019x the fastest, the pair of 16 1.040x); in H200 sweeps of the
# dependent pair at M = 16 (docs/perf-notes/2026-11-28-narrow-grids-dependent-pair.md) the fastest 16 x 128 stream-K
# grid swept took 1.08x-1.16x the fastest config on all ten grids of 8 to 28 tiles, and the pair this rule gives was
# the fastest config or within 1.2% on seven of them (8192x1024, 8192x1280, 8192x2560, 8192x3584, 10240x2560,
# 4096x2560, 5120x1024). The three it missed: the two 16-tile grids (N = 2048; 5632x2048 8 splits 1.108x, 8192x2048
# 16 splits 1.110x), where the serial sum of 8 splits was fastest (the pair of 8 took 1.09x-1.11x its time), and
# 8192x3072 (1.044x, 16 serial splits fastest). Since the reduction kernel loads its partials in batches
# (docs/perf-notes/2026-11-28-split-k-reduction-batch-of-8.md) 5632x2048 and 8192x3072 take 1.006x / 1.008x; 8192x2048
# still misses (1.068x, and 1.083x at M = 32), where 8 splits of one row (one wave) were fastest, which 16 column
# tiles with K of 11008-28672 and 14 tiles at K = 8192 did not repeat: no rule yet.
_SERIAL_MIN_K_TILES = 8
_SPLIT_K_MAX_BLOCKS_PER_SM = 4
_SPLIT_K_MIN_SPLITS = 4
# Where K is too short for 4 serial splits of 8 k-tiles (under 32 k-tiles: K < 2048) the 16 x 128 tiles of a grid
# of 32 or more split serially into the most splits that keep the grid within one wave (tiles x splits <= SMs, each
# split at least 3 k-tiles), and run unsplit where even 2 splits would pass one wave (more than half a wave of
# tiles; 64 tiles split 2 and 80 unsplit were timed, none between): stream-K's blocks there get 8 k-tiles or fewer
# and a fixup each, which a k-loop this short does not repay, and a second wave of splits only adds partial sums.
# In sweeps of every compiled config at M = 16 (2026-11-28, `--layout auto`) this pick was the fastest config on
# all ten H200 shapes with K = 1024-1792: 1024x4096, 1536x4096 and 1792x4096 (32 tiles: 4 splits of 4-7 k-tiles),
# 1024x5120, 1024x6144, 1024x8192 and 1536x8192 (2 splits), 1024x10240,
# 1024x14336 and 1024x28672 (unsplit); and on the five of them timed on the H100 (1024x4096, 1024x8192, 1536x8192,
# 1024x14336, 1024x28672). Stream-K took 1.035x-1.30x the fastest on those fifteen cells. Out of sample (H100:
# 1280x8192, 1536x28672, 1792x14336, 1024x6144, 1024x10240; H200: 1280x8192) the pick was the fastest or within 0.1%.
# Under 12 k-tiles (K < 768) the tiles run unsplit: a split's fixed cost outweighs a k-loop that short (512x8192,
# 8 k-tiles: unsplit 4.23 / 4.25 us on the H100 / H200, 2 splits of 4 k-tiles 5.03 / 4.83, stream-K over 132 blocks
# 5.23 on the H100), while 768x4096 (12 k-tiles) took 4 splits of 3 k-tiles fastest on both GPUs (unsplit 1.038x /
# 1.101x, 2 splits 1.024x / 1.075x); both shapes swept after the rule was read off the ten, and the floor of 12 and
# the 3 k-tiles a split read off them. Out of sample on the H200 (640x8192, 768x6144, 768x8192, 768x10240,
# 896x4096) the pick was within 1.9% of the fastest (docs/perf-notes/2026-11-28-16-row-short-k-one-wave.md). At 132
# SMs the floor of 12 k-tiles and the 32 tiles already give every split 3 k-tiles (4 splits at most); the bound holds
# the rule on a GPU of more SMs.
# Grids of under 32 tiles keep stream-K (the serial sum's bound; untimed here).
_SHORT_K_TILES = _SPLIT_K_MIN_SPLITS * _SERIAL_MIN_K_TILES
_SHORT_K_SPLIT_FROM_K_TILES = 12
_SHORT_K_MIN_K_TILES_PER_SPLIT = 3
# Of the splits that rule allows, the 16-row tiles take the largest that keeps the grid within 4 blocks per SM
# scaled by the GPU's DRAM bandwidth over the H200's 4.8 TB/s (a faster GPU stays within the rule's own 4), and at
# least 4 splits. Every block streams its weight at the same rate, so the blocks a GPU needs in flight to cover
# DRAM latency grow with its bandwidth (Little's law); past that, more splits only add partial-sum slots to write
# and sum. On the 64-column-tile weights at M = 16
# (8192x8192, 7168x8192, 14336x8192, 28672x8192; A/B at the same tile, docs/perf-notes/2026-11-27-serial-split-k-
# sum-of-slots.md) 8 splits (3.9 blocks per SM) took 0.96x-0.99x the time of 4 (1.9) on the H200 and 1.01x-1.03x on
# the H100 (3.35 TB/s), whose scaled bound is 2.8 blocks per SM. A GPU whose bandwidth is unknown keeps the rule's
# bound of 4 blocks per SM.
_SPLIT_K_16_ROWS_FULL_GRID_BANDWIDTH = 4.8e12  # bytes per second
# One row of 32-row tiles (M = 17..32) takes the largest split within 3 blocks per SM, on both GPUs: in sweeps of
# every compiled config at M = 32 (2026-11-28, H100 and H200, docs/perf-notes/2026-11-28-m32-serial-split-as-
# dependent.md) 8 splits were the fastest 32 x 128 split at 2.4 blocks per SM or fewer (8192x5120 and 11008x4096:
# 4 splits, at 1.2 and 1.0 blocks per SM, took 1.09x-1.21x the time of 8) and lost to 4 splits at 3.4 (8192x7168,
# H200 only) and 3.9 (7168x8192 and 8192x8192: 8 splits 1.03x-1.06x the time of 4 on both GPUs, serial and
# parallel alike), where the bandwidth-scaled bound above would give the H200 8 splits. The sweeps of the pair as a
# dependent (docs/perf-notes/2026-11-28-m32-pair-as-dependent.md) kept both edges: 8 pair splits beat 4 at 1.9 and
# 2.4 blocks per SM (K of 8192 and more), 4 beat 8 at 3.4 (H200 only) and 3.9 (8 took 1.03x-1.12x the time of 4);
# and 8192x6144 (48 column tiles) took 8 splits fastest at 2.9 blocks per SM, M = 24 / 32 (H200; 4 splits
# 1.12x-1.14x the time, docs/perf-notes/2026-11-28-split-k-reduction-batched-loads.md). The bound of 3 lies between 2.9
# and 3.4. Splits of under 12 k-tiles hold a lower one (the narrow weights' below). Two rows of 32-row tiles
# (M = 33..64) were not timed against it and keep 4 blocks per SM.
_SPLIT_K_32_ROWS_ONE_ROW_MAX_BLOCKS_PER_SM = 3
# Where the weight has so few column tiles that one row of them split 16 ways stays within 2.5 blocks per SM (20
# column tiles or fewer on 132 SMs), every split adds only that many blocks, and splits of 8 k-tiles paid: 8192x1280
# (10 column tiles) took 0.98x / 0.93x the time at 16 splits of 8 k-tiles as at 8 of 16, at M = 32 / 64 (H100 sweep
# of 2026-11-26, docs/perf-notes/2026-11-26-m17-64-sm90-after-dependent-launch.md; the M = 16 / 32 split study
# measured 0.97x / 0.92x-0.93x on the H100 and the H200). With the dependent pair (H200, 2026-11-28) 8192x2560 and
# 10240x2560 (20 column tiles, 2.4 blocks per SM at 16 splits) took 16 splits fastest at M = 12..32, and 4096x2560
# 8 splits of 8 k-tiles at M = 16 / 32 (4 splits 1.025x-1.047x); 8192x3072 (24 column tiles: 2.9 blocks per SM)
# took 16 splits of 8 k-tiles at 1.12x the time of 8 of 16 at M = 32, where 8192x6144 took 8 splits of 16 k-tiles
# fastest at the same 2.9 blocks per SM (above): a short split's fixed cost (its pipeline fill and partial tile)
# weighs on fewer k-tiles. The bound of 2.5 lies between 2.4 and 2.9. It reads one row of 32-row tiles for the
# 16-row tiles and two rows of tiles too: a property of the weight's columns. On 17 to 20 column tiles with K of
# 2048-2944 (32-46 k-tiles) it moves M = 17..32 from unsplit 16-row tiles (below) and M = 33..64 (where dispatch.py
# takes the sm80 tiles) from stream-K to 4 splits of 8-11 k-tiles, as on 16 column tiles and fewer before. Swept
# (H200): the pick was the fastest config on 2048x2560 at M = 24 / 64 and 2944x2560 at M = 32; 2944x2560 at M = 64
# took 8 splits of 6 k-tiles fastest (the pick 1.036x, the fastest stream-K grid 1.10x), and 2048x2560 at M = 48
# three rows of 16 x 128 tiles split 4 ways serially (the pick 1.115x, the fastest stream-K grid 1.14x).
_SPLIT_K_NARROW_MAX_BLOCKS_PER_SM = 2.5
_SPLIT_K_NARROW_MIN_K_TILES = 8
# Where the split-K rule above finds too few splits for 32 x 128 tiles at M = 17..32 and their stream-K grid would
# give each block under 12 k-tiles (the split's minimum, for the same pipeline reason), two rows of 16 x 128 tiles
# unsplit take the problem when they fit in one wave: 1024x8192 (64 column tiles of 16 k-tiles: 128 stream-K blocks
# of 8) took 6.47 us against 7.13 back to back and 6.67 against 7.42 after an elementwise kernel (H100 sweeps,
# docs/perf-notes/2026-11-26-replay-fixed-cost.md); 2048x8192 (15.5 k-tiles a block) kept 32 x 128 ahead by 10%.
# The bound of 12 lies between those two measured points (8 and 15.5 k-tiles a block); none between was timed.
_SHORT_STREAM_K_ROWS_MAX_M = 32
# Where that stream-K grid's blocks get 12 k-tiles or more but fewer than 4 splits of 12 qualify, one row of 32 x 128
# tiles splits 2 ways (the dependent pair) where those splits fill between 3/4 of the SMs and one wave: 2048x8192 at
# M = 32 (64 tiles of 32 k-tiles: 128 blocks of 16) took 2 splits fastest on the H200, stream-K over 132 blocks
# 1.06x (docs/perf-notes/2026-11-28-narrow-grids-dependent-pair.md); the 3/4 is the data-parallel split's floor
# below (_ONE_WAVE_MIN_FILL).
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
            and 0 < memory_bandwidth < _WIDEST_TWO_SPLITS_BELOW_BANDWIDTH
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
