"""CPU tests of the decode path (mixgemm.paths.decode): DecodeConfig (fields, names, splits), its fits check, its
heuristic (paths.decode.heuristic, split_for) and the split variants the profiler sweeps."""

from __future__ import annotations

import dataclasses
import re

import pytest
import torch

import mixgemm
import mixgemm._C as _C
from mixgemm import paths
from mixgemm.kernel_key import KernelKey
from mixgemm.paths import PATHS, DecodeConfig, GemmConfig, GemmProblem, Gpu
from mixgemm.paths import decode as decode_path

from hand_registry import kernel_sets, set_configs

H100 = Gpu("NVIDIA H100 80GB HBM3", 132, (9, 0))
SM80 = KernelKey()
SM90 = KernelKey(layout="sm90")
# Every set builds the three decode kernels (kernel_sets.DECODE_CONFIGS).
DECODE = [DecodeConfig(8, 4), DecodeConfig(8, 8), DecodeConfig(16, 4)]


def pick(M, N=4096, K=4096, sms=132, configs=DECODE):
    return decode_path.heuristic(configs, M, N, K, sms)


# ===================================================================================================
# DecodeConfig
# ===================================================================================================


class TestDecodeConfig:
    def test_fields(self):
        c = DecodeConfig(8, 4)
        assert (c.path, c.rows, c.warps, c.split_k, c.split_k_mode) == ("decode", 8, 4, 1, "none")
        assert isinstance(c, GemmConfig) and mixgemm.DecodeConfig is DecodeConfig
        assert [f.name for f in dataclasses.fields(DecodeConfig)] == ["rows", "warps", "split_k"]

    @pytest.mark.parametrize("config, name", [
        (DecodeConfig(8, 4), "decode_m8_w4"),
        (DecodeConfig(8, 8), "decode_m8_w8"),
        (DecodeConfig(16, 4), "decode_m16_w4"),
        (DecodeConfig(8, 4, 4), "decode_m8_w4_k4s"),
        (DecodeConfig(16, 4).with_split_k(12), "decode_m16_w4_k12s"),
    ])
    def test_name_round_trip(self, config, name):
        assert config.name == name
        assert config.kernel_name == name.split("_k")[0]
        assert paths.from_name(name) == config
        assert paths.to_name(config) == name == paths.to_name(name)
        assert paths.from_name(f" {name} ") == config

    @pytest.mark.parametrize("name, message", [
        ("decode_m8_w4_sk4", "the decode path splits K serially only"),  # no stream-K
        ("decode_m8_w4_k4p", "the decode path splits K serially only"),  # no second reduction kernel
        ("decode_m24_w4", r"DecodeConfig: rows must be 8 or 16 \(one or two n8 mma tiles\), got 24"),
        ("decode_m8_w0", "DecodeConfig: warps must be a positive int, got 0"),
        ("decode_m8_w4_k0s", "DecodeConfig: split_k must be a positive int, got 0"),
        ("decode_m8_w4_k4", "invalid config"),
        ("decode_8_w4", "invalid config"),
        # The names of the gemv path before the restructure are gone.
        ("gemv_8x64x256_w8x64x64_s2", "invalid config"),
        ("gemv_8x64x256_w8x64x64_s2_k4s", "invalid config"),
    ])
    def test_bad_names(self, name, message):
        with pytest.raises(ValueError, match=message):
            paths.from_name(name)

    def test_split_one_serial_is_not_a_name(self):
        with pytest.raises(ValueError, match="split_k == 1 needs split_k_mode 'none'"):
            paths.from_name("decode_m8_w4_k1s")

    @pytest.mark.parametrize("kwargs, message", [
        (dict(rows=24, warps=4), "rows must be 8 or 16"),
        (dict(rows=True, warps=4), "rows must be 8 or 16"),
        (dict(rows=8, warps=0), "warps must be a positive int, got 0"),
        (dict(rows=8, warps=2.0), "warps must be a positive int, got 2.0"),
        (dict(rows=8, warps=True), "warps must be a positive int, got True"),
        (dict(rows=8, warps=4, split_k=0), "split_k must be a positive int, got 0"),
        (dict(rows=8, warps=4, split_k=True), "split_k must be a positive int, got True"),
    ])
    def test_construction_rules(self, kwargs, message):
        with pytest.raises(ValueError, match=rf"^DecodeConfig: {message}"):
            DecodeConfig(**kwargs)

    def test_split_k_is_serial_only(self):
        c = DecodeConfig(8, 4)
        split = c.with_split_k(4)
        assert (split.split_k, split.split_k_mode, split.kernel_name) == (4, "serial", c.kernel_name)
        assert c.with_split_k(4, "serial") == split and split.with_split_k(1) == c
        assert split.with_split_k(1).split_k_mode == "none"
        for mode in ("parallel", "streamk"):
            with pytest.raises(ValueError, match=rf"DecodeConfig: split_k_mode must be one of \('none', 'serial'\) on "
                                                 rf"this path, got '{mode}'"):
                c.with_split_k(4, mode)
        with pytest.raises(ValueError, match="split_k == 1 needs split_k_mode 'none'"):
            c.with_split_k(1, "serial")
        with pytest.raises(ValueError, match="split_k must be a positive int"):
            c.with_split_k(0)

    def test_frozen_hashable_comparable(self):
        c = DecodeConfig(8, 4)
        with pytest.raises(dataclasses.FrozenInstanceError):
            c.split_k = 2
        assert len({c, DecodeConfig(8, 4), c.with_split_k(2), DecodeConfig(8, 8)}) == 3

    def test_it_takes_no_other_paths_fields(self):
        for extra in (dict(schedule="coop"), dict(cluster_m=2), dict(tile_m=8), dict(split_k_mode="serial")):
            with pytest.raises(TypeError, match="unexpected keyword argument"):
                DecodeConfig(8, 4, **extra)

    def test_as_dict_and_from_dict(self):
        for config in (DecodeConfig(8, 4), DecodeConfig(16, 4, 3)):
            fields = config.as_dict()
            # The mode is the split's consequence, not a field.
            assert fields == {"path": "decode", "rows": config.rows, "warps": 4, "split_k": config.split_k}
            assert paths.from_dict(fields) == config
        with pytest.raises(ValueError, match="rows must be 8 or 16"):
            paths.from_dict({"path": "decode", "rows": 12, "warps": 4, "split_k": 1})


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("bits", [4, 8])
def test_this_builds_decode_configs(dtype, bits):
    # Both layouts, every set: the three kernels of kernel_sets.DECODE_CONFIGS, named back by the package.
    expected = [DecodeConfig(8 * m, w) for m, w in kernel_sets().DECODE_CONFIGS]
    for layout in ("sm80", "sm90"):
        key = KernelKey.of(dtype, bits, layout)
        assert [PATHS["decode"].parse_name(n) for n in _C.compiled_configs("decode", key.as_tuple())] == expected
        assert PATHS["decode"].compiled(key) == expected
        assert mixgemm.compiled_configs(dtype, bits, path="decode", layout=layout) == expected
    assert expected == set_configs("minimal", "decode") == set_configs("full", "decode")


# ===================================================================================================
# fits
# ===================================================================================================


def test_fits_takes_up_to_the_kernels_rows_first():
    m8, m16 = DecodeConfig(8, 4), DecodeConfig(16, 4)
    assert PATHS["decode"].fits(m8, GemmProblem(8, 4096, 4096, 128), SM80) is None
    assert PATHS["decode"].fits(m8, GemmProblem(9, 4096, 4096, 128), SM80) == ("decode_m8_w4 takes at most 8 rows of "
                                                                               "x, got M = 9")
    assert PATHS["decode"].fits(m16, GemmProblem(16, 4096, 4096, 128), SM90) is None
    assert PATHS["decode"].fits(m16.with_split_k(2), GemmProblem(17, 4096, 4096, 128), SM90) == (
        "decode_m16_w4_k2s takes at most 16 rows of x, got M = 17")
    # The rows before the shape: a bad shape with too many rows names the rows.
    assert "rows of x" in PATHS["decode"].fits(m8, GemmProblem(9, 4100, 4000, 100), SM80)


@pytest.mark.parametrize("layout", ["sm80", "sm90"])
@pytest.mark.parametrize("N, K, G, reason", [
    (4096, 4096, 128, None),
    (4096, 4096, 32, None),
    (4096 + 16, 4096, 128, "N must be a positive multiple of 64 (a block's 64-column strip), got 4112"),
    (4096, 4096 - 16, 32, "K must be a positive multiple of 64 (the 64-deep k-batch), got 4080"),
    (4096, 4096, 16, "group_size must be a multiple of 32 that divides K (the 32-row scale fold), got 16"),
    (4096, 4096, 96, "group_size must be a multiple of 32 that divides K (the 32-row scale fold), got 96"),
])
def test_fits_checks_the_shape_rules(layout, N, K, G, reason):
    assert PATHS["decode"].fits(DecodeConfig(8, 4), GemmProblem(4, N, K, G), KernelKey(layout=layout)) == reason


def test_fits_checks_the_split():
    problem = GemmProblem(1, 4096, 256, 128)  # 4 k-batches
    assert PATHS["decode"].fits(DecodeConfig(8, 4, 4), problem, SM80) is None
    assert PATHS["decode"].fits(DecodeConfig(8, 4, 5), problem, SM80) == ("split_k = 5 is more than K / 64 = 4 "
                                                                          "k-batches")


def test_fits_agrees_with_the_core():
    # What fits says, the core's prepare says in the same words (it needs no GPU for its checks).
    for M, N, K, G, split in [(9, 4096, 4096, 128, 1), (4, 4112, 4096, 128, 1), (4, 4096, 4080, 16, 1),
                              (4, 4096, 4096, 16, 1), (4, 4096, 256, 128, 5), (8, 4096, 4096, 128, 4)]:
        config = DecodeConfig(8, 4, split)
        reason = PATHS["decode"].fits(config, GemmProblem(M, N, K, G), SM80)
        args = ("decode", config.kernel_name, SM80.as_tuple(), M, N, K, G, split, config.split_k_mode)
        if reason is None:
            assert _C.prepare(*args).semaphores == (N // 64 if split > 1 else 0)
        elif reason.startswith("split_k"):
            with pytest.raises(ValueError, match=re.escape("gemm (decode path): split_k must be in [1, K / 64 = 4]")):
                _C.prepare(*args)
        elif "rows of x" in reason:
            with pytest.raises(ValueError, match=re.escape("gemm (decode path): M (rows of x) must be in [1, 8] for "
                                                           f"decode_m8_w4, got {M}")):
                _C.prepare(*args)
        else:
            with pytest.raises(ValueError, match=re.escape(f"gemm (decode path): {reason}")):
                _C.prepare(*args)


# ===================================================================================================
# paths.decode.heuristic and split_for
# ===================================================================================================


@pytest.mark.parametrize("N, K, warps_split_m1, warps_split_m8", [
    (4096, 4096, (8, 4), (8, 4)), (11008, 4096, (4, 3), (8, 1)), (4096, 11008, (8, 4), (8, 4)),
    (8192, 8192, (8, 2), (8, 2)), (28672, 8192, (4, 1), (4, 1)), (8192, 28672, (8, 2), (8, 2)),
])
def test_decode_warps_and_split_k_reproduce_the_h100_sweeps(N, K, warps_split_m1, warps_split_m8):
    # The best of 4 and 8 warps in the 2026-11-24 probe, each at its best split of the sweeps
    # (BENCHMARKS.md): 8 warps at half the split where they fill the GPU as well as 4, and from M = 5
    # wherever one wave of them fits (not 28672 columns: 448 strips of 8 warps are 1.7 waves).
    for M, (warps, split) in [(1, warps_split_m1), (4, warps_split_m1), (5, warps_split_m8), (8, warps_split_m8)]:
        config = pick(M, N, K)
        assert (config.rows, config.warps, config.split_k) == (8, warps, split), M
        # The path's choose is the same rule, whatever the weight's layout (the kernel reads both at one speed).
        for key in (SM80, SM90):
            assert PATHS["decode"].choose(DECODE, GemmProblem(M, N, K, 128), key, H100) == config, (M, key)


@pytest.mark.parametrize("bandwidth", [4.8e12, 4.0e12])
def test_decode_takes_4_warps_up_to_m_2_on_fast_dram_where_8_warps_split_2_to_4_ways(bandwidth):
    # The H200's sweeps (docs/perf-notes/2026-11-28-h200-decode-lane-addresses.md section 7): 8192x8192 (8 warps
    # split 2 ways, 4 warps 4), 5120x5120 (3, 6), 4096x4096 (4, 8), each pair filling the wave alike.
    for N, K, narrow, wide in [(8192, 8192, 4, 2), (5120, 5120, 6, 3), (4096, 4096, 8, 4)]:
        for M in (1, 2):
            config = decode_path.heuristic(DECODE, M, N, K, 132, bandwidth)
            assert (config.warps, config.split_k) == (4, narrow), (N, K, M)
            assert PATHS["decode"].choose(DECODE, GemmProblem(M, N, K, 128), SM90,
                                          dataclasses.replace(H100, memory_bandwidth=bandwidth)) == config
        # From M = 3, and on a slower or unknown DRAM, the 8-warp pick stays.
        for M, bw in [(3, bandwidth), (4, bandwidth), (1, 3.35e12), (2, 0.0)]:
            config = decode_path.heuristic(DECODE, M, N, K, 132, bw)
            assert (config.warps, config.split_k) == (8, wide), (N, K, M, bw)
    # Where 8 warps split 6 or 8 ways (4 warps: 13 or 16) or not at all, they stay too.
    for N, K, wide in [(2560, 8192, 6), (1280, 8192, 8), (14336, 8192, 1)]:
        config = decode_path.heuristic(DECODE, 1, N, K, 132, bandwidth)
        assert (config.warps, config.split_k) == (8, wide), (N, K)
    # A build without 8-warp blocks is unaffected.
    assert decode_path.heuristic(DECODE[:1], 1, 8192, 8192, 132, bandwidth) == DecodeConfig(8, 4, 4)


def test_decode_split_k_rule():
    # One full wave of 16 warps per SM, never a partial second: floor(blocks per SM x SMs / strips).
    assert decode_path.split_for(DecodeConfig(8, 4), 11008, 4096, 132).split_k == 3  # 528 // 172
    assert decode_path.split_for(DecodeConfig(8, 8), 11008, 4096, 132).split_k == 1  # 264 // 172
    assert decode_path.split_for(DecodeConfig(8, 8), 28672, 8192, 132).split_k == 1  # under a wave: no split
    # The m16 kernel keeps four batches per warp: 64 batches // 16.
    assert decode_path.split_for(DecodeConfig(16, 4), 4096, 4096, 132).split_k == 4
    # The split of a split config is recomputed, and split_k 1 is unsplit.
    assert decode_path.split_for(DecodeConfig(8, 4, 7), 11008, 4096, 132) == DecodeConfig(8, 4, 3)
    assert decode_path.split_for(DecodeConfig(8, 8, 2), 28672, 8192, 132).split_k_mode == "none"
    # At most 16, and each warp keeps two batches: K = 256 is 4 batches, 4 warps x 2 each: no split.
    assert decode_path.split_for(DecodeConfig(8, 4), 64, 1 << 20, 132).split_k == 16
    assert decode_path.split_for(DecodeConfig(8, 4), 4096, 256, 132).split_k == 1
    # Fewer SMs, fewer blocks wanted.
    assert pick(1, 4096, 4096, sms=66).split_k == 2
    # A build with only 4-warp decode blocks takes them.
    assert pick(1, configs=[DecodeConfig(8, 4)]).name == "decode_m8_w4_k8s"


def test_decode_takes_the_kernel_of_the_fewest_rows_that_takes_m():
    for M in range(1, 9):
        assert pick(M).rows == 8, M
    for M in range(9, 17):
        assert pick(M) == decode_path.split_for(DecodeConfig(16, 4), 4096, 4096, 132), M
    # No kernel takes more than 16 rows, nor more than 8 without the m16 kernel.
    assert pick(17) is None
    assert pick(9, configs=DECODE[:2]) is None
    assert pick(1, configs=[]) is None
    assert PATHS["decode"].choose(DECODE, GemmProblem(17, 4096, 4096, 128), SM80, H100) is None
    # Every choice fits its problem.
    for M in range(1, 17):
        for N, K in [(4096, 4096), (28672, 8192), (64, 64)]:
            config = pick(M, N, K)
            assert PATHS["decode"].fits(config, GemmProblem(M, N, K, 64), SM80) is None, (M, N, K, config)


# ===================================================================================================
# split_variants
# ===================================================================================================


def test_split_variants():
    c = DecodeConfig(8, 4)
    variants = PATHS["decode"].split_variants(c.with_split_k(3), GemmProblem(1, 4096, 512, 128), H100)
    assert [v.name for v in variants] == ["decode_m8_w4", "decode_m8_w4_k2s", "decode_m8_w4_k4s", "decode_m8_w4_k8s"]
    assert [v.split_k for v in PATHS["decode"].split_variants(c, GemmProblem(1, 4096, 4096, 128), H100)] == [
        1, *decode_path.SWEEP_SPLIT_KS]
    assert PATHS["decode"].split_variants(c, GemmProblem(1, 4096, 64, 64), H100) == [c]
    # 8192x5120 (80 strips): one wave of 4-warp blocks holds 6 splits, which the heuristic takes and the sweep times.
    assert decode_path.split_for(c, 5120, 8192, 132).split_k == 6
    assert [v.split_k for v in PATHS["decode"].split_variants(c, GemmProblem(1, 5120, 8192, 128), H100)] == [
        1, 2, 4, 6, 8, 16]
    assert [v.split_k for v in PATHS["decode"].split_variants(DecodeConfig(8, 8), GemmProblem(1, 5120, 8192, 128),
                                                               H100)] == [1, 2, 3, 4, 8, 16]
    for v in variants:
        assert PATHS["decode"].fits(v, GemmProblem(1, 4096, 512, 128), SM80) is None
