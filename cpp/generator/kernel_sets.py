"""The kernels each build compiles, per path: the one list (cpp/generator/generate.py writes the instances and
registries from it; python/mixgemm/paths/*.py hold the heuristics that choose among them, and
tests/dispatch/test_heuristic_kernel_sets.py checks that no heuristic names a kernel a set does not compile).

Kernel sets: "full" (the library's default), "minimal" (CI's 2-core build: the heuristic's first choice per
regime, every code path of every runner), "sweep" (the device sweep's candidates; tools/path_probe.py).

A kernel is a path's config x kernel key (activation type, weight bits, weight layout, quant mode): every
config is compiled for both activation types and both widths unless a list says otherwise.
"""

from __future__ import annotations

ACT_TYPES = {"fp16": ("__half", "kFloat16"), "bf16": ("__nv_bfloat16", "kBFloat16")}
WEIGHT_BITS = (4, 8)
LAYOUTS = {"sm80": "kSm80", "sm90": "kSm90"}
QUANT_MODES = {"scale": "kScale", "scale_offset": "kScaleOffset"}
SETS = ("full", "minimal", "sweep")

# ---------------------------------------------------------------------------------------------------------
# sm80 path (cpp/mixgemm/sm80): (tile_m, tile_n, warp_m, warp_n) -> stage counts; tile_k = warp_k = 64. Every
# tile is compiled with both schedules (data-parallel/split-K and stream-K, sm80/kernel/*.cuh).
#  - 16 x N: decode (M <= 16), bandwidth bound: narrow warps (16 x 32) spread the weight stream.
#  - 32/64 x 128 and 64 x 256: the middle (M = 17..256), where the weight stream and the mma work are
#    comparable.
#  - 128 x 128/256: large M, compute bound. 128 x 256 is the one 8-warp tile: its warps hand stages over
#    through per-stage mbarriers, whose copies run a k-tile later than a __syncthreads() loop's, so it
#    takes 4 stages (sm80/threadblock/mainloop.cuh, kStageBarriers).
# Every tile gives each warp all of the tile's rows (warp_m = tile_m): a converted weight fragment then feeds
# every row of the tile, so no two warps convert the same weights (docs/perf-notes/, the sm80 loader study).
SM80_TILE_K = 64
SM80_FULL = {
    (16, 64, 16, 32): (2, 3, 4, 5),
    (16, 128, 16, 32): (3, 4, 5),
    (16, 256, 16, 64): (3, 4),
    (32, 128, 32, 32): (3, 4),
    (64, 128, 64, 32): (3, 4),
    (64, 256, 64, 64): (3,),
    (128, 128, 128, 32): (4,),
    (128, 256, 128, 32): (4,),
}
# The heuristic's first choice per regime: 16 x 128 is the M <= 16 tile of both layouts' weights, 64 x 128 the
# middle, 128 x 256 large M; 16 x 256 (the runner-up at M <= 16) keeps the code of 64-column warps built.
SM80_MINIMAL = {
    (16, 128, 16, 32): (4,),
    (16, 256, 16, 64): (3,),
    (64, 128, 64, 32): (4,),
    (128, 256, 128, 32): (4,),
}
# The tiles also compiled for sm90-layout weights (sm80/threadblock/packed_b_tile.cuh reads that layout), so
# a Hopper GPU's one layout serves small M through mma.sync, where the sm90 GEMM's fixed cost per launch is
# 4-6 us. Each is a tile of the same set's sm80-layout table.
SM80_ON_SM90_LAYOUT_FULL = {
    (16, 128, 16, 32): (4,),
    (16, 256, 16, 64): (3, 4),
    (32, 128, 32, 32): (3, 4),
    (64, 128, 64, 32): (3, 4),
}
SM80_ON_SM90_LAYOUT_MINIMAL = {
    (16, 128, 16, 32): (4,),
    (16, 256, 16, 64): (3,),
    (64, 128, 64, 32): (4,),
}
SM80_SCHEDULES = {"data_parallel": ("kDataParallel", "kernel::DataParallel"),
                  "stream_k": ("kStreamK", "kernel::StreamK")}


def sm80_tiles(kernel_set: str) -> dict[str, dict[tuple, tuple]]:
    """Per weight layout, {(tile_m, tile_n, warp_m, warp_n): stage counts} of a set ("sweep" builds the
    minimal sm80 tiles)."""
    if kernel_set == "full":
        return {"sm80": SM80_FULL, "sm90": SM80_ON_SM90_LAYOUT_FULL}
    return {"sm80": SM80_MINIMAL, "sm90": SM80_ON_SM90_LAYOUT_MINIMAL}


# ---------------------------------------------------------------------------------------------------------
# Grouped GEMM (mixture-of-experts, cpp/mixgemm/moe): the sm80 kernel's tiles walked by its grouped schedule
# (sm80/kernel/grouped.cuh), sm80-layout weights only, each compiled with the plain and the gated (SiLU(gate) *
# up) epilogue. tile_m is also the routing's block: the tokens an expert gets are padded to a multiple of it,
# so the heuristic (python/mixgemm/moe/heuristic.py) picks it by the tokens per expert: 16 for decode, 32 and
# 64 in between, 128 once experts get hundreds of tokens. 16 x 64 is for decode on few experts, where 128-wide
# tiles would leave SMs idle (Mixtral's down projection at one token: 2 experts x 4096 / 128 = 64 blocks).
MOE_FULL = {
    (16, 64, 16, 32): (4,),
    (16, 128, 16, 32): (4,),
    (32, 128, 32, 32): (4,),
    (64, 128, 64, 32): (4,),
    (128, 128, 128, 32): (4,),
    (128, 256, 128, 32): (4,),
}
MOE_MINIMAL = {
    (16, 128, 16, 32): (4,),
    (64, 128, 64, 32): (4,),
}
# Experts packed in the sm90 layout (the layout prepack_experts gives on Hopper, where the sm90 form below runs
# the large token counts) take the same kernels for the counts below it: the tiles up to 128 x 128.
MOE_ON_SM90_LAYOUT_FULL = {tile: stages for tile, stages in MOE_FULL.items() if tile[1] <= 128}
MOE_ON_SM90_LAYOUT_MINIMAL = {(16, 128, 16, 32): (4,)}
MOE_EPILOGUES = {"plain": ("kPlain", "false"), "gated": ("kGated", "true")}
# The decode form of the grouped GEMM: the decode path's GEMV (one m-tile, 8 rows) per routing block of 8, for
# experts that get a few tokens each (python/mixgemm/moe/heuristic.py); warps per block, every set, each for
# every fold (DECODE_FOLD_K) and epilogue.
MOE_DECODE_WARPS = (4,)


def moe_tiles(kernel_set: str) -> dict[str, dict[tuple, tuple]]:
    """{layout: {(tile_m, tile_n, warp_m, warp_n): stage counts}} of the grouped GEMM in a set ("sweep" builds
    the full lists: the sweep compares their tiles)."""
    if kernel_set == "minimal":
        return {"sm80": MOE_MINIMAL, "sm90": MOE_ON_SM90_LAYOUT_MINIMAL}
    return {"sm80": MOE_FULL, "sm90": MOE_ON_SM90_LAYOUT_FULL}


# The sm90 form of the grouped GEMM (cpp/mixgemm/moe/sm90): CUTLASS 3.x's pointer-array mixed-input kernel,
# cooperative, over sm90-layout experts, for experts that get many tokens each (python/mixgemm/moe/heuristic.py).
# (tile_m tokens, tile_n weight columns): the token tile follows the tokens per expert (64 from 64, 128, 256 from
# 1024); scale+offset kernels only.
MOE_SM90_FULL = [(64, 128), (128, 128), (256, 128)]
MOE_SM90_MINIMAL = [(128, 128)]


def moe_sm90_set(kernel_set: str) -> list[tuple]:
    """[(tile_m, tile_n, act, bits)] of the sm90 form in a set (CI's minimal: one fp16 x int4 kernel)."""
    if kernel_set == "minimal":
        return [(m, n, "fp16", 4) for m, n in MOE_SM90_MINIMAL]
    return [(m, n, act, bits) for m, n in MOE_SM90_FULL for act in ACT_TYPES for bits in WEIGHT_BITS]

# ---------------------------------------------------------------------------------------------------------
# Decode path (cpp/mixgemm/decode): (m_tiles, warps per block), for up to 8 * m_tiles rows of x. Each is
# compiled for every fold (the k rows one scale row covers in the kernel: the largest of 128, 64 and 32 that
# divides the group size) and both layouts, since either may be the layout prepack picked for the GPU. Every
# set builds all three: the heuristic picks 4 or 8 warps by shape and M, and the m16 kernel is there for the
# tuner and the tests.
DECODE_CONFIGS = ((1, 4), (1, 8), (2, 4))
DECODE_FOLD_K = (128, 64, 32)

# ---------------------------------------------------------------------------------------------------------
# sm90 path (cpp/mixgemm/sm90): (tile_m, tile_n, cluster_m, cluster_n, schedule, scheduler) in the library's
# naming: tile_m tokens (CUTLASS tile N, the wgmma N), tile_n weight columns (CUTLASS tile M: 128 for
# cooperative = 64 rows per consumer warpgroup x 2, 64 for ping-pong); tile_k is 64 (128 bytes of 16-bit x).
# cluster_m CTAs along M share the weight tile by TMA multicast, cluster_n along N share x's. A kernel is one
# schedule x activation type x weight width x quant mode (Machete's split: type configs x schedules x
# specializations).
SM90_TILE_K = 64
SM90_SCHEDULES = {"coop": "kCooperative", "pingpong": "kPingpong"}
SM90_SCHEDULERS = {"persistent": "kPersistent", "streamk": "kStreamK"}
# What the heuristic uses (python/mixgemm/paths/sm90.py), chosen by tools/path_probe.py and the sweep on an H100:
#  - 16/32/64/128 x 128 cooperative stream-K: M <= 128, each the token tile that matches M (two 64-row tiles at
#    M = 65..128 on small weights);
#  - 32/64/128 x 256 cooperative stream-K: the same on large weights (256 weight columns: CUTLASS tile M 256,
#    two 64-row wgmmas per consumer warpgroup), where every SM streams enough of their k-tiles;
#  - 256 x 128 cooperative, persistent and stream-K: M > 128 where its tiles fill the GPU;
#  - 256 x 64 ping-pong: M > 128 on narrow weights, where 256 x 128 tiles leave SMs idle;
#  - 256 x 128 cooperative persistent in a cluster of two along the weight columns (x's k-tiles shared by TMA
#    multicast): from M = 1024 (K >= 4096), where the kernels run at the board's power cap and the nearly
#    halved L2 traffic buys clock (python/mixgemm/paths/sm90.py, _X_MULTICAST_MIN_M).
SM90_FULL = [
    (16, 128, 1, 1, "coop", "streamk"),
    (32, 128, 1, 1, "coop", "streamk"),
    (64, 128, 1, 1, "coop", "streamk"),
    (128, 128, 1, 1, "coop", "streamk"),
    (32, 256, 1, 1, "coop", "streamk"),
    (64, 256, 1, 1, "coop", "streamk"),
    (128, 256, 1, 1, "coop", "streamk"),
    (256, 64, 1, 1, "pingpong", "persistent"),
    (256, 128, 1, 1, "coop", "persistent"),
    (256, 128, 1, 1, "coop", "streamk"),
    (256, 128, 1, 2, "coop", "persistent"),
]
# Further candidates the device sweep compares; none won a DESIGN cell by more than the run-to-run spread (the
# 128 x 128 clusters of two along the weight columns came closest: 0.95x-0.99x at M = 128 on 4096x4096 and
# 11008x4096).
SM90_CANDIDATES = SM90_FULL + [
    (128, 64, 1, 1, "pingpong", "persistent"),
    (32, 128, 1, 1, "coop", "persistent"),
    (64, 128, 1, 1, "coop", "persistent"),
    (128, 128, 1, 1, "coop", "persistent"),
    (256, 128, 2, 1, "coop", "persistent"),
    (16, 256, 1, 1, "coop", "streamk"),
    (128, 256, 1, 1, "coop", "persistent"),
    (128, 128, 1, 2, "coop", "persistent"),
    (128, 128, 1, 2, "coop", "streamk"),
]
# CI's 2-core build: one schedule for each dtype x width (every code path of the runner and epilogue), and its
# stream-K twin for fp16 x int4 only, so CI compiles our stream-K scheduler (sm90/self_resetting_stream_k.cuh).
SM90_MINIMAL = [(128, 128, 1, 1, "coop", "persistent")]
SM90_MINIMAL_STREAM_K = (128, 128, 1, 1, "coop", "streamk")
# Only the scale+offset kernels are built in full: symmetric weights run them with zero offsets. Against the
# scale-only specialization the offset kernel took 0.93x-1.23x (mean 1.00x-1.05x) of its time over 24 cells
# per schedule: not worth doubling the build (docs/perf-notes/, the sm90 study). The sweep set keeps three
# scale-only kernels to go on measuring it.
SM90_BUILT_MODES = ("scale_offset",)


def sm90_kernels(schedules, modes, acts=tuple(ACT_TYPES), bits=WEIGHT_BITS) -> list[tuple]:
    """Every (schedule, quant mode, activation type, bits) of the given lists."""
    return [(cfg, mode, act, b) for cfg in schedules for mode in modes for act in acts for b in bits]


def sm90_set(kernel_set: str) -> list[tuple]:
    minimal = sm90_kernels(SM90_MINIMAL, SM90_BUILT_MODES) + sm90_kernels([SM90_MINIMAL_STREAM_K],
                                                                           SM90_BUILT_MODES, ("fp16",), (4,))
    if kernel_set == "full":
        return sm90_kernels(SM90_FULL, SM90_BUILT_MODES)
    if kernel_set == "minimal":
        return minimal
    sweep = sm90_kernels(SM90_CANDIDATES, ("scale_offset",), ("fp16",), (4,))
    scale_only = [(64, 128, 1, 1, "coop", "persistent"), (128, 128, 1, 1, "coop", "persistent"),
                  (256, 128, 1, 1, "coop", "persistent")]
    sweep += sm90_kernels(scale_only, ("scale",), ("fp16",), (4,))
    return sweep + [k for k in minimal if k not in sweep]


# ---------------------------------------------------------------------------------------------------------
# The whole set as (path, config tuple, key), the registry rows without their launchers: what the extension
# reports for a build of that set (its compiled_configs), for the tests that tie heuristics to kernel sets.
# Config tuples are the ones the binding exchanges (cpp/bindings/paths.h).


def kernels(kernel_set: str, sm90: bool = True) -> list[tuple[str, tuple, tuple]]:
    """[(path, config, (act, bits, layout, quant))] of a set; ``sm90=False``: a build without sm_90a."""
    rows = []
    for layout, tiles in sm80_tiles(kernel_set).items():
        for (tile_m, tile_n, warp_m, warp_n), stages in tiles.items():
            for s in stages:
                config = (tile_m, tile_n, SM80_TILE_K, warp_m, warp_n, SM80_TILE_K, s)
                rows += [("sm80", config, (act, bits, layout, "scale_offset"))
                         for act in ACT_TYPES for bits in WEIGHT_BITS]
    for config in DECODE_CONFIGS:
        rows += [("decode", config, (act, bits, layout, "scale_offset"))
                 for layout in LAYOUTS for act in ACT_TYPES for bits in WEIGHT_BITS]
    if sm90:
        for (tile_m, tile_n, cluster_m, cluster_n, schedule, scheduler), mode, act, bits in sm90_set(kernel_set):
            config = (tile_m, tile_n, SM90_TILE_K, cluster_m, cluster_n, schedule, scheduler)
            rows.append(("sm90", config, (act, bits, "sm90", mode)))
    return rows
