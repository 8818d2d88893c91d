"""CPU tests of GEMM configuration: GemmConfig, the kernel generator (tools/generate_kernels.py) and the
built-in heuristic (mixgemm.tuning.heuristic_config)."""

from __future__ import annotations

import collections
import dataclasses
import importlib.util
import math
import os
import pathlib
import re
import subprocess
import sys

import pytest
import torch

import mixgemm
import mixgemm._C as _C
from mixgemm import config as config_module
from mixgemm import config_names, tuning
from mixgemm.config import LAYOUTS_OF_PATH, PATHS, SPLIT_K_MODES, GemmConfig

ROOT = pathlib.Path(__file__).resolve().parents[1]
GENERATOR = ROOT / "tools" / "generate_kernels.py"


def load_generator():
    spec = importlib.util.spec_from_file_location("generate_kernels", GENERATOR)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


gen = load_generator()


def configs_of(kernel_set: dict) -> list[GemmConfig]:
    """The GemmConfigs a build of `kernel_set` compiles (per activation dtype)."""
    return [
        GemmConfig(tm, tn, gen.TILE_K, wm, wn, gen.TILE_K, stages)
        for (tm, tn, wm, wn), stage_list in kernel_set.items()
        for stages in stage_list
    ]


SETS = {
    "minimal": configs_of(gen.MINIMAL),
    "full": configs_of(gen.FULL),
    "compiled": mixgemm.compiled_configs(torch.float16),
}

# ===================================================================================================
# GemmConfig
# ===================================================================================================

BASE = GemmConfig(16, 128, 64, 16, 32, 64, 4)


class TestGemmConfig:
    def test_defaults(self):
        assert (BASE.split_k, BASE.split_k_mode) == (1, "none")
        assert BASE.tile == (16, 128, 64, 16, 32, 64, 4)
        assert SPLIT_K_MODES == ("none", "serial", "parallel", "streamk")

    @pytest.mark.parametrize(
        "config, name",
        [
            (BASE, "16x128x64_w16x32x64_s4"),
            (GemmConfig(128, 256, 64, 64, 64, 64, 3), "128x256x64_w64x64x64_s3"),
            (BASE.with_split_k(4, "serial"), "16x128x64_w16x32x64_s4_k4s"),
            (BASE.with_split_k(12, "parallel"), "16x128x64_w16x32x64_s4_k12p"),
            (BASE.with_split_k(1), "16x128x64_w16x32x64_s4"),
            (BASE.with_split_k(264, "streamk"), "16x128x64_w16x32x64_s4_sk264"),
            (BASE.with_split_k(1, "streamk"), "16x128x64_w16x32x64_s4_sk1"),
        ],
    )
    def test_name(self, config, name):
        assert config.name == name
        assert config_names.from_name(name) == config

    def test_stream_k_belongs_to_the_sm80_path(self):
        with pytest.raises(ValueError, match="split_k_mode 'streamk' .* belongs to the sm80 path, not 'gemv'"):
            GemmConfig.gemv(8, 4).with_split_k(4, "streamk")
        with pytest.raises(ValueError, match="belongs to the sm80 path, not 'gemv'"):
            config_names.from_name("gemv_8x64x256_w8x64x64_s2_sk4")
        with pytest.raises(ValueError, match="split_k must be a positive int"):
            BASE.with_split_k(0, "streamk")
        # A stream-K grid keeps its mode when the block count changes.
        assert BASE.with_split_k(3, "streamk").with_split_k(7).split_k_mode == "streamk"

    def test_name_matches_the_cores_spelling(self):
        # The core names configs as TileConfig::name(): the same string as GemmConfig.name at split 1.
        import mixgemm._C as _C

        cfg = GemmConfig(32, 32, 64, 16, 16, 64, 7)
        with pytest.raises(ValueError, match=re.escape(f"config {cfg.name} is not compiled")):
            _C.gemm(cfg.tile, 16, 16, 16, 16, 0, 16, 16, 16, 1, 64, 64, 64, 1, "none", False, 0)

    def test_with_split_k_default_modes(self):
        assert BASE.with_split_k(4).split_k_mode == "serial"
        parallel = BASE.with_split_k(4, "parallel")
        assert parallel.with_split_k(8) == dataclasses.replace(BASE, split_k=8, split_k_mode="parallel")
        assert parallel.with_split_k(1) == BASE
        assert BASE.with_split_k(1).split_k_mode == "none"

    def test_with_split_k_explicit_mode(self):
        cfg = BASE.with_split_k(3, "parallel")
        assert (cfg.split_k, cfg.split_k_mode, cfg.tile) == (3, "parallel", BASE.tile)
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

    def test_frozen(self):
        with pytest.raises(dataclasses.FrozenInstanceError):
            BASE.split_k = 2
        with pytest.raises(dataclasses.FrozenInstanceError):
            BASE.tile_m = 32
        assert BASE.split_k == 1 and BASE.tile_m == 16

    def test_hashable_and_comparable(self):
        assert len({BASE, GemmConfig(*BASE.tile), BASE.with_split_k(2)}) == 2
        assert GemmConfig(*BASE.tile) == BASE


class TestSm90Config:
    COOP = GemmConfig.sm90(256, 128, 64, 1, 1, "coop", "persistent")
    PINGPONG = GemmConfig.sm90(128, 64, 64, 2, 1, "pingpong", "streamk")

    def test_fields_of_a_cooperative_config(self):
        c = self.COOP
        assert (c.path, c.tile_m, c.tile_n, c.tile_k, c.cluster_m, c.cluster_n) == ("sm90", 256, 128, 64, 1, 1)
        assert (c.schedule, c.scheduler) == ("coop", "persistent")
        # Warp fields: one consumer warpgroup's tile; two cooperative warpgroups split the weight columns.
        assert (c.warp_m, c.warp_n, c.warp_k, c.stages) == (256, 64, 64, 0)
        assert (c.split_k, c.split_k_mode) == (1, "none")

    def test_fields_of_a_pingpong_config(self):
        c = self.PINGPONG
        # Ping-pong warpgroups each take a whole tile.
        assert (c.warp_m, c.warp_n, c.warp_k, c.stages) == (128, 64, 64, 0)
        assert (c.cluster_m, c.cluster_n, c.schedule, c.scheduler) == (2, 1, "pingpong", "streamk")

    def test_tile_is_what_the_sm90_registry_names(self):
        assert self.COOP.tile == (256, 128, 64, 1, 1, "coop", "persistent")
        assert self.PINGPONG.tile == (128, 64, 64, 2, 1, "pingpong", "streamk")
        assert GemmConfig.sm90(*self.COOP.tile) == self.COOP  # the extension's tuples build it back

    @pytest.mark.parametrize("config, name", [
        (COOP, "sm90_256x128x64_c1x1_coop_persistent"),
        (PINGPONG, "sm90_128x64x64_c2x1_pingpong_streamk"),
        (GemmConfig.sm90(16, 128, 64, 1, 1, "coop", "streamk"), "sm90_16x128x64_c1x1_coop_streamk"),
        (GemmConfig.sm90(64, 128, 64, 1, 1, "coop", "streamk").with_split_k(4, "serial"),
         "sm90_64x128x64_c1x1_coop_streamk_k4s"),
    ])
    def test_name_round_trip(self, config, name):
        assert config.name == name
        assert config_names.from_name(name) == config
        assert config_names.to_name(config) == name == config_names.to_name(name)
        assert config_names.from_name(f" {name} ") == config

    @pytest.mark.parametrize("name, message", [
        ("sm90_256x128x64_coop_persistent", "invalid config"),  # no cluster
        ("sm90_256x128x64_c1x1_coop", "invalid config"),  # no scheduler
        ("SM90_256x128x64_c1x1_coop_persistent", "invalid config"),
        # Split-K only on stream-K configs, and only serially.
        ("sm90_256x128x64_c1x1_coop_persistent_k2s", "splits K only through its stream-K scheduler"),
        ("sm90_256x128x64_c1x1_coop_streamk_k2p", "splits K only through its stream-K scheduler"),
        ("sm90_256x128x64_c1x1_coop_streamk_k1s", "split_k == 1 needs split_k_mode 'none'"),
        ("sm90_256x128x64_c1x1_coop_streamk_k2", "invalid config"),
        ("sm90_256x128x64_c1x1_cooperative_persistent", r"an sm90 config needs schedule in \('coop', 'pingpong'\)"),
        ("sm90_256x128x64_c1x1_coop_streamK", "invalid config"),
        ("sm90_256x128x64_c1x1_coop_dynamic", r"scheduler in \('persistent', 'streamk'\), got 'coop', 'dynamic'"),
    ])
    def test_bad_names(self, name, message):
        with pytest.raises(ValueError, match=message):
            config_names.from_name(name)

    @pytest.mark.parametrize("schedule, scheduler", [("", "persistent"), ("coop", ""), ("warpspecialized", "streamk"),
                                                     ("coop", "splitk")])
    def test_schedule_and_scheduler_are_checked(self, schedule, scheduler):
        with pytest.raises(ValueError, match=r"^GemmConfig: an sm90 config needs schedule in \('coop', 'pingpong'\) "
                                             r"and scheduler in \('persistent', 'streamk'\)"):
            GemmConfig.sm90(128, 128, 64, 1, 1, schedule, scheduler)

    def test_only_stream_k_sm90_configs_split_k_and_only_serially(self):
        refused = r"^GemmConfig: an sm90 config splits K only through its stream-K scheduler: split_k > 1 needs " \
                  r"scheduler 'streamk' and split_k_mode 'serial'"
        with pytest.raises(ValueError, match=refused):
            self.COOP.with_split_k(2)  # persistent
        with pytest.raises(ValueError, match=refused):
            dataclasses.replace(self.COOP, split_k=4, split_k_mode="serial")
        streamk = GemmConfig.sm90(128, 128, 64, 1, 1, "coop", "streamk")
        with pytest.raises(ValueError, match=refused):
            streamk.with_split_k(2, "parallel")
        split = streamk.with_split_k(3)
        assert (split.split_k, split.split_k_mode, split.tile) == (3, "serial", streamk.tile)
        assert split.with_split_k(1) == streamk and self.COOP.with_split_k(1) == self.COOP

    @pytest.mark.parametrize("path", ["sm80", "gemv"])
    @pytest.mark.parametrize("extra", [dict(schedule="coop"), dict(scheduler="persistent"), dict(cluster_m=2),
                                       dict(cluster_n=2)])
    def test_other_paths_take_no_sm90_fields(self, path, extra):
        with pytest.raises(ValueError, match=rf"^GemmConfig: schedule, scheduler and clusters belong to the sm90 path, "
                                             rf"not '{path}'"):
            GemmConfig(*BASE.tile, path=path, **extra)

    def test_unknown_path(self):
        with pytest.raises(ValueError,
                           match=r"^GemmConfig: path must be one of \('sm80', 'gemv', 'sm90', 'dequant'\), got 'sm100'"):
            GemmConfig(*BASE.tile, path="sm100")

    def test_paths_and_the_layouts_they_read(self):
        assert PATHS == ("sm80", "gemv", "sm90", "dequant")
        assert LAYOUTS_OF_PATH == {"sm80": ("sm80", "sm90"), "gemv": ("sm80", "sm90"), "sm90": ("sm90",),
                                   "dequant": ("sm80", "sm90")}
        assert BASE.layouts == ("sm80", "sm90")  # on the sm90 layout, with the tiles a build compiles for it
        assert GemmConfig.gemv(8, 4).layouts == ("sm80", "sm90")  # the decode path reads both layouts
        assert self.COOP.layouts == self.PINGPONG.layouts == ("sm90",)

    def test_an_sm90_config_differs_from_every_other_path(self):
        sm80_twin = GemmConfig(256, 128, 64, 256, 64, 64, 0)
        assert sm80_twin != self.COOP and sm80_twin.name != self.COOP.name
        assert len({self.COOP, sm80_twin, GemmConfig.sm90(256, 128, 64, 1, 1, "coop", "streamk")}) == 3

    def test_compiled_sm90_configs_come_from_the_sm90_registry(self, monkeypatch):
        # Each registry entry is (tile tuple, mode); a schedule compiled in two modes is one config.
        entries = [((128, 128, 64, 1, 1, "coop", "persistent"), "offset"),
                   ((128, 128, 64, 1, 1, "coop", "persistent"), "scale"),
                   ((16, 128, 64, 1, 1, "coop", "streamk"), "offset")]
        monkeypatch.setattr(_C, "gemm_sm90_configs", lambda bf16, bits: list(entries))
        # Uncached (the real registry stays cached): _compiled reads the schedules through sm90_modes.
        monkeypatch.setattr(config_module, "sm90_modes", config_module.sm90_modes.__wrapped__)
        compiled = config_module._compiled.__wrapped__(False, 4, None)
        sm90 = [c for c in compiled if c.path == "sm90"]
        assert sm90 == [GemmConfig.sm90(128, 128, 64, 1, 1, "coop", "persistent"),
                        GemmConfig.sm90(16, 128, 64, 1, 1, "coop", "streamk")]
        assert config_module.sm90_modes(False, 4) == {
            (128, 128, 64, 1, 1, "coop", "persistent"): ("offset", "scale"),
            (16, 128, 64, 1, 1, "coop", "streamk"): ("offset",)}

    @pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
    @pytest.mark.parametrize("bits", [4, 8])
    def test_this_builds_sm90_configs_are_well_formed(self, dtype, bits):
        # Empty in a build without sm_90a; otherwise every one names itself back and reads the sm90 layout.
        for c in mixgemm.compiled_configs(dtype, bits, path="sm90"):
            assert c.path == "sm90" and c.layouts == ("sm90",) and c.split_k == 1
            assert config_names.from_name(c.name) == c
        with pytest.raises(ValueError,
                           match=r"^compiled_configs: path must be one of \('sm80', 'gemv', 'sm90', 'dequant'\)"):
            mixgemm.compiled_configs(dtype, bits, path="sm91")


class TestDequantConfig:
    """The dequant path's one config: no tile, no split, both layouts, one name."""

    def test_fields_and_name(self):
        c = GemmConfig.dequant()
        assert c.path == "dequant" and c.layouts == ("sm80", "sm90") and c.tile == ()
        assert c.split_k == 1 and c.split_k_mode == "none" and c.name == "dequant_cublas"
        assert config_names.from_name("dequant_cublas") == c and config_names.to_name(c) == "dequant_cublas"

    def test_it_never_splits(self):
        with pytest.raises(ValueError, match="dequant path runs one cuBLAS GEMM: split_k must be 1"):
            GemmConfig.dequant().with_split_k(2, "serial")

    def test_it_takes_no_sm90_fields(self):
        with pytest.raises(ValueError, match="belong to the sm90 path, not 'dequant'"):
            GemmConfig(0, 0, 0, 0, 0, 0, 0, path="dequant", schedule="coop")

    @pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
    @pytest.mark.parametrize("bits", [4, 8])
    def test_every_build_compiles_it(self, dtype, bits):
        assert mixgemm.compiled_configs(dtype, bits, path="dequant") == [GemmConfig.dequant()]
        assert GemmConfig.dequant() in mixgemm.compiled_configs(dtype, bits, path=None)


# ===================================================================================================
# tools/generate_kernels.py
# ===================================================================================================

ROW = re.compile(
    r"\{\{(\d+), (\d+), (\d+), (\d+), (\d+), (\d+), (\d+)\}, ActType::(kFloat16|kBFloat16), (4|8), "
    r"WeightLayout::(kSm80|kSm90), &launch_gemm<([^>]*)>\},"
)
INSTANCE = re.compile(r"^template void launch_gemm<([^>]*)>\(const GemmArgs&, cudaStream_t\);$", re.M)
EXTERN = re.compile(r"^extern template void launch_gemm<([^>]*)>\(const GemmArgs&, cudaStream_t\);$", re.M)
CUDA_TYPE = {"kFloat16": "__half", "kBFloat16": "__nv_bfloat16"}
LAYOUT_ENUM = {"sm80": "kSm80", "sm90": "kSm90"}


def expected_entries(kernel_sets):
    return [
        ((tm, tn, gen.TILE_K, wm, wn, gen.TILE_K, stages), act, bits, LAYOUT_ENUM[layout])
        for layout, kernel_set in kernel_sets.items()
        for (tm, tn, wm, wn), stage_list in kernel_set.items()
        for stages in stage_list
        for act in ("kFloat16", "kBFloat16")
        for bits in ("4", "8")
    ]


def source_name(tile, layout):
    tm, tn, wm, wn = tile
    return f"gemm_{tm}x{tn}x64_w{wm}x{wn}" + ("" if layout == "sm80" else f"_{layout}_layout") + ".cu"


@pytest.mark.parametrize("set_name", ["full", "minimal"])
class TestGenerator:
    def kernel_sets(self, set_name):
        return gen.gemm_sets(set_name)

    def test_one_source_per_tile_and_layout(self, tmp_path, set_name):
        kernel_sets = self.kernel_sets(set_name)
        sources = gen.generate(kernel_sets, tmp_path)
        expected = [tmp_path / source_name(tile, layout) for layout, ks in kernel_sets.items() for tile in ks]
        assert sources == expected
        assert sorted(p.name for p in tmp_path.glob("*.cu")) == sorted(p.name for p in expected)
        assert (tmp_path / "gemm_registry.inc").is_file()

    def test_each_source_instantiates_exactly_its_tile(self, tmp_path, set_name):
        kernel_sets = self.kernel_sets(set_name)
        pairs = [(layout, tile, stages) for layout, ks in kernel_sets.items() for tile, stages in ks.items()]
        for path, (layout, tile, stage_list) in zip(gen.generate(kernel_sets, tmp_path), pairs):
            text = path.read_text()
            assert text.startswith("// Generated by tools/generate_kernels.py: do not edit.\n")
            assert '#include "mixgemm/gemm/device/launch.cuh"' in text
            tm, tn, wm, wn = tile
            expected = sorted(f"{t}, {b}, WeightLayout::{LAYOUT_ENUM[layout]}, {tm}, {tn}, {wm}, {wn}, {s}"
                              for s in stage_list for t in ("__half", "__nv_bfloat16") for b in (4, 8))
            assert sorted(INSTANCE.findall(text)) == expected

    def test_registry_lists_every_config_exactly_once(self, tmp_path, set_name):
        kernel_sets = self.kernel_sets(set_name)
        gen.generate(kernel_sets, tmp_path)
        text = (tmp_path / "gemm_registry.inc").read_text()
        rows = ROW.findall(text)
        entries = collections.Counter((tuple(int(v) for v in row[:7]), row[7], row[8], row[9]) for row in rows)
        expected = expected_entries(kernel_sets)
        assert len(expected) == len(set(expected))
        assert entries == collections.Counter(expected)
        assert text.count("ActType::") == len(expected)
        # Each row's launcher is the instantiation of its own config, activation type, width and layout.
        for row in rows:
            tm, tn, tk, wm, wn, wk, stages = (int(v) for v in row[:7])
            assert (tk, wk) == (gen.TILE_K, gen.TILE_K)
            assert row[10] == (f"{CUDA_TYPE[row[7]]}, {row[8]}, WeightLayout::{row[9]}, {tm}, {tn}, {wm}, {wn}, "
                               f"{stages}")
        # Every launcher is declared extern exactly once, and the declarations match the rows.
        externs = EXTERN.findall(text)
        assert collections.Counter(externs) == collections.Counter(row[10] for row in rows)
        assert len(set(externs)) == len(externs)

    def test_sources_and_registry_agree(self, tmp_path, set_name):
        sources = gen.generate(self.kernel_sets(set_name), tmp_path)
        instances = collections.Counter(i for p in sources for i in INSTANCE.findall(p.read_text()))
        registry = (tmp_path / "gemm_registry.inc").read_text()
        assert instances == collections.Counter(EXTERN.findall(registry))
        assert set(instances.values()) == {1}

    def test_sm90_layout_tiles_are_small_m_tiles_of_the_sm80_layouts(self, set_name):
        # The registry lists configs per layout; Python's any-layout list is the sm80 layout's (config.py).
        kernel_sets = self.kernel_sets(set_name)
        assert kernel_sets["sm90"]
        for tile, stages in kernel_sets["sm90"].items():
            assert tile[0] <= 64, tile
            assert set(stages) <= set(kernel_sets["sm80"][tile]), (tile, stages)

    def test_idempotent(self, tmp_path, set_name):
        kernel_sets = self.kernel_sets(set_name)
        first = gen.generate(kernel_sets, tmp_path)
        files = sorted(tmp_path.iterdir())
        old = 1_000_000_000  # 2001: any rewrite would move the mtime to now
        for f in files:
            os.utime(f, ns=(old * 10**9, old * 10**9))
        contents = {f: f.read_text() for f in files}
        second = gen.generate(kernel_sets, tmp_path)
        assert second == first
        assert sorted(tmp_path.iterdir()) == files
        for f in files:
            assert f.stat().st_mtime_ns == old * 10**9, f"{f.name} was rewritten"
            assert f.read_text() == contents[f]

    def test_changed_set_rewrites(self, tmp_path, set_name):
        other = self.kernel_sets("minimal" if set_name == "full" else "full")
        gen.generate(self.kernel_sets(set_name), tmp_path)
        registry = tmp_path / "gemm_registry.inc"
        os.utime(registry, ns=(10**18, 10**18))
        gen.generate(other, tmp_path)
        assert registry.stat().st_mtime_ns != 10**18
        assert collections.Counter(
            (tuple(int(v) for v in r[:7]), r[7], r[8], r[9]) for r in ROW.findall(registry.read_text())
        ) == collections.Counter(expected_entries(other))

    def test_command_line(self, tmp_path, set_name):
        out = tmp_path / "generated"
        result = subprocess.run(
            [sys.executable, str(GENERATOR), "--set", set_name, "--out", str(out)],
            capture_output=True, text=True, check=True,
        )
        printed = result.stdout.strip().split(";")
        expected = gen.generate(self.kernel_sets(set_name), out) + gen.generate_gemv(gen.GEMV_CONFIGS, out)
        assert printed == [str(p) for p in expected]
        assert all(pathlib.Path(p).is_file() for p in printed)


def test_an_sm90_layout_tile_missing_from_the_sm80_layout_is_refused(tmp_path):
    with pytest.raises(ValueError, match="are not all compiled for the sm80 layout"):
        gen.generate({"sm80": gen.MINIMAL, "sm90": {(16, 64, 16, 32): (3,)}}, tmp_path)


def test_minimal_is_a_subset_of_full():
    assert gen.MINIMAL and gen.FULL
    for tile, stages in gen.MINIMAL.items():
        assert tile in gen.FULL, tile
        assert set(stages) <= set(gen.FULL[tile]), (tile, stages)
    assert {c.tile for c in SETS["minimal"]} <= {c.tile for c in SETS["full"]}


def test_gemv_sets_are_well_formed():
    # The heuristic chooses between 4 and 8 warps of one m8 tile: every build has both.
    assert {(1, 4), (1, 8)} <= set(gen.GEMV_CONFIGS)
    for m_tiles, warps in gen.GEMV_CONFIGS:
        assert m_tiles in (1, 2) and warps >= 1  # the kernel takes up to 16 rows (two n8 mma tiles)
    assert gen.GEMV_FOLD_K == (128, 64, 32)  # one kernel per fold (k rows per scale row), picked by group size


def test_gemv_registry_lists_every_instance(tmp_path):
    gen.generate_gemv(gen.GEMV_CONFIGS, tmp_path)
    rows = [line for line in (tmp_path / "gemv_registry.inc").read_text().splitlines() if "&launch_gemv<" in line]
    assert len(rows) == (len(gen.GEMV_CONFIGS) * len(gen.ACT_TYPES) * len(gen.WEIGHT_BITS) * len(gen.GEMV_FOLD_K)
                         * len(gen.GEMV_LAYOUTS))
    assert len(rows) == 3 * 2 * 2 * 3 * 2  # configs x dtypes x widths x folds x layouts


GEMV_INSTANCE = re.compile(r"^template void launch_gemv<([^>]*)>\(const gemm::GemmArgs&, cudaStream_t\);$", re.M)
GEMV_ROW = re.compile(r"\{\{(\d+), (\d+)\}, gemm::ActType::(kFloat16|kBFloat16), (4|8), (128|64|32), "
                      r"gemm::WeightLayout::(kSm80|kSm90), &launch_gemv<([^>]*)>\},")


@pytest.mark.parametrize("configs", [gen.GEMV_CONFIGS, gen.GEMV_CONFIGS[:1]], ids=["all", "one"])
def test_gemv_sources_one_per_config_and_layout(tmp_path, configs):
    assert gen.GEMV_LAYOUTS == {"sm80": "kSm80", "sm90": "kSm90"}
    sources = gen.generate_gemv(configs, tmp_path)
    assert [p.name for p in sources] == [f"gemv_m{8 * m}_w{w}_{layout}.cu" for m, w in configs
                                         for layout in ("sm80", "sm90")]
    assert sorted(p.name for p in tmp_path.glob("*.cu")) == sorted(p.name for p in sources)
    for path in sources:
        m_tiles, warps = (int(v) for v in re.fullmatch(r"gemv_m(\d+)_w(\d+)_sm[89]0\.cu", path.name).groups())
        layout = gen.GEMV_LAYOUTS[path.stem.rsplit("_", 1)[1]]
        text = path.read_text()
        assert '#include "mixgemm/gemv/launch_gemv.cuh"' in text
        # Every instance of a file reads that file's layout: each dtype x width x fold once.
        expected = sorted(f"{t}, {b}, {m_tiles // 8}, {warps}, {f}, gemm::WeightLayout::{layout}"
                          for t in ("__half", "__nv_bfloat16") for b in (4, 8) for f in (128, 64, 32))
        assert sorted(GEMV_INSTANCE.findall(text)) == expected


def test_gemv_registry_rows_carry_their_layout(tmp_path):
    gen.generate_gemv(gen.GEMV_CONFIGS, tmp_path)
    rows = GEMV_ROW.findall((tmp_path / "gemv_registry.inc").read_text())
    keys = [(int(m), int(w), act, bits, fold_k, layout) for m, w, act, bits, fold_k, layout, _ in rows]
    assert len(keys) == len(set(keys)) == len(gen.GEMV_CONFIGS) * 2 * 2 * 3 * 2
    assert collections.Counter(k[-1] for k in keys) == {"kSm80": len(keys) // 2, "kSm90": len(keys) // 2}
    for m, w, act, bits, fold_k, layout, launcher in rows:
        # Each row's launcher is the instance of its own key, layout included.
        assert launcher == f"{CUDA_TYPE[act]}, {bits}, {m}, {w}, {fold_k}, gemm::WeightLayout::{layout}"


# ---------------------------------------------------------------------------------------------------
# sm90 kernel sets


def test_sm90_kernels_is_the_product_of_its_lists():
    kernels = gen.sm90_kernels([(128, 128, 1, 1, "coop", "persistent"), (16, 128, 1, 1, "coop", "streamk")],
                               ("offset", "scale"), ("__half",), (4, 8))
    assert len(kernels) == 2 * 2 * 1 * 2 == len(set(kernels))
    assert kernels[0] == ((128, 128, 1, 1, "coop", "persistent"), "offset", "__half", 4)
    assert len(gen.sm90_kernels(gen.SM90_MINIMAL, ("offset",))) == len(gen.ACT_TYPES) * len(gen.WEIGHT_BITS) == 4


def test_sm90_full_set():
    full = gen.sm90_set("full")
    # Every FULL schedule in each built mode, for both activation types and both widths.
    assert full == gen.sm90_kernels(gen.SM90_FULL, gen.SM90_BUILT_MODES)
    assert gen.SM90_BUILT_MODES == ("offset",)  # symmetric weights run the offset kernel with zero offsets
    assert len(gen.SM90_FULL) == len(set(gen.SM90_FULL)) == 7
    assert len(full) == len(set(full)) == 7 * 1 * 2 * 2
    assert {(act, bits) for _, _, act, bits in full} == {(a, b) for a in gen.ACT_TYPES for b in gen.WEIGHT_BITS}
    # FULL holds what the dispatcher picks: every schedule of tuning's sm90 choices is compiled.
    chosen = {(tm, tn, 1, 1, schedule, scheduler) for _, choices in tuning._SM90_CHOICES
              for tm, tn, schedule, scheduler in choices}
    assert chosen <= set(gen.SM90_FULL)


def test_sm90_minimal_set():
    assert gen.sm90_set("minimal") == [(gen.SM90_MINIMAL[0], "offset", act, bits) for act in gen.ACT_TYPES
                                       for bits in gen.WEIGHT_BITS] + [
                                           (gen.SM90_MINIMAL_STREAM_K, "offset", "__half", 4)]
    # The stream-K twin is the persistent schedule with the other scheduler, and one the dispatcher uses.
    assert gen.SM90_MINIMAL_STREAM_K[:5] == gen.SM90_MINIMAL[0][:5] and gen.SM90_MINIMAL_STREAM_K in gen.SM90_FULL
    # CI's schedules are sweep candidates; FULL is too (the sweep compares what the dispatcher picks).
    assert set(gen.SM90_MINIMAL) <= set(gen.SM90_CANDIDATES) and set(gen.SM90_FULL) <= set(gen.SM90_CANDIDATES)


def test_sm90_sweep_set():
    sweep = gen.sm90_set("sweep")
    assert len(sweep) == len(set(sweep))
    fp16_int4 = [(cfg, mode) for cfg, mode, act, bits in sweep if (act, bits) == ("__half", 4)]
    # Every candidate with zero points...
    assert [cfg for cfg, mode in fp16_int4 if mode == "offset"] == gen.SM90_CANDIDATES
    assert len(gen.SM90_CANDIDATES) == 12 and (256, 128, 2, 1, "coop", "persistent") in gen.SM90_CANDIDATES
    # ...the scale-only kernel of three cooperative persistent schedules...
    assert [cfg for cfg, mode in fp16_int4 if mode == "scale"] == [
        (64, 128, 1, 1, "coop", "persistent"), (128, 128, 1, 1, "coop", "persistent"),
        (256, 128, 1, 1, "coop", "persistent")]
    # ...and the minimal set for the other dtypes and widths (its fp16 x int4 kernel is a candidate already).
    others = [k for k in sweep if (k[2], k[3]) != ("__half", 4)]
    assert sorted(others) == sorted(k for k in gen.sm90_set("minimal") if (k[2], k[3]) != ("__half", 4))
    assert set(gen.sm90_set("minimal")) <= set(sweep)
    assert len(sweep) == 12 + 3 + 3


def test_sm90_sources_and_registry(tmp_path):
    kernels = gen.sm90_set("sweep")
    sources = gen.generate_sm90(kernels, tmp_path)
    assert len(sources) == len(set(sources)) == len(kernels)
    assert sources[0].name == "sm90_16x128x64_c1x1_coop_streamk_offset_fp16_int4.cu"
    assert tmp_path / "sm90_128x128x64_c1x1_coop_persistent_scale_fp16_int4.cu" in sources
    assert tmp_path / "sm90_128x128x64_c1x1_coop_persistent_offset_bf16_int8.cu" in sources
    registry = (tmp_path / "sm90_registry.inc").read_text()
    rows = re.findall(r"ActType::(kFloat16|kBFloat16), (4|8), Mode::(kScale|kScaleOffset), &launch_sm90<", registry)
    assert len(rows) == len(kernels)
    assert collections.Counter(rows) == collections.Counter(
        ({"__half": "kFloat16", "__nv_bfloat16": "kBFloat16"}[act], str(bits), gen.SM90_MODES[mode])
        for _, mode, act, bits in kernels)
    assert collections.Counter(mode for _, _, mode in rows) == {"kScaleOffset": len(kernels) - 3, "kScale": 3}


def test_command_line_sweep_set(tmp_path):
    out = tmp_path / "generated"
    result = subprocess.run([sys.executable, str(GENERATOR), "--set", "sweep", "--out", str(out), "--sm90"],
                            capture_output=True, text=True, check=True)
    first, second = result.stdout.strip().splitlines()
    # The sweep build: the minimal sm80 tiles, every decode config, every sm90 candidate.
    expected = gen.generate(gen.gemm_sets("sweep"), out) + gen.generate_gemv(gen.GEMV_CONFIGS, out)
    assert first.split(";") == [str(p) for p in expected]
    assert second.startswith("SM90:")
    assert second[len("SM90:"):].split(";") == [str(p) for p in gen.generate_sm90(gen.sm90_set("sweep"), out)]


def test_kernel_sets_are_well_formed():
    for kernel_set in (gen.FULL, gen.MINIMAL, gen.SM90_LAYOUT_FULL, gen.SM90_LAYOUT_MINIMAL):
        for (tm, tn, wm, wn), stages in kernel_set.items():
            assert tm % wm == 0 and tn % wn == 0 and wm % 16 == 0 and wn % 8 == 0
            assert tn % 64 == 0  # whole packed strips
            assert stages and len(set(stages)) == len(stages) and min(stages) >= 2


def test_tile_names_are_unique():
    for kernel_set in (gen.FULL, gen.MINIMAL):
        names = [gen.tile_name(*tile) for tile in kernel_set]
        assert len(set(names)) == len(names)


def test_the_build_compiled_one_of_the_generated_sets():
    for dtype in (torch.float16, torch.bfloat16):
        compiled = [c.tile for c in mixgemm.compiled_configs(dtype)]
        assert compiled in ([c.tile for c in SETS["minimal"]], [c.tile for c in SETS["full"]])


# ===================================================================================================
# tuning.heuristic_config
# ===================================================================================================

SHAPES = [(4096, 4096, 132), (28672, 4096, 108), (128, 64, 132), (4096, 14336, 80), (64, 128, 1)]


@pytest.mark.parametrize("set_name", list(SETS))
@pytest.mark.parametrize("N, K, sms", SHAPES)
def test_heuristic_invariants(set_name, N, K, sms):
    configs = SETS[set_name]
    tiles = {c.tile for c in configs}
    has_16 = any(c.tile_m == 16 for c in configs)
    has_128 = any(c.tile_m == 128 for c in configs)
    for M in range(1, 4097):
        cfg = tuning.heuristic_config(configs, M, N, K, sms)
        assert isinstance(cfg, GemmConfig)
        assert cfg.tile in tiles, (M, cfg)
        assert cfg.split_k_mode in ("none", "parallel", "streamk")
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
    pick = lambda M: tuning.heuristic_config(configs, M, 4096, 4096, 132)  # noqa: E731
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
    cfg = tuning.heuristic_config(SETS["minimal"], 1, 4096, 4096, 132)
    assert (cfg.tile_m, cfg.tile_n) == (16, 128)
    # 32 tiles x 64 k-tiles = 2048 units: 4 x 132 blocks would get under 8 each, so 2048 / 8 = 256 blocks.
    assert (cfg.split_k, cfg.split_k_mode) == (256, "streamk")


def test_heuristic_16_row_tiles_stream_k_over_four_blocks_per_sm():
    # M = 16, N = 28672: 224 tiles of 16 x 128 x 128 k-tiles: 4 x 132 blocks of 54 k-tiles each.
    cfg = tuning.heuristic_config(SETS["minimal"], 16, 28672, 8192, 132)
    assert (cfg.tile_m, cfg.tile_n, cfg.split_k, cfg.split_k_mode) == (16, 128, 528, "streamk")
    # Without 16 x 128 tiles, 16 x 256 ones stream K over 2 blocks per SM (4 lost, BENCHMARKS.md).
    wide = [c for c in SETS["minimal"] if (c.tile_m, c.tile_n) != (16, 128)]
    cfg = tuning.heuristic_config(wide, 16, 28672, 8192, 132)
    assert (cfg.tile_m, cfg.tile_n, cfg.split_k, cfg.split_k_mode) == (16, 256, 264, "streamk")


def test_heuristic_large_m_stays_data_parallel():
    # M = 512, N = 4096: 4 x 16 = 64 tiles of 128 x 256 cover 64 of 132 SMs: ceil(132 / 64) = 3 splits.
    cfg = tuning.heuristic_config(SETS["minimal"], 512, 4096, 4096, 132)
    assert (cfg.tile_m, cfg.split_k, cfg.split_k_mode) == (128, 3, "parallel")
    # M = 4096, N = 28672: 3584 tiles, no split and no stream-K above M = 256.
    for set_name in ("minimal", "full"):
        cfg = tuning.heuristic_config(SETS[set_name], 4096, 28672, 4096, 132)
        assert (cfg.tile_m, cfg.split_k, cfg.split_k_mode) == (128, 1, "none")


def test_heuristic_middle_m_takes_large_tiles_where_every_sm_gets_16_k_tiles():
    # M = 128, N = 4096, K = 4096: 16 tiles of 128 x 256 hold 1024 k-tiles, under 16 per SM: 64 x 128 tiles,
    # 64 x 64 = 4096 units over 4096 / 16 = 256 blocks.
    cfg = tuning.heuristic_config(SETS["minimal"], 128, 4096, 4096, 132)
    assert (cfg.tile_m, cfg.tile_n, cfg.split_k, cfg.split_k_mode) == (64, 128, 256, "streamk")
    # N = 28672, K = 8192: 112 x 128 = 14336 k-tiles of 128 x 256 tiles: one block per SM.
    cfg = tuning.heuristic_config(SETS["minimal"], 128, 28672, 8192, 132)
    assert (cfg.tile_m, cfg.tile_n, cfg.split_k, cfg.split_k_mode) == (128, 256, 132, "streamk")


def test_heuristic_mid_m_splits_like_decode():
    # M = 32 on the full set: 32 x 128 tiles (no stream-K rule); 32 of them want ceil(6 * 132 / 32) = 25
    # splits, capped at 16.
    cfg = tuning.heuristic_config(SETS["full"], 32, 4096, 4096, 132)
    assert (cfg.tile_m, cfg.split_k, cfg.split_k_mode) == (32, 16, "parallel")
    # M = 64: 64 x 128 tiles stream K over 2 blocks per SM.
    cfg = tuning.heuristic_config(SETS["full"], 64, 28672, 8192, 132)
    assert (cfg.tile_m, cfg.split_k, cfg.split_k_mode) == (64, 264, "streamk")


def test_heuristic_split_is_capped():
    # A tiny grid with a huge K streams K (1024 units / 8 = 128 blocks); with a short K (8 units, one
    # block's worth) the split rule takes over: K / 64 / 4 = 2 splits, and none for one k-tile.
    cfg = tuning.heuristic_config(SETS["minimal"], 1, 128, 65536, 132)
    assert (cfg.split_k, cfg.split_k_mode) == (128, "streamk")
    cfg = tuning.heuristic_config(SETS["minimal"], 1, 128, 512, 132)
    assert (cfg.split_k, cfg.split_k_mode) == (2, "parallel")
    cfg = tuning.heuristic_config(SETS["minimal"], 1, 128, 64, 132)
    assert (cfg.split_k, cfg.split_k_mode) == (1, "none")


def test_heuristic_falls_back_to_the_nearest_tile_height():
    only = [GemmConfig(32, 64, 64, 32, 32, 64, 3), GemmConfig(96, 64, 64, 32, 32, 64, 3)]
    assert tuning.heuristic_config(only, 1, 4096, 4096, 132).tile_m == 32
    assert tuning.heuristic_config(only, 4096, 4096, 4096, 132).tile_m == 96


def test_heuristic_needs_configs():
    with pytest.raises(RuntimeError, match="no compiled GEMM configs"):
        tuning.heuristic_config([], 1, 4096, 4096, 132)


# ===================================================================================================
# tuning.heuristic_config on the sm90 layout (hand-built config lists: whatever this build compiled)
# ===================================================================================================

SM90_FULL_CONFIGS = [GemmConfig.sm90(tm, tn, 64, cm, cn, schedule, scheduler)
                     for tm, tn, cm, cn, schedule, scheduler in gen.SM90_FULL]
DECODE = [GemmConfig.gemv(8, 4), GemmConfig.gemv(8, 8), GemmConfig.gemv(16, 4)]
SM80_ON_SM90_FULL = [GemmConfig(tm, tn, 64, wm, wn, 64, stages)
                     for (tm, tn, wm, wn), stage_list in gen.SM90_LAYOUT_FULL.items() for stages in stage_list]
# What gemm hands the heuristic for an sm90-layout weight: the configs that read that layout.
SM90_LAYOUT = DECODE + SM80_ON_SM90_FULL + SM90_FULL_CONFIGS
# The same without the sm80 tiles, for the rules of the sm90 GEMM itself.
SM90_ONLY = DECODE + SM90_FULL_CONFIGS


def sm90_pick(M, N=4096, K=4096, sms=132, configs=SM90_LAYOUT):
    return tuning.heuristic_config(configs, M, N, K, sms, layout="sm90")


def test_sm90_layout_takes_the_decode_path_then_the_sm80_tiles():
    for M in range(1, 9):
        assert (sm90_pick(M).path, sm90_pick(M).tile_m) == ("gemv", 8), M
    # 9..16 rows: the sm80 path's 16-row tiles compiled for the sm90 layout, on any weight.
    for M in range(9, 17):
        for N, K in [(4096, 4096), (28672, 8192)]:
            assert (sm90_pick(M, N, K).path, sm90_pick(M, N, K).tile_m) == ("sm80", 16), (M, N, K)
    # From 17 rows the sm90 GEMM, on small problems too: 4096 x 4096 at M = 32 is its 32-token tile split 4 ways.
    for N, K in [(4096, 4096), (11008, 4096), (8192, 8192), (28672, 8192)]:
        assert sm90_pick(17, N, K).path == "sm90" and sm90_pick(64, N, K).path == "sm90", (N, K)
    assert sm90_pick(32).name == "sm90_32x128x64_c1x1_coop_streamk_k4s"
    # A build without sm80 tiles for the sm90 layout: the sm90 GEMM takes every row above the decode path.
    assert sm90_pick(9, configs=DECODE + SM90_FULL_CONFIGS).name == "sm90_16x128x64_c1x1_coop_streamk_k4s"
    # The sm80 layout's decode path stops at 8 rows, whatever the weight's size.
    sm80_layout = DECODE + [GemmConfig(16, 256, 64, 16, 64, 64, 3), GemmConfig(64, 128, 64, 32, 64, 64, 4)]
    assert tuning.heuristic_config(sm80_layout, 8, 4096, 4096, 132).path == "gemv"
    assert tuning.heuristic_config(sm80_layout, 9, 4096, 4096, 132).path == "sm80"


def test_sm90_decode_split_k_is_the_sm80_layouts():
    # The decode kernel reads both layouts at one speed: its split-K does not depend on the layout.
    for M, N, K in [(1, 4096, 4096), (8, 28672, 8192), (4, 4096, 11008)]:
        sm80 = tuning.heuristic_config(DECODE + [GemmConfig(16, 256, 64, 16, 64, 64, 3)], M, N, K, 132)
        assert sm90_pick(M, N, K) == sm80


def test_heuristic_16_row_tile_depends_on_the_weight_layout():
    # sm90-layout weights keep 16 x 256 at 2 blocks per SM, although the full build compiles 16 x 128 for them.
    assert (16, 128, 4) in [(c.tile_m, c.tile_n, c.stages) for c in SM80_ON_SM90_FULL]
    for M in (9, 16):
        cfg = sm90_pick(M, 28672, 8192)
        assert (cfg.tile_m, cfg.tile_n, cfg.stages, cfg.split_k, cfg.split_k_mode) == (16, 256, 3, 264, "streamk")
        cfg = tuning.heuristic_config(DECODE + SETS["full"], M, 28672, 8192, 132)
        assert (cfg.tile_m, cfg.tile_n, cfg.stages, cfg.split_k, cfg.split_k_mode) == (16, 128, 4, 528, "streamk")


@pytest.mark.parametrize("N, K, warps_split_m1, warps_split_m8", [
    (4096, 4096, (8, 4), (8, 4)), (11008, 4096, (4, 3), (8, 1)), (4096, 11008, (8, 4), (8, 4)),
    (8192, 8192, (8, 2), (8, 2)), (28672, 8192, (4, 1), (4, 1)), (8192, 28672, (8, 2), (8, 2)),
])
def test_decode_warps_and_split_k_reproduce_the_h100_sweeps(N, K, warps_split_m1, warps_split_m8):
    # The best of 4 and 8 warps in the 2026-11-24 probe, each at its best split of the sweeps
    # (BENCHMARKS.md): 8 warps at half the split where they fill the GPU as well as 4, and from M = 5
    # wherever one wave of them fits (not 28672 columns: 448 strips of 8 warps are 1.7 waves).
    for M, (warps, split) in [(1, warps_split_m1), (4, warps_split_m1), (5, warps_split_m8), (8, warps_split_m8)]:
        config = sm90_pick(M, N, K)
        assert (config.tile_k // config.warp_k, config.split_k) == (warps, split), M


def test_decode_split_k_rule():
    # One full wave of 16 warps per SM, never a partial second: floor(blocks per SM x SMs / strips).
    assert tuning.gemv_split(GemmConfig.gemv(8, 4), 11008, 4096, 132).split_k == 3  # 528 // 172
    assert tuning.gemv_split(GemmConfig.gemv(8, 8), 11008, 4096, 132).split_k == 1  # 264 // 172
    assert tuning.gemv_split(GemmConfig.gemv(8, 8), 28672, 8192, 132).split_k == 1  # under a wave: no split
    # The m16 kernel keeps four batches per warp: 64 batches // 16.
    assert tuning.gemv_split(GemmConfig.gemv(16, 4), 4096, 4096, 132).split_k == 4
    # Fewer SMs, fewer blocks wanted.
    assert sm90_pick(1, 4096, 4096, sms=66).split_k == 2
    # A build with only 4-warp decode blocks takes them.
    only_narrow = [GemmConfig.gemv(8, 4)] + SM80_ON_SM90_FULL + SM90_FULL_CONFIGS
    assert tuning.heuristic_config(only_narrow, 1, 4096, 4096, 132).name == "gemv_8x64x256_w8x64x64_s2_k8s"


@pytest.mark.parametrize("M, name", [
    (17, "sm90_32x128x64_c1x1_coop_streamk"), (32, "sm90_32x128x64_c1x1_coop_streamk"),
    (33, "sm90_64x128x64_c1x1_coop_streamk"), (64, "sm90_64x128x64_c1x1_coop_streamk"),
    (65, "sm90_128x128x64_c1x1_coop_streamk"), (128, "sm90_128x128x64_c1x1_coop_streamk"),
])
def test_sm90_token_tile_by_m(M, name):
    assert sm90_pick(M, 28672, 8192).name == name


def test_sm90_large_m_fills_the_gpu():
    # 8192 x 28672, M = 4096: 16 x 224 = 3584 tiles of 256 x 128 are 27.2 waves (97% busy): persistent.
    assert sm90_pick(4096, 28672, 8192).name == "sm90_256x128x64_c1x1_coop_persistent"
    # M = 512: 448 tiles are 3.4 waves (85%): the stream-K twin of the same tile.
    assert sm90_pick(512, 28672, 8192).name == "sm90_256x128x64_c1x1_coop_streamk"
    # 4096 x 4096, M = 256: 32 tiles of 256 x 128 and 64 of 256 x 64 are under half a wave; 64 tiles of
    # 128 x 128 stream-K, split 2 ways to fill the GPU.
    assert sm90_pick(256, 4096, 4096).name == "sm90_128x128x64_c1x1_coop_streamk_k2s"
    # 8192 x 8192: 128 tiles of 256 x 64 fill it.
    assert sm90_pick(256, 8192, 8192).name == "sm90_256x64x64_c1x1_pingpong_persistent"
    # Without its stream-K twin a short last wave keeps the persistent tile.
    no_twin = [c for c in SM90_LAYOUT if c.name != "sm90_256x128x64_c1x1_coop_streamk"]
    assert sm90_pick(512, 28672, 8192, configs=no_twin).name == "sm90_256x128x64_c1x1_coop_persistent"


@pytest.mark.parametrize("K, N, M, split", [
    (4096, 4096, 32, 4),    # 32 tiles of 32 x 128: 4 x 32 = 128 CTAs (measured 15.4 against 16.5 us unsplit)
    (4096, 4096, 128, 4),   # 32 tiles of 128 x 128
    (8192, 8192, 64, 2),    # 64 tiles: 2 x 64 = 128
    (11008, 4096, 64, 4),
    (4096, 11008, 64, 1),   # 86 tiles: more than half the SMs, stream-K as it is
    (8192, 28672, 128, 1),  # 224 tiles
    (2048, 4096, 128, 2),   # 32 k-tiles: 16 per split at least
    (1024, 4096, 128, 1),   # 16 k-tiles: nothing to split
    (64, 4096, 128, 1),
])
def test_sm90_split_k_rule(K, N, M, split):
    cfg = sm90_pick(M, N, K, configs=SM90_ONLY)
    assert cfg.scheduler == "streamk" and cfg.split_k == split, cfg
    assert cfg.split_k_mode == ("none" if split == 1 else "serial")
    # Fewer SMs, fewer splits: 32 tiles on 80 SMs split 2 ways; on 40 SMs not at all.
    assert sm90_pick(32, 4096, 4096, sms=80, configs=SM90_ONLY).split_k == 2
    assert sm90_pick(32, 4096, 4096, sms=40, configs=SM90_ONLY).split_k == 1
    # Persistent configs are never split; the rule leaves other paths alone.
    persistent = GemmConfig.sm90(128, 128, 64, 1, 1, "coop", "persistent")
    assert tuning.sm90_split(persistent, 128, 4096, 4096) == persistent
    assert tuning.sm90_split(GemmConfig.gemv(8, 4), 1, 4096, 4096) == GemmConfig.gemv(8, 4)


def test_sm90_picks_only_tiles_that_divide_n():
    # N = 4160 = 65 x 64: only the 64-column ping-pong tiles divide it.
    for M in (17, 64, 128, 1024, 4096):
        cfg = sm90_pick(M, 4160, 4096, configs=SM90_ONLY)
        assert cfg.path == "sm90" and cfg.schedule == "pingpong" and 4160 % cfg.tile_n == 0, (M, cfg)


@pytest.mark.parametrize("N", [1024, 4096, 4160, 28672])
@pytest.mark.parametrize("sms", [132, 114, 8])
def test_sm90_heuristic_invariants(N, sms):
    for M in [*range(1, 300), 511, 512, 513, 1000, 4096, 5000]:
        cfg = sm90_pick(M, N, 8192, sms)
        assert "sm90" in cfg.layouts, (M, cfg)
        mma_sync = M <= 16
        assert cfg.path == ("gemv" if M <= 8 else "sm80" if mma_sync else "sm90"), (M, cfg)
        if cfg.path == "sm80":
            assert cfg in [c.with_split_k(cfg.split_k, cfg.split_k_mode) for c in SM80_ON_SM90_FULL], (M, cfg)
        if cfg.path == "sm90":
            assert N % cfg.tile_n == 0 and (cfg.cluster_m, cfg.cluster_n) == (1, 1), (M, cfg)
            tiles = -(-M // cfg.tile_m) * (N // cfg.tile_n)
            # A split only on stream-K, and only where tiles x split stays within one wave.
            assert cfg.split_k == 1 or (cfg.scheduler == "streamk" and 2 <= cfg.split_k <= 4
                                        and tiles * cfg.split_k <= sms), (M, cfg)
        else:
            assert M <= cfg.tile_m, (M, cfg)


def test_sm90_reduced_build_falls_back_by_token_tile():
    minimal = DECODE + [GemmConfig.sm90(128, 128, 64, 1, 1, "coop", "persistent")]
    for M in (17, 64, 128, 4096):  # no preferred schedule compiled: the one there is
        assert sm90_pick(M, configs=minimal).name == "sm90_128x128x64_c1x1_coop_persistent"
    two = [GemmConfig.sm90(64, 128, 64, 1, 1, "coop", "persistent"),
           GemmConfig.sm90(256, 128, 64, 1, 1, "coop", "streamk")]
    # The smallest token tile covering M, else the largest.
    assert tuning.sm90_config(two, 40, 4096).tile_m == 64
    assert tuning.sm90_config(two, 100, 4096).tile_m == 256
    assert tuning.sm90_config(two, 5000, 4096).tile_m == 256


def test_sm90_without_a_tile_of_n():
    only_128 = DECODE + [c for c in SM90_FULL_CONFIGS if c.tile_n == 128]
    assert tuning.sm90_config(only_128, 64, 4160) is None
    assert tuning.sm90_config(DECODE, 64, 4096) is None  # no sm90 config at all (a build without sm_90a)
    with pytest.raises(RuntimeError, match=r"^mixgemm: no compiled sm90 config tiles N = 4160"):
        sm90_pick(64, 4160, 4096, configs=only_128)
    # The decode path needs no sm90 tile: a few rows still run.
    assert sm90_pick(4, 4160, 4096, configs=only_128).path == "gemv"
    with pytest.raises(RuntimeError, match="no compiled sm90 config tiles N = 4096"):
        sm90_pick(64, configs=DECODE)


def test_dequant_path_from_its_threshold_per_layout():
    # gemm hands the heuristic the dequant config with the rest (it reads both layouts).
    sm90 = SM90_LAYOUT + [GemmConfig.dequant()]
    sm80 = SETS["full"] + DECODE + [GemmConfig.dequant()]
    for M in (1, 8, 16, 300, 4096, 8191):
        assert sm90_pick(M, 28672, 8192, configs=sm90).path != "dequant", M
    for M in (8192, 20000):
        assert sm90_pick(M, 28672, 8192, configs=sm90) == GemmConfig.dequant(), M
        assert sm90_pick(M, 4096, 4096, configs=sm90) == GemmConfig.dequant(), M  # whatever the weight's size
    for M in (1, 16, 512, 1023):
        assert tuning.heuristic_config(sm80, M, 4096, 4096, 132).path != "dequant", M
    for M in (1024, 4096, 9000):
        assert tuning.heuristic_config(sm80, M, 4096, 4096, 132) == GemmConfig.dequant(), M
    # A build without it (the hand-made sets above): the GEMM at every M.
    assert sm90_pick(20000).path == "sm90" and tuning.heuristic_config(SETS["full"], 9000, 4096, 4096, 132).path == "sm80"


def test_sm90_layout_without_a_tile_of_n_falls_back_to_the_dequant_path():
    only_128 = DECODE + [c for c in SM90_FULL_CONFIGS if c.tile_n == 128] + [GemmConfig.dequant()]
    assert sm90_pick(64, 4160, 4096, configs=only_128) == GemmConfig.dequant()
    assert sm90_pick(4, 4160, 4096, configs=only_128).path == "gemv"  # a few rows still decode


def test_sm90_layout_takes_sm80_tiles_only_below_the_rules_bound():
    # Even when handed large sm80 tiles, the sm90 layout's GEMM above the sm80 path's rows is an sm90 config.
    mixed = SM90_LAYOUT + [GemmConfig(128, 256, 64, 64, 64, 64, 3)]
    for M in (17, 64, 100, 4096):
        assert sm90_pick(M, configs=mixed).path == "sm90"
    assert sm90_pick(16, configs=mixed).path == "sm80"
