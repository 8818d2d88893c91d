"""CPU tests of argument validation: every bad input of every public entry point is a ValueError naming
the argument and the rule it broke (mixgemm._checks and its callers in ops.py, baseline.py, packing.py, and the
config rules of mixgemm.paths and mixgemm.dispatch).

Order of the checks on one tensor: type, dtype, rank, device, contiguity, alignment. On a machine without
a GPU every valid-looking call with CPU tensors ends at the device rule ("must be on a CUDA device"). The
rules past that point are reached two ways here:

* the helpers in ``mixgemm._checks`` are called directly (``check_tensor(..., cuda=False)`` etc.);
* the fixture ``cpu_as_cuda`` (conftest.py) lets the entry points accept CPU tensors as if they were on a GPU (it
  forces ``cuda=False`` in ``check_tensor``) and makes ``_C.cuda_device_count()`` report 0, so that a call
  that passes every argument rule stops at ``check_device_supported`` with RuntimeError "no CUDA GPU"
  before any pointer reaches a kernel -- on any machine, with or without a GPU.

gemm reads the device's facts (mixgemm.device) before it checks its config argument, so the config rules are
reached here through ``ops.resolve_config`` with the facts of a fake GPU filed for the CPU device (``fake_gpu``),
and, where they must not depend on what this build compiled, with a hand-written registry (``hand_compiled``).
Neither launches anything. prepack's sm90-layout rules and the sm90 path's config rules are in
test_validation_sm90_layout.py.
"""

from __future__ import annotations

import dataclasses
import re

import pytest
import torch

import mixgemm
import mixgemm._C as _C
from mixgemm import (DecodeConfig, DequantConfig, GemmConfig, KernelKey, Sm80Config, Sm90Config, _checks, baseline,
                     device, dispatch, formats, layouts, ops, packing, paths, shape_rules, tuning_cache)
from mixgemm.layouts import sm80 as sm80_layout
from mixgemm.paths import GemmProblem, Gpu

F16, BF16, I32 = torch.float16, torch.bfloat16, torch.int32

# A valid AWQ problem: K = 128, N = 64, group size 64 (2 groups).
K, N, G = 128, 64, 2
DEVICE_MSG = "must be on a CUDA device"
NO_GPU_MSG = "no CUDA GPU"


def awq_tensors(k=K, n=N, groups=G, dtype=F16):
    return dict(
        qweight=torch.zeros(k, n // 8, dtype=I32),
        scales=torch.zeros(groups, n, dtype=dtype),
        qzeros=torch.zeros(groups, n // 8, dtype=I32),
    )


def gptq_tensors(k=K, n=N, groups=G, dtype=F16):
    return dict(
        qweight=torch.zeros(k // 8, n, dtype=I32),
        scales=torch.zeros(groups, n, dtype=dtype),
        qzeros=torch.zeros(groups, n // 8, dtype=I32),
    )


def packed_weight(n=N, k=K, groups=G, dtype=F16, **overrides) -> packing.PackedWeight:
    """A PackedWeight built by hand from CPU tensors of the right shapes."""
    fields = dict(
        packed=torch.zeros(n // 64, k // 16, 32, 4, dtype=I32),
        scales=torch.zeros(groups, n, dtype=dtype),
        offsets=torch.zeros(groups, n, dtype=dtype),
        group_size=k // groups,
        bits=4,
        act_dtype=dtype,
        n=n,
        k=k,
    )
    fields.update(overrides)
    return packing.PackedWeight(**fields)


def misaligned(shape, dtype):
    """A contiguous tensor of `shape` that starts one element past a 16-byte aligned address."""
    numel = 1
    for s in shape:
        numel *= s
    t = torch.zeros(numel + 1, dtype=dtype)[1:].view(shape)
    assert t.is_contiguous() and t.data_ptr() % 16 != 0
    return t


def transposed(shape, dtype):
    """A non-contiguous (transposed) view of `shape`."""
    t = torch.zeros(shape[::-1], dtype=dtype).t()
    assert tuple(t.shape) == tuple(shape) and not t.is_contiguous()
    return t


def meta_like(t):
    return torch.empty(t.shape, dtype=t.dtype, device="meta")


# The facts gemm reads of a GPU, for a weight held in CPU tensors (an H100-like one unless a test says otherwise).
FAKE_GPU = Gpu("FakeGPU", 132, (9, 0))


@pytest.fixture
def fake_gpu(monkeypatch, tmp_path):
    """mixgemm.device reports FAKE_GPU for the CPU device (no device check runs), the tuning cache is a fresh
    file path (returned), and no plan from another test is reused."""
    monkeypatch.setitem(device._facts, torch.device("cpu"), FAKE_GPU)
    cache = tmp_path / "tuned.json"
    monkeypatch.setenv("MIXGEMM_CACHE", str(cache))
    ops.clear_plans()
    yield cache
    ops.clear_plans()


def fake_compiled(configs, sm90_layout_tiles=()):
    """A stand-in for ``mixgemm.paths.base._compiled_configs(path, key)``: of ``configs`` (every path's), those of
    ``path``; the sm80 path's only for the tiles in ``sm90_layout_tiles`` on the sm90 layout (the generator compiles
    a few small-M tiles for it); every config with zero points (``scale_offset``), none scale-only (a scale-only
    weight then runs the scale+offset kernels, KernelKey.kernel_keys)."""
    def compiled(path, key):
        if key.quant != "scale_offset":
            return ()
        return tuple(c for c in configs if c.path == path.name and (
            c.path != "sm80" or key.layout == "sm80" or (c.tile_m, c.tile_n) in sm90_layout_tiles))
    return compiled


# ===================================================================================================
# mixgemm._checks helpers
# ===================================================================================================


class TestCheckTensor:
    def test_valid_tensor_is_returned(self):
        t = torch.zeros(4, 8, dtype=F16)
        assert _checks.check_tensor("f", "x", t, (F16,), 2, cuda=False) is t

    @pytest.mark.parametrize("value, type_name", [([1, 2], "list"), (None, "NoneType"), (3.0, "float")])
    def test_not_a_tensor(self, value, type_name):
        with pytest.raises(ValueError, match=rf"^f: x must be a torch\.Tensor, got {type_name}$"):
            _checks.check_tensor("f", "x", value, (F16,), 2, cuda=False)

    def test_wrong_dtype_single(self):
        with pytest.raises(ValueError, match=r"^f: qweight must have dtype int32, got torch\.float32$"):
            _checks.check_tensor("f", "qweight", torch.zeros(2, 2), (I32,), 2, cuda=False)

    def test_wrong_dtype_lists_every_allowed_dtype(self):
        with pytest.raises(ValueError, match=r"scales must have dtype float16 or bfloat16, got torch\.int32"):
            _checks.check_tensor("f", "scales", torch.zeros(2, 2, dtype=I32), (F16, BF16), 2, cuda=False)

    @pytest.mark.parametrize("shape", [(8,), (2, 2, 2), ()])
    def test_wrong_rank(self, shape):
        with pytest.raises(ValueError, match=re.escape(f"f: x must be 2-D, got shape {shape}")):
            _checks.check_tensor("f", "x", torch.zeros(shape, dtype=F16), (F16,), 2, cuda=False)

    def test_cpu_tensor_where_cuda_is_needed(self):
        with pytest.raises(ValueError, match=r"^f: x must be on a CUDA device, got cpu$"):
            _checks.check_tensor("f", "x", torch.zeros(2, 8, dtype=F16), (F16,), 2)

    def test_meta_tensor_where_cuda_is_needed(self):
        with pytest.raises(ValueError, match=r"x must be on a CUDA device, got meta"):
            _checks.check_tensor("f", "x", torch.empty(2, 8, dtype=F16, device="meta"), (F16,), 2)

    def test_non_contiguous(self):
        with pytest.raises(ValueError, match=r"^f: x must be contiguous \(call \.contiguous\(\) first\)$"):
            _checks.check_tensor("f", "x", transposed((8, 16), F16), (F16,), 2, cuda=False)

    def test_misaligned_slice(self):
        t = torch.zeros(65, dtype=F16)[1:]
        assert t.is_contiguous() and t.data_ptr() % 16 == 2
        with pytest.raises(ValueError, match=r"^f: x must start at a 16-byte aligned address"):
            _checks.check_tensor("f", "x", t, (F16,), 1, cuda=False)

    def test_misaligned_2d_view(self):
        with pytest.raises(ValueError, match=r"qweight must start at a 16-byte aligned address"):
            _checks.check_tensor("f", "qweight", misaligned((16, 8), I32), (I32,), 2, cuda=False)

    def test_alignment_is_not_asked_of_tensors_only_pytorch_reads(self):
        t = misaligned((16, 8), I32)
        assert _checks.check_tensor("f", "qweight", t, (I32,), 2, cuda=False, aligned=False) is t

    def test_offset_slice_that_stays_aligned_passes(self):
        # The rule is about the address, not the offset: 4 int32 elements are 16 bytes.
        t = torch.zeros(68, dtype=I32)[4:]
        assert _checks.check_tensor("f", "x", t, (I32,), 1, cuda=False) is t

    # Order: type, dtype, rank, device, contiguity, alignment. Each case breaks two rules; the earlier wins.
    @pytest.mark.parametrize(
        "t, ndim, cuda, rule",
        [
            ("not a tensor", 2, True, "must be a torch.Tensor"),  # type first
            (torch.zeros(8, dtype=I32), 2, True, "must have dtype"),  # dtype before rank and device
            (torch.zeros(8, dtype=F16), 2, True, "must be 2-D"),  # rank before device
            (transposed((8, 16), F16), 2, True, DEVICE_MSG),  # device before contiguity
            (torch.zeros(65, dtype=F16)[1:], 1, True, DEVICE_MSG),  # device before alignment
            (torch.zeros(2, 65, dtype=F16)[:, 1:], 2, False, "must be contiguous"),  # contiguity before alignment
        ],
        ids=["type", "dtype<rank", "rank<device", "device<contiguity", "device<alignment", "contiguity<alignment"],
    )
    def test_order_of_checks(self, t, ndim, cuda, rule):
        with pytest.raises(ValueError, match=rule):
            _checks.check_tensor("f", "x", t, (F16,), ndim, cuda=cuda)


class TestCheckSameDevice:
    def test_same_device_passes(self):
        _checks.check_same_device("f", a=torch.zeros(1), b=torch.zeros(2), c=torch.zeros(3))

    def test_cpu_and_meta(self):
        with pytest.raises(ValueError, match=r"^f: scales is on meta but qweight is on cpu; all must share a device$"):
            _checks.check_same_device("f", qweight=torch.zeros(1), scales=torch.empty(1, device="meta"))

    def test_names_the_odd_one_out(self):
        with pytest.raises(ValueError, match=r"qzeros is on meta but qweight is on cpu"):
            _checks.check_same_device(
                "f", qweight=torch.zeros(1), scales=torch.zeros(1), qzeros=torch.empty(1, device="meta")
            )


class TestCheckShape:
    def test_match_passes(self):
        _checks.check_shape("f", "qzeros", torch.zeros(2, 8), (2, 8), "why")
        _checks.check_shape("f", "qzeros", torch.zeros(2, 8), [2, 8], "why")

    def test_mismatch(self):
        with pytest.raises(
            ValueError, match=re.escape("f: qzeros must have shape (2, 8) ([K/G, N/8]), got (3, 8)")
        ):
            _checks.check_shape("f", "qzeros", torch.zeros(3, 8), (2, 8), "[K/G, N/8]")

    def test_rank_mismatch(self):
        with pytest.raises(ValueError, match=re.escape("bias must have shape (64,)")):
            _checks.check_shape("f", "bias", torch.zeros(1, 64), (64,), "one per column")


class TestGroupSizeOf:
    @pytest.mark.parametrize("k, groups, expected", [(128, 1, 128), (128, 2, 64), (4096, 32, 128), (7, 7, 1)])
    def test_exact_division(self, k, groups, expected):
        assert _checks.group_size_of("f", k, groups) == expected

    @pytest.mark.parametrize("k, groups", [(128, 3), (128, 256), (100, 8), (128, 0), (128, -2)])
    def test_groups_must_divide_k(self, k, groups):
        with pytest.raises(ValueError, match=rf"^f: scales has {groups} rows, which must divide K = {k}"):
            _checks.group_size_of("f", k, groups)


class TestCheckDeviceSupported:
    @pytest.mark.nogpu
    def test_no_gpu_here(self):
        assert _C.cuda_device_count() == 0
        with pytest.raises(RuntimeError, match=r"^f: no CUDA GPU is visible"):
            _checks.check_device_supported("f", torch.device("cuda", 0))

    def _fake_gpu(self, monkeypatch, capability, archs):
        monkeypatch.setattr(_C, "cuda_device_count", lambda: 1)
        monkeypatch.setattr(_C, "compiled_archs", lambda: list(archs))
        monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: capability)
        monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: "FakeGPU")

    def test_too_old_gpu(self, monkeypatch):
        self._fake_gpu(monkeypatch, (7, 5), [80, 90])
        with pytest.raises(RuntimeError, match=r"FakeGPU has compute capability 7\.5; mixgemm needs >= 8\.0"):
            _checks.check_device_supported("f", torch.device("cuda", 0))

    @pytest.mark.parametrize(
        "archs, capability",
        [
            ([80, 90], (8, 0)),  # exact cubin
            ([80, 90], (8, 6)),  # sm_80 cubin runs on 8.6
            ([80, 90], (9, 0)),  # exact cubin
            ([80, 90], (10, 0)),  # PTX of sm_90 JITs forward
            ([80], (9, 0)),  # PTX of sm_80 JITs forward
            ([80], (12, 0)),
        ],
    )
    def test_runnable(self, monkeypatch, archs, capability):
        self._fake_gpu(monkeypatch, capability, archs)
        assert _checks.check_device_supported("f", torch.device("cuda", 0)) is None

    @pytest.mark.parametrize("archs, capability", [([90], (8, 0)), ([90], (8, 6)), ([86], (8, 0))])
    def test_no_code_for_the_gpu(self, monkeypatch, archs, capability):
        self._fake_gpu(monkeypatch, capability, archs)
        arch = capability[0] * 10 + capability[1]
        with pytest.raises(RuntimeError, match=rf"not for the GPU's sm_{arch}; rebuild with MIXGEMM_CUDA_ARCHS"):
            _checks.check_device_supported("f", torch.device("cuda", 0))

    def test_capability_checked_before_archs(self, monkeypatch):
        # 7.5 with only sm_90 compiled: the capability rule is the one reported.
        self._fake_gpu(monkeypatch, (7, 5), [90])
        with pytest.raises(RuntimeError, match="compute capability"):
            _checks.check_device_supported("f", torch.device("cuda", 0))


# ===================================================================================================
# mixgemm.awq_dequantize
# ===================================================================================================


class TestAwqDequantize:
    fn = "awq_dequantize"

    def call(self, **overrides):
        args = awq_tensors()
        args.update(overrides)
        return mixgemm.awq_dequantize(args["qweight"], args["scales"], args["qzeros"])

    # ---- reachable on CPU tensors as they are -----------------------------------------------------
    @pytest.mark.parametrize(
        "overrides, pattern",
        [
            (dict(qweight="qweight"), r"qweight must be a torch\.Tensor, got str"),
            (dict(qweight=torch.zeros(K, N // 8)), r"qweight must have dtype int32, got torch\.float32"),
            (dict(qweight=torch.zeros(K, N // 8, dtype=torch.int64)), r"qweight must have dtype int32"),
            (dict(qweight=torch.zeros(K * N // 8, dtype=I32)), r"qweight must be 2-D, got shape \(1024,\)"),
            ({}, r"qweight must be on a CUDA device, got cpu"),
            (dict(qweight=transposed((K, N // 8), I32)), r"qweight must be on a CUDA device"),
        ],
    )
    def test_cpu(self, overrides, pattern):
        with pytest.raises(ValueError, match=rf"^awq_dequantize: {pattern}"):
            self.call(**overrides)

    # ---- past the device rule ---------------------------------------------------------------------
    @pytest.mark.parametrize(
        "overrides, pattern",
        [
            (dict(qweight=transposed((K, N // 8), I32)), r"qweight must be contiguous"),
            (dict(qweight=misaligned((K, N // 8), I32)), r"qweight must start at a 16-byte aligned address"),
            (dict(scales=None), r"scales must be a torch\.Tensor, got NoneType"),
            (dict(scales=torch.zeros(G, N)), r"scales must have dtype float16 or bfloat16, got torch\.float32"),
            (dict(scales=torch.zeros(G * N, dtype=F16)), r"scales must be 2-D"),
            (dict(scales=transposed((G, N), F16)), r"scales must be contiguous"),
            (dict(scales=misaligned((G, N), F16)), r"scales must start at a 16-byte aligned address"),
            (dict(qzeros=[0]), r"qzeros must be a torch\.Tensor, got list"),
            (dict(qzeros=torch.zeros(G, N // 8, dtype=torch.uint8)), r"qzeros must have dtype int32"),
            (dict(qzeros=torch.zeros(1, G, N // 8, dtype=I32)), r"qzeros must be 2-D"),
            (dict(qzeros=misaligned((G, N // 8), I32)), r"qzeros must start at a 16-byte aligned address"),
            (dict(scales=meta_like(awq_tensors()["scales"])), r"scales is on meta but qweight is on cpu"),
            (dict(qzeros=meta_like(awq_tensors()["qzeros"])), r"qzeros is on meta but qweight is on cpu"),
            (dict(qweight=torch.zeros(K, 4, dtype=I32)), r"qweight must have shape \(128, 8\)"),
            (dict(scales=torch.zeros(G, 32, dtype=F16)), r"qweight must have shape \(128, 4\)"),
            (
                dict(qweight=torch.zeros(K, 1, dtype=I32), scales=torch.zeros(G, 12, dtype=F16)),
                r"scales\.shape\[1\] = N must be a positive multiple of 8, got 12",
            ),
            (
                dict(qweight=torch.zeros(K, 0, dtype=I32), scales=torch.zeros(G, 0, dtype=F16),
                     qzeros=torch.zeros(G, 0, dtype=I32)),
                r"scales\.shape\[1\] = N must be a positive multiple of 8, got 0",
            ),
            (dict(qweight=torch.zeros(0, N // 8, dtype=I32)), r"qweight must have at least one row \(K >= 1\)"),
            (dict(scales=torch.zeros(3, N, dtype=F16)), r"scales has 3 rows, which must divide K = 128"),
            (dict(scales=torch.zeros(0, N, dtype=F16)), r"scales has 0 rows, which must divide K = 128"),
            (dict(qzeros=torch.zeros(G + 1, N // 8, dtype=I32)), r"qzeros must have shape \(2, 8\)"),
            (dict(qzeros=torch.zeros(G, N // 4, dtype=I32)), r"qzeros must have shape \(2, 8\)"),
        ],
    )
    def test_rules(self, cpu_as_cuda, overrides, pattern):
        with pytest.raises(ValueError, match=rf"^awq_dequantize: {pattern}"):
            self.call(**overrides)

    @pytest.mark.parametrize("dtype", [F16, BF16])
    def test_valid_arguments_reach_the_device_check(self, cpu_as_cuda, dtype):
        with pytest.raises(RuntimeError, match=rf"^awq_dequantize: {NO_GPU_MSG}"):
            self.call(scales=torch.zeros(G, N, dtype=dtype))


# ===================================================================================================
# mixgemm.baseline.awq_gemm
# ===================================================================================================


class TestBaselineAwqGemm:
    def call(self, split_k_iters=8, **overrides):
        args = dict(x=torch.zeros(4, K, dtype=F16), **awq_tensors())
        args.update(overrides)
        return baseline.awq_gemm(args["x"], args["qweight"], args["scales"], args["qzeros"], split_k_iters)

    @pytest.mark.parametrize(
        "overrides, pattern",
        [
            (dict(x=None), r"x must be a torch\.Tensor, got NoneType"),
            (dict(x=torch.zeros(4, K, dtype=BF16)), r"x must have dtype float16, got torch\.bfloat16"),
            (dict(x=torch.zeros(2, 4, K, dtype=F16)), r"x must be 2-D, got shape \(2, 4, 128\)"),
            (dict(x=torch.zeros(K, dtype=F16)), r"x must be 2-D"),
            ({}, r"x must be on a CUDA device, got cpu"),
        ],
    )
    def test_cpu(self, overrides, pattern):
        with pytest.raises(ValueError, match=rf"^baseline\.awq_gemm: {pattern}"):
            self.call(**overrides)

    @pytest.mark.parametrize(
        "overrides, pattern",
        [
            (dict(x=transposed((4, K), F16)), r"x must be contiguous"),
            (dict(x=misaligned((4, K), F16)), r"x must start at a 16-byte aligned address"),
            (dict(qweight=1), r"qweight must be a torch\.Tensor, got int"),
            (dict(qweight=torch.zeros(K, N // 8)), r"qweight must have dtype int32"),
            (dict(qweight=torch.zeros(K * N // 8, dtype=I32)), r"qweight must be 2-D"),
            (dict(qweight=transposed((K, N // 8), I32)), r"qweight must be contiguous"),
            (dict(scales=torch.zeros(G, N, dtype=BF16)), r"scales must have dtype float16, got torch\.bfloat16"),
            (dict(scales=torch.zeros(N, dtype=F16)), r"scales must be 2-D"),
            (dict(qzeros=torch.zeros(G, N // 8, dtype=F16)), r"qzeros must have dtype int32"),
            (dict(qzeros=misaligned((G, N // 8), I32)), r"qzeros must start at a 16-byte aligned address"),
            (dict(qweight=meta_like(awq_tensors()["qweight"])), r"qweight is on meta but x is on cpu"),
            (dict(qzeros=meta_like(awq_tensors()["qzeros"])), r"qzeros is on meta but x is on cpu"),
            (dict(qweight=torch.zeros(96, N // 8, dtype=I32)), r"qweight must have shape \(128, 8\)"),
            (
                dict(x=torch.zeros(4, 48, dtype=F16), qweight=torch.zeros(48, N // 8, dtype=I32),
                     scales=torch.zeros(1, N, dtype=F16), qzeros=torch.zeros(1, N // 8, dtype=I32)),
                r"K = x\.shape\[1\] must be a multiple of 32, got 48",
            ),
            (
                dict(qweight=torch.zeros(K, 9, dtype=I32), scales=torch.zeros(G, 72, dtype=F16),
                     qzeros=torch.zeros(G, 9, dtype=I32)),
                r"N = scales\.shape\[1\] must be a multiple of 64, got 72",
            ),
            (dict(scales=torch.zeros(3, N, dtype=F16)), r"scales has 3 rows, which must divide K = 128"),
            (
                dict(scales=torch.zeros(8, N, dtype=F16), qzeros=torch.zeros(8, N // 8, dtype=I32)),
                r"group size K / scales\.shape\[0\] = 16 must be a multiple of 32",
            ),
            (dict(qzeros=torch.zeros(1, N // 8, dtype=I32)), r"qzeros must have shape \(2, 8\)"),
        ],
    )
    def test_rules(self, cpu_as_cuda, overrides, pattern):
        with pytest.raises(ValueError, match=rf"^baseline\.awq_gemm: {pattern}"):
            self.call(**overrides)

    @pytest.mark.parametrize("split_k_iters", [0, -1, True, 2.0, "8", None])
    def test_split_k_iters(self, cpu_as_cuda, split_k_iters):
        with pytest.raises(ValueError, match=r"^baseline\.awq_gemm: split_k_iters must be a positive int"):
            self.call(split_k_iters=split_k_iters)

    @pytest.mark.parametrize("m", [1, 4, 0])
    def test_valid_arguments_reach_the_device_check(self, cpu_as_cuda, m):
        with pytest.raises(RuntimeError, match=rf"^baseline\.awq_gemm: {NO_GPU_MSG}"):
            self.call(x=torch.zeros(m, K, dtype=F16), split_k_iters=1)


# ===================================================================================================
# mixgemm.prepack, sm80 layout, AWQ int4: the tensors go as they are to the GPU packer (formerly
# packing.prepack_awq_tensors, now layouts.sm80.pack_awq_int4_on_gpu, which validates nothing itself)
# ===================================================================================================


class TestPrepackAwqOnGpu:
    def call(self, group_size=K // G, **overrides):
        args = awq_tensors()
        args.update(overrides)
        return mixgemm.prepack(args["qweight"], args["scales"], args["qzeros"], group_size, layout="sm80")

    @pytest.mark.parametrize(
        "overrides, pattern",
        [
            (dict(qweight=object()), r"qweight must be a torch\.Tensor, got object"),
            (dict(qweight=torch.zeros(K, N // 8, dtype=torch.int16)), r"qweight must have dtype int32"),
            (dict(qweight=torch.zeros(1, K, N // 8, dtype=I32)), r"qweight must be 2-D"),
            ({}, r"qweight must be on a CUDA device, got cpu"),
        ],
    )
    def test_cpu(self, overrides, pattern):
        with pytest.raises(ValueError, match=rf"^prepack: {pattern}"):
            self.call(**overrides)

    @pytest.mark.parametrize(
        "overrides, pattern",
        [
            (dict(qweight=transposed((K, N // 8), I32)), r"qweight must be contiguous"),
            (dict(scales="s"), r"scales must be a torch\.Tensor, got str"),
            (dict(scales=torch.zeros(G, N, dtype=torch.float64)), r"scales must have dtype float16 or bfloat16"),
            (dict(scales=torch.zeros(1, G, N, dtype=F16)), r"scales must be 2-D"),
            (dict(qzeros=torch.zeros(G * N // 8, dtype=I32)), r"qzeros must be 2-D"),
            (dict(qzeros=transposed((G, N // 8), I32)), r"qzeros must be contiguous"),
            (dict(scales=meta_like(awq_tensors()["scales"])), r"scales is on meta but qweight is on cpu"),
            (dict(qweight=torch.zeros(K, 16, dtype=I32)), r"qweight must have shape \(128, 8\)"),
            (
                dict(qweight=torch.zeros(K, 9, dtype=I32), scales=torch.zeros(G, 72, dtype=F16),
                     qzeros=torch.zeros(G, 9, dtype=I32)),
                r"N = scales\.shape\[1\] must be a positive multiple of 64 for the sm80 layout, got 72",
            ),
            (
                dict(qweight=torch.zeros(K, 0, dtype=I32), scales=torch.zeros(G, 0, dtype=F16),
                     qzeros=torch.zeros(G, 0, dtype=I32)),
                r"the weight is empty \(K = 128, N = 0\)",
            ),
            (
                dict(qweight=torch.zeros(40, N // 8, dtype=I32), scales=torch.zeros(1, N, dtype=F16),
                     qzeros=torch.zeros(1, N // 8, dtype=I32)),
                r"K = qweight\.shape\[0\] must be a positive multiple of 16 for the sm80 layout, got 40",
            ),
            (dict(qweight=torch.zeros(0, N // 8, dtype=I32)), r"the weight is empty \(K = 0, N = 64\)"),
            (dict(scales=torch.zeros(3, N, dtype=F16)), r"scales has 3 rows, which must divide K = 128"),
            (dict(qzeros=torch.zeros(G, N // 8 + 1, dtype=I32)), r"qzeros must have shape \(2, 8\)"),
        ],
    )
    def test_rules(self, cpu_as_cuda, overrides, pattern):
        with pytest.raises(ValueError, match=rf"^prepack: {pattern}"):
            self.call(group_size=None, **overrides)

    @pytest.mark.parametrize("name", ["qweight", "scales", "qzeros"])
    def test_unaligned_checkpoint_slices_are_taken(self, cpu_as_cuda, name):
        # PyTorch or the prepack kernel reads a checkpoint's tensors, never the GEMM kernels (they read the fresh,
        # aligned packed copies): a slice that starts at an odd address passes every rule and reaches the device.
        t = awq_tensors()[name]
        with pytest.raises(RuntimeError, match=rf"^prepack: {NO_GPU_MSG}"):
            self.call(**{name: misaligned(tuple(t.shape), t.dtype)})

    @pytest.mark.parametrize("group_size", [32, 128, 16])
    def test_group_size_must_agree_with_scales(self, cpu_as_cuda, group_size):
        with pytest.raises(ValueError, match=rf"^prepack: group_size = {group_size} disagrees with K / scales"):
            self.call(group_size=group_size)

    def test_valid_arguments_reach_the_device_check(self, cpu_as_cuda):
        with pytest.raises(RuntimeError, match=rf"^prepack: {NO_GPU_MSG}"):
            self.call()


# ===================================================================================================
# mixgemm.prepack
# ===================================================================================================


class TestPrepack:
    def call(self, fmt="awq", group_size=None, **overrides):
        args = gptq_tensors() if fmt == "gptq" else awq_tensors()
        args.update(overrides)
        return mixgemm.prepack(args["qweight"], args["scales"], args["qzeros"], group_size, format=fmt)

    @pytest.mark.parametrize("fmt", ["marlin", "AWQ", "", None])
    def test_unknown_format(self, fmt):
        with pytest.raises(ValueError, match=r"^prepack: format must be 'awq', 'gptq' \(v1 zeros\) or 'gptq_v2'"):
            mixgemm.prepack(**awq_tensors(), format=fmt)

    @pytest.mark.parametrize("bits", [3, 16, True, "4", None])
    def test_bits(self, bits):
        with pytest.raises(ValueError, match=r"^prepack: bits must be 4 or 8, got "):
            mixgemm.prepack(**gptq_tensors(), format="gptq", bits=bits)

    @pytest.mark.parametrize(
        "fmt, overrides, pattern",
        [
            # qweight is checked first, then qzeros, then scales (in both formats).
            ("awq", dict(qweight=None), r"qweight must be a torch\.Tensor, got NoneType"),
            ("awq", dict(qweight=torch.zeros(K, N // 8)), r"qweight must have dtype int32"),
            ("awq", dict(qweight=torch.zeros(K * N // 8, dtype=I32)), r"qweight must be 2-D"),
            ("awq", {}, r"qweight must be on a CUDA device, got cpu"),
            ("gptq", dict(qweight=3), r"qweight must be a torch\.Tensor, got int"),
            ("gptq", dict(qweight=torch.zeros(K // 8, N)), r"qweight must have dtype int32"),
            ("gptq", dict(qweight=torch.zeros(K // 8 * N, dtype=I32)), r"qweight must be 2-D"),
            ("gptq", {}, r"qweight must be on a CUDA device, got cpu"),
        ],
    )
    def test_cpu(self, fmt, overrides, pattern):
        with pytest.raises(ValueError, match=rf"^prepack: {pattern}"):
            self.call(fmt, **overrides)

    @pytest.mark.parametrize(
        "fmt, overrides, group_size, pattern",
        [
            ("awq", dict(scales=transposed((G, N), F16)), None, r"scales must be contiguous"),
            ("awq", dict(scales=torch.zeros(3, N, dtype=F16)), None, r"scales has 3 rows, which must divide K"),
            ("awq", dict(qweight=torch.zeros(K, N // 8)), 64, r"qweight must have dtype int32"),
            ("awq", dict(qweight=transposed((K, N // 8), I32)), None, r"qweight must be contiguous"),
            ("awq", dict(qzeros=torch.zeros(G, N // 8, dtype=F16)), None, r"qzeros must have dtype int32"),
            ("awq", dict(qzeros=meta_like(awq_tensors()["qzeros"])), None, r"qzeros is on meta but qweight"),
            ("awq", {}, 32, r"group_size = 32 disagrees with K / scales\.shape\[0\] = 64"),
            ("gptq", dict(qweight=transposed((K // 8, N), I32)), None, r"qweight must be contiguous"),
            ("gptq", dict(qzeros=torch.zeros(G, N // 8)), None, r"qzeros must have dtype int32"),
            ("gptq", dict(qzeros=torch.zeros(G * N // 8, dtype=I32)), None, r"qzeros must be 2-D"),
            ("gptq", dict(scales=torch.zeros(G, N, dtype=I32)), None, r"scales must have dtype float16"),
            ("gptq", dict(scales=torch.zeros(G, 2 * N, dtype=F16)), None, r"qweight must have shape \(16, 128\)"),
            ("gptq", dict(qweight=torch.zeros(5, N, dtype=I32), scales=torch.zeros(1, N, dtype=F16),
                          qzeros=torch.zeros(1, N // 8, dtype=I32)), None,
             r"K = 8 \* qweight\.shape\[0\] must be a positive multiple of 16 for the sm80 layout, got 40"),
        ],
    )
    def test_rules(self, cpu_as_cuda, fmt, overrides, group_size, pattern):
        with pytest.raises(ValueError, match=rf"^prepack: {pattern}"):
            self.call(fmt, group_size, **overrides)

    def test_gptq_qweight_and_qzeros_must_agree_on_n(self, cpu_as_cuda):
        with pytest.raises(ValueError, match=r"^prepack: qzeros must have shape \(2, 8\) \(\[K/G, N/8\]"):
            self.call("gptq", qzeros=torch.zeros(G, 2 * N // 8, dtype=I32))

    @pytest.mark.parametrize("fmt", ["awq", "gptq"])
    @pytest.mark.parametrize("group_size", [None, 64])
    def test_valid_arguments_reach_the_device_check(self, cpu_as_cuda, fmt, group_size):
        with pytest.raises(RuntimeError, match=rf"^prepack: {NO_GPU_MSG}"):
            self.call(fmt, group_size)


# ---------------------------------------------------------------------------------------------------
# prepack refuses only what no kernel path runs (mixgemm.shape_rules). Which prepack runs on CPU tensors: the
# sm90 layout (PyTorch gathers, any width) and the sm80 layout's int8 packer (PyTorch too); the sm80 int4 packer
# is a GPU kernel (prepack_awq_qweight, fold_awq_zeros), so an sm80 int4 weight is followed here only up to the
# device check, past every rule (cpu_as_cuda), and what the kernel writes is tests/layouts/test_prepack_gpu.py's.


def paths_reading(layout):
    return [r.path for r in shape_rules.table() if r.layout == layout]


class TestPrepackShapeRules:
    @pytest.mark.parametrize("K, G", [(80, 16), (96, 16), (48, 48), (128, 16)])
    def test_the_dequant_paths_shapes_are_packed_on_the_sm80_layout_int8(self, K, G):
        # K = 80 or a group of 16: only the dequant path runs it (the other paths want K % 64 and groups of 32).
        assert shape_rules.violation("dequant", "sm80", N, K, G) is None
        assert shape_rules.violation("sm80", "sm80", N, K, G) is not None
        ckpt = formats.random_gptq_int8_weight(K, N, G)
        w = mixgemm.prepack(ckpt["qweight"], ckpt["scales"], ckpt["qzeros"], format="gptq", bits=8, layout="sm80")
        assert (w.layout, w.bits, w.k, w.n, w.group_size) == ("sm80", 8, K, N, G)
        assert w.packed.device.type == "cpu" and tuple(w.packed.shape) == sm80_layout.packed_shape(K, N, 8)
        ref = sm80_layout.prepack_gptq_int8_reference(ckpt["qweight"], ckpt["scales"], ckpt["qzeros"], G)
        for got, want in zip((w.packed, w.scales, w.offsets), ref):
            assert torch.equal(got, want)

    @pytest.mark.parametrize("bits", [4, 8])
    @pytest.mark.parametrize("K, G", [(80, 16), (96, 32), (128, 16)])
    def test_the_dequant_paths_shapes_are_packed_on_the_sm90_layout(self, bits, K, G):
        if bits == 4:
            ckpt = formats.random_awq_weight(K, N, G)
            w = mixgemm.prepack(ckpt["qweight"], ckpt["scales"], ckpt["qzeros"], layout="sm90")
            q = formats.unpack_awq(ckpt["qweight"])
        else:
            ckpt = formats.random_gptq_int8_weight(K, N, G)
            w = mixgemm.prepack(ckpt["qweight"], ckpt["scales"], ckpt["qzeros"], format="gptq", bits=8,
                                layout="sm90")
            q = formats.unpack_gptq_qweight_int8(ckpt["qweight"])
        assert (w.layout, w.bits, w.k, w.group_size) == ("sm90", bits, K, G)
        assert torch.equal(layouts.sm90.unpack(w.packed, bits), q.to(torch.int32))

    @pytest.mark.parametrize("K, groups", [(80, 5), (128, 8), (48, 1)])
    def test_the_dequant_paths_shapes_pass_every_rule_on_the_sm80_layout_int4(self, cpu_as_cuda, K, groups):
        # The AWQ int4 packer is a GPU kernel: on CPU the call ends at the device check, every rule passed.
        t = awq_tensors(k=K, groups=groups)
        with pytest.raises(RuntimeError, match=rf"^prepack: {NO_GPU_MSG}"):
            mixgemm.prepack(t["qweight"], t["scales"], t["qzeros"], layout="sm80")
        t = gptq_tensors(k=K, groups=groups)
        with pytest.raises(RuntimeError, match=rf"^prepack: {NO_GPU_MSG}"):
            mixgemm.prepack(t["qweight"], t["scales"], t["qzeros"], format="gptq", layout="sm80")

    @pytest.mark.parametrize("layout", ["sm80", "sm90"])
    @pytest.mark.parametrize("K, groups", [(128, 16), (128, 32), (64, 16)])  # group sizes 8, 4, 4
    def test_a_weight_no_path_runs_is_refused_with_every_paths_rule(self, cpu_as_cuda, layout, K, groups):
        t = awq_tensors(k=K, groups=groups)
        G = K // groups
        with pytest.raises(ValueError) as error:
            mixgemm.prepack(t["qweight"], t["scales"], t["qzeros"], layout=layout)
        message = str(error.value)
        assert message.startswith(f"prepack: no kernel path runs a weight of K = {K}, N = {N}, group_size = {G} in "
                                  f"the '{layout}' layout: ")
        reading = paths_reading(layout)
        assert "dequant" in reading and "sm80" in reading and "decode" in reading
        assert ("sm90" in reading) == (layout == "sm90")
        for path in reading:
            assert f"{path} path: {shape_rules.violation(path, layout, N, K, G)}" in message
            assert f"group_size must be a multiple of {shape_rules.rule(path, layout).group_multiple}" in message
        assert message.count(" path: ") == len(reading)

    def test_a_weight_no_path_runs_is_refused_before_the_device(self, cpu_as_cuda):
        # The same rule for every format and width, before anything reaches a GPU.
        t = gptq_tensors(groups=16)
        with pytest.raises(ValueError, match=r"^prepack: no kernel path runs a weight of K = 128, N = 64, "
                                             r"group_size = 8 in the 'sm80' layout"):
            mixgemm.prepack(t["qweight"], t["scales"], t["qzeros"], format="gptq", layout="sm80")
        ckpt = formats.random_gptq_int8_weight(128, N, 128)
        scales = torch.zeros(16, N, dtype=F16)
        with pytest.raises(ValueError, match=r"^prepack: no kernel path runs .* group_size = 8 in the 'sm80'"):
            mixgemm.prepack(ckpt["qweight"], scales, None, format="gptq", bits=8, layout="sm80")

    @pytest.mark.parametrize("layout", ["sm80", "sm90"])
    def test_check_weight_shape(self, layout):
        packing.check_weight_shape("f", layout, 80, 64, 16)  # the dequant path's
        packing.check_weight_shape("f", layout, 4096, 4096, 128)
        packing.check_weight_shape("f", layout, 4096, 4096, 4096)
        with pytest.raises(ValueError, match=rf"^f: N must be a positive multiple of 64 for the {layout} layout, "
                                             rf"got 96$"):
            packing.check_weight_shape("f", layout, 128, 96, 64)
        with pytest.raises(ValueError, match=rf"^f: K must be a positive multiple of 16 for the {layout} layout, "
                                             rf"got 40$"):
            packing.check_weight_shape("f", layout, 40, 64, 8)
        for bad in (0, 48, -16, 16.0, None):
            with pytest.raises(ValueError, match=r"^f: group_size must be a positive divisor of K = 128, got "):
                packing.check_weight_shape("f", layout, 128, 64, bad)
        with pytest.raises(ValueError, match=rf"^f: no kernel path runs a weight of K = 128, N = 64, group_size = 8 "
                                             rf"in the '{layout}' layout"):
            packing.check_weight_shape("f", layout, 128, 64, 8)

    @pytest.mark.parametrize("layout", ["sm80", "sm90"])
    def test_check_runnable_names_every_path(self, layout):
        shape_rules.check_runnable("f", layout, 64, 80, 16)
        with pytest.raises(ValueError) as error:
            shape_rules.check_runnable("f", layout, 64, 128, 8)
        for path in paths_reading(layout):
            assert f"{path} path: group_size must be a multiple of" in str(error.value)


# ---------------------------------------------------------------------------------------------------
# prepack refuses NaN / infinite scales, and offsets that overflow the activation dtype.


def _with_nonfinite(scales, count):
    bad = scales.clone()
    values = (float("nan"), float("inf"), float("-inf"))
    for i in range(count):
        bad.view(-1)[7 * i] = values[i % 3]
    return bad


class TestPrepackFinite:
    @pytest.mark.parametrize("dtype", [F16, BF16])
    @pytest.mark.parametrize("count", [1, 3])
    @pytest.mark.parametrize("fmt", ["awq", "gptq"])
    def test_sm90_layout_nonfinite_scales(self, dtype, count, fmt):
        ckpt = formats.random_awq_weight(128, 128, 64, dtype=dtype)
        qweight, qzeros = ckpt["qweight"], ckpt["qzeros"]
        if fmt == "gptq":
            qweight, qzeros = formats.awq_to_gptq(qweight, qzeros)
        bad = _with_nonfinite(ckpt["scales"], count)
        for zeros in (qzeros, None):  # with zero points or without (whose offsets are 0)
            with pytest.raises(ValueError, match=rf"^prepack: scales holds {count} NaN or infinite value\(s\); a "
                                                 r"quantized weight's scales must be finite$"):
                mixgemm.prepack(qweight, bad, zeros, format=fmt, layout="sm90")
        mixgemm.prepack(qweight, ckpt["scales"], qzeros, format=fmt, layout="sm90")  # the finite weight packs

    @pytest.mark.parametrize("layout", ["sm80", "sm90"])
    def test_int8_nonfinite_scales(self, layout):
        ckpt = formats.random_gptq_int8_weight(128, 64, 64)
        bad = _with_nonfinite(ckpt["scales"], 2)
        with pytest.raises(ValueError, match=r"^prepack: scales holds 2 NaN or infinite value\(s\)"):
            mixgemm.prepack(ckpt["qweight"], bad, ckpt["qzeros"], format="gptq", bits=8, layout=layout)

    @pytest.mark.parametrize("fmt", ["awq", "gptq"])
    def test_sm80_int4_nonfinite_scales_are_refused_before_the_device(self, cpu_as_cuda, fmt):
        # The sm80 int4 packer is a GPU kernel; the scales are checked before it (and before the device).
        t = gptq_tensors() if fmt == "gptq" else awq_tensors()
        t["scales"] = _with_nonfinite(torch.ones(G, N, dtype=F16), 1)
        with pytest.raises(ValueError, match=r"^prepack: scales holds 1 NaN or infinite value\(s\)"):
            mixgemm.prepack(t["qweight"], t["scales"], t["qzeros"], format=fmt, layout="sm80")

    def test_nonfinite_scales_are_refused_after_the_shape_rules(self, cpu_as_cuda):
        t = awq_tensors(groups=16)  # group size 8: no path runs it
        t["scales"] = _with_nonfinite(t["scales"], 1)
        with pytest.raises(ValueError, match=r"^prepack: no kernel path runs"):
            mixgemm.prepack(t["qweight"], t["scales"], t["qzeros"], layout="sm90")

    @pytest.mark.parametrize("dtype, scale", [(F16, 30000.0), (BF16, 2.0**125)])
    def test_sm90_layout_offsets_that_overflow(self, dtype, scale):
        # (8 - z) * s with z = 0 is 8 s: past the dtype's largest finite value although s itself is finite.
        K = 128
        scales = torch.full((1, N), scale, dtype=dtype)
        qweight = torch.zeros(K, N // 8, dtype=I32)
        zeros = torch.zeros(1, N // 8, dtype=I32)
        assert torch.isfinite(scales).all() and not torch.isfinite((8 * scales.float()).to(dtype)).all()
        with pytest.raises(ValueError, match=rf"^prepack: offsets \(the folded zero points in the activation "
                                             rf"dtype\) holds {N} NaN or infinite value\(s\)"):
            mixgemm.prepack(qweight, scales, zeros, layout="sm90")
        # Symmetric weights have no offsets on the sm90 layout: the same scales pack.
        assert mixgemm.prepack(qweight, scales, None, layout="sm90").scale_only

    def test_sm80_layout_int8_offsets_that_overflow(self):
        # -z * s with z = 255: past fp16's 65504 for s = 300.
        K = 64
        qweight = torch.zeros(K // 4, N, dtype=I32)
        scales = torch.full((1, N), 300.0, dtype=F16)
        qzeros = formats.pack_gptq_zeros_int8(torch.full((1, N), 255, dtype=torch.uint8), v1=False)
        with pytest.raises(ValueError, match=r"^prepack: offsets \(the folded zero points in the activation dtype\) "
                                             rf"holds {N} NaN or infinite value\(s\)"):
            mixgemm.prepack(qweight, scales, qzeros, format="gptq_v2", bits=8, layout="sm80")
        # Smaller scales fold to finite offsets.
        w = mixgemm.prepack(qweight, scales / 8, qzeros, format="gptq_v2", bits=8, layout="sm80")
        assert torch.isfinite(w.offsets).all()


# ===================================================================================================
# mixgemm.gemm (and its config resolution)
# ===================================================================================================


class TestGemm:
    @pytest.mark.parametrize("packed", [None, "w", torch.zeros(1, 2, 32, 4, dtype=I32), awq_tensors()])
    def test_packed_must_be_a_packed_weight(self, packed):
        with pytest.raises(ValueError, match=r"^gemm: packed must be a PackedWeight from mixgemm\.prepack"):
            mixgemm.gemm(torch.zeros(2, K, dtype=F16), packed)

    @pytest.mark.parametrize(
        "x, pattern",
        [
            ([[0.0] * K], r"x must be a torch\.Tensor with at least one dimension"),
            (torch.tensor(1.0, dtype=F16), r"x must be a torch\.Tensor with at least one dimension"),
            (torch.zeros(2, 64, dtype=F16), r"x\.shape\[-1\] must equal the weight's K = 128, got 64"),
            (torch.zeros(2, 3, 256, dtype=F16), r"x\.shape\[-1\] must equal the weight's K = 128, got 256"),
            (torch.zeros(2, K), r"x must have dtype float16, got torch\.float32"),
            (torch.zeros(2, K, dtype=BF16), r"x must have dtype float16, got torch\.bfloat16"),
            (torch.zeros(2, K, dtype=F16), r"x must be on a CUDA device, got cpu"),
            (torch.zeros(K, dtype=F16), r"x must be on a CUDA device, got cpu"),
            (torch.zeros(2, 3, K, dtype=F16), r"x must be on a CUDA device, got cpu"),
            (transposed((2, K), F16), r"x must be on a CUDA device, got cpu"),
        ],
    )
    def test_x_cpu(self, x, pattern):
        with pytest.raises(ValueError, match=rf"^gemm: {pattern}"):
            mixgemm.gemm(x, packed_weight())

    def test_x_dtype_follows_the_weight(self):
        with pytest.raises(ValueError, match=r"^gemm: x must have dtype bfloat16, got torch\.float16"):
            mixgemm.gemm(torch.zeros(2, K, dtype=F16), packed_weight(dtype=BF16))

    def test_bias_is_checked_after_x(self):
        # On CPU the x device rule fires before any bias rule.
        with pytest.raises(ValueError, match=r"^gemm: x must be on a CUDA device"):
            mixgemm.gemm(torch.zeros(2, K, dtype=F16), packed_weight(), bias="bias")

    @pytest.mark.parametrize(
        "x, bias, pattern",
        [
            (transposed((2, K), F16), None, r"x must be contiguous"),
            (misaligned((2, K), F16), None, r"x must start at a 16-byte aligned address"),
            (None, [0.0] * N, r"bias must be a torch\.Tensor, got list"),
            (None, torch.zeros(N), r"bias must have dtype float16, got torch\.float32"),
            (None, torch.zeros(1, N, dtype=F16), r"bias must be 1-D, got shape \(1, 64\)"),
            (None, misaligned((N,), F16), r"bias must start at a 16-byte aligned address"),
            (None, torch.zeros(N // 2, dtype=F16), r"bias must have shape \(64,\) \(one value per output column\)"),
            (None, torch.zeros(N + 8, dtype=F16), r"bias must have shape \(64,\)"),
            (None, torch.empty(N, dtype=F16, device="meta"), r"bias is on meta but x is on cpu"),
        ],
    )
    def test_rules(self, cpu_as_cuda, x, bias, pattern):
        x = torch.zeros(2, K, dtype=F16) if x is None else x
        with pytest.raises(ValueError, match=rf"^gemm: {pattern}"):
            mixgemm.gemm(x, packed_weight(), bias=bias)

    def test_packed_weight_on_another_device(self, cpu_as_cuda):
        # The packed tensors are checked against each other first, then against x.
        pw = packed_weight(packed=torch.empty(1, K // 16, 32, 4, dtype=I32, device="meta"))
        with pytest.raises(ValueError, match=r"^gemm: scales is on cpu but packed is on meta"):
            mixgemm.gemm(torch.zeros(2, K, dtype=F16), pw)
        pw = packed_weight(
            packed=torch.empty(1, K // 16, 32, 4, dtype=I32, device="meta"),
            scales=torch.empty(G, N, dtype=F16, device="meta"),
            offsets=torch.empty(G, N, dtype=F16, device="meta"),
        )
        with pytest.raises(ValueError, match=r"^gemm: packed is on meta but x is on cpu"):
            mixgemm.gemm(torch.zeros(2, K, dtype=F16), pw)

    @pytest.mark.parametrize("shape", [(2, K), (K,), (2, 3, K)])
    @pytest.mark.parametrize("dtype", [F16, BF16])
    def test_valid_arguments_reach_the_device_check(self, cpu_as_cuda, shape, dtype):
        with pytest.raises(RuntimeError, match=rf"^gemm: {NO_GPU_MSG}"):
            mixgemm.gemm(torch.zeros(shape, dtype=dtype), packed_weight(dtype=dtype),
                         bias=torch.zeros(N, dtype=dtype))

    @pytest.mark.parametrize("shape", [(0, K), (2, 0, K)])
    def test_empty_x_returns_empty_output(self, cpu_as_cuda, shape):
        out = mixgemm.gemm(torch.zeros(shape, dtype=F16), packed_weight())
        assert tuple(out.shape) == shape[:-1] + (N,) and out.dtype == F16

    @pytest.mark.parametrize("config", ["fast", "", "AUTO", "gemv", "sm80_64x128"])
    def test_empty_x_still_checks_the_config_argument(self, cpu_as_cuda, config):
        # Nothing is launched for M = 0, but a config argument that could never be valid is an error.
        with pytest.raises(ValueError, match=r"^gemm: config must be 'auto', a path name \(sm80, decode, sm90, "
                                             rf"dequant\) or a GemmConfig, got {re.escape(repr(config))}$"):
            mixgemm.gemm(torch.zeros(0, K, dtype=F16), packed_weight(), config=config)
        with pytest.raises(ValueError, match=r"^gemm: config must be 'auto', a path name or a GemmConfig, got int$"):
            mixgemm.gemm(torch.zeros(0, K, dtype=F16), packed_weight(), config=3)

    @pytest.mark.parametrize("config", ["auto", "sm80", "decode", "dequant", "fast"])
    def test_the_device_is_checked_before_the_config(self, cpu_as_cuda, config):
        with pytest.raises(RuntimeError, match=rf"^gemm: {NO_GPU_MSG}"):
            mixgemm.gemm(torch.zeros(2, K, dtype=F16), packed_weight(), config=config)


class TestResolveConfig:
    @pytest.mark.parametrize("config", ["fast", "", "AUTO", "gemv", "sm90_128x128"])
    def test_unknown_string(self, fake_gpu, config):
        with pytest.raises(ValueError, match=r"^gemm: config must be 'auto', a path name \(sm80, decode, sm90, "
                                             rf"dequant\) or a GemmConfig, got {re.escape(repr(config))}$"):
            ops.resolve_config(4, packed_weight(), config)

    @pytest.mark.parametrize("config, type_name", [(None, "NoneType"), (3, "int"), ((16, 128), "tuple")])
    def test_wrong_type(self, fake_gpu, config, type_name):
        with pytest.raises(ValueError, match=rf"^gemm: config must be 'auto', a path name or a GemmConfig, got "
                                             rf"{type_name}$"):
            ops.resolve_config(4, packed_weight(), config)

    def test_a_config_name_is_not_a_config(self, fake_gpu):
        # gemm takes config objects (or "auto" / a path name); names are mixgemm.paths.from_name's.
        name = mixgemm.compiled_configs()[0].name
        with pytest.raises(ValueError, match=r"^gemm: config must be 'auto', a path name"):
            ops.resolve_config(4, packed_weight(), name)
        assert ops.resolve_config(4, packed_weight(), paths.from_name(name)) == paths.from_name(name)

    def test_the_device_is_checked_first(self, cpu_as_cuda):
        # Without a GPU's facts, even a malformed config argument gets the device error.
        with pytest.raises(RuntimeError, match=rf"^gemm: {NO_GPU_MSG}"):
            ops.resolve_config(4, packed_weight(), "fast")

    @pytest.mark.parametrize("dtype", [F16, BF16])
    def test_uncompiled_tile(self, fake_gpu, dtype):
        cfg = Sm80Config(32, 32, 64, 16, 16, 64, 7)
        key = KernelKey.of(dtype)
        compiled = ", ".join(c.kernel_name for c in mixgemm.compiled_configs(dtype))
        with pytest.raises(ValueError, match=rf"^gemm: config 32x32x64_w16x16x64_s7 is not compiled into this build "
                                             rf"for {key.name} weights; its sm80 configs for them: "
                                             rf"{re.escape(compiled)}$"):
            ops.resolve_config(4, packed_weight(dtype=dtype), cfg)

    @pytest.mark.parametrize("dtype", [F16, BF16])
    def test_compiled_tile_passes_with_its_split(self, fake_gpu, dtype):
        configs = mixgemm.compiled_configs(dtype, path=None)
        assert {c.path for c in configs} >= {"sm80", "decode", "dequant"}
        for cfg in configs:
            if cfg.path in ("sm80", "decode"):  # the paths whose kernels read the sm80 layout and split K
                split = cfg.with_split_k(2, "parallel" if cfg.path == "sm80" else "serial")
                assert ops.resolve_config(4, packed_weight(dtype=dtype), split) == split
            elif cfg.path == "dequant":
                assert ops.resolve_config(4, packed_weight(dtype=dtype), cfg) == cfg

    def test_a_split_the_problem_cannot_take(self, fake_gpu):
        cfg = mixgemm.compiled_configs(F16)[0].with_split_k(3, "serial")  # K / 64 = 2 k-tiles
        with pytest.raises(ValueError, match=rf"^gemm: config {cfg.name} cannot run M = 4, N = 64, K = 128, "
                                             r"group_size = 64: split_k = 3 is more than K / 64 = 2 k-tiles$"):
            ops.resolve_config(4, packed_weight(), cfg)

    def test_a_path_name_is_that_paths_heuristic_choice(self, fake_gpu):
        pw = packed_weight(n=4096, k=4096, groups=32)
        key, gpu = pw.key, FAKE_GPU
        for M in (1, 16, 300):
            problem = GemmProblem(M, 4096, 4096, 128)
            for name in ("sm80", "dequant") + (("decode",) if M <= 16 else ()):
                got = ops.resolve_config(M, pw, name)
                assert got.path == name
                assert got == paths.PATHS[name].choose(paths.PATHS[name].compiled(key), problem, key, gpu)
        with pytest.raises(ValueError, match=r"^gemm: the sm90 path does not read weights in the 'sm80' layout$"):
            ops.resolve_config(1, pw, "sm90")
        # The decode path takes at most 16 rows: asked for more, the error says why.
        with pytest.raises(ValueError, match=r"^gemm: config='decode': mixgemm: no kernel path runs M = 17, "):
            ops.resolve_config(17, pw, "decode")

    def test_auto_uses_the_heuristic(self, fake_gpu):
        pw = packed_weight(n=4096, k=4096, groups=32)
        for M in (1, 16, 300, 5000):
            got = ops.resolve_config(M, pw, "auto")
            problem = GemmProblem(M, 4096, 4096, 128)
            assert got == dispatch.heuristic(dispatch.compiled(pw.key), problem, pw.key, FAKE_GPU)
            assert got.path == dispatch.path_order(problem, "sm80", FAKE_GPU.sm_count)[0]

    def test_auto_prefers_a_valid_tuned_entry(self, fake_gpu):
        pw = packed_weight(n=4096, k=4096, groups=32)
        tuned = mixgemm.compiled_configs(F16)[-1].with_split_k(3, "parallel")
        assert tuned != ops.resolve_config(1, pw, "auto")
        tuning_cache.save_choice("FakeGPU", 1, 4096, 4096, 128, pw.key, tuned, path=fake_gpu)
        assert ops.resolve_config(1, pw, "auto") == tuned
        # Filed under the weight's key: a bf16 weight of the same shape does not see it.
        assert ops.resolve_config(1, packed_weight(n=4096, k=4096, groups=32, dtype=BF16), "auto") != tuned
        # A named config is never replaced by the tuned one.
        named = mixgemm.compiled_configs(F16)[0]
        assert ops.resolve_config(1, pw, named) == named

    @pytest.mark.parametrize("stale", ["uncompiled-tile", "split-too-large", "decode-rows"])
    def test_auto_ignores_a_stale_tuned_entry(self, fake_gpu, stale):
        pw = packed_weight(n=128, k=128, groups=1)
        M = 9 if stale == "decode-rows" else 1
        if stale == "uncompiled-tile":
            tuned = Sm80Config(32, 32, 64, 16, 16, 64, 7)
        elif stale == "split-too-large":
            tuned = mixgemm.compiled_configs(F16)[0].with_split_k(4, "serial")  # K / 64 = 2
        else:
            tuned = DecodeConfig(8, 4)  # 8 rows at most, asked for 9
        tuning_cache.save_choice("FakeGPU", M, 128, 128, 128, pw.key, tuned, path=fake_gpu)
        got = ops.resolve_config(M, pw, "auto")
        assert got == dispatch.heuristic(dispatch.compiled(pw.key), GemmProblem(M, 128, 128, 128), pw.key, FAKE_GPU)
        assert got != tuned

    def test_no_path_runs_a_hand_made_weight(self, fake_gpu):
        # prepack never makes such a weight (it refuses what no path runs); one made by hand gets every path's
        # reason, before anything is launched.
        pw = packed_weight(groups=16)  # group size 8
        with pytest.raises(RuntimeError, match=r"^mixgemm: no kernel path runs M = 4, N = 64, K = 128, group_size = 8 "
                                               r"for fp16-int4-sm80-scale_offset \(.*dequant: group_size must be a "
                                               r"multiple of 16"):
            ops.resolve_config(4, pw, "auto")


# ===================================================================================================
# The config types (the old GemmConfig's sm80 form is Sm80Config; each path has its own)
# ===================================================================================================


TILE = (16, 128, 64, 16, 32, 64, 4)


class TestSm80ConfigValidation:
    @pytest.mark.parametrize("split_k", [0, -1, 1.0, 2.5, "2", None, True])
    def test_split_k_must_be_a_positive_int(self, split_k):
        with pytest.raises(ValueError, match=r"^Sm80Config: split_k must be a positive int"):
            Sm80Config(*TILE, split_k=split_k, split_k_mode="serial")

    @pytest.mark.parametrize("mode", ["Serial", "", "stream-k", None])
    def test_unknown_mode(self, mode):
        pattern = r"^Sm80Config: split_k_mode must be one of \('none', 'serial', 'parallel', 'streamk'\)"
        with pytest.raises(ValueError, match=pattern):
            Sm80Config(*TILE, split_k=2, split_k_mode=mode)

    @pytest.mark.parametrize(
        "split_k, mode", [(1, "serial"), (1, "parallel"), (2, "none"), (16, "none")]
    )
    def test_split_k_and_mode_must_agree(self, split_k, mode):
        with pytest.raises(
            ValueError, match=rf"split_k == 1 needs split_k_mode 'none'.*got split_k={split_k}, split_k_mode='{mode}'"
        ):
            Sm80Config(*TILE, split_k=split_k, split_k_mode=mode)

    def test_mode_defaults_to_none_which_rejects_split(self):
        with pytest.raises(ValueError, match=r"split_k_mode"):
            Sm80Config(*TILE, split_k=4)

    @pytest.mark.parametrize("split_k, mode", [(1, "parallel"), (3, "none"), (0, None)])
    def test_with_split_k_validates(self, split_k, mode):
        with pytest.raises(ValueError, match=r"^Sm80Config: split_k"):
            Sm80Config(*TILE).with_split_k(split_k, mode)

    @pytest.mark.parametrize("split_k, mode", [(1, "none"), (2, "serial"), (16, "parallel"), (1, "streamk"),
                                               (264, "streamk")])
    def test_valid_combinations(self, split_k, mode):
        cfg = Sm80Config(*TILE, split_k=split_k, split_k_mode=mode)
        assert (cfg.split_k, cfg.split_k_mode) == (split_k, mode)
        assert dataclasses.astuple(cfg)[:7] == TILE
        assert isinstance(cfg, GemmConfig) and cfg.path == "sm80"

    @pytest.mark.parametrize("index", range(7))
    @pytest.mark.parametrize("value", [0, -64, 16.0, "16", True])
    def test_tile_fields_must_be_positive_ints(self, index, value):
        fields = list(TILE)
        fields[index] = value
        with pytest.raises(ValueError, match=r"^Sm80Config: \w+ must be a positive int"):
            Sm80Config(*fields)


class TestOtherConfigValidation:
    @pytest.mark.parametrize("rows, warps, split_k, pattern", [
        (4, 4, 1, r"rows must be 8 or 16"),
        (True, 4, 1, r"rows must be 8 or 16"),
        (8, 0, 1, r"warps must be a positive int"),
        (8, 4, 0, r"split_k must be a positive int"),
    ])
    def test_decode(self, rows, warps, split_k, pattern):
        with pytest.raises(ValueError, match=rf"^DecodeConfig: {pattern}"):
            DecodeConfig(rows, warps, split_k)

    @pytest.mark.parametrize("mode", ["parallel", "streamk"])
    def test_decode_splits_k_serially_only(self, mode):
        with pytest.raises(ValueError, match=r"^DecodeConfig: split_k_mode must be one of \('none', 'serial'\)"):
            DecodeConfig(8, 4).with_split_k(2, mode)
        assert DecodeConfig(8, 4).with_split_k(2).split_k_mode == "serial"

    def test_sm90_splits_only_through_its_stream_k_scheduler(self):
        with pytest.raises(ValueError, match=r"^Sm90Config: an sm90 config splits K only through its stream-K "
                                             r"scheduler"):
            Sm90Config(128, 128, split_k=2)
        with pytest.raises(ValueError, match=r"^Sm90Config: schedule must be one of"):
            Sm90Config(128, 128, schedule="warpspecialized")
        with pytest.raises(ValueError, match=r"^Sm90Config: split_k_mode must be one of \('none', 'serial', "
                                             r"'reduce_scatter'\)"):
            Sm90Config(128, 128, scheduler="streamk").with_split_k(2, "parallel")
        assert Sm90Config(128, 128, scheduler="streamk").with_split_k(2).split_k_mode == "serial"

    def test_dequant_never_splits(self):
        with pytest.raises(ValueError, match=r"^DequantConfig: the dequant path runs one cuBLAS GEMM: split_k must "
                                             r"be 1"):
            DequantConfig().with_split_k(2)
        assert DequantConfig().with_split_k(1) == DequantConfig()


@pytest.mark.parametrize("dtype", [torch.float32, torch.int32, torch.float64])
def test_compiled_configs_rejects_other_dtypes(dtype):
    with pytest.raises(ValueError, match=r"^compiled_configs: .*dtype must be float16 or bfloat16"):
        mixgemm.compiled_configs(dtype)


@pytest.mark.parametrize("kwargs, pattern", [
    (dict(bits=3), r"weight_bits must be one of \(4, 8\), got 3"),
    (dict(layout="sm70"), r"layout must be one of \('sm80', 'sm90'\), got 'sm70'"),
    (dict(path="gemv"), r"path must be one of \('sm80', 'decode', 'sm90', 'dequant'\) or None, got 'gemv'"),
])
def test_compiled_configs_rejects_other_arguments(kwargs, pattern):
    with pytest.raises(ValueError, match=rf"^compiled_configs: .*{pattern}"):
        mixgemm.compiled_configs(**kwargs)


class TestActOrder:
    """The g_idx rules, checked before anything reaches the GPU."""

    def test_plain_g_idx_needs_no_permutation(self):
        assert packing._act_order_permutation("f", torch.arange(256) // 64, 256, 4) is None

    def test_scattered_groups_give_a_sorting_permutation(self):
        g_idx = torch.randperm(256) % 4
        perm = packing._act_order_permutation("f", g_idx, 256, 4)
        assert torch.equal(g_idx[perm], torch.arange(256) // 64)

    @pytest.mark.parametrize(
        "g_idx, pattern",
        [
            (torch.zeros(255, dtype=torch.int64), r"g_idx must be a 1-D tensor of K = 256"),
            (torch.zeros(256), r"g_idx must have dtype int32 or int64"),
            (torch.full((256,), 4), r"g_idx values must lie in \[0, 4\)"),
            (torch.arange(256) % 3, r"every group of g_idx must hold exactly group_size = 64 rows"),
        ],
    )
    def test_bad_g_idx(self, g_idx, pattern):
        with pytest.raises(ValueError, match=rf"^f: {pattern}"):
            packing._act_order_permutation("f", g_idx, 256, 4)

    def test_g_idx_needs_the_gptq_format(self, cpu_as_cuda):
        with pytest.raises(ValueError, match=r"^prepack: g_idx \(act-order\) is a GPTQ field"):
            mixgemm.prepack(**awq_tensors(), g_idx=torch.arange(K) // 64)


# ===================================================================================================
# Weight layouts: prepack's layout argument, PackedWeight.layout, and which configs read which layout
# ===================================================================================================


def sm90_weight(n=N, k=K, groups=G, dtype=F16, bits=4, **overrides) -> packing.PackedWeight:
    """An sm90-layout PackedWeight built by hand from CPU tensors of the right shapes."""
    fields = dict(packed=torch.zeros(k // 16, n // 16, 32, bits // 4, dtype=I32), bits=bits, layout="sm90")
    fields.update(overrides)
    return packed_weight(n, k, groups, dtype, **fields)


# A build's registries, by hand, so the rules below do not depend on the kernels this build compiled.
SM80_TILE = Sm80Config(16, 256, 64, 16, 64, 64, 3)
DECODE_8 = DecodeConfig(8, 4)
SM90_TILE = Sm90Config(128, 128, scheduler="persistent")
SM90_PINGPONG = Sm90Config(128, 64, schedule="pingpong", scheduler="persistent")
SM80_64 = Sm80Config(64, 128, 64, 32, 64, 64, 4)
HAND_COMPILED = (SM80_TILE, SM80_64, DECODE_8, DecodeConfig(16, 4), SM90_TILE, SM90_PINGPONG)


@pytest.fixture
def hand_compiled(monkeypatch):
    """The hand build; of the sm80 tiles, 64 x 128 is also compiled for sm90-layout weights."""
    monkeypatch.setattr(paths.base, "_compiled_configs", fake_compiled(HAND_COMPILED, sm90_layout_tiles=((64, 128),)))


def test_hand_compiled_stands_in_for_the_build(hand_compiled):
    # What the rules below assume of the fake: each path lists its own configs per layout.
    assert mixgemm.compiled_configs(path="sm80", layout="sm80") == [SM80_TILE, SM80_64]
    assert mixgemm.compiled_configs(path="sm80", layout="sm90") == [SM80_64]
    assert mixgemm.compiled_configs(path="sm90", layout="sm80") == []
    assert mixgemm.compiled_configs(path="sm90", layout="sm90") == [SM90_TILE, SM90_PINGPONG]
    assert mixgemm.compiled_configs(BF16, 8, path="decode") == [DECODE_8, DecodeConfig(16, 4)]


class TestLayouts:
    @pytest.mark.parametrize("layout", ["sm91", "SM90", "", None, "cuda"])
    def test_prepack_rejects_an_unknown_layout(self, layout):
        # Before any tensor rule: the argument is wrong whatever the tensors are.
        with pytest.raises(ValueError, match=rf"^prepack: layout must be 'auto', 'sm80' or 'sm90', got {layout!r}"):
            mixgemm.prepack(**awq_tensors(), layout=layout)
        with pytest.raises(ValueError, match=r"^prepack: layout must be 'auto', 'sm80' or 'sm90'"):
            mixgemm.prepack(None, None, layout=layout)

    def test_auto_is_the_sm80_layout_off_a_hopper(self):
        t = awq_tensors()
        assert packing.auto_layout(t["qweight"], t["scales"]) == "sm80"  # CPU tensors
        assert packing.auto_layout(None, t["scales"]) == packing.auto_layout(t["qweight"], None) == "sm80"
        assert packing.auto_layout(t["qweight"], torch.zeros(3, N, dtype=F16)) == "sm80"  # 3 does not divide K
        # So prepack(layout="auto") takes the sm80 prepack, whose rules name what is wrong.
        with pytest.raises(ValueError, match=r"^prepack: qweight must be on a CUDA device, got cpu"):
            mixgemm.prepack(**t)
        with pytest.raises(ValueError, match=r"^prepack: qweight must be on a CUDA device, got cpu"):
            mixgemm.prepack(**t, layout="sm80")

    def test_sm90_prepack_runs_on_cpu_tensors(self):
        w = mixgemm.prepack(**awq_tensors(), layout="sm90")
        assert (w.layout, w.scale_only, w.group_size, w.bits, w.n, w.k) == ("sm90", False, 64, 4, N, K)
        assert w.packed.shape == (K // 16, N // 16, 32, 1) and w.packed.device.type == "cpu"
        assert w.key == KernelKey("fp16", 4, "sm90", "scale_offset")
        t = awq_tensors()
        symmetric = mixgemm.prepack(t["qweight"], t["scales"], layout="sm90")
        assert symmetric.scale_only and symmetric.key == KernelKey("fp16", 4, "sm90", "scale")

    @pytest.mark.parametrize("layout", ["sm91", "auto", "", None])
    def test_a_weight_of_an_unknown_layout(self, layout):
        with pytest.raises(ValueError, match=rf"^gemm: packed\.layout must be 'sm80' or 'sm90', got {layout!r}"):
            mixgemm.gemm(torch.zeros(2, K, dtype=F16), packed_weight(layout=layout))

    @pytest.mark.parametrize("k, groups, path", [
        (128, 4, "sm80"),  # a group of 32: not the sm90 path's (whole k-tiles), the sm80 path's small tiles'
        (256, 2, "sm90"),  # 128
        (192, 3, "sm90"),  # 64
        (192, 1, "sm90"),  # per-channel: G = K = 192
        (384, 2, "sm90"),  # 192: a multiple of 64 dividing K
        (96, 1, "dequant"),  # K = 96: only the dequant path's 16-deep slabs
        (80, 5, "dequant"),  # K = 80, groups of 16
    ])
    def test_sm90_weight_sizes(self, cpu_as_cuda, hand_compiled, fake_gpu, k, groups, path):
        # Every such weight is valid: gemm reaches its device check, and the path that runs it is the first of the
        # order whose rules it meets (100 rows: the sm90 GEMM, then the sm80 path's tiles, then dequant).
        w = sm90_weight(n=128, k=k, groups=groups)
        order = dispatch.path_order(GemmProblem(100, 128, k, k // groups), "sm90", FAKE_GPU.sm_count)
        assert order == ("sm90", "sm80", "dequant")
        assert ops.resolve_config(100, w, "auto").path == path
        device._facts.pop(torch.device("cpu"))  # the real device check now: no GPU here
        with pytest.raises(RuntimeError, match=rf"^gemm: {NO_GPU_MSG}"):
            mixgemm.gemm(torch.zeros(2, k, dtype=F16), w)

    def test_an_sm80_group_of_32_is_fine(self, cpu_as_cuda):
        with pytest.raises(RuntimeError, match=rf"^gemm: {NO_GPU_MSG}"):
            mixgemm.gemm(torch.zeros(2, K, dtype=F16), packed_weight(groups=4))

    def test_sm90_weight_fields_before_x(self):
        # The weight's own rules come first, so they are reported even for a CPU x.
        with pytest.raises(ValueError, match=r"^gemm: packed has n = 96, k = 128, group_size = 64: in the sm90 layout "
                                             r"n must be a multiple of 64, k of 16, and group_size must divide k$"):
            mixgemm.gemm(torch.zeros(2, K, dtype=F16), sm90_weight(n=96, packed=torch.zeros(8, 6, 32, 1, dtype=I32)))
        with pytest.raises(ValueError, match=r"^gemm: packed has n = 64, k = 40, group_size = 40: in the sm90 layout"):
            mixgemm.gemm(torch.zeros(2, 40, dtype=F16), sm90_weight(k=40, groups=1, packed=torch.zeros(2, 4, 32, 1)))
        with pytest.raises(ValueError, match=r"^gemm: packed has n = 64, k = 128, group_size = 48: in the sm80 layout"):
            mixgemm.gemm(torch.zeros(2, K, dtype=F16), packed_weight(group_size=48))

    @pytest.mark.parametrize("packed, got", [
        (torch.zeros(N // 64, K // 16, 32, 4, dtype=I32), (1, 8, 32, 4)),  # an sm80 tensor labelled sm90
        (torch.zeros(K // 16, N // 16, 32, 2, dtype=I32), (8, 4, 32, 2)),  # int8 words for an int4 weight
        (torch.zeros(N // 16, K // 16, 32, 1, dtype=I32), (4, 8, 32, 1)),  # K and N swapped
    ])
    def test_sm90_weight_with_a_bad_packed_shape(self, cpu_as_cuda, packed, got):
        pattern = (r"^gemm: packed\.packed must have shape \(8, 4, 32, 1\) \(\[K/16, N/16, 32, 1\] \(the sm90 layout\) "
                   rf"for 4-bit weights\), got {re.escape(str(got))}")
        with pytest.raises(ValueError, match=pattern):
            mixgemm.gemm(torch.zeros(2, K, dtype=F16), sm90_weight(packed=packed))

    def test_sm80_weight_with_an_sm90_packed_shape(self, cpu_as_cuda):
        pattern = (r"^gemm: packed\.packed must have shape \(1, 8, 32, 4\) \(\[N/64, K/16, 32, 4\] \(the sm80 layout\) "
                   r"for 4-bit weights\), got \(8, 4, 32, 1\)")
        with pytest.raises(ValueError, match=pattern):
            mixgemm.gemm(torch.zeros(2, K, dtype=F16), packed_weight(packed=torch.zeros(8, 4, 32, 1, dtype=I32)))

    def test_int8_sm90_weight_shape(self, cpu_as_cuda):
        with pytest.raises(RuntimeError, match=rf"^gemm: {NO_GPU_MSG}"):
            mixgemm.gemm(torch.zeros(2, K, dtype=F16), sm90_weight(bits=8))
        with pytest.raises(ValueError, match=r"packed\.packed must have shape \(8, 4, 32, 2\) .*for 8-bit weights"):
            mixgemm.gemm(torch.zeros(2, K, dtype=F16), sm90_weight(bits=8, packed=torch.zeros(8, 4, 32, 1, dtype=I32)))

    # Which path reads which layout. resolve_config checks a config against the weight without launching (with a
    # fake GPU's facts); so did gemm for an empty x before the restructuring.

    def test_a_config_cannot_read_another_paths_layout(self, hand_compiled, fake_gpu):
        config, w, M = SM90_TILE, packed_weight(), 64
        pattern = (rf"^gemm: config {config.name} \(sm90 path\) cannot read a weight in the 'sm80' layout; its "
                   r"kernels read sm90 weights \(prepack\(\.\.\., layout=\.\.\.\) chooses the layout\)$")
        with pytest.raises(ValueError, match=pattern):
            ops.resolve_config(M, w, config)
        with pytest.raises(ValueError, match=r"^gemm: the sm90 path does not read weights in the 'sm80' layout$"):
            ops.resolve_config(M, w, "sm90")

    @pytest.mark.parametrize("weight, config, pattern", [
        ("sm80", SM90_TILE, r"cannot read a weight in the 'sm80' layout"),
        ("sm90", SM80_TILE, r"is not compiled into this build for fp16-int4-sm90-scale_offset weights"),
    ])
    def test_an_empty_x_checks_the_config_against_the_weight(self, cpu_as_cuda, hand_compiled, weight, config,
                                                             pattern):
        # Nothing to launch, but a config that can never run the weight is an error (it was before the
        # restructuring: gemm resolved the config for M = 0 too).
        w = packed_weight() if weight == "sm80" else sm90_weight()
        with pytest.raises(ValueError, match=rf"^gemm: config {config.name} .*{pattern}"):
            mixgemm.gemm(torch.zeros(0, K, dtype=F16), w, config=config)

    @pytest.mark.parametrize("config", [SM80_TILE, SM80_TILE.with_split_k(4, "parallel")])
    def test_an_sm80_tile_not_compiled_for_the_sm90_layout(self, cpu_as_cuda, hand_compiled, fake_gpu, config):
        # The sm80 path reads sm90-layout weights only with the tiles the build compiled for them.
        pattern = (rf"^gemm: config {config.name} is not compiled into this build for fp16-int4-sm90-scale_offset "
                   rf"weights; its sm80 configs for them: {SM80_64.name}$")
        with pytest.raises(ValueError, match=pattern):
            ops.resolve_config(4, sm90_weight(), config)
        assert ops.resolve_config(4, sm90_weight(), SM80_64.with_split_k(2, "serial")) == SM80_64.with_split_k(2, "serial")
        assert tuple(mixgemm.gemm(torch.zeros(0, K, dtype=F16), sm90_weight(), config=SM80_64).shape) == (0, N)

    def test_a_scale_only_weight_runs_the_scale_offset_kernels(self, hand_compiled, fake_gpu):
        # The hand build has no scale-only kernel: a symmetric sm90 weight runs the scale+offset ones.
        w = sm90_weight(scale_only=True)
        assert w.key.quant == "scale"
        assert ops.resolve_config(4, w, SM80_64) == SM80_64
        assert ops.resolve_config(4, w, DECODE_8) == DECODE_8

    def test_the_decode_path_reads_both_layouts(self, cpu_as_cuda, hand_compiled, fake_gpu):
        for w in (packed_weight(), sm90_weight()):
            assert tuple(mixgemm.gemm(torch.zeros(0, K, dtype=F16), w, config=DECODE_8).shape) == (0, N)
            assert ops.resolve_config(8, w, DECODE_8.with_split_k(2)) == DECODE_8.with_split_k(2)
            assert ops.resolve_config(8, w, "decode").path == "decode"
        assert ops.resolve_config(64, sm90_weight(), SM90_PINGPONG) == SM90_PINGPONG
        wide = sm90_weight(n=128, packed=torch.zeros(K // 16, 8, 32, 1, dtype=I32))
        assert ops.resolve_config(64, wide, SM90_TILE) == SM90_TILE

    def test_the_layout_is_reported_before_an_uncompiled_config(self, hand_compiled, fake_gpu):
        # An sm90 config on an sm80 weight: its path reads no such weight, compiled or not.
        other = Sm90Config(64, 128, scheduler="streamk")
        with pytest.raises(ValueError, match=r"^gemm: config sm90_64x128x64_c1x1_coop_streamk \(sm90 path\) cannot "
                                             r"read a weight in the 'sm80' layout"):
            ops.resolve_config(64, packed_weight(), other)
        # On an sm90 weight, the compiled sm90 configs are named.
        with pytest.raises(ValueError, match=r"^gemm: config sm90_64x128x64_c1x1_coop_streamk is not compiled into "
                                             r"this build for fp16-int4-sm90-scale_offset weights; its sm90 configs "
                                             r"for them: sm90_128x128x64_c1x1_coop_persistent, "
                                             r"sm90_128x64x64_c1x1_pingpong_persistent$"):
            ops.resolve_config(64, sm90_weight(), other)

    def test_configs_must_fit_the_call(self, hand_compiled, fake_gpu):
        with pytest.raises(ValueError, match=r"^gemm: config decode_m8_w4 cannot run M = 9, N = 64, K = 128, "
                                             r"group_size = 64: decode_m8_w4 takes at most 8 rows of x, got M = 9$"):
            ops.resolve_config(9, sm90_weight(), DECODE_8)
        wide = sm90_weight(n=192, packed=torch.zeros(K // 16, 12, 32, 1, dtype=I32))
        with pytest.raises(ValueError, match=r"^gemm: config sm90_128x128x64_c1x1_coop_persistent cannot run M = 64, "
                                             r"N = 192, K = 128, group_size = 64: N must be a positive multiple of "
                                             r"128 \(.*\), got 192$"):
            ops.resolve_config(64, wide, SM90_TILE)
        assert ops.resolve_config(64, wide, SM90_PINGPONG) == SM90_PINGPONG


# ---------------------------------------------------------------------------------------------------
# Which GPTQ zero-point convention prepack reads


@pytest.mark.parametrize("format,gptq_v1,expected", [
    ("gptq", None, True),  # the default: v1 (z - 1), what AutoGPTQ/GPTQModel write
    ("gptq", True, True),
    ("gptq", False, False),  # the older keyword still overrides
    ("gptq_v2", None, False),
    ("gptq_v2", False, False),
    ("awq", None, False),
])
def test_gptq_zero_reading(format, gptq_v1, expected):
    assert packing.gptq_reads_v1("prepack", format, gptq_v1) is expected


@pytest.mark.parametrize("format,gptq_v1,message", [
    ("gptq_v2", True, r"^prepack: gptq_v1=True contradicts format='gptq_v2'"),
    ("awq", False, r"^prepack: gptq_v1 applies to GPTQ checkpoints only, got format='awq'"),
    ("gptq", 1, r"^prepack: gptq_v1 must be True, False or None, got 1"),
])
def test_gptq_zero_reading_errors(format, gptq_v1, message):
    with pytest.raises(ValueError, match=message):
        mixgemm.prepack(torch.zeros(8, 8, dtype=torch.int32), torch.zeros(1, 64, dtype=torch.float16),
                        format=format, gptq_v1=gptq_v1)
