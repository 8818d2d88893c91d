"""Quantization modes beyond asymmetric AWQ at G = 128: group sizes 32..256 and per-channel, symmetric
(scale-only) weights, and GPTQ act-order (g_idx), each against a float64 reference.

Tolerances as in test_sm80_gpu.py: the kernel rounds W = q * s + offset once to the activation dtype and
accumulates in fp32, so fp16 stays under 3e-3 and bf16 under 2e-2 of the float64 result.
"""

from __future__ import annotations

import pytest
import torch

import mixgemm
from mixgemm import formats
from mixgemm.layouts.sm80 import prepack_awq_reference
from gpu_helpers import DEVICE, poison_allocator, random_activations, relative_error

pytestmark = pytest.mark.gpu

TOL = {torch.float16: 3e-3, torch.bfloat16: 2e-2}


def random_scales(groups: int, N: int, dtype: torch.dtype) -> torch.Tensor:
    sign = torch.where(torch.rand(groups, N) < 0.5, -1.0, 1.0)
    return (sign * (0.002 + 0.01 * torch.randn(groups, N).abs())).to(dtype).to(DEVICE)


def check_gemm(packed: mixgemm.PackedWeight, w_ref: torch.Tensor, M: int, dtype: torch.dtype, config="auto"):
    x = random_activations(M, packed.k, dtype)
    poison_allocator(M * packed.n * 2)
    out = mixgemm.gemm(x, packed, config=config)
    torch.cuda.synchronize()
    assert torch.isfinite(out).all()
    assert relative_error(out, x.to(torch.float64) @ w_ref) < TOL[dtype]


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("G", [32, 64, 128, 256, 1024])  # 1024 = K: per-channel
@pytest.mark.parametrize("M", [1, 16, 100])
def test_group_sizes(G, M, dtype):
    K, N = 1024, 256
    ckpt = {k: v.to(DEVICE) for k, v in formats.random_awq_weight(K, N, G, dtype=dtype).items()}
    packed = mixgemm.prepack(ckpt["qweight"], ckpt["scales"], ckpt["qzeros"], layout="sm80")
    assert packed.group_size == G
    q, z = formats.unpack_awq(ckpt["qweight"]), formats.unpack_awq(ckpt["qzeros"])
    check_gemm(packed, formats.dequantize(q, ckpt["scales"], z, group_size=G), M, dtype)


@pytest.mark.parametrize("config", mixgemm.compiled_configs(torch.float16, path="sm80", layout="sm80"),
                         ids=lambda c: c.name)
def test_group_size_32_every_config(config):
    K, N, G = 512, 320, 32
    ckpt = {k: v.to(DEVICE) for k, v in formats.random_awq_weight(K, N, G).items()}
    packed = mixgemm.prepack(ckpt["qweight"], ckpt["scales"], ckpt["qzeros"], layout="sm80")
    q, z = formats.unpack_awq(ckpt["qweight"]), formats.unpack_awq(ckpt["qzeros"])
    w = formats.dequantize(q, ckpt["scales"], z, group_size=G)
    for split in ((1, "none"), (3, "serial"), (2, "parallel")):
        check_gemm(packed, w, 19, torch.float16, config.with_split_k(*split))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("fmt", ["awq", "gptq"])
def test_symmetric_scale_only(fmt, dtype):
    """No zero points: W = (q - 8) * s, the GPTQ symmetric convention."""
    K, N, G = 512, 192, 128
    q = torch.randint(0, 16, (K, N), dtype=torch.uint8)
    scales = random_scales(K // G, N, dtype)
    qweight = (formats.pack_awq(q) if fmt == "awq" else formats.pack_gptq_qweight(q)).to(DEVICE)
    packed = mixgemm.prepack(qweight, scales, None, format=fmt, layout="sm80")
    # The GPU prepack equals its reference twin bit for bit.
    ref_packed, _, ref_offsets = prepack_awq_reference(formats.pack_awq(q).to(DEVICE), scales, None, G)
    assert torch.equal(packed.packed, ref_packed)
    assert torch.equal(packed.offsets.view(torch.int16), ref_offsets.view(torch.int16))
    check_gemm(packed, formats.dequantize(q.to(DEVICE), scales, None, group_size=G), 33, dtype)


@pytest.mark.parametrize("v1", [False, True])
@pytest.mark.parametrize("M", [1, 40])
def test_gptq_act_order(M, v1):
    """g_idx not sorted: K is permuted at prepack and x's columns are gathered at gemm time."""
    K, N, G = 1024, 256, 128
    groups = K // G
    q = torch.randint(0, 16, (K, N), dtype=torch.uint8)
    z = torch.randint(0, 16, (groups, N), dtype=torch.uint8)
    scales = random_scales(groups, N, torch.float16)
    g_idx = (torch.randperm(K) % groups).to(torch.int32)  # every group holds exactly G rows, scattered
    qweight = formats.pack_gptq_qweight(q).to(DEVICE)
    qzeros = formats.pack_gptq_zeros(z, v1=v1).to(DEVICE)
    packed = mixgemm.prepack(qweight, scales, qzeros, format="gptq", gptq_v1=v1, g_idx=g_idx.to(DEVICE), layout="sm80")
    assert packed.perm is not None
    w = formats.dequantize(q.to(DEVICE), scales, z.to(DEVICE), g_idx=g_idx.to(DEVICE))
    check_gemm(packed, w, M, torch.float16)


def test_gptq_sorted_g_idx_needs_no_permutation():
    K, N, G = 512, 128, 128
    ckpt = {k: v.to(DEVICE) for k, v in formats.random_awq_weight(K, N, G).items()}
    gq, gz = formats.awq_to_gptq(ckpt["qweight"], ckpt["qzeros"])
    g_idx = (torch.arange(K, device=DEVICE) // G).to(torch.int32)
    with_idx = mixgemm.prepack(gq, ckpt["scales"], gz, format="gptq", g_idx=g_idx, layout="sm80")
    without = mixgemm.prepack(gq, ckpt["scales"], gz, format="gptq", layout="sm80")
    assert with_idx.perm is None
    assert torch.equal(with_idx.packed, without.packed)


def test_act_order_with_unequal_groups_is_rejected():
    K, N, G = 256, 64, 64
    g_idx = torch.zeros(K, dtype=torch.int32, device=DEVICE)
    g_idx[: K // 2] = 1  # two groups of 128 rows where scales say 4 groups of 64
    gq = torch.zeros(K // 8, N, dtype=torch.int32, device=DEVICE)
    scales = torch.ones(K // G, N, dtype=torch.float16, device=DEVICE)
    with pytest.raises(ValueError, match="every group of g_idx must hold exactly group_size = 64 rows"):
        mixgemm.prepack(gq, scales, None, format="gptq", g_idx=g_idx, layout="sm80")
