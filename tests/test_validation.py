"""CPU tests of argument validation: every bad input of every public entry point is a ValueError naming
the argument and the rule it broke (mixgemm._checks and its callers in ops.py, baseline.py, config.py).

Order of the checks on one tensor: type, dtype, rank, device, contiguity, alignment. On a machine without
a GPU every valid-looking call with CPU tensors ends at the device rule ("must be on a CUDA device"). The
rules past that point are reached two ways here:

* the helpers in ``mixgemm._checks`` are called directly (``check_tensor(..., cuda=False)`` etc.);
* the fixture ``cpu_as_cuda`` (conftest.py) lets the entry points accept CPU tensors as if they were on a GPU (it
  forces ``cuda=False`` in ``check_tensor``) and makes ``_C.cuda_device_count()`` report 0, so that a call
  that passes every argument rule stops at ``check_device_supported`` with RuntimeError "no CUDA GPU"
  before any pointer reaches a kernel -- on any machine, with or without a GPU.
"""

from __future__ import annotations

import dataclasses
import re
from types import SimpleNamespace

import pytest
import torch

import mixgemm
import mixgemm._C as _C
from mixgemm import _checks, baseline, ops, packing, tuning
from mixgemm.config import GemmConfig
from hand_registry import fake_compiled

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
# mixgemm.packing.prepack_awq_tensors
# ===================================================================================================


class TestPrepackAwqTensors:
    def call(self, group_size=K // G, **overrides):
        args = awq_tensors()
        args.update(overrides)
        return packing.prepack_awq_tensors(args["qweight"], args["scales"], args["qzeros"], group_size)

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
            (dict(qweight=misaligned((K, N // 8), I32)), r"qweight must start at a 16-byte aligned address"),
            (dict(scales="s"), r"scales must be a torch\.Tensor, got str"),
            (dict(scales=torch.zeros(G, N, dtype=torch.float64)), r"scales must have dtype float16 or bfloat16"),
            (dict(scales=torch.zeros(1, G, N, dtype=F16)), r"scales must be 2-D"),
            (dict(scales=misaligned((G, N), BF16)), r"scales must start at a 16-byte aligned address"),
            (dict(qzeros=torch.zeros(G * N // 8, dtype=I32)), r"qzeros must be 2-D"),
            (dict(qzeros=transposed((G, N // 8), I32)), r"qzeros must be contiguous"),
            (dict(scales=meta_like(awq_tensors()["scales"])), r"scales is on meta but qweight is on cpu"),
            (dict(qweight=torch.zeros(K, 16, dtype=I32)), r"qweight must have shape \(128, 8\)"),
            (
                dict(qweight=torch.zeros(K, 9, dtype=I32), scales=torch.zeros(G, 72, dtype=F16),
                     qzeros=torch.zeros(G, 9, dtype=I32)),
                r"N = scales\.shape\[1\] must be a positive multiple of 64, got 72",
            ),
            (
                dict(qweight=torch.zeros(K, 0, dtype=I32), scales=torch.zeros(G, 0, dtype=F16),
                     qzeros=torch.zeros(G, 0, dtype=I32)),
                r"N = scales\.shape\[1\] must be a positive multiple of 64, got 0",
            ),
            (
                dict(qweight=torch.zeros(40, N // 8, dtype=I32), scales=torch.zeros(1, N, dtype=F16),
                     qzeros=torch.zeros(1, N // 8, dtype=I32)),
                r"K = qweight\.shape\[0\] must be a positive multiple of 16, got 40",
            ),
            (dict(qweight=torch.zeros(0, N // 8, dtype=I32)), r"K = qweight\.shape\[0\] must be a positive"),
            (dict(scales=torch.zeros(3, N, dtype=F16)), r"scales has 3 rows, which must divide K = 128"),
            (dict(qzeros=torch.zeros(G, N // 8 + 1, dtype=I32)), r"qzeros must have shape \(2, 8\)"),
        ],
    )
    def test_rules(self, cpu_as_cuda, overrides, pattern):
        with pytest.raises(ValueError, match=rf"^prepack: {pattern}"):
            self.call(**overrides)

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
            ("gptq", dict(scales=torch.zeros(G, 2 * N, dtype=F16)), None, r"qweight must have shape \(128, 16\)"),
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


class TestResolveConfig:
    @pytest.mark.parametrize("config", ["fast", "", "AUTO"])
    def test_unknown_string(self, config):
        with pytest.raises(ValueError, match=rf"^gemm: config must be 'auto' or a GemmConfig, got '{config}'"):
            ops.resolve_config(4, packed_weight(), config)

    @pytest.mark.parametrize("config, type_name", [(None, "NoneType"), (3, "int"), ((16, 128), "tuple")])
    def test_wrong_type(self, config, type_name):
        with pytest.raises(ValueError, match=rf"^gemm: config must be 'auto' or a GemmConfig, got {type_name}$"):
            ops.resolve_config(4, packed_weight(), config)

    @pytest.mark.parametrize("dtype", [F16, BF16])
    def test_uncompiled_tile(self, dtype):
        cfg = GemmConfig(32, 32, 64, 16, 16, 64, 7)
        with pytest.raises(ValueError, match=r"^gemm: config 32x32x64_w16x16x64_s7 is not compiled into this build"):
            ops.resolve_config(4, packed_weight(dtype=dtype), cfg)

    @pytest.mark.parametrize("dtype", [F16, BF16])
    def test_compiled_tile_passes_with_its_split(self, dtype):
        for cfg in mixgemm.compiled_configs(dtype):
            split = cfg.with_split_k(2, "parallel")
            assert ops.resolve_config(4, packed_weight(dtype=dtype), split) == split

    @pytest.fixture
    def fake_gpu(self, monkeypatch, tmp_path):
        """torch.cuda reports one fake GPU's properties; the tuning cache is a fresh file path."""
        monkeypatch.setattr(torch.cuda, "get_device_properties",
                            lambda device=None: SimpleNamespace(name="FakeGPU", multi_processor_count=132))
        cache = tmp_path / "tuned.json"
        monkeypatch.setenv("MIXGEMM_CACHE", str(cache))
        return cache

    def test_auto_uses_the_heuristic(self, fake_gpu):
        pw = packed_weight(n=4096, k=4096, groups=32)
        got = ops.resolve_config(1, pw, "auto")
        assert got == tuning.heuristic_config(mixgemm.compiled_configs(F16, path=None), 1, 4096, 4096, 132)

    def test_auto_prefers_a_valid_tuned_entry(self, fake_gpu):
        pw = packed_weight(n=4096, k=4096, groups=32)
        tuned = mixgemm.compiled_configs(F16)[-1].with_split_k(3, "parallel")
        tuning.save_choice("FakeGPU", 1, 4096, 4096, 128, F16, tuned, path=fake_gpu)
        assert ops.resolve_config(1, pw, "auto") == tuned

    @pytest.mark.parametrize("stale", ["uncompiled-tile", "split-too-large"])
    def test_auto_ignores_a_stale_tuned_entry(self, fake_gpu, stale):
        pw = packed_weight(n=128, k=128, groups=1)
        if stale == "uncompiled-tile":
            tuned = GemmConfig(32, 32, 64, 16, 16, 64, 7)
        else:
            tuned = mixgemm.compiled_configs(F16)[0].with_split_k(4, "serial")  # K / 64 = 2
        tuning.save_choice("FakeGPU", 1, 128, 128, 128, F16, tuned, path=fake_gpu)
        got = ops.resolve_config(1, pw, "auto")
        assert got == tuning.heuristic_config(mixgemm.compiled_configs(F16, path=None), 1, 128, 128, 132)
        assert got != tuned


# ===================================================================================================
# mixgemm.GemmConfig
# ===================================================================================================


TILE = (16, 128, 64, 16, 32, 64, 4)


class TestGemmConfigValidation:
    @pytest.mark.parametrize("split_k", [0, -1, 1.0, 2.5, "2", None])
    def test_split_k_must_be_a_positive_int(self, split_k):
        with pytest.raises(ValueError, match=r"^GemmConfig: split_k must be a positive int"):
            GemmConfig(*TILE, split_k=split_k, split_k_mode="serial")

    @pytest.mark.parametrize("mode", ["Serial", "", "stream-k", None])
    def test_unknown_mode(self, mode):
        pattern = r"^GemmConfig: split_k_mode must be one of \('none', 'serial', 'parallel', 'streamk'\)"
        with pytest.raises(ValueError, match=pattern):
            GemmConfig(*TILE, split_k=2, split_k_mode=mode)

    @pytest.mark.parametrize(
        "split_k, mode", [(1, "serial"), (1, "parallel"), (2, "none"), (16, "none")]
    )
    def test_split_k_and_mode_must_agree(self, split_k, mode):
        with pytest.raises(
            ValueError, match=rf"split_k == 1 needs split_k_mode 'none'.*got split_k={split_k}, split_k_mode='{mode}'"
        ):
            GemmConfig(*TILE, split_k=split_k, split_k_mode=mode)

    def test_mode_defaults_to_none_which_rejects_split(self):
        with pytest.raises(ValueError, match=r"split_k_mode"):
            GemmConfig(*TILE, split_k=4)

    @pytest.mark.parametrize("split_k, mode", [(1, "parallel"), (3, "none"), (0, None)])
    def test_with_split_k_validates(self, split_k, mode):
        with pytest.raises(ValueError, match=r"^GemmConfig: split_k"):
            GemmConfig(*TILE).with_split_k(split_k, mode)

    @pytest.mark.parametrize("split_k, mode", [(1, "none"), (2, "serial"), (16, "parallel")])
    def test_valid_combinations(self, split_k, mode):
        cfg = GemmConfig(*TILE, split_k=split_k, split_k_mode=mode)
        assert (cfg.split_k, cfg.split_k_mode) == (split_k, mode)
        assert dataclasses.astuple(cfg)[:7] == TILE


def test_compiled_configs_rejects_other_dtypes():
    for dtype in (torch.float32, torch.int32, torch.float64):
        with pytest.raises(ValueError, match=r"^compiled_configs: dtype must be float16 or bfloat16"):
            mixgemm.compiled_configs(dtype)


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
SM80_TILE = GemmConfig(16, 256, 64, 16, 64, 64, 3)
DECODE_8 = GemmConfig.gemv(8, 4)
SM90_TILE = GemmConfig.sm90(128, 128, 64, 1, 1, "coop", "persistent")
SM80_64 = GemmConfig(64, 128, 64, 32, 64, 64, 4)
HAND_COMPILED = (SM80_TILE, SM80_64, DECODE_8, GemmConfig.gemv(16, 4), SM90_TILE,
                 GemmConfig.sm90(128, 64, 64, 1, 1, "pingpong", "persistent"))


@pytest.fixture
def hand_compiled(monkeypatch):
    """The hand build; of the sm80 tiles, 64 x 128 is also compiled for sm90-layout weights."""
    from mixgemm import config

    monkeypatch.setattr(config, "_compiled", fake_compiled(HAND_COMPILED, sm90_layout_tiles=(SM80_64.tile,)))


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
        t = awq_tensors()
        assert mixgemm.prepack(t["qweight"], t["scales"], layout="sm90").scale_only

    @pytest.mark.parametrize("layout, k, n, bits, shape", [
        ("sm80", 128, 64, 4, (1, 8, 32, 4)), ("sm80", 256, 192, 8, (3, 16, 32, 8)),
        ("sm90", 128, 64, 4, (8, 4, 32, 1)), ("sm90", 256, 192, 8, (16, 12, 32, 2)),
    ])
    def test_packed_shape_of_each_layout(self, layout, k, n, bits, shape):
        got, described = packing.packed_shape(layout, k, n, bits)
        assert got == shape
        assert described == {"sm80": f"[N/64, K/16, 32, {bits}] (the sm80 layout)",
                             "sm90": f"[K/16, N/16, 32, {bits // 4}] (the sm90 layout)"}[layout]

    @pytest.mark.parametrize("layout", ["sm91", "auto", "", None])
    def test_a_weight_of_an_unknown_layout(self, layout):
        with pytest.raises(ValueError, match=rf"^gemm: packed\.layout must be 'sm80' or 'sm90', got {layout!r}"):
            mixgemm.gemm(torch.zeros(2, K, dtype=F16), packed_weight(layout=layout))

    @pytest.mark.parametrize("k, groups, pattern", [
        (128, 4, r"group_size must be K or a multiple of 64 dividing K on the sm90 path .*, got 32"),
        (256, 2, None),  # 128: fine
        (192, 3, None),  # 64
        (192, 1, None),  # per-channel: G = K = 192
        (384, 2, None),  # 192: a multiple of 64 dividing K
        (96, 1, r"K must be a positive multiple of 64 for the sm90 layout, got 96"),
    ])
    def test_sm90_weight_sizes(self, cpu_as_cuda, k, groups, pattern):
        w = sm90_weight(k=k, groups=groups)
        x = torch.zeros(2, k, dtype=F16)
        if pattern is None:  # every rule passed: the call stops at the device
            with pytest.raises(RuntimeError, match=rf"^gemm: {NO_GPU_MSG}"):
                mixgemm.gemm(x, w)
        else:
            with pytest.raises(ValueError, match=rf"^gemm: {pattern}"):
                mixgemm.gemm(x, w)

    def test_an_sm80_group_of_32_is_fine(self, cpu_as_cuda):
        with pytest.raises(RuntimeError, match=rf"^gemm: {NO_GPU_MSG}"):
            mixgemm.gemm(torch.zeros(2, K, dtype=F16), packed_weight(groups=4))

    def test_sm90_weight_fields_before_x(self):
        # The weight's own rules come first, so they are reported even for a CPU x.
        with pytest.raises(ValueError, match=r"^gemm: group_size must be K or a multiple of 64"):
            mixgemm.gemm(torch.zeros(2, K, dtype=F16), sm90_weight(groups=4))
        with pytest.raises(ValueError, match=r"^gemm: packed has n = 96, k = 128, group_size = 64: n must be a "
                                             r"multiple of 64"):
            mixgemm.gemm(torch.zeros(2, K, dtype=F16), sm90_weight(n=96, packed=torch.zeros(8, 6, 32, 1, dtype=I32)))

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

    # Which path reads which layout. An empty x makes gemm check its config without launching (or needing a
    # device), so the layout rule is reached on the CPU.

    def test_a_config_cannot_read_another_paths_layout(self, cpu_as_cuda, hand_compiled):
        config, w, M = SM90_TILE, packed_weight(), 64
        reads = " and ".join(config.layouts)
        pattern = (rf"^gemm: config {config.name} \({config.path} path\) cannot read a weight in the '{w.layout}' "
                   rf"layout; its kernels read {reads} weights \(prepack\(\.\.\., layout=\.\.\.\) chooses the "
                   r"layout\)")
        with pytest.raises(ValueError, match=pattern):
            mixgemm.gemm(torch.zeros(0, K, dtype=F16), w, config=config)
        with pytest.raises(ValueError, match=pattern):
            ops.resolve_config(M, w, config)

    @pytest.mark.parametrize("config", [SM80_TILE, SM80_TILE.with_split_k(4, "parallel")])
    def test_an_sm80_tile_not_compiled_for_the_sm90_layout(self, cpu_as_cuda, hand_compiled, config):
        # The sm80 path reads sm90-layout weights only with the tiles the build compiled for them.
        pattern = (rf"^gemm: config {config.name} is not compiled for weights in the 'sm90' layout in this build; "
                   rf"its sm80 configs for that layout: {SM80_64.name}$")
        with pytest.raises(ValueError, match=pattern):
            mixgemm.gemm(torch.zeros(0, K, dtype=F16), sm90_weight(), config=config)
        with pytest.raises(ValueError, match=pattern):
            ops.resolve_config(4, sm90_weight(), config)
        assert ops.resolve_config(4, sm90_weight(), SM80_64.with_split_k(2, "serial")) == SM80_64.with_split_k(2, "serial")
        assert tuple(mixgemm.gemm(torch.zeros(0, K, dtype=F16), sm90_weight(), config=SM80_64).shape) == (0, N)

    def test_the_decode_path_reads_both_layouts(self, cpu_as_cuda, hand_compiled):
        for w in (packed_weight(), sm90_weight()):
            assert tuple(mixgemm.gemm(torch.zeros(0, K, dtype=F16), w, config=DECODE_8).shape) == (0, N)
            assert ops.resolve_config(8, w, DECODE_8.with_split_k(2)) == DECODE_8.with_split_k(2)
        pingpong = GemmConfig.sm90(128, 64, 64, 1, 1, "pingpong", "persistent")
        assert ops.resolve_config(64, sm90_weight(), pingpong) == pingpong
        wide = sm90_weight(n=128, packed=torch.zeros(K // 16, 8, 32, 1, dtype=I32))
        assert ops.resolve_config(64, wide, SM90_TILE) == SM90_TILE

    def test_an_uncompiled_config_is_reported_before_the_layout(self, hand_compiled):
        other = GemmConfig.sm90(64, 128, 64, 1, 1, "coop", "streamk")
        with pytest.raises(ValueError, match=r"^gemm: config sm90_64x128x64_c1x1_coop_streamk is not compiled into "
                                             r"this build; compiled: .*sm90_128x128x64_c1x1_coop_persistent"):
            ops.resolve_config(64, packed_weight(), other)

    def test_configs_must_fit_the_call(self, hand_compiled):
        with pytest.raises(ValueError, match=r"^gemm: config gemv_8x64x256_w8x64x64_s2 \(decode path\) takes at "
                                             r"most 8 rows of x, got M = 9"):
            ops.resolve_config(9, sm90_weight(), DECODE_8)
        wide = sm90_weight(n=192, packed=torch.zeros(K // 16, 12, 32, 1, dtype=I32))
        with pytest.raises(ValueError, match=r"^gemm: config sm90_128x128x64_c1x1_coop_persistent needs N to be a "
                                             r"multiple of its tile_n = 128, got N = 192"):
            ops.resolve_config(64, wide, SM90_TILE)
        narrow = GemmConfig.sm90(128, 64, 64, 1, 1, "pingpong", "persistent")
        assert ops.resolve_config(64, wide, narrow) == narrow


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
