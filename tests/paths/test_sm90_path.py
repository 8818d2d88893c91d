"""CPU tests of the sm90 path (mixgemm.paths.sm90): Sm90Config (fields, names, splits), its fits check, its
heuristic (paths.sm90.heuristic, split_for) and the split variants the profiler sweeps."""

from __future__ import annotations

import dataclasses
import re

import pytest
import torch

import mixgemm
import mixgemm._C as _C
from mixgemm import paths
from mixgemm.kernel_key import KernelKey
from mixgemm.paths import PATHS, GemmConfig, GemmProblem, Gpu, Sm90Config
from mixgemm.paths import sm90 as sm90_path

from hand_registry import is_x_multicast_pair, kernel_sets, set_configs

H100 = Gpu("NVIDIA H100 80GB HBM3", 132, (9, 0))
SM90 = KernelKey(layout="sm90")
KS = kernel_sets()
SM90_FULL = set_configs("full", "sm90", SM90)


def pick(M, N=4096, K=4096, sms=132, configs=SM90_FULL):
    """The sm90 path's choice: its heuristic's config, split by its rule (what PATH.choose returns)."""
    config = sm90_path.heuristic(configs, M, N, K, sms)
    return None if config is None else sm90_path.split_for(config, M, N, K, sms)


# ===================================================================================================
# Sm90Config
# ===================================================================================================


class TestSm90Config:
    COOP = Sm90Config(256, 128, 1, 1, "coop", "persistent")
    PINGPONG = Sm90Config(128, 64, 2, 1, "pingpong", "streamk")

    def test_fields_of_a_cooperative_config(self):
        c = self.COOP
        assert (c.path, c.tile_m, c.tile_n, c.tile_k, c.cluster_m, c.cluster_n) == ("sm90", 256, 128, 64, 1, 1)
        assert (c.schedule, c.scheduler) == ("coop", "persistent")
        assert (c.split_k, c.split_k_mode) == (1, "none")
        assert isinstance(c, GemmConfig) and mixgemm.Sm90Config is Sm90Config

    def test_fields_of_a_pingpong_config(self):
        c = self.PINGPONG
        assert (c.cluster_m, c.cluster_n, c.schedule, c.scheduler) == (2, 1, "pingpong", "streamk")

    def test_defaults_and_the_fixed_k_tile(self):
        assert Sm90Config(128, 128) == Sm90Config(128, 128, 1, 1, "coop", "persistent", 1)
        # tile_k is the path's constant (128 bytes of 16-bit x), not a field.
        assert Sm90Config.tile_k == sm90_path.TILE_K == 64
        assert [f.name for f in dataclasses.fields(Sm90Config)] == [
            "tile_m", "tile_n", "cluster_m", "cluster_n", "schedule", "scheduler", "split_k", "split_k_mode"]

    def test_kernel_name_is_what_the_sm90_registry_names(self):
        # The extension lists the build's sm90 kernels by the C++ config's name(): the package names them back.
        names = _C.compiled_configs("sm90", SM90.as_tuple())
        assert names == [c.kernel_name for c in PATHS["sm90"].compiled(SM90)]
        for name in names:
            assert PATHS["sm90"].parse_name(name).kernel_name == name
        assert all(c.kernel_name == c.name for c in PATHS["sm90"].compiled(SM90))
        with pytest.raises(ValueError, match=re.escape(f"gemm (sm90 path): config {self.PINGPONG.kernel_name} is not "
                                                       "compiled into this build")):
            _C.prepare("sm90", self.PINGPONG.kernel_name, SM90.as_tuple(), 64, 4096, 4096, 128)

    @pytest.mark.parametrize("config, name", [
        (COOP, "sm90_256x128x64_c1x1_coop_persistent"),
        (PINGPONG, "sm90_128x64x64_c2x1_pingpong_streamk"),
        (Sm90Config(16, 128, 1, 1, "coop", "streamk"), "sm90_16x128x64_c1x1_coop_streamk"),
        (Sm90Config(64, 128, 1, 1, "coop", "streamk").with_split_k(4, "serial"),
         "sm90_64x128x64_c1x1_coop_streamk_k4s"),
        (Sm90Config(128, 128, 1, 1, "coop", "streamk").with_split_k(6, "reduce_scatter"),
         "sm90_128x128x64_c1x1_coop_streamk_k6r"),
    ])
    def test_name_round_trip(self, config, name):
        assert config.name == name
        assert paths.from_name(name) == config
        assert paths.to_name(config) == name == paths.to_name(name)
        assert paths.from_name(f" {name} ") == config

    @pytest.mark.parametrize("name, message", [
        ("sm90_256x128x64_coop_persistent", "invalid config"),  # no cluster
        ("sm90_256x128x64_c1x1_coop", "invalid config"),  # no scheduler
        ("SM90_256x128x64_c1x1_coop_persistent", "invalid config"),
        ("sm90_256x128x32_c1x1_coop_persistent", "invalid config"),  # tile_k is 64
        # Split-K only on stream-K configs, and only in the kernel.
        ("sm90_256x128x64_c1x1_coop_persistent_k2s", "splits K only through its stream-K scheduler"),
        ("sm90_256x128x64_c1x1_coop_persistent_k4r", "splits K only through its stream-K scheduler"),
        ("sm90_256x128x64_c1x1_coop_streamk_k2p",
         r"the sm90 path splits K in the kernel only \(_k<n>s serial, _k<n>r reduce-scatter\)"),
        ("sm90_256x128x64_c1x1_coop_streamk_k4x", "invalid config"),
        ("sm90_256x128x64_c1x1_coop_streamk_sk4", "invalid config"),
        ("sm90_256x128x64_c1x1_coop_streamk_k2", "invalid config"),
        ("sm90_256x128x64_c1x1_cooperative_persistent", r"schedule must be one of \('coop', 'pingpong'\)"),
        ("sm90_256x128x64_c1x1_coop_streamK", "invalid config"),
        ("sm90_256x128x64_c1x1_coop_dynamic", r"scheduler one of \('persistent', 'streamk'\), got 'coop', 'dynamic'"),
        ("sm90_256x128x64_c0x1_coop_persistent", "cluster_m must be a positive int, got 0"),
    ])
    def test_bad_names(self, name, message):
        with pytest.raises(ValueError, match=message):
            paths.from_name(name)

    @pytest.mark.parametrize("letter", ["s", "r"])
    def test_split_one_is_not_a_name(self, letter):
        with pytest.raises(ValueError, match="split_k == 1 needs split_k_mode 'none'"):
            paths.from_name(f"sm90_256x128x64_c1x1_coop_streamk_k1{letter}")

    @pytest.mark.parametrize("schedule, scheduler", [("", "persistent"), ("coop", ""), ("warpspecialized", "streamk"),
                                                     ("coop", "splitk")])
    def test_schedule_and_scheduler_are_checked(self, schedule, scheduler):
        with pytest.raises(ValueError, match=r"^Sm90Config: schedule must be one of \('coop', 'pingpong'\) and "
                                             r"scheduler one of \('persistent', 'streamk'\), got "
                                             + re.escape(f"{schedule!r}, {scheduler!r}")):
            Sm90Config(128, 128, 1, 1, schedule, scheduler)

    @pytest.mark.parametrize("field", ["tile_m", "tile_n", "cluster_m", "cluster_n"])
    @pytest.mark.parametrize("bad", [0, -1, 1.0, True])
    def test_sizes_must_be_positive_ints(self, field, bad):
        with pytest.raises(ValueError, match=rf"^Sm90Config: {field} must be a positive int, got {bad!r}"):
            dataclasses.replace(self.COOP, **{field: bad})

    def test_only_stream_k_sm90_configs_split_k_and_only_serially(self):
        refused = (r"^Sm90Config: an sm90 config splits K only through its stream-K scheduler: split_k > 1 needs "
                   r"scheduler 'streamk'")
        with pytest.raises(ValueError, match=refused):
            self.COOP.with_split_k(2)  # persistent
        with pytest.raises(ValueError, match=refused):
            dataclasses.replace(self.COOP, split_k=4)
        streamk = Sm90Config(128, 128, 1, 1, "coop", "streamk")
        with pytest.raises(ValueError, match=r"^Sm90Config: split_k_mode must be one of \('none', 'serial', "
                                             r"'reduce_scatter'\) on this path, got 'parallel'"):
            streamk.with_split_k(2, "parallel")
        split = streamk.with_split_k(3)
        assert (split.split_k, split.split_k_mode, split.kernel_name) == (3, "serial", streamk.kernel_name)
        assert split.with_split_k(1) == streamk and self.COOP.with_split_k(1) == self.COOP
        assert streamk.split_k_mode == "none"
        scatter = streamk.with_split_k(4, "reduce_scatter")
        assert (scatter.split_k, scatter.split_k_mode, scatter.name[-4:]) == (4, "reduce_scatter", "_k4r")
        assert scatter.with_split_k(6).split_k_mode == "reduce_scatter"  # a new count keeps the reduction
        # A split must name its reduction (so the tuning cache's entries from before split_k_mode make no config).
        with pytest.raises(ValueError, match=r"^Sm90Config: split_k == 1 needs split_k_mode 'none' and split_k > 1 one "
                                             r"of \('serial', 'reduce_scatter'\), got split_k=4, split_k_mode='none'"):
            dataclasses.replace(streamk, split_k=4)
        with pytest.raises(ValueError, match="split_k == 1 needs split_k_mode 'none'"):
            streamk.with_split_k(1, "reduce_scatter")

    def test_it_takes_no_other_paths_fields(self):
        for extra in (dict(warp_m=64), dict(stages=3), dict(rows=8), dict(tile_k=64)):
            with pytest.raises(TypeError, match="unexpected keyword argument"):
                Sm90Config(128, 128, **extra)

    def test_an_sm90_config_differs_from_every_other_path(self):
        sm80_twin = paths.Sm80Config(256, 128, 64, 256, 64, 64, 3)
        assert sm80_twin != self.COOP and sm80_twin.name != self.COOP.name
        assert len({self.COOP, sm80_twin, Sm90Config(256, 128, 1, 1, "coop", "streamk")}) == 3

    def test_as_dict_and_from_dict(self):
        split = Sm90Config(64, 128, 1, 1, "coop", "streamk", 2, "serial")
        scatter = Sm90Config(128, 128, 1, 1, "coop", "streamk", 4, "reduce_scatter")
        for config in (self.COOP, self.PINGPONG, split, scatter):
            fields = config.as_dict()
            assert fields == {"path": "sm90", "tile_m": config.tile_m, "tile_n": config.tile_n,
                              "cluster_m": config.cluster_m, "cluster_n": 1, "schedule": config.schedule,
                              "scheduler": config.scheduler, "split_k": config.split_k,
                              "split_k_mode": config.split_k_mode}
            assert paths.from_dict(fields) == config
        # An entry saved before split_k_mode: a split that does not say which reduction ran.
        old = split.as_dict()
        del old["split_k_mode"]
        with pytest.raises(ValueError, match="split_k > 1 one of"):
            paths.from_dict(old)
        # A hand-edited entry whose fields contradict each other does not make a config.
        with pytest.raises(ValueError, match="splits K only through its stream-K scheduler"):
            paths.from_dict(dict(self.COOP.as_dict(), split_k=2))
        with pytest.raises(ValueError, match="schedule must be one of"):
            paths.from_dict(dict(self.COOP.as_dict(), schedule=""))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("bits", [4, 8])
def test_this_builds_sm90_configs_are_well_formed(dtype, bits):
    # Empty in a build without sm_90a; otherwise every one names itself back, unsplit, and reads the sm90 layout.
    configs = mixgemm.compiled_configs(dtype, bits, path="sm90")
    assert bool(configs) == _C.sm90_available()  # every set builds an sm90 kernel for each type and width
    for c in configs:
        assert c.path == "sm90" and PATHS[c.path].layouts == ("sm90",) and c.split_k == 1
        assert paths.from_name(c.name) == c
    assert mixgemm.compiled_configs(dtype, bits, path="sm90", layout="sm80") == []
    assert configs == mixgemm.compiled_configs(dtype, bits, path="sm90", layout="sm90")


def test_a_scale_key_runs_its_own_kernels_first_then_the_scale_offset_ones(monkeypatch):
    # The registry by kernel key: a scale-only weight takes the scale-only kernels and, with its zero offsets, the
    # scale+offset ones; a kernel compiled in both modes is listed once.
    from mixgemm.paths import base

    by_key = {"scale": ["sm90_128x128x64_c1x1_coop_persistent"],
              "scale_offset": ["sm90_16x128x64_c1x1_coop_streamk", "sm90_128x128x64_c1x1_coop_persistent"]}

    def compiled(path, key):
        return tuple(path.parse_name(n) for n in by_key[key.quant]) if path.name == "sm90" else ()

    monkeypatch.setattr(base, "_compiled_configs", compiled)
    scale = KernelKey(layout="sm90", quant="scale")
    assert [c.kernel_name for c in PATHS["sm90"].compiled(scale)] == [
        "sm90_128x128x64_c1x1_coop_persistent", "sm90_16x128x64_c1x1_coop_streamk"]
    assert [c.kernel_name for c in PATHS["sm90"].compiled(SM90)] == by_key["scale_offset"]
    # Each config runs on the first key that compiled it; the plan passes that key to the extension.
    persistent, streamk = (PATHS["sm90"].parse_name(n) for n in by_key["scale_offset"][::-1])
    assert PATHS["sm90"].kernel_key(persistent, scale) == scale
    assert PATHS["sm90"].kernel_key(streamk, scale) == SM90
    assert PATHS["sm90"].kernel_key(streamk, SM90) == SM90


def test_the_real_registry_of_a_scale_key():
    # This build compiles scale+offset sm90 kernels only (kernel_sets.SM90_BUILT_MODES): a scale-only weight runs
    # them, on the scale+offset key.
    scale = KernelKey(layout="sm90", quant="scale")
    assert _C.compiled_configs("sm90", scale.as_tuple()) == []
    assert PATHS["sm90"].compiled(scale) == PATHS["sm90"].compiled(SM90)
    for config in PATHS["sm90"].compiled(scale):
        assert PATHS["sm90"].kernel_key(config, scale) == SM90


# ===================================================================================================
# fits
# ===================================================================================================


@pytest.mark.parametrize("config, N, K, G, reason", [
    (Sm90Config(128, 128), 4096, 4096, 128, None),
    (Sm90Config(128, 128), 4096, 4096, 4096, None),  # per-channel: the group may be K itself
    (Sm90Config(128, 128), 4096, 4160, 4160, None),
    (Sm90Config(256, 64, schedule="pingpong"), 4160, 4096, 128, None),
    (Sm90Config(128, 128), 4160, 4096, 128,
     "N must be a positive multiple of 128 (the config's weight tile: 64 or 128 columns), got 4160"),
    (Sm90Config(128, 128), 4096 + 32, 4096, 128,
     "N must be a positive multiple of 128 (the config's weight tile: 64 or 128 columns), got 4128"),
    (Sm90Config(128, 128), 4096, 4096 - 32, 32, "K must be a positive multiple of 64 (the 64-deep k-tile), got 4064"),
    (Sm90Config(128, 128), 4096, 4096, 32,
     ("group_size must be a multiple of 64 that divides K or K itself (the collective reloads scales per whole "
      "k-tile), got 32")),
    (Sm90Config(128, 128), 4096, 4096, 192, "group_size must be a multiple of 64 that divides K or K itself"),
])
def test_fits_checks_the_shape_rules_with_the_configs_weight_tile(config, N, K, G, reason):
    got = PATHS["sm90"].fits(config, GemmProblem(64, N, K, G), SM90)
    assert got == reason if reason is None or got is None else got.startswith(reason), got


def test_fits_refuses_the_sm80_layout_and_oversplit():
    config = Sm90Config(128, 128, scheduler="streamk")
    assert PATHS["sm90"].fits(config, GemmProblem(64, 4096, 4096, 128), KernelKey()) == (
        "the sm90 path does not read weights in the 'sm80' layout")
    problem = GemmProblem(64, 4096, 256, 128)  # 4 k-tiles
    assert PATHS["sm90"].fits(config.with_split_k(4), problem, SM90) is None
    assert PATHS["sm90"].fits(config.with_split_k(5), problem, SM90) == "split_k = 5 is more than K / 64 = 4 k-tiles"


def test_fits_agrees_with_the_core():
    # The core's prepare checks the same rules before it needs a GPU: a broken rule is a ValueError in the same
    # words, a kept one gets as far as the device check (RuntimeError on this machine, a launch on a GPU).
    name = PATHS["sm90"].compiled(SM90)[0].kernel_name
    config = PATHS["sm90"].parse_name(name)
    for N, K, G in [(4160, 4096, 128), (4096, 4064, 32), (4096, 4096, 32), (4096, 4096, 192)]:
        reason = PATHS["sm90"].fits(config, GemmProblem(64, N, K, G), SM90)
        assert reason is not None
        with pytest.raises(ValueError, match=re.escape(f"gemm (sm90 path): {reason}")):
            _C.prepare("sm90", name, SM90.as_tuple(), 64, N, K, G)


@pytest.mark.nogpu
def test_a_problem_that_fits_reaches_the_device_check():
    name = PATHS["sm90"].compiled(SM90)[0].kernel_name
    assert PATHS["sm90"].fits(PATHS["sm90"].parse_name(name), GemmProblem(64, 4096, 4096, 4096), SM90) is None
    with pytest.raises(RuntimeError, match="no CUDA GPU is visible"):
        _C.prepare("sm90", name, SM90.as_tuple(), 64, 4096, 4096, 4096)


def test_plan_needs_compute_capability_9_0():
    config = Sm90Config(128, 128)
    a100 = Gpu("NVIDIA A100-SXM4-80GB", 108, (8, 0))
    with pytest.raises(RuntimeError, match=r"^gemm: the sm90 path's kernels run on compute capability 9.0 "
                                           r"\(H100/H200\) "
                                           r"only; this weight is on NVIDIA A100-SXM4-80GB"):
        PATHS["sm90"].plan(config, GemmProblem(64, 4096, 4096, 128), SM90, a100, torch.device("cpu"))


def test_choose_offers_nothing_on_another_compute_capability():
    # sm_90a code runs on compute capability 9.0 only: elsewhere an sm90-layout weight runs on the other paths.
    problem = GemmProblem(64, 4096, 4096, 128)
    for capability in ((8, 0), (8, 9), (10, 0)):
        assert PATHS["sm90"].choose(SM90_FULL, problem, SM90, Gpu("other", 132, capability)) is None
    assert PATHS["sm90"].choose(SM90_FULL, problem, SM90, H100) == pick(64)


def test_takes_weight_needs_a_cuda_device():
    # prepack's "auto" layout: never the sm90 layout for a weight off the GPU.
    assert not PATHS["sm90"].takes_weight(torch.device("cpu"), SM90, 4096, 4096, 128)


# ===================================================================================================
# paths.sm90.heuristic and split_for
# ===================================================================================================


@pytest.mark.parametrize("M, name", [
    (1, "sm90_16x128x64_c1x1_coop_streamk"), (16, "sm90_16x128x64_c1x1_coop_streamk"),
    (17, "sm90_32x128x64_c1x1_coop_streamk"), (32, "sm90_32x128x64_c1x1_coop_streamk"),
    (33, "sm90_64x128x64_c1x1_coop_streamk"), (64, "sm90_64x128x64_c1x1_coop_streamk"),
    (65, "sm90_128x128x64_c1x1_coop_streamk"), (128, "sm90_128x128x64_c1x1_coop_streamk"),
])
def test_sm90_token_tile_by_m(M, name):
    # 8192 x 4096: 16 tiles of 256 columns x 128 k-tiles are 15.5 per SM, too few for the wide tile.
    assert pick(M, 4096, 8192).kernel_name == name


@pytest.mark.parametrize("K, N, M, name", [
    # 112 tiles of 256 columns x 128 k-tiles: 109 per SM, wide from M = 17 to 128 (unsplit: 112 tiles).
    (8192, 28672, 32, "sm90_32x256x64_c1x1_coop_streamk"),
    (8192, 28672, 64, "sm90_64x256x64_c1x1_coop_streamk"),
    (8192, 28672, 128, "sm90_128x256x64_c1x1_coop_streamk"),
    # 32 wide tiles x 448 k-tiles: 109 per SM; 32 tiles split 4 ways (at 128 tokens only where x's box zero-fills
    # over 32 rows: test_sm90_128_token_wide_tile_not_split_more_than_the_narrow_one).
    (28672, 8192, 32, "sm90_32x256x64_c1x1_coop_streamk_k4s"),
    (28672, 8192, 72, "sm90_128x256x64_c1x1_coop_streamk_k4r"),  # 8 subtiles split 4: the reduce-scatter
    # 56 x 128 = 54 per SM: wide to M = 64, not at 128 (which wants 96).
    (8192, 14336, 64, "sm90_64x256x64_c1x1_coop_streamk_k2s"),
    (8192, 14336, 128, "sm90_128x128x64_c1x1_coop_streamk"),
    # 43 x 64 = 21 per SM, but 86 narrow tiles fill 0.65 of the 132 SMs unsplit and 43 wide ones split 3 fill 0.98:
    # wide up to M = 64; at 128 the 128 x 128 tile.
    (4096, 11008, 32, "sm90_32x256x64_c1x1_coop_streamk_k3s"),
    (4096, 11008, 64, "sm90_64x256x64_c1x1_coop_streamk_k3s"),
    (4096, 11008, 128, "sm90_128x128x64_c1x1_coop_streamk"),
    # 40 narrow tiles split 3 fill 0.91: narrow.
    (8192, 5120, 32, "sm90_32x128x64_c1x1_coop_streamk_k3s"),
    # M = 16 and M > 128 never take it.
    (8192, 28672, 16, "sm90_16x128x64_c1x1_coop_streamk"),
    (8192, 28672, 4096, "sm90_256x128x64_c1x2_coop_persistent"),
])
def test_sm90_wide_weight_tile_on_large_weights(K, N, M, name):
    assert pick(M, N, K).name == name
    assert PATHS["sm90"].choose(SM90_FULL, GemmProblem(M, N, K, 128), SM90, H100).name == name


def test_sm90_wide_tile_fills_where_the_narrow_one_idles_by_sm_count():
    # 4096 x 11008 at M = 32: 86 tiles of 128 columns, 43 of 256.
    assert pick(32, 11008, 4096, 132).name == "sm90_32x256x64_c1x1_coop_streamk_k3s"  # 0.65 against 129 / 132
    # 114 SMs: the 86 narrow tiles fill 0.75 of them, enough.
    assert pick(32, 11008, 4096, 114).name == "sm90_32x128x64_c1x1_coop_streamk"
    # 128 SMs: the narrow tiles fill 0.67, but the wide ones split only 2 ways (86 of 128): no better.
    assert pick(32, 11008, 4096, 128).name == "sm90_32x128x64_c1x1_coop_streamk"
    # K too short to split the wide tile 3 ways (16 k-tiles a split): narrow.
    assert pick(32, 11008, 2048, 132).name == "sm90_32x128x64_c1x1_coop_streamk"


@pytest.mark.parametrize("K, N, M, name", [
    # 128 x 128 tiles at M = 65..128 where every SM gets 16 of their k-tiles: 8192 x 4096 has 32 x 128 / 132 = 31.
    (8192, 4096, 128, "sm90_128x128x64_c1x1_coop_streamk_k4r"),
    (8192, 4096, 65, "sm90_128x128x64_c1x1_coop_streamk_k4r"),
    # Below, two 64-row tiles: 4096 x 4096 has 15.5 (64 tiles of 64 x 128: split 2), 1024 x 8192 7.8 (128 tiles:
    # unsplit), 8192 x 1280 9.7 (20 tiles: split 6).
    (4096, 4096, 128, "sm90_64x128x64_c1x1_coop_streamk_k2s"),
    (1024, 8192, 100, "sm90_64x128x64_c1x1_coop_streamk"),
    (8192, 1280, 128, "sm90_64x128x64_c1x1_coop_streamk_k6s"),
    # M <= 64 and M > 128 are not this rule's.
    (1024, 8192, 64, "sm90_64x128x64_c1x1_coop_streamk"),
    (4096, 4096, 256, "sm90_128x128x64_c1x1_coop_streamk_k2s"),
])
def test_sm90_two_64_row_tiles_on_small_weights(K, N, M, name):
    assert pick(M, N, K).name == name
    if 64 < M <= 128:  # without the 64-row stream-K tile compiled, the 128-row one
        without = [c for c in SM90_FULL if c.kernel_name != "sm90_64x128x64_c1x1_coop_streamk"]
        assert pick(M, N, K, configs=without).tile_m == 128


def test_sm90_wide_weight_tile_reads_the_sm_count():
    # 8192 x 8192: 32 x 128 = 4096 wide k-tiles, 31 per SM on 132 SMs (narrow), 62 on 66 (wide).
    assert pick(32, 8192, 8192).tile_n == 128
    assert pick(32, 8192, 8192, sms=66).tile_n == 256
    # Without the wide tile compiled, the narrow one; N not a multiple of 256 takes the narrow one too.
    narrow = [c for c in SM90_FULL if c.tile_n != 256]
    assert pick(32, 28672, 8192, configs=narrow).name == "sm90_32x128x64_c1x1_coop_streamk"
    assert pick(32, 28672 + 128, 8192).tile_n == 128


def test_sm90_large_m_fills_the_gpu():
    # 8192 x 28672, M = 4096: 16 x 224 = 3584 tiles of 256 x 128 are 27.2 waves (97% busy): persistent, from
    # M = 1024 as the cluster of two that shares x by multicast (without that twin compiled, the single CTA).
    assert pick(4096, 28672, 8192).name == "sm90_256x128x64_c1x2_coop_persistent"
    no_pair = [c for c in SM90_FULL if c.cluster_n == 1]
    assert pick(4096, 28672, 8192, configs=no_pair).name == "sm90_256x128x64_c1x1_coop_persistent"
    assert pick(1024, 28672, 8192).name == "sm90_256x128x64_c1x2_coop_persistent"
    # 8192 x 8192, M = 1023 / 1024: 4 x 64 = 256 tiles (1.9 waves, 97%): the pair from 1024 rows on.
    assert pick(1023, 8192, 8192).name == "sm90_256x128x64_c1x1_coop_persistent"
    assert pick(1024, 8192, 8192).name == "sm90_256x128x64_c1x2_coop_persistent"
    # Below K = 4096 (the shortest K its rule measured) the single CTA: 2048 x 8192 at M = 4096.
    assert pick(4096, 8192, 2048).name == "sm90_256x128x64_c1x1_coop_persistent"
    assert pick(4096, 8192, 4096).name == "sm90_256x128x64_c1x2_coop_persistent"
    # An odd count of weight tiles keeps the single CTA (the pair's grid would round up to whole clusters):
    # 8192 x 896 at M = 4096, 16 x 7 = 112 tiles in one wave; 8192 x 1920, 240 tiles in two (91%).
    assert pick(4096, 896, 8192).name == "sm90_256x128x64_c1x1_coop_persistent"
    assert pick(4096, 1920, 8192).name == "sm90_256x128x64_c1x1_coop_persistent"
    assert pick(4096, 2048, 8192).name == "sm90_256x128x64_c1x2_coop_persistent"
    # A stream-K choice keeps its single CTA, even with a stream-K pair compiled: 4096 x 11008 at M = 2048, 688
    # tiles are 5.2 waves (87%).
    streamk_pair = Sm90Config(256, 128, 1, 2, "coop", "streamk")
    assert pick(2048, 11008, 4096, configs=SM90_FULL + [streamk_pair]).name == "sm90_256x128x64_c1x1_coop_streamk"
    # Only the measured tile takes a pair: 8192 x 8192 at M = 1024 with the ping-pong tile first (no 256 x 128
    # compiled) runs 256 x 64 ping-pong persistent as its single CTA (512 tiles).
    pingpong_pair = Sm90Config(256, 64, 1, 2, "pingpong", "persistent")
    no_256x128 = [c for c in SM90_FULL if (c.tile_m, c.tile_n) != (256, 128)]
    assert pick(1024, 8192, 8192, configs=no_256x128 + [pingpong_pair]).name == \
        "sm90_256x64x64_c1x1_pingpong_persistent"
    # M = 512: 448 tiles are 3.4 waves (85%): the stream-K twin of the same tile.
    assert pick(512, 28672, 8192).name == "sm90_256x128x64_c1x1_coop_streamk"
    # 4096 x 4096, M = 256: 32 tiles of 256 x 128 and 64 of 256 x 64 are under half a wave; 64 tiles of
    # 128 x 128 stream-K, split 2 ways to fill the GPU.
    assert pick(256, 4096, 4096).name == "sm90_128x128x64_c1x1_coop_streamk_k2s"
    # 8192 x 8192: 128 tiles of 256 x 64 fill it.
    assert pick(256, 8192, 8192).name == "sm90_256x64x64_c1x1_pingpong_persistent"
    # Without its stream-K twin a short last wave goes to the next choice: 896 tiles of 256 x 64 are 6.8 waves (97%).
    no_twin = [c for c in SM90_FULL if c.name != "sm90_256x128x64_c1x1_coop_streamk"]
    assert pick(512, 28672, 8192, configs=no_twin).name == "sm90_256x64x64_c1x1_pingpong_persistent"


def test_sm90_tiles_under_one_wave():
    # 8192 x 14336, M = 256: 112 tiles of 256 x 128 are 0.85 of a wave: persistent (no stream-K fixups).
    assert pick(256, 14336, 8192).name == "sm90_256x128x64_c1x1_coop_persistent"
    # 4096 x 11008, M = 256: 86 tiles (0.65 of a wave, under the 256 x 128 tile's 0.75); 172 tiles of 256 x 64
    # ping-pong are 1.3 waves with no twin; 128 x 128 stream-K.
    assert pick(256, 11008, 4096).name == "sm90_128x128x64_c1x1_coop_streamk"
    # On 114 SMs the same 86 tiles are 0.75 of one wave: the share reads the SM count.
    assert pick(256, 11008, 4096, sms=114).name == "sm90_256x128x64_c1x1_coop_persistent"
    # 8192 x 7168, M = 256: 56 tiles of 256 x 128; 112 of 256 x 64 ping-pong are 0.85 of a wave.
    assert pick(256, 7168, 8192).name == "sm90_256x64x64_c1x1_pingpong_persistent"


@pytest.mark.parametrize("M, N, K", [(1024, 1280, 8192), (512, 2560, 8192), (256, 5120, 8192), (224, 5120, 8192)])
def test_sm90_tall_split_where_the_rest_idle(M, N, K):
    # 40 tiles of 256 x 128: ping-pong's 80 tiles and 128 x 128's 80 (unsplit) are 0.61 of a wave, while 256 x 128
    # split 3 ways makes 120 units, 0.91 of it.
    assert pick(M, N, K).name == "sm90_256x128x64_c1x1_coop_streamk_k3s"
    # On 114 SMs that split is 2 (80 units, 0.70 of a wave): the ping-pong tiles, which make over half of it, where
    # their last x box zero-fills at most 24 rows of the whole box (M = 224: 32; then 128 x 128 stream-K).
    assert pick(M, N, K, sms=114).name == ("sm90_128x128x64_c1x1_coop_streamk" if M == 224 else
                                           "sm90_256x64x64_c1x1_pingpong_persistent")
    # Without the 256 x 128 stream-K config compiled, not the ping-pong tiles: 80 tiles of 128 x 128 make two waves of
    # thirds, run as half as many 128 x 256 tiles split 3 ways.
    no_split = [c for c in SM90_FULL if c.name != "sm90_256x128x64_c1x1_coop_streamk"]
    assert pick(M, N, K, configs=no_split).name == "sm90_128x256x64_c1x1_coop_streamk_k3s"


@pytest.mark.parametrize("M, name", [
    # 4096 x 5120 (64 k-tiles): 40 tiles of 256 x 128 split 3 would stream 21 k-tiles a split, under the 32 the split
    # needs at every M: 128 x 128 stream-K (80 tiles), or the ping-pong tile where its whole x box zero-fills at most
    # 24 rows (M = 232..256).
    (193, "sm90_128x128x64_c1x1_coop_streamk"),
    (225, "sm90_128x128x64_c1x1_coop_streamk"),
    (231, "sm90_128x128x64_c1x1_coop_streamk"),
    (232, "sm90_256x64x64_c1x1_pingpong_persistent"),
    (256, "sm90_256x64x64_c1x1_pingpong_persistent"),
])
def test_sm90_tall_split_needs_long_splits_at_every_m(M, name):
    assert pick(M, 5120, 4096).name == name
    assert sm90_path._TALL_SPLIT_MIN_K_TILES_PER_SPLIT == 32


@pytest.mark.parametrize("M, N, K, name", [
    # The tall split needs 32 k-tiles a split: 3584 x 2560 at M = 512 splits 56 k-tiles 3 ways (18.7).
    (512, 2560, 3584, "sm90_256x64x64_c1x1_pingpong_persistent"),
    # 4096 x 2560 at M = 433: 21 k-tiles a split; ping-pong zero-fills 15 rows.
    (433, 2560, 4096, "sm90_256x64x64_c1x1_pingpong_persistent"),
    # K of at most 64 k-tiles at 257..512 rows: up to 47 zero-filled rows of the last 64-row block (2048 x 4096 at
    # M = 273 and 4096 x 4096 at M = 409: 47 and 39) ...
    (273, 4096, 2048, "sm90_256x64x64_c1x1_pingpong_persistent"),
    (409, 4096, 4096, "sm90_256x64x64_c1x1_pingpong_persistent"),
    # ... not 63 (4096 x 2560 at M = 385), nor 47 of a whole 256-row box (M = 465: fewer than 64 rows past M) ...
    (385, 2560, 4096, "sm90_128x128x64_c1x1_coop_streamk"),
    (465, 4096, 4096, "sm90_128x128x64_c1x1_coop_streamk"),
    # ... and not with a longer K (8192 x 3584 at M = 401: 128 k-tiles).
    (401, 3584, 8192, "sm90_128x128x64_c1x1_coop_streamk"),
])
def test_sm90_ping_pong_at_two_token_tiles_where_k_is_short(M, N, K, name):
    assert pick(M, N, K).name == name


@pytest.mark.parametrize("M, zero_filled, limit", [
    # 64 or more rows past M: the last 64-row block's.
    (129, 63, 32), (144, 48, 32), (160, 32, 32), (176, 16, 32), (192, 0, 32),
    # Fewer: the whole 256-row box's.
    (193, 63, 24), (208, 48, 24), (224, 32, 24), (228, 28, 24), (232, 24, 24), (240, 16, 24), (256, 0, 24),
    # The second token tile's whole box.
    (464, 48, 24), (480, 32, 24),
])
def test_sm90_ping_pong_only_where_its_x_fill_is_short(M, zero_filled, limit):
    # 8192 x 8192 from 129 rows: 64 tiles of 256 x 128 (0.48 of a wave) and 128 x 128 tiles making a wave put the
    # 256 x 64 ping-pong tile first, unless the TMA unit zero-fills more than 32 rows of the last 64-row block it loads
    # (sm90/x_rows_past_m_skipped.cuh: from 64 rows past M a tile loads x in 64-row blocks up to M), or more than 24
    # of a whole box. Then 128 x 128 stream-K, whose 128 tiles fill 0.97 of a wave.
    assert sm90_path._x_rows_zero_filled(256, M) == zero_filled
    assert sm90_path._pingpong_zero_fill_limit(256, M, 8192) == limit
    if M <= 256:  # (above, the 256 x 128 tiles fill a wave themselves)
        ping_pong, fallback = "sm90_256x64x64_c1x1_pingpong_persistent", "sm90_128x128x64_c1x1_coop_streamk"
        assert pick(M, 8192, 8192).name == (ping_pong if zero_filled <= limit else fallback)
    assert sm90_path._x_rows_zero_filled(64, M) == -M % 64  # 64-token tiles load their whole box


@pytest.mark.parametrize("N", [4096, 8192])
def test_sm90_ping_pong_first_where_k_is_short(N):
    # K = 1024 (16 k-tiles): the 256 x 64 ping-pong tile at 129..256 rows, whatever its wave share (64 tiles, 0.48 of
    # a wave, on 4096 columns) or x fill (48 rows at M = 144 / 208); not at 128 rows, nor from 1152 (18).
    ping_pong = "sm90_256x64x64_c1x1_pingpong_persistent"
    for M in (129, 144, 176, 208, 240, 256):
        assert pick(M, N, 1024).name == ping_pong, M
    assert pick(128, N, 1024).name != ping_pong
    assert pick(144, 4096, 1152).name != ping_pong
    # 257..512 rows only where its tiles fit one wave: 128 on 4096 columns (with 63 rows zero-filled at 257), 256 on
    # 8192; never past 512.
    for M in (257, 321, 449, 512):
        assert (pick(M, N, 1024).name == ping_pong) == (N == 4096), M
    assert pick(513, N, 1024).name != ping_pong
    # Without the ping-pong tile compiled, the other rules decide.
    no_ping_pong = [c for c in SM90_FULL if c.schedule != "pingpong"]
    assert pick(144, N, 1024, configs=no_ping_pong).schedule == "coop"


def test_sm90_x_rows_zero_filled_by_128_token_tiles():
    # The rows past M in the box (under 64 past), or in the last 64-row block (64 or more past).
    assert [sm90_path._x_rows_zero_filled(128, m) for m in (100, 64, 40, 208)] == [28, 0, 24, 48]


@pytest.mark.parametrize("M", [129, 160, 192])
def test_sm90_64_token_tiles_sized_to_m(M):
    # 129..192 rows: three 64-token tiles compute 192 rows where the bucket's other choices compute 256; they go first
    # where they fill 0.9 to 1 of a wave. 8192 x 5120: 60 tiles of 64 x 256 split 2 fill 0.91, and every SM streams
    # 58 of their k-tiles (at least 48).
    assert pick(M, 5120, 8192).name == "sm90_64x256x64_c1x1_coop_streamk_k2s"
    # 4096 x 5120: 64 x 256 gives each SM 29 k-tiles, but where 120 tiles of 64 x 128 fill 0.91 unsplit, 60 of 64 x
    # 256 split 2 fill as much with 32 k-tiles a split (test_sm90_64_token_wide_tile_where_its_split_is_long).
    assert pick(M, 5120, 4096).name == "sm90_64x256x64_c1x1_coop_streamk_k2s"
    # 4096 x 11008: 129 tiles of 64 x 256, 0.98 of a wave.
    assert pick(M, 11008, 4096).name == "sm90_64x256x64_c1x1_coop_streamk"
    # 4096 x 4096: 96 tiles of 64 x 128 fill 0.73: the bucket's pick, 128 x 128 split 2.
    assert pick(M, 4096, 4096).name == "sm90_128x128x64_c1x1_coop_streamk_k2s"
    # 8192 x 8192: 192 tiles of 64 x 128 make 1.45 waves: the ping-pong tiles, where their last x box zero-fills
    # at most 32 rows (M = 160: 32 of the last 64-row block; M = 192: none), else 128 x 128 (M = 129: 63 rows).
    assert pick(M, 8192, 8192).name == ("sm90_128x128x64_c1x1_coop_streamk" if M == 129 else
                                        "sm90_256x64x64_c1x1_pingpong_persistent")
    # Without the 64-token configs compiled, the bucket's pick.
    no_64 = [c for c in SM90_FULL if c.tile_m != 64]
    assert pick(M, 5120, 8192, configs=no_64).name == "sm90_256x128x64_c1x1_coop_streamk_k3s"


@pytest.mark.parametrize("M, N, K, name", [
    (512, 4096, 4096, "sm90_256x64x64_c1x1_pingpong_persistent"),   # 128 ping-pong tiles fill the GPU
    (384, 4096, 2048, "sm90_256x64x64_c1x1_pingpong_persistent"),   # the same 128 (256 x 128 split 2 would fill it)
    (256, 4096, 4096, "sm90_128x128x64_c1x1_coop_streamk_k2s"),     # 64 tiles of 128 x 128 split 2 fill it
    (512, 1280, 8192, "sm90_128x128x64_c1x1_coop_streamk_k3s"),     # 20 tiles of 256 x 128 split 4: 0.61
    (512, 2560, 2048, "sm90_256x64x64_c1x1_pingpong_persistent"),   # 32 k-tiles: split 2 at most (0.61)
])
def test_sm90_tall_split_not_where_another_choice_fills(M, N, K, name):
    assert pick(M, N, K).name == name


def test_sm90_64_token_tiles_above_128_rows_fill_at_most_one_wave():
    # 4096 x 4096 at M = 257: 160 tiles of 64 x 128 (1.21 waves) would fill the GPU where 96 of 128 x 128 (0.73)
    # cannot, but over one wave they are just more tiles: 128 x 128 stream-K.
    assert pick(257, 4096, 4096).name == "sm90_128x128x64_c1x1_coop_streamk"
    # 8192 x 1280 at M = 176: 30 tiles split 4 fill 0.91 of one wave, and compute 192 rows where 128-token tiles
    # compute 256.
    assert pick(176, 1280, 8192).name == "sm90_64x128x64_c1x1_coop_streamk_k4s"


@pytest.mark.parametrize("M, N, K, name", [
    # 40 tiles of 128 x 128 split 3 (42 k-tiles a split) fill 0.91 of a wave: before the 64-token tiles.
    (144, 2560, 8192, "sm90_128x128x64_c1x1_coop_streamk_k3s"),
    (192, 2560, 8192, "sm90_128x128x64_c1x1_coop_streamk_k3s"),
    (160, 2560, 16384, "sm90_128x128x64_c1x1_coop_streamk_k3s"),
    # 20 tiles split 6 (42 k-tiles a split, sharing the reduction).
    (160, 1280, 16384, "sm90_128x128x64_c1x1_coop_streamk_k6r"),
    # 21 k-tiles a split: the 64-token tiles stay.
    (144, 2560, 4096, "sm90_64x128x64_c1x1_coop_streamk_k2s"),
    (160, 1280, 8192, "sm90_64x128x64_c1x1_coop_streamk_k4s"),
    # 128 x 128 tiles making over half a wave get no split: the 64-token tiles.
    (160, 5120, 8192, "sm90_64x256x64_c1x1_coop_streamk_k2s"),
])
def test_sm90_long_128_token_splits_before_64_token_tiles(M, N, K, name):
    assert pick(M, N, K).name == name
    assert sm90_path._LONG_SPLIT_MIN_K_TILES == 32


H100_BANDWIDTH, H200_BANDWIDTH = 3.35e12, 4.8e12


@pytest.mark.parametrize("M, K, N, h100, h200", [
    # Under 16 k-tiles an SM for 128 x 128, where on the H200 it streams few enough on its busiest SM:
    # L64 - 1.3 L128 = 32 - 1.3 x 16 = 11.2 (unsplit 64 x 128; 128 x 128 split 2, or split 4 on 4096x4096).
    (128, 2048, 8192, "sm90_64x128x64_c1x1_coop_streamk", "sm90_128x128x64_c1x1_coop_streamk_k2s"),
    (96, 4096, 4096, "sm90_64x128x64_c1x1_coop_streamk_k2s", "sm90_128x128x64_c1x1_coop_streamk_k4r"),
    (65, 3072, 5120, "sm90_64x128x64_c1x1_coop_streamk", "sm90_128x128x64_c1x1_coop_streamk_k3s"),
    # 128 x 128 unsplit (under 32 k-tiles), spread by stream-K: the 64-token tiles on both GPUs, whatever the count
    # (24 - 1.3 x 12 = 8.4, 16 - 1.3 x 8 = 5.6, 24 - 1.3 x 9 = 12.3).
    (128, 1536, 8192, "sm90_64x128x64_c1x1_coop_streamk", "sm90_64x128x64_c1x1_coop_streamk"),
    (128, 1024, 8192, "sm90_64x128x64_c1x1_coop_streamk", "sm90_64x128x64_c1x1_coop_streamk"),
    (72, 1536, 6144, "sm90_64x128x64_c1x1_coop_streamk", "sm90_64x128x64_c1x1_coop_streamk"),
    # 64 x 128 split 2 against 128 x 128 split 2, both 16 k-tiles on the busiest SM: the 64-token tiles.
    (128, 2048, 4096, "sm90_64x128x64_c1x1_coop_streamk_k2s", "sm90_64x128x64_c1x1_coop_streamk_k2s"),
    # Split 6 either way (22 k-tiles a split on both): the 64-token tiles.
    (128, 8192, 1280, "sm90_64x128x64_c1x1_coop_streamk_k6s", "sm90_64x128x64_c1x1_coop_streamk_k6s"),
    # From 16 k-tiles an SM the H100's measure takes 128 x 128 on both, though the busiest-SM count alone would not
    # (84 - 1.3 x 64 = 0.8: the 64-token tiles' 1.3 waves spread by stream-K count few k-tiles).
    (128, 4096, 11008, "sm90_128x128x64_c1x1_coop_streamk", "sm90_128x128x64_c1x1_coop_streamk"),
])
def test_sm90_128_token_tiles_by_the_busiest_sm_on_a_fast_dram(M, K, N, h100, h200):
    for bandwidth, name in ((H100_BANDWIDTH, h100), (0.0, h100), (H200_BANDWIDTH, h200)):
        config = sm90_path.heuristic(SM90_FULL, M, N, K, 132, bandwidth)
        assert sm90_path.split_for(config, M, N, K, 132).name == name, bandwidth
    # The GPU's bandwidth reaches the rule through the path's choice.
    gpu = Gpu("NVIDIA H200", 132, (9, 0), H200_BANDWIDTH)
    assert PATHS["sm90"].choose(SM90_FULL, GemmProblem(M, N, K, 128), SM90, gpu).name == h200


def test_sm90_busiest_sm_k_tiles():
    # 128 tiles of 64 x 128 unsplit in one wave: each SM streams one tile's 32 k-tiles.
    assert sm90_path._busiest_sm_k_tiles((64, 128), 128, 8192, 2048, 132) == 32
    # 64 tiles of 128 x 128 split 2: 128 units of 16.
    assert sm90_path._busiest_sm_k_tiles((128, 128), 128, 8192, 2048, 132) == 16
    # 64 tiles unsplit (K too short to split) under half a wave: stream-K spreads 64 x 24 k-tiles over 132 SMs.
    assert sm90_path._busiest_sm_k_tiles((128, 128), 128, 8192, 1536, 132) == 12
    # 86 tiles unsplit over half a wave: whole tiles.
    assert sm90_path._busiest_sm_k_tiles((128, 128), 128, 11008, 4096, 132) == 64
    assert (sm90_path._TOKEN_TILE_128_K_TILE_COST, sm90_path._TOKEN_TILE_128_EXTRA_COST_K_TILES) == (1.3, 10)


@pytest.mark.parametrize("M, name", [
    # 28672 x 8192: 32 tiles of 128 x 256 split 4, 64 of 128 x 128 split 2. The narrow split where x's box zero-fills
    # at most 32 rows (M >= 96), the wide one where more (M = 65..95).
    (65, "sm90_128x256x64_c1x1_coop_streamk_k4r"),
    (95, "sm90_128x256x64_c1x1_coop_streamk_k4r"),
    (96, "sm90_128x128x64_c1x1_coop_streamk_k2s"),
    (128, "sm90_128x128x64_c1x1_coop_streamk_k2s"),
])
def test_sm90_128_token_wide_tile_not_split_more_than_the_narrow_one(M, name):
    assert pick(M, 8192, 28672).name == name
    assert sm90_path._WIDE_SPLIT_YIELDS_MAX_ZERO_FILLED_ROWS == 32
    # Where the wide tile needs no more splits it stays: 8192 x 28672, 112 wide tiles and 224 narrow ones, unsplit.
    assert pick(128, 28672, 8192).name == "sm90_128x256x64_c1x1_coop_streamk"
    # The 64-token wide tile keeps its split of 4 (64 x 128 would split 2).
    assert pick(64, 8192, 28672).name == "sm90_64x256x64_c1x1_coop_streamk_k4r"


@pytest.mark.parametrize("M", [129, 144, 176, 192])
def test_sm90_64_token_wide_tile_where_its_split_is_long(M):
    # 4096 x 5120: 120 tiles of 64 x 128 fill 0.91 unsplit; 60 of 64 x 256 split 2 (32 k-tiles a split) as much.
    assert pick(M, 5120, 4096).name == "sm90_64x256x64_c1x1_coop_streamk_k2s"
    assert sm90_path._TOKEN_TILE_64_WIDE_LONG_SPLIT == 32
    # 4096 x 2560: 30 tiles of 64 x 256 split 4 (16 k-tiles a split): the 64 x 128 split of 2.
    assert pick(M, 2560, 4096).name == "sm90_64x128x64_c1x1_coop_streamk_k2s"
    # 6144 x 3584: 42 tiles of 64 x 256 split 3 (32 k-tiles a split) fill 0.95, but 84 of 64 x 128 fill 0.64: the
    # wide tile does not replace the bucket's pick.
    assert pick(M, 3584, 6144).name == "sm90_128x128x64_c1x1_coop_streamk_k2s"


def test_sm90_three_token_tiles_first_at_257_to_384_rows_where_k_is_long():
    # 8192 x 8192 (128 k-tiles): three 128-token tiles compute 384 rows where two 256-token ones compute 512, so
    # 128 x 128 stream-K goes before the 256 x 128 persistent tile (128 tiles, one wave) from 257 to 384 rows.
    for M in (257, 289, 384):
        assert pick(M, 8192, 8192).name == "sm90_128x128x64_c1x1_coop_streamk", M
    assert pick(385, 8192, 8192).name == "sm90_256x128x64_c1x1_coop_persistent"
    # Split by split_for: 8192 x 2560 at M = 289, 60 tiles split 2 (where 80 ping-pong tiles came before).
    assert pick(289, 2560, 8192).name == "sm90_128x128x64_c1x1_coop_streamk_k2s"
    # K = 2048 (32 k-tiles): the per-tile costs weigh more; the bucket's 256 x 128 persistent tile stays.
    assert pick(289, 8192, 2048).name == "sm90_256x128x64_c1x1_coop_persistent"
    # Without 128 x 128 stream-K compiled, the other rules decide.
    no_128 = [c for c in SM90_FULL if (c.tile_m, c.tile_n, c.scheduler) != (128, 128, "streamk")]
    assert pick(289, 8192, 8192, configs=no_128).tile_m == 256


def test_sm90_wide_three_token_tiles_past_one_wave_where_their_slots_cost_less():
    # One 128 x 256 tile costs 1.9 128 x 128 ones; what counts is the SM slots CUTLASS's stream-K scheduler gives each.
    wide, narrow = "sm90_128x256x64_c1x1_coop_streamk", "sm90_128x128x64_c1x1_coop_streamk"
    # 4096 x 11008 at M = 289: 258 128 x 128 tiles run data-parallel in two waves (264 slots), 129 wide ones in one.
    assert pick(289, 11008, 4096).name == wide
    # 8192 x 14336: 336 tiles in three waves (396 slots) against 168 wide ones spread by stream-K (1.9 x 168 = 319).
    assert pick(321, 14336, 8192).name == wide
    # 5120 x 13824: both spread by stream-K (324 and 162 tiles): the wide tile's lower cost decides.
    assert pick(305, 13824, 5120).name == wide
    # 8192 x 28672: 336 wide tiles in three waves (1.9 x 396 = 752 slots) against 672 spread: 128 x 128.
    assert pick(289, 28672, 8192).name == narrow
    # 8192 x 8192: 96 wide tiles in one data-parallel wave (1.9 x 132 = 251) against 192 spread.
    assert pick(289, 8192, 8192).name == narrow
    # Only at three token tiles: from 385 rows the bucket's rules decide.
    assert pick(385, 11008, 4096).name != wide
    # The SM count is an input: with 114 SMs 8192 x 8192's 192 tiles leave a last wave of 78, over half, so they run
    # in two data-parallel waves (228 slots) against 96 wide tiles in one (1.9 x 114 = 217).
    assert pick(289, 8192, 8192, sms=114).name == wide
    # Without the wide tile compiled, 128 x 128.
    no_wide = [c for c in SM90_FULL if (c.tile_m, c.tile_n) != (128, 256)]
    assert pick(289, 11008, 4096, configs=no_wide).name == narrow


@pytest.mark.parametrize("M, N, K, name", [
    # 11008 x 4096: 96 128 x 128 tiles (0.73 of a wave); 48 wide ones, 62.5 k-tiles an SM, unsplit: split 2 would
    # leave 36 SMs idle.
    (289, 4096, 11008, "sm90_128x256x64_c1x1_coop_streamk"),
    # 11008 x 3584: 42 wide tiles split 3 fill 0.95 of a wave, so the split stays.
    (353, 3584, 11008, "sm90_128x256x64_c1x1_coop_streamk_k3s"),
    # 6144 x 4096: 34.9 k-tiles an SM, too few for the wide tile's stream-K units.
    (337, 4096, 6144, "sm90_128x128x64_c1x1_coop_streamk"),
    # 14336 x 2048: 24 wide tiles would make 5.5 units a tile; 128 x 128, unsplit: a split of 2 would idle 36 SMs,
    # which costs more than stream-K's spread (test_sm90_stream_k_spread_over_a_split).
    (289, 2048, 14336, "sm90_128x128x64_c1x1_coop_streamk"),
    # 8192 x 5120: 120 128 x 128 tiles fill 0.91 of a wave.
    (289, 5120, 8192, "sm90_128x128x64_c1x1_coop_streamk"),
])
def test_sm90_wide_three_token_tiles_within_one_wave_where_128_columns_idle(M, N, K, name):
    assert pick(M, N, K).name == name


@pytest.mark.parametrize("M, N, K, name", [
    # 84 tiles of 128 x 128 (0.64 of a wave) at three token tiles: 42 of 128 x 256 split 3 ways.
    (273, 3584, 8192, "sm90_128x256x64_c1x1_coop_streamk_k3s"),
    # Where the 256 x 64 ping-pong tiles came first (80 tiles of 128 x 128 at five token tiles).
    (545, 2048, 8192, "sm90_128x256x64_c1x1_coop_streamk_k3s"),
    # Up to 128 rows (80 tiles; the 128 x 256 tile's k-tiles an SM are under the rule for large weights).
    (112, 10240, 8192, "sm90_128x256x64_c1x1_coop_streamk_k3s"),
    # K = 5120: 26 k-tiles a split, over the 24 the split needs.
    (289, 3584, 5120, "sm90_128x256x64_c1x1_coop_streamk_k3s"),
    # K = 4096: 21 k-tiles a split, too few.
    (289, 3584, 4096, "sm90_128x128x64_c1x1_coop_streamk"),
    # 96 tiles (0.73 of a wave), past two thirds.
    (337, 4096, 8192, "sm90_128x128x64_c1x1_coop_streamk"),
    # K = 28672, 72 tiles: 36 of 128 x 256 split 3 would idle 24 SMs, so they run unsplit, spread by stream-K.
    (350, 3072, 28672, "sm90_128x256x64_c1x1_coop_streamk"),
])
def test_sm90_128_token_tiles_in_two_waves_of_thirds(M, N, K, name):
    assert pick(M, N, K).name == name


def test_sm90_two_waves_of_thirds_read_the_sm_count_and_the_compiled_tiles():
    # 84 tiles on 114 SMs are past two thirds of a wave.
    assert pick(273, 3584, 8192, sms=114).name == "sm90_128x128x64_c1x1_coop_streamk"
    # 64 tiles (8192 x 8192 up to 128 rows) are split 2 on 132 SMs, and make two waves of thirds on 114.
    assert pick(96, 8192, 8192).name == "sm90_128x128x64_c1x1_coop_streamk_k2s"
    assert pick(96, 8192, 8192, sms=114).name == "sm90_128x256x64_c1x1_coop_streamk_k3s"
    # Without the 128 x 256 stream-K config compiled, 128 x 128 split 3 ways.
    no_wide = [c for c in SM90_FULL if (c.tile_m, c.tile_n) != (128, 256)]
    for M, N in ((273, 3584), (545, 2048), (112, 10240)):
        assert pick(M, N, 8192, configs=no_wide).name == "sm90_128x128x64_c1x1_coop_streamk_k3s"


@pytest.mark.parametrize("M, N, K, name", [
    # 60 tiles of 64 x 256 (8192 x 3072, M = 289) split 2 fill 0.91 of a wave where 72 of 128 x 128 make two waves of
    # thirds; they compute 320 rows where three 128-token tiles compute 384.
    (289, 3072, 8192, "sm90_64x256x64_c1x1_coop_streamk_k2s"),
    (680, 1536, 8192, "sm90_64x256x64_c1x1_coop_streamk_k2s"),
    # Before the 256 x 128 tall split (which computes 1024 rows where these compute 832).
    (800, 1280, 8192, "sm90_64x256x64_c1x1_coop_streamk_k2s"),
    # Without the k-tiles an SM that the wide tile needs at 129..192 rows (43.6 at K = 6144).
    (289, 3072, 6144, "sm90_64x256x64_c1x1_coop_streamk_k2s"),
    # M = 337: 64-token tiles would compute the same 384 rows.
    (337, 3072, 8192, "sm90_128x256x64_c1x1_coop_streamk_k3s"),
])
def test_sm90_64_token_tiles_in_two_waves_of_thirds(M, N, K, name):
    assert pick(M, N, K).name == name
    # Without 64 x 256, the 64 x 128 tiles where they fill one wave (120 on 8192 x 3072 at M = 289).
    no_wide = [c for c in SM90_FULL if (c.tile_m, c.tile_n) != (64, 256)]
    assert pick(289, 3072, 8192, configs=no_wide).name == "sm90_64x128x64_c1x1_coop_streamk"


@pytest.mark.parametrize("M, N, K, split", [
    # 48 tiles (0.36 of a wave): a split of 2 idles 36 SMs, costing K / 64 x (1/2 - 48/132) k-tiles an SM against
    # the spread's 20: 30.5 at K = 14336, 21.8 at 10240 (unsplit); 17.5 at 8192 (split).
    (289, 2048, 14336, 1),
    (289, 2048, 10240, 1),
    (321, 2048, 8192, 2),
    # 50 tiles at K = 8192 (15.5) and 28672 (54).
    (577, 1280, 8192, 2),
    (577, 1280, 28672, 1),
    # Up to 128 rows: 48 tiles at K = 12288 (26.2), 64 at 8192 (1.9).
    (128, 6144, 12288, 1),
    (128, 8192, 8192, 2),
    # Tiles fewer than a quarter of the SMs keep the split (the spread measured at two to four SMs a tile): 20
    # tiles at K = 28672 split 6 (their splits share the reduction), where the product is 44.1.
    (256, 1280, 28672, 6),
])
def test_sm90_stream_k_spread_over_a_split(M, N, K, split):
    config = sm90_path.split_for(Sm90Config(128, 128, 1, 1, "coop", "streamk"), M, N, K, 132)
    assert config.split_k == split


def test_sm90_short_split_where_128_rows_idle():
    # 8192 x 1280, M = 256: 20 tiles of 128 x 128 split 6 (sharing the reduction) fill 0.91 of a wave, like 40 of
    # 64 x 128 split 3: the 128 x 128 split.
    assert pick(256, 1280, 8192).name == "sm90_128x128x64_c1x1_coop_streamk_k6r"
    # On 100 SMs the same 20 tiles split 5 ways (100 // 20), still sharing the reduction.
    assert pick(256, 1280, 8192, sms=100).name == "sm90_128x128x64_c1x1_coop_streamk_k5r"
    # Where the K left for 6 splits is too short (16 k-tiles a split: K = 4096 allows 4), 128 x 128 split 4 fills
    # 0.61 and 40 tiles of 64 x 128 split 3 fill 0.91.
    assert pick(256, 1280, 4096).name == "sm90_64x128x64_c1x1_coop_streamk_k3s"
    # M = 512: 40 tiles of 128 x 128 split 3 fill 0.91 themselves.
    assert pick(512, 1280, 8192).name == "sm90_128x128x64_c1x1_coop_streamk_k3s"
    # Without 64 x 128 compiled, 128 x 128 (the last choice that runs).
    no_64 = [c for c in SM90_FULL if c.tile_m != 64]
    assert pick(256, 1280, 4096, configs=no_64).name == "sm90_128x128x64_c1x1_coop_streamk_k4r"


@pytest.mark.parametrize("K, N, M, split", [
    (4096, 4096, 32, 4),    # 32 tiles of 32 x 128: 4 x 32 = 128 CTAs (measured 15.4 against 16.5 us unsplit)
    (8192, 4096, 128, 4),   # 32 tiles of 128 x 128 (4 subtiles split 4: the reduce-scatter)
    (8192, 8192, 64, 2),    # 64 tiles: 2 x 64 = 128
    (11008, 4096, 64, 4),
    (4096, 11008, 64, 3),   # 43 tiles of 64 x 256 (86 of 64 x 128 would be more than half the SMs: unsplit)
    (8192, 14336, 64, 2),   # 56 tiles of 64 x 256
    (8192, 28672, 128, 1),  # 224 tiles
    (2048, 4096, 128, 2),   # 32 k-tiles: 16 per split at least
    (1024, 4096, 128, 1),   # 16 k-tiles: nothing to split
    (64, 4096, 128, 1),
])
def test_sm90_split_k_rule(K, N, M, split):
    cfg = pick(M, N, K)
    assert cfg.scheduler == "streamk" and cfg.split_k == split, cfg
    scatter = cfg.tile_m == 128 and split >= 4  # a quarter of the 4 subtiles a split, or fewer
    assert cfg.split_k_mode == ("none" if split == 1 else "reduce_scatter" if scatter else "serial")
    assert PATHS["sm90"].choose(SM90_FULL, GemmProblem(M, N, K, 64), SM90, H100) == cfg
    # Fewer SMs, fewer splits: 32 tiles on 80 SMs split 2 ways; on 40 SMs not at all.
    assert pick(32, 4096, 4096, sms=80).split_k == 2
    assert pick(32, 4096, 4096, sms=40).split_k == 1
    # Persistent configs are never split, and a split config's split is recomputed.
    persistent = Sm90Config(128, 128, 1, 1, "coop", "persistent")
    assert sm90_path.split_for(persistent, 128, 4096, 4096, 132) == persistent
    streamk = Sm90Config(128, 128, 1, 1, "coop", "streamk")
    assert sm90_path.split_for(streamk.with_split_k(3), 128, 28672, 8192, 132) == streamk
    # At most 6 ways up to 128 rows, 4 above: 20 tiles split 6 up to 128 rows (8192 x 2560, 128 x 128 at M = 128),
    # 4 at M = 129 (64 x 128 tiles, 30 of them: 132 // 30 = 4).
    assert sm90_path.MAX_SPLIT_K == 6
    assert pick(128, 2560, 8192).name == "sm90_128x128x64_c1x1_coop_streamk_k6r"
    assert pick(129, 1280, 8192).name == "sm90_64x128x64_c1x1_coop_streamk_k4s"
    # Above 128 rows 6 only for 128 x 128 tiles (whose splits of 4 or more share the reduction) and 64 x 128 tiles;
    # 256 x 128 and 128 x 256 keep the cap of 4.
    assert pick(208, 1280, 8192).name == "sm90_128x128x64_c1x1_coop_streamk_k6r"
    # 20 tiles of each shape at M = 208 (132 // 20 = 6), K = 8192.
    for tile, N in (((128, 128), 1280), ((64, 128), 640), ((256, 128), 2560), ((128, 256), 2560)):
        assert sm90_path._tiles(*tile, 208, N) == 20
        assert sm90_path._split(tile, 208, N, 8192, 132) == (6 if tile in ((128, 128), (64, 128)) else 4)
    # 8192 x 1024 at M = 160: 24 tiles of 64 x 128 split 5.
    assert pick(160, 1024, 8192).name == "sm90_64x128x64_c1x1_coop_streamk_k5s"


@pytest.mark.parametrize("tile, subtiles", [
    ((16, 128), 1), ((32, 128), 1), ((64, 128), 2), ((128, 128), 4), ((256, 128), 8),
    ((32, 256), 2), ((64, 256), 4), ((128, 256), 8)])
def test_sm90_epilogue_subtiles(tile, subtiles):
    # 128 weight columns x 32 tokens (fewer tokens where the tile has fewer); kernel_types.cuh asserts the same count.
    assert sm90_path.epilogue_subtiles(Sm90Config(*tile, 1, 1, "coop", "streamk")) == subtiles


@pytest.mark.parametrize("tile, tiles, split, pays", [
    ((128, 128), 20, 6, True),    # 4 subtiles: the largest owner holds 1 of 4
    ((128, 128), 32, 4, True),
    ((128, 128), 40, 3, False),   # 2 of 4
    ((128, 128), 64, 2, False),
    ((256, 128), 40, 3, False),   # 3 of 8: measured no gain in the peers harness
    ((256, 128), 20, 4, True),    # 2 of 8
    ((128, 256), 32, 4, True),
    ((64, 256), 32, 4, True),
    ((64, 128), 20, 6, False),    # 2 subtiles: never better than half
    ((32, 256), 32, 4, False),
    ((128, 128), 34, 4, False),   # 136 splits on 132 SMs: not all at once
])
def test_sm90_reduce_scatter_rule(tile, tiles, split, pays):
    config = Sm90Config(*tile, 1, 1, "coop", "streamk")
    assert sm90_path._reduce_scatter_pays(config, tiles, split, 132) is pays
    # Clusters are left to the last split's reduction (their grid rounding is not modelled).
    assert not sm90_path._reduce_scatter_pays(dataclasses.replace(config, cluster_n=2), tiles, split, 132)


def test_sm90_picks_only_tiles_that_divide_n():
    # N = 4160 = 65 x 64: only the 64-column ping-pong tiles divide it.
    for M in (17, 64, 128, 1024, 4096):
        cfg = pick(M, 4160, 4096)
        assert cfg.path == "sm90" and cfg.schedule == "pingpong" and 4160 % cfg.tile_n == 0, (M, cfg)
        assert PATHS["sm90"].fits(cfg, GemmProblem(M, 4160, 4096, 128), SM90) is None


@pytest.mark.parametrize("N", [1024, 4096, 4160, 28672])
@pytest.mark.parametrize("sms", [132, 114, 8])
def test_sm90_heuristic_invariants(N, sms):
    # The pair's first row and the one before it, so the sweep checks the threshold itself.
    edge = sm90_path._X_MULTICAST_MIN_M
    for M in [*range(1, 300), 511, 512, 513, 1000, edge - 1, edge, 4096, 5000]:
        cfg = pick(M, N, 8192, sms)
        # Clusters: only the multicast pair of the persistent 256 x 128 tile, and only from the library's
        # _X_MULTICAST_MIN_M rows (one rule, shared with test_heuristic through hand_registry).
        pair = is_x_multicast_pair(cfg, M)
        assert N % cfg.tile_n == 0 and (cfg.cluster_m, cfg.cluster_n) == ((1, 2) if pair else (1, 1)), (M, cfg)
        assert cfg.with_split_k(1) in SM90_FULL, (M, cfg)
        tiles = -(-M // cfg.tile_m) * (N // cfg.tile_n)
        # A split only on stream-K, and only where tiles x split stays within one wave.
        assert cfg.split_k == 1 or (cfg.scheduler == "streamk" and 2 <= cfg.split_k <= sm90_path.MAX_SPLIT_K
                                    and tiles * cfg.split_k <= sms), (M, cfg)
        if M <= 128 and N % 128 == 0:
            # Up to 128 rows the token tile that covers M; at 65..128 on small weights two of 64 rows.
            assert M <= cfg.tile_m or (64 < M and cfg.tile_m == 64), (M, cfg)
        assert PATHS["sm90"].fits(cfg, GemmProblem(M, N, 8192, 128), SM90) is None, (M, cfg)


def test_sm90_reduced_build_falls_back_to_single_ctas():
    # A reduced build with the pair listed first. 4096 x 4096 at M = 300: 64 tiles of 256 x 128 are under the
    # tile's 0.75 of a wave and no other choice is compiled, so the fallback decides: the single CTA. At M = 5000
    # (640 tiles, 4.8 waves) the rule itself takes the pair.
    pair, single = Sm90Config(256, 128, 1, 2, "coop", "persistent"), Sm90Config(256, 128, 1, 1, "coop", "persistent")
    assert sm90_path.heuristic([pair, single], 300, 4096, 4096, 132) == single
    assert sm90_path.heuristic([pair, single], 5000, 4096, 4096, 132) == pair
    assert sm90_path.heuristic([pair], 300, 4096, 4096, 132) == pair  # nothing else compiled


def test_sm90_reduced_build_falls_back_by_token_tile():
    minimal = [Sm90Config(128, 128, 1, 1, "coop", "persistent")]
    for M in (17, 64, 128, 4096):  # no preferred schedule compiled: the one there is
        assert pick(M, configs=minimal).name == "sm90_128x128x64_c1x1_coop_persistent"
    two = [Sm90Config(64, 128, 1, 1, "coop", "persistent"), Sm90Config(256, 128, 1, 1, "coop", "streamk")]
    # The smallest token tile covering M, else the largest.
    assert sm90_path.heuristic(two, 40, 4096, 4096, 132).tile_m == 64
    assert sm90_path.heuristic(two, 100, 4096, 4096, 132).tile_m == 256
    assert sm90_path.heuristic(two, 5000, 4096, 4096, 132).tile_m == 256
    # The minimal set (one schedule, its stream-K twin for fp16 int4): the twin covers M <= 128.
    minimal_set = set_configs("minimal", "sm90", SM90)
    assert [c.name for c in minimal_set] == ["sm90_128x128x64_c1x1_coop_persistent",
                                             "sm90_128x128x64_c1x1_coop_streamk"]
    assert pick(64, configs=minimal_set).name == "sm90_128x128x64_c1x1_coop_streamk_k4r"


def test_sm90_without_a_tile_of_n():
    only_128 = [c for c in SM90_FULL if c.tile_n == 128]
    assert sm90_path.heuristic(only_128, 64, 4160, 4096, 132) is None
    assert sm90_path.heuristic([], 64, 4096, 4096, 132) is None  # no sm90 config at all (a build without sm_90a)
    assert PATHS["sm90"].choose(only_128, GemmProblem(64, 4160, 4096, 128), SM90, H100) is None
    assert PATHS["sm90"].choose([], GemmProblem(64, 4096, 4096, 128), SM90, H100) is None


# ===================================================================================================
# split_variants
# ===================================================================================================


def test_split_variants():
    streamk = Sm90Config(128, 128, 1, 1, "coop", "streamk")
    problem = GemmProblem(64, 4096, 4096, 128)
    assert [v.name for v in PATHS["sm90"].split_variants(streamk.with_split_k(2), problem, H100)] == [
        "sm90_128x128x64_c1x1_coop_streamk", "sm90_128x128x64_c1x1_coop_streamk_k2s",
        "sm90_128x128x64_c1x1_coop_streamk_k3s", "sm90_128x128x64_c1x1_coop_streamk_k4s",
        "sm90_128x128x64_c1x1_coop_streamk_k5s", "sm90_128x128x64_c1x1_coop_streamk_k6s",
        # The reduce-scatter from 3 splits while the 32 tiles' splits fit the 132 SMs (4 x 32 = 128; 5 x 32 = 160).
        "sm90_128x128x64_c1x1_coop_streamk_k3r", "sm90_128x128x64_c1x1_coop_streamk_k4r"]
    # Fewer SMs, fewer: 3 x 32 = 96 fit 100 SMs, 4 x 32 do not.
    assert [v.name for v in PATHS["sm90"].split_variants(streamk, problem, Gpu("small", 100, (9, 0)))][-1:] == [
        "sm90_128x128x64_c1x1_coop_streamk_k3r"]
    # The reduce-scatter the heuristic picks is swept too: 20 tiles of 8192x2560 at M = 128 split 6.
    scatter = pick(128, 2560, 8192)
    assert scatter.name == "sm90_128x128x64_c1x1_coop_streamk_k6r"
    assert scatter in PATHS["sm90"].split_variants(scatter, GemmProblem(128, 2560, 8192, 128), H100)
    # Every split the heuristic can pick is swept: 8192x1280 at M = 512 gets 20 tiles of 128 x 128 split 3.
    chosen = pick(512, 1280, 8192)
    assert chosen.name == "sm90_128x128x64_c1x1_coop_streamk_k3s"
    assert chosen in PATHS["sm90"].split_variants(chosen, GemmProblem(512, 1280, 8192, 128), H100)
    # At most K / 64 and MAX_SPLIT_K; a persistent config only as it is.
    assert PATHS["sm90"].split_variants(streamk, GemmProblem(64, 4096, 128, 128), H100) == [
        streamk, streamk.with_split_k(2)]
    assert PATHS["sm90"].split_variants(streamk, GemmProblem(64, 4096, 64, 64), H100) == [streamk]
    persistent = Sm90Config(256, 128)
    assert PATHS["sm90"].split_variants(persistent, problem, H100) == [persistent]
    for v in PATHS["sm90"].split_variants(streamk, problem, H100):
        assert PATHS["sm90"].fits(v, problem, SM90) is None
