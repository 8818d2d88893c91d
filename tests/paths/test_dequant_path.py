"""CPU tests of the dequant path (mixgemm.paths.dequant): its one config (no tile, no split, both layouts, one
name), its shape rules (the widest of every path), its choice, split variants and plan."""

from __future__ import annotations

import dataclasses

import pytest
import torch

import mixgemm
from mixgemm import paths
from mixgemm.kernel_key import KernelKey
from mixgemm.paths import PATHS, DequantConfig, GemmConfig, GemmProblem, Gpu
from mixgemm.paths import dequant as dequant_path

H100 = Gpu("NVIDIA H100 80GB HBM3", 132, (9, 0))


class TestDequantConfig:
    def test_fields_and_name(self):
        c = DequantConfig()
        assert c.path == "dequant" and PATHS[c.path].layouts == ("sm80", "sm90")
        assert dataclasses.fields(c) == ()  # no tile: cuBLAS chooses its own kernel
        assert c.split_k == 1 and c.split_k_mode == "none" and c.name == c.kernel_name == "dequant_cublas"
        assert dequant_path.NAME == "dequant_cublas"
        assert paths.from_name("dequant_cublas") == c and paths.to_name(c) == "dequant_cublas"
        assert isinstance(c, GemmConfig) and mixgemm.DequantConfig is DequantConfig
        assert DequantConfig() == c and len({c, DequantConfig()}) == 1

    def test_it_never_splits(self):
        for mode in (None, "serial", "parallel", "streamk"):
            with pytest.raises(ValueError, match="^DequantConfig: the dequant path runs one cuBLAS GEMM: split_k must "
                                                 "be 1"):
                DequantConfig().with_split_k(2, mode)
        assert DequantConfig().with_split_k(1) == DequantConfig()
        for name in ("dequant_cublas_k2s", "dequant_cublas_sk4", "dequant_cublas_k1s"):
            with pytest.raises(ValueError, match="invalid config"):
                paths.from_name(name)
        assert paths.from_name("dequant") == "dequant"  # the path's name, not its config

    def test_it_takes_no_fields(self):
        for extra in (dict(schedule="coop"), dict(tile_m=16), dict(split_k=2)):
            with pytest.raises(TypeError, match="unexpected keyword argument"):
                DequantConfig(**extra)

    def test_as_dict_and_from_dict(self):
        assert DequantConfig().as_dict() == {"path": "dequant"}
        assert paths.from_dict({"path": "dequant"}) == DequantConfig()
        with pytest.raises(TypeError):
            paths.from_dict({"path": "dequant", "split_k": 2})


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("bits", [4, 8])
def test_every_build_compiles_it(dtype, bits):
    assert mixgemm.compiled_configs(dtype, bits, path="dequant") == [DequantConfig()]
    assert DequantConfig() in mixgemm.compiled_configs(dtype, bits, path=None)
    for layout in ("sm80", "sm90"):
        for quant in ("scale", "scale_offset"):
            assert PATHS["dequant"].compiled(KernelKey.of(dtype, bits, layout, quant)) == [DequantConfig()]


@pytest.mark.parametrize("layout", ["sm80", "sm90"])
@pytest.mark.parametrize("N, K, G, reason", [
    (4096, 4096, 128, None),
    (4096, 80, 16, None),  # K in 16-deep slabs, groups of 16: outside every kernel path's rules
    (4096, 4096, 16, None),
    (4096, 48, 48, None),
    (4096 + 16, 4096, 128, "N must be a positive multiple of 64 (the 64-column strip the expansion walks), got 4112"),
    (4096, 4096 + 8, 8, "K must be a positive multiple of 16 (the 16-deep slab), got 4104"),
    (4096, 4096, 8, "group_size must be a multiple of 16 that divides K (one scale row per 16-deep slab), got 8"),
    (4096, 80, 32, "group_size must be a multiple of 16 that divides K (one scale row per 16-deep slab), got 32"),
])
def test_fits_has_the_widest_shape_rules(layout, N, K, G, reason):
    key = KernelKey(layout=layout)
    for M in (1, 8, 4096, 100_000):  # any number of rows
        assert PATHS["dequant"].fits(DequantConfig(), GemmProblem(M, N, K, G), key) == reason


def test_choose_split_variants_and_plan():
    problem = GemmProblem(8192, 4096, 4096, 128)
    assert PATHS["dequant"].choose([DequantConfig()], problem, KernelKey(), H100) == DequantConfig()
    assert PATHS["dequant"].choose([], problem, KernelKey(), H100) is None
    assert PATHS["dequant"].split_variants(DequantConfig(), problem, H100) == [DequantConfig()]
    # The plan is the expansion and cuBLAS, bound to nothing but the device (no prepared kernel, no scratch).
    plan = PATHS["dequant"].plan(DequantConfig(), problem, KernelKey(layout="sm90"), H100, torch.device("cpu"))
    assert isinstance(plan, dequant_path.DequantPlan) and isinstance(plan, paths.Plan)
    assert (plan.config, plan.device) == (DequantConfig(), torch.device("cpu"))
