"""GPU prepack (AWQ -> the sm80 layout, "mixgemm int4 v1") against the PyTorch reference, bit for bit.

Runs on the device machine (marker `gpu`). The CUDA kernels (cpp/mixgemm/prepack/) are reached through
mixgemm.layouts.sm80.pack_awq_int4_on_gpu(qweight, scales, qzeros, stream) -> (packed, offsets), the packer
mixgemm.prepack(..., layout="sm80") runs on AWQ int4 tensors, and through prepack itself.
Both packed words and offsets must match the reference exactly: the packing is a pure bit permutation,
and the offsets are one float32 product rounded once, which the kernel and torch round identically.
prepack also returns the scales (a copy, bit for bit) and refuses offsets that overflow to inf.
"""

from __future__ import annotations

import pytest
import torch

import mixgemm
from mixgemm._runtime import current_stream
from mixgemm.layouts.sm80 import pack_awq_int4_on_gpu, prepack_awq_reference, unpack_int4_kernel_layout


def _pack_on_gpu(qweight, scales, qzeros):
    """The GPU packer on the tensors' device and its current stream: (packed, offsets)."""
    with torch.cuda.device(qweight.device):
        return pack_awq_int4_on_gpu(qweight, scales, qzeros, current_stream(qweight.device))

# (K, N, group_size): the smallest legal block, odd block counts, per-channel groups, and LLM-sized layers.
SHAPES = [
    (16, 64, 16),
    (48, 192, 16),
    (128, 64, 32),
    (1024, 1536, 64),
    (4096, 512, 128),
    (2048, 1024, 2048),
]
ACT_DTYPES = [torch.float16, torch.bfloat16]


def random_words(shape, gen) -> torch.Tensor:
    """Uniform 32-bit patterns as int32, so every nibble value (and the sign bit) occurs."""
    return torch.randint(-(2**31), 2**31, shape, generator=gen, dtype=torch.int64).to(torch.int32)


def realistic_scales(shape, dtype, gen) -> torch.Tensor:
    return (torch.rand(shape, generator=gen) * 0.02 + 1e-4).to(dtype)


def arbitrary_scales(shape, dtype, gen) -> torch.Tensor:
    """Random finite bit patterns: negative, subnormal and (fp16) large enough that -z*s overflows to -inf."""
    bits = torch.randint(0, 2**16, shape, generator=gen, dtype=torch.int32)
    exp_mask = 0x7C00 if dtype == torch.float16 else 0x7F80
    bits = torch.where((bits & exp_mask) == exp_mask, bits & ~exp_mask, bits)  # no inf/NaN scales
    bits = torch.where(bits >= 2**15, bits - 2**16, bits)  # as signed 16-bit, so the cast is exact
    return bits.to(torch.int16).view(dtype)


def assert_bit_exact(K, N, G, qweight, scales, qzeros, reference_device="cpu"):
    packed, offsets = _pack_on_gpu(qweight, scales, qzeros)
    ref_packed, ref_scales, ref_offsets = prepack_awq_reference(
        qweight.to(reference_device), scales.to(reference_device), qzeros.to(reference_device), G
    )

    assert packed.device == qweight.device and packed.dtype == torch.int32
    assert packed.shape == (N // 64, K // 16, 32, 4) and packed.is_contiguous()
    assert offsets.dtype == scales.dtype and offsets.shape == (K // G, N)

    assert torch.equal(packed.cpu(), ref_packed.cpu()), "packed words differ from prepack_awq_reference"
    # Compare bits, not values: -0.0 vs 0.0 and inf must match too.
    assert torch.equal(offsets.cpu().view(torch.int16), ref_offsets.cpu().view(torch.int16)), (
        "offsets differ from prepack_awq_reference"
    )

    # prepack itself: the same words and offsets, a copy of the scales; offsets that overflowed the activation
    # dtype (possible with arbitrary scales) are refused, naming them.
    if not bool(torch.isfinite(ref_offsets).all()):
        bad = int((~torch.isfinite(ref_offsets)).sum())
        with pytest.raises(ValueError, match=rf"^prepack: offsets \(the folded zero points in the activation dtype\) "
                                             rf"holds {bad} NaN or infinite value\(s\)"):
            mixgemm.prepack(qweight, scales, qzeros, G, layout="sm80")
        return
    weight = mixgemm.prepack(qweight, scales, qzeros, G, layout="sm80")
    assert (weight.layout, weight.bits, weight.group_size, weight.k, weight.n) == ("sm80", 4, G, K, N)
    assert weight.act_dtype == scales.dtype and not weight.scale_only
    assert torch.equal(weight.packed.cpu(), ref_packed.cpu())
    assert torch.equal(weight.offsets.cpu().view(torch.int16), ref_offsets.cpu().view(torch.int16))
    assert weight.scales.dtype == scales.dtype and weight.scales.shape == (K // G, N)
    assert weight.scales.data_ptr() != scales.data_ptr()  # a copy: the kernels' aligned one
    assert torch.equal(weight.scales.cpu().view(torch.int16), ref_scales.cpu().view(torch.int16))


@pytest.mark.gpu
@pytest.mark.parametrize("act_dtype", ACT_DTYPES)
@pytest.mark.parametrize("K,N,G", SHAPES)
def test_prepack_awq_bit_exact(K, N, G, act_dtype):
    gen = torch.Generator().manual_seed(K * 7 + N * 3 + G)
    qweight = random_words((K, N // 8), gen).cuda()
    qzeros = random_words((K // G, N // 8), gen).cuda()
    scales = realistic_scales((K // G, N), act_dtype, gen).cuda()
    assert_bit_exact(K, N, G, qweight, scales, qzeros)


@pytest.mark.gpu
@pytest.mark.parametrize("act_dtype", ACT_DTYPES)
def test_prepack_awq_arbitrary_scales(act_dtype):
    # Rounding corner cases of the folded offsets: subnormal products, negative scales, overflow to inf (which
    # the packer computes like the reference, and prepack then refuses).
    K, N, G = 256, 512, 32
    gen = torch.Generator().manual_seed(11)
    qweight = random_words((K, N // 8), gen).cuda()
    qzeros = random_words((K // G, N // 8), gen).cuda()
    scales = arbitrary_scales((K // G, N), act_dtype, gen).cuda()
    assert_bit_exact(K, N, G, qweight, scales, qzeros)


@pytest.mark.gpu
def test_prepack_awq_all_ones_and_zeros():
    # Every nibble 15 (words == -1, sign bit set) and every nibble 0: no sign extension, no stray bits.
    K, N, G = 64, 128, 32
    scales = torch.full((K // G, N), 0.5, dtype=torch.float16, device="cuda")
    for fill in (-1, 0):
        qweight = torch.full((K, N // 8), fill, dtype=torch.int32, device="cuda")
        qzeros = torch.full((K // G, N // 8), fill, dtype=torch.int32, device="cuda")
        packed, offsets = _pack_on_gpu(qweight, scales, qzeros)
        assert torch.all(packed == fill)
        assert torch.all(offsets == (-7.5 if fill == -1 else 0.0))
        assert_bit_exact(K, N, G, qweight, scales, qzeros)


@pytest.mark.gpu
@pytest.mark.parametrize("act_dtype", ACT_DTYPES)
def test_prepack_awq_llm_layer(act_dtype):
    # A full 4096 x 11008 layer (11008 = 172 * 64); the reference runs on the GPU too to keep it quick.
    K, N, G = 4096, 11008, 128
    gen = torch.Generator().manual_seed(5)
    qweight = random_words((K, N // 8), gen).cuda()
    qzeros = random_words((K // G, N // 8), gen).cuda()
    scales = realistic_scales((K // G, N), act_dtype, gen).cuda()
    assert_bit_exact(K, N, G, qweight, scales, qzeros, reference_device="cuda")


@pytest.mark.gpu
def test_prepack_awq_output_not_poisoned():
    # Fresh outputs must be fully written: unpacking recovers the AWQ values exactly for every element.
    K, N, G = 512, 256, 128
    gen = torch.Generator().manual_seed(3)
    qweight = random_words((K, N // 8), gen).cuda()
    qzeros = random_words((K // G, N // 8), gen).cuda()
    scales = realistic_scales((K // G, N), torch.float16, gen).cuda()
    torch.cuda.empty_cache()
    # Fill the caching allocator's free blocks with a pattern, so unwritten output would show as garbage.
    junk = torch.full((4 * K * N // 8,), 0x5A5A5A5A, dtype=torch.int32, device="cuda")
    del junk
    packed, _ = _pack_on_gpu(qweight, scales, qzeros)
    ref = prepack_awq_reference(qweight.cpu(), scales.cpu(), qzeros.cpu(), G)[0]
    assert torch.equal(unpack_int4_kernel_layout(packed.cpu()), unpack_int4_kernel_layout(ref))
