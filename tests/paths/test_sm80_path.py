"""CPU tests of the sm80 path (mixgemm.paths.sm80): Sm80Config (fields, names, splits), its fits check, its
heuristic (paths.sm80.heuristic) and the split variants the profiler sweeps; and what every path shares
(mixgemm.GemmConfig, mixgemm.paths, mixgemm.compiled_configs)."""

from __future__ import annotations

import dataclasses
import math
import re

import pytest
import torch

import mixgemm
import mixgemm._C as _C
from mixgemm import paths
from mixgemm.kernel_key import KernelKey
from mixgemm.paths import PATHS, GemmConfig, GemmProblem, Gpu, Sm80Config, base
from mixgemm.paths import sm80 as sm80_path
from mixgemm.paths.base import SPLIT_K_MODES

from hand_registry import set_configs

H100 = Gpu("NVIDIA H100 80GB HBM3", 132, (9, 0))
SM80 = KernelKey()  # fp16 int4, sm80 layout, scale+offset
SM90 = KernelKey(layout="sm90")

SETS = {
    "minimal": set_configs("minimal", "sm80"),
    "full": set_configs("full", "sm80"),
    "compiled": PATHS["sm80"].compiled(SM80),
}
# The sm80 tiles the full set compiles for sm90-layout weights.
SM80_ON_SM90_FULL = set_configs("full", "sm80", SM90)


def heuristic(configs, M, N, K, sms=132, layout="sm80", memory_bandwidth=0.0):
    return sm80_path.heuristic(configs, M, N, K, sms, layout, memory_bandwidth)


# ===================================================================================================
# Sm80Config
# ===================================================================================================

BASE = Sm80Config(16, 128, 64, 16, 32, 64, 4)


class TestSm80Config:
    def test_defaults(self):
        assert (BASE.split_k, BASE.split_k_mode) == (1, "none")
        assert (BASE.tile_m, BASE.tile_n, BASE.tile_k, BASE.warp_m, BASE.warp_n, BASE.warp_k, BASE.stages) == (
            16, 128, 64, 16, 32, 64, 4)
        assert BASE.path == "sm80" and isinstance(BASE, GemmConfig) and mixgemm.Sm80Config is Sm80Config
        assert SPLIT_K_MODES == ("none", "serial", "parallel", "streamk")

    @pytest.mark.parametrize(
        "config, name",
        [
            (BASE, "16x128x64_w16x32x64_s4"),
            (Sm80Config(128, 256, 64, 64, 64, 64, 3), "128x256x64_w64x64x64_s3"),
            (BASE.with_split_k(4, "serial"), "16x128x64_w16x32x64_s4_k4s"),
            (BASE.with_split_k(12, "parallel"), "16x128x64_w16x32x64_s4_k12p"),
            (BASE.with_split_k(1), "16x128x64_w16x32x64_s4"),
            (BASE.with_split_k(264, "streamk"), "16x128x64_w16x32x64_s4_sk264"),
            (BASE.with_split_k(1, "streamk"), "16x128x64_w16x32x64_s4_sk1"),
        ],
    )
    def test_name(self, config, name):
        assert config.name == name
        assert config.kernel_name == re.sub(r"_(k\d+[sp]|sk\d+)$", "", name)
        assert paths.from_name(name) == config
        assert paths.to_name(config) == name == paths.to_name(name)
        assert paths.from_name(f" {name} ") == config
        assert PATHS["sm80"].parse_name(name) == config

    @pytest.mark.parametrize("name, message", [
        ("16x128x64_w16x32x64_s4_k1s", "split_k == 1 needs split_k_mode 'none'"),
        ("16x128x64_w16x32x64_s4_k0p", "split_k must be a positive int, got 0"),
        ("16x128x64_w16x32x64_s4_sk0", "split_k must be a positive int, got 0"),
        ("16x128x64_w16x32x64_s0", "stages must be a positive int, got 0"),
        ("16x128x64_w16x32x64_s4_k4", "invalid config"),  # no mode letter
        ("16x128x64_w16x32_s4", "invalid config"),
        ("16X128x64_w16x32x64_s4", "invalid config"),
    ])
    def test_bad_names(self, name, message):
        with pytest.raises(ValueError, match=message):
            paths.from_name(name)

    def test_stream_k_belongs_to_the_sm80_path(self):
        with pytest.raises(ValueError, match=r"DecodeConfig: split_k_mode must be one of \('none', 'serial'\) on "
                                             r"this path, got 'streamk'"):
            paths.DecodeConfig(8, 4).with_split_k(4, "streamk")
        with pytest.raises(ValueError, match="the decode path splits K serially only"):
            paths.from_name("decode_m8_w4_sk4")
        # The old decode names ("gemv_...") are no longer a config name.
        with pytest.raises(ValueError, match="invalid config 'gemv_8x64x256_w8x64x64_s2_sk4'"):
            paths.from_name("gemv_8x64x256_w8x64x64_s2_sk4")
        with pytest.raises(ValueError, match="split_k must be a positive int"):
            BASE.with_split_k(0, "streamk")
        # A stream-K grid keeps its mode when the block count changes.
        assert BASE.with_split_k(3, "streamk").with_split_k(7).split_k_mode == "streamk"

    def test_name_matches_the_cores_spelling(self):
        # The core names configs as TileConfig::name(): the same string as Sm80Config.kernel_name.
        cfg = Sm80Config(32, 32, 64, 16, 16, 64, 7)
        with pytest.raises(ValueError, match=re.escape(f"gemm (sm80 path): config {cfg.kernel_name} is not compiled")):
            _C.prepare("sm80", cfg.kernel_name, SM80.as_tuple(), 16, 4096, 4096, 128)
        for layout in ("sm80", "sm90"):
            names = _C.compiled_configs("sm80", KernelKey(layout=layout).as_tuple())
            assert names, layout
            for name in names:
                config = PATHS["sm80"].parse_name(name)
                assert config.kernel_name == config.name == name
            # The core prepares each of them by that name (a shape its rules take; no GPU needed).
            launch = _C.prepare("sm80", names[0], KernelKey(layout=layout).as_tuple(), 16, 4096, 4096, 128)
            assert names[0] in repr(launch)

    def test_with_split_k_default_modes(self):
        assert BASE.with_split_k(4).split_k_mode == "serial"
        parallel = BASE.with_split_k(4, "parallel")
        assert parallel.with_split_k(8) == dataclasses.replace(BASE, split_k=8, split_k_mode="parallel")
        assert parallel.with_split_k(1) == BASE
        assert BASE.with_split_k(1).split_k_mode == "none"

    def test_with_split_k_explicit_mode(self):
        cfg = BASE.with_split_k(3, "parallel")
        assert (cfg.split_k, cfg.split_k_mode, cfg.kernel_name) == (3, "parallel", BASE.kernel_name)
        assert BASE.with_split_k(3, "parallel").with_split_k(3, "serial").split_k_mode == "serial"

    def test_with_split_k_returns_a_new_object(self):
        cfg = BASE.with_split_k(2)
        assert cfg is not BASE and cfg != BASE
        assert (BASE.split_k, BASE.split_k_mode) == (1, "none")

    def test_with_split_k_rejects_bad_combinations(self):
        with pytest.raises(ValueError, match="split_k == 1 needs split_k_mode 'none'"):
            BASE.with_split_k(1, "serial")
        with pytest.raises(ValueError, match="split_k must be a positive int"):
            BASE.with_split_k(0)
        with pytest.raises(ValueError, match=r"split_k_mode must be one of \('none', 'serial', 'parallel', "
                                             r"'streamk'\) on this path, got 'splitk'"):
            BASE.with_split_k(2, "splitk")

    @pytest.mark.parametrize("field", ["tile_m", "tile_n", "tile_k", "warp_m", "warp_n", "warp_k", "stages"])
    @pytest.mark.parametrize("bad", [0, -16, 1.5, True, "16"])
    def test_fields_must_be_positive_ints(self, field, bad):
        with pytest.raises(ValueError,
                           match=rf"^Sm80Config: {field} must be a positive int, got {re.escape(repr(bad))}"):
            dataclasses.replace(BASE, **{field: bad})

    def test_split_fields_are_checked_at_construction(self):
        with pytest.raises(ValueError, match="split_k == 1 needs split_k_mode 'none' and split_k > 1 one of "
                                             r"\('serial', 'parallel'\), got split_k=2, split_k_mode='none'"):
            Sm80Config(*dataclasses.astuple(BASE)[:7], split_k=2)
        with pytest.raises(ValueError, match="split_k must be a positive int, got True"):
            Sm80Config(*dataclasses.astuple(BASE)[:7], split_k=True, split_k_mode="serial")
        # Stream-K counts blocks: one block is a grid too.
        assert Sm80Config(*dataclasses.astuple(BASE)[:7], split_k=1, split_k_mode="streamk").name.endswith("_sk1")

    def test_frozen(self):
        with pytest.raises(dataclasses.FrozenInstanceError):
            BASE.split_k = 2
        with pytest.raises(dataclasses.FrozenInstanceError):
            BASE.tile_m = 32
        assert BASE.split_k == 1 and BASE.tile_m == 16

    def test_hashable_and_comparable(self):
        assert len({BASE, Sm80Config(16, 128, 64, 16, 32, 64, 4), BASE.with_split_k(2)}) == 2
        assert Sm80Config(16, 128, 64, 16, 32, 64, 4) == BASE

    def test_as_dict_and_from_dict(self):
        for config in (BASE, BASE.with_split_k(4, "parallel"), BASE.with_split_k(264, "streamk")):
            fields = config.as_dict()
            assert fields == {"path": "sm80", "tile_m": 16, "tile_n": 128, "tile_k": 64, "warp_m": 16, "warp_n": 32,
                              "warp_k": 64, "stages": 4, "split_k": config.split_k,
                              "split_k_mode": config.split_k_mode}
            assert paths.from_dict(fields) == config
        with pytest.raises(ValueError, match="a config's fields must name its path"):
            paths.from_dict({k: v for k, v in BASE.as_dict().items() if k != "path"})
        with pytest.raises(ValueError, match="a config's fields must name its path"):
            paths.from_dict(dict(BASE.as_dict(), path="sm100"))
        with pytest.raises(TypeError):
            paths.from_dict({"path": "sm80", "tile_m": 16})  # incomplete
        with pytest.raises(ValueError, match="split_k == 1 needs split_k_mode 'none'"):
            paths.from_dict(dict(BASE.as_dict(), split_k_mode="serial"))  # contradicting fields

    def test_it_takes_no_other_paths_fields(self):
        for extra in (dict(schedule="coop"), dict(scheduler="persistent"), dict(cluster_m=2), dict(rows=8),
                      dict(path="sm90")):
            with pytest.raises(TypeError, match="unexpected keyword argument"):
                Sm80Config(16, 128, 64, 16, 32, 64, 4, **extra)

    def test_stream_k_units(self):
        # One unit per k-tile of each output tile, partial tiles counted whole.
        assert BASE.stream_k_units(1, 4096, 4096) == 1 * 32 * 64
        assert BASE.stream_k_units(17, 4096, 4096) == 2 * 32 * 64
        assert Sm80Config(64, 128, 64, 64, 32, 64, 4).stream_k_units(128, 28672, 8192) == 2 * 224 * 128
        assert BASE.stream_k_units(16, 4160, 4096) == math.ceil(4160 / 128) * 64


# ===================================================================================================
# What every path shares: the list of paths, names, compiled_configs
# ===================================================================================================


def test_paths_and_the_layouts_they_read():
    assert tuple(PATHS) == ("sm80", "decode", "sm90", "dequant")
    assert {name: p.layouts for name, p in PATHS.items()} == {
        "sm80": ("sm80", "sm90"), "decode": ("sm80", "sm90"), "sm90": ("sm90",), "dequant": ("sm80", "sm90")}
    for name, p in PATHS.items():
        assert p.name == name and p.config_type.path == name and issubclass(p.config_type, GemmConfig)
    # The extension binds each kernel path (the dequant path is our expansion + cuBLAS, no prepare).
    assert set(_C.paths()) == {"sm80", "decode", "sm90"}


def test_path_names_are_configs_of_from_name():
    for name in ("auto", *PATHS):
        assert paths.from_name(name) == name == paths.to_name(name)
    for bad in ("", "SM80", "gemv", "sm80_path"):
        with pytest.raises(ValueError, match="invalid config"):
            paths.from_name(bad)
    with pytest.raises(ValueError, match="expected a string"):
        paths.from_name(7)
    with pytest.raises(ValueError, match="got int"):
        paths.to_name(7)


def test_each_path_parses_only_its_own_names():
    names = {"sm80": BASE.name, "decode": "decode_m8_w4", "sm90": "sm90_128x128x64_c1x1_coop_persistent",
             "dequant": "dequant_cublas"}
    for path, p in PATHS.items():
        for other, name in names.items():
            parsed = p.parse_name(name)
            assert (parsed is not None) == (path == other), (path, name)
            if parsed is not None:
                assert parsed.path == path and parsed.name == name


def test_an_sm80_config_differs_from_every_other_path():
    sm90 = paths.Sm90Config(256, 128, 1, 1, "coop", "persistent")
    sm80_twin = Sm80Config(256, 128, 64, 256, 64, 64, 3)
    assert sm80_twin != sm90 and sm80_twin.name != sm90.name
    assert len({sm90, sm80_twin, paths.Sm90Config(256, 128, 1, 1, "coop", "streamk"), paths.DecodeConfig(8, 4),
                paths.DequantConfig()}) == 5


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("bits", [4, 8])
def test_compiled_configs_of_this_build(dtype, bits):
    # The default path is sm80; each config names itself back and is one of the build's registry rows.
    sm80 = mixgemm.compiled_configs(dtype, bits)
    assert sm80 and all(c.path == "sm80" and c.split_k == 1 for c in sm80)
    for layout in ("sm80", "sm90"):
        key = KernelKey.of(dtype, bits, layout)
        names = _C.compiled_configs("sm80", key.as_tuple())
        assert [c.name for c in mixgemm.compiled_configs(dtype, bits, layout=layout)] == names
    # layout=None: either layout's, each once (the sm90 layout's tiles are some of the sm80 layout's).
    assert [c.name for c in sm80] == _C.compiled_configs("sm80", KernelKey.of(dtype, bits).as_tuple())
    everything = mixgemm.compiled_configs(dtype, bits, path=None)
    assert {c.path for c in everything} == {p for p in PATHS if mixgemm.compiled_configs(dtype, bits, path=p)}
    assert len({(c.path, c.name) for c in everything}) == len(everything)


def test_compiled_configs_refuses_what_is_not_a_path_or_a_key():
    with pytest.raises(ValueError,
                       match=r"^compiled_configs: path must be one of \('sm80', 'decode', 'sm90', 'dequant'\) or None, "
                             r"got 'gemv'"):
        mixgemm.compiled_configs(torch.float16, path="gemv")
    with pytest.raises(ValueError, match="^compiled_configs: KernelKey: dtype must be float16 or bfloat16"):
        mixgemm.compiled_configs(torch.float32)
    with pytest.raises(ValueError, match=r"^compiled_configs: KernelKey: weight_bits must be one of \(4, 8\), got 3"):
        mixgemm.compiled_configs(torch.float16, 3)


def test_a_registry_name_the_package_cannot_parse_is_an_error(monkeypatch):
    from mixgemm import _runtime

    class Extension:
        @staticmethod
        def compiled_configs(path, key):
            return ["16x128x64_w16x32x64_s4", "16x128x64_w16x32_s4"]

    monkeypatch.setattr(_runtime, "_extension", Extension)
    with pytest.raises(RuntimeError, match="lists a sm80 config '16x128x64_w16x32_s4' that mixgemm.paths.sm80 cannot "
                                           "name: the build and the package disagree"):
        base._compiled_configs.__wrapped__(PATHS["sm80"], KernelKey("bf16", 8))


# ===================================================================================================
# fits
# ===================================================================================================


@pytest.mark.parametrize("layout, N, K, G, reason", [
    ("sm80", 4096, 4096, 128, None),
    ("sm80", 4096, 4096, 32, None),
    ("sm80", 4096 + 32, 4096, 128, "N must be a positive multiple of 64 (the sm80 layout's 64-column strip), got 4128"),
    ("sm90", 4096 + 16, 4096, 128, None),  # the sm90 layout's 16-column blocks
    ("sm90", 4104, 4096, 128, "N must be a positive multiple of 16 (the sm90 layout's 16-column block), got 4104"),
    ("sm80", 4096, 4000, 32, "K must be a positive multiple of 64 (the main loop's 64-deep k-tile), got 4000"),
    ("sm80", 4096, 80, 16, "K must be a positive multiple of 64"),
    ("sm80", 4096, 4096, 16, ("group_size must be a multiple of 32 that divides K (one row of scales per 32-row half "
                              "of a k-tile), got 16")),
    ("sm80", 4096, 4096, 96, "group_size must be a multiple of 32 that divides K"),  # 96 does not divide 4096
    ("sm90", 4096, 4096, 4096, None),  # per-channel: a multiple of 32 anyway
    ("sm80", 4096, 4096, 4096 + 64, "group_size must be a multiple of 32 that divides K (one row"),
])
def test_fits_checks_the_shape_rules(layout, N, K, G, reason):
    got = PATHS["sm80"].fits(BASE, GemmProblem(16, N, K, G), KernelKey(layout=layout))
    if reason is None:
        assert got is None
    else:
        assert got is not None and got.startswith(reason), got


def test_fits_checks_the_split():
    problem = GemmProblem(16, 4096, 256, 128)  # 4 k-tiles
    fits = lambda config: PATHS["sm80"].fits(config, problem, SM80)  # noqa: E731
    assert fits(BASE.with_split_k(4, "serial")) is None and fits(BASE.with_split_k(4, "parallel")) is None
    assert fits(BASE.with_split_k(5, "serial")) == "split_k = 5 is more than K / 64 = 4 k-tiles"
    # Stream-K: at most one block per unit (32 tiles x 4 k-tiles = 128 units).
    assert fits(BASE.with_split_k(128, "streamk")) is None
    assert fits(BASE.with_split_k(129, "streamk")) == ("stream-K over 129 blocks needs at least one unit of work each, "
                                                       "got 128")
    # The shape rules come first.
    assert PATHS["sm80"].fits(BASE.with_split_k(129, "streamk"), GemmProblem(16, 4096, 250, 125), SM80).startswith(
        "K must be a positive multiple of 64")


def test_fits_agrees_with_the_core():
    # What fits says of a shape, the core's prepare says in the same words (no GPU needed for its checks).
    name = PATHS["sm80"].compiled(SM80)[0].kernel_name
    config = PATHS["sm80"].parse_name(name)
    for N, K, G in [(4096, 4000, 32), (4128, 4096, 128), (4096, 4096, 48), (4096, 4096, 128)]:
        reason = PATHS["sm80"].fits(config, GemmProblem(16, N, K, G), SM80)
        if reason is None:
            _C.prepare("sm80", name, SM80.as_tuple(), 16, N, K, G)
        else:
            with pytest.raises(ValueError, match=re.escape(f"gemm (sm80 path): {reason}")):
                _C.prepare("sm80", name, SM80.as_tuple(), 16, N, K, G)


# ===================================================================================================
# paths.sm80.heuristic
# ===================================================================================================

SHAPES = [(4096, 4096, 132), (28672, 4096, 108), (128, 64, 132), (4096, 14336, 80), (64, 128, 1)]


@pytest.mark.parametrize("set_name", list(SETS))
@pytest.mark.parametrize("N, K, sms", SHAPES)
def test_heuristic_invariants(set_name, N, K, sms):
    configs = SETS[set_name]
    tiles = {c.kernel_name for c in configs}
    has_16 = any(c.tile_m == 16 for c in configs)
    has_128 = any(c.tile_m == 128 for c in configs)
    for M in range(1, 4097):
        cfg = heuristic(configs, M, N, K, sms)
        assert isinstance(cfg, Sm80Config)
        assert cfg.kernel_name in tiles, (M, cfg)
        assert cfg.split_k_mode in ("none", "parallel", "streamk")
        assert PATHS["sm80"].fits(cfg, GemmProblem(M, N, K, 64), SM80) is None, (M, cfg)
        if M <= 16 and has_16:
            assert cfg.tile_m == 16, (M, cfg)
        if M > 256 and has_128:
            assert cfg.tile_m == 128, (M, cfg)
        if 64 < M <= 256 and any(c.tile_m == 64 for c in configs):
            assert cfg.tile_m in (64, 128), (M, cfg)
        if cfg.split_k_mode == "streamk":
            # At most the tile's blocks per SM, each with its least k-tiles of the units; two blocks at least.
            per_sm, least = {(16, 64): (2, 8), (16, 128): (4, 8), (16, 256): (2, 8), (64, 128): (2, 16),
                             (64, 256): (2, 16), (128, 128): (1, 16), (128, 256): (1, 16)}[cfg.tile_m, cfg.tile_n]
            units = math.ceil(M / cfg.tile_m) * math.ceil(N / cfg.tile_n) * (K // cfg.tile_k)
            assert 2 <= cfg.split_k <= per_sm * sms and cfg.split_k * least <= units, (M, cfg)
            assert M <= 256, (M, cfg)
            continue
        assert 1 <= cfg.split_k <= K // 64, (M, cfg)
        assert (cfg.split_k == 1) == (cfg.split_k_mode == "none"), (M, cfg)
        if cfg.split_k > 1:
            # Each split streams at least 4 k-tiles (8 from 64 rows up), and splitting only happens while
            # the grid is small: under 3 blocks per SM for 16-row tiles, 6 for 32, 4 for 64, 3/4 of a wave above.
            assert cfg.split_k * (4 if cfg.tile_m <= 32 else 8) <= K // cfg.tile_k
            grid = math.ceil(M / cfg.tile_m) * math.ceil(N / cfg.tile_n)
            limit = {16: 3 * sms, 32: 6 * sms, 64: 4 * sms}.get(cfg.tile_m, 0.75 * sms)
            assert grid < limit, (M, cfg)


@pytest.mark.parametrize("set_name", ["minimal", "full"])
def test_heuristic_tile_by_m(set_name):
    configs = SETS[set_name]
    pick = lambda M: heuristic(configs, M, 4096, 4096)  # noqa: E731
    assert (pick(1).tile_m, pick(1).tile_n) == (16, 128)
    assert pick(16).tile_m == 16
    assert pick(17).tile_m == (32 if set_name == "full" else 64)
    assert pick(64).tile_m == 64
    assert pick(65).tile_m == 64
    assert (pick(256).tile_m, pick(256).tile_n) == (64, 128)
    assert (pick(257).tile_m, pick(4096).tile_n) == (128, 256)
    # Stage count: the one measured for the tile where there is one (16 x 128: 4), else the shallowest of
    # 3 or more (128 x 256 is compiled with 4 only: its stage barriers want one more stage).
    assert pick(1).stages == 4
    assert pick(4096).stages == 4


def test_heuristic_small_grid_streams_k():
    cfg = heuristic(SETS["minimal"], 1, 4096, 4096)
    assert (cfg.tile_m, cfg.tile_n) == (16, 128)
    # 32 tiles x 64 k-tiles = 2048 units: 4 x 132 blocks would get under 8 each, so 2048 / 8 = 256 blocks.
    assert (cfg.split_k, cfg.split_k_mode) == (256, "streamk")


def test_heuristic_16_row_tiles_stream_k_over_four_blocks_per_sm():
    # M = 16, N = 28672: 224 tiles of 16 x 128 x 128 k-tiles: 4 x 132 blocks of 54 k-tiles each.
    cfg = heuristic(SETS["minimal"], 16, 28672, 8192)
    assert (cfg.tile_m, cfg.tile_n, cfg.split_k, cfg.split_k_mode) == (16, 128, 528, "streamk")
    # Without 16 x 128 tiles, 16 x 256 ones stream K over 2 blocks per SM (4 lost, BENCHMARKS.md).
    wide = [c for c in SETS["minimal"] if (c.tile_m, c.tile_n) != (16, 128)]
    cfg = heuristic(wide, 16, 28672, 8192)
    assert (cfg.tile_m, cfg.tile_n, cfg.split_k, cfg.split_k_mode) == (16, 256, 264, "streamk")


def test_heuristic_16_row_tile_depends_on_the_weight_layout_and_size():
    # sm80-layout weights: 16 x 128 at 4 stream-K blocks per SM. sm90-layout weights (ldmatrix B fragments):
    # 16 x 128 split-K (the pair on a grid too few tiles for the serial split, below), and 16 x 256 at 2 stream-K
    # blocks per SM where the 128-column tiles outnumber the SMs.
    for M in (9, 16):
        cfg = heuristic(SM80_ON_SM90_FULL, M, 28672, 8192, layout="sm90")
        assert (cfg.tile_m, cfg.tile_n, cfg.stages, cfg.split_k, cfg.split_k_mode) == (16, 256, 3, 264, "streamk")
        cfg = heuristic(SM80_ON_SM90_FULL, M, 2560, 8192, layout="sm90")
        assert (cfg.tile_m, cfg.tile_n, cfg.stages, cfg.split_k, cfg.split_k_mode) == (16, 128, 4, 16, "parallel")
        cfg = heuristic(SETS["full"], M, 28672, 8192)
        assert (cfg.tile_m, cfg.tile_n, cfg.stages, cfg.split_k, cfg.split_k_mode) == (16, 128, 4, 528, "streamk")
    # The boundary of the wide tile: 132 column tiles of 128 (N = 16896) take 16 x 128, 133 take 16 x 256; on a GPU
    # of 114 SMs 16896 columns are already too many.
    assert heuristic(SM80_ON_SM90_FULL, 16, 16896, 8192, layout="sm90").tile_n == 128
    assert heuristic(SM80_ON_SM90_FULL, 16, 16896 + 64, 8192, layout="sm90").tile_n == 256
    assert heuristic(SM80_ON_SM90_FULL, 16, 16896, 8192, 114, layout="sm90").tile_n == 256
    # The path's choose passes the weight's layout on (8192 x 2560: 16 splits on the sm90 layout, 20 tiles x 128
    # k-tiles / 8 = 320 stream-K units on the sm80 one).
    problem = GemmProblem(16, 2560, 8192, 128)
    assert PATHS["sm80"].choose(SM80_ON_SM90_FULL, problem, SM90, H100).split_k == 16
    assert PATHS["sm80"].choose(SETS["full"], problem, SM80, H100).split_k == 320
    # Where a build lacks 16 x 128 for the sm90 layout, the next preferred tile takes M <= 16.
    without = [c for c in SM80_ON_SM90_FULL if (c.tile_m, c.tile_n) != (16, 128)]
    assert heuristic(without, 16, 4096, 4096, layout="sm90").tile_n == 256


H100_BANDWIDTH, H200_BANDWIDTH = 3.35e12, 4.8e12


@pytest.mark.parametrize("M", [1, 9, 16])
def test_heuristic_widest_weights_split_by_the_gpus_memory_bandwidth(M):
    # 8192 x 28672 on the sm90 layout (224 column tiles of 128 on 132 SMs): 16 x 256, split 2 ways on a GPU under
    # 4 TB/s, stream-K over 2 blocks per SM on a faster one or where the bandwidth is unknown (0).
    def pick(bandwidth, N=28672, K=8192, layout="sm90", configs=SM80_ON_SM90_FULL):
        cfg = heuristic(configs, M, N, K, 132, layout, bandwidth)
        return (cfg.tile_m, cfg.tile_n, cfg.split_k, cfg.split_k_mode)
    assert pick(H100_BANDWIDTH) == (16, 256, 2, "parallel")
    assert pick(H200_BANDWIDTH) == pick(0.0) == (16, 256, 264, "streamk")
    # Short K (16 k-tiles): 16 x 128 tiles unsplit (224 tiles fill the wave alone) on both GPUs.
    assert pick(H100_BANDWIDTH, K=1024) == pick(H200_BANDWIDTH, K=1024) == (16, 128, 1, "none")
    # Weights whose 128-column tiles do not outnumber the SMs (here the 16-row grid stays within 2.8 blocks per SM,
    # below), and the sm80 layout, get the same pick on both GPUs.
    for N, layout, configs in ((4096, "sm90", SM80_ON_SM90_FULL), (28672, "sm80", SETS["full"])):
        assert pick(H100_BANDWIDTH, N=N, layout=layout, configs=configs) == pick(H200_BANDWIDTH, N=N, layout=layout,
                                                                                   configs=configs)
    # The path's choose passes the GPU's bandwidth on.
    h100 = dataclasses.replace(H100, memory_bandwidth=H100_BANDWIDTH)
    assert PATHS["sm80"].choose(SM80_ON_SM90_FULL, GemmProblem(M, 28672, 8192, 128), SM90, h100).split_k == 2


@pytest.mark.parametrize("M, N, K, bandwidth, split", [
    # 16 rows: the largest split within 4 blocks per SM x bandwidth / 4.8 TB/s (H100: 2.79 x 132 = 368 blocks).
    (16, 8192, 8192, H100_BANDWIDTH, 4),    # 64 tiles x 8 = 512 > 368
    (16, 8192, 8192, H200_BANDWIDTH, 8),    # 512 <= 4 x 132
    (16, 8192, 8192, 0.0, 8),               # bandwidth unknown: 4 blocks per SM
    (16, 8192, 8192, 9.6e12, 8),            # faster than the H200: the split rule's own 4 per SM still bounds it
    (16, 7168, 8192, H100_BANDWIDTH, 4),    # 56 tiles x 8 = 448 > 368
    (16, 5120, 8192, H100_BANDWIDTH, 8),    # 40 tiles x 8 = 320 <= 368
    (16, 4096, 11008, H100_BANDWIDTH, 8),   # 32 tiles x 8 = 256
    (16, 4096, 11008, 2.0e12, 4),           # 1.67 x 132 = 220 blocks < 256
    (16, 14336, 8192, H100_BANDWIDTH, 4),   # 112 tiles x 4 = 448 > 368: never fewer than 4 splits
    (12, 8192, 28672, H100_BANDWIDTH, 4),   # 448 k-tiles, 64 tiles: every M of the 16-row tile
    # One row of 32-row tiles reads no bandwidth: 3 blocks per SM (64 tiles x 8 = 512 > 396), summed by the second
    # kernel (the dependent pair).
    (32, 8192, 8192, H100_BANDWIDTH, 4),
    (32, 8192, 8192, H200_BANDWIDTH, 4),
    (32, 5120, 8192, H200_BANDWIDTH, 8),    # 40 tiles x 8 = 320 <= 396
    (32, 6144, 8192, H100_BANDWIDTH, 8),    # 48 tiles x 8 = 384 <= 396 (2.9 per SM)
    (32, 6144, 8192, H200_BANDWIDTH, 8),
    (32, 7168, 8192, H200_BANDWIDTH, 4),    # 56 tiles x 8 = 448 > 396 (3.4 per SM)
])
def test_heuristic_16_row_split_follows_the_gpus_memory_bandwidth(M, N, K, bandwidth, split):
    cfg = heuristic(SM80_ON_SM90_FULL, M, N, K, 132, "sm90", bandwidth)
    assert (cfg.tile_m, cfg.tile_n, cfg.split_k) == (16 if M <= 16 else 32, 128, split)
    # 16-row tiles: 32 or more tiles, at most 8 splits, summed in the kernel; 32-row ones: the pair.
    assert cfg.split_k_mode == ("serial" if M <= 16 else "parallel")


def test_heuristic_widest_weights_from_17_rows_read_no_bandwidth():
    for bandwidth in (H100_BANDWIDTH, H200_BANDWIDTH):
        cfg = heuristic(SM80_ON_SM90_FULL, 17, 28672, 8192, 132, "sm90", bandwidth)
        assert (cfg.tile_m, cfg.tile_n) == (32, 128), bandwidth


@pytest.mark.parametrize("M, N, K, split", [
    # 16 rows, from 32 Mi elements: the largest of 2/4/8/16 splits with >= 12 k-tiles each and <= 4 x 132 blocks.
    (16, 8192, 8192, 8),     # 128 k-tiles / 12 -> 10; 64 tiles x 8 = 512 <= 528
    (16, 11008, 4096, 4),    # 64 k-tiles / 12 -> 5
    (16, 4096, 11008, 8),    # 172 k-tiles -> 14; 32 tiles x 16 = 512 fits too, but 172 / 16 < 12
    (16, 14336, 8192, 4),    # 112 tiles x 8 = 896 > 528
    (16, 8192, 28672, 8),    # 448 k-tiles; 64 tiles x 16 = 1024 > 528
    (12, 8192, 8192, 8),     # every M of the 16-row tile
    # 32 rows (dispatch runs the sm80 tiles there where the sm90 GEMM's tiles are few: 8192 x 1280).
    (32, 11008, 4096, 4),
    (32, 1280, 8192, 16),    # 10 column tiles (10 x 16 splits = 160 <= 2.5 x 132): splits of 8 k-tiles
    (64, 1280, 8192, 16),    # 20 tiles x 16 = 320 blocks
    (32, 1280, 4096, 8),     # 64 k-tiles: 8 splits of 8
    (32, 1280, 8192 + 64, 16),
    (32, 2560, 8192, 16),    # 20 column tiles x 16 = 320 <= 330: narrow, 16 splits of 8 k-tiles
    (32, 2560, 4096, 8),     # 64 k-tiles: 8 splits of 8 (12 a split would allow 4)
    (32, 2624, 8192, 8),     # 20.5 column tiles round up to 21: 336 > 330, not narrow
    (32, 2688, 8192, 8),     # 21 column tiles: 12 k-tiles a split (128 / 12 -> 8 splits)
    (32, 3072, 8192, 8),     # 24 column tiles: not narrow (16 splits: 384 blocks, 2.9 per SM)
    (32, 3072, 12288, 16),   # not narrow, but 192 k-tiles: 16 splits of 12, 384 blocks <= one row's 3 per SM (396)
    (32, 6144, 8192, 8),     # 48 column tiles x 8 = 384 <= 396
    (24, 6272, 8192, 8),     # 49 column tiles x 8 = 392 <= 396
    (32, 6400, 8192, 4),     # 50 column tiles x 8 = 400 > 396
    (16, 2560, 8192, 16),    # 16 rows below 32 Mi elements, 20 tiles (too few for the serial sum): the pair
    (16, 3584, 8192, 8),     # 28 tiles, not narrow: 8 splits of 16 k-tiles
    (16, 1024, 5120, 8),     # 8 tiles, 80 k-tiles: 8 splits of 10
    (16, 1280, 32768, 16),   # 16 rows, 40 Mi elements: 512 k-tiles, 16 splits of 32 either way
    (16, 4096, 12288, 16),   # 32 tiles x 16 = 512 blocks, 12 k-tiles a split: 16 splits keep the second kernel
    (16, 3072, 11264, 8),    # 24 tiles (under 32) at 8 splits: summed by the second kernel
    (32, 4096, 4096, 4),
    (17, 8192, 8192, 4),     # one row of 32-row tiles: 3 blocks per SM (64 tiles x 8 = 512 > 396)
    (64, 4096, 8192, 8),     # two rows: the rule's 4 blocks per SM (64 tiles x 8 = 512 <= 528; one row's 3: 396)
])
def test_heuristic_sm90_layout_splits_k_for_16_and_32_row_tiles(M, N, K, split):
    cfg = heuristic(SM80_ON_SM90_FULL, M, N, K, layout="sm90")
    # 16-row tiles: the tile's last split sums the partials in-kernel where the grid has >= 32 tiles and <= 8 splits;
    # 32-row tiles, 16 splits and fewer tiles keep the second kernel.
    mode = "serial" if M <= 16 and math.ceil(N / 128) >= 32 and split <= 8 else "parallel"
    assert (cfg.tile_m, cfg.tile_n, cfg.split_k, cfg.split_k_mode) == (16 if M <= 16 else 32, 128, split, mode)
    assert cfg.stages == 4  # both tiles' split-K was measured with 4 stages


def test_heuristic_32_row_split_is_the_pair_in_one_row_and_two():
    # 4096 x 4096: 32 column tiles of 64 k-tiles, 4 splits (12+ k-tiles each). The 32-row tiles take the dependent
    # pair in one row (M = 17..32, where it beat the serial split in both orders) and in two (M = 33..64); the same
    # grid of 16-row tiles (M = 16) sums its split in the kernel.
    for M, mode in ((17, "parallel"), (32, "parallel"), (33, "parallel"), (64, "parallel")):
        cfg = heuristic(SM80_ON_SM90_FULL, M, 4096, 4096, layout="sm90")
        assert (cfg.tile_m, cfg.tile_n, cfg.split_k, cfg.split_k_mode) == (32, 128, 4, mode), M
    assert heuristic(SM80_ON_SM90_FULL, 16, 4096, 4096, layout="sm90").split_k_mode == "serial"


@pytest.mark.parametrize("M, N, K, bandwidth, split", [
    # Below 32 Mi elements, where the grid has the 32 tiles the in-kernel (serial) sum needs: the largest split of
    # at least 8 k-tiles within 4 blocks per SM x bandwidth / 4.8 TB/s (H100: 368 blocks), and at least 4 splits;
    # from 32 Mi elements the rule of 12 k-tiles a split.
    (16, 8192, 2048, H100_BANDWIDTH, 4),   # 32 k-tiles: 4 splits of 8 (12 a split would allow 2: stream-K)
    (16, 8192, 3584, H100_BANDWIDTH, 4),   # 56 k-tiles: 8 splits would get 7
    (16, 8192, 3072, H200_BANDWIDTH, 4),
    (16, 4096, 4096, H100_BANDWIDTH, 8),   # 32 tiles x 8 = 256 blocks
    (16, 4096, 4096, H200_BANDWIDTH, 8),
    (16, 5120, 4096, H100_BANDWIDTH, 8),   # 40 tiles x 8 = 320 <= 368
    (12, 5120, 4096, H100_BANDWIDTH, 8),   # every M of the 16-row tile
    (16, 8128, 4096, 0.0, 8),              # just under 32 Mi elements (4096 x 8128)
    (16, 8192, 4096, H200_BANDWIDTH, 4),   # from 32 Mi elements 12 k-tiles a split (8 of 8 would fit 512 <= 528)
    (16, 8192, 4096, H100_BANDWIDTH, 4),
])
def test_heuristic_16_row_serial_split_below_32_mi_elements(M, N, K, bandwidth, split):
    cfg = heuristic(SM80_ON_SM90_FULL, M, N, K, 132, "sm90", bandwidth)
    assert (cfg.tile_m, cfg.tile_n, cfg.split_k, cfg.split_k_mode, cfg.stages) == (16, 128, split, "serial", 4)


@pytest.mark.parametrize("M, N, K, sms, split", [
    # Short K (under 32 k-tiles): the most serial splits of 3+ k-tiles with tiles x splits within one wave of SMs,
    # unsplit where 2 splits would pass it or K has under 12 k-tiles; the first ten rows are the shapes swept on the
    # H200 (2026-11-28), every pick the fastest.
    (16, 4096, 1024, 132, 4),     # 32 tiles x 4 = 128 blocks of 4 k-tiles
    (16, 4096, 1536, 132, 4),
    (16, 4096, 1792, 132, 4),     # 28 k-tiles: 4 splits of 7
    (16, 5120, 1024, 132, 2),     # 40 tiles: x 4 = 160 > 132
    (16, 6144, 1024, 132, 2),
    (16, 8192, 1024, 132, 2),
    (16, 8192, 1536, 132, 2),
    (16, 10240, 1024, 132, 1),    # 80 tiles: x 2 = 160 > 132
    (16, 14336, 1024, 132, 1),
    (16, 28672, 1024, 132, 1),    # widest: 16 x 128 unsplit, not 16 x 256 (above)
    (9, 8192, 1024, 132, 2),      # every M of the 16-row tile
    (16, 8192, 1024, 114, 1),     # 64 x 2 = 128 > 114 SMs
    (16, 4096, 768, 132, 4),      # 12 k-tiles: 4 splits of 3 (768x4096, swept on both GPUs)
    (16, 4096, 1024 - 64, 132, 4),  # 15 k-tiles: 4 splits of 3 or 4
    (16, 8192, 768, 132, 2),      # 64 tiles: 2 splits of 6
    (16, 8192, 768 - 64, 132, 1),   # under 12 k-tiles: unsplit
    (16, 8192, 512, 132, 1),      # 512x8192, swept on both GPUs: a split lost
    (16, 8192, 2048 - 64, 132, 2),  # 31 k-tiles: still short
])
def test_heuristic_16_row_short_k_splits_within_one_wave(M, N, K, sms, split):
    for bandwidth in (H100_BANDWIDTH, H200_BANDWIDTH, 0.0):  # the wave rule reads no bandwidth
        cfg = heuristic(SM80_ON_SM90_FULL, M, N, K, sms, "sm90", bandwidth)
        assert (cfg.tile_m, cfg.tile_n, cfg.split_k, cfg.stages) == (16, 128, split, 4), bandwidth
        assert cfg.split_k_mode == ("serial" if split > 1 else "none")
    # 32 k-tiles is no longer short: 4 serial splits of 8, a second wave (256 blocks).
    if K == 2048 - 64:
        assert heuristic(SM80_ON_SM90_FULL, M, N, 2048, sms, "sm90", H100_BANDWIDTH).split_k == 4


@pytest.mark.parametrize("M, N, K, tile, split", [
    (16, 3968, 2048, 16, 124),   # 31 tiles (too few for the serial sum), 32 k-tiles: 2 splits of 12+, under 4
    (16, 3968, 1024, 16, 62),    # short K (16 k-tiles) on 31 tiles: too few for the serial sum, 496 units / 8
    # Under 4 splits of 12+ k-tiles: stream-K over one block per SM, where 2 splits would not fill 3/4 of the SMs to
    # one wave (below that, the pair of 2).
    (32, 12288, 2048, 32, 132),  # 96 tiles: 2 splits would pass one wave (192 blocks)
    (32, 5120, 45 * 64, 32, 132),  # 40 tiles: 2 splits would fill 80 of 132 SMs; 1800 units, 13.6 a block
    (17, 5120, 45 * 64, 32, 132),
])
def test_heuristic_sm90_layout_keeps_stream_k_where_the_split_is_small(M, N, K, tile, split):
    cfg = heuristic(SM80_ON_SM90_FULL, M, N, K, layout="sm90")
    assert (cfg.tile_m, cfg.split_k, cfg.split_k_mode) == (tile, split, "streamk")
    # The sm80 layout is untouched by the rule: its 16 x 128 tiles stream K over 4 blocks per SM.
    if tile == 16:
        assert heuristic(SETS["full"], M, N, K).split_k_mode == "streamk"


@pytest.mark.parametrize("M, N, K, sms", [
    (32, 8192, 1024, 132),        # 16 k-tiles x 64 tiles = 1024 units over 128 blocks: 8 each, under 12
    (17, 8192, 1024, 132),
    (32, 8192, 1024 + 512, 132),  # 24 k-tiles: 1536 units over 132 blocks, 11.6 each
])
def test_heuristic_sm90_layout_short_stream_k_takes_two_rows_of_16_row_tiles(M, N, K, sms):
    cfg = heuristic(SM80_ON_SM90_FULL, M, N, K, sms, layout="sm90")
    assert (cfg.tile_m, cfg.tile_n, cfg.split_k, cfg.split_k_mode, cfg.stages) == (16, 128, 1, "none", 4)


@pytest.mark.parametrize("M, N, K, sms, tile, mode", [
    (33, 8192, 1024, 132, 32, "streamk"),   # 33 rows: 16-row tiles would take three rows
    (16, 8192, 1024, 132, 16, "serial"),    # 16 rows keep their own rule (short K: 2 splits within one wave)
    (32, 8192, 1024, 120, 32, "streamk"),   # 128 tiles of 16 rows over 120 SMs: more than one wave
    (32, 8192, 2048, 132, 32, "parallel"),  # 15.5 k-tiles a block: 2 splits of 16 fill 128 of 132 SMs (below)
    (32, 8192, 25 * 64, 132, 32, "parallel"),  # 25 k-tiles: 1600 units over 132 blocks, 12.1 each (24: 11.6)
    (32, 5120, 45 * 64, 132, 32, "streamk"),   # 40 tiles: 2 splits would fill only 80 SMs
])
def test_heuristic_short_stream_k_rule_bounds(M, N, K, sms, tile, mode):
    cfg = heuristic(SM80_ON_SM90_FULL, M, N, K, sms, layout="sm90")
    assert (cfg.tile_m, cfg.split_k_mode) == (tile, mode)


def test_the_short_stream_k_rule_leaves_the_sm80_layout_alone():
    cfg = heuristic(SETS["full"], 32, 8192, 1024, 132)
    assert cfg.tile_m == 32 and cfg.split_k_mode != "none"


def test_heuristic_large_m_stays_data_parallel():
    # M = 512, N = 4096: 4 x 16 = 64 tiles of 128 x 256 cover 64 of 132 SMs: ceil(132 / 64) = 3 splits.
    cfg = heuristic(SETS["minimal"], 512, 4096, 4096)
    assert (cfg.tile_m, cfg.split_k, cfg.split_k_mode) == (128, 3, "parallel")
    # M = 4096, N = 28672: 3584 tiles, no split and no stream-K above M = 256.
    for set_name in ("minimal", "full"):
        cfg = heuristic(SETS[set_name], 4096, 28672, 4096)
        assert (cfg.tile_m, cfg.split_k, cfg.split_k_mode) == (128, 1, "none")


def test_heuristic_middle_m_takes_large_tiles_where_every_sm_gets_16_k_tiles():
    # M = 128, N = 4096, K = 4096: 16 tiles of 128 x 256 hold 1024 k-tiles, under 16 per SM: 64 x 128 tiles,
    # 64 x 64 = 4096 units over 4096 / 16 = 256 blocks.
    cfg = heuristic(SETS["minimal"], 128, 4096, 4096)
    assert (cfg.tile_m, cfg.tile_n, cfg.split_k, cfg.split_k_mode) == (64, 128, 256, "streamk")
    # N = 28672, K = 8192: 112 x 128 = 14336 k-tiles of 128 x 256 tiles: one block per SM.
    cfg = heuristic(SETS["minimal"], 128, 28672, 8192)
    assert (cfg.tile_m, cfg.tile_n, cfg.split_k, cfg.split_k_mode) == (128, 256, 132, "streamk")


def test_heuristic_mid_m_splits_like_decode():
    # M = 32 on the full set: 32 x 128 tiles (no stream-K rule); 32 of them want ceil(6 * 132 / 32) = 25
    # splits, capped at 16.
    cfg = heuristic(SETS["full"], 32, 4096, 4096)
    assert (cfg.tile_m, cfg.split_k, cfg.split_k_mode) == (32, 16, "parallel")
    # M = 64: 64 x 128 tiles stream K over 2 blocks per SM.
    cfg = heuristic(SETS["full"], 64, 28672, 8192)
    assert (cfg.tile_m, cfg.split_k, cfg.split_k_mode) == (64, 264, "streamk")


def test_heuristic_split_is_capped():
    # A tiny grid with a huge K streams K (1024 units / 8 = 128 blocks); with a short K (8 units, one
    # block's worth) the split rule takes over: K / 64 / 4 = 2 splits, and none for one k-tile.
    cfg = heuristic(SETS["minimal"], 1, 128, 65536)
    assert (cfg.split_k, cfg.split_k_mode) == (128, "streamk")
    cfg = heuristic(SETS["minimal"], 1, 128, 512)
    assert (cfg.split_k, cfg.split_k_mode) == (2, "parallel")
    cfg = heuristic(SETS["minimal"], 1, 128, 64)
    assert (cfg.split_k, cfg.split_k_mode) == (1, "none")


def test_heuristic_falls_back_to_the_nearest_tile_height():
    only = [Sm80Config(32, 64, 64, 32, 32, 64, 3), Sm80Config(96, 64, 64, 32, 32, 64, 3)]
    assert heuristic(only, 1, 4096, 4096).tile_m == 32
    assert heuristic(only, 4096, 4096, 4096).tile_m == 96


def test_choose_needs_configs():
    # No sm80 config compiled for the key: the path offers nothing (mixgemm.dispatch passes it over).
    assert PATHS["sm80"].choose([], GemmProblem(1, 4096, 4096, 128), SM80, H100) is None
    assert PATHS["sm90"].compiled(SM80) == []  # a path that does not read the layout has none
    # A scale-only key runs the scale+offset kernels (its offsets are zeros): the build has no sm80 scale-only
    # kernel, so they are all its configs.
    assert PATHS["sm80"].compiled(KernelKey(layout="sm90", quant="scale")) == PATHS["sm80"].compiled(SM90) != []


def test_choose_is_the_heuristic_for_the_gpus_sm_count():
    for M in (1, 16, 64, 200, 1000):
        problem = GemmProblem(M, 4096, 11008, 128)
        for gpu in (H100, Gpu("NVIDIA A100-SXM4-80GB", 108, (8, 0))):
            assert PATHS["sm80"].choose(SETS["full"], problem, SM80, gpu) == heuristic(
                SETS["full"], M, 4096, 11008, gpu.sm_count)


# ===================================================================================================
# split_variants (what the profiler's sweep times)
# ===================================================================================================


def test_split_variants():
    problem = GemmProblem(16, 4096, 512, 128)  # 8 k-tiles; 32 tiles x 8 = 256 units
    variants = PATHS["sm80"].split_variants(BASE.with_split_k(4, "parallel"), problem, H100)
    assert variants[0] == BASE
    assert [v.name for v in variants[1:]] == [
        "16x128x64_w16x32x64_s4_k2s", "16x128x64_w16x32x64_s4_k2p", "16x128x64_w16x32x64_s4_k4s",
        "16x128x64_w16x32x64_s4_k4p", "16x128x64_w16x32x64_s4_k8s", "16x128x64_w16x32x64_s4_k8p",
        "16x128x64_w16x32x64_s4_sk132"]  # 264 blocks would exceed the 256 units
    assert len(set(variants)) == len(variants)
    for v in variants:
        assert PATHS["sm80"].fits(v, problem, SM80) is None, v
    # A long K and a large grid: every split count and every stream-K grid of 1..4 blocks per SM.
    big = PATHS["sm80"].split_variants(BASE, GemmProblem(256, 28672, 8192, 128), H100)
    assert len(big) == 1 + 2 * len(sm80_path.SWEEP_SPLIT_KS) + len(sm80_path.SWEEP_STREAM_K_BLOCKS_PER_SM)
    assert [v.split_k for v in big if v.split_k_mode == "streamk"] == [132, 264, 396, 528]
    # One k-tile: nothing to split, and one unit's grid is not swept.
    assert PATHS["sm80"].split_variants(BASE, GemmProblem(1, 128, 64, 64), H100) == [BASE]
