"""CPU tests of the choice across paths (mixgemm.dispatch): the order of paths per problem and layout
(path_order), the heuristic over every path's candidates (heuristic), and what a call's config argument resolves
to (choose: "auto" with or without a tuned entry, a path's name, a config), on hand-built config lists and on
hand-built registries (tests/hand_registry.py), so whatever this build compiled does not matter."""

from __future__ import annotations

import pytest

from mixgemm import dispatch
from mixgemm.kernel_key import KernelKey
from mixgemm.paths import (PATHS, DecodeConfig, DequantConfig, GemmProblem, Gpu, Sm80Config, Sm90Config)
from mixgemm.paths import decode as decode_path
from mixgemm.paths import sm80 as sm80_path
from mixgemm.paths import sm90 as sm90_path

from hand_registry import install, is_x_multicast_pair, set_configs

H100 = Gpu("NVIDIA H100 80GB HBM3", 132, (9, 0))
SM80 = KernelKey()
SM90 = KernelKey(layout="sm90")

SM90_FULL = set_configs("full", "sm90", SM90)
SM80_FULL = set_configs("full", "sm80", SM80)
SM80_ON_SM90_FULL = set_configs("full", "sm80", SM90)
DECODE = [DecodeConfig(8, 4), DecodeConfig(8, 8), DecodeConfig(16, 4)]


def candidates(sm80=(), decode=DECODE, sm90=(), dequant=False) -> dict[str, list]:
    out = {"sm80": list(sm80), "decode": list(decode), "sm90": list(sm90)}
    if dequant:
        out["dequant"] = [DequantConfig()]
    return out


# What gemm hands the heuristic for an sm90-layout weight of a full build, without the dequant path (its rules
# apart); and the same without the sm80 tiles.
SM90_LAYOUT = candidates(sm80=SM80_ON_SM90_FULL, sm90=SM90_FULL)
SM90_ONLY = candidates(sm90=SM90_FULL)
SM80_LAYOUT = candidates(sm80=SM80_FULL)


def pick(M, N=4096, K=4096, sms=132, cands=SM90_LAYOUT, key=SM90, G=128):
    return dispatch.heuristic(cands, GemmProblem(M, N, K, G), key, Gpu("NVIDIA H100 80GB HBM3", sms, (9, 0)))


# ===================================================================================================
# path_order
# ===================================================================================================


def test_the_constants_of_the_order():
    assert dispatch.DECODE_MAX_M == 8
    assert dispatch.DEQUANT_MIN_M == {"sm90": 8192, "sm80": 1024}
    assert dispatch.SM80_ON_SM90_LAYOUT_MAX_M == 16
    assert dispatch.SM80_ON_SM90_LAYOUT_SMALL_WEIGHT_MAX_M == 32
    assert dispatch.SM80_ON_SM90_LAYOUT_SMALL_WEIGHT == 64 << 20
    assert dispatch.SM80_ON_SM90_LAYOUT_FEW_TILES_MAX_M == 64
    assert dispatch.SM80_ON_SM90_LAYOUT_FEW_K_TILES_PER_SM == 12


@pytest.mark.parametrize("layout, M, order", [
    ("sm80", 1, ("decode", "sm80", "dequant")),
    ("sm80", 8, ("decode", "sm80", "dequant")),
    ("sm80", 9, ("sm80", "dequant")),
    ("sm80", 1023, ("sm80", "dequant")),
    ("sm80", 1024, ("dequant", "sm80")),
    ("sm80", 100_000, ("dequant", "sm80")),
    ("sm90", 1, ("decode", "sm80", "sm90", "dequant")),
    ("sm90", 8, ("decode", "sm80", "sm90", "dequant")),
    ("sm90", 9, ("sm80", "sm90", "dequant")),
    ("sm90", 16, ("sm80", "sm90", "dequant")),
    ("sm90", 17, ("sm90", "sm80", "dequant")),
    ("sm90", 8191, ("sm90", "sm80", "dequant")),
    ("sm90", 8192, ("dequant", "sm90", "sm80")),
])
def test_path_order(layout, M, order):
    """On 8192 x 28672 (224 tiles of 128 columns: never too few for the sm90 GEMM)."""
    assert dispatch.path_order(GemmProblem(M, 28672, 8192, 128), layout, 132) == order
    # Every path that reads the layout is tried, each once, and no other; the decode path only up to its rows.
    assert sorted(order) == sorted(name for name, p in PATHS.items()
                                   if layout in p.layouts and (name != "decode" or M <= dispatch.DECODE_MAX_M))


@pytest.mark.parametrize("M, N, K, first", [
    # Up to 32 rows the sm80 tiles on weights of up to 64 Mi elements, the sm90 GEMM above ...
    (17, 4096, 4096, "sm80"), (32, 4096, 4096, "sm80"), (32, 11008, 4096, "sm80"), (32, 8192, 8192, "sm80"),
    (32, 2560, 8192, "sm80"), (32, 8192, 1024, "sm80"), (32, 8192 + 128, 8192, "sm90"), (32, 8192, 14336, "sm90"),
    (32, 28672, 8192, "sm90"), (16, 28672, 8192, "sm80"), (33, 4096, 4096, "sm90"), (33, 8192, 8192, "sm90"),
    # ... and up to 64 rows where its 128-column tiles number under 132 / 8 = 16.5 ...
    (17, 1280, 8192, "sm80"), (33, 1280, 8192, "sm80"), (64, 1280, 8192, "sm80"), (65, 1280, 8192, "sm90"),
    (64, 1280, 28672, "sm80"),   # 10 tiles x 448 k-tiles: many k-tiles, but too few tiles to fill the SMs
    # ... or give each SM under 12 k-tiles of 64 (tiles x K / 64 / 132).
    (64, 8192, 1024, "sm80"),    # 64 x 16 / 132 = 7.8
    (64, 4096, 4096, "sm90"),    # 32 x 64 / 132 = 15.5
    (64, 8192, 2048, "sm90"),    # 15.5
    (64, 2560, 8192, "sm90"),    # 20 x 128 / 132 = 19.4
    (64, 12288, 1024, "sm80"),   # 96 x 16 / 132 = 11.6
    (64, 12672, 1024, "sm90"),   # 99 x 16 = 1584 = 12 x 132: not under 12
    (64, 12288 + 1024, 1024, "sm90"),  # 104 x 16 / 132 = 12.6
    (65, 8192, 1024, "sm90"),    # past 64 rows
])
def test_small_weights_and_few_sm90_tiles_keep_the_sm80_tiles_on_the_sm90_layout(M, N, K, first):
    assert dispatch.path_order(GemmProblem(M, N, K, 128), "sm90", 132)[0] == first
    assert pick(M, N, K).path == first


@pytest.mark.parametrize("sms, first", [(100, "sm90"), (106, "sm90"), (107, "sm80"), (160, "sm80")])
def test_few_k_tiles_per_sm_by_sm_count(sms, first):
    # 4096 x 2560 at M = 64: 20 tiles x 64 k-tiles = 1280, under 12 per SM from 107 SMs (11.96), not at 106 (12.08);
    # 20 tiles are too few for the SMs only from 161.
    assert dispatch.path_order(GemmProblem(64, 2560, 4096, 128), "sm90", sms)[0] == first


@pytest.mark.parametrize("N, sms, first", [(1280, 81, "sm80"), (1280, 80, "sm90"), (2560, 161, "sm80"),
                                           (2560, 160, "sm90")])
def test_few_sm90_tiles_by_sm_count(N, sms, first):
    # 2 x 4 x tiles < SMs: 10 tiles need more than 80 SMs, 20 more than 160. K = 65536 gives each SM 12 k-tiles or
    # more at every SM count here (10 x 1024 / 161 = 64), so only the tile count decides.
    assert dispatch.path_order(GemmProblem(48, N, 65536, 128), "sm90", sms)[0] == first


# ===================================================================================================
# heuristic: which path wins per M and layout
# ===================================================================================================


def test_sm90_layout_takes_the_decode_path_then_the_sm80_tiles():
    for M in range(1, 9):
        assert (pick(M).path, pick(M).rows) == ("decode", 8), M
    # 9..16 rows: the sm80 path's 16-row tiles compiled for the sm90 layout, on any weight.
    for M in range(9, 17):
        for N, K in [(4096, 4096), (28672, 8192)]:
            assert (pick(M, N, K).path, pick(M, N, K).tile_m) == ("sm80", 16), (M, N, K)
    # From 17 rows the sm90 GEMM on weights above 64 Mi elements; weights up to 64 Mi keep the sm80 path's 32 x 128
    # tiles to 32 rows (split-K, or stream-K over one block per SM on short K), the sm90 GEMM from 33.
    for N, K in [(14336, 8192), (8192, 14336), (28672, 8192)]:
        assert pick(17, N, K).path == "sm90" and pick(64, N, K).path == "sm90", (N, K)
    for N, K in [(4096, 4096), (11008, 4096), (8192, 8192)]:
        assert pick(17, N, K).path == "sm80" and pick(33, N, K).path == "sm90", (N, K)
    # 4 splits of 16 k-tiles, 128 blocks, in one row of 32 tiles: the dependent pair sums them.
    assert pick(32).name == "32x128x64_w32x32x64_s4_k4p"
    # 2 splits only (32 k-tiles): the pair of 2 where it fills 3/4 of the SMs to one wave (64 tiles), else stream-K.
    assert pick(32, 8192, 2048).name == "32x128x64_w32x32x64_s4_k2p"
    assert pick(32, 12288, 2048).name == "32x128x64_w32x32x64_s4_sk132"  # 96 tiles: 2 splits pass one wave
    assert pick(33).name == "sm90_64x128x64_c1x1_coop_streamk_k4s"
    # 8192 x 1280: 10 column tiles; the sm80 tiles split 16 ways (8 k-tiles each: few column tiles).
    assert pick(32, 1280, 8192).name == "32x128x64_w32x32x64_s4_k16p"
    # A build without sm80 tiles for the sm90 layout: the sm90 GEMM takes every row above the decode path (the
    # m16 decode kernel too is passed over from 9 rows).
    assert pick(9, cands=SM90_ONLY).name == "sm90_16x128x64_c1x1_coop_streamk_k4s"
    # The sm80 layout's decode path stops at 8 rows, whatever the weight's size.
    sm80_layout = candidates(sm80=[Sm80Config(16, 256, 64, 16, 64, 64, 3), Sm80Config(64, 128, 64, 64, 32, 64, 4)])
    assert pick(8, cands=sm80_layout, key=SM80).path == "decode"
    assert pick(9, cands=sm80_layout, key=SM80).path == "sm80"


def test_the_decode_choice_does_not_depend_on_the_layout():
    # The decode kernel reads both layouts at one speed: its warps and split-K are the same on either.
    for M, N, K in [(1, 4096, 4096), (8, 28672, 8192), (4, 4096, 11008)]:
        on_sm80 = pick(M, N, K, cands=candidates(sm80=[Sm80Config(16, 256, 64, 16, 64, 64, 3)]), key=SM80)
        assert pick(M, N, K) == on_sm80 == decode_path.heuristic(DECODE, M, N, K, 132)


def test_the_sm80_tiles_of_the_sm90_layout_follow_that_layouts_rule():
    # 9..16 rows of an sm90-layout weight: the sm80 heuristic's sm90-layout choice (from 64 Mi weight elements
    # 16 x 256, stream-K over 2 blocks per SM; below 32 Mi elements, 16 x 128 split-K: the pair where its grid has
    # too few tiles for the serial split, else that split), where the sm80 layout's own runs 16 x 128 at 4 stream-K
    # blocks per SM.
    for M in (9, 16):
        cfg = pick(M, 28672, 8192)
        assert (cfg.tile_m, cfg.tile_n, cfg.stages, cfg.split_k, cfg.split_k_mode) == (16, 256, 3, 264, "streamk")
        small = pick(M, 2560, 8192)
        assert (small.tile_m, small.tile_n, small.stages, small.split_k_mode) == (16, 128, 4, "parallel")
        small = pick(M, 4096, 4096)
        assert (small.tile_m, small.tile_n, small.stages, small.split_k_mode) == (16, 128, 4, "serial")
        assert cfg == sm80_path.heuristic(SM80_ON_SM90_FULL, M, 28672, 8192, 132, "sm90")
        cfg = pick(M, 28672, 8192, cands=SM80_LAYOUT, key=SM80)
        assert (cfg.tile_m, cfg.tile_n, cfg.stages, cfg.split_k, cfg.split_k_mode) == (16, 128, 4, 528, "streamk")


@pytest.mark.parametrize("N", [1024, 4096, 4160, 28672])
@pytest.mark.parametrize("sms", [132, 114, 8])
def test_sm90_layout_invariants(N, sms):
    # The pair's first row and the one before it, so the sweep checks the threshold itself.
    edge = sm90_path._X_MULTICAST_MIN_M
    for M in [*range(1, 300), 511, 512, 513, 1000, edge - 1, edge, 4096, 5000]:
        cfg = pick(M, N, 8192, sms)
        assert "sm90" in PATHS[cfg.path].layouts, (M, cfg)
        mma_sync = dispatch.sm80_first_on_sm90_layout(GemmProblem(M, N, 8192, 128), sms)
        assert cfg.path == ("decode" if M <= 8 else "sm80" if mma_sync else "sm90"), (M, cfg)
        assert PATHS[cfg.path].fits(cfg, GemmProblem(M, N, 8192, 128), SM90) is None, (M, cfg)
        if cfg.path == "sm80":
            assert cfg.with_split_k(1, "none") in SM80_ON_SM90_FULL, (M, cfg)
        if cfg.path == "sm90":
            # Clusters only on the multicast pair, from the library's row threshold (rule shared with test_sm90_path).
            pair = is_x_multicast_pair(cfg, M)
            assert N % cfg.tile_n == 0 and (cfg.cluster_m, cfg.cluster_n) == ((1, 2) if pair else (1, 1)), (M, cfg)
            tiles = -(-M // cfg.tile_m) * (N // cfg.tile_n)
            # A split only on stream-K, and only where tiles x split stays within one wave.
            assert cfg.split_k == 1 or (cfg.scheduler == "streamk" and 2 <= cfg.split_k <= sm90_path.MAX_SPLIT_K
                                        and tiles * cfg.split_k <= sms), (M, cfg)
        elif cfg.path == "decode":
            assert M <= cfg.rows, (M, cfg)
        else:  # the sm80 tiles take no more rows than the order's bounds: 16-row tiles to 16, 32-row ones to 64
            bound = dispatch.SM80_ON_SM90_LAYOUT_FEW_TILES_MAX_M if cfg.tile_m == 32 else cfg.tile_m
            assert M <= bound, (M, cfg)


def test_an_n_the_128_column_sm90_tiles_cannot_cover_keeps_the_sm80_tiles_to_64_rows():
    # 8256 columns: only the sm90 path's 256 x 64 ping-pong tile divides N (its fallback, 256 rows for 32), so the
    # sm80 tiles come first up to 64 rows; above, the sm90 GEMM as before.
    for M in (17, 32, 64):
        assert dispatch.path_order(GemmProblem(M, 8192 + 64, 8192, 128), "sm90", 132)[0] == "sm80", M
        assert pick(M, 8192 + 64, 8192).path == "sm80", M
    assert pick(65, 8192 + 64, 8192).name == "sm90_256x64x64_c1x1_pingpong_persistent"


def test_few_sm90_tiles_or_k_tiles_take_32_row_sm80_tiles():
    # 8192 x 1280 at M = 64: two row tiles x 10 = 20 tiles, split 16 ways (8 k-tiles each; 320 blocks).
    assert pick(64, 1280, 8192).name == "32x128x64_w32x32x64_s4_k16p"
    # 1024 x 8192 (7.8 k-tiles per SM for the sm90 GEMM): 16 k-tiles cannot split in 4; stream-K over one block
    # per SM (2 x 64 x 16 units).
    assert pick(64, 8192, 1024).name == "32x128x64_w32x32x64_s4_sk132"


def test_sm90_layout_takes_sm80_tiles_only_below_the_rules_bound():
    # Even when handed large sm80 tiles, the sm90 layout's GEMM above the sm80 path's rows is an sm90 config.
    mixed = candidates(sm80=SM80_ON_SM90_FULL + [Sm80Config(128, 256, 64, 64, 64, 64, 3)], sm90=SM90_FULL)
    for M in (17, 64, 100, 4096):
        assert pick(M, 28672, 8192, cands=mixed).path == "sm90", M
    for M in (33, 64, 100, 4096):  # a small weight: past 32 rows
        assert pick(M, cands=mixed).path == "sm90", M
    assert pick(16, cands=mixed).path == "sm80" and pick(32, cands=mixed).path == "sm80"


def test_an_sm90_layout_weight_off_hopper_runs_on_the_other_paths():
    # An A100 (or any GPU but compute capability 9.0) has no sm90 path: the sm80 tiles of the layout, else the
    # dequant path, take what the sm90 GEMM would have.
    a100 = Gpu("NVIDIA A100-SXM4-80GB", 108, (8, 0))
    full = dict(SM90_LAYOUT, dequant=[DequantConfig()])
    for M in (1, 8, 9, 16, 17, 64, 256, 4096, 8192):
        problem = GemmProblem(M, 4096, 4096, 128)
        config = dispatch.heuristic(full, problem, SM90, a100)
        assert config.path != "sm90", M
        assert config.path == ("decode" if M <= 8 else "dequant" if M >= 8192 else "sm80"), (M, config)
        assert config == dispatch.heuristic(dict(full, sm90=[]), problem, SM90, a100)
    with pytest.raises(RuntimeError, match=r"sm90: none of its configs compiled .* takes this problem"):
        dispatch.heuristic(SM90_ONLY, GemmProblem(64, 4096, 4096, 128), SM90, a100)


def test_dequant_path_from_its_threshold_per_layout():
    sm90 = dict(SM90_LAYOUT, dequant=[DequantConfig()])
    sm80 = dict(SM80_LAYOUT, dequant=[DequantConfig()])
    for M in (1, 8, 16, 300, 4096, 8191):
        assert pick(M, 28672, 8192, cands=sm90).path != "dequant", M
    for M in (8192, 20000):
        assert pick(M, 28672, 8192, cands=sm90) == DequantConfig(), M
        assert pick(M, 4096, 4096, cands=sm90) == DequantConfig(), M  # whatever the weight's size
    for M in (1, 16, 512, 1023):
        assert pick(M, cands=sm80, key=SM80).path != "dequant", M
    for M in (1024, 4096, 9000):
        assert pick(M, cands=sm80, key=SM80) == DequantConfig(), M
    # Without it among the candidates: the GEMM at every M.
    assert pick(20000).path == "sm90" and pick(9000, cands=SM80_LAYOUT, key=SM80).path == "sm80"


# ===================================================================================================
# heuristic: fallbacks when a path cannot run a shape
# ===================================================================================================


def test_sm90_without_a_tile_of_n():
    # (N = 4160 is no multiple of 128: up to 64 rows the sm80 tiles are tried first, dispatch.py.)
    only_128 = candidates(sm90=[c for c in SM90_FULL if c.tile_n == 128])
    with pytest.raises(RuntimeError, match=r"^mixgemm: no kernel path runs M = 64, N = 4160, K = 4096, group_size = "
                                           r"128 for fp16-int4-sm90-scale_offset \(sm80: .*; sm90: .*\)$"):
        pick(64, 4160, 4096, cands=only_128)
    # The decode path needs no sm90 tile: a few rows still run.
    assert pick(4, 4160, 4096, cands=only_128).path == "decode"
    # No candidate at all for the GEMM paths (a build without sm_90a or sm80 tiles for the layout).
    with pytest.raises(RuntimeError, match="no kernel path runs M = 64, N = 4096"):
        pick(64, cands=candidates())


def test_the_reason_of_a_path_whose_configs_do_not_take_the_problem():
    # The error names each path's compiled configs that were passed over, or says it has none.
    only_128 = [c for c in SM90_FULL if c.tile_n == 128]
    with pytest.raises(RuntimeError) as error:
        pick(64, 4160, 4096, cands=candidates(sm90=only_128))
    message = str(error.value)
    assert (f"sm90: none of its configs compiled for fp16-int4-sm90-scale_offset takes this problem "
            f"({', '.join(c.kernel_name for c in only_128)})") in message
    assert "sm80: none of its configs compiled for fp16-int4-sm90-scale_offset takes this problem (none compiled)" \
        in message
    with pytest.raises(RuntimeError, match=r"decode: none of its configs compiled for fp16-int4-sm80-scale_offset "
                                           r"takes "
                                           r"this problem \(decode_m8_w4, decode_m8_w8\)"):
        dispatch.heuristic(candidates(decode=DECODE[:2]), GemmProblem(9, 4096, 4096, 128), SM80, H100,
                           order=("decode",))


def test_sm90_layout_without_a_tile_of_n_falls_back_to_the_dequant_path():
    only_128 = candidates(sm90=[c for c in SM90_FULL if c.tile_n == 128], dequant=True)
    assert pick(64, 4160, 4096, cands=only_128) == DequantConfig()
    assert pick(4, 4160, 4096, cands=only_128).path == "decode"  # a few rows still decode
    # With the sm80 tiles of the layout, the next GEMM path takes it first (N = 4160 is 260 16-column blocks).
    with_sm80 = dict(only_128, sm80=SM80_ON_SM90_FULL)
    assert pick(64, 4160, 4096, cands=with_sm80).path == "sm80"


def test_a_group_size_one_path_refuses_goes_to_the_next():
    # Groups of 32 on the sm90 layout: the sm90 path reloads scales per 64-deep k-tile, so its config is passed over
    # for the sm80 path's (which reads one scale row per 32-row half tile).
    full = dict(SM90_LAYOUT, dequant=[DequantConfig()])
    for M in (17, 64, 4096):
        cfg = pick(M, cands=full, G=32)
        assert cfg.path == "sm80" and cfg == sm80_path.heuristic(SM80_ON_SM90_FULL, M, 4096, 4096, 132, "sm90"), M
    assert pick(64, cands=full, G=64).path == "sm90"
    # Past the dequant threshold the dequant path comes first anyway.
    assert pick(8192, cands=full, G=32) == DequantConfig()


@pytest.mark.parametrize("layout", ["sm80", "sm90"])
@pytest.mark.parametrize("N, K, G", [(4096, 80, 16), (4096, 4096, 16), (4096, 4112, 16), (4096, 4176, 48)])
def test_shapes_outside_every_kernel_paths_rules_go_to_the_dequant_path(layout, N, K, G):
    # K in 16-deep slabs or groups of 16 (what prepack now takes): only the expansion reads them, at any M.
    key = KernelKey(layout=layout)
    cands = dict(SM90_LAYOUT if layout == "sm90" else SM80_LAYOUT, dequant=[DequantConfig()])
    for M in (1, 8, 9, 16, 17, 300, 20000):
        assert pick(M, N, K, cands=cands, key=key, G=G) == DequantConfig(), (M, N, K, G)
    # Without the dequant path nothing runs them: the error gives every path's broken rule.
    del cands["dequant"]
    with pytest.raises(RuntimeError, match=r"no kernel path runs M = 1, .*decode: .*multiple of"):
        pick(1, N, K, cands=cands, key=key, G=G)


def test_an_explicit_order_limits_the_paths():
    assert pick(1, cands=SM90_LAYOUT).path == "decode"
    assert dispatch.heuristic(SM90_LAYOUT, GemmProblem(1, 4096, 4096, 128), SM90, H100, order=("sm90",)).path == "sm90"
    with pytest.raises(RuntimeError, match=r"no kernel path runs M = 17, .* \(decode: [^;]*\)$"):
        dispatch.heuristic(SM90_LAYOUT, GemmProblem(17, 4096, 4096, 128), SM90, H100, order=("decode",))


# ===================================================================================================
# choose: the config argument of gemm
# ===================================================================================================

SM80_16 = Sm80Config(16, 256, 64, 16, 64, 64, 3)
SM80_64 = Sm80Config(64, 128, 64, 64, 32, 64, 4)
SM80_128 = Sm80Config(128, 256, 64, 128, 32, 64, 4)
SM90_STREAMK = Sm90Config(64, 128, 1, 1, "coop", "streamk")
SM90_PERSISTENT = Sm90Config(256, 128, 1, 1, "coop", "persistent")
# A build's registries, by hand: three sm80 tiles (16 x 256 also for the sm90 layout), two decode kernels, two sm90
# kernels.
HAND_BUILD = (SM80_16, SM80_64, SM80_128, DecodeConfig(8, 4), DecodeConfig(16, 4), SM90_STREAMK, SM90_PERSISTENT)


@pytest.fixture
def hand_build(monkeypatch):
    install(monkeypatch, HAND_BUILD, sm90_layout_tiles=[SM80_16])


def test_compiled_is_each_paths_compiled_configs(hand_build):
    assert dispatch.compiled(SM80) == {"sm80": [SM80_16, SM80_64, SM80_128], "decode": [DecodeConfig(8, 4),
                                       DecodeConfig(16, 4)], "sm90": [], "dequant": [DequantConfig()]}
    assert dispatch.compiled(SM90) == {"sm80": [SM80_16], "decode": [DecodeConfig(8, 4), DecodeConfig(16, 4)],
                                       "sm90": [SM90_STREAMK, SM90_PERSISTENT], "dequant": [DequantConfig()]}


def test_compiled_of_this_build():
    for key in (SM80, SM90, KernelKey("bf16", 8, "sm90", "scale")):
        assert dispatch.compiled(key) == {name: p.compiled(key) for name, p in PATHS.items()}
        assert dispatch.compiled(key)["dequant"] == [DequantConfig()]


def test_auto_is_the_heuristic_on_the_compiled_configs(hand_build):
    for key in (SM80, SM90):
        for M in (1, 8, 9, 16, 17, 64, 300, 1024, 8192):
            problem = GemmProblem(M, 4096, 4096, 128)
            assert dispatch.choose("auto", problem, key, H100) == dispatch.heuristic(
                dispatch.compiled(key), problem, key, H100), (key, M)
    assert dispatch.choose("auto", GemmProblem(8, 4096, 4096, 128), SM90, H100).path == "decode"
    assert dispatch.choose("auto", GemmProblem(12, 4096, 4096, 128), SM90, H100).kernel_name == SM80_16.kernel_name
    # 32 tiles of 64 x 128 fill a quarter of the 132 SMs: split 4.
    assert dispatch.choose("auto", GemmProblem(64, 4096, 4096, 128), SM90, H100) == SM90_STREAMK.with_split_k(4)
    assert dispatch.choose("auto", GemmProblem(64, 4096, 4096, 128), SM80, H100).path == "sm80"
    assert dispatch.choose("auto", GemmProblem(1024, 4096, 4096, 128), SM80, H100) == DequantConfig()
    # Shapes outside the kernel paths' rules: the dequant path, which every build has.
    assert dispatch.choose("auto", GemmProblem(1, 4096, 80, 16), SM80, H100) == DequantConfig()
    # No sm90 tile divides N = 4160: the sm80 path's tile of the layout, the next path of the order.
    assert dispatch.choose("auto", GemmProblem(64, 4160, 4096, 128), SM90, H100).kernel_name == SM80_16.kernel_name


def test_auto_takes_a_tuned_config_only_where_it_is_compiled_and_fits(hand_build):
    problem = GemmProblem(16, 4096, 4096, 128)
    tuned = SM80_64.with_split_k(2, "parallel")
    assert tuned != dispatch.choose("auto", problem, SM80, H100)
    assert dispatch.choose("auto", problem, SM80, H100, tuned) == tuned
    heuristic = dispatch.choose("auto", problem, SM80, H100)
    # Stale entries: a kernel this build lacks, a split this K cannot take, a path that does not read the layout, a
    # tile that does not divide N.
    for stale, key, prob in [
        (Sm80Config(48, 96, 64, 16, 32, 64, 7), SM80, problem),
        (SM80_64.with_split_k(4096 // 64 + 1, "serial"), SM80, problem),
        (SM90_STREAMK, SM80, problem),
        (SM80_64, SM90, problem),  # not compiled for the sm90 layout in this build
        (SM90_PERSISTENT, SM90, GemmProblem(256, 4160, 4096, 128)),
        (DecodeConfig(8, 4), SM80, problem),  # 16 rows
    ]:
        assert dispatch.choose("auto", prob, key, H100, stale) == dispatch.choose("auto", prob, key, H100), stale
    assert dispatch.choose("auto", problem, SM80, H100, None) == heuristic
    # The dequant path may be tuned in where its rules take the shape.
    assert dispatch.choose("auto", problem, SM80, H100, DequantConfig()) == DequantConfig()


def test_a_path_name_is_that_paths_heuristic_choice(hand_build):
    problem = GemmProblem(4, 4096, 4096, 128)
    assert dispatch.choose("decode", problem, SM80, H100) == dispatch.choose("auto", problem, SM80, H100)
    assert dispatch.choose("sm80", problem, SM80, H100) == sm80_path.heuristic(
        [SM80_16, SM80_64, SM80_128], 4, 4096, 4096, 132)
    assert dispatch.choose("sm90", GemmProblem(4, 4096, 4096, 128), SM90, H100).path == "sm90"
    assert dispatch.choose("dequant", problem, SM80, H100) == DequantConfig()
    # A path that cannot run the problem, or does not read the layout: ValueError naming it.
    with pytest.raises(ValueError, match=r"^gemm: config='decode': mixgemm: no kernel path runs M = 17, N = 4096, "
                                         r"K = 4096, group_size = 128 for fp16-int4-sm80-scale_offset \(decode: "):
        dispatch.choose("decode", GemmProblem(17, 4096, 4096, 128), SM80, H100)
    with pytest.raises(ValueError, match=r"^gemm: config='sm80': .*sm80: K must be a positive multiple of 64"):
        dispatch.choose("sm80", GemmProblem(16, 4096, 80, 16), SM80, H100)
    with pytest.raises(ValueError, match=r"^gemm: the sm90 path does not read weights in the 'sm80' layout$"):
        dispatch.choose("sm90", problem, SM80, H100)
    with pytest.raises(ValueError, match=r"^gemm: config must be 'auto', a path name \(sm80, decode, sm90, dequant\) "
                                         r"or "
                                         r"a GemmConfig, got 'gemv'"):
        dispatch.choose("gemv", problem, SM80, H100)


def test_a_config_is_checked_and_kept(hand_build):
    problem = GemmProblem(16, 4096, 4096, 128)
    for config in (SM80_64, SM80_64.with_split_k(4, "parallel"), SM80_16.with_split_k(264, "streamk"),
                   DecodeConfig(16, 4, 2), DequantConfig()):
        assert dispatch.choose(config, problem, SM80, H100) is config
    assert dispatch.choose(SM90_STREAMK.with_split_k(2), problem, SM90, H100) == SM90_STREAMK.with_split_k(2)


def test_a_config_not_compiled_is_refused_naming_it(hand_build):
    problem = GemmProblem(16, 4096, 4096, 128)
    with pytest.raises(ValueError, match=r"^gemm: config 32x128x64_w32x32x64_s3 is not compiled into this build for "
                                         r"fp16-int4-sm80-scale_offset weights; its sm80 configs for them: "
                                         r"16x256x64_w16x64x64_s3, 64x128x64_w64x32x64_s4, 128x256x64_w128x32x64_s4$"):
        dispatch.choose(Sm80Config(32, 128, 64, 32, 32, 64, 3), problem, SM80, H100)
    # The sm90 layout's sm80 tiles are the build's few.
    with pytest.raises(ValueError, match=r"config 64x128x64_w64x32x64_s4_k2p is not compiled into this build for "
                                         r"fp16-int4-sm90-scale_offset weights; its sm80 configs for them: "
                                         r"16x256x64_w16x64x64_s3$"):
        dispatch.choose(SM80_64.with_split_k(2, "parallel"), problem, SM90, H100)
    with pytest.raises(ValueError, match="config decode_m8_w8 is not compiled .* its decode configs for them: "
                                         "decode_m8_w4, decode_m16_w4$"):
        dispatch.choose(DecodeConfig(8, 8), GemmProblem(1, 4096, 4096, 128), SM80, H100)
    with pytest.raises(ValueError, match=r"^gemm: config sm90_64x128x64_c1x1_coop_streamk \(sm90 path\) cannot read a "
                                         r"weight in the 'sm80' layout; its kernels read sm90 weights"):
        dispatch.choose(SM90_STREAMK, problem, SM80, H100)
    # A build without any config of the path for the key.
    with pytest.raises(ValueError, match=r"its sm90 configs for them: none$"):
        dispatch.check_compiled(SM90_STREAMK, {"sm90": []}, SM90)
    for bad in (3, None, SM80_64.as_dict()):
        with pytest.raises(ValueError, match="config must be 'auto', a path name or a GemmConfig, got"):
            dispatch.choose(bad, problem, SM80, H100)


def test_a_config_that_does_not_fit_is_refused_naming_it(hand_build):
    with pytest.raises(ValueError, match=r"^gemm: config decode_m8_w4 cannot run M = 9, N = 4096, K = 4096, "
                                         r"group_size = 128: decode_m8_w4 takes at most 8 rows of x, got M = 9$"):
        dispatch.choose(DecodeConfig(8, 4), GemmProblem(9, 4096, 4096, 128), SM80, H100)
    with pytest.raises(ValueError, match=r"^gemm: config 64x128x64_w64x32x64_s4_k65s cannot run M = 16, N = 4096, "
                                         r"K = 4096, group_size = 128: split_k = 65 is more than K / 64 = 64 k-tiles$"):
        dispatch.choose(SM80_64.with_split_k(65, "serial"), GemmProblem(16, 4096, 4096, 128), SM80, H100)
    with pytest.raises(ValueError, match=r"config sm90_256x128x64_c1x1_coop_persistent cannot run M = 64, N = 4160, "
                                         r".*: "
                                         r"N must be a positive multiple of 128"):
        dispatch.choose(SM90_PERSISTENT, GemmProblem(64, 4160, 4096, 128), SM90, H100)
    with pytest.raises(ValueError, match=r"config dequant_cublas cannot run M = 64, N = 4096, K = 4096, "
                                         r"group_size = 8: "
                                         r"group_size must be a multiple of 16"):
        dispatch.choose(DequantConfig(), GemmProblem(64, 4096, 4096, 8), SM80, H100)
