"""The kernels' pure-PyTorch stand-ins, so the checkpoint loaders run end to end on a machine without a GPU:
packing.prepack computed by the layout references, and the GEMM as a float32 product with the dequantized
weight (sm80 layout, or the sm90 layout's signed-code math)."""

from __future__ import annotations

import torch

from mixgemm import formats, packing
from mixgemm.layouts import sm90 as sm90_layout
from mixgemm.layouts.sm80 import dequantize_packed_reference, prepack_awq_reference, prepack_int8_reference


def cpu_prepack(qweight, scales, qzeros=None, group_size=None, *, format="awq", gptq_v1=None, g_idx=None, bits=4):
    """packing.prepack's result, computed by the pure-PyTorch references."""
    v1 = packing.gptq_reads_v1("prepack", format, gptq_v1)
    if format == "awq":
        q, z = formats.unpack_awq(qweight), None if qzeros is None else formats.unpack_awq(qzeros)
    elif bits == 4:
        q = formats.unpack_gptq_qweight(qweight)
        z = None if qzeros is None else formats.unpack_gptq_zeros(qzeros, v1=v1)
    else:
        q = formats.unpack_gptq_qweight_int8(qweight)
        z = None if qzeros is None else formats.unpack_gptq_zeros_int8(qzeros, v1=v1)
    K, N = q.shape
    G = K // scales.shape[0]
    perm = None if g_idx is None else packing._act_order_permutation("prepack", g_idx, K, scales.shape[0])
    if perm is not None:
        q = q.index_select(0, perm)
    if bits == 4:
        packed, s, o = prepack_awq_reference(formats.pack_awq(q), scales, None if z is None else formats.pack_awq(z), G)
    else:
        packed, s, o = prepack_int8_reference(q, scales, z, G)
    return packing.PackedWeight(packed, s, o, G, bits, scales.dtype, N, K, perm)


def cpu_gemm(x, packed, bias=None, config="auto"):
    w = dequantize_packed_reference(packed.packed, packed.scales, packed.offsets, packed.group_size, torch.float32)
    y = x.float() @ w
    return (y if bias is None else y + bias.float()).to(packed.act_dtype)


def cpu_sm90_gemm(x, packed, bias=None, config="auto"):
    assert packed.layout == "sm90"
    G = packed.group_size
    signed = sm90_layout.unpack_sm90(packed.packed, packed.bits).float() - (8 if packed.bits == 4 else 128)
    w = signed * packed.scales.float().repeat_interleave(G, 0) + packed.offsets.float().repeat_interleave(G, 0)
    if packed.perm is not None:
        x = x.index_select(-1, packed.perm)
    y = x.float() @ w
    return (y if bias is None else y + bias.float()).to(packed.act_dtype)
