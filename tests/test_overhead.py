"""CPU tests of the eager fast path (issue 9): after warm-up a gemm call reads no file, queries no device
property and resolves no config, yet every bad argument still gets its ValueError, a replaced weight field
is validated again, and a tune run in the process is seen by the next call.

No GPU is needed: as in test_validation.py the entry points take CPU tensors for device ones, and here the
extension reports one sm_90 GPU whose queries are counted and whose kernel launches (sm80 GEMM, decode path,
sm90 GEMM) only record their arguments. Weights in the sm90 layout run against a hand-made sm90 registry.
"""

from __future__ import annotations

import builtins
import os
import pathlib
from collections import Counter
from types import SimpleNamespace

import pytest
import torch

import mixgemm
import mixgemm._C as _C
from mixgemm import _checks, library, ops, packing, tuning
from mixgemm import config as config_module
from mixgemm.config import GemmConfig
from mixgemm.nn import QuantLinear
from hand_registry import fake_compiled

F16, BF16, I32 = torch.float16, torch.bfloat16, torch.int32
K, N, G = 256, 128, 64
GPU = "FakeGPU"


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


# The build these tests pretend: sm80 tiles, two decode kernels, three sm90 kernels, and the conversion modes
# compiled for each sm90 kernel (the 16-token one without the scale-only kernel).
SM90_16 = GemmConfig.sm90(16, 128, 64, 1, 1, "coop", "streamk")
SM90_64 = GemmConfig.sm90(64, 128, 64, 1, 1, "coop", "streamk")
SM90_128 = GemmConfig.sm90(128, 128, 64, 1, 1, "coop", "persistent")
SM80_TILE = GemmConfig(16, 256, 64, 16, 64, 64, 3)
HAND_COMPILED = (SM80_TILE, GemmConfig(64, 128, 64, 32, 64, 64, 4), GemmConfig(128, 256, 64, 64, 64, 64, 3),
                 GemmConfig.gemv(8, 4), GemmConfig.gemv(16, 4), SM90_16, SM90_64, SM90_128)
SM90_FLAGS = 48  # the stream-K flag count the fake sizing reports
SM90_MODES = {SM90_16.tile: ("offset",), SM90_64.tile: ("offset", "scale"), SM90_128.tile: ("offset", "scale")}


@pytest.fixture
def sm90_build(gpu, monkeypatch):
    monkeypatch.setattr(config_module, "_compiled", fake_compiled(HAND_COMPILED))
    monkeypatch.setattr(config_module, "sm90_modes", lambda bf16, bits: SM90_MODES)
    return gpu


class FakeGPU:
    """Counts every query the hot path must not repeat, and records each launch."""

    def __init__(self):
        self.calls = Counter()
        self.launches = []
        self.workspace_queries = []
        self.capturing = False  # what stream_capturing() answers

    def counted(self, name, fn):
        def wrapper(*args, **kwargs):
            self.calls[name] += 1
            return fn(*args, **kwargs)
        return wrapper

    def launch(self, tile, x, packed, scales, offsets, bias, out, workspace, semaphores, M, N, K, G, split_k,
               mode, bf16, stream, bits, path="sm80", sm90_layout=False):
        self.launches.append(dict(path=path, tile=tile, M=M, N=N, K=K, split_k=split_k, mode=mode, bias=bias != 0,
                                  workspace=workspace != 0, workspace_address=workspace, semaphores=semaphores != 0,
                                  offsets=offsets,
                                  sm90_layout=sm90_layout))

    # The extension's prepared launches (one per plan): each returns the callable a call hands its addresses.
    def prepare_gemm(self, tile, M, N, K, G, split_k, mode, bf16, bits=4, sm90_layout=False):
        def run(x, packed, scales, offsets, bias, out, workspace, semaphores, stream):
            self.launch(tile, x, packed, scales, offsets, bias, out, workspace, semaphores, M, N, K, G, split_k, mode,
                        bf16, stream, bits, sm90_layout=sm90_layout)
        return run

    def prepare_gemv(self, key, M, N, K, G, split_k, bf16, bits, sm90_layout):
        # The decode path has no mode argument: it reduces split-K in-kernel ("serial"). Its last argument
        # says which weight layout the kernel reads.
        def run(x, packed, scales, offsets, bias, out, workspace, semaphores, stream):
            self.launch(key, x, packed, scales, offsets, bias, out, workspace, semaphores, M, N, K, G, split_k,
                        "none" if split_k == 1 else "serial", bf16, stream, bits, "gemv", sm90_layout)
        return run

    def prepare_gemm_sm90(self, tile, M, N, K, G, bf16, bits, split_k, workspace_bytes, semaphore_count):
        # The sm90 GEMM: stream-K's workspace and flags, their sizes bound with the shape.
        def run(x, packed, scales, offsets, bias, out, workspace, semaphores, stream):
            assert (workspace != 0) == (workspace_bytes > 0) and (semaphores != 0) == (semaphore_count > 0)
            self.launch(tile, x, packed, scales, offsets, bias, out, workspace, semaphores, M, N, K, G, split_k,
                        "none" if split_k == 1 else "serial", bf16, stream, bits, "sm90", True)
            self.launches[-1].update(workspace_bytes=workspace_bytes, semaphore_count=semaphore_count)
        return run

    def sm90_workspace_size(self, tile, M, N, K, G, bf16, bits, zero_points, split_k):
        self.workspace_queries.append(dict(tile=tile, M=M, zero_points=zero_points, split_k=split_k))
        return 4096, SM90_FLAGS


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
    monkeypatch.setattr(tuning, "lookup", fake.counted("tuning.lookup", tuning.lookup))
    monkeypatch.setattr(ops, "check_packed_tensors", fake.counted("check_packed_tensors", ops.check_packed_tensors))
    # The launch: the stream handle and the kernel.
    monkeypatch.setattr(ops, "current_stream", fake.counted("ops.current_stream", lambda device: 0))
    monkeypatch.setattr(_C, "prepare_gemm", fake.prepare_gemm)
    monkeypatch.setattr(_C, "prepare_gemv", fake.prepare_gemv)  # the decode path, which "auto" takes for M <= 8
    monkeypatch.setattr(_C, "prepare_gemm_sm90", fake.prepare_gemm_sm90)  # the GEMM of sm90-layout weights
    monkeypatch.setattr(ops, "stream_capturing", fake.counted("stream_capturing", lambda: fake.capturing))
    monkeypatch.setattr(_C, "gemm_sm90_workspace_size", fake.sm90_workspace_size)
    # Fresh caches for this test only (monkeypatch puts the process's back afterwards).
    monkeypatch.setattr(ops, "_plans", {})
    monkeypatch.setattr(ops, "_devices", {})
    monkeypatch.setattr(ops, "_semaphores", {})
    monkeypatch.setattr(ops, "_outgrown_semaphores", [])
    monkeypatch.setattr(ops, "_workspaces", {})
    monkeypatch.setenv("MIXGEMM_CACHE", str(tmp_path / "tuned.json"))
    return fake


# Queries that must not happen once a call of the same shape has run (the launch's own stream lookup is
# the one per-call query, and it is the raw handle, not a Stream object).
FORBIDDEN = ("cuda_device_count", "compiled_archs", "capability", "device_name", "properties", "current_stream",
             "open", "os.stat", "read_text", "Path.stat", "tuning.lookup", "check_packed_tensors")


def repeated(fake, call, times=20):
    """Runs ``call`` once to warm up, then ``times`` more; returns the queries the repeats made."""
    call()
    before, launched = Counter(fake.calls), len(fake.launches)
    for _ in range(times):
        call()
    assert len(fake.launches) - launched == times  # every call still launches
    new = fake.calls - before
    return {name: new[name] for name in FORBIDDEN if new[name]}


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
    assert gpu.calls["tuning.lookup"] == 2  # M = 1 and M = 6, "auto"
    assert gpu.calls["check_packed_tensors"] == 1
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
    assert gpu.launches[-1]["tile"] == mixgemm.compiled_configs(F16)[0].tile


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
        (dict(config="fastest"), r"config must be 'auto' or a GemmConfig, got 'fastest'"),
        (dict(config=[16]), r"config must be 'auto' or a GemmConfig, got list"),
        (dict(config=GemmConfig(32, 32, 64, 16, 16, 64, 7)), r"config 32x32x64_w16x16x64_s7 is not compiled"),
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
    assert (heuristic["tile"], heuristic["split_k"]) != (tuned.tile, 2)
    tuning.save_choice(GPU, 1, N, K, G, F16, tuned)
    mixgemm.gemm(x, w)
    assert (gpu.launches[-1]["tile"], gpu.launches[-1]["split_k"], gpu.launches[-1]["mode"]) == (
        tuned.tile, 2, "parallel")
    assert gpu.launches[-1]["workspace"]


def test_plans_are_shared_by_weights_of_one_shape(gpu):
    x = torch.zeros(1, K, dtype=F16)
    for _ in range(3):  # e.g. the layers of a model
        mixgemm.gemm(x, packed_weight())
    assert gpu.calls["tuning.lookup"] == 1 and len(ops._plans) == 1
    assert gpu.calls["check_packed_tensors"] == 3  # validation is per weight object


def test_device_rules_are_still_checked_once_per_device(gpu, monkeypatch):
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (7, 5))
    with pytest.raises(RuntimeError, match=r"^gemm: GPU FakeGPU has compute capability 7\.5"):
        mixgemm.gemm(torch.zeros(1, K, dtype=F16), packed_weight())
    assert ops._devices == {}  # a refused device is not remembered as good


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
    assert gpu.calls["tuning.lookup"] == 3  # M = 1, 12 and 64, "auto"
    assert gpu.calls["check_packed_tensors"] == 1
    assert len(gpu.workspace_queries) == 3  # one per sm90 plan (M = 12 and 64 "auto", M = 64 SM90_128)


def test_sm90_weight_takes_the_decode_path_for_a_few_rows(sm90_build):
    gpu = sm90_build
    for M in (1, 8):
        mixgemm.gemm(torch.zeros(M, K, dtype=F16), sm90_weight())
        launch = gpu.launches[-1]
        # The decode kernel that reads the sm90 layout.
        assert (launch["path"], launch["tile"], launch["M"], launch["sm90_layout"]) == ("gemv", (1, 4), M, True), M
    # Without sm80 tiles compiled for the sm90 layout, 9 rows and up run the sm90 GEMM.
    mixgemm.gemm(torch.zeros(9, K, dtype=F16), sm90_weight())
    assert gpu.launches[-1]["path"] == "sm90"
    # The same decode kernels, told the layout, for an sm80-layout weight (whose decode path stops at 8 rows).
    mixgemm.gemm(torch.zeros(1, K, dtype=F16), packed_weight())
    assert (gpu.launches[-1]["path"], gpu.launches[-1]["sm90_layout"]) == ("gemv", False)
    mixgemm.gemm(torch.zeros(9, K, dtype=F16), packed_weight())
    assert gpu.launches[-1]["path"] == "sm80"
    # An explicit decode config reads either layout too.
    mixgemm.gemm(torch.zeros(3, K, dtype=F16), sm90_weight(), config=GemmConfig.gemv(16, 4).with_split_k(2))
    launch = gpu.launches[-1]
    assert (launch["path"], launch["tile"], launch["split_k"], launch["sm90_layout"]) == ("gemv", (2, 4), 2, True)


def test_sm90_weight_runs_the_sm80_tiles_compiled_for_its_layout(sm90_build, monkeypatch):
    # A build that compiles the 16-row sm80 tile for sm90-layout weights: 9..16 rows take it, told the layout.
    gpu = sm90_build
    monkeypatch.setattr(config_module, "_compiled", fake_compiled(HAND_COMPILED, sm90_layout_tiles=(SM80_TILE.tile,)))
    for M in (9, 16):
        mixgemm.gemm(torch.zeros(M, K, dtype=F16), sm90_weight())
        launch = gpu.launches[-1]
        assert (launch["path"], launch["tile"], launch["M"], launch["sm90_layout"]) == ("sm80", SM80_TILE.tile, M,
                                                                                          True), M
    mixgemm.gemm(torch.zeros(16, K, dtype=F16), packed_weight())
    assert (gpu.launches[-1]["path"], gpu.launches[-1]["sm90_layout"]) == ("sm80", False)


@pytest.mark.parametrize("scale_only", [False, True])
def test_sm90_weight_runs_the_sm90_gemm(sm90_build, scale_only):
    gpu = sm90_build
    w = sm90_weight(scale_only=scale_only)
    mixgemm.gemm(torch.zeros(64, K, dtype=F16), w)
    launch = gpu.launches[-1]
    assert (launch["path"], launch["tile"], launch["M"], launch["N"], launch["K"]) == ("sm90", SM90_64.tile, 64, N, K)
    assert launch["workspace"] and launch["workspace_bytes"] == 4096
    # Stream-K's flags come from the per-stream semaphore buffer, at least as many as the sizing asked for.
    assert launch["semaphores"] and launch["semaphore_count"] == SM90_FLAGS
    assert [b.numel() >= SM90_FLAGS for b in ops._semaphores.values()] == [True]
    # Symmetric weights run the scale-only kernel where it is compiled: no offsets pointer.
    assert (launch["offsets"] == 0) == scale_only
    assert launch["offsets"] in (0, w.offsets.data_ptr())
    # K's four k-tiles are too few to split (tuning.sm90_split); an explicit split reaches the sizing and launch.
    assert gpu.workspace_queries[-1] == dict(tile=SM90_64.tile, M=64, zero_points=not scale_only, split_k=1)
    assert (launch["split_k"], launch["mode"]) == (1, "none")
    mixgemm.gemm(torch.zeros(64, K, dtype=F16), w, config=SM90_64.with_split_k(2))
    assert gpu.workspace_queries[-1]["split_k"] == 2
    assert (gpu.launches[-1]["split_k"], gpu.launches[-1]["mode"]) == (2, "serial")
    # The 16-token kernel has no scale-only build: the offset kernel, with the (all-zero) offsets.
    mixgemm.gemm(torch.zeros(16, K, dtype=F16), w, config=SM90_16)
    assert (gpu.launches[-1]["tile"], gpu.launches[-1]["offsets"]) == (SM90_16.tile, w.offsets.data_ptr())
    assert gpu.workspace_queries[-1]["zero_points"]
    # More rows than any preferred tile: the heuristic's choice among what is compiled.
    mixgemm.gemm(torch.zeros(300, K, dtype=F16), w)
    assert (gpu.launches[-1]["path"], gpu.launches[-1]["tile"]) == ("sm90", SM90_128.tile)


def test_a_replaced_layout_or_scale_only_is_seen(sm90_build):
    gpu = sm90_build
    w = sm90_weight(scale_only=True)
    x = torch.zeros(64, K, dtype=F16)
    mixgemm.gemm(x, w)
    assert gpu.launches[-1]["offsets"] == 0
    w.scale_only = False  # now the offsets matter: a new plan, the offset kernel
    mixgemm.gemm(x, w)
    assert gpu.launches[-1]["offsets"] == w.offsets.data_ptr()
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
    with pytest.raises(ValueError, match=r"^gemm: config 16x256x64_w16x64x64_s3 is not compiled for weights in the "
                                         r"'sm90' layout in this build; its sm80 configs for that layout: none$"):
        mixgemm.gemm(x, w, config=SM80_TILE)
    mixgemm.gemm(x, packed_weight())
    with pytest.raises(ValueError, match=r"^gemm: config sm90_64x128x64_c1x1_coop_streamk \(sm90 path\) cannot read "
                                         r"a weight in the 'sm80' layout; its kernels read sm90 weights"):
        mixgemm.gemm(x, packed_weight(), config=SM90_64)
    with pytest.raises(ValueError, match=r"^gemm: config gemv_8x64x256_w8x64x64_s2 \(decode path\) takes at most 8 "
                                         r"rows of x, got M = 9"):
        mixgemm.gemm(torch.zeros(9, K, dtype=F16), w, config=GemmConfig.gemv(8, 4))
    uncompiled = GemmConfig.sm90(256, 128, 64, 1, 1, "coop", "persistent")
    with pytest.raises(ValueError, match=r"^gemm: config sm90_256x128x64_c1x1_coop_persistent is not compiled"):
        mixgemm.gemm(x, w, config=uncompiled)


def test_the_sm90_gemm_needs_a_hopper(sm90_build, monkeypatch):
    gpu = sm90_build
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (8, 0))
    a100 = SimpleNamespace(name="FakeA100", multi_processor_count=108, major=8, minor=0)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda device=None: a100)
    with pytest.raises(RuntimeError, match=r"^gemm: the sm90 path's kernels run on compute capability 9\.0 "
                                           r"\(H100/H200\) only; this weight is on FakeA100"):
        mixgemm.gemm(torch.zeros(64, K, dtype=F16), sm90_weight())
    # The decode path reads the sm90 layout on any GPU.
    mixgemm.gemm(torch.zeros(1, K, dtype=F16), sm90_weight())
    assert (gpu.launches[-1]["path"], gpu.launches[-1]["sm90_layout"]) == ("gemv", True)


def test_tuned_choices_are_per_layout(sm90_build):
    gpu = sm90_build
    x = torch.zeros(64, K, dtype=F16)
    tuning.save_choice(GPU, 64, N, K, G, F16, SM90_128, layout="sm90")
    tuning.save_choice(GPU, 64, N, K, G, F16, SM80_TILE.with_split_k(2, "parallel"))
    mixgemm.gemm(x, sm90_weight())
    assert (gpu.launches[-1]["path"], gpu.launches[-1]["tile"]) == ("sm90", SM90_128.tile)
    mixgemm.gemm(x, packed_weight())
    assert (gpu.launches[-1]["path"], gpu.launches[-1]["tile"], gpu.launches[-1]["mode"]) == (
        "sm80", SM80_TILE.tile, "parallel")


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
    assert (gpu.launches[-1]["path"], gpu.launches[-1]["sm90_layout"]) == ("gemv", True)
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


# --- Workspaces (issue 9): one per (device, stream) for eager calls, a fresh one under graph capture ------------


def split_config(split_k=2):
    return mixgemm.compiled_configs(F16)[0].with_split_k(split_k, "parallel")


def test_eager_split_k_calls_share_one_workspace(gpu):
    w, x = packed_weight(), torch.zeros(4, K, dtype=F16)
    for _ in range(3):
        mixgemm.gemm(x, w, config=split_config())
    addresses = {launch["workspace_address"] for launch in gpu.launches}
    assert len(addresses) == 1 and 0 not in addresses
    assert list(ops._workspaces) == [(torch.device("cpu"), 0)]  # the fake GPU's device and stream handle
    # A call that needs more replaces it with a larger buffer, which later calls share.
    small = ops._workspaces[(torch.device("cpu"), 0)].numel()
    big_x = torch.zeros(small // (4 * N * 2) + 8, K, dtype=F16)
    mixgemm.gemm(big_x, w, config=split_config())
    assert ops._workspaces[(torch.device("cpu"), 0)].numel() >= 4 * N * 2 * big_x.shape[0]
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
    monkeypatch.setattr(ops, "_MAX_CACHED_WORKSPACE_BYTES", 1024)
    w = packed_weight()
    mixgemm.gemm(torch.zeros(4, K, dtype=F16), w, config=split_config())  # 2 x 4 x 128 fp32 = 4 KiB
    assert gpu.launches[-1]["workspace"] and ops._workspaces == {}


def test_outgrown_semaphore_buffers_stay_allocated(gpu, monkeypatch):
    # A CUDA graph keeps the address of the buffer that was current when it was captured, so a larger call
    # replaces the buffer but must not free it; the replacement at least doubles, so few are kept.
    monkeypatch.setattr(ops, "_MIN_SEMAPHORES", 16)
    cpu = torch.device("cpu")
    first = ops._semaphore_buffer(cpu, 0, 10)
    assert first.numel() == 16 and ops._semaphore_buffer(cpu, 0, 16) is first and ops._outgrown_semaphores == []
    second = ops._semaphore_buffer(cpu, 0, 17)
    assert second.numel() == 32 and int(second.count_nonzero()) == 0
    assert ops._outgrown_semaphores == [first] and ops._semaphores[(cpu, 0)] is second
    assert ops._semaphore_buffer(cpu, 0, 100).numel() == 100 and ops._outgrown_semaphores == [first, second]
    # Another stream has its own buffer: nothing is outgrown.
    assert ops._semaphore_buffer(cpu, 1, 5).numel() == 16 and len(ops._outgrown_semaphores) == 2


def test_calls_without_split_k_take_no_workspace(gpu):
    mixgemm.gemm(torch.zeros(4, K, dtype=F16), packed_weight(), config=mixgemm.compiled_configs(F16)[0])
    assert not gpu.launches[-1]["workspace"] and gpu.calls["stream_capturing"] == 0 and ops._workspaces == {}
