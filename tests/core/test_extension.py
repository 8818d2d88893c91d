"""CPU tests of the compiled core ``mixgemm._C`` on a machine without a GPU.

The core re-checks the rules it relies on (std::invalid_argument -> ValueError) *before* it looks for a
device, and then refuses to launch anything without one (std::runtime_error -> RuntimeError "no CUDA
GPU"). Every kernel path is reached through ``_C.prepare(path, config name, key, M, N, K, group_size, split_k,
split_mode)``: for the sm80 and decode paths it checks the config's name, the key, the shape and the split without a
GPU and returns a PreparedLaunch (its scratch sized), whose call checks the addresses (null, alignment) and then
needs a GPU; the sm90 path's prepare checks the same rules and then needs the GPU itself (it sizes its scratch for
the GPU's SM count). Raw pointers passed here are never dereferenced: every call below stops at one of those
checks. Tests that pass fake pointers first assert that no GPU is visible, so on a GPU machine they fail at that
assertion instead of launching a kernel on bogus addresses.
"""

from __future__ import annotations

import importlib
import math

import pytest
import torch

import mixgemm
from mixgemm import DequantConfig, GemmConfig, KernelKey, paths

_C = importlib.import_module("mixgemm._C")

# These tests pass fake device addresses and expect the no-GPU refusal: CI only (see conftest.py).
pytestmark = pytest.mark.nogpu

NO_GPU = r"no CUDA GPU is visible"
# Fake, 16-byte aligned, distinct, non-null "device addresses" (never dereferenced).
ADDR = [(1 << 24) * (i + 1) for i in range(8)]
STREAM_K_BLOCKS_RULE = r"stream-K: split_k \(the blocks\) must be in \[1, the units of work = \d+\]"

ACTS = ("fp16", "bf16")
DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16}
BITS = (4, 8)
LAYOUTS = ("sm80", "sm90")
QUANTS = ("scale_offset", "scale")
BOUND_PATHS = ("sm80", "decode", "sm90")  # the paths the extension binds (dequant is PyTorch + our expansion)
EVERY_KEY = [(act, bits, layout, quant, "none") for act in ACTS for bits in BITS for layout in LAYOUTS
             for quant in QUANTS]


def key(act="fp16", bits=4, layout="sm80", quant="scale_offset"):
    return (act, bits, layout, quant, "none")


def require_no_gpu():
    assert _C.cuda_device_count() == 0, "these tests pass fake pointers and must only run without a GPU"


def sm80_config(layout="sm80", act="fp16", bits=4):
    return _C.compiled_configs("sm80", key(act, bits, layout))[0]


def prepare(path="sm80", config=None, k=None, M=4, N=128, K=256, group_size=128, split_k=1, mode="none"):
    k = key() if k is None else k
    config = {"sm80": lambda: sm80_config(k[2], k[0], k[1]), "decode": lambda: "decode_m8_w4",
              "sm90": lambda: _C.compiled_configs("sm90", k)[0]}[path]() if config is None else config
    return _C.prepare(path, config, k, M, N, K, group_size, split_k, mode)


def call(launch, x=ADDR[0], packed=ADDR[1], scales=ADDR[2], offsets=ADDR[3], bias=0, out=ADDR[4],
         workspace=ADDR[5], semaphores=ADDR[6], stream=0):
    return launch(x, packed, scales, offsets, bias, out, workspace, semaphores, stream)


needs_sm90 = pytest.mark.skipif(not _C.sm90_available(), reason="this build has no sm90 kernels")


# ---------------------------------------------------------------------------------------------------
# Module basics
# ---------------------------------------------------------------------------------------------------


def test_extension_imports():
    import mixgemm._C as c

    assert c is mixgemm._C is _C
    for name in ("compiled_archs", "cuda_device_count", "sm90_available", "paths", "shape_rules", "compiled_configs",
                 "prepare", "dequantize_packed", "awq_dequantize", "prepack_awq_qweight", "fold_awq_zeros"):
        assert callable(getattr(_C, name)), name
    for name in ("cutlass2_fp16_gemm", "read_floor", "awq_gemm_baseline"):
        assert callable(getattr(_C.peers, name)), name
    assert isinstance(_C.peers.READ_FLOOR_MAX_BLOCKS, int) and _C.peers.READ_FLOOR_MAX_BLOCKS > 0
    assert isinstance(_C.PreparedLaunch, type)


def test_the_raw_entry_points_are_gone():
    # Every kernel is reached through prepare(); the peers live apart from the library's kernels.
    for name in ("gemm", "gemv", "gemm_sm90", "gemm_configs", "gemv_configs", "gemm_sm90_configs",
                 "gemm_workspace_size", "prepare_gemm", "baseline_awq_gemm", "cutlass2_fp16_gemm", "read_floor"):
        assert not hasattr(_C, name), name


def test_compiled_archs():
    archs = _C.compiled_archs()
    assert isinstance(archs, list) and archs
    assert all(type(a) is int and a >= 80 for a in archs)
    assert len(set(archs)) == len(archs)


def test_sm90_available_needs_sm90_code():
    assert isinstance(_C.sm90_available(), bool)
    if _C.sm90_available():
        assert 90 in _C.compiled_archs()


def test_no_device_visible():
    assert _C.cuda_device_count() == 0
    assert not torch.cuda.is_available()


def test_paths_are_the_packages_kernel_paths():
    assert sorted(_C.paths()) == sorted(BOUND_PATHS)
    assert set(_C.paths()) | {"dequant"} == set(paths.PATHS)


# ---------------------------------------------------------------------------------------------------
# compiled_configs: every path, both activation types, both widths, both layouts, both quant modes
# ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("path", BOUND_PATHS)
@pytest.mark.parametrize("k", EVERY_KEY, ids=lambda k: "-".join(map(str, k[:4])))
def test_compiled_configs_are_names_the_package_reads(path, k):
    names = _C.compiled_configs(path, k)
    assert isinstance(names, list) and all(isinstance(n, str) for n in names)
    assert len(set(names)) == len(names)
    for name in names:
        config = paths.from_name(name)
        assert isinstance(config, GemmConfig) and config.path == path
        assert config.name == config.kernel_name == name  # unsplit
        assert (config.split_k, config.split_k_mode) == (1, "none")
    if k[2] not in paths.PATHS[path].layouts:
        assert names == []


def test_the_sm90_path_reads_only_its_layout():
    for act in ACTS:
        for bits in BITS:
            assert _C.compiled_configs("sm90", key(act, bits, "sm80")) == []
            assert bool(_C.compiled_configs("sm90", key(act, bits, "sm90"))) == _C.sm90_available()


@pytest.mark.parametrize("act", ACTS)
@pytest.mark.parametrize("bits", BITS)
def test_the_sm80_and_decode_paths_are_built_for_every_type_width_and_layout(act, bits):
    for layout in LAYOUTS:
        assert _C.compiled_configs("sm80", key(act, bits, layout)), layout
        assert _C.compiled_configs("decode", key(act, bits, layout)), layout
    # The sm80 path reads sm90-layout weights with some of its sm80-layout tiles only.
    assert set(_C.compiled_configs("sm80", key(act, bits, "sm90"))) <= set(_C.compiled_configs("sm80", key(act, bits)))


@pytest.mark.parametrize("act", ACTS)
@pytest.mark.parametrize("bits", BITS)
@pytest.mark.parametrize("layout", LAYOUTS + (None,))
@pytest.mark.parametrize("path", BOUND_PATHS + ("dequant", None))
def test_compiled_configs_match_the_registry(act, bits, layout, path):
    # mixgemm.compiled_configs lists the scale+offset kernels, in the registry's order, per layout (sm80 first)
    # and once each; the dequant path's one config is compiled for every key.
    configs = mixgemm.compiled_configs(DTYPES[act], bits, path=path, layout=layout)
    expected = []
    for layout_name in (LAYOUTS if layout is None else (layout,)):
        for p in (tuple(paths.PATHS) if path is None else (path,)):
            names = ["dequant_cublas"] if p == "dequant" else _C.compiled_configs(p, key(act, bits, layout_name))
            expected += [(p, n) for n in names if (p, n) not in expected]
    assert [(c.path, c.kernel_name) for c in configs] == expected
    assert all(isinstance(c, GemmConfig) and c.split_k == 1 and c.split_k_mode == "none" for c in configs)


@pytest.mark.parametrize("dtype, act", [(torch.float16, "fp16"), (torch.bfloat16, "bf16")])
def test_compiled_sm80_configs(dtype, act):
    configs = mixgemm.compiled_configs(dtype)
    assert configs and all(isinstance(c, mixgemm.Sm80Config) for c in configs)
    assert [c.kernel_name for c in configs] == _C.compiled_configs("sm80", key(act))
    assert len({c.kernel_name for c in configs}) == len(configs)
    assert all(c.tile_k == 64 and c.warp_k == 64 for c in configs)


def test_compiled_configs_default_is_float16_int4_sm80_path():
    assert mixgemm.compiled_configs() == mixgemm.compiled_configs(torch.float16, 4, path="sm80", layout=None)
    assert mixgemm.compiled_configs(path="dequant", layout="sm90") == [DequantConfig()]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.int8, torch.float8_e4m3fn])
def test_compiled_configs_rejects_other_dtypes(dtype):
    with pytest.raises(ValueError, match=r"^compiled_configs: .*dtype must be float16 or bfloat16"):
        mixgemm.compiled_configs(dtype)


@pytest.mark.parametrize("path", BOUND_PATHS)
@pytest.mark.parametrize("act", ACTS)
@pytest.mark.parametrize("bits", BITS)
def test_a_scale_only_weight_also_runs_the_scale_offset_kernels(path, act, bits):
    scale_only = KernelKey(act, bits, "sm90", "scale")
    names = [c.kernel_name for c in paths.PATHS[path].compiled(scale_only)]
    own = _C.compiled_configs(path, scale_only.as_tuple())
    fallback = _C.compiled_configs(path, scale_only.with_quant("scale_offset").as_tuple())
    assert names == own + [n for n in fallback if n not in own]


@pytest.mark.parametrize("bad, pattern", [
    (("fp32", 4, "sm80", "scale_offset", "none"), r"^kernel key: activation type must be 'fp16' or 'bf16', got 'fp32'"),
    (("fp16", 3, "sm80", "scale_offset", "none"), r"^kernel key: weight bits must be 4 or 8"),
    (("fp16", 4, "sm70", "scale_offset", "none"), r"^kernel key: layout must be 'sm80' or 'sm90', got 'sm70'"),
    (("fp16", 4, "sm80", "offset", "none"), r"^kernel key: quant must be 'scale' or 'scale_offset', got 'offset'"),
    (("fp16", 4, "sm80", "scale_offset", "per_token"), r"^kernel key: act_scale must be 'none', got 'per_token'"),
])
def test_key_rules(bad, pattern):
    for path in BOUND_PATHS:
        with pytest.raises(ValueError, match=pattern):
            _C.compiled_configs(path, bad)
    with pytest.raises(ValueError, match=pattern):
        _C.prepare("sm80", sm80_config(), bad, 4, 128, 256, 128)


@pytest.mark.parametrize("path", ["gemv", "dequant", "", "SM80"])
def test_unknown_path(path):
    with pytest.raises(ValueError, match=rf"^unknown kernel path '{path}'$"):
        _C.compiled_configs(path, key())
    with pytest.raises(ValueError, match=rf"^unknown kernel path '{path}'$"):
        _C.prepare(path, sm80_config(), key(), 4, 128, 256, 128)


def test_the_key_names_the_python_key():
    # The binding's key tuple is KernelKey.as_tuple.
    for k in EVERY_KEY:
        assert KernelKey(*k).as_tuple() == k


# ---------------------------------------------------------------------------------------------------
# prepare: config names (ValueError before any GPU)
# ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("path, name", [
    ("sm80", "32x32x64_w16x16x64_s7"),
    ("sm80", "decode_m8_w4"),  # another path's name
    ("sm80", "16x128x64_w16x32x64_s4_k2s"),  # a config's name with its split: prepare takes the kernel's name
    ("decode", "decode_m32_w4"),
    ("decode", "16x128x64_w16x32x64_s4"),
    ("sm90", "sm90_64x64x64_c1x1_coop_persistent"),
])
def test_uncompiled_config_name(path, name):
    layout = "sm90" if path == "sm90" else "sm80"
    with pytest.raises(ValueError, match=rf"^gemm \({path} path\): config {name} is not compiled into this build "
                                         rf"for fp16-int4-{layout}-scale_offset$"):
        _C.prepare(path, name, key(layout=layout), 4, 128, 256, 128)


@pytest.mark.parametrize("path", BOUND_PATHS)
def test_a_config_compiled_for_one_key_only_is_checked_per_key(path):
    # Names compiled for one key are refused for another that lacks them (e.g. the sm80 tiles that the sm90
    # layout does not get, the sm90 stream-K kernel built for fp16 x int4 only, scale-only kernels).
    checked = 0
    for a in EVERY_KEY:
        for b in EVERY_KEY:
            for name in set(_C.compiled_configs(path, a)) - set(_C.compiled_configs(path, b)):
                with pytest.raises(ValueError, match=rf"config {name} is not compiled into this build for"):
                    _C.prepare(path, name, b, 4, 128, 256, 128)
                checked += 1
    assert checked > 0


# ---------------------------------------------------------------------------------------------------
# sm80 path: can_implement (ValueError) before the device check
# ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("k", [k for k in EVERY_KEY if k[3] == "scale_offset"], ids=lambda k: "-".join(map(str, k[:3])))
@pytest.mark.parametrize("split_k, mode", [(1, "none"), (2, "serial"), (4, "parallel"), (1, "streamk"), (3, "streamk")])
def test_sm80_valid_call_needs_a_device(k, split_k, mode):
    require_no_gpu()
    for name in _C.compiled_configs("sm80", k):
        launch = prepare("sm80", name, k, split_k=split_k, mode=mode)
        assert name in repr(launch) and f"split_k={split_k}" in repr(launch)
        with pytest.raises(RuntimeError, match=NO_GPU):
            call(launch)


@pytest.mark.parametrize("K", [100, 32, 0, 96])
def test_sm80_k_must_be_a_multiple_of_64(K):
    with pytest.raises(ValueError, match=rf"^gemm \(sm80 path\): K must be a positive multiple of 64 \(the main "
                                         rf"loop's 64-deep k-tile\), got {K}$"):
        prepare(K=K, group_size=64 if K else 32)


@pytest.mark.parametrize(
    "overrides, pattern",
    [
        (dict(M=0), r"M \(rows of x\) must be >= 1"),
        (dict(M=-3), r"M \(rows of x\) must be >= 1"),
        (dict(N=96), r"N must be a positive multiple of 64 \(the sm80 layout's 64-column strip\), got 96"),
        (dict(N=0), r"N must be a positive multiple of 64"),
        (dict(group_size=16), r"group_size must be a multiple of 32 that divides K \(.*\), got 16"),
        (dict(group_size=48), r"group_size must be a multiple of 32 that divides K"),
        (dict(group_size=192), r"group_size must be a multiple of 32 that divides K"),
        (dict(split_k=5, mode="serial"), r"split_k must be in \[1, K / 64 = 4\]"),
        (dict(split_k=0, mode="none"), r"split_k must be in \[1, K / 64 = 4\]"),
        (dict(split_k=2, mode="none"), r"split_k > 1 needs split_k_mode 'serial' or 'parallel'"),
        (dict(split_k=1, mode="serial"),
         r"split_k > 1 needs split_k_mode 'serial' or 'parallel', and split_k == 1 needs 'none'"),
        (dict(split_k=0, mode="streamk"), STREAM_K_BLOCKS_RULE),
        (dict(split_k=10**6, mode="streamk"), STREAM_K_BLOCKS_RULE),
        (dict(split_k=2, mode="reduce_scatter"),
         r"split_k_mode 'reduce_scatter' is the sm90 path's; this path splits K 'serial' or 'parallel'"),
    ],
)
def test_sm80_rules(overrides, pattern):
    with pytest.raises(ValueError, match=rf"^gemm \(sm80 path\): {pattern}"):
        prepare(**overrides)


def test_sm80_stream_k_blocks_are_at_most_the_units():
    for name in _C.compiled_configs("sm80", key()):
        units = paths.from_name(name).stream_k_units(4, 128, 256)
        require_no_gpu()
        with pytest.raises(RuntimeError, match=NO_GPU):
            call(prepare("sm80", name, split_k=units, mode="streamk"))
        with pytest.raises(ValueError, match=rf"^gemm \(sm80 path\): stream-K: split_k \(the blocks\) must be in "
                                             rf"\[1, the units of work = {units}\]$"):
            prepare("sm80", name, split_k=units + 1, mode="streamk")


def test_sm80_rules_on_the_sm90_layout():
    # Its own layout's rule: 16-column blocks, so N = 80 is not a multiple of 64 yet is taken.
    k = key(layout="sm90")
    name = _C.compiled_configs("sm80", k)[0]
    require_no_gpu()
    with pytest.raises(RuntimeError, match=NO_GPU):
        call(prepare("sm80", name, k, N=80))
    with pytest.raises(ValueError, match=r"^gemm \(sm80 path\): N must be a positive multiple of 16 \(the sm90 "
                                         r"layout's 16-column block\), got 72$"):
        prepare("sm80", name, k, N=72)


@pytest.mark.parametrize("mode", ["stream-k", "fast", "", "Serial"])
def test_split_mode_names(mode):
    for path in BOUND_PATHS:
        with pytest.raises(ValueError, match=rf"^gemm: split_k_mode must be 'none', 'serial', 'parallel', 'streamk' or "
                                             rf"'reduce_scatter', got '{mode}'$"):
            _C.prepare(path, "any", key(), 4, 128, 256, 128, 2, mode)


@pytest.mark.parametrize(
    "split, overrides, pattern",
    [
        ((3, "streamk"), dict(semaphores=0), r"serial split-K and stream-K need a semaphore buffer"),
        ((1, "none"), dict(x=0), r"x, packed weight, scales, offsets and output pointers must be non-null"),
        ((1, "none"), dict(out=0), r"x, packed weight, scales, offsets and output pointers must be non-null"),
        ((1, "none"), dict(offsets=0), r"x, packed weight, scales, offsets and output pointers must be non-null"),
        ((1, "none"), dict(scales=ADDR[2] + 8), r"x, packed weight, scales and offsets must be 16-byte aligned"),
        ((1, "none"), dict(x=ADDR[0] + 4), r"x, packed weight, scales and offsets must be 16-byte aligned"),
        ((1, "none"), dict(bias=ADDR[7] + 2), r"output and bias must be 4-byte aligned"),
        ((2, "parallel"), dict(workspace=0), r"this split-K mode needs a 16-byte aligned fp32 workspace"),
        ((2, "serial"), dict(workspace=ADDR[5] + 4), r"this split-K mode needs a 16-byte aligned fp32 workspace"),
        ((2, "serial"), dict(semaphores=0), r"serial split-K and stream-K need a semaphore buffer"),
    ],
)
def test_sm80_call_rules(split, overrides, pattern):
    launch = prepare(split_k=split[0], mode=split[1])
    with pytest.raises(ValueError, match=rf"^gemm \(sm80 path\): {pattern}"):
        call(launch, **overrides)


def test_sm80_calls_without_scratch_need_none():
    # Data-parallel and parallel split-K need no semaphores; data-parallel no workspace either.
    require_no_gpu()
    with pytest.raises(RuntimeError, match=NO_GPU):
        call(prepare(), workspace=0, semaphores=0, bias=ADDR[7])
    with pytest.raises(RuntimeError, match=NO_GPU):
        call(prepare(split_k=2, mode="parallel"), semaphores=0)


# ---------------------------------------------------------------------------------------------------
# PreparedLaunch.workspace_bytes / semaphores (the scratch a call must pass)
# ---------------------------------------------------------------------------------------------------


def tile_of(name):
    config = paths.from_name(name)
    return config.tile_m, config.tile_n


@pytest.mark.parametrize("M, N", [(1, 64), (5, 192), (16, 128), (17, 4096), (4096, 28672), (300, 192)])
@pytest.mark.parametrize("split_k", [2, 3, 16])
def test_sm80_split_k_scratch(M, N, split_k):
    K = 16 * 64
    for name in _C.compiled_configs("sm80", key()):
        tile_m, tile_n = tile_of(name)
        # Serial keeps a whole-tile fp32 slot per split and output tile, and one arrival counter per tile;
        # parallel one M x N fp32 partial per split.
        tiles = math.ceil(M / tile_m) * math.ceil(N / tile_n)
        serial = prepare("sm80", name, M=M, N=N, K=K, split_k=split_k, mode="serial")
        assert (serial.workspace_bytes, serial.semaphores) == (4 * split_k * tiles * tile_m * tile_n, tiles)
        parallel = prepare("sm80", name, M=M, N=N, K=K, split_k=split_k, mode="parallel")
        assert (parallel.workspace_bytes, parallel.semaphores) == (4 * split_k * M * N, 0)
        none = prepare("sm80", name, M=M, N=N, K=K)
        assert (none.workspace_bytes, none.semaphores) == (0, 0)


@pytest.mark.parametrize("M, N, K", [(1, 64, 1024), (16, 4096, 4096), (300, 192, 256), (4096, 28672, 8192)])
@pytest.mark.parametrize("blocks", [1, 2, 7, 264])
def test_sm80_stream_k_scratch(M, N, K, blocks):
    for name in _C.compiled_configs("sm80", key()):
        tile_m, tile_n = tile_of(name)
        tiles = math.ceil(M / tile_m) * math.ceil(N / tile_n)
        if blocks > tiles * (K // 64):
            continue  # more blocks than units of work: refused (test_sm80_rules)
        launch = prepare("sm80", name, M=M, N=N, K=K, split_k=blocks, mode="streamk")
        # Two one-tile fp32 slots per block, one counter per output tile.
        assert (launch.workspace_bytes, launch.semaphores) == (4 * 2 * blocks * tile_m * tile_n, tiles)
        assert paths.from_name(name).stream_k_units(M, N, K) == tiles * (K // 64)


def test_scratch_sizes_have_no_int32_overflow():
    name = sm80_config()
    tile_m, tile_n = tile_of(name)
    M, N = 65536, 65536
    assert prepare("sm80", name, M=M, N=N, K=1024, split_k=16, mode="parallel").workspace_bytes == 4 * 16 * M * N
    assert prepare("sm80", name, M=M, N=N, K=1024, split_k=2, mode="serial").workspace_bytes == 4 * 2 * M * N
    tiles = -(-M // tile_m) * -(-N // tile_n)
    streamk = prepare("sm80", name, M=M, N=N, K=64, group_size=64, split_k=7, mode="streamk")
    assert (streamk.workspace_bytes, streamk.semaphores) == (4 * 2 * 7 * tile_m * tile_n, tiles)
    decode = prepare("decode", "decode_m16_w4", M=16, N=N, K=65536, split_k=1024, mode="serial")
    assert (decode.workspace_bytes, decode.semaphores) == (4 * 1024 * 16 * N, N // 64)


@pytest.mark.parametrize("M", [1, 3, 8])
@pytest.mark.parametrize("N", [64, 192, 4096])
@pytest.mark.parametrize("split_k", [1, 2, 4, 16])
def test_decode_scratch(M, N, split_k):
    K = 16 * 64
    for name in _C.compiled_configs("decode", key()):
        launch = prepare("decode", name, M=M, N=N, K=K, split_k=split_k, mode="none" if split_k == 1 else "serial")
        if split_k == 1:
            assert (launch.workspace_bytes, launch.semaphores) == (0, 0)
        else:
            # One fp32 partial per split; one arrival counter per 64-column strip.
            assert (launch.workspace_bytes, launch.semaphores) == (4 * split_k * M * N, N // 64)


# ---------------------------------------------------------------------------------------------------
# decode path
# ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("k", [k for k in EVERY_KEY if k[3] == "scale_offset"], ids=lambda k: "-".join(map(str, k[:3])))
@pytest.mark.parametrize("split_k", [1, 2, 4])
def test_decode_valid_call_needs_a_device(k, split_k):
    require_no_gpu()
    for name in _C.compiled_configs("decode", k):
        rows = paths.from_name(name).rows
        for M in (1, rows):
            for group_size in (32, 64, 128, 256):  # every fold of the scales
                launch = prepare("decode", name, k, M=M, group_size=group_size, split_k=split_k,
                                 mode="none" if split_k == 1 else "serial")
                with pytest.raises(RuntimeError, match=NO_GPU):
                    call(launch)


@pytest.mark.parametrize(
    "overrides, pattern",
    [
        (dict(M=0), r"M \(rows of x\) must be in \[1, 8\] for decode_m8_w4, got 0"),
        (dict(M=9), r"M \(rows of x\) must be in \[1, 8\] for decode_m8_w4, got 9"),
        (dict(config="decode_m16_w4", M=17), r"M \(rows of x\) must be in \[1, 16\] for decode_m16_w4, got 17"),
        (dict(N=96), r"N must be a positive multiple of 64 \(a block's 64-column strip\), got 96"),
        (dict(K=96, group_size=32), r"K must be a positive multiple of 64 \(the 64-deep k-batch\), got 96"),
        (dict(group_size=16), r"group_size must be a multiple of 32 that divides K \(the 32-row scale fold\), got 16"),
        (dict(group_size=48), r"group_size must be a multiple of 32 that divides K"),
        (dict(split_k=5, mode="serial"), r"split_k must be in \[1, K / 64 = 4\]"),
        (dict(split_k=0, mode="none"), r"split_k must be in \[1, K / 64 = 4\]"),
        (dict(split_k=2, mode="parallel"), r"split_k == 1 needs split_k_mode 'none' and split_k > 1 needs 'serial'"),
        (dict(split_k=2, mode="streamk"), r"split_k == 1 needs split_k_mode 'none' and split_k > 1 needs 'serial'"),
        (dict(split_k=2, mode="reduce_scatter"),
         r"split_k == 1 needs split_k_mode 'none' and split_k > 1 needs 'serial'"),
        (dict(split_k=2, mode="none"), r"split_k == 1 needs split_k_mode 'none'"),
        (dict(split_k=1, mode="serial"), r"split_k == 1 needs split_k_mode 'none'"),
    ],
)
def test_decode_rules(overrides, pattern):
    with pytest.raises(ValueError, match=rf"^gemm \(decode path\): {pattern}"):
        prepare("decode", **overrides)


@pytest.mark.parametrize(
    "split, overrides, pattern",
    [
        (1, dict(x=0), r"x, packed weight, scales, offsets and output pointers must be non-null"),
        (1, dict(scales=0), r"x, packed weight, scales, offsets and output pointers must be non-null"),
        (1, dict(x=ADDR[0] + 2), r"x must be 4-byte aligned and the packed weight 16-byte aligned"),
        (1, dict(packed=ADDR[1] + 8), r"x must be 4-byte aligned and the packed weight 16-byte aligned"),
        (1, dict(out=ADDR[4] + 1), r"output and bias must be 2-byte aligned"),
        (1, dict(bias=ADDR[7] + 1), r"output and bias must be 2-byte aligned"),
        (2, dict(workspace=0), r"split_k > 1 needs the fp32 workspace and the semaphore buffer"),
        (2, dict(semaphores=0), r"split_k > 1 needs the fp32 workspace and the semaphore buffer"),
    ],
)
def test_decode_call_rules(split, overrides, pattern):
    launch = prepare("decode", split_k=split, mode="none" if split == 1 else "serial")
    with pytest.raises(ValueError, match=rf"^gemm \(decode path\): {pattern}"):
        call(launch, **overrides)


def test_decode_takes_what_its_rules_allow():
    # Its pointer rules are looser than the sm80 path's: x in 4-byte pairs, elements of 2 bytes.
    require_no_gpu()
    with pytest.raises(RuntimeError, match=NO_GPU):
        call(prepare("decode"), x=ADDR[0] + 4, scales=ADDR[2] + 2, out=ADDR[4] + 2, workspace=0, semaphores=0)


# ---------------------------------------------------------------------------------------------------
# sm90 path: its rules, then (prepare itself) the device
# ---------------------------------------------------------------------------------------------------


SM90_KEY = key(layout="sm90")


@needs_sm90
@pytest.mark.parametrize("k", [k for k in EVERY_KEY if k[2] == "sm90"], ids=lambda k: "-".join(map(str, k[:4])))
def test_sm90_valid_prepare_needs_a_device(k):
    require_no_gpu()
    for name in _C.compiled_configs("sm90", k):
        splits = [(1, "none")] + ([(2, "serial"), (3, "reduce_scatter")] if name.endswith("_streamk") else [])
        for split_k, mode in splits:
            for group_size in (64, 128, 256):  # K itself: per-channel
                with pytest.raises(RuntimeError, match=NO_GPU):
                    prepare("sm90", name, k, group_size=group_size, split_k=split_k, mode=mode)


def sm90_config(scheduler):
    """A compiled fp16 x int4 sm90 config of ``scheduler`` (its name, its tile_n), or None."""
    for name in _C.compiled_configs("sm90", SM90_KEY):
        config = paths.from_name(name)
        if config.scheduler == scheduler:
            return name, config.tile_n
    return None


@needs_sm90
@pytest.mark.parametrize(
    "overrides, pattern",
    [
        (dict(M=0), r"M \(rows of x\) must be >= 1"),
        (dict(N="tile_n + 32"), r"N must be a positive multiple of {tile_n} \(the config's weight tile: 64 or 128 "
                                r"columns\), got {N}"),
        (dict(N=0), r"N must be a positive multiple of {tile_n}"),
        (dict(K=96, group_size=96), r"K must be a positive multiple of 64 \(the 64-deep k-tile\), got 96"),
        (dict(group_size=32), r"group_size must be a multiple of 64 that divides K or K itself \(.*\), got 32"),
        (dict(group_size=192), r"group_size must be a multiple of 64 that divides K or K itself"),
        (dict(split_k=5, mode="serial"), r"split_k must be between 1 and K / 64 \(whole k-tiles per split\), got 5"),
        (dict(split_k=0, mode="none"), r"split_k must be between 1 and K / 64"),
        (dict(split_k=1, mode="serial"), r"split_k == 1 needs split_k_mode 'none' and split_k > 1 'serial'"),
        (dict(split_k=2, mode="parallel"),
         r"split_k == 1 needs split_k_mode 'none' and split_k > 1 'serial' or 'reduce_scatter'"),
        (dict(split_k=1, mode="reduce_scatter"), r"split_k == 1 needs split_k_mode 'none'"),
        (dict(split_k=2, mode="scatter"), None),  # not a mode at all: the binding's own message
    ],
)
@pytest.mark.parametrize("scheduler", ["persistent", "streamk"])
def test_sm90_rules(overrides, pattern, scheduler):
    found = sm90_config(scheduler)
    if found is None:
        pytest.skip(f"no {scheduler} sm90 config compiled for fp16 x int4")
    name, tile_n = found
    if overrides.get("N") == "tile_n + 32":  # a multiple of 16 that no weight tile divides
        overrides = dict(overrides, N=tile_n + 32)
    if pattern is None:
        with pytest.raises(ValueError, match=r"^gemm: split_k_mode must be 'none', 'serial', 'parallel', 'streamk' or "
                                             r"'reduce_scatter', got 'scatter'"):
            prepare("sm90", name, SM90_KEY, **overrides)
        return
    pattern = pattern.format(tile_n=tile_n, N=overrides.get("N"))
    with pytest.raises(ValueError, match=rf"^gemm \(sm90 path\): {pattern}"):
        prepare("sm90", name, SM90_KEY, **overrides)


@needs_sm90
def test_sm90_splits_only_with_its_stream_k_scheduler():
    found = sm90_config("persistent")
    if found is None:
        pytest.skip("no persistent sm90 config compiled for fp16 x int4")
    with pytest.raises(ValueError, match=rf"^gemm \(sm90 path\): split_k > 1 needs a stream-K config \(its "
                                         rf"scheduler does the split\), got {found[0]}$"):
        prepare("sm90", found[0], SM90_KEY, split_k=2, mode="serial")
    streamk = sm90_config("streamk")
    if streamk is not None:
        require_no_gpu()
        with pytest.raises(RuntimeError, match=NO_GPU):
            prepare("sm90", streamk[0], SM90_KEY, split_k=2, mode="serial")


@pytest.mark.skipif(_C.sm90_available(), reason="this build has the sm90 kernels")
def test_sm90_unavailable():
    assert all(_C.compiled_configs("sm90", k) == [] for k in EVERY_KEY)
    with pytest.raises(ValueError, match=r"is not compiled into this build"):
        prepare("sm90", "sm90_128x128x64_c1x1_coop_persistent", SM90_KEY)


# ---------------------------------------------------------------------------------------------------
# dequantize_packed, awq_dequantize: rules (ValueError) before the device check (RuntimeError)
# ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("act", ACTS)
@pytest.mark.parametrize("bits", BITS)
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("N, K, group_size", [(64, 16, 16), (128, 80, 16), (64, 4096, 128), (192, 96, 96)])
def test_dequantize_packed_needs_a_device(act, bits, layout, N, K, group_size):
    require_no_gpu()
    with pytest.raises(RuntimeError, match=NO_GPU):
        _C.dequantize_packed(key(act, bits, layout), *ADDR[:4], N, K, group_size, 0)


@pytest.mark.parametrize(
    "N, K, group_size, pointers, pattern",
    [
        (96, 64, 64, ADDR[:4], r"N must be a positive multiple of 64 \(the 64-column strip the expansion walks\), "
                               r"got 96"),
        (0, 64, 64, ADDR[:4], r"N must be a positive multiple of 64"),
        (64, 40, 8, ADDR[:4], r"K must be a positive multiple of 16 \(the 16-deep slab\), got 40"),
        (64, 0, 16, ADDR[:4], r"K must be a positive multiple of 16"),
        (64, 64, 8, ADDR[:4], r"group_size must be a multiple of 16 that divides K \(.*\), got 8"),
        (64, 64, 48, ADDR[:4], r"group_size must be a multiple of 16 that divides K"),
        (64, 64, 64, (0,) + tuple(ADDR[1:4]), r"every pointer must be non-null"),
        (64, 64, 64, tuple(ADDR[:3]) + (0,), r"every pointer must be non-null"),
        (64, 64, 64, (ADDR[0] + 4,) + tuple(ADDR[1:4]), r"packed must be 16-byte, out 4-byte and scales, offsets "
                                                        r"2-byte aligned"),
        (64, 64, 64, tuple(ADDR[:3]) + (ADDR[3] + 2,), r"packed must be 16-byte, out 4-byte"),
        (64, 64, 64, (ADDR[0], ADDR[1] + 1, ADDR[2], ADDR[3]), r"packed must be 16-byte, out 4-byte"),
    ],
)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_dequantize_packed_rules(N, K, group_size, pointers, pattern, layout):
    packed, scales, offsets, out = pointers
    with pytest.raises(ValueError, match=rf"^dequantize_packed: {pattern}"):
        _C.dequantize_packed(key(layout=layout), packed, scales, offsets, out, N, K, group_size, 0)


def test_dequantize_packed_key_rules():
    with pytest.raises(ValueError, match=r"^kernel key: weight bits must be 4 or 8"):
        _C.dequantize_packed(("fp16", 2, "sm80", "scale_offset", "none"), *ADDR[:4], 64, 64, 64, 0)


@pytest.mark.parametrize("act", ACTS)
@pytest.mark.parametrize("K, N, group_size", [(64, 64, 64), (1, 8, 1), (128, 24, 32)])
def test_awq_dequantize_needs_a_device(act, K, N, group_size):
    require_no_gpu()
    with pytest.raises(RuntimeError, match=NO_GPU):
        _C.awq_dequantize(0, 0, 0, 0, K, N, group_size, act, 0)


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
        _C.awq_dequantize(*pointers, K, N, group_size, "fp16", 0)


@pytest.mark.parametrize("act", ["fp32", "half", "", "FP16"])
def test_activation_type_names(act):
    with pytest.raises(ValueError, match=rf"^activation type must be 'fp16' or 'bf16', got '{act}'$"):
        _C.awq_dequantize(0, 0, 0, 0, 64, 64, 64, act, 0)
    with pytest.raises(ValueError, match=rf"^activation type must be 'fp16' or 'bf16', got '{act}'$"):
        _C.fold_awq_zeros(ADDR[0], ADDR[1], ADDR[2], 2, 64, act, 0)


# ---------------------------------------------------------------------------------------------------
# prepack entries
# ---------------------------------------------------------------------------------------------------


def test_prepack_awq_qweight_rules_then_device():
    with pytest.raises(ValueError, match=r"K must be a positive multiple of 16 \(got K=40\)"):
        _C.prepack_awq_qweight(ADDR[0], ADDR[1], 40, 64, 0)
    with pytest.raises(ValueError, match=r"N must be a positive multiple of 64 \(got N=72\)"):
        _C.prepack_awq_qweight(ADDR[0], ADDR[1], 64, 72, 0)
    with pytest.raises(ValueError, match=r"awq_qweight must be a device pointer"):
        _C.prepack_awq_qweight(0, ADDR[1], 64, 64, 0)
    with pytest.raises(ValueError, match=r"packed must be a device pointer"):
        _C.prepack_awq_qweight(ADDR[0], 0, 64, 64, 0)
    with pytest.raises(ValueError, match=r"packed must not overlap awq_qweight"):
        _C.prepack_awq_qweight(ADDR[0], ADDR[0] + 64, 64, 64, 0)
    require_no_gpu()
    with pytest.raises(RuntimeError, match=NO_GPU):
        _C.prepack_awq_qweight(ADDR[0], ADDR[1], 64, 64, 0)


@pytest.mark.parametrize("act", ACTS)
def test_fold_awq_zeros_rules_then_device(act):
    with pytest.raises(ValueError, match=r"groups \(= K / group_size\) must be positive \(got groups=0\)"):
        _C.fold_awq_zeros(ADDR[0], ADDR[1], ADDR[2], 0, 64, act, 0)
    with pytest.raises(ValueError, match=r"N must be a positive multiple of 8 \(AWQ packing\) \(got N=12\)"):
        _C.fold_awq_zeros(ADDR[0], ADDR[1], ADDR[2], 2, 12, act, 0)
    for pointers, name in [((0, ADDR[1], ADDR[2]), "awq_qzeros"), ((ADDR[0], 0, ADDR[2]), "scales"),
                           ((ADDR[0], ADDR[1], 0), "offsets")]:
        with pytest.raises(ValueError, match=rf"{name} must be a device pointer"):
            _C.fold_awq_zeros(*pointers, 2, 64, act, 0)
    require_no_gpu()
    with pytest.raises(RuntimeError, match=NO_GPU):
        _C.fold_awq_zeros(ADDR[0], ADDR[1], ADDR[2], 2, 64, act, 0)


# ---------------------------------------------------------------------------------------------------
# _C.peers: the profiler's yardsticks
# ---------------------------------------------------------------------------------------------------


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
def test_awq_gemm_baseline_rules(M, N, K, group_size, split, pattern):
    with pytest.raises(ValueError, match=rf"^awq_gemm: {pattern}"):
        _C.peers.awq_gemm_baseline(*ADDR[:5], M, N, K, group_size, split, 0)


@pytest.mark.parametrize(
    "pointers, pattern",
    [
        ((ADDR[0] + 8, *ADDR[1:5]), r"x must be 16-byte aligned"),
        ((ADDR[0], ADDR[1], ADDR[2] + 8, *ADDR[3:5]), r"scales must be 16-byte aligned"),
        ((ADDR[0], ADDR[1] + 2, *ADDR[2:5]), r"qweight and qzeros must be 4-byte aligned"),
        ((*ADDR[:4], ADDR[4] + 2), r"partials must be 4-byte aligned"),
    ],
)
def test_awq_gemm_baseline_alignment(pointers, pattern):
    with pytest.raises(ValueError, match=rf"^awq_gemm: {pattern}"):
        _C.peers.awq_gemm_baseline(*pointers, 4, 64, 64, 64, 1, 0)
    # M = 0: the shape rules hold, nothing is read or launched, so neither the pointers nor a device matter.
    assert _C.peers.awq_gemm_baseline(*pointers, 0, 64, 64, 64, 1, 0) is None


@pytest.mark.parametrize(
    "M, N, K, pointers, pattern",
    [
        (0, 64, 64, ADDR[:3], r"M \(rows of A and D\) must be >= 1, got 0"),
        (4, 12, 64, ADDR[:3], r"N must be a positive multiple of 8 \(16-byte rows of B and D\), got 12"),
        (4, 0, 64, ADDR[:3], r"N must be a positive multiple of 8"),
        (4, 64, 4, ADDR[:3], r"K must be a positive multiple of 8 \(16-byte rows of A\), got 4"),
        (4, 64, 64, (0, ADDR[1], ADDR[2]), r"A, B and D must be non-null device pointers"),
        (4, 64, 64, (ADDR[0], ADDR[1], ADDR[2] + 8), r"A, B and D must be 16-byte aligned"),
    ],
)
def test_cutlass2_fp16_rules(M, N, K, pointers, pattern):
    with pytest.raises(ValueError, match=rf"^cutlass2_fp16: {pattern}"):
        _C.peers.cutlass2_fp16_gemm(*pointers, M, N, K, 0)


@pytest.mark.parametrize(
    "buffers, folded, pattern",
    [
        ([], ADDR[7], r"1 to 3 buffers, got 0"),
        ([(ADDR[i], 16) for i in range(4)], ADDR[7], r"1 to 3 buffers, got 4"),
        ([(0, 16)], ADDR[7], r"buffer 0 must be non-null, 16-byte aligned and a positive multiple of 16 bytes"),
        ([(ADDR[0], 16), (ADDR[1] + 8, 16)], ADDR[7], r"buffer 1 must be non-null, 16-byte aligned"),
        ([(ADDR[0], 24)], ADDR[7], r"buffer 0 must be .* a positive multiple of 16 bytes, got 24 bytes"),
        ([(ADDR[0], 0)], ADDR[7], r"buffer 0 must be .*, got 0 bytes"),
        ([(ADDR[0], 16)], 0, r"folded \(the blocks' xor, kReadFloorMaxBlocks words\) must be non-null"),
    ],
)
def test_read_floor_rules(buffers, folded, pattern):
    with pytest.raises(ValueError, match=rf"^read_floor: {pattern}"):
        _C.peers.read_floor(buffers, folded, 0)


@pytest.mark.parametrize(
    "name, args",
    [
        ("awq_gemm_baseline", (*ADDR[:5], 4, 64, 64, 64, 1, 0)),
        ("cutlass2_fp16_gemm", (*ADDR[:3], 4, 64, 64, 0)),
        ("read_floor", ([(ADDR[0], 16), (ADDR[1], 1 << 20), (ADDR[2], 32)], ADDR[7], 0)),
    ],
)
def test_peers_fail_without_a_device(name, args):
    # Valid arguments, no GPU: every entry checks for a device before launching.
    require_no_gpu()
    with pytest.raises(RuntimeError, match=NO_GPU):
        getattr(_C.peers, name)(*args)
