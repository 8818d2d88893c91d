"""The cutlass2_fp16 peer (CUTLASS 2.x dense fp16 GEMM) against a float32 torch reference.

Tolerance: operands are fp16 in both, products are exact in fp32 and only the summation order (fp32) and the
final rounding to fp16 (2^-11 relative, rms about 3e-4) differ, so a norm-wise relative error of 1e-3 passes
rounding while any tiling or indexing error, which is O(1), fails it. Shapes leave partial tiles in every
dimension (the tile is 128 x 256 x 64): M = 17 and 300, N = 264, K = 136.
Outputs are poisoned with NaN first, given (``out=``) or allocated through the caching allocator.
"""

from __future__ import annotations

import types

import pytest
import torch

from mixgemm import _runtime
from mixgemm.bench import peers
from gpu_helpers import DEVICE, poison_allocator, random_activations, relative_error

pytestmark = pytest.mark.gpu

TOLERANCE = 1e-3
SHAPES = [(264, 136), (256, 64), (8, 8), (1024, 1024)]  # (N, K)


@pytest.fixture(autouse=True)
def fp32_reference(monkeypatch):
    # A TF32 "float32" matmul would round the reference's inputs to 10 mantissa bits.
    monkeypatch.setattr(torch.backends.cuda.matmul, "allow_tf32", False)


def _weight(K, N):
    return (torch.randn(K, N, device=DEVICE) / K ** 0.5).to(torch.float16)


@pytest.mark.parametrize("N, K", SHAPES)
@pytest.mark.parametrize("M", [1, 17, 128, 300])
def test_matches_float32_reference(M, N, K):
    x, w = random_activations(M, K, torch.float16), _weight(K, N)
    ref = x.float() @ w.float()

    out = torch.full((M, N), float("nan"), dtype=torch.float16, device=DEVICE)
    assert peers.cutlass2_fp16_matmul(x, w, out) is out
    assert torch.isfinite(out).all()
    assert relative_error(out, ref) < TOLERANCE

    poison_allocator(M * N * 2)
    allocated = peers.cutlass2_fp16_matmul(x, w)
    assert allocated.shape == (M, N) and allocated.dtype == torch.float16
    assert torch.equal(allocated, out)  # same kernel, same inputs: the same bits


def test_m_zero_returns_an_empty_result():
    out = peers.cutlass2_fp16_matmul(torch.empty(0, 64, dtype=torch.float16, device=DEVICE), _weight(64, 64))
    assert out.shape == (0, 64)


def test_the_peer_times_through_a_cuda_graph():
    closures, reason = peers.build("cutlass2_fp16", 16, 256, 512, 128, torch.float16, 2)
    assert reason is None and len(closures) >= 1
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        closures[0]()
    graph.replay()
    torch.cuda.synchronize()
    peers.clear_caches()


# ---------------------------------------------------------------------------------------------------
# Bad inputs on the GPU: Python names the argument and rule; the binding re-checks what it relies on


@pytest.mark.parametrize("x_dtype, w_dtype, pattern", [
    (torch.bfloat16, torch.float16, r"x must have dtype float16, got torch.bfloat16"),
    (torch.float16, torch.bfloat16, r"w must have dtype float16, got torch.bfloat16"),
])
def test_bf16_is_refused(x_dtype, w_dtype, pattern):
    x = torch.zeros(4, 64, dtype=x_dtype, device=DEVICE)
    w = torch.zeros(64, 64, dtype=w_dtype, device=DEVICE)
    with pytest.raises(ValueError, match=rf"^cutlass2_fp16_matmul: {pattern}"):
        peers.cutlass2_fp16_matmul(x, w)
    with pytest.raises(peers.PeerUnavailable, match="fp16 only"):
        peers.cutlass2_fp16_peer(4, 64, 64, 32, torch.bfloat16, 1)


@pytest.mark.parametrize("N, K, pattern", [
    (64, 68, r"K = x.shape\[1\] must be a positive multiple of 8"),
    (260, 64, r"N = w.shape\[1\] must be a positive multiple of 8"),
])
def test_misaligned_shapes_are_refused(N, K, pattern):
    x, w = random_activations(4, K, torch.float16), _weight(K, N)
    with pytest.raises(ValueError, match=rf"^cutlass2_fp16_matmul: {pattern}"):
        peers.cutlass2_fp16_matmul(x, w)


def test_binding_rechecks_alignment_and_shapes():
    from mixgemm import _C

    x, w = random_activations(4, 64, torch.float16), _weight(64, 64)
    out = torch.empty(4, 64, dtype=torch.float16, device=DEVICE)
    stream = torch.cuda.current_stream().cuda_stream
    with pytest.raises(ValueError, match=r"^cutlass2_fp16: A, B and D must be 16-byte aligned"):
        _C.peers.cutlass2_fp16_gemm(x.data_ptr() + 2, w.data_ptr(), out.data_ptr(), 4, 64, 64, stream)
    with pytest.raises(ValueError, match=r"^cutlass2_fp16: K must be a positive multiple of 8"):
        _C.peers.cutlass2_fp16_gemm(x.data_ptr(), w.data_ptr(), out.data_ptr(), 4, 64, 60, stream)


def test_cross_device_and_cpu_arguments_are_refused():
    x = random_activations(4, 64, torch.float16)
    with pytest.raises(ValueError, match=r"^cutlass2_fp16_matmul: w must be on a CUDA device, got cpu"):
        peers.cutlass2_fp16_matmul(x, torch.zeros(64, 64, dtype=torch.float16))


@pytest.mark.parametrize("extension", [
    types.SimpleNamespace(),  # a build older than the peers submodule
    types.SimpleNamespace(peers=types.SimpleNamespace()),  # a peers submodule without this binding
], ids=["no_peers_submodule", "peers_without_binding"])
def test_an_extension_without_the_binding_is_a_clear_error(monkeypatch, extension):
    monkeypatch.setattr(_runtime, "_extension", extension)
    x, w = random_activations(4, 64, torch.float16), _weight(64, 64)
    with pytest.raises(RuntimeError, match=r"^cutlass2_fp16_matmul: this build of mixgemm._C has no"):
        peers.cutlass2_fp16_matmul(x, w)
