"""CPU tests of the compiled core ``mixgemm._C`` on a machine without a GPU.

The core re-checks the rules it relies on (std::invalid_argument -> ValueError) *before* it looks for a
device, and then refuses to launch anything without one (std::runtime_error -> RuntimeError "no CUDA
GPU"). Raw pointers passed here are never dereferenced: every call below stops at one of those checks.
Tests that pass fake pointers first assert that no GPU is visible, so on a GPU machine they fail at that
assertion instead of launching a kernel on bogus addresses.
"""

from __future__ import annotations

import importlib
import math

import pytest
import torch

import mixgemm
from mixgemm.config import GemmConfig

_C = importlib.import_module("mixgemm._C")

# These tests pass fake device addresses and expect the no-GPU refusal: CI only (see conftest.py).
pytestmark = pytest.mark.nogpu

NO_GPU = r"no CUDA GPU is visible"
# Fake, 16-byte aligned, distinct, non-null "device addresses" (never dereferenced).
ADDR = [(1 << 24) * (i + 1) for i in range(8)]
STREAM_K_BLOCKS_RULE = r"stream-K: split_k \(the blocks\) must be in \[1, the units of work = \d+\]"


def require_no_gpu():
    assert _C.cuda_device_count() == 0, "these tests pass fake pointers and must only run without a GPU"


def some_config(bf16=False):
    return _C.gemm_configs(bf16)[0]


def gemm_call(config=None, M=4, N=128, K=256, group_size=128, split_k=1, mode="none", bf16=False,
              x=ADDR[0], packed=ADDR[1], scales=ADDR[2], offsets=ADDR[3], bias=0, out=ADDR[4],
              workspace=ADDR[5], semaphores=ADDR[6]):
    config = some_config(bf16) if config is None else config
    return _C.gemm(config, x, packed, scales, offsets, bias, out, workspace, semaphores, M, N, K, group_size,
                   split_k, mode, bf16, 0)


# ---------------------------------------------------------------------------------------------------
# Module basics
# ---------------------------------------------------------------------------------------------------


def test_extension_imports():
    import mixgemm._C as c

    assert c is mixgemm._C is _C
    for name in ("compiled_archs", "cuda_device_count", "awq_dequantize", "baseline_awq_gemm",
                 "prepack_awq_qweight", "fold_awq_zeros", "gemm_configs", "gemm_workspace_size", "gemm"):
        assert callable(getattr(_C, name)), name


def test_compiled_archs():
    archs = _C.compiled_archs()
    assert isinstance(archs, list) and archs
    assert all(type(a) is int and a >= 80 for a in archs)
    assert len(set(archs)) == len(archs)


def test_no_device_visible():
    assert _C.cuda_device_count() == 0
    assert not torch.cuda.is_available()


# ---------------------------------------------------------------------------------------------------
# awq_dequantize: rules (ValueError) before the device check (RuntimeError)
# ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("bf16", [False, True])
@pytest.mark.parametrize("K, N, group_size", [(64, 64, 64), (1, 8, 1), (128, 24, 32)])
def test_awq_dequantize_needs_a_device(bf16, K, N, group_size):
    require_no_gpu()
    with pytest.raises(RuntimeError, match=NO_GPU):
        _C.awq_dequantize(0, 0, 0, 0, K, N, group_size, bf16, 0)


@pytest.mark.parametrize(
    "K, N, group_size, pointers, pattern",
    [
        (64, 12, 64, (0, 0, 0, 0), r"awq_dequantize: N \(columns of scales\) must be a positive multiple of 8"),
        (64, 0, 64, (0, 0, 0, 0), r"N \(columns of scales\) must be a positive multiple of 8"),
        (64, -8, 64, (0, 0, 0, 0), r"N \(columns of scales\) must be a positive multiple of 8"),
        (0, 64, 64, (0, 0, 0, 0), r"awq_dequantize: K \(rows of qweight\) must be >= 1"),
        (64, 64, 0, (0, 0, 0, 0), r"group_size must be >= 1 and divide K"),
        (64, 64, 48, (0, 0, 0, 0), r"group_size must be >= 1 and divide K"),
        (64, 64, 64, (8, 0, 0, 0), r"qweight, scales, qzeros and out must be 16-byte aligned"),
        (64, 64, 64, (0, 0, 0, 2), r"must be 16-byte aligned"),
    ],
)
def test_awq_dequantize_rules(K, N, group_size, pointers, pattern):
    with pytest.raises(ValueError, match=pattern):
        _C.awq_dequantize(*pointers, K, N, group_size, False, 0)


# ---------------------------------------------------------------------------------------------------
# prepack and baseline entries
# ---------------------------------------------------------------------------------------------------


def test_prepack_awq_qweight_rules_then_device():
    with pytest.raises(ValueError, match=r"K must be a positive multiple of 16 \(got K=40\)"):
        _C.prepack_awq_qweight(ADDR[0], ADDR[1], 40, 64, 0)
    with pytest.raises(ValueError, match=r"N must be a positive multiple of 64 \(got N=72\)"):
        _C.prepack_awq_qweight(ADDR[0], ADDR[1], 64, 72, 0)
    with pytest.raises(ValueError, match=r"awq_qweight must be a device pointer"):
        _C.prepack_awq_qweight(0, ADDR[1], 64, 64, 0)
    with pytest.raises(ValueError, match=r"packed must not overlap awq_qweight"):
        _C.prepack_awq_qweight(ADDR[0], ADDR[0] + 64, 64, 64, 0)


def test_fold_awq_zeros_rules():
    with pytest.raises(ValueError, match=r"groups \(= K / group_size\) must be positive \(got groups=0\)"):
        _C.fold_awq_zeros(ADDR[0], ADDR[1], ADDR[2], 0, 64, False, 0)
    with pytest.raises(ValueError, match=r"N must be a positive multiple of 8 \(AWQ packing\) \(got N=12\)"):
        _C.fold_awq_zeros(ADDR[0], ADDR[1], ADDR[2], 2, 12, False, 0)
    with pytest.raises(ValueError, match=r"offsets must be a device pointer"):
        _C.fold_awq_zeros(ADDR[0], ADDR[1], 0, 2, 64, True, 0)


@pytest.mark.parametrize(
    "name, args",
    [
        ("prepack_awq_qweight", (ADDR[0], ADDR[1], 64, 64, 0)),
        ("fold_awq_zeros", (ADDR[0], ADDR[1], ADDR[2], 2, 64, False, 0)),
        ("baseline_awq_gemm", (*ADDR[:5], 4, 64, 64, 64, 1, 0)),
    ],
)
def test_other_kernel_entries_fail_without_a_device(name, args):
    # Valid arguments, no GPU: every entry checks for a device before launching.
    require_no_gpu()
    with pytest.raises(RuntimeError, match=NO_GPU):
        getattr(_C, name)(*args)


@pytest.mark.parametrize(
    "M, N, K, group_size, split, pattern",
    [
        (-1, 64, 64, 64, 1, r"M \(rows of x\) must be >= 0"),
        (4, 96, 64, 64, 1, r"N \(output columns\) must be a positive multiple of 64"),
        (4, 64, 48, 16, 1, r"K \(reduction size\) must be a positive multiple of 32"),
        (4, 64, 128, 16, 1, r"group_size must be a positive multiple of 32"),
        (4, 64, 96, 64, 1, r"K must be a multiple of group_size"),
        (4, 64, 64, 64, 0, r"split_k_iters must be >= 1"),
    ],
)
def test_baseline_awq_gemm_rules(M, N, K, group_size, split, pattern):
    with pytest.raises(ValueError, match=rf"awq_gemm: {pattern}"):
        _C.baseline_awq_gemm(*ADDR[:5], M, N, K, group_size, split, 0)


# ---------------------------------------------------------------------------------------------------
# gemm: can_implement (ValueError) before the device check
# ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("bf16", [False, True])
@pytest.mark.parametrize("split_k, mode", [(1, "none"), (2, "serial"), (4, "parallel"), (1, "streamk"), (3, "streamk")])
def test_gemm_valid_call_needs_a_device(bf16, split_k, mode):
    require_no_gpu()
    for config in _C.gemm_configs(bf16):
        with pytest.raises(RuntimeError, match=NO_GPU):
            gemm_call(config, split_k=split_k, mode=mode, bf16=bf16)


def test_gemm_uncompiled_config():
    with pytest.raises(ValueError, match=r"gemm: config 32x32x64_w16x16x64_s7 is not compiled into this build"):
        gemm_call((32, 32, 64, 16, 16, 64, 7))


@pytest.mark.parametrize("K", [100, 32, 0, 96])
def test_gemm_k_must_be_a_multiple_of_64(K):
    with pytest.raises(ValueError, match=r"gemm: K must be a positive multiple of 64"):
        gemm_call(K=K, group_size=64)


@pytest.mark.parametrize(
    "overrides, pattern",
    [
        (dict(M=0), r"M \(rows of x\) must be >= 1"),
        (dict(N=96), r"N must be a positive multiple of 64"),
        (dict(N=0), r"N must be a positive multiple of 64"),
        (dict(group_size=16), r"group_size must be a multiple of 32 that divides K"),
        (dict(group_size=48), r"group_size must be a multiple of 32 that divides K"),
        (dict(group_size=192), r"group_size must be a multiple of 32 that divides K"),
        (dict(split_k=5, mode="serial"), r"split_k must be in \[1, K / 64 = 4\]"),
        (dict(split_k=0, mode="none"), r"split_k must be in \[1, K / 64 = 4\]"),
        (dict(split_k=2, mode="none"), r"split_k > 1 needs split_k_mode 'serial' or 'parallel'"),
        (dict(split_k=1, mode="serial"), r"split_k > 1 needs split_k_mode 'serial' or 'parallel', and split_k == 1 needs 'none'"),
        (dict(mode="stream-k"), r"split_k_mode must be 'none', 'serial', 'parallel' or 'streamk', got 'stream-k'"),
        (dict(split_k=0, mode="streamk"), STREAM_K_BLOCKS_RULE),
        (dict(split_k=10**6, mode="streamk"), STREAM_K_BLOCKS_RULE),
        (dict(split_k=3, mode="streamk", semaphores=0), r"serial split-K and stream-K need a semaphore buffer"),
        (dict(x=0), r"x, packed weight, scales, offsets and output pointers must be non-null"),
        (dict(out=0), r"x, packed weight, scales, offsets and output pointers must be non-null"),
        (dict(scales=ADDR[2] + 8), r"x, packed weight, scales and offsets must be 16-byte aligned"),
        (dict(bias=ADDR[7] + 2), r"output and bias must be 4-byte aligned"),
        (dict(split_k=2, mode="parallel", workspace=0), r"this split-K mode needs a 16-byte aligned fp32 workspace"),
        (dict(split_k=2, mode="serial", workspace=ADDR[5] + 4),
         r"this split-K mode needs a 16-byte aligned fp32 workspace"),
        (dict(split_k=2, mode="serial", semaphores=0), r"serial split-K and stream-K need a semaphore buffer"),
    ],
)
def test_gemm_rules(overrides, pattern):
    with pytest.raises(ValueError, match=rf"gemm: {pattern}"):
        gemm_call(**overrides)


def test_gemm_config_compiled_for_one_dtype_only_is_checked_per_dtype():
    # A config compiled for fp16 is accepted only with bf16=False if it is missing from the bf16 list.
    fp16 = set(_C.gemm_configs(False))
    bf16 = set(_C.gemm_configs(True))
    for config in fp16 - bf16:
        with pytest.raises(ValueError, match="not compiled"):
            gemm_call(config, bf16=True)
    assert fp16 and bf16


# ---------------------------------------------------------------------------------------------------
# gemm_workspace_size
# ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("M, N", [(1, 64), (5, 200), (16, 128), (17, 4096), (4096, 28672), (300, 192)])
@pytest.mark.parametrize("split_k", [2, 3, 16])
def test_gemm_workspace_size(M, N, split_k):
    for config in _C.gemm_configs(False):
        tile_m, tile_n = config[0], config[1]
        # Both modes keep one fp32 partial per split; serial adds one arrival counter per output tile.
        assert _C.gemm_workspace_size(config, M, N, split_k, "serial") == (
            split_k * M * N, math.ceil(M / tile_m) * math.ceil(N / tile_n))
        assert _C.gemm_workspace_size(config, M, N, split_k, "parallel") == (split_k * M * N, 0)
        assert _C.gemm_workspace_size(config, M, N, 1, "none") == (0, 0)


def test_gemm_workspace_size_no_int32_overflow():
    config = some_config()
    M, N = 65536, 65536
    assert _C.gemm_workspace_size(config, M, N, 16, "parallel") == (16 * M * N, 0)
    assert _C.gemm_workspace_size(config, M, N, 2, "serial")[0] == 2 * M * N
    # Stream-K: two one-tile slots per block, one counter per output tile.
    tile_m, tile_n = config[0], config[1]
    tiles = -(-M // tile_m) * -(-N // tile_n)
    assert _C.gemm_workspace_size(config, M, N, 7, "streamk") == (2 * 7 * tile_m * tile_n, tiles)


def test_gemm_workspace_size_bad_mode():
    with pytest.raises(ValueError, match=r"split_k_mode must be 'none', 'serial', 'parallel' or 'streamk', got 'fast'"):
        _C.gemm_workspace_size(some_config(), 4, 128, 2, "fast")


# ---------------------------------------------------------------------------------------------------
# compiled_configs (Python) mirrors gemm_configs (C++)
# ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype, bf16", [(torch.float16, False), (torch.bfloat16, True)])
def test_compiled_configs_match_the_registry(dtype, bf16):
    configs = mixgemm.compiled_configs(dtype)
    tiles = _C.gemm_configs(bf16)
    assert configs and all(isinstance(c, GemmConfig) for c in configs)
    assert [c.tile for c in configs] == [tuple(t) for t in tiles]
    assert all(c.split_k == 1 and c.split_k_mode == "none" for c in configs)
    assert len({c.tile for c in configs}) == len(configs)
    assert all(c.tile_k == 64 and c.warp_k == 64 for c in configs)


def test_compiled_configs_default_is_float16():
    assert mixgemm.compiled_configs() == mixgemm.compiled_configs(torch.float16)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.int8, torch.float8_e4m3fn])
def test_compiled_configs_rejects_other_dtypes(dtype):
    with pytest.raises(ValueError, match=r"compiled_configs: dtype must be float16 or bfloat16"):
        mixgemm.compiled_configs(dtype)
