"""The vLLM-style AWQ GEMM baseline against a float64 reference.

Tolerance: the kernel rounds each dequantized weight to fp16 (relative 2^-11), accumulates in fp32,
rounds each split's partial to fp16 and sums partials in fp16; with K up to 1024 the norm-wise relative
error stays near 1e-3, so 5e-3 fails any indexing error (those give O(1)) and passes rounding.
"""

from __future__ import annotations

import pytest
import torch

import mixgemm
from gpu_helpers import poison_allocator, random_activations, random_checkpoint, reference_weight, relative_error

pytestmark = pytest.mark.gpu
TOLERANCE = 5e-3


@pytest.mark.parametrize("split_k_iters", [1, 3, 8])
@pytest.mark.parametrize("M", [1, 5, 16, 17, 64, 255])
@pytest.mark.parametrize("K,N,G", [(256, 128, 64), (1024, 192, 128), (512, 256, 32)])
def test_baseline_matches_reference(M, K, N, G, split_k_iters):
    ckpt = random_checkpoint(K, N, G, torch.float16)
    x = random_activations(M, K, torch.float16)
    poison_allocator(split_k_iters * M * N * 2)
    out = mixgemm.baseline.awq_gemm(x, ckpt["qweight"], ckpt["scales"], ckpt["qzeros"], split_k_iters)
    ref = x.to(torch.float64) @ reference_weight(ckpt, G)
    assert out.shape == (M, N) and out.dtype == torch.float16
    assert torch.isfinite(out).all()
    assert relative_error(out, ref) < TOLERANCE


def test_dequant_matmul_path_matches_reference():
    K, N, G, M = 1024, 256, 128, 300
    ckpt = random_checkpoint(K, N, G, torch.float16)
    x = random_activations(M, K, torch.float16)
    out = mixgemm.baseline.awq_dequant_matmul(x, ckpt["qweight"], ckpt["scales"], ckpt["qzeros"])
    ref = x.to(torch.float64) @ reference_weight(ckpt, G)
    assert relative_error(out, ref) < TOLERANCE
