"""The sm90 path (Hopper): CUTLASS 3.x warp-specialized wgmma + TMA mixed-input kernels on sm90-layout weights
(cpp/mixgemm/sm90), built for sm_90a only.

The kernel computes the transposed problem ``y^T = W^T x^T`` so the narrow weight is the register-sourced
operand. Config: ``tile_m`` tokens (rows of x) x ``tile_n`` weight columns x 64 per CTA, ``cluster_m`` x
``cluster_n`` CTAs per cluster, schedule ``"coop"`` (two consumer warpgroups split one weight tile) or
``"pingpong"`` (they alternate whole tiles), tile scheduler ``"persistent"`` or ``"streamk"``. A stream-K config
with ``split_k`` > 1 cuts every tile's K into that many runs whose fp32 partials are added in an order fixed per
element (deterministic), by one of two reductions (``split_k_mode``): ``"serial"`` (name ``_k<n>s``), the tile's
last split adds the others' partials and stores the tile; ``"reduce_scatter"`` (``_k<n>r``), where every split of
every tile runs at once, each split adds and stores the epilogue subtiles it owns.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import re

import torch

from ..kernel_key import KernelKey
from .base import FAST_DRAM_BANDWIDTH, GemmConfig, GemmProblem, Gpu, KernelPath, check_positive_ints, check_split

TILE_K = 64  # 128 bytes of 16-bit x per k-tile
SCHEDULES = ("coop", "pingpong")
SCHEDULERS = ("persistent", "streamk")
SPLIT_K_MODES = ("none", "serial", "reduce_scatter")
_MODE_OF_LETTER = {"s": "serial", "r": "reduce_scatter"}


@dataclasses.dataclass(frozen=True)
class Sm90Config(GemmConfig):
    """An sm90-path kernel: token tile x weight tile, cluster, schedule, tile scheduler, and a split of K and its
    reduction (stream-K schedulers only)."""

    tile_m: int
    tile_n: int
    cluster_m: int = 1
    cluster_n: int = 1
    schedule: str = "coop"
    scheduler: str = "persistent"
    split_k: int = 1
    split_k_mode: str = "none"

    path = "sm90"
    tile_k = TILE_K

    def __post_init__(self) -> None:
        check_positive_ints(self, ("tile_m", "tile_n", "cluster_m", "cluster_n"))
        if self.schedule not in SCHEDULES or self.scheduler not in SCHEDULERS:
            raise ValueError(f"Sm90Config: schedule must be one of {SCHEDULES} and scheduler one of {SCHEDULERS}, "
                             f"got {self.schedule!r}, {self.scheduler!r}")
        if isinstance(self.split_k, int) and self.split_k > 1 and self.scheduler != "streamk":
            raise ValueError("Sm90Config: an sm90 config splits K only through its stream-K scheduler: split_k > 1 "
                             "needs scheduler 'streamk'")
        # A split names its reduction: the tuning cache's entries from before split_k_mode (which did not say which
        # one ran) fail here, and the cache skips them.
        check_split("Sm90Config", self.split_k, self.split_k_mode, SPLIT_K_MODES)

    @property
    def kernel_name(self) -> str:
        return (f"sm90_{self.tile_m}x{self.tile_n}x{TILE_K}_c{self.cluster_m}x{self.cluster_n}_{self.schedule}_"
                f"{self.scheduler}")


_NAME = re.compile(r"sm90_(\d+)x(\d+)x64_c(\d+)x(\d+)_([a-z]+)_([a-z]+)(?:_k(\d+)([spr]))?")

# ---------------------------------------------------------------------------------------------------------
# The heuristic. Each constant below says why it is what it is and which measurement fixed it; the full evidence is in
# the perf note it names (docs/perf-notes/, index in its README). The first rules were chosen by tools/path_probe.py on
# an H100 (2026-11-23-one-layout-per-gpu.md, 2026-11-23-sm90-split-k-small-m.md, 2026-11-24-sm90-stream-k-no-memset.md).
#
# Per M bucket, the kernels to try in order, as (tile_m, tile_n, schedule, scheduler). Up to 128 rows the weight stream
# dominates: the token tile matching M with stream-K won on every DESIGN shape (stream-K spreads the tail of, e.g., 224
# weight tiles on 132 SMs), with 256 weight columns a tile on large weights (below), and at M = 65..128 two 64-row tiles
# on small ones (below). Above, 256 x 128 cooperative tiles where they fill the GPU, the same tile split by stream-K
# where only that split fills it, 256 x 64 ping-pong tiles where they make half a wave, 64 x 128 stream-K where it fills
# the GPU within one wave and 128 x 128 cannot, else 128 x 128 stream-K (split by split_for). A ping-pong CTA with one
# tile keeps only one of its two math warpgroups busy, so narrow ping-pong tiles pay only with two tiles or more an SM.
_CHOICES = (
    (16, ((16, 128, "coop", "streamk"), (32, 128, "coop", "streamk"))),
    (32, ((32, 256, "coop", "streamk"), (32, 128, "coop", "streamk"), (64, 128, "coop", "streamk"))),
    (64, ((64, 256, "coop", "streamk"), (64, 128, "coop", "streamk"), (32, 128, "coop", "streamk"))),
    (128, ((128, 256, "coop", "streamk"), (128, 128, "coop", "streamk"), (64, 128, "coop", "streamk"))),
    (math.inf, ((256, 128, "coop", "persistent"), (256, 128, "coop", "streamk"), (256, 64, "pingpong", "persistent"),
                (64, 128, "coop", "streamk"), (128, 128, "coop", "streamk"))),
)
# A 256-column weight tile halves the tiles that re-read x from L2 and doubles the weight bytes each CTA keeps in
# flight, at the price of a longer pipeline fill and fixup a tile. It is taken where every SM streams at least this many
# of its k-tiles, by token tile: at M = 32 / 64 it took 0.82x-0.96x the 128-column tile's time from 54 k-tiles an SM and
# 0.98x-1.27x at 31 and fewer; at M = 128 0.88x / 0.98x at 109 but 1.04x-1.06x at 54 (H100,
# 2026-11-26-wide-weight-tiles.md).
_WIDE_TILE_N = 256
_NARROW_TILE_N = 128
_TILE_NS = (_NARROW_TILE_N, _WIDE_TILE_N)
_WIDE_MIN_K_TILES_PER_SM = {32: 48, 64: 48, 128: 96}
# But not where the 128-token wide tile needs more splits than the 128-column one to fill the GPU and x's box zero-fills
# at most this many rows past M: both then stream the same weight bytes, but the wide tile's reduction brings three
# 128 KB partial tiles a tile where the narrow one's split of two brings one of 64 KB. On 28672x8192 at M = 96..128 (0
# to 32 rows zero-filled) 128 x 128 split 2 was the fastest config in eight cells, 128 x 256 split 4 1.028x-1.041x; with
# 48-56 rows zero-filled the narrow tile, which loads twice as many x boxes, lost (1.031x-1.059x, though it was the
# fastest with 40) (H100, 2026-11-28-sm90-wide-tile-splits.md). The 64-token wide tile keeps its split (64 x 256 split 4
# fastest at M = 64, 64 x 128 split 2 1.16x).
_WIDE_SPLIT_YIELDS_MAX_ZERO_FILLED_ROWS = 32
# Up to 64 rows the 256-column tile also pays where it fills the GPU and the 128-column one cannot: 128-column tiles
# making over half a wave get no split (split_for), so at 0.5-0.75 of a wave (_IDLE_FILL) a quarter or more of the SMs
# idle, while half as many 256-column tiles split to fill at least 0.9 of one (_SPLIT_MIN_FILL). On 4096x11008 (43 tiles
# of 256 columns split 3 = 129 units on 132 SMs) it took 0.86x / 0.90x the best 128-column config at M = 32 / 64; from
# 0.85 of a wave the 128-column split was best or within 1.7% (H100, 2026-11-26-m17-64-sm90-after-dependent-launch.md).
_WIDE_FILL_MAX_M = 64
_IDLE_FILL = 0.75
_SPLIT_MIN_FILL = 0.9
# Above 128 rows the 256 x 128 tile split by stream-K pays the same way: where its tiles are too few for a persistent
# wave and neither the 256 x 64 ping-pong tiles (never split) nor 128 x 128 at its split fill three quarters of one. At
# 40 tiles of 256 x 128 (80 of 256 x 64 or 128 x 128, 0.61 of a wave; 8192x1280 M = 1024, 8192x2560 M = 512, 8192x5120
# M = 256) the split 3 ways took 0.90x-0.91x the ping-pong tiles' time and 0.85x-0.89x that of 128 x 128 unsplit; where
# another choice fills the GPU it lost. Likewise 64 x 128 split 3 on 8192x1280 at M = 256 (0.91 of a wave, 0.93x the
# time of 128 x 128 split 4 at 0.61) (H100, 2026-11-27-sm90-tall-split-where-the-rest-idle.md), but only within one
# wave: beyond, its extra token tiles are more work (M = 257..337: 1.16x-1.66x the fastest config, 128 x 128 stream-K
# 1.00x-1.15x on the H200, 1.007x-1.13x on the H100; 2026-11-27-sm90-m257-512-sweep.md). The 256 x 128 split needs at
# least this many k-tiles a split: with 21 (4096x2560 at M = 385..505, K = 4096 split 3) it took 1.05x-1.09x the fastest
# config in 9 of 10 cells on both GPUs, with 18.7 1.15x-1.17x, and on 4096x5120 at M = 193..248 1.009x-1.087x where the
# picks without it were the fastest; it was first measured with 43 (K = 8192) (H100 and H200,
# 2026-11-27-sm90-pingpong-two-token-tiles.md, 2026-11-28-sm90-wide-tile-splits.md).
_TALL_SPLIT_MIN_K_TILES_PER_SPLIT = 32
# At M = 65..128 the 128 x 128 tile is taken where every SM gets at least this many of its k-tiles (the sm80 path's
# _STREAM_K_LARGE_TILE_MIN_UNITS_PER_SM rule); on smaller weights two 64-token tiles a weight tile double the tiles that
# stream the weight: at M = 128 they took 0.74x-0.98x the 128-token tile's time at 7.8-15.5 k-tiles an SM, 1.00x at 19.4
# and 1.10x-1.50x from 27 (H100, 2026-11-26-wide-weight-tiles.md).
_TOKEN_TILE_128_MIN_K_TILES_PER_SM = 16
# On a fast DRAM (base.FAST_DRAM_BANDWIDTH: the H200) that measure gives the 64-token tiles too much: at 9.7 and 11.6
# k-tiles an SM each won on one weight. There 128 x 128 is also taken where split_for splits it and it streams fewer
# k-tiles on its busiest SM (_busiest_sm_k_tiles), L128 for one 128-token tile a weight tile against L64 for two
# 64-token tiles, by the costs below. Where fixed costs vanish (28672x8192, 8192x11008 at M = 96..128) the 128-token
# tiles took 0.63x-0.74x the 64-token tiles' time with half their k-tiles on the busiest SM: a 128-token k-tile costs
# 1.25-1.5 times a 64-token one (1.3 taken). Below, the 128-token tiles' split and longer pipeline fill cost a fixed
# amount more, worth this many 64-token k-tiles: on 30 H200 cells swept at M = 96..128 (two of them timed 128 x 128
# split 6 with the serial reduction only), 128 x 128 was the faster of the two wherever L64 - 1.3 L128 was 11.2 or
# more (0.60x-0.98x the 64-token tiles' time; 2048x5120, 2048x6144, 2048x8192, 4096x4096 and 3072x5120 among them,
# which the measure above gave to 64 x 128 at 1.04x-1.33x the fastest config) and the slower wherever it was 8.4 or
# less (1.13x-1.28x: 1024x8192, 1536x8192, 8192x1280). Out of sample (M = 72 / 128) it moved 2048x7168, 4096x3072,
# 5120x3072 and 2560x5120 to 0.84x-0.97x the 64-token tiles' time; 3840x4096 (4.0) went the other way, 128 x 128
# split 3 at 0.97x-0.99x (a listed miss). Where split_for leaves 128 x 128 unsplit (too few k-tiles), stream-K
# spreads its tiles under half a wave; there it lost on 1024x8192, 1536x8192 and 1536x6144 (1.13x-1.25x; the last
# counted 12.3, and out of sample; hence the split) (H200, 2026-11-28-m65-128-token-tile-by-busiest-sm.md). Only
# also: on 4096x11008 (41.7 k-tiles an SM) the busiest-SM count alone, 84 - 1.3 x 64 = 0.8, would move the cell to
# 64 x 128, and it has not been swept at these M. On the H100 4096x4096 at M = 128 (11.2) took the 64-token tiles
# (the 128 x 128 split 1.064x, a sweep of 2026-11-26), so the H100 keeps the measure above until it is swept again.
_TOKEN_TILE_128_K_TILE_COST = 1.3
_TOKEN_TILE_128_EXTRA_COST_K_TILES = 10
# A persistent tile shape is taken only if its tiles make at least this share of one wave (fewer leave SMs idle: the
# next choice has more, smaller tiles); stream-K fills the GPU by construction. For 256 x 128 the share is where
# 128 x 128 stream-K, which replaces it, breaks even: T tiles under one wave take one 256 x 128 tile time, and 2T half
# tiles spread over S SMs take (T / S) alpha of it, alpha being the half tile's cost a flop against the whole one's. The
# H100 sweep of 2026-11-26 gives alpha = 1.31-1.44, so a break-even share 1 / alpha of 0.69-0.76: 128 x 128 stream-K
# took 0.83x-0.94x the persistent time at 0.61-0.65 of a wave and 1.11x-1.13x at 0.85. Two 256 x 64 ping-pong tiles
# share one SM's two math warpgroups, so that tile pays from half a wave (80 tiles, 0.61 of a wave, were the fastest
# config on 8192x1280 at M = 1024 in the same sweep, before split-K summed in the kernel: the 256 x 128 split, tried
# first, beats them there now) (2026-11-26-sm90-wave-rule.md).
_MIN_WAVE = {(256, 128): 0.75}
_MIN_WAVE_DEFAULT = 0.5
# A persistent grid of several waves whose last one is short wastes the idle SMs' share: below this ratio of tiles to
# (waves x SMs) the stream-K twin of the same tile runs where compiled (8192x28672 at M = 512, 3.4 waves at 85%:
# stream-K 0.95x the persistent time), else the next choice. Within one wave the persistent tile stays: there stream-K
# only cuts tiles into fixups (the twin 1.01x-1.03x at 112 tiles on 132 SMs) (2026-11-26-sm90-wave-rule.md).
_MIN_WAVE_EFFICIENCY = 0.9
# Split-K on the stream-K configs: where a config's tiles fill at most half the SMs, an even split keeping tiles x split
# within one wave beat stream-K's uneven runs (0.91x-0.98x its time). Each split adds a partial tile (the last split's
# to add, or the splits' to share by epilogue subtile: sm90/self_resetting_stream_k.cuh) and needs about 16 k-tiles of
# its own to pay for it (these rules were measured before the sharing, which only made splits cheaper). Up to 128 rows a
# split of up to 6 pays where the tiles are that few (20 tiles split 6 fill 120 of 132 SMs where 4 fill 80): split 6 was
# the fastest config or within 2.4% on 8192x1280 at M = 72..128 and 8192x2560 at M = 48..128, where split 4 took
# 1.08x-1.15x and 7-8 splits (past one wave) 1.40x-1.52x (H100; on the H200 the fastest in all five cells out of sample;
# 2026-11-27-sm90-split-6-narrow-shards.md). Above 128 rows the cap is 4 but for 128 x 128, whose splits of 4 or more
# share the reduction (_reduce_scatter_pays; the fastest config on 8192x1280 at M = 208..256 (224: H100 only) and
# 16384x1280 at M = 224, 1.00x-1.03x the fastest on N = 1024..1536 at M = 192..320), and 64 x 128, whose split of 5 of
# 24 tiles (N = 1024, M = 129..192) was the fastest config on three shapes on both GPUs. Split 5 ways, 256 x 128 took
# 1.09x-1.10x the fastest config on 8192x3072 at M = 160 / 224 and keeps the cap (H100,
# 2026-11-27-sm90-split-k-reduction-as-a-config.md).
MAX_SPLIT_K = 6
_MAX_SPLIT_K_ABOVE_128_ROWS = 4
_UNCAPPED_ABOVE_128_ROWS = ((128, 128), (64, 128))
_MIN_K_TILES_PER_SPLIT = 16
# Above 256 rows the 256-column tile runs unsplit where its split would leave a tenth of the SMs idle: its stream-K
# units then spread the tiles over every SM (48 tiles of 128 x 256 split 2, 0.73 of a wave, took 1.10x-1.15x the unsplit
# time on 11008x4096, 12288x4096 and 14336x4096). The 128-column tile keeps its split (48-50 tiles of 128 x 128 split 2
# the fastest or within 1.9% on 8192x2048 and 8192x1280, though not on 14336x2048: _STREAM_K_SPREAD_COST_K_TILES)
# (2026-11-27-sm90-wide-three-token-tiles.md).
_WIDE_SPLIT_FILLS_ABOVE_M = 256
# Two waves of thirds: where T tiles of 128 x 128 make over half a wave (split_for gives no split) and at most two
# thirds of one, a split of 3 runs their 3T units in two waves of a third of a tile each: two thirds of the unsplit
# time, where a third of the SMs idled, plus each unit's fixed costs (its pipeline fill and, for the first two splits, a
# partial tile the third waits for), so each split needs this many k-tiles. A fourth split makes a third wave of
# quarters (1.11x-1.20x the split of 3). On 70-88 tiles on both GPUs split 3 took 0.75x-0.95x the unsplit time with
# 32 k-tiles a split or more, 0.96x-0.99x with 26 and 1.03x-1.11x with 21 or fewer above 192 rows
# (2026-11-27-sm90-square-tile-splits.md). It goes ahead of the ping-pong tiles (1.05x-1.25x the fastest config where
# they came first). Half as many 128 x 256 tiles split 3 ways (_thirds_twin) took 0.86x-1.03x the 128 x 128 split's time
# (median 0.99x), and 64-token tiles where they compute a 64-row block fewer (_token_tile_64_sized_to_m) were the
# fastest config or within 0.9%.
_THIRDS_SPLIT = 3
_THIRDS_MIN_K_TILES_PER_SPLIT = 24
# Stream-K's spread against a split: T stream-K tiles under half a wave of S SMs split s ways give each of their sT
# units K/s k-tiles while S - sT SMs idle; unsplit, CUTLASS's stream-K scheduler spreads them over every SM (T K / S
# k-tiles each) at the price of its fixups, which cost each SM about this many k-tiles at two to four SMs a tile (more
# at fewer tiles). So there the split pays only where K (1/s - T / S) falls short of it: 128 x 128 split 2 took
# 1.05x-1.13x the unsplit time where that product was 21.8-54 (one H100 exception: 0.95x at 21.8) and 0.91x-1.00x where
# it was 15.5-17.5; 128 x 256 split 3 at 27.2 1.04x-1.05x (2026-11-27-sm90-square-tile-splits.md).
_STREAM_K_SPREAD_COST_K_TILES = 20
# Token tiles sized to M at 129..192 rows: three 64-token tiles compute 192 rows where every other choice of the bucket
# computes 256, so where they fill one wave (0.9 to 1 of it at split_for's split) they go first, the 256-column one
# where every SM streams the wide tile's k-tiles (the rule for M <= 64). At M = 160 / 192 they were the fastest config
# or within 1.4% on four of nine H100 shapes, where the bucket's picks took 1.08x-1.20x; filling less or over a wave
# they took 1.15x-1.38x (2026-11-27-sm90-partial-token-tiles.md). At M = 144 / 176 the rule's picks took 0.977x-1.037x
# the fastest config on both GPUs (2026-11-27-sm90-m144-240-sweep.md).
_TOKEN_TILE_64_MAX_M = 192
# Except where 128 x 128 tiles split fill the same wave with long splits: a 64-token tile converts every weight k-tile
# it streams for 64 tokens where a 128-token one does it for 128, and with enough k-tiles a split that outweighs the
# 64 rows the bigger tiles compute in vain. At M = 144..192 on both GPUs, with 42-85 k-tiles a split 128 x 128 split 3
# or 6 was the fastest config or within 0.9% on four shapes, where the 64-token tiles took 1.015x-1.10x; with 21 the
# 64-token tiles stayed the fastest or within 0.5%; between (H100), with 32 the split was fastest and the 64-token tiles
# took 1.023x / 1.030x, with 26 they tied (1.001x) (2026-11-27-sm90-split-k-reduction-as-a-config.md).
_LONG_SPLIT_MIN_K_TILES = 32
# Where the 64 x 128 tile fills the wave, the 64 x 256 one goes before it if it fills the wave split with as many
# k-tiles a split, though its unsplit k-tiles an SM fall short of _pays's: half as many tiles re-read x from L2, and the
# split's units stream the same weight bytes. On 4096x5120 at M = 136..184 (60 tiles split 2, 32 k-tiles a split) it was
# the fastest config in all nine cells on both GPUs, where 64 x 128 took 1.017x-1.048x; with 16 k-tiles a split
# (4096x2560) it took 1.08x-1.09x the time of the fastest config, the 64 x 128 split of 2
# (2026-11-28-sm90-wide-tile-splits.md).
_TOKEN_TILE_64_WIDE_LONG_SPLIT = _LONG_SPLIT_MIN_K_TILES
# The 256 x 64 ping-pong tile only where the TMA unit zero-fills at most this many rows of the last x box it loads
# (_x_rows_zero_filled): its math a k-step is half the cooperative 256 x 128 tile's for the same 32 KB box of x, so the
# fill of rows past M is not hidden behind it. With 48 rows zero-filled it took 1.04x-1.28x the fastest config where
# they were rows of its whole 256-row box (M = 208) and 1.00x-1.10x where they were rows of its last 64-row block
# (M = 144) (128 x 128 stream-K, the pick without it, the fastest or within 4.5%); with 16 or 32 it was the fastest or
# within 2.7% (H100, M = 144..240, 2026-11-27-sm90-m144-240-sweep.md). Where it loads its whole 256-row box (under
# 64 rows past M) the limit is lower: with 28-31 rows zero-filled it took 1.008x-1.105x the time of 128 x 128 stream-K,
# with 24 or 16 it was the fastest config in eight cells (H100 and H200, 2026-11-28-sm90-wide-tile-splits.md).
_PINGPONG_MAX_ZERO_FILLED_ROWS = 32
_PINGPONG_MAX_ZERO_FILLED_ROWS_WHOLE_BOX = 24
# At 257..512 rows with K of at most 64 k-tiles, where the last token tile loads x in 64-row blocks up to M, up to 47
# zero-filled rows of its last block: with few k-steps a tile the cooperative choices' per-tile costs weigh more. With
# 39-47 such rows the ping-pong tile was the fastest config or within 1.3% on five shapes at M = 273..409 on both GPUs,
# where 128 x 128 stream-K took 1.01x-1.05x; with 47 rows of a whole 256-row box (M = 465) it took 1.10x / 1.16x on two
# of three shapes (H200) (2026-11-27-sm90-pingpong-two-token-tiles.md).
_PINGPONG_MAX_ZERO_FILLED_ROWS_SHORT_K_TWO_TILES = 47
_PINGPONG_SHORT_K_MAX_K_TILES = 64
# Where K has at most this many k-tiles (K <= 1024), the 256 x 64 ping-pong tile goes first from 129 to 256 rows,
# whatever its share of a wave or its x fill, and from 257 to 512 rows where its tiles fit one wave: with so few k-steps
# a tile the per-tile costs (pipeline fill, epilogue; stream-K's split and fixup for the cooperative choices) outweigh
# the k-loop, and 256-row token tiles have the fewest tiles and no split. On 1024x4096 and 1024x8192 at M = 144..240 it
# was the fastest config in 11 of 12 cells on both GPUs and 1.027x in the twelfth, where the rules above took up to
# 1.23x (2026-11-27-sm90-short-k-ping-pong.md); at 257..512 rows the fastest or within 0.5% on 1024x4096 (128 tiles; the
# next best 1.05x-1.08x on the H200), and 1.01x-1.17x on 1024x8192 (256 tiles, two waves), where 256 x 128 persistent
# was the fastest (H200; 2026-11-27-sm90-m257-512-sweep.md, benchmarks/2026-11-27-h200-sweep-m257-512.json).
_SHORT_K_MAX_K_TILES = 16
_SHORT_K_PINGPONG_MAX_M = 512
# From 257 to 384 rows, where K has more than this many k-tiles, 128 x 128 stream-K (split by split_for; 128 x 256 where
# it pays, below) goes first: three 128-token tiles compute 384 rows where two 256-token tiles compute 512, and with a
# long k-loop a tile the rows are the work. At M = 289..353 the 256-token picks before it took 1.07x-1.39x the fastest
# config on six shapes, where 128 x 128 stream-K was the fastest on four (H200); out of sample the rule's pick was the
# fastest or within 1.4% on nine of 13 cells on both GPUs and 1.06x-1.11x on the other four (where 128 x 256, below, was
# fastest). At 32 k-tiles and fewer the per-tile costs weigh more and 256-row tiles have half as many tiles: on
# 1024x8192 and 2048x8192 at M = 273 / 337 the 256 x 128 tile was the fastest and 128 x 128 took 1.03x-1.25x
# (2026-11-27-sm90-m257-512-sweep.md).
_THREE_TOKEN_TILES_MIN_K_TILES = 32
_THREE_TOKEN_TILES_MAX_M = 384
# The 256-column tile at three token tiles re-reads x from L2 for half as many tiles: laid out alike it took 0.94x-0.98x
# the time of 128 x 128, so one 128 x 256 tile costs _WIDE_TILE_COST 128 x 128 tiles. What decides is how CUTLASS's
# stream-K scheduler lays out each (_stream_k_slots: whole waves where it runs the tiles data-parallel, else just the
# tiles). Past one wave of 128 x 128 tiles the wide tile is taken where its slots, at that cost, are fewer (0.88x-0.94x
# on 8192x14336 and 4096x14336; it lost, 1.00x-1.26x, where its own tiles run a short last wave while 128 x 128's are
# spread, or make one wave of 84-96). Within one wave, where half as many tiles as SMs are cut into stream-K units with
# a fixup each, it pays only where 128 x 128 idles a quarter of the GPU (_IDLE_FILL), each SM streams at least this many
# of its k-tiles (62.5-81.5: 0.93x-0.97x; 23-46.5: 1.02x-1.29x), and three units a tile fill 0.9 of a wave (3.1 units a
# tile: 0.95x-0.97x; 5.5: 1.39x) (H100 and H200, 2026-11-27-sm90-wide-three-token-tiles.md).
_WIDE_TILE_COST = 1.9
_THREE_TOKEN_TILES_WIDE_MIN_K_TILES_PER_SM = 48
_THREE_TOKEN_TILES_WIDE_MAX_UNITS = 3
# sm90/x_rows_past_m_skipped.cuh's kRowBlock: a 128- or 256-token tile with this many or more rows past M loads x in
# blocks of this many rows up to M; one with fewer loads its whole box.
_X_ROW_BLOCK = 64
# From _X_MULTICAST_MIN_M rows, with K of _X_MULTICAST_MIN_K or more, the persistent 256 x 128 cooperative tile runs as
# its cluster of two along the weight columns where that pair is compiled (the full set); the pair shares each k-tile of
# x through TMA multicast. Per k-step a 256-token CTA reads 32 KB of x and 4 KB of int4 weight, so sharing x nearly
# halves what the kernel moves through L2 (ncu, 8192x28672 M = 4096: 20 -> 12 GB; Machete's cluster of two moves 12.1).
# At these M every kernel runs at the board's power cap, where less data moved buys clock. At steady state the pair took
# 0.972x-0.976x the single CTA's time at M = 4096, 0.979x-0.990x at 2048, 0.987x-1.006x at 1024 and 0.998x-1.016x at 512
# (H100, 2026-11-27-x-multicast-at-the-power-cap.md). Only from K = 4096, the shortest K measured: with fewer k-steps a
# tile the pair's fixed costs (the cluster's launch, its multicast barriers) weigh more, unmeasured.
_X_MULTICAST_TILE = (256, 128, "coop")
_X_MULTICAST_MIN_M = 1024
_X_MULTICAST_MIN_K = 4096


def _tiles(tile_m: int, tile_n: int, M: int, N: int) -> int:
    """The output tiles of an M x N problem (the token tiles covering M times the weight tiles of N)."""
    return math.ceil(M / tile_m) * (N // tile_n)


def narrow_tiles(M: int, N: int) -> int:
    """The output tiles of the 128-column choice of M's bucket (M <= 128): how many tiles the sm90 GEMM has to
    spread over the SMs at small M (mixgemm.dispatch reads it); 0 where 128 columns do not divide N (the heuristic
    then falls back to a 64-column tile of 256 rows)."""
    if N % _NARROW_TILE_N:
        return 0
    choices = next(choices for bound, choices in _CHOICES if M <= bound)
    tile_m = next(tile_m for tile_m, tile_n, _, _ in choices if tile_n == _NARROW_TILE_N)
    return _tiles(tile_m, _NARROW_TILE_N, M, N)


def _k_tiles_per_sm(tile_m: int, tile_n: int, M: int, N: int, K: int, sm_count: int) -> float:
    """The 64-deep k-tiles each SM streams when ``tile_m`` x ``tile_n`` tiles cover an M x N x K problem (the
    heuristic's measure of whether a tile shape pays)."""
    return _tiles(tile_m, tile_n, M, N) * (K // TILE_K) / sm_count


def _split(tile: tuple[int, int], M: int, N: int, K: int, sm_count: int) -> int:
    """The split-K of a stream-K config of ``tile`` (tile_m, tile_n) on an M x N x K problem (see split_for): at most
    MAX_SPLIT_K, and above 128 rows at most _MAX_SPLIT_K_ABOVE_128_ROWS but for the tiles of
    _UNCAPPED_ABOVE_128_ROWS."""
    tiles = _tiles(*tile, M, N)
    split = max(1, min(MAX_SPLIT_K, sm_count // max(tiles, 1), K // TILE_K // _MIN_K_TILES_PER_SPLIT))
    if M > 128 and split > _MAX_SPLIT_K_ABOVE_128_ROWS and tile not in _UNCAPPED_ABOVE_128_ROWS:
        split = _MAX_SPLIT_K_ABOVE_128_ROWS
    return split


def _fill(tile_m: int, tile_n: int, scheduler: str, M: int, N: int, K: int, sm_count: int) -> float:
    """The share of one wave that ``tile_m`` x ``tile_n`` tiles fill: stream-K tiles at split_for's split (a split
    never passes one wave), persistent ones unsplit."""
    split = _split((tile_m, tile_n), M, N, K, sm_count) if scheduler == "streamk" else 1
    return _tiles(tile_m, tile_n, M, N) * split / sm_count


def _wide_splits_more(tile_m: int, M: int, N: int, K: int, sm_count: int) -> bool:
    """Whether ``tile_m``-token stream-K tiles of 256 columns split more ways than those of 128 (see
    _WIDE_SPLIT_YIELDS_MAX_ZERO_FILLED_ROWS)."""
    return _split((tile_m, _WIDE_TILE_N), M, N, K, sm_count) > _split((tile_m, _NARROW_TILE_N), M, N, K, sm_count)


def _fills_where_the_others_idle(tile: tuple[int, int], others: tuple[tuple[int, int, str], ...], M: int, N: int,
                                 K: int, sm_count: int) -> bool:
    """Whether stream-K ``tile`` (tile_m, tile_n) split fills the GPU where each of ``others`` (tile_m, tile_n,
    scheduler) leaves a quarter of it idle (see above)."""
    return (_fill(*tile, "streamk", M, N, K, sm_count) >= _SPLIT_MIN_FILL
            and all(_fill(*other, M, N, K, sm_count) < _IDLE_FILL for other in others))


def _x_in_row_blocks(tile_m: int, M: int) -> bool:
    """Whether M's last ``tile_m``-token tile loads x in row blocks up to M (see _X_ROW_BLOCK), not its whole box."""
    return -M % tile_m >= _X_ROW_BLOCK


def _x_rows_zero_filled(tile_m: int, M: int) -> int:
    """The rows past M that the TMA unit zero-fills in the last x box of M's last ``tile_m``-token tile: the tile's
    rows past M, or, where the kernel loads x in row blocks up to M, those of its last block."""
    return -M % _X_ROW_BLOCK if _x_in_row_blocks(tile_m, M) else -M % tile_m


def _pingpong_zero_fill_limit(tile_m: int, M: int, K: int) -> int:
    """The most x rows past M that the ping-pong tile's last x box may zero-fill: where the last tile loads x in row
    blocks (its last block is the box), _PINGPONG_MAX_ZERO_FILLED_ROWS, or at 257..512 rows with a short K
    _PINGPONG_MAX_ZERO_FILLED_ROWS_SHORT_K_TWO_TILES; where it loads its whole box,
    _PINGPONG_MAX_ZERO_FILLED_ROWS_WHOLE_BOX."""
    if not _x_in_row_blocks(tile_m, M):
        return _PINGPONG_MAX_ZERO_FILLED_ROWS_WHOLE_BOX
    if 256 < M <= 512 and K // TILE_K <= _PINGPONG_SHORT_K_MAX_K_TILES:
        return _PINGPONG_MAX_ZERO_FILLED_ROWS_SHORT_K_TWO_TILES
    return _PINGPONG_MAX_ZERO_FILLED_ROWS


def _busiest_sm_k_tiles(tile: tuple[int, int], M: int, N: int, K: int, sm_count: int) -> int:
    """The k-tiles the busiest SM streams when stream-K ``tile`` (tile_m, tile_n) tiles at split_for's split cover an
    M x N x K problem: whole waves of split units, or, unsplit where stream-K spreads the tiles' last wave
    (_stream_k_spreads), an even share of all k-tiles."""
    split = split_for(Sm90Config(*tile, 1, 1, "coop", "streamk"), M, N, K, sm_count).split_k
    tiles, k_tiles = _tiles(*tile, M, N), K // TILE_K
    if split == 1 and _stream_k_spreads(tiles, sm_count):
        return math.ceil(tiles * k_tiles / sm_count)
    return math.ceil(tiles * split / sm_count) * math.ceil(k_tiles / split)


def _token_tile_128_beats_two_64s(M: int, N: int, K: int, sm_count: int) -> bool:
    """Whether 128 x 128 stream-K tiles split by split_for beat 64 x 128 ones at M = 65..128 on a fast DRAM (see
    _TOKEN_TILE_128_EXTRA_COST_K_TILES)."""
    split = split_for(Sm90Config(128, _NARROW_TILE_N, 1, 1, "coop", "streamk"), M, N, K, sm_count).split_k
    return split > 1 and (_busiest_sm_k_tiles((64, _NARROW_TILE_N), M, N, K, sm_count)
                          - _TOKEN_TILE_128_K_TILE_COST * _busiest_sm_k_tiles((128, _NARROW_TILE_N), M, N, K, sm_count)
                          >= _TOKEN_TILE_128_EXTRA_COST_K_TILES)


def _pays(tile_m: int, tile_n: int, scheduler: str, M: int, N: int, K: int, sm_count: int,
          memory_bandwidth: float = 0.0) -> bool:
    """Whether a choice of :data:`_CHOICES` gives every SM enough work (see above): the 256-column tiles (enough
    k-tiles or, up to 64 rows, fill the GPU where 128 columns cannot; the 128-token one not where it splits more ways
    than 128 x 128 with a short x fill); up to 128 rows the 128 x 128 tile (enough k-tiles; on a fast DRAM
    (``memory_bandwidth``, bytes per second) where it beats two 64-token tiles on the busiest SM); above, 256 x 128
    stream-K where only it fills the GPU (with 32 k-tiles a split) and 64 x 128 where it fills the GPU (within one
    wave) and 128 x 128 cannot; the other choices always."""
    if tile_n == _WIDE_TILE_N:
        if (tile_m == 128 and _x_rows_zero_filled(tile_m, M) <= _WIDE_SPLIT_YIELDS_MAX_ZERO_FILLED_ROWS
                and _wide_splits_more(tile_m, M, N, K, sm_count)):
            return False
        return (_k_tiles_per_sm(tile_m, tile_n, M, N, K, sm_count) >= _WIDE_MIN_K_TILES_PER_SM.get(tile_m, math.inf)
                or (M <= _WIDE_FILL_MAX_M and _fills_where_the_others_idle(
                    (tile_m, _WIDE_TILE_N), ((tile_m, _NARROW_TILE_N, "streamk"),), M, N, K, sm_count)))
    if (tile_m, tile_n) == (128, 128) and M <= 128:
        return (_k_tiles_per_sm(tile_m, tile_n, M, N, K, sm_count) >= _TOKEN_TILE_128_MIN_K_TILES_PER_SM
                or (memory_bandwidth >= FAST_DRAM_BANDWIDTH and _token_tile_128_beats_two_64s(M, N, K, sm_count)))
    if (tile_m, tile_n, scheduler) == (256, 128, "streamk"):
        split = _split((256, 128), M, N, K, sm_count)
        if K // TILE_K // split < _TALL_SPLIT_MIN_K_TILES_PER_SPLIT:
            return False
        return _fills_where_the_others_idle((256, 128), ((256, 64, "persistent"), (128, 128, "streamk")), M, N, K,
                                            sm_count)
    if (tile_m, tile_n) == (64, 128) and M > 128:
        return (_fills_where_the_others_idle((64, 128), ((128, 128, "streamk"),), M, N, K, sm_count)
                and _fill(64, 128, "streamk", M, N, K, sm_count) <= 1)
    return True


def heuristic(configs: list[Sm90Config], M: int, N: int, K: int, sm_count: int,
              memory_bandwidth: float = 0.0) -> Sm90Config | None:
    """The config for M rows among ``configs``, or None when none tiles N. Above 128 rows three rules go first: the
    ping-pong tile where K is short (_short_k_ping_pong), 64-token tiles sized to M (_token_tile_64_sized_to_m), and
    at 257..384 rows with a long K three 128-token tiles, 256 columns wide where they pay (_three_token_tiles).
    Else walks M's bucket of :data:`_CHOICES`
    (the 256-column and, up to 128 rows, the 128 x 128 tiles only where they give every SM enough k-tiles, on a fast
    DRAM (``memory_bandwidth``, bytes per second) where they beat two 64-token tiles on the busiest SM);
    failing those (a reduced build), the smallest compiled token tile that covers M among the 128-column and
    narrower ones, else the largest (single CTAs first). The ping-pong choice is skipped where its last x box
    zero-fills many rows (_pingpong_zero_fill_limit) and where 128 x 128 tiles make two waves of thirds
    (_THIRDS_SPLIT), where a 128 x 128 choice becomes its 128 x 256 twin (_thirds_twin). A persistent 256 x 128
    choice may become its multicast pair (_x_multicast_twin)."""
    fitting = [c for c in configs if N % c.tile_n == 0]
    if not fitting:
        return None
    by_shape = {(c.tile_m, c.tile_n, c.schedule, c.scheduler): c
                for c in fitting if (c.cluster_m, c.cluster_n) == (1, 1)}
    short_k = _short_k_ping_pong(by_shape, M, N, K, sm_count)
    if short_k is not None:
        return short_k
    sized = _token_tile_64_sized_to_m(by_shape, M, N, K, sm_count)
    if sized is not None:
        return sized
    three = _three_token_tiles(by_shape, M, N, K, sm_count)
    if three is not None:
        return three
    choices = next(choices for bound, choices in _CHOICES if M <= bound)
    for tile_m, tile_n, schedule, scheduler in choices:
        config = by_shape.get((tile_m, tile_n, schedule, scheduler))
        if config is None or not _pays(tile_m, tile_n, scheduler, M, N, K, sm_count, memory_bandwidth):
            continue
        if schedule == "pingpong" and (_x_rows_zero_filled(tile_m, M) > _pingpong_zero_fill_limit(tile_m, M, K)
                                       or _in_two_waves_of_thirds(M, N, K, sm_count)):
            continue
        if scheduler == "streamk":
            return _thirds_twin(config, by_shape, M, N, K, sm_count)
        tiles = _tiles(tile_m, tile_n, M, N)
        if tiles < _MIN_WAVE.get((tile_m, tile_n), _MIN_WAVE_DEFAULT) * sm_count:
            continue
        waves = math.ceil(tiles / sm_count)
        if waves == 1 or tiles / (waves * sm_count) >= _MIN_WAVE_EFFICIENCY:
            return _x_multicast_twin(config, fitting, M, N, K)
        twin = by_shape.get((tile_m, tile_n, schedule, "streamk"))
        if twin is not None:
            return twin
    singles = [c for c in fitting if (c.cluster_m, c.cluster_n) == (1, 1)] or fitting  # the rules above are theirs
    narrow = [c for c in singles if c.tile_n < _WIDE_TILE_N] or singles
    covering = [c for c in narrow if c.tile_m >= M]
    return min(covering, key=lambda c: (c.tile_m, c.scheduler != "streamk")) if covering else max(
        narrow, key=lambda c: (c.tile_m, c.tile_n))


def _short_k_ping_pong(by_shape: dict, M: int, N: int, K: int, sm_count: int) -> Sm90Config | None:
    """The 256 x 64 ping-pong tile at 129..512 rows where K has at most _SHORT_K_MAX_K_TILES k-tiles (above 256 rows
    only where its tiles fit one wave), else None."""
    if (not 128 < M <= _SHORT_K_PINGPONG_MAX_M or K // TILE_K > _SHORT_K_MAX_K_TILES
            or (M > 256 and _tiles(256, 64, M, N) > sm_count)):
        return None
    return by_shape.get((256, 64, "pingpong", "persistent"))


def _token_tile_64_sized_to_m(by_shape: dict, M: int, N: int, K: int, sm_count: int) -> Sm90Config | None:
    """The 64-token stream-K tile where it computes a 64-row block fewer than 128-token tiles and fills one wave: at
    129..192 rows (see _TOKEN_TILE_64_MAX_M) and above, where 128 x 128 tiles make two waves of thirds (see
    _THIRDS_SPLIT); else None."""
    if M <= 128 or math.ceil(M / 64) * 64 == math.ceil(M / 128) * 128:  # no rows fewer than 128-token tiles
        return None
    thirds = _in_two_waves_of_thirds(M, N, K, sm_count)
    if (M > _TOKEN_TILE_64_MAX_M and not thirds) or _long_split_fills_with_128_tokens(M, N, K, sm_count):
        return None
    fills = {tile_n: _SPLIT_MIN_FILL <= _fill(64, tile_n, "streamk", M, N, K, sm_count) <= 1 for tile_n in _TILE_NS}
    for tile_n in (_WIDE_TILE_N, _NARROW_TILE_N):
        config = by_shape.get((64, tile_n, "coop", "streamk"))
        # At 129..192 rows the 256-column tile also needs _pays's k-tiles per SM, or a long split where the 128-column
        # one fills the wave too (which is judged by fill alone here); in two waves of thirds its fill alone.
        if config is None or (tile_n == _WIDE_TILE_N and not thirds
                              and not _pays(64, tile_n, "streamk", M, N, K, sm_count)
                              and not (fills[_NARROW_TILE_N] and _long_wide_split(M, N, K, sm_count))):
            continue
        if fills[tile_n]:
            return config
    return None


def _long_wide_split(M: int, N: int, K: int, sm_count: int) -> bool:
    """Whether 64 x 256 stream-K tiles split (split_for's split) with at least _TOKEN_TILE_64_WIDE_LONG_SPLIT k-tiles
    a split."""
    split = _split((64, _WIDE_TILE_N), M, N, K, sm_count)
    return split > 1 and K // TILE_K // split >= _TOKEN_TILE_64_WIDE_LONG_SPLIT


def _long_split_fills_with_128_tokens(M: int, N: int, K: int, sm_count: int) -> bool:
    """Whether 128 x 128 tiles at split_for's split fill one wave (_SPLIT_MIN_FILL to 1 of it) with at least
    _LONG_SPLIT_MIN_K_TILES k-tiles a split (see _TOKEN_TILE_64_MAX_M)."""
    if N % _NARROW_TILE_N:
        return False
    tiles = _tiles(128, _NARROW_TILE_N, M, N)
    split = _split((128, _NARROW_TILE_N), M, N, K, sm_count)
    return (split > 1 and _SPLIT_MIN_FILL * sm_count <= tiles * split <= sm_count
            and K // TILE_K // split >= _LONG_SPLIT_MIN_K_TILES)


def _three_token_tiles(by_shape: dict, M: int, N: int, K: int, sm_count: int) -> Sm90Config | None:
    """128-token stream-K tiles at 257..384 rows where K has more than _THREE_TOKEN_TILES_MIN_K_TILES k-tiles: 256
    columns where they pay (_wide_three_token_tiles_pay) or make two waves of thirds (_THIRDS_SPLIT), else 128; else
    None."""
    if not 256 < M <= _THREE_TOKEN_TILES_MAX_M or K // TILE_K <= _THREE_TOKEN_TILES_MIN_K_TILES:
        return None
    wide = by_shape.get((128, _WIDE_TILE_N, "coop", "streamk"))
    if wide is not None and (_wide_three_token_tiles_pay(M, N, K, sm_count)
                             or _in_two_waves_of_thirds(M, N, K, sm_count)):
        return wide
    return by_shape.get((128, _NARROW_TILE_N, "coop", "streamk"))


def _stream_k_spreads(tiles: int, sm_count: int) -> bool:
    """Whether CUTLASS's stream-K scheduler spreads ``tiles`` unsplit tiles' last wave over every SM (it is under half
    full), rather than running them as whole tiles (whole waves, or a last wave at least half full)."""
    last = tiles % sm_count
    return last != 0 and 2 * last < sm_count


def _stream_k_slots(tiles: int, sm_count: int) -> int:
    """The SM slots that ``tiles`` unsplit stream-K tiles take: the tiles where stream-K spreads them
    (_stream_k_spreads), else whole waves."""
    return tiles if _stream_k_spreads(tiles, sm_count) else math.ceil(tiles / sm_count) * sm_count


def _wide_three_token_tiles_pay(M: int, N: int, K: int, sm_count: int) -> bool:
    """Whether 128 x 256 stream-K tiles beat 128 x 128 ones at three token tiles (see _WIDE_TILE_COST): past one wave
    of 128 x 128 tiles, where their SM slots cost less; within one, where 128 x 128 idles a quarter of the GPU and the
    wide tiles give every SM enough k-tiles in at most three stream-K units a tile."""
    narrow, wide = _tiles(128, _NARROW_TILE_N, M, N), _tiles(128, _WIDE_TILE_N, M, N)
    if narrow > sm_count:
        return _WIDE_TILE_COST * _stream_k_slots(wide, sm_count) < _stream_k_slots(narrow, sm_count)
    return (_fill(128, _NARROW_TILE_N, "streamk", M, N, K, sm_count) < _IDLE_FILL
            and _k_tiles_per_sm(128, _WIDE_TILE_N, M, N, K, sm_count) >= _THREE_TOKEN_TILES_WIDE_MIN_K_TILES_PER_SM
            and wide * _THREE_TOKEN_TILES_WIDE_MAX_UNITS >= _SPLIT_MIN_FILL * sm_count)


def _x_multicast_twin(config: Sm90Config, fitting: list[Sm90Config], M: int, N: int, K: int) -> Sm90Config:
    """``config`` (a persistent choice) as its multicast pair where the rule above holds: the 256 x 128 cooperative
    tile (the one measured), from _X_MULTICAST_MIN_M rows and _X_MULTICAST_MIN_K, an even count of weight tiles
    (CUTLASS rounds the grid up to whole clusters, so an odd count would leave one CTA of every token row's last
    pair idle, unmeasured), and the pair compiled (among ``fitting``); else ``config``."""
    if ((config.tile_m, config.tile_n, config.schedule) != _X_MULTICAST_TILE or M < _X_MULTICAST_MIN_M
            or K < _X_MULTICAST_MIN_K or (N // config.tile_n) % 2):
        return config
    twin = dataclasses.replace(config, cluster_m=1, cluster_n=2)
    return twin if twin in fitting else config


def split_for(config: Sm90Config, M: int, N: int, K: int, sm_count: int) -> Sm90Config:
    """``config`` with the split-K the rule above gives it: stream-K configs whose tiles fill at most half the SMs
    split K by ``sm_count // tiles``, at most 6 ways (4 above 128 rows) and with at least 16 k-tiles per split (above
    256 rows the 256-column tile only where the split fills _SPLIT_MIN_FILL of a wave); 128-token tiles 3 ways in two
    waves of thirds (_THIRDS_SPLIT), and unsplit where stream-K's spread beats their split
    (_STREAM_K_SPREAD_COST_K_TILES); others unsplit. The splits share the reduction where _reduce_scatter_pays."""
    if config.scheduler != "streamk":
        return config
    tiles = _tiles(config.tile_m, config.tile_n, M, N)
    token_tile_128 = config.tile_m == 128 and config.tile_n in _TILE_NS
    if token_tile_128 and _in_two_waves_of_thirds(M, N, K, sm_count):
        split = _THIRDS_SPLIT
    else:
        split = _split((config.tile_m, config.tile_n), M, N, K, sm_count)
        if (config.tile_n == _WIDE_TILE_N and M > _WIDE_SPLIT_FILLS_ABOVE_M
                and tiles * split < _SPLIT_MIN_FILL * sm_count):
            split = 1
    if token_tile_128 and _spread_beats_split(tiles, split, K, sm_count):
        split = 1
    return config.with_split_k(split, "reduce_scatter" if _reduce_scatter_pays(config, tiles, split, sm_count) else None)


# The split's reduction: the splits of a tile that run at once can share it by epilogue subtile (split_k_mode
# "reduce_scatter"): split s of S owns subtiles s, s + S, ..., stores the pieces of its accumulators that the others
# own, then adds theirs into its own subtiles and stores those (cpp/mixgemm/sm90/self_resetting_stream_k.cuh). The
# last split's reduction ("serial") brings S - 1 whole partial tiles through one SM; the reduce-scatter brings the
# largest owner's share of each, but makes every split wait for every other. So it pays only where that share is
# small. A/B of tools/sm90_split_fixup_ab.cu against the last split's reduction (4 extra k-tiles at 2-3 splits;
# docs/perf-notes/2026-11-27-sm90-split-k-reduce-scatter.md), by the largest owner's share:
#   1/4 (4 subtiles split 4 or 6, 8 split 4): 0.905x-0.978x on the H100, 0.93x-0.98x on the H200; in the peers
#       harness 8192x2560 at M = 128 (128 x 128 split 6) took 0.92x / 0.96x its time before;
#   3/8 (8 subtiles split 3: 256 x 128 and 128 x 256 tiles): 0.95x-0.99x in the tool on both GPUs, but in the peers
#       harness the narrow-shard cells of 256 x 128 split 3 took 1.005x-1.016x their time before (across runs);
#   1/2 (4 subtiles split 2 or 3, 2 split 2, 3 or 6: 128 x 128, 64 x 128): 0.98x-1.025x on the H100, 1.00x-1.03x
#       on the H200.
_REDUCE_SCATTER_MAX_SHARE = 1 / 4
# The epilogue's subtile (CUTLASS's auto epilogue tile of the cooperative schedule for 16-bit outputs): 128 weight
# columns x 32 tokens, fewer tokens where the tile has fewer (cpp/mixgemm/sm90/kernel_types.cuh asserts the count).
_EPILOGUE_SUBTILE_N, _EPILOGUE_SUBTILE_M = 128, 32


def epilogue_subtiles(config: Sm90Config) -> int:
    """How many epilogue subtiles a cooperative tile of ``config`` has (the reduce-scatter's unit)."""
    return config.tile_n // _EPILOGUE_SUBTILE_N * math.ceil(config.tile_m / _EPILOGUE_SUBTILE_M)


def _splits_in_one_wave(config: Sm90Config, tiles: int, split: int, sm_count: int) -> bool:
    """Whether ``split`` splits of ``tiles`` tiles all run at once on ``sm_count`` SMs: the reduce-scatter's
    condition, which the runner checks against the scheduler's own grid. Single-CTA clusters only: the grid's rounding
    to whole clusters is not modelled here, and no rule picks a split cluster."""
    return split > 1 and config.cluster_m * config.cluster_n == 1 and tiles * split <= sm_count


def _reduce_scatter_pays(config: Sm90Config, tiles: int, split: int, sm_count: int) -> bool:
    """Whether the splits of ``config``'s ``tiles`` tiles should share the reduction (see above): all at once, the
    split owning the most subtiles owning at most _REDUCE_SCATTER_MAX_SHARE of them."""
    subtiles = epilogue_subtiles(config)
    return (_splits_in_one_wave(config, tiles, split, sm_count)
            and math.ceil(subtiles / split) <= _REDUCE_SCATTER_MAX_SHARE * subtiles)


def _spread_beats_split(tiles: int, split: int, K: int, sm_count: int) -> bool:
    """Whether ``tiles`` stream-K tiles of one wave run faster unsplit, spread over every SM (_stream_k_spreads), than
    split ``split`` ways (see _STREAM_K_SPREAD_COST_K_TILES): at two to four SMs a tile, where the split's idle SMs
    cost more k-tiles than the spread's fixups."""
    return (split > 1 and tiles < sm_count < 4 * tiles and _stream_k_spreads(tiles, sm_count)
            and K // TILE_K * (1 / split - tiles / sm_count) >= _STREAM_K_SPREAD_COST_K_TILES)


def _in_two_waves_of_thirds(M: int, N: int, K: int, sm_count: int) -> bool:
    """Whether M x N's 128 x 128 tiles make over half a wave and at most two thirds of one, with enough k-tiles a
    third (see _THIRDS_SPLIT)."""
    tiles = _tiles(128, _NARROW_TILE_N, M, N)
    return (sm_count < 2 * tiles and _THIRDS_SPLIT * tiles <= 2 * sm_count
            and K // TILE_K // _THIRDS_SPLIT >= _THIRDS_MIN_K_TILES_PER_SPLIT)


def _thirds_twin(config: Sm90Config, by_shape: dict, M: int, N: int, K: int, sm_count: int) -> Sm90Config:
    """``config`` (a stream-K choice) as the 128 x 256 stream-K tile where it is 128 x 128 in two waves of thirds and
    the wide tile is compiled and tiles N (see _THIRDS_SPLIT); else ``config``."""
    if (config.tile_m, config.tile_n) != (128, _NARROW_TILE_N) or not _in_two_waves_of_thirds(M, N, K, sm_count):
        return config
    return by_shape.get((128, _WIDE_TILE_N, "coop", "streamk"), config)


@functools.cache
def _is_sm90(index: int) -> bool:
    return torch.cuda.get_device_capability(index) == (9, 0)


class Sm90Path(KernelPath):
    name = "sm90"
    config_type = Sm90Config
    layouts = ("sm90",)

    def parse_name(self, name: str) -> Sm90Config | None:
        match = _NAME.fullmatch(name)
        if not match:
            return None
        tile_m, tile_n, cluster_m, cluster_n, schedule, scheduler, split, letter = match.groups()
        if letter == "p":
            raise ValueError(f"invalid config {name!r}: the sm90 path splits K in the kernel only (_k<n>s serial, "
                             f"_k<n>r reduce-scatter)")
        # "_k1s" / "_k1r": a split of one is no split (the config's own check says so).
        split_k, mode = (1, "none") if split is None else (int(split), _MODE_OF_LETTER[letter])
        return Sm90Config(int(tile_m), int(tile_n), int(cluster_m), int(cluster_n), schedule, scheduler, split_k, mode)

    def fits(self, config: Sm90Config, problem: GemmProblem, key: KernelKey) -> str | None:
        reason = super().fits(config, problem, key)
        if reason is None and config.split_k > problem.K // TILE_K:
            return f"split_k = {config.split_k} is more than K / {TILE_K} = {problem.K // TILE_K} k-tiles"
        return reason

    def choose(self, configs, problem, key, gpu) -> Sm90Config | None:
        if gpu.capability != (9, 0):
            return None  # sm_90a code runs on 9.0 only: another GPU runs an sm90-layout weight on the other paths
        config = heuristic(configs, problem.M, problem.N, problem.K, gpu.sm_count, gpu.memory_bandwidth)
        return None if config is None else split_for(config, problem.M, problem.N, problem.K, gpu.sm_count)

    def split_variants(self, config: Sm90Config, problem: GemmProblem, gpu: Gpu) -> list[Sm90Config]:
        # Every split split_for can choose (3 where sm_count // tiles is 3, e.g. 8192x1280 at M = 512), so auto's
        # pick is always among the configs the sweep times.
        # The reduce-scatter from 3 splits on where they run at once: at 2 each split owns half the tile (it loads as
        # much as the last split does), and it never paid there.
        base = config.with_split_k(1)
        if config.scheduler != "streamk":
            return [base]
        splits = range(2, min(problem.K // TILE_K, MAX_SPLIT_K) + 1)
        tiles = _tiles(config.tile_m, config.tile_n, problem.M, problem.N)
        return ([base] + [base.with_split_k(k, "serial") for k in splits]
                + [base.with_split_k(k, "reduce_scatter") for k in splits
                   if k >= 3 and _splits_in_one_wave(base, tiles, k, gpu.sm_count)])

    def plan(self, config, problem, key, gpu, device):
        if gpu.capability != (9, 0):
            raise RuntimeError(f"gemm: the sm90 path's kernels run on compute capability 9.0 (H100/H200) only; "
                               f"this weight is on {gpu.name}")
        return super().plan(config, problem, key, gpu, device)

    def takes_weight(self, device: torch.device, key: KernelKey, K: int, N: int, G: int) -> bool:
        """Whether a weight of this shape on ``device`` can take the sm90 layout: a Hopper GPU, and a compiled
        sm90 config whose weight tile divides N and whose shape rules K and G meet."""
        if device.type != "cuda" or not torch.cuda.is_available():
            return False
        problem = GemmProblem(1, N, K, G)
        configs = self.compiled(key)
        index = device.index if device.index is not None else torch.cuda.current_device()
        return any(self.fits(c, problem, key) is None for c in configs) and _is_sm90(index)


PATH = Sm90Path()
