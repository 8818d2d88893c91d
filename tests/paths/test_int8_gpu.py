"""int8 weights (GPTQ 8-bit checkpoints): prepack, the prmt converter and the GEMM on every compiled
int8 config, against float64 references.

Values are stored unsigned (0..255) with the zero point folded into the offsets (z = 128 when the
checkpoint is symmetric). Tolerances as for int4 (test_sm80_gpu.py): fp16 3e-3, bf16 2e-2 of the float64
result, since the kernel rounds W = q * s + offset once and accumulates in fp32.
"""

from __future__ import annotations

import pytest
import torch

import mixgemm
from mixgemm import formats
from mixgemm.layouts import sm80 as prepack_ref
from gpu_helpers import DEVICE, poison_allocator, random_activations, relative_error

pytestmark = pytest.mark.gpu

TOL = {torch.float16: 3e-3, torch.bfloat16: 2e-2}


def checkpoint(K, N, G, dtype, symmetric=False):
    ckpt = formats.random_gptq_int8_weight(K, N, G, dtype=dtype, symmetric=symmetric)
    return {k: (v.to(DEVICE) if v is not None else None) for k, v in ckpt.items()}


def reference_weight(ckpt, G):
    q = formats.unpack_gptq_qweight_int8(ckpt["qweight"])
    z = formats.unpack_gptq_zeros_int8(ckpt["qzeros"]) if ckpt["qzeros"] is not None else None
    return formats.dequantize(q, ckpt["scales"], z, group_size=G, bits=8)


def run(ckpt, G, M, dtype, config="auto"):
    packed = mixgemm.prepack(ckpt["qweight"], ckpt["scales"], ckpt["qzeros"], format="gptq", bits=8, layout="sm80")
    assert packed.bits == 8
    x = random_activations(M, packed.k, dtype)
    poison_allocator(M * packed.n * 2)
    out = mixgemm.gemm(x, packed, config=config)
    torch.cuda.synchronize()
    assert torch.isfinite(out).all(), "unwritten (poisoned) or non-finite output elements"
    assert relative_error(out, x.to(torch.float64) @ reference_weight(ckpt, G)) < TOL[dtype]


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_int8_converter_exhaustive(dtype):
    """x = I returns the dequantized weight exactly: all 256 values in every byte position and column,
    scale 1 and zero 0."""
    K, N, G = 256, 128, 64
    q = ((torch.arange(K)[:, None] + torch.arange(N)[None, :]) % 256).to(torch.uint8)
    qweight = formats.pack_gptq_qweight_int8(q).to(DEVICE)
    qzeros = formats.pack_gptq_zeros_int8(torch.zeros(K // G, N, dtype=torch.uint8)).to(DEVICE)
    scales = torch.ones(K // G, N, dtype=dtype, device=DEVICE)
    packed = mixgemm.prepack(qweight, scales, qzeros, format="gptq", bits=8, layout="sm80")
    eye = torch.eye(K, dtype=dtype, device=DEVICE)
    configs = mixgemm.compiled_configs(dtype, bits=8, path="sm80", layout="sm80")
    assert configs
    for config in configs:
        out = mixgemm.gemm(eye, packed, config=config)
        assert torch.equal(out, q.to(dtype).to(DEVICE)), config.name


@pytest.mark.parametrize("split", [(1, "none"), (2, "serial"), (3, "parallel"), (7, "streamk")], ids=lambda s: s[1])
@pytest.mark.parametrize("M", [1, 17, 130])
@pytest.mark.parametrize("config", mixgemm.compiled_configs(torch.float16, bits=8, path="sm80", layout="sm80"),
                         ids=lambda c: c.name)
def test_int8_gemm_every_config(config, M, split):
    run(checkpoint(512, 320, 128, torch.float16), 128, M, torch.float16, config.with_split_k(*split))


@pytest.mark.parametrize("symmetric", [False, True])
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("G", [32, 128, 1024])
def test_int8_auto(G, dtype, symmetric):
    run(checkpoint(1024, 256, G, dtype, symmetric), G, 24, dtype)


def test_int8_gpu_prepack_matches_cpu_reference():
    ckpt = checkpoint(256, 192, 64, torch.float16)
    packed = mixgemm.prepack(ckpt["qweight"], ckpt["scales"], ckpt["qzeros"], format="gptq", bits=8, layout="sm80")
    q = formats.unpack_gptq_qweight_int8(ckpt["qweight"].cpu())
    z = formats.unpack_gptq_zeros_int8(ckpt["qzeros"].cpu())
    ref_packed, _, ref_offsets = prepack_ref.prepack_int8_reference(q, ckpt["scales"].cpu(), z, 64)
    assert torch.equal(packed.packed.cpu(), ref_packed)
    assert torch.equal(packed.offsets.cpu().view(torch.int16), ref_offsets.view(torch.int16))
