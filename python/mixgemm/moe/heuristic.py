"""Which grouped-GEMM form and tile runs a mixture-of-experts call: the sm90 form (CUTLASS 3.x wgmma) once
experts get many tokens each and the weights are in the sm90 layout; else the routing block (tile_m) by the
tokens an expert gets and the tile width by how many blocks the GPU gets. Beside the kernel lists it picks from
(cpp/generator/kernel_sets.py, MOE_FULL / MOE_MINIMAL / MOE_SM90_FULL); it only ever names configs this build
compiled.
"""

from __future__ import annotations

import functools

from ..kernel_key import KernelKey

# tile_m by the expected slots per expert (slots / experts, uniform routing): a block holds tile_m of one
# expert's tokens, so each expert's last block is padding on average half a tile: tiles no taller than the
# tokens an expert gets, 128 (the compute-bound tile) once they get hundreds. Up to 8 tokens per expert the
# decode form (the decode path's GEMV, blocks of 8) reads each expert's weights once at the decode path's
# bandwidth, where a 16-row mma tile streams them at 1.3-2x the read floor (BENCHMARKS.md, M = 16).
_TILE_M_BY_LOAD = ((8, 8), (16, 16), (32, 32), (96, 64))  # (slots per expert up to, tile_m); beyond: 128
_DECODE_FORM = "decode_m"  # the decode form's config names: decode_m8_w4 (8 rows, 4 warps), 64-column strips
# 128 x 256 (8 warps, stage barriers) is the large-M tile of the dense path; it pays once an expert's block
# count makes its 256-wide strips outnumber the SMs several times over.
_WIDE_MIN_LOAD = 512


# The sm90 form's config names: sm90_<tile_m>x<tile_n>x64_grouped. Its routing is unpadded (blocks of 1 row).
_SM90_FORM = "sm90_"
# Slots per expert from which the sm90 form runs. On the H100 (docs/perf-notes/2026-11-26-moe-sm90-form.md,
# Mixtral, Qwen3-30B-A3B, DeepSeek-V2-Lite) it took 0.62x-0.91x of the sm80 tiles' time from 64 slots per
# expert on, 0.76x-1.02x at 32 (its 64-token tile), and lost at 16 (1.16x-1.40x): there every expert reads its
# weights in a few microseconds, and the form's fixed costs (one more launch and the gather / SiLU / sum
# passes, descriptor updates per expert) stay.
SM90_MIN_LOAD = 32
# Its token tile by slots per expert: (below, tile_m); from the last limit on, the widest compiled. The 64-token
# tile converts each weight tile for half the tokens of the 128 one, so it pays only while 128 would be mostly
# empty (below 64 per expert); 256 pays from 1024 per expert (0.88x-0.91x of 128's time on Mixtral and Qwen3;
# 1.03x-1.13x at 256).
SM90_TILE_BY_LOAD = ((64, 64), (1024, 128))
SM90_TILE_N, _SM90_TILE_K = 128, 64  # the form's weight tile (N must fill whole ones) and k-tile


def is_sm90_form(name: str) -> bool:
    return name.startswith(_SM90_FORM)


def is_decode_form(name: str) -> bool:
    return name.startswith(_DECODE_FORM)


def block_height(name: str) -> int:
    """The routing block a config takes (its tile_m; 8 for the decode form, 1 for the sm90 form); ValueError for a
    name that is no grouped GEMM config."""
    if is_sm90_form(name):
        return 1
    try:
        return tile_of(name)[0]
    except (ValueError, IndexError):
        raise ValueError(f"mixgemm.moe: {name!r} is no grouped GEMM config name (e.g. 'decode_m8_w4', "
                         "'16x128x64_w16x32x64_s4'; mixgemm._C.moe.compiled_configs lists this build's)") from None


def tile_of(name: str) -> tuple[int, int]:
    """(block height, width) of a config name: decode_m8_w4 -> (8, 64), 16x128x64_w16x32x64_s4 -> (16, 128)."""
    if name.startswith(_DECODE_FORM):
        return int(name[len(_DECODE_FORM):].split("_")[0]), 64
    if is_sm90_form(name):
        name = name[len(_SM90_FORM):]
    tile_m, tile_n = name.split("_")[0].split("x")[:2]
    return int(tile_m), int(tile_n)


@functools.lru_cache(maxsize=None)
def compiled_tiles(key: KernelKey) -> tuple[tuple[int, int, str], ...]:
    from .. import _C

    return tuple((*tile_of(name), name) for name in _C.moe.compiled_configs(key.as_tuple()))


@functools.lru_cache(maxsize=None)
def sm90_configs(key: KernelKey) -> tuple[tuple[int, str], ...]:
    """(tile_m, name) of the sm90 form's configs compiled for the key (none off sm90-layout keys)."""
    from .. import _C

    if key.layout != "sm90":
        return ()
    return tuple((tile_of(name)[0], name) for name in _C.moe.sm90_compiled_configs(key.as_tuple()))


def sm90_form_fits(n: int, k: int, group_size: int) -> bool:
    """The sm90 form's shape rule (the dense sm90 path's, cpp/generator/shape_rules.py): N in 128-column tiles,
    K in 64-deep k-tiles, groups of whole k-tiles or per-channel."""
    return n % SM90_TILE_N == 0 and k % _SM90_TILE_K == 0 and (group_size % _SM90_TILE_K == 0 or group_size == k)


def sm90_config_for(num_slots: int, num_experts: int, experts) -> str | None:
    """The sm90 form's config for num_slots slots over num_experts experts of ``experts`` (an ExpertWeights), or
    None where the tiles of the sm80 kernel and the GEMV should run (few tokens per expert, sm80-layout weights,
    a shape the form does not take, none compiled)."""
    configs = sorted(sm90_configs(experts.key))
    load = num_slots / num_experts
    if not configs or load < SM90_MIN_LOAD or not sm90_form_fits(experts.n, experts.k, experts.group_size):
        return None
    want = next((m for limit, m in SM90_TILE_BY_LOAD if load < limit), configs[-1][0])
    below = [name for m, name in configs if m <= want]
    return below[-1] if below else configs[0][1]


def block_m_for(num_slots: int, num_experts: int, key: KernelKey) -> int:
    """The routing block (tile_m) for num_slots slots over num_experts experts, among the compiled tiles."""
    load = num_slots / num_experts
    want = next((m for limit, m in _TILE_M_BY_LOAD if load <= limit), 128)
    heights = sorted({m for m, _, _ in compiled_tiles(key)})
    if not heights:
        raise ValueError(f"mixgemm.moe: this build compiles no grouped GEMM for {key}")
    below = [m for m in heights if m <= want]
    return below[-1] if below else heights[0]


def config_for(block_m: int, num_slots: int, num_experts: int, n: int, key: KernelKey, sm_count: int) -> str:
    """The compiled config of height block_m for an n-column projection: the narrowest tile that still gives
    every SM a block when few experts are hit (decode), 256 wide for heavily loaded experts, else 128."""
    widths = {tn: name for m, tn, name in compiled_tiles(key) if m == block_m}
    if not widths:
        raise ValueError(f"mixgemm.moe: no grouped GEMM config of tile_m {block_m} compiled for {key}")
    load = num_slots / num_experts
    if load >= _WIDE_MIN_LOAD and 256 in widths:
        return widths[256]
    if 128 in widths:
        hit = min(num_slots, num_experts)  # experts with at least one token, at most
        blocks = hit * -(-n // 128)
        if blocks >= sm_count or min(widths) >= 128:
            return widths[128]
    return widths[min(widths)]


# Split-K at decode: a 16-row tile holds 128 registers per thread so 4 blocks share an SM
# (sm80/threadblock/mainloop.cuh, kMinBlocksPerSM), and a memory-bound launch wants them all in flight.
_DECODE_BLOCKS_PER_SM = 4
_MIN_K_TILES_PER_SPLIT = 8  # below this a split's pipeline fill (3 stages) outweighs its share of K


DECODE_STRIP_N = 64  # columns per block of the decode form (its GEMV's strip)


def _split_to_fill(blocks: int, k: int, sm_count: int) -> int:
    """K splits that give every SM _DECODE_BLOCKS_PER_SM of ``blocks`` blocks, each split keeping its k-tiles."""
    want = -(-_DECODE_BLOCKS_PER_SM * sm_count // blocks)
    return max(1, min(want, k // 64 // _MIN_K_TILES_PER_SPLIT))


def split_for_direct(num_slots: int, n: int, k: int, sm_count: int) -> int:
    """K splits of the decode form's direct mode (one block per slot and strip): as split_for, for its blocks."""
    return _split_to_fill(num_slots * -(-n // DECODE_STRIP_N), k, sm_count)


def split_for(block_m: int, config: str, num_slots: int, num_experts: int, n: int, k: int, sm_count: int) -> int:
    """K splits for a grouped GEMM: 1 unless the decode form or 16-row tiles leave SMs without blocks."""
    if block_m > 16:
        return 1
    tile_n = tile_of(config)[1]
    return _split_to_fill((min(num_slots, num_experts) + num_slots // block_m) * -(-n // tile_n), k, sm_count)
