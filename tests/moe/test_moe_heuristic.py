"""The grouped GEMM's tile heuristic (mixgemm.moe.heuristic) on stand-in compiled lists: tile_m follows the
tokens per expert, widths fill the SMs at decode, and it never names a config the build lacks."""

from __future__ import annotations

import pytest

from hand_registry import kernel_sets as generator_kernel_sets
from mixgemm.kernel_key import KernelKey
from mixgemm.moe import heuristic

KEY = KernelKey()
kernel_sets = generator_kernel_sets()


def names(tiles):
    decode = tuple((8, 64, f"decode_m8_w{w}") for w in kernel_sets.MOE_DECODE_WARPS)
    return decode + tuple((m, n, f"{m}x{n}x64_w{wm}x{wn}x64_s{s}") for (m, n, wm, wn), stages in tiles.items()
                          for s in stages)


@pytest.fixture(params=["full", "minimal"])
def compiled(request, monkeypatch):
    tiles = names(kernel_sets.moe_tiles(request.param)["sm80"])
    monkeypatch.setattr(heuristic, "compiled_tiles", lambda key: tiles)
    return tiles


@pytest.mark.parametrize("slots,experts", [(8, 128), (128, 128), (2048, 128), (8192, 128), (32768, 128),
                                           (2, 8), (8192, 8), (131072, 64)])
def test_choices_are_compiled(compiled, slots, experts):
    block_m = heuristic.block_m_for(slots, experts, KEY)
    for n in (1536, 2048, 28672, 4096):
        config = heuristic.config_for(block_m, slots, experts, n, KEY, 132)
        assert (block_m, heuristic.tile_of(config)[1], config) in compiled


def test_tile_m_grows_with_tokens_per_expert(compiled):
    heights = [heuristic.block_m_for(s, 128, KEY) for s in (8, 2048, 4096, 8192, 32768)]
    assert heights == sorted(heights) and heights[0] == 8  # the decode form for a few tokens per expert


def test_decode_picks_a_narrow_tile_when_few_experts_are_hit(monkeypatch):
    tiles = names(kernel_sets.MOE_FULL)
    monkeypatch.setattr(heuristic, "compiled_tiles", lambda key: tiles)

    def width(slots, E, n):
        return heuristic.tile_of(heuristic.config_for(16, slots, E, n, KEY, 132))[1]
    assert width(2, 8, 4096) == 64        # Mixtral down projection, one token: 2 experts x 32 blocks of 128
    assert width(128, 128, 2048) == 128   # 16 tokens over 128 experts: plenty of blocks
    assert heuristic.config_for(8, 2, 8, 4096, KEY, 132).startswith("decode_m8")


def test_config_names_parse():
    assert heuristic.tile_of("decode_m8_w4") == (8, 64)
    assert heuristic.tile_of("128x256x64_w128x32x64_s4") == (128, 256)


SM90_NAMES = ((64, "sm90_64x128x64_grouped"), (128, "sm90_128x128x64_grouped"), (256, "sm90_256x128x64_grouped"))


def sm90_experts(n=2048, k=4096, group_size=128):
    import types
    return types.SimpleNamespace(key=KernelKey(layout="sm90"), n=n, k=k, group_size=group_size)


@pytest.mark.parametrize("compiled", [SM90_NAMES, SM90_NAMES[1:2]])
def test_sm90_form_follows_the_tokens_per_expert(monkeypatch, compiled):
    monkeypatch.setattr(heuristic, "sm90_configs", lambda key: compiled)
    E = 64
    picks = {load: heuristic.sm90_config_for(load * E, E, sm90_experts()) for load in (8, 31, 32, 63, 64, 1023, 1024)}
    assert picks[8] is None and picks[31] is None  # few tokens per expert: the sm80 tiles and the GEMV
    names = dict(compiled)
    assert all(p in names.values() for load, p in picks.items() if load >= 32)
    if len(compiled) == 3:
        assert [heuristic.tile_of(picks[load])[0] for load in (32, 63, 64, 1023, 1024)] == [64, 64, 128, 128, 256]


def test_sm90_form_only_where_it_fits(monkeypatch):
    monkeypatch.setattr(heuristic, "sm90_configs", lambda key: SM90_NAMES)
    assert heuristic.sm90_config_for(4096, 8, sm90_experts(n=2048 + 64)) is None   # N not in 128-column tiles
    assert heuristic.sm90_config_for(4096, 8, sm90_experts(group_size=32)) is None  # groups inside a k-tile
    assert heuristic.sm90_config_for(4096, 8, sm90_experts(group_size=4096)) is not None  # per-channel
    assert heuristic.block_height("sm90_128x128x64_grouped") == 1
    assert heuristic.tile_of("sm90_256x128x64_grouped") == (256, 128)


def test_direct_mode_splits_k_to_fill_the_gpu():
    """One Qwen3 token: 8 slots x 24 strips of w13 = 192 blocks, so K splits until ~4 blocks per SM, capped by
    8 k-tiles per split; a wide projection needs none."""
    assert heuristic.split_for_direct(8, 1536, 2048, 132) == 3
    assert heuristic.split_for_direct(2, 28672, 4096, 132) == 1
    assert heuristic.split_for_direct(8, 128, 256, 132) == 1  # K = 256: too short to split
