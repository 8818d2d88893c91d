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
from mixgemm import tuning
from mixgemm.config import SPLIT_K_MODES, GemmConfig

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
        assert SPLIT_K_MODES == ("none", "serial", "parallel")

    @pytest.mark.parametrize(
        "config, name",
        [
            (BASE, "16x128x64_w16x32x64_s4"),
            (GemmConfig(128, 256, 64, 64, 64, 64, 3), "128x256x64_w64x64x64_s3"),
            (BASE.with_split_k(4, "serial"), "16x128x64_w16x32x64_s4_k4s"),
            (BASE.with_split_k(12, "parallel"), "16x128x64_w16x32x64_s4_k12p"),
            (BASE.with_split_k(1), "16x128x64_w16x32x64_s4"),
        ],
    )
    def test_name(self, config, name):
        assert config.name == name

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


# ===================================================================================================
# tools/generate_kernels.py
# ===================================================================================================

ROW = re.compile(
    r"\{\{(\d+), (\d+), (\d+), (\d+), (\d+), (\d+), (\d+)\}, ActType::(kFloat16|kBFloat16), (4|8), "
    r"&launch_gemm<([^>]*)>\},"
)
INSTANCE = re.compile(r"^template void launch_gemm<([^>]*)>\(const GemmArgs&, cudaStream_t\);$", re.M)
EXTERN = re.compile(r"^extern template void launch_gemm<([^>]*)>\(const GemmArgs&, cudaStream_t\);$", re.M)
CUDA_TYPE = {"kFloat16": "__half", "kBFloat16": "__nv_bfloat16"}


def expected_entries(kernel_set):
    return [
        ((tm, tn, gen.TILE_K, wm, wn, gen.TILE_K, stages), act, bits)
        for (tm, tn, wm, wn), stage_list in kernel_set.items()
        for stages in stage_list
        for act in ("kFloat16", "kBFloat16")
        for bits in ("4", "8")
    ]


@pytest.mark.parametrize("set_name", ["full", "minimal"])
class TestGenerator:
    def kernel_set(self, set_name):
        return gen.FULL if set_name == "full" else gen.MINIMAL

    def test_one_source_per_tile(self, tmp_path, set_name):
        kernel_set = self.kernel_set(set_name)
        sources = gen.generate(kernel_set, tmp_path)
        expected = [tmp_path / f"gemm_{tm}x{tn}x64_w{wm}x{wn}.cu" for (tm, tn, wm, wn) in kernel_set]
        assert sources == expected
        assert sorted(p.name for p in tmp_path.glob("*.cu")) == sorted(p.name for p in expected)
        assert (tmp_path / "gemm_registry.inc").is_file()

    def test_each_source_instantiates_exactly_its_tile(self, tmp_path, set_name):
        kernel_set = self.kernel_set(set_name)
        for path, (tile, stage_list) in zip(gen.generate(kernel_set, tmp_path), kernel_set.items()):
            text = path.read_text()
            assert text.startswith("// Generated by tools/generate_kernels.py: do not edit.\n")
            assert '#include "mixgemm/gemm/device/launch.cuh"' in text
            tm, tn, wm, wn = tile
            expected = sorted(f"{t}, {b}, {tm}, {tn}, {wm}, {wn}, {s}" for s in stage_list
                              for t in ("__half", "__nv_bfloat16") for b in (4, 8))
            assert sorted(INSTANCE.findall(text)) == expected

    def test_registry_lists_every_config_exactly_once(self, tmp_path, set_name):
        kernel_set = self.kernel_set(set_name)
        gen.generate(kernel_set, tmp_path)
        text = (tmp_path / "gemm_registry.inc").read_text()
        rows = ROW.findall(text)
        entries = collections.Counter(
            (tuple(int(v) for v in row[:7]), row[7], row[8]) for row in rows
        )
        expected = expected_entries(kernel_set)
        assert len(expected) == len(set(expected))
        assert entries == collections.Counter(expected)
        assert text.count("ActType::") == len(expected)
        # Each row's launcher is the instantiation of its own config and activation type.
        for row in rows:
            tm, tn, tk, wm, wn, wk, stages = (int(v) for v in row[:7])
            assert (tk, wk) == (gen.TILE_K, gen.TILE_K)
            assert row[9] == f"{CUDA_TYPE[row[7]]}, {row[8]}, {tm}, {tn}, {wm}, {wn}, {stages}"
        # Every launcher is declared extern exactly once, and the declarations match the rows.
        externs = EXTERN.findall(text)
        assert collections.Counter(externs) == collections.Counter(row[9] for row in rows)
        assert len(set(externs)) == len(externs)

    def test_sources_and_registry_agree(self, tmp_path, set_name):
        sources = gen.generate(self.kernel_set(set_name), tmp_path)
        instances = collections.Counter(i for p in sources for i in INSTANCE.findall(p.read_text()))
        registry = (tmp_path / "gemm_registry.inc").read_text()
        assert instances == collections.Counter(EXTERN.findall(registry))
        assert set(instances.values()) == {1}

    def test_idempotent(self, tmp_path, set_name):
        kernel_set = self.kernel_set(set_name)
        first = gen.generate(kernel_set, tmp_path)
        files = sorted(tmp_path.iterdir())
        old = 1_000_000_000  # 2001: any rewrite would move the mtime to now
        for f in files:
            os.utime(f, ns=(old * 10**9, old * 10**9))
        contents = {f: f.read_text() for f in files}
        second = gen.generate(kernel_set, tmp_path)
        assert second == first
        assert sorted(tmp_path.iterdir()) == files
        for f in files:
            assert f.stat().st_mtime_ns == old * 10**9, f"{f.name} was rewritten"
            assert f.read_text() == contents[f]

    def test_changed_set_rewrites(self, tmp_path, set_name):
        other = gen.MINIMAL if set_name == "full" else gen.FULL
        gen.generate(self.kernel_set(set_name), tmp_path)
        registry = tmp_path / "gemm_registry.inc"
        os.utime(registry, ns=(10**18, 10**18))
        gen.generate(other, tmp_path)
        assert registry.stat().st_mtime_ns != 10**18
        assert collections.Counter(
            (tuple(int(v) for v in r[:7]), r[7], r[8]) for r in ROW.findall(registry.read_text())
        ) == collections.Counter(expected_entries(other))

    def test_command_line(self, tmp_path, set_name):
        out = tmp_path / "generated"
        result = subprocess.run(
            [sys.executable, str(GENERATOR), "--set", set_name, "--out", str(out)],
            capture_output=True, text=True, check=True,
        )
        printed = result.stdout.strip().split(";")
        gemv_set = gen.GEMV_FULL if set_name == "full" else gen.GEMV_MINIMAL
        expected = gen.generate(self.kernel_set(set_name), out) + gen.generate_gemv(gemv_set, out)
        assert printed == [str(p) for p in expected]
        assert all(pathlib.Path(p).is_file() for p in printed)


def test_minimal_is_a_subset_of_full():
    assert gen.MINIMAL and gen.FULL
    for tile, stages in gen.MINIMAL.items():
        assert tile in gen.FULL, tile
        assert set(stages) <= set(gen.FULL[tile]), (tile, stages)
    assert {c.tile for c in SETS["minimal"]} <= {c.tile for c in SETS["full"]}


def test_gemv_sets_are_well_formed():
    assert set(gen.GEMV_MINIMAL) <= set(gen.GEMV_FULL)
    for m_tiles, warps in gen.GEMV_FULL:
        assert m_tiles in (1, 2) and warps >= 1  # the kernel takes up to 16 rows (two n8 mma tiles)
    assert gen.GEMV_HALVES == (1, 2)  # one kernel per scale-rows-per-batch case, picked by group size


def test_gemv_registry_lists_every_instance(tmp_path):
    gen.generate_gemv(gen.GEMV_MINIMAL, tmp_path)
    rows = [line for line in (tmp_path / "gemv_registry.inc").read_text().splitlines() if "&launch_gemv<" in line]
    assert len(rows) == len(gen.GEMV_MINIMAL) * len(gen.ACT_TYPES) * len(gen.WEIGHT_BITS) * len(gen.GEMV_HALVES)


def test_kernel_sets_are_well_formed():
    for kernel_set in (gen.FULL, gen.MINIMAL):
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
        assert 1 <= cfg.split_k <= K // 64, (M, cfg)
        assert (cfg.split_k == 1) == (cfg.split_k_mode == "none"), (M, cfg)
        assert cfg.split_k_mode in ("none", "parallel")
        if M <= 16 and has_16:
            assert cfg.tile_m == 16, (M, cfg)
        if M > 64 and has_128:
            assert cfg.tile_m == 128, (M, cfg)
        if cfg.split_k > 1:
            # Each split streams at least 4 k-tiles (8 from 64 rows up), and splitting only happens while
            # the grid is small: under 6 blocks per SM for 16/32-row tiles, 4 for 64, 3/4 of a wave above.
            assert cfg.split_k * (4 if cfg.tile_m <= 32 else 8) <= K // cfg.tile_k
            grid = math.ceil(M / cfg.tile_m) * math.ceil(N / cfg.tile_n)
            limit = {16: 6 * sms, 32: 6 * sms, 64: 4 * sms}.get(cfg.tile_m, 0.75 * sms)
            assert grid < limit, (M, cfg)


@pytest.mark.parametrize("set_name", ["minimal", "full"])
def test_heuristic_tile_by_m(set_name):
    configs = SETS[set_name]
    pick = lambda M: tuning.heuristic_config(configs, M, 4096, 4096, 132)  # noqa: E731
    assert (pick(1).tile_m, pick(1).tile_n) == (16, 256)
    assert pick(16).tile_m == 16
    assert pick(17).tile_m == (32 if set_name == "full" else 64)
    assert pick(64).tile_m == 64
    assert pick(65).tile_m == 128
    assert (pick(257).tile_m, pick(4096).tile_n) == (128, 256)
    # Stage count: the shallowest of 3 or more.
    assert pick(1).stages == 3


def test_heuristic_small_grid_splits_k():
    cfg = tuning.heuristic_config(SETS["minimal"], 1, 4096, 4096, 132)
    assert (cfg.tile_m, cfg.tile_n) == (16, 256)
    assert cfg.split_k_mode == "parallel"
    # 16 tiles want ceil(6 * 132 / 16) = 50 splits; K = 4096 allows 64 / 4 = 16.
    assert cfg.split_k == 16


def test_heuristic_compute_tiles_split_to_one_wave():
    # M = 128, N = 4096: 16 tiles of 128 x 256 cover 16 of 132 SMs; ceil(132 / 16) = 9 splits, capped
    # at 64 k-tiles / 8 per split = 8.
    cfg = tuning.heuristic_config(SETS["minimal"], 128, 4096, 4096, 132)
    assert (cfg.tile_m, cfg.split_k, cfg.split_k_mode) == (128, 8, "parallel")
    # M = 128, N = 28672: 112 tiles, more than 3/4 of the SMs: no split.
    cfg = tuning.heuristic_config(SETS["minimal"], 128, 28672, 8192, 132)
    assert (cfg.tile_m, cfg.split_k) == (128, 1)


def test_heuristic_mid_m_splits_like_decode():
    # M = 32 on the full set: 32 x 128 tiles; 32 of them want ceil(6 * 132 / 32) = 25 splits, capped at 16.
    cfg = tuning.heuristic_config(SETS["full"], 32, 4096, 4096, 132)
    assert (cfg.tile_m, cfg.split_k) == (32, 16)
    # M = 64: 64 x 128 tiles, 224 of them at N = 28672 want ceil(4 * 132 / 224) = 3 splits.
    cfg = tuning.heuristic_config(SETS["full"], 64, 28672, 8192, 132)
    assert (cfg.tile_m, cfg.split_k) == (64, 3)


def test_heuristic_full_grid_does_not_split():
    for set_name in ("minimal", "full"):
        cfg = tuning.heuristic_config(SETS[set_name], 4096, 28672, 4096, 132)
        assert (cfg.tile_m, cfg.split_k, cfg.split_k_mode) == (128, 1, "none")


def test_heuristic_split_is_capped():
    # A tiny grid with a huge K: split_k stops at 16; with a short K at K/64/4.
    cfg = tuning.heuristic_config(SETS["minimal"], 1, 128, 65536, 132)
    assert cfg.split_k == 16
    cfg = tuning.heuristic_config(SETS["minimal"], 1, 128, 512, 132)
    assert cfg.split_k == 2
    cfg = tuning.heuristic_config(SETS["minimal"], 1, 128, 64, 132)
    assert (cfg.split_k, cfg.split_k_mode) == (1, "none")


def test_heuristic_falls_back_to_the_nearest_tile_height():
    only = [GemmConfig(32, 64, 64, 32, 32, 64, 3), GemmConfig(96, 64, 64, 32, 32, 64, 3)]
    assert tuning.heuristic_config(only, 1, 4096, 4096, 132).tile_m == 32
    assert tuning.heuristic_config(only, 4096, 4096, 4096, 132).tile_m == 96


def test_heuristic_needs_configs():
    with pytest.raises(RuntimeError, match="no compiled GEMM configs"):
        tuning.heuristic_config([], 1, 4096, 4096, 132)
