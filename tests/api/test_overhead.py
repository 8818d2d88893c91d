"""CPU tests of the eager fast path (issue 9): after warm-up a gemm call reads no file, queries no device
property and resolves no config, yet every bad argument still gets its ValueError, a replaced weight field
is validated again, and a tune run in the process is seen by the next call.

The machinery: ops keeps a validation memo per weight (``ops._WeightState``) and plans per shape (``ops._plans``:
``paths.base.KernelPlan``, the extension's prepared launch and its scratch sizes), ``mixgemm.device`` the facts of
each GPU, ``mixgemm.workspace`` the scratch per (device, stream), and ``mixgemm.tuning_cache`` the tuned choices
by ``KernelKey``.

No GPU is needed: as in test_validation.py the entry points take CPU tensors for device ones, and here the
extension reports one sm_90 GPU whose queries are counted and whose prepared launches (the sm80, decode and sm90
paths alike, ``_C.prepare``) only record their arguments. The build's registry is a hand-made one
(``paths.base._compiled_configs`` replaced), so what runs does not depend on the kernels this build compiled.
"""

from __future__ import annotations

import builtins
import math
import os
import pathlib
from collections import Counter
from types import SimpleNamespace

import pytest
import torch

import mixgemm
import mixgemm._C as _C
from mixgemm import _checks, device, library, ops, packing, tuning_cache, workspace
from mixgemm.kernel_key import KernelKey
from mixgemm.nn import QuantLinear
from mixgemm.paths import PATHS, DecodeConfig, Sm80Config, Sm90Config, base

F16, BF16, I32 = torch.float16, torch.bfloat16, torch.int32
K, N, G = 256, 128, 64
GPU = "FakeGPU"
SM80_KEY, SM90_KEY = KernelKey(), KernelKey(layout="sm90")


def packed_weight(dtype=F16, perm=None) -> packing.PackedWeight:
    return packing.PackedWeight(
        torch.zeros(N // 64, K // 16, 32, 4, dtype=I32), torch.zeros(K // G, N, dtype=dtype),
        torch.zeros(K // G, N, dtype=dtype), G, 4, dtype, N, K, perm,
    )


def sm90_weight(dtype=F16, scale_only=False, perm=None) -> packing.PackedWeight:
    """A weight in the sm90 layout: packed int32 [K/16, N/16, 32, 1]."""
    return packing.PackedWeight(
        torch.zeros(K // 16, N // 16, 32, 1, dtype=I32), torch.zeros(K // G, N, dtype=dtype),
        torch.zeros(K // G, N, dtype=dtype), G, 4, dtype, N, K, perm, layout="sm90", scale_only=scale_only,
    )


# The build these tests pretend: sm80 tiles, two decode kernels, three sm90 kernels, and the quant modes
# compiled for each sm90 kernel (the 16-token one without the scale-only kernel).
SM90_16 = Sm90Config(16, 128, 1, 1, "coop", "streamk")
SM90_64 = Sm90Config(64, 128, 1, 1, "coop", "streamk")
SM90_128 = Sm90Config(128, 128, 1, 1, "coop", "persistent")
SM80_TILE = Sm80Config(16, 256, 64, 16, 64, 64, 3)
HAND_COMPILED = (SM80_TILE, Sm80Config(64, 128, 64, 32, 64, 64, 4), Sm80Config(128, 256, 64, 64, 64, 64, 3),
                 DecodeConfig(8, 4), DecodeConfig(16, 4), SM90_16, SM90_64, SM90_128)
SCALE_ONLY_KERNELS = (SM90_64.kernel_name, SM90_128.kernel_name)
SM90_FLAGS = 48  # the stream-K flag count the fake sizing reports
SM90_WORKSPACE = 4096


def hand_registry(configs=HAND_COMPILED, sm90_layout_tiles=(), scale_kernels=SCALE_ONLY_KERNELS):
    """A stand-in for ``paths.base._compiled_configs(path, key)``: the configs of ``path`` in ``configs`` compiled
    for ``key`` -- every one for a scale+offset key of a layout the path reads, but on the sm90 layout the sm80
    path's only for the kernels named in ``sm90_layout_tiles`` (the generator compiles a few small-M tiles for it),
    and for a scale-only key only the kernels named in ``scale_kernels``."""
    def compiled(path, key):
        return tuple(c for c in configs if c.path == path.name and key.layout in path.layouts
                     and (c.path != "sm80" or key.layout == "sm80" or c.kernel_name in sm90_layout_tiles)
                     and (key.quant != "scale" or c.kernel_name in scale_kernels))
    return compiled


def fake_scratch(path, config, M, N, split_k, mode):
    """(workspace bytes, semaphores) of a prepared launch, as the C++ paths size them: fp32 partials of every split
    (sm80 parallel, decode), a tile-sized slot per split and tile and a semaphore per tile (sm80 serial), two
    tile-sized slots per stream-K block and a semaphore per tile (sm80), a semaphore per 64-column strip (decode);
    the sm90 path's stream-K scratch is a fixed fake size (the real one is sized for the device's SMs).
    test_fake_scratch_is_the_real_prepares checks the first two against the extension."""
    if path == "sm90":
        return (SM90_WORKSPACE, SM90_FLAGS) if config.scheduler == "streamk" else (0, 0)
    if split_k == 1 and mode == "none":
        return 0, 0
    if path == "decode":
        return split_k * M * N * 4, N // 64
    tiles = math.ceil(M / config.tile_m) * math.ceil(N / config.tile_n)
    if mode == "streamk":
        return 2 * split_k * config.tile_m * config.tile_n * 4, tiles
    if mode == "serial":
        return split_k * tiles * config.tile_m * config.tile_n * 4, tiles
    return split_k * M * N * 4, 0


class FakeLaunch:
    """A prepared launch: records each call's addresses, with the plan's arguments."""

    def __init__(self, gpu, **prepared):
        self.gpu, self.prepared = gpu, prepared
        self.workspace_bytes, self.semaphores = prepared["workspace_bytes"], prepared["semaphore_count"]

    def __call__(self, x, packed, scales, offsets, bias, out, workspace, semaphores, stream):
        # The plan hands scratch exactly where the launch asked for it.
        assert (workspace != 0) == (self.workspace_bytes > 0) and (semaphores != 0) == (self.semaphores > 0)
        self.gpu.launches.append(dict(self.prepared, bias=bias != 0, workspace=workspace != 0,
                                      workspace_address=workspace, semaphores=semaphores != 0,
                                      semaphore_address=semaphores, offsets=offsets, stream=stream))


class FakeGPU:
    """Counts every query the hot path must not repeat, and records each plan and launch."""

    def __init__(self):
        self.calls = Counter()
        self.launches = []
        self.prepared = []
        self.capturing = False  # what stream_capturing() answers

    def counted(self, name, fn):
        def wrapper(*args, **kwargs):
            self.calls[name] += 1
            return fn(*args, **kwargs)
        return wrapper

    def prepare(self, path, config_name, key, M, N, K, G, split_k=1, split_mode="none"):
        """The extension's prepare: every path's, by config name and kernel key tuple."""
        self.calls["prepare"] += 1
        config = PATHS[path].parse_name(config_name)
        assert config is not None and config.kernel_name == config_name, config_name
        assert key in {k.as_tuple() for k in (SM80_KEY, SM90_KEY, SM90_KEY.with_quant("scale"),
                                               KernelKey("bf16"), KernelKey("bf16", layout="sm90"),
                                               KernelKey("bf16", layout="sm90", quant="scale"))}, key
        if path == "decode" and M > config.rows:
            raise ValueError(f"gemm (decode path): M (rows of x) must be in [1, {config.rows}]")
        workspace_bytes, semaphore_count = fake_scratch(path, config, M, N, split_k, split_mode)
        prepared = dict(path=path, config=config_name, act=key[0], layout=key[2], quant=key[3], M=M, N=N, K=K, G=G,
                        split_k=split_k, mode=split_mode, workspace_bytes=workspace_bytes,
                        semaphore_count=semaphore_count)
        self.prepared.append(prepared)
        return FakeLaunch(self, **prepared)


@pytest.fixture
def gpu(monkeypatch, tmp_path):
    fake = FakeGPU()
    real_check_tensor = _checks.check_tensor
    monkeypatch.setattr(_checks, "check_tensor",
                        lambda fn, name, t, dtypes, ndim, *, cuda=True, aligned=True:
                        real_check_tensor(fn, name, t, dtypes, ndim, cuda=False, aligned=aligned))
    # Device queries.
    monkeypatch.setattr(_C, "cuda_device_count", fake.counted("cuda_device_count", lambda: 1))
    monkeypatch.setattr(_C, "compiled_archs", fake.counted("compiled_archs", lambda: [80, 90]))
    monkeypatch.setattr(torch.cuda, "get_device_capability", fake.counted("capability", lambda device=None: (9, 0)))
    monkeypatch.setattr(torch.cuda, "get_device_name", fake.counted("device_name", lambda device=None: GPU))
    props = SimpleNamespace(name=GPU, multi_processor_count=132, major=9, minor=0)
    monkeypatch.setattr(torch.cuda, "get_device_properties", fake.counted("properties", lambda device=None: props))
    monkeypatch.setattr(torch.cuda, "current_stream", fake.counted("current_stream", lambda device=None: None))
    # File access (the tuning cache).
    monkeypatch.setattr(builtins, "open", fake.counted("open", builtins.open))
    monkeypatch.setattr(os, "stat", fake.counted("os.stat", os.stat))
    monkeypatch.setattr(pathlib.Path, "read_text", fake.counted("read_text", pathlib.Path.read_text))
    monkeypatch.setattr(pathlib.Path, "stat", fake.counted("Path.stat", pathlib.Path.stat))
    # Config resolution and validation, to see that they run once.
    monkeypatch.setattr(tuning_cache, "lookup", fake.counted("tuning_cache.lookup", tuning_cache.lookup))
    monkeypatch.setattr(ops, "check_packed_tensors", fake.counted("check_packed_tensors", ops.check_packed_tensors))
    # The build's registry (hand-made) and its prepared launches (every path's, one per plan).
    monkeypatch.setattr(base, "_compiled_configs", fake.counted("compiled_configs", hand_registry()))
    monkeypatch.setattr(_C, "prepare", fake.prepare)
    # The launch: the stream handle, and whether it is capturing (the scratch's rule).
    monkeypatch.setattr(ops, "current_stream", fake.counted("ops.current_stream", lambda device: 0))
    monkeypatch.setattr(workspace, "stream_capturing", fake.counted("stream_capturing", lambda: fake.capturing))
    # Fresh caches for this test only (monkeypatch puts the process's back afterwards).
    monkeypatch.setattr(ops, "_plans", {})
    monkeypatch.setattr(device, "_facts", {})
    monkeypatch.setattr(workspace, "_semaphores", {})
    monkeypatch.setattr(workspace, "_outgrown_semaphores", [])
    monkeypatch.setattr(workspace, "_workspaces", {})
    monkeypatch.setattr(tuning_cache, "_memo", {})
    monkeypatch.setenv("MIXGEMM_CACHE", str(tmp_path / "tuned.json"))
    return fake


@pytest.fixture
def sm90_build(gpu):
    """The fake GPU, whose hand-made build has sm90 kernels (the gpu fixture's registry holds them all)."""
    return gpu


# Queries that must not happen once a call of the same shape has run (the launch's own stream lookup is
# the one per-call query, and it is the raw handle, not a Stream object), nor a new plan.
FORBIDDEN = ("cuda_device_count", "compiled_archs", "capability", "device_name", "properties", "current_stream",
             "open", "os.stat", "read_text", "Path.stat", "tuning_cache.lookup", "check_packed_tensors",
             "compiled_configs", "prepare")


def repeated(fake, call, times=20):
    """Runs ``call`` once to warm up, then ``times`` more; returns the queries the repeats made."""
    call()
    before, launched = Counter(fake.calls), len(fake.launches)
    for _ in range(times):
        call()
    assert len(fake.launches) - launched == times  # every call still launches
    new = fake.calls - before
    return {name: new[name] for name in FORBIDDEN if new[name]}


def test_fake_scratch_is_the_real_prepares():
    # The fake's scratch sizes are what the extension's prepare reports (no GPU needed to prepare the sm80 and
    # decode paths), for every config of theirs this build compiled.
    checked = 0
    for path in ("sm80", "decode"):
        for name in _C.compiled_configs(path, SM80_KEY.as_tuple()):
            config = PATHS[path].parse_name(name)
            splits = [(1, "none"), (2, "serial"), (4, "serial")]
            splits += [(2, "parallel"), (3, "streamk"), (8, "streamk")] if path == "sm80" else []
            for M in (1, 5, 20, 100):
                if path == "decode" and M > config.rows:
                    continue
                for split_k, mode in splits:
                    launch = _C.prepare(path, name, SM80_KEY.as_tuple(), M, 256, 512, 64, split_k, mode)
                    assert (launch.workspace_bytes, launch.semaphores) == fake_scratch(path, config, M, 256, split_k,
                                                                                       mode), (name, M, split_k, mode)
                    checked += 1
    assert checked > 0


@pytest.mark.parametrize("dtype", [F16, BF16])
def test_gemm_after_warm_up_reads_no_file_and_queries_no_device(gpu, dtype):
    w = packed_weight(dtype)
    x = torch.zeros(1, K, dtype=dtype)
    bias = torch.zeros(N, dtype=dtype)
    assert repeated(gpu, lambda: mixgemm.gemm(x, w)) == {}
    assert repeated(gpu, lambda: mixgemm.gemm(x, w, bias)) == {}
    x3 = torch.zeros(2, 3, K, dtype=dtype)
    assert repeated(gpu, lambda: mixgemm.gemm(x3, w)) == {}
    config = mixgemm.compiled_configs(dtype)[0].with_split_k(2, "serial")
    assert repeated(gpu, lambda: mixgemm.gemm(x, w, config=config)) == {}
    # The first call of each shape did the work, once per device / per (M, config).
    assert gpu.calls["cuda_device_count"] == 1 and gpu.calls["properties"] == 1
    assert gpu.calls["tuning_cache.lookup"] == 2  # M = 1 and M = 6, "auto"
    assert gpu.calls["check_packed_tensors"] == 1
    assert gpu.calls["prepare"] == 3  # one plan per (M, config argument): M = 1 and 6 "auto", M = 1 split
    assert gpu.launches[-1]["semaphores"] and gpu.launches[-1]["split_k"] == 2


def test_layers_and_library_after_warm_up(gpu):
    x = torch.zeros(4, K, dtype=F16)
    layer = QuantLinear(packed_weight(), torch.zeros(N))
    assert repeated(gpu, lambda: layer(x)) == {}
    w = packed_weight()
    assert repeated(gpu, lambda: library.gemm(x, w)) == {}
    named = mixgemm.compiled_configs(F16)[0].name
    layer.config = named  # a config name is parsed once too
    assert repeated(gpu, lambda: layer(x)) == {}
    assert gpu.launches[-1]["config"] == mixgemm.compiled_configs(F16)[0].kernel_name
    assert gpu.calls["prepare"] == 2  # the layer's "auto" and named plans; library.gemm's call shares the first


def test_outputs_keep_their_shapes(gpu):
    w = packed_weight()
    for shape in [(K,), (1, K), (5, K), (2, 3, K), (0, K), (2, 0, K)]:
        out = mixgemm.gemm(torch.zeros(shape, dtype=F16), w)
        assert tuple(out.shape) == shape[:-1] + (N,) and out.dtype == F16


def test_bad_arguments_after_warm_up_keep_their_errors(gpu):
    w = packed_weight()
    x = torch.zeros(2, K, dtype=F16)
    mixgemm.gemm(x, w, torch.zeros(N, dtype=F16))  # warm: weight validated, plan made
    cases = [
        (dict(x=torch.zeros(2, K)), r"x must have dtype float16, got torch\.float32"),
        (dict(x=torch.zeros(2, K + 64, dtype=F16)), r"x\.shape\[-1\] must equal the weight's K = 256, got 320"),
        (dict(x=torch.zeros(K, 2, dtype=F16).t()), r"x must be contiguous"),
        (dict(x=torch.zeros(2 * K + 1, dtype=F16)[1:].view(2, K)), r"x must start at a 16-byte aligned address"),
        (dict(x=torch.empty(2, K, dtype=F16, device="meta")), r"packed is on cpu but x is on meta"),
        (dict(x=torch.tensor(1.0, dtype=F16)), r"x must be a torch\.Tensor with at least one dimension"),
        (dict(bias=torch.zeros(N)), r"bias must have dtype float16, got torch\.float32"),
        (dict(bias=torch.zeros(N + 64, dtype=F16)), r"bias must have shape \(128,\)"),
        (dict(bias=torch.zeros(2 * N + 1, dtype=F16)[1:].view(2, N)[0]), r"bias must start at a 16-byte aligned"),
        (dict(bias=torch.empty(N, dtype=F16, device="meta")), r"bias is on meta but x is on cpu"),
        (dict(config="fastest"), r"config must be 'auto', a path name \(sm80, decode, sm90, dequant\) or a "
                                 r"GemmConfig, got 'fastest'"),
        (dict(config=[16]), r"config must be 'auto', a path name or a GemmConfig, got list"),
        (dict(config=Sm80Config(32, 32, 64, 16, 16, 64, 7)),
         r"config 32x32x64_w16x16x64_s7 is not compiled into this build for fp16-int4-sm80-scale_offset weights; "
         r"its sm80 configs for them: 16x256x64_w16x64x64_s3, 64x128x64_w32x64x64_s4, 128x256x64_w64x64x64_s3$"),
        (dict(config="sm90"), r"the sm90 path does not read weights in the 'sm80' layout"),
        (dict(config=SM80_TILE.with_split_k(8, "serial")),
         r"config 16x256x64_w16x64x64_s3_k8s cannot run M = 2, N = 128, K = 256, group_size = 64: split_k = 8 is "
         r"more than K / 64 = 4 k-tiles"),
    ]
    for overrides, pattern in cases:
        args = dict(x=x, bias=None, config="auto") | overrides
        with pytest.raises(ValueError, match=rf"^gemm: {pattern}"):
            mixgemm.gemm(args["x"], w, args["bias"], args["config"])


def test_a_replaced_weight_field_is_validated_again(gpu):
    w = packed_weight()
    x = torch.zeros(1, K, dtype=F16)
    mixgemm.gemm(x, w)
    w.scales = torch.zeros(K // G + 1, N, dtype=F16)
    with pytest.raises(ValueError, match=r"^gemm: packed\.scales must have shape \(4, 128\)"):
        mixgemm.gemm(x, w)
    w.scales = torch.zeros(K // G, N, dtype=F16)
    mixgemm.gemm(x, w)
    w.group_size = 128  # the scales no longer match
    with pytest.raises(ValueError, match=r"^gemm: packed\.scales must have shape \(2, 128\)"):
        mixgemm.gemm(x, w)
    w.group_size = G
    w.act_dtype = BF16
    with pytest.raises(ValueError, match=r"^gemm: x must have dtype bfloat16"):
        mixgemm.gemm(x, w)
    w.act_dtype = F16
    w.perm = torch.arange(K)
    mixgemm.gemm(x, w)
    # The first call and each replacement that got past x's checks (the bf16 one stopped at x's dtype).
    assert gpu.calls["check_packed_tensors"] == 5
    w.perm = torch.arange(K, dtype=I32)
    with pytest.raises(ValueError, match=r"^gemm: packed\.perm must have dtype int64"):
        mixgemm.gemm(x, w)


def test_a_tune_run_in_the_process_reaches_the_next_call(gpu):
    w = packed_weight()
    x = torch.zeros(1, K, dtype=F16)
    mixgemm.gemm(x, w)
    heuristic = gpu.launches[-1]
    tuned = mixgemm.compiled_configs(F16)[-1].with_split_k(2, "parallel")
    assert (heuristic["config"], heuristic["split_k"]) != (tuned.kernel_name, 2)
    tuning_cache.save_choice(GPU, 1, N, K, G, SM80_KEY, tuned)
    mixgemm.gemm(x, w)
    assert (gpu.launches[-1]["config"], gpu.launches[-1]["split_k"], gpu.launches[-1]["mode"]) == (
        tuned.kernel_name, 2, "parallel")
    assert gpu.launches[-1]["workspace"]


def test_plans_are_shared_by_weights_of_one_shape(gpu):
    x = torch.zeros(1, K, dtype=F16)
    for _ in range(3):  # e.g. the layers of a model
        mixgemm.gemm(x, packed_weight())
    assert gpu.calls["tuning_cache.lookup"] == 1 and len(ops._plans) == 1 and gpu.calls["prepare"] == 1
    assert gpu.calls["check_packed_tensors"] == 3  # validation is per weight object


def test_plans_are_kept_per_kernel_key(gpu):
    # The plan's key holds the weight's kernel key: another dtype or layout of the same shape gets its own plan.
    x = torch.zeros(1, K, dtype=F16)
    mixgemm.gemm(x, packed_weight())
    mixgemm.gemm(x.to(BF16), packed_weight(BF16))
    mixgemm.gemm(x, sm90_weight())
    mixgemm.gemm(x, sm90_weight(scale_only=True))
    assert len(ops._plans) == 4
    assert [(p["act"], p["layout"], p["quant"]) for p in gpu.prepared] == [
        ("fp16", "sm80", "scale_offset"), ("bf16", "sm80", "scale_offset"), ("fp16", "sm90", "scale_offset"),
        ("fp16", "sm90", "scale_offset")]
    # (The decode path has no scale-only kernel in this build: the symmetric weight runs the scale+offset one.)


def test_device_rules_are_still_checked_once_per_device(gpu, monkeypatch):
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (7, 5))
    with pytest.raises(RuntimeError, match=r"^gemm: GPU FakeGPU has compute capability 7\.5"):
        mixgemm.gemm(torch.zeros(1, K, dtype=F16), packed_weight())
    assert device._facts == {}  # a refused device is not remembered as good
    assert ops._plans == {} and gpu.calls["prepare"] == 0


def test_device_facts_are_read_once(gpu):
    facts = device.facts("gemm", torch.device("cpu"))
    assert (facts.name, facts.sm_count, facts.capability, facts.memory_bandwidth) == (GPU, 132, (9, 0), 0.0)
    assert device.facts("gemm", torch.device("cpu")) is facts
    assert gpu.calls["properties"] == 1 and gpu.calls["cuda_device_count"] == 1
    assert device._facts == {torch.device("cpu"): facts}


def test_memory_bandwidth_from_the_device_properties():
    # Two transfers per memory clock over the bus: an H100 SXM reports 2619 MHz and 5120 bits (3.35 TB/s), an H200
    # 3201 MHz and 6144 bits (4.92 TB/s); a driver that reports neither gives 0 (unknown).
    h100 = SimpleNamespace(memory_clock_rate=2_619_000, memory_bus_width=5120)
    assert device.memory_bandwidth(h100) == pytest.approx(3.352e12, rel=1e-3)
    h200 = SimpleNamespace(memory_clock_rate=3_201_000, memory_bus_width=6144)
    assert device.memory_bandwidth(h200) == pytest.approx(4.917e12, rel=1e-3)
    assert device.memory_bandwidth(SimpleNamespace()) == 0.0
    assert device.memory_bandwidth(SimpleNamespace(memory_clock_rate=2_619_000, memory_bus_width=0)) == 0.0


def test_tracing_still_records_the_custom_op(gpu):
    # The direct eager path is for plain calls only: under a dispatch mode (here make_fx's, on real
    # tensors) the op must still be called, so the trace records one mixgemm::gemm node per GEMM. (Fake
    # tensors are test_library.py's business.)
    from torch.fx.experimental.proxy_tensor import make_fx

    layer = QuantLinear(packed_weight())
    x = torch.zeros(3, K, dtype=F16)
    graph = make_fx(lambda t: layer(t) + library.gemm(t, packed_weight()))(x)
    targets = [str(n.target) for n in graph.graph.nodes if n.op == "call_function"]
    assert targets.count("mixgemm.gemm.default") == 2, targets
    assert library.eager_call(x) and not library.eager_call(x.to("meta"))


# ---------------------------------------------------------------------------------------------------
# Weights in the sm90 layout


@pytest.mark.parametrize("dtype", [F16, BF16])
@pytest.mark.parametrize("scale_only", [False, True])
def test_sm90_weight_after_warm_up_reads_no_file_and_queries_no_device(sm90_build, dtype, scale_only):
    gpu = sm90_build
    w = sm90_weight(dtype, scale_only)
    bias = torch.zeros(N, dtype=dtype)
    for M in (1, 12, 64):  # the decode path (8 rows) and the sm90 GEMM (this build has no sm80 sm90-layout tile)
        x = torch.zeros(M, K, dtype=dtype)
        assert repeated(gpu, lambda: mixgemm.gemm(x, w)) == {}
        assert repeated(gpu, lambda: mixgemm.gemm(x, w, bias)) == {}
    assert repeated(gpu, lambda: mixgemm.gemm(torch.zeros(2, 32, K, dtype=dtype), w, config=SM90_128)) == {}
    assert gpu.calls["cuda_device_count"] == 1 and gpu.calls["properties"] == 1
    # M = 1, 12 and 64, "auto": once per plan and kernel key that runs the weight (a scale-only weight's tuned
    # choice may be filed under its own key or the scale+offset one).
    assert gpu.calls["tuning_cache.lookup"] == 3 * len(w.key.kernel_keys())
    assert gpu.calls["check_packed_tensors"] == 1
    # One plan per (M, config argument): the decode path's at M = 1, then one per sm90 plan (M = 12 and 64 "auto",
    # M = 64 SM90_128), each prepared once.
    assert [(p["path"], p["M"]) for p in gpu.prepared] == [("decode", 1), ("sm90", 12), ("sm90", 64), ("sm90", 64)]
    # A symmetric weight runs the scale-only kernels where compiled (not SM90_16's, nor the decode path's here).
    scale = "scale" if scale_only else "scale_offset"
    assert [(p["config"], p["layout"], p["quant"]) for p in gpu.prepared] == [
        ("decode_m8_w4", "sm90", "scale_offset"), (SM90_16.kernel_name, "sm90", "scale_offset"),
        (SM90_64.kernel_name, "sm90", scale), (SM90_128.kernel_name, "sm90", scale)]


def test_sm90_weight_takes_the_decode_path_for_a_few_rows(sm90_build):
    gpu = sm90_build
    for M in (1, 8):
        mixgemm.gemm(torch.zeros(M, K, dtype=F16), sm90_weight())
        launch = gpu.launches[-1]
        # The decode kernel that reads the sm90 layout.
        assert (launch["path"], launch["config"], launch["M"], launch["layout"]) == ("decode", "decode_m8_w4", M,
                                                                                    "sm90"), M
    # Without sm80 tiles compiled for the sm90 layout, 9 rows and up run the sm90 GEMM.
    mixgemm.gemm(torch.zeros(9, K, dtype=F16), sm90_weight())
    assert gpu.launches[-1]["path"] == "sm90"
    # The same decode kernels, keyed by the layout, for an sm80-layout weight.
    mixgemm.gemm(torch.zeros(1, K, dtype=F16), packed_weight())
    assert (gpu.launches[-1]["path"], gpu.launches[-1]["layout"]) == ("decode", "sm80")
    mixgemm.gemm(torch.zeros(9, K, dtype=F16), packed_weight())
    assert gpu.launches[-1]["path"] == "sm80"
    # An explicit decode config reads either layout too.
    mixgemm.gemm(torch.zeros(3, K, dtype=F16), sm90_weight(), config=DecodeConfig(16, 4).with_split_k(2))
    launch = gpu.launches[-1]
    assert (launch["path"], launch["config"], launch["split_k"], launch["mode"], launch["layout"]) == (
        "decode", "decode_m16_w4", 2, "serial", "sm90")
    assert launch["workspace"] and launch["semaphores"]  # its split's partials and per-strip semaphores
    # And so does the decode path by name: its heuristic's choice.
    mixgemm.gemm(torch.zeros(3, K, dtype=F16), sm90_weight(), config="decode")
    assert (gpu.launches[-1]["path"], gpu.launches[-1]["layout"]) == ("decode", "sm90")


def test_sm90_weight_runs_the_sm80_tiles_compiled_for_its_layout(sm90_build, monkeypatch):
    # A build that compiles the 16-row sm80 tile for sm90-layout weights: 9..16 rows take it, keyed by the layout.
    gpu = sm90_build
    monkeypatch.setattr(base, "_compiled_configs", hand_registry(sm90_layout_tiles=(SM80_TILE.kernel_name,)))
    for M in (9, 16):
        mixgemm.gemm(torch.zeros(M, K, dtype=F16), sm90_weight())
        launch = gpu.launches[-1]
        assert (launch["path"], launch["config"], launch["M"], launch["layout"]) == (
            "sm80", SM80_TILE.kernel_name, M, "sm90"), M
    mixgemm.gemm(torch.zeros(16, K, dtype=F16), packed_weight())
    assert (gpu.launches[-1]["path"], gpu.launches[-1]["layout"]) == ("sm80", "sm80")
    # Up to 64 rows on this tiny weight (one 128-column tile: far too few for the sm90 GEMM to fill the GPU) the
    # sm80 tiles, from 65 the sm90 GEMM (dispatch.sm80_first_on_sm90_layout).
    mixgemm.gemm(torch.zeros(64, K, dtype=F16), sm90_weight())
    assert gpu.launches[-1]["path"] == "sm80"
    mixgemm.gemm(torch.zeros(65, K, dtype=F16), sm90_weight())
    assert gpu.launches[-1]["path"] == "sm90"


@pytest.mark.parametrize("scale_only", [False, True])
def test_sm90_weight_runs_the_sm90_gemm(sm90_build, scale_only):
    gpu = sm90_build
    w = sm90_weight(scale_only=scale_only)
    mixgemm.gemm(torch.zeros(64, K, dtype=F16), w)
    launch = gpu.launches[-1]
    assert (launch["path"], launch["config"], launch["M"], launch["N"], launch["K"]) == (
        "sm90", SM90_64.kernel_name, 64, N, K)
    assert launch["workspace"] and launch["workspace_bytes"] == SM90_WORKSPACE
    # Stream-K's flags come from the per-stream semaphore buffer, at least as many as the sizing asked for.
    assert launch["semaphores"] and launch["semaphore_count"] == SM90_FLAGS
    assert [b.numel() >= SM90_FLAGS for b in workspace._semaphores.values()] == [True]
    assert launch["semaphore_address"] == workspace._semaphores[(torch.device("cpu"), 0)].data_ptr()
    # Symmetric weights run the scale-only kernel where it is compiled: no offsets pointer.
    assert (launch["offsets"] == 0) == scale_only
    assert launch["offsets"] in (0, w.offsets.data_ptr())
    # K's four k-tiles are too few to split (paths.sm90.split_for); an explicit split reaches the prepare and launch.
    assert {name: gpu.prepared[-1][name] for name in ("config", "M", "split_k", "mode", "quant")} == dict(
        config=SM90_64.kernel_name, M=64, split_k=1, mode="none", quant="scale" if scale_only else "scale_offset")
    assert (launch["split_k"], launch["mode"]) == (1, "none")
    mixgemm.gemm(torch.zeros(64, K, dtype=F16), w, config=SM90_64.with_split_k(2))
    assert (gpu.prepared[-1]["split_k"], gpu.prepared[-1]["mode"]) == (2, "serial")
    assert (gpu.launches[-1]["split_k"], gpu.launches[-1]["mode"]) == (2, "serial")
    # The 16-token kernel has no scale-only build: the scale+offset kernel, with the (all-zero) offsets.
    mixgemm.gemm(torch.zeros(16, K, dtype=F16), w, config=SM90_16)
    assert (gpu.launches[-1]["config"], gpu.launches[-1]["offsets"]) == (SM90_16.kernel_name, w.offsets.data_ptr())
    assert gpu.prepared[-1]["quant"] == "scale_offset"
    # More rows than any preferred tile: the heuristic's choice among what is compiled.
    mixgemm.gemm(torch.zeros(300, K, dtype=F16), w)
    assert (gpu.launches[-1]["path"], gpu.launches[-1]["config"]) == ("sm90", SM90_128.kernel_name)
    assert not gpu.launches[-1]["workspace"]  # a persistent kernel needs no scratch


def test_a_replaced_layout_or_scale_only_is_seen(sm90_build):
    gpu = sm90_build
    w = sm90_weight(scale_only=True)
    x = torch.zeros(64, K, dtype=F16)
    mixgemm.gemm(x, w)
    assert gpu.launches[-1]["offsets"] == 0
    w.scale_only = False  # now the offsets matter: a new plan, the scale+offset kernel
    mixgemm.gemm(x, w)
    assert gpu.launches[-1]["offsets"] == w.offsets.data_ptr() and gpu.launches[-1]["quant"] == "scale_offset"
    w.layout = "sm80"  # the tensors are still in the sm90 layout
    with pytest.raises(ValueError, match=r"^gemm: packed\.packed must have shape \(2, 16, 32, 4\) "
                                         r"\(\[N/64, K/16, 32, 4\] \(the sm80 layout\) for 4-bit weights\)"):
        mixgemm.gemm(x, w)
    w.layout = "sm91"
    with pytest.raises(ValueError, match=r"^gemm: packed\.layout must be 'sm80' or 'sm90', got 'sm91'"):
        mixgemm.gemm(x, w)
    w.layout = "sm90"
    mixgemm.gemm(x, w)
    assert gpu.launches[-1]["path"] == "sm90"
    # The first call, the scale_only and the sm80 replacements; 'sm91' stopped at the field rules, and the
    # fields restored to what was validated last need no check again.
    assert gpu.calls["check_packed_tensors"] == 3


def test_configs_of_another_layout_are_refused_after_warm_up(sm90_build):
    w = sm90_weight()
    x = torch.zeros(2, K, dtype=F16)
    mixgemm.gemm(x, w)  # warm
    with pytest.raises(ValueError, match=r"^gemm: config 16x256x64_w16x64x64_s3 is not compiled into this build for "
                                         r"fp16-int4-sm90-scale_offset weights; its sm80 configs for them: none$"):
        mixgemm.gemm(x, w, config=SM80_TILE)
    mixgemm.gemm(x, packed_weight())
    with pytest.raises(ValueError, match=r"^gemm: config sm90_64x128x64_c1x1_coop_streamk \(sm90 path\) cannot read "
                                         r"a weight in the 'sm80' layout; its kernels read sm90 weights"):
        mixgemm.gemm(x, packed_weight(), config=SM90_64)
    with pytest.raises(ValueError, match=r"^gemm: config decode_m8_w4 cannot run M = 9, N = 128, K = 256, "
                                         r"group_size = 64: decode_m8_w4 takes at most 8 rows of x, got M = 9"):
        mixgemm.gemm(torch.zeros(9, K, dtype=F16), w, config=DecodeConfig(8, 4))
    uncompiled = Sm90Config(256, 128, 1, 1, "coop", "persistent")
    with pytest.raises(ValueError, match=r"^gemm: config sm90_256x128x64_c1x1_coop_persistent is not compiled"):
        mixgemm.gemm(x, w, config=uncompiled)
    with pytest.raises(ValueError, match=r"^gemm: config='sm80': mixgemm: no kernel path runs M = 2.*"
                                         r"sm80: none of its configs compiled for fp16-int4-sm90-scale_offset takes "
                                         r"this problem \(none compiled\)"):
        mixgemm.gemm(x, w, config="sm80")  # the sm80 path by name: none of its tiles read this layout here


def test_the_sm90_gemm_needs_a_hopper(sm90_build, monkeypatch):
    gpu = sm90_build
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (8, 0))
    a100 = SimpleNamespace(name="FakeA100", multi_processor_count=108, major=8, minor=0)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda device=None: a100)
    # An sm90 config named on another GPU: its sm_90a kernels run on 9.0 only.
    with pytest.raises(RuntimeError, match=r"^gemm: the sm90 path's kernels run on compute capability 9\.0 "
                                           r"\(H100/H200\) only; this weight is on FakeA100"):
        mixgemm.gemm(torch.zeros(64, K, dtype=F16), sm90_weight(), config=SM90_64)
    # "auto" passes the sm90 path over there: this build has no sm80 tile for the sm90 layout, so the dequant path
    # takes the rows the sm90 GEMM would have.
    assert ops.resolve_config(64, sm90_weight(), "auto").path == "dequant"
    # The decode path reads the sm90 layout on any GPU.
    mixgemm.gemm(torch.zeros(1, K, dtype=F16), sm90_weight())
    assert (gpu.launches[-1]["path"], gpu.launches[-1]["layout"]) == ("decode", "sm90")


def test_tuned_choices_are_per_kernel_key(sm90_build):
    gpu = sm90_build
    x = torch.zeros(64, K, dtype=F16)
    tuning_cache.save_choice(GPU, 64, N, K, G, SM90_KEY, SM90_128)
    tuning_cache.save_choice(GPU, 64, N, K, G, SM80_KEY, SM80_TILE.with_split_k(2, "parallel"))
    mixgemm.gemm(x, sm90_weight())
    assert (gpu.launches[-1]["path"], gpu.launches[-1]["config"]) == ("sm90", SM90_128.kernel_name)
    mixgemm.gemm(x, packed_weight())
    assert (gpu.launches[-1]["path"], gpu.launches[-1]["config"], gpu.launches[-1]["mode"]) == (
        "sm80", SM80_TILE.kernel_name, "parallel")
    # Neither choice is another key's: a bf16 weight of the same shape runs the heuristic's choice.
    mixgemm.gemm(x.to(BF16), sm90_weight(BF16))
    assert (gpu.launches[-1]["path"], gpu.launches[-1]["config"]) == ("sm90", SM90_64.kernel_name)


def test_a_tuned_choice_reaches_a_symmetric_sm90_weight(sm90_build):
    gpu = sm90_build
    tuning_cache.save_choice(GPU, 64, N, K, G, SM90_KEY, SM90_128)  # what `tune` saves on a Hopper
    mixgemm.gemm(torch.zeros(64, K, dtype=F16), sm90_weight(scale_only=True))
    assert gpu.launches[-1]["config"] == SM90_128.kernel_name  # runs the heuristic's SM90_64 instead


def test_a_stale_tuned_choice_falls_back_to_the_heuristic(gpu):
    # A cache written by another build may name a kernel this one lacks, or a split this K cannot take: the
    # heuristic runs instead, without an error.
    x = torch.zeros(64, K, dtype=F16)
    mixgemm.gemm(x, packed_weight())
    heuristic = gpu.launches[-1]["config"], gpu.launches[-1]["split_k"], gpu.launches[-1]["mode"]
    ops.clear_plans()
    for stale in (Sm80Config(32, 32, 64, 16, 16, 64, 7), SM80_TILE.with_split_k(16, "serial")):
        tuning_cache.save_choice(GPU, 64, N, K, G, SM80_KEY, stale)
        mixgemm.gemm(x, packed_weight())
        assert (gpu.launches[-1]["config"], gpu.launches[-1]["split_k"], gpu.launches[-1]["mode"]) == heuristic


def test_quant_linear_keeps_the_layout(sm90_build):
    gpu = sm90_build
    layer = QuantLinear(sm90_weight(scale_only=True))
    assert (layer.layout, layer.scale_only) == ("sm90", True)
    assert repr(layer).endswith("bias=False, layout=sm90)")
    w = layer.packed_weight()
    assert (w.layout, w.scale_only, w.packed.shape) == ("sm90", True, (K // 16, N // 16, 32, 1))
    assert "layout" not in repr(QuantLinear(packed_weight())) and not QuantLinear(packed_weight()).scale_only
    # The eager path hands gemm the layout and scale_only: the sm90-layout decode kernel, and the scale-only
    # sm90 kernel, with nothing queried again after the first call.
    assert repeated(gpu, lambda: layer(torch.zeros(1, K, dtype=F16))) == {}
    assert (gpu.launches[-1]["path"], gpu.launches[-1]["layout"]) == ("decode", "sm90")
    assert repeated(gpu, lambda: layer(torch.zeros(4, 16, K, dtype=F16))) == {}
    assert (gpu.launches[-1]["path"], gpu.launches[-1]["offsets"]) == ("sm90", 0)
    # So does the traced path, through the custom op's layout and scale_only arguments.
    from torch.fx.experimental.proxy_tensor import make_fx

    before = len(gpu.launches)
    graph = make_fx(lambda t: layer(t) + library.gemm(t, sm90_weight()))(torch.zeros(64, K, dtype=F16))
    targets = [str(n.target) for n in graph.graph.nodes if n.op == "call_function"]
    assert targets.count("mixgemm.gemm.default") == 2, targets
    launched = gpu.launches[before:]
    assert [(l["path"], l["offsets"] == 0) for l in launched] == [("sm90", True), ("sm90", False)]


# --- Workspaces (issue 9; mixgemm.workspace): one per (device, stream) for eager calls, a fresh one under graph
# capture ------------------------------------------------------------------------------------------------------


def split_config(split_k=2):
    return mixgemm.compiled_configs(F16)[0].with_split_k(split_k, "parallel")


def test_eager_split_k_calls_share_one_workspace(gpu):
    w, x = packed_weight(), torch.zeros(4, K, dtype=F16)
    for _ in range(3):
        mixgemm.gemm(x, w, config=split_config())
    addresses = {launch["workspace_address"] for launch in gpu.launches}
    assert len(addresses) == 1 and 0 not in addresses
    assert list(workspace._workspaces) == [(torch.device("cpu"), 0)]  # the fake GPU's device and stream handle
    # A call that needs more replaces it with a larger buffer, which later calls share.
    small = workspace._workspaces[(torch.device("cpu"), 0)].numel()
    big_x = torch.zeros(small // (4 * N * 2) + 8, K, dtype=F16)
    mixgemm.gemm(big_x, w, config=split_config())
    assert workspace._workspaces[(torch.device("cpu"), 0)].numel() >= 4 * N * 2 * big_x.shape[0]
    assert gpu.launches[-1]["workspace_address"] not in addresses
    mixgemm.gemm(x, w, config=split_config())
    assert gpu.launches[-1]["workspace_address"] == gpu.launches[-2]["workspace_address"]


def test_a_capturing_call_gets_its_own_workspace(gpu):
    w, x = packed_weight(), torch.zeros(4, K, dtype=F16)
    mixgemm.gemm(x, w, config=split_config())
    shared = gpu.launches[-1]["workspace_address"]
    gpu.capturing = True  # a CUDA graph's capture: its buffers must come from the graph's own pool
    mixgemm.gemm(x, w, config=split_config())
    assert gpu.launches[-1]["workspace_address"] not in (0, shared)
    assert gpu.calls["stream_capturing"] == 2


def test_large_workspaces_are_not_kept(gpu, monkeypatch):
    monkeypatch.setattr(workspace, "_MAX_CACHED_BYTES", 1024)
    w = packed_weight()
    mixgemm.gemm(torch.zeros(4, K, dtype=F16), w, config=split_config())  # 2 x 4 x 128 fp32 = 4 KiB
    assert gpu.launches[-1]["workspace"] and workspace._workspaces == {}


def test_outgrown_semaphore_buffers_stay_allocated(gpu, monkeypatch):
    # A CUDA graph keeps the address of the buffer that was current when it was captured, so a larger call
    # replaces the buffer but must not free it; the replacement at least doubles, so few are kept.
    monkeypatch.setattr(workspace, "_MIN_SEMAPHORES", 16)
    cpu = torch.device("cpu")
    first = workspace.semaphores(cpu, 0, 10)
    assert first.numel() == 16 and workspace.semaphores(cpu, 0, 16) is first and workspace._outgrown_semaphores == []
    second = workspace.semaphores(cpu, 0, 17)
    assert second.numel() == 32 and int(second.count_nonzero()) == 0
    assert workspace._outgrown_semaphores == [first] and workspace._semaphores[(cpu, 0)] is second
    assert workspace.semaphores(cpu, 0, 100).numel() == 100 and workspace._outgrown_semaphores == [first, second]
    # Another stream has its own buffer: nothing is outgrown.
    assert workspace.semaphores(cpu, 1, 5).numel() == 16 and len(workspace._outgrown_semaphores) == 2


def test_serial_split_k_calls_share_the_stream_semaphores(gpu):
    # Serial split-K and stream-K count arrivals in the per-stream semaphore buffer (the kernels leave it zero),
    # one buffer for every call on the stream.
    w, x = packed_weight(), torch.zeros(4, K, dtype=F16)
    tile = mixgemm.compiled_configs(F16)[0]
    mixgemm.gemm(x, w, config=tile.with_split_k(2, "serial"))
    mixgemm.gemm(x, w, config=tile.with_split_k(4, "streamk"))
    assert [l["semaphores"] for l in gpu.launches] == [True, True]
    assert {l["semaphore_address"] for l in gpu.launches} == {workspace._semaphores[(torch.device("cpu"), 0)]
                                                              .data_ptr()}
    mixgemm.gemm(x, w, config=tile.with_split_k(2, "parallel"))  # a second kernel sums: no semaphores
    assert not gpu.launches[-1]["semaphores"] and gpu.launches[-1]["workspace"]


def test_calls_without_split_k_take_no_workspace(gpu):
    mixgemm.gemm(torch.zeros(4, K, dtype=F16), packed_weight(), config=mixgemm.compiled_configs(F16)[0])
    assert not gpu.launches[-1]["workspace"] and gpu.calls["stream_capturing"] == 0 and workspace._workspaces == {}
    assert not gpu.launches[-1]["semaphores"] and workspace._semaphores == {}
