#!/usr/bin/env python3
"""Writes the GEMM kernel instantiations: the one list of compiled configs of every path (DESIGN.md section 3).

CMake runs this at configure time: ``generate_kernels.py --set full|minimal --out DIR [--sm90]``. For the
sm80 path it writes one ``gemm_<tile>[_sm90_layout].cu`` per threadblock/warp tile and weight layout
(explicitly instantiating ``launch_gemm`` for each stage count, activation type and weight width) and ``gemm_registry.inc``, the table
the runner dispatches from. With ``--sm90`` it also writes the sm90 path's instances (one
``sm90_<config>_<mode>_<dtype>_<bits>.cu`` per kernel: each CUTLASS 3.x kernel takes about a minute of
nvcc, so one kernel per file lets builds use every core) and ``sm90_registry.inc``. It prints the sm80 sources, then a line
``SM90:`` and the sm90 sources (compiled only for sm_90a).
"""

from __future__ import annotations

import argparse
import pathlib

TILE_K = 64  # the main loop's k-tile; the packed layout and group sizes are built around it

# (tile_m, tile_n, warp_m, warp_n): stage counts compiled for it.
#  - 16 x N: decode (M <= 16), bandwidth bound: narrow warps (16 x 32) spread the weight stream.
#  - 32/64 x 128 and 64 x 256: the middle (M = 17..256), where the weight stream and the mma work are
#    comparable.
#  - 128 x 128/256: large M, compute bound. 128 x 256 is the one 8-warp tile: its warps hand stages over
#    through per-stage mbarriers, whose copies run a k-tile later than a __syncthreads() loop's, so it
#    takes 4 stages (threadblock/mainloop.cuh, kStageBarriers).
# Every tile gives each warp all of the tile's rows (warp_m = tile_m): a converted weight fragment then
# feeds every row of the tile, so no two warps convert the same weights. Against the earlier
# 2-warps-along-M tiles (64 x 128 with 32 x 64 warps, 128 x 256 with 64 x 64) the same threadblock tiles
# took 5-15% less time (tools/path_probe.py --paths sm80, H100, BENCHMARKS.md, issue 10).
FULL = {
    (16, 64, 16, 32): (2, 3, 4, 5),
    (16, 128, 16, 32): (3, 4, 5),
    (16, 256, 16, 64): (3, 4),
    (32, 128, 32, 32): (3, 4),
    (64, 128, 64, 32): (3, 4),
    (64, 256, 64, 64): (3,),
    (128, 128, 128, 32): (4,),
    (128, 256, 128, 32): (4,),
}
# The heuristic's first choice per regime (python/mixgemm/tuning.py), enough to exercise every code path
# (CI's 2-core build): 16 x 128 is the M <= 16 tile of sm80-layout weights, 16 x 256 that of sm90-layout ones.
MINIMAL = {
    (16, 128, 16, 32): (4,),
    (16, 256, 16, 64): (3,),
    (64, 128, 64, 32): (4,),
    (128, 256, 128, 32): (4,),
}
# The sm80 path's tiles also compiled for sm90-layout weights (threadblock/packed_b_tile.cuh), so the GPU's
# one layout serves small M through mma.sync: on an H100 the sm90 GEMM's 16..64-token tiles spend 4-6 us
# of fixed cost per launch that these tiles do not (BENCHMARKS.md, "Small M on Hopper"). Each must also be
# a tile of the same set's sm80-layout table (the registry lists configs per layout).
SM90_LAYOUT_FULL = {
    (16, 128, 16, 32): (4,),
    (16, 256, 16, 64): (3, 4),
    (32, 128, 32, 32): (3, 4),
    (64, 128, 64, 32): (3, 4),
}
SM90_LAYOUT_MINIMAL = {
    (16, 256, 16, 64): (3,),
    (64, 128, 64, 32): (4,),
}
SM80_LAYOUTS = {"sm80": "kSm80", "sm90": "kSm90"}
# Decode path (cpp/include/mixgemm/gemv): (m_tiles, warps per block). m_tiles n8 mma tiles take up to
# 8 * m_tiles rows of x; each instance is compiled for every fold: the k rows one scale row covers in the
# kernel, the largest of 128, 64 and 32 that divides the group size. Every set builds all three: the
# heuristic picks 4 or 8 warps by shape and M (python/mixgemm/tuning.py), and the m16 kernel is there for
# the tuner and the GPU tests.
GEMV_CONFIGS = ((1, 4), (1, 8), (2, 4))
GEMV_FOLD_K = (128, 64, 32)
# Weight layouts the decode kernels read (cpp/include/mixgemm/gemv/weight_layouts.cuh): each config is
# compiled for both, since either may be the layout prepack picked for the GPU.
GEMV_LAYOUTS = {"sm80": "kSm80", "sm90": "kSm90"}
ACT_TYPES = {"__half": "kFloat16", "__nv_bfloat16": "kBFloat16"}
WEIGHT_BITS = (4, 8)


def tile_name(tile_m: int, tile_n: int, warp_m: int, warp_n: int) -> str:
    return f"{tile_m}x{tile_n}x{TILE_K}_w{warp_m}x{warp_n}"


def gemm_sets(name: str) -> dict[str, dict]:
    """The sm80 path's kernel sets of a build, per weight layout: "full", else the minimal ones (the "minimal"
    and "sweep" builds)."""
    if name == "full":
        return {"sm80": FULL, "sm90": SM90_LAYOUT_FULL}
    return {"sm80": MINIMAL, "sm90": SM90_LAYOUT_MINIMAL}


def template_args(cuda_type: str, bits: int, layout: str, tile: tuple[int, int, int, int], stages: int) -> str:
    tile_m, tile_n, warp_m, warp_n = tile
    return f"{cuda_type}, {bits}, WeightLayout::{SM80_LAYOUTS[layout]}, {tile_m}, {tile_n}, {warp_m}, {warp_n}, {stages}"


def write_if_changed(path: pathlib.Path, text: str) -> None:
    # Unchanged files keep their timestamps, so re-running CMake does not recompile every instance.
    if not path.exists() or path.read_text() != text:
        path.write_text(text)


def generate(kernel_sets: dict[str, dict], out: pathlib.Path) -> list[pathlib.Path]:
    """One .cu per tile and weight layout (every stage count, dtype and width) and gemm_registry.inc.
    ``kernel_sets`` maps a layout to its {tile: stage counts}; the sm90 layout's must be a subset of the sm80
    layout's."""
    for tile, stages in kernel_sets.get("sm90", {}).items():
        if not set(stages) <= set(kernel_sets["sm80"].get(tile, ())):
            raise ValueError(f"sm90-layout tile {tile} stages {stages} are not all compiled for the sm80 layout")
    out.mkdir(parents=True, exist_ok=True)
    header = "// Generated by tools/generate_kernels.py: do not edit.\n"
    sources = []
    externs, rows = [], []
    for layout, kernel_set in kernel_sets.items():
        for tile, stage_list in kernel_set.items():
            lines = [header, '#include "mixgemm/gemm/device/launch.cuh"\n', "namespace mixgemm::gemm {\n"]
            for stages in stage_list:
                for cuda_type, act in ACT_TYPES.items():
                    for bits in WEIGHT_BITS:
                        args = template_args(cuda_type, bits, layout, tile, stages)
                        lines.append(f"template void launch_gemm<{args}>(const GemmArgs&, cudaStream_t);\n")
                        externs.append(f"extern template void launch_gemm<{args}>(const GemmArgs&, cudaStream_t);\n")
                        tile_m, tile_n, warp_m, warp_n = tile
                        rows.append(
                            f"    {{{{{tile_m}, {tile_n}, {TILE_K}, {warp_m}, {warp_n}, {TILE_K}, {stages}}}, "
                            f"ActType::{act}, {bits}, WeightLayout::{SM80_LAYOUTS[layout]}, &launch_gemm<{args}>}},\n"
                        )
            lines.append("}  // namespace mixgemm::gemm\n")
            suffix = "" if layout == "sm80" else f"_{layout}_layout"
            path = out / f"gemm_{tile_name(*tile)}{suffix}.cu"
            write_if_changed(path, "".join(lines))
            sources.append(path)
    registry = [header, "namespace mixgemm::gemm {\n", *externs,
                "const RegistryEntry kRegistry[] = {\n", *rows, "};\n", "}  // namespace mixgemm::gemm\n"]
    write_if_changed(out / "gemm_registry.inc", "".join(registry))
    return sources


def generate_gemv(configs, out: pathlib.Path) -> list[pathlib.Path]:
    """One .cu per decode config and weight layout (every dtype, width and fold) and gemv_registry.inc."""
    header = "// Generated by tools/generate_kernels.py: do not edit.\n"
    sources, externs, rows = [], [], []
    for m_tiles, warps in configs:
        for layout, layout_enum in GEMV_LAYOUTS.items():
            lines = [header, '#include "mixgemm/gemv/launch_gemv.cuh"\n', "namespace mixgemm::gemv {\n"]
            for cuda_type, act in ACT_TYPES.items():
                for bits in WEIGHT_BITS:
                    for fold_k in GEMV_FOLD_K:
                        args = f"{cuda_type}, {bits}, {m_tiles}, {warps}, {fold_k}, gemm::WeightLayout::{layout_enum}"
                        decl = f"template void launch_gemv<{args}>(const gemm::GemmArgs&, cudaStream_t);\n"
                        lines.append(decl)
                        externs.append("extern " + decl)
                        rows.append(f"    {{{{{m_tiles}, {warps}}}, gemm::ActType::{act}, {bits}, {fold_k}, "
                                    f"gemm::WeightLayout::{layout_enum}, &launch_gemv<{args}>}},\n")
            lines.append("}  // namespace mixgemm::gemv\n")
            path = out / f"gemv_m{8 * m_tiles}_w{warps}_{layout}.cu"
            write_if_changed(path, "".join(lines))
            sources.append(path)
    registry = [header, "namespace mixgemm::gemv {\n", *externs,
                "const RegistryEntry kGemvRegistry[] = {\n", *rows, "};\n", "}  // namespace mixgemm::gemv\n"]
    write_if_changed(out / "gemv_registry.inc", "".join(registry))
    return sources


# ---------------------------------------------------------------------------------------------------------
# sm90 path: CUTLASS 3.x warp-specialized wgmma + TMA mixed-input kernels (cpp/include/mixgemm/sm90/).
# A schedule is (tile_m, tile_n, cluster_m, cluster_n, schedule, scheduler) in the library's naming: tile_m
# tokens (CUTLASS tile N, the wgmma N: a multiple of 8 up to 256), tile_n weight columns (CUTLASS tile M:
# 128 for cooperative = 64 rows per consumer warpgroup x 2, 64 for ping-pong); tile_k is 64 (128 bytes of
# 16-bit x). cluster_m CTAs along M share the weight tile by TMA multicast, cluster_n along N share x's.
# A kernel is one schedule x activation type x weight width x conversion mode (Machete's split: type
# configs x schedule configs x specializations), and every set below is built from those lists.
SM90_SCHEDULES = {"coop": "kCooperative", "pingpong": "kPingpong"}
SM90_SCHEDULERS = {"persistent": "kPersistent", "streamk": "kStreamK"}
SM90_TILE_K = 64
# FULL holds what the dispatcher uses (python/mixgemm/tuning.py, _SM90_CHOICES), chosen by
# tools/path_probe.py on an H100 over the DESIGN shapes (BENCHMARKS.md):
#  - 16/32/64/128 x 128 cooperative stream-K: M <= 128, each the token tile that matches M; the weight
#    stream dominates and stream-K spreads the 1.7-wave tail of 224 weight tiles on 132 SMs.
#  - 256 x 128 cooperative, persistent and stream-K: M > 128 where its tiles fill the GPU (the stream-K twin
#    where the last wave is short, e.g. 3.4 waves at 8192 x 28672, M = 512).
#  - 256 x 64 ping-pong: M > 128 on narrow weights, where 256 x 128 tiles leave SMs idle; 128 x 128 stream-K
#    where both do.
SM90_FULL = [
    (16, 128, 1, 1, "coop", "streamk"),
    (32, 128, 1, 1, "coop", "streamk"),
    (64, 128, 1, 1, "coop", "streamk"),
    (128, 128, 1, 1, "coop", "streamk"),
    (256, 64, 1, 1, "pingpong", "persistent"),
    (256, 128, 1, 1, "coop", "persistent"),
    (256, 128, 1, 1, "coop", "streamk"),
]
# Further candidates the device sweep compares (MIXGEMM_KERNELS=sweep, tools/path_probe.py); none of them
# won a DESIGN cell by more than the run-to-run spread (~5% at M = 4096): persistent twins of the small
# tiles, 128 x 128 persistent, 256 x 128 with a 2 x 1 cluster sharing the weight tile by TMA multicast, and
# 128 x 64 ping-pong (M = 256 on 4096 x 4096: 19.6 us against 20.1 for 128 x 128 stream-K split 2 ways; on
# 11008 x 4096 47.9 against 42.2).
SM90_CANDIDATES = SM90_FULL + [
    (128, 64, 1, 1, "pingpong", "persistent"),
    (32, 128, 1, 1, "coop", "persistent"),
    (64, 128, 1, 1, "coop", "persistent"),
    (128, 128, 1, 1, "coop", "persistent"),
    (256, 128, 2, 1, "coop", "persistent"),
]
# CI's 2-core build: one schedule, each dtype x width (every code path of the runner and epilogue), and
# its stream-K twin for fp16 x int4 only, so CI compiles our stream-K scheduler (self_resetting_stream_k.cuh)
# and a minimal GPU build tests it.
SM90_MINIMAL = [
    (128, 128, 1, 1, "coop", "persistent"),
]
SM90_MINIMAL_STREAM_K = (128, 128, 1, 1, "coop", "streamk")
# Conversion modes: "scale" for symmetric weights (W = q * s), "offset" with folded zero points
# (W = q * s + offset). Only "offset" is built: symmetric weights run it with zero offsets. Against the
# scale-only specialization (tools/path_probe.py, H100, 24 cells of the DESIGN shapes at M >= 64 per
# schedule) the offset kernel took 0.94x-1.07x (mean 1.00x) of its time for 256 x 128, 0.93x-1.09x (1.01x)
# for 64 x 128 and 1.02x-1.23x (1.05x) for 128 x 128 persistent: not worth doubling the build. The runner
# and python/mixgemm/ops.py still take a "scale" kernel where a set compiles one (the sweep set does).
SM90_MODES = {"scale": "kScale", "offset": "kScaleOffset"}
SM90_BUILT_MODES = ("offset",)


def sm90_kernels(schedules, modes, acts=tuple(ACT_TYPES), bits=WEIGHT_BITS) -> list[tuple]:
    """Every (schedule, mode, cuda activation type, bits) of the given lists."""
    return [(cfg, mode, act, b) for cfg in schedules for mode in modes for act in acts for b in bits]


def sm90_set(name: str) -> list[tuple]:
    if name == "full":
        return sm90_kernels(SM90_FULL, SM90_BUILT_MODES)
    minimal = sm90_kernels(SM90_MINIMAL, SM90_BUILT_MODES) + sm90_kernels([SM90_MINIMAL_STREAM_K],
                                                                           SM90_BUILT_MODES, ("__half",), (4,))
    if name == "minimal":
        return minimal
    # sweep: every candidate for fp16 x int4 with zero points, scale-only for three schedules (to keep
    # measuring what the scale-only specialization buys), plus the minimal set for the other types' tests.
    sweep = sm90_kernels(SM90_CANDIDATES, ("offset",), ("__half",), (4,))
    scale_only = [(64, 128, 1, 1, "coop", "persistent"), (128, 128, 1, 1, "coop", "persistent"),
                  (256, 128, 1, 1, "coop", "persistent")]
    sweep += sm90_kernels(scale_only, ("scale",), ("__half",), (4,))
    return sweep + [k for k in minimal if k not in sweep]


def sm90_name(cfg: tuple) -> str:
    tile_m, tile_n, cluster_m, cluster_n, schedule, scheduler = cfg
    return f"{tile_m}x{tile_n}x{SM90_TILE_K}_c{cluster_m}x{cluster_n}_{schedule}_{scheduler}"


def generate_sm90(kernels: list[tuple], out: pathlib.Path) -> list[pathlib.Path]:
    """One .cu per kernel (each takes about a minute of nvcc, so builds use every core) and
    sm90_registry.inc."""
    header = "// Generated by tools/generate_kernels.py: do not edit.\n"
    sources, externs, rows = [], [], []
    for cfg, mode, cuda_type, bits in kernels:
        tile_m, tile_n, cluster_m, cluster_n, schedule, scheduler = cfg
        act = ACT_TYPES[cuda_type]
        targs = (f"ActType::{act}, {bits}, Mode::{SM90_MODES[mode]}, {tile_m}, {tile_n}, {cluster_m}, "
                 f"{cluster_n}, Schedule::{SM90_SCHEDULES[schedule]}, "
                 f"Scheduler::{SM90_SCHEDULERS[scheduler]}")
        decls = [f"template void launch_sm90<{targs}>(const Args&, cudaStream_t);\n",
                 f"template Workspace workspace_sm90<{targs}>(const Args&);\n"]
        externs += ["extern " + d for d in decls]
        rows.append(
            f"    {{{{{tile_m}, {tile_n}, {SM90_TILE_K}, {cluster_m}, {cluster_n}, "
            f"Schedule::{SM90_SCHEDULES[schedule]}, Scheduler::{SM90_SCHEDULERS[scheduler]}}}, "
            f"ActType::{act}, {bits}, Mode::{SM90_MODES[mode]}, &launch_sm90<{targs}>, "
            f"&workspace_sm90<{targs}>}},\n"
        )
        text = "".join([header, '#include "mixgemm/sm90/launch.cuh"\n', "namespace mixgemm::sm90 {\n",
                        *decls, "}  // namespace mixgemm::sm90\n"])
        dtype = "bf16" if act == "kBFloat16" else "fp16"
        path = out / f"sm90_{sm90_name(cfg)}_{mode}_{dtype}_int{bits}.cu"
        write_if_changed(path, text)
        sources.append(path)
    registry = [header, "namespace mixgemm::sm90 {\n", *externs,
                "const RegistryEntry kRegistry[] = {\n", *rows, "};\n", "}  // namespace mixgemm::sm90\n"]
    write_if_changed(out / "sm90_registry.inc", "".join(registry))
    return sources


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--set", choices=["full", "minimal", "sweep"], default="full",
                        help="full: every config; minimal: CI's few; sweep: minimal sm80 tiles, every decode "
                             "config and every sm90 candidate for fp16 x int4 (the device sweep's build)")
    parser.add_argument("--out", type=pathlib.Path, required=True)
    parser.add_argument("--sm90", action="store_true", help="also write the sm90 path's instances")
    args = parser.parse_args()
    sources = generate(gemm_sets(args.set), args.out)
    sources += generate_gemv(GEMV_CONFIGS, args.out)
    print(";".join(str(s) for s in sources))
    if args.sm90:
        sm90 = generate_sm90(sm90_set(args.set), args.out)
        print("SM90:" + ";".join(str(s) for s in sm90))


if __name__ == "__main__":
    main()
