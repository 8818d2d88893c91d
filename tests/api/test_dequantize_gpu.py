"""Standalone dequantize kernel and the fast int4 converter, on the GPU.

Dequantize is bit-exact by construction: q and z convert to exact small integers, q - z is exact, and
the one multiply by the scale rounds once, exactly like the float64 value rounded to the output dtype.
"""

from __future__ import annotations

import pytest
import torch

import mixgemm
from mixgemm import formats
from gpu_helpers import DEVICE, poison_allocator, random_checkpoint, reference_weight

pytestmark = pytest.mark.gpu

# (K, N, G): N / 8 packed words per row divisible by 4, by 2 only, and odd (each vector width of the
# kernel), plus per-channel groups (G = K) and an LLM-sized layer.
SHAPES = [(128, 256, 64), (256, 80, 128), (64, 72, 32), (384, 8, 384), (4096, 4096, 128)]


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("K,N,G", SHAPES)
def test_dequantize_bit_exact(K, N, G, dtype):
    ckpt = random_checkpoint(K, N, G, dtype)
    poison_allocator(K * N * 2)
    out = mixgemm.awq_dequantize(ckpt["qweight"], ckpt["scales"], ckpt["qzeros"])
    torch.cuda.synchronize()
    expected = reference_weight(ckpt, G).to(dtype)
    assert out.shape == (K, N) and out.dtype == dtype
    assert torch.isfinite(out).all(), "unwritten (poisoned) or non-finite elements"
    # Bit-exact: compare the raw 16-bit patterns.
    assert torch.equal(out.view(torch.int16), expected.view(torch.int16))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_converter_exhaustive(dtype):
    """Every value 0..15 in every nibble position of a word, with zero 0 and scale 1: out == q exactly.

    Row r, column c holds (r + c) % 16, so each column (hence each nibble position of the AWQ packing)
    sees all 16 values, as does each row. A second pass with every zero value checks the subtraction.
    """
    K, N, G = 16 * 16, 64, 16
    cols = torch.arange(N)
    rows = torch.arange(K)
    q = ((rows[:, None] + cols[None, :]) % 16).to(torch.uint8)
    for z_value in range(16):
        z = torch.full((K // G, N), z_value, dtype=torch.uint8)
        qweight = formats.pack_awq(q).to(DEVICE)
        qzeros = formats.pack_awq(z).to(DEVICE)
        scales = torch.ones(K // G, N, dtype=dtype, device=DEVICE)
        out = mixgemm.awq_dequantize(qweight, scales, qzeros)
        expected = (q.to(torch.float64) - z_value).to(dtype).to(DEVICE)
        assert torch.equal(out, expected), f"zero {z_value}"
