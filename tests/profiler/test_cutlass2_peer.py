"""CPU tests of the cutlass2_fp16 peer (cpp/mixgemm/peers/cutlass2_fp16.cu, bound as
``mixgemm._C.peers.cutlass2_fp16_gemm``; ``mixgemm.bench.peers``): its place in the profiler, the reasons it gives
where it cannot run, and the argument rules of ``cutlass2_fp16_matmul`` and of the binding that are checked before
any GPU is touched. The GPU half is tests/profiler/test_cutlass2_peer_gpu.py."""

from __future__ import annotations

import importlib
import types

import pytest
import torch

from mixgemm import _runtime
from mixgemm.bench import cli, peers

_C = importlib.import_module("mixgemm._C")
# The bench-only yardsticks live in the submodule _C.peers, apart from the library's kernels. A build without
# the peer has no binding there; the peer must then say so, not crash.
HAS_BINDING = hasattr(getattr(_C, "peers", None), "cutlass2_fp16_gemm")
NO_BINDING = "this build of mixgemm._C has no cutlass2_fp16_gemm"


def test_listed_by_name_and_run_by_default():
    assert peers.PEERS["cutlass2_fp16"] is peers.cutlass2_fp16_peer
    assert cli.PEER_NAMES.index("cutlass2_fp16") == cli.PEER_NAMES.index("cublas_fp16") + 1
    assert cli.parse_args(["bench", "--peers", "mixgemm,cutlass2_fp16"]).peers == ["mixgemm", "cutlass2_fp16"]
    assert "cutlass2_fp16" in cli.parse_args(["bench"]).peers  # every bench run reports it


def test_bf16_is_unavailable():
    with pytest.raises(peers.PeerUnavailable, match="fp16 only"):
        peers.cutlass2_fp16_peer(16, 4096, 4096, 128, torch.bfloat16, 3)
    # build() turns it into the reason the report shows, before anything touches a GPU.
    closures, reason = peers.build("cutlass2_fp16", 16, 4096, 4096, 128, torch.bfloat16, 3)
    assert closures is None and reason.startswith("fp16 only")


@pytest.mark.parametrize("N, K", [(4100, 4096), (4096, 4100)])
def test_shapes_off_the_16_byte_rows_are_unavailable(N, K):
    with pytest.raises(peers.PeerUnavailable, match="needs N and K multiples of 8"):
        peers.cutlass2_fp16_peer(16, N, K, 4, torch.float16, 3)


@pytest.mark.skipif(not HAS_BINDING, reason="extension predates the binding")
def test_the_binding_is_in_the_peers_submodule():
    assert not hasattr(_C, "cutlass2_fp16_gemm")  # not beside the library's kernels any more
    assert peers._cutlass2_binding() is _C.peers.cutlass2_fp16_gemm


def test_an_extension_without_the_binding_makes_it_unavailable(monkeypatch):
    # What a build without the peer looks like: a peers submodule without the binding.
    monkeypatch.setattr(_runtime, "_extension", types.SimpleNamespace(peers=types.SimpleNamespace()))
    with pytest.raises(peers.PeerUnavailable, match=NO_BINDING):
        peers.cutlass2_fp16_peer(16, 4096, 4096, 128, torch.float16, 3)
    assert peers.build("cutlass2_fp16", 16, 4096, 4096, 128, torch.float16, 3) == (
        None, "this build of mixgemm._C has no cutlass2_fp16_gemm (it predates the peer)")


def test_an_extension_without_the_peers_submodule_makes_it_unavailable(monkeypatch):
    monkeypatch.setattr(_runtime, "_extension", types.SimpleNamespace())  # a build from before _C.peers
    with pytest.raises(peers.PeerUnavailable, match=NO_BINDING):
        peers.cutlass2_fp16_peer(16, 4096, 4096, 128, torch.float16, 3)


@pytest.mark.skipif(HAS_BINDING, reason="this extension has the binding")
def test_this_older_extension_makes_it_unavailable():
    assert peers.build("cutlass2_fp16", 16, 4096, 4096, 128, torch.float16, 3)[1].startswith(NO_BINDING)


# ---------------------------------------------------------------------------------------------------
# cutlass2_fp16_matmul: every rule but the device one is checked on CPU tensors


def _half(*shape):
    return torch.zeros(*shape, dtype=torch.float16)


def _misaligned(M, K):
    # A view starting one element (2 bytes) into its storage.
    return _half(M * K + 8).view(-1)[1:1 + M * K].view(M, K)


@pytest.mark.parametrize("x, w, out, pattern", [
    ([1, 2], _half(64, 64), None, r"x must be a torch.Tensor, got list"),
    (_half(4, 64).bfloat16(), _half(64, 64), None, r"x must have dtype float16, got torch.bfloat16"),
    (_half(4, 64), _half(64, 64).float(), None, r"w must have dtype float16, got torch.float32"),
    (_half(2, 4, 64), _half(64, 64), None, r"x must be 2-D, got shape \(2, 4, 64\)"),
    (_half(64, 4).t(), _half(64, 64), None, r"x must be contiguous"),
    (_misaligned(4, 64), _half(64, 64), None, r"x must start at a 16-byte aligned address"),
    (_half(4, 64), _half(72, 64), None, r"w must be \[K, N\] with K = x.shape\[1\] = 64 rows, got shape \(72, 64\)"),
    (_half(4, 60), _half(60, 64), None, r"K = x.shape\[1\] must be a positive multiple of 8 \(16-byte rows\), got 60"),
    (_half(4, 0), _half(0, 64), None, r"K = x.shape\[1\] must be a positive multiple of 8 .*got 0"),
    (_half(4, 64), _half(64, 12), None, r"N = w.shape\[1\] must be a positive multiple of 8 .*got 12"),
    (_half(4, 64), _half(64, 64), _half(4, 64).bfloat16(), r"out must have dtype float16"),
    (_half(4, 64), _half(64, 64), _half(4, 72), r"out must have shape \(4, 64\) \(\[M, N\] = .*got \(4, 72\)"),
    (_half(4, 64), _half(64, 64), None, r"x must be on a CUDA device, got cpu"),
    (_half(4, 64), _half(64, 64), _half(4, 64), r"x must be on a CUDA device, got cpu"),
])
def test_matmul_rules(x, w, out, pattern):
    with pytest.raises(ValueError, match=rf"^cutlass2_fp16_matmul: {pattern}"):
        peers.cutlass2_fp16_matmul(x, w, out)


# ---------------------------------------------------------------------------------------------------
# The binding re-checks its rules (ValueError) before it looks for a device (RuntimeError)

ADDR = [(1 << 24) * (i + 1) for i in range(3)]  # fake, 16-byte aligned, never dereferenced
needs_binding = pytest.mark.skipif(not HAS_BINDING, reason="extension predates the binding")


@pytest.mark.parametrize("M, N, K, addresses, pattern", [
    (0, 64, 64, ADDR, r"M \(rows of A and D\) must be >= 1, got 0"),
    (4, 12, 64, ADDR, r"N must be a positive multiple of 8 \(16-byte rows of B and D\), got 12"),
    (4, 0, 64, ADDR, r"N must be a positive multiple of 8 .*got 0"),
    (4, 64, 60, ADDR, r"K must be a positive multiple of 8 \(16-byte rows of A\), got 60"),
    (4, 64, 64, [ADDR[0], 0, ADDR[2]], r"A, B and D must be non-null device pointers"),
    (4, 64, 64, [ADDR[0], ADDR[1], ADDR[2] + 8], r"A, B and D must be 16-byte aligned"),
])
@needs_binding
def test_binding_rules(M, N, K, addresses, pattern):
    # Safe on a GPU machine too: each call stops at a rule, before the device is looked at.
    with pytest.raises(ValueError, match=rf"^cutlass2_fp16: {pattern}"):
        _C.peers.cutlass2_fp16_gemm(*addresses, M, N, K, 0)


@pytest.mark.nogpu
@needs_binding
def test_binding_needs_a_device():
    assert _C.cuda_device_count() == 0, "this test passes fake pointers and must only run without a GPU"
    with pytest.raises(RuntimeError, match="no CUDA GPU is visible"):
        _C.peers.cutlass2_fp16_gemm(*ADDR, 4, 64, 64, 0)
