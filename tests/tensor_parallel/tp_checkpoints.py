"""Random quantized layers in every checkpoint format the tensor-parallel slicers read, and the reference they
are checked against: the dense weight W [K, N] dequantized from the logical codes, sliced the obvious way."""

from __future__ import annotations

import dataclasses
from typing import Optional

import torch

from mixgemm import formats
from mixgemm.checkpoint import compressed_tensors
from mixgemm.tensor_parallel.sources import Transposed

F16 = torch.float16
# name -> (format, bits, zero points, act-order, compressed-tensors)
KINDS = {
    "awq": ("awq", 4, True, False, False),
    "awq_scale_only": ("awq", 4, False, False, False),
    "gptq_v1": ("gptq", 4, True, False, False),
    "gptq_v2": ("gptq_v2", 4, True, False, False),
    "gptq_scale_only": ("gptq", 4, False, False, False),
    "gptq_int8": ("gptq", 8, True, False, False),
    "gptq_int8_scale_only": ("gptq", 8, False, False, False),
    "gptq_act_order": ("gptq", 4, True, True, False),
    "gptq_int8_act_order": ("gptq", 8, True, True, False),
    "compressed_tensors": ("gptq_v2", 4, True, False, True),
    "compressed_tensors_int8_sym": ("gptq_v2", 8, False, False, True),
    "compressed_tensors_act_order": ("gptq_v2", 4, True, True, True),
}


@dataclasses.dataclass
class Layer:
    """A layer as its checkpoint stores it (``tensors``, the slicers' sources) and as the reference knows it."""

    fmt: str
    bits: int
    tensors: dict  # qweight, scales, qzeros, g_idx, bias: what shard_checkpoint takes
    q: torch.Tensor
    scales: torch.Tensor
    zeros: Optional[torch.Tensor]
    g_idx: torch.Tensor
    bias: Optional[torch.Tensor]

    def dense(self) -> torch.Tensor:
        """W [K, N] in float64."""
        return formats.dequantize(self.q, self.scales, self.zeros, g_idx=self.g_idx, bits=self.bits)


def act_order_index(K: int, G: int, gen: torch.Generator, closed_world: int = 0) -> torch.Tensor:
    """A g_idx with exactly G rows per group: rows shuffled over the whole layer, or (``closed_world``) within
    each of that many equal row ranges, so that every rank's shard holds whole groups."""
    base = torch.arange(K) // G
    if not closed_world:
        return base[torch.randperm(K, generator=gen)].to(torch.int32)
    span = K // closed_world
    parts = [base[i * span:(i + 1) * span][torch.randperm(span, generator=gen)] for i in range(closed_world)]
    return torch.cat(parts).to(torch.int32)


def make_layer(kind: str, K: int, N: int, G: int, seed: int = 0, bias: bool = True, closed_world: int = 0) -> Layer:
    fmt, bits, with_zeros, act_order, compressed = KINDS[kind]
    gen = torch.Generator().manual_seed(seed)
    top = 1 << bits
    q = torch.randint(0, top, (K, N), generator=gen, dtype=torch.int64).to(torch.uint8)
    scales = ((torch.rand(K // G, N, generator=gen) + 0.5) * 0.01 * (1 if bits == 4 else 1 / 16)).to(F16)
    zeros = torch.randint(0, top, (K // G, N), generator=gen, dtype=torch.int64).to(torch.uint8) if with_zeros else None
    g_idx = act_order_index(K, G, gen, closed_world) if act_order else (torch.arange(K) // G).to(torch.int32)
    b = torch.randn(N, generator=gen).to(F16) if bias else None
    if compressed:
        t = compressed_tensors.layer_tensors(q, scales, zeros, bits, g_idx if act_order else None)
        tensors = {"qweight": Transposed(t["weight_packed"]), "scales": Transposed(t["weight_scale"]),
                   "qzeros": Transposed(t["weight_zero_point"]) if with_zeros else None,
                   "g_idx": t.get("weight_g_idx")}
    elif fmt == "awq":
        tensors = {"qweight": formats.pack_awq(q), "scales": scales,
                   "qzeros": formats.pack_awq(zeros) if with_zeros else None, "g_idx": None}
    else:
        pack_q = formats.pack_gptq_qweight if bits == 4 else formats.pack_gptq_qweight_int8
        pack_z = formats.pack_gptq_zeros if bits == 4 else formats.pack_gptq_zeros_int8
        tensors = {"qweight": pack_q(q), "scales": scales,
                   "qzeros": pack_z(zeros, v1=fmt == "gptq") if with_zeros else None, "g_idx": g_idx}
    tensors["bias"] = b
    return Layer(fmt, bits, tensors, q, scales, zeros, g_idx.long(), b)


def shard_dense(sharded) -> torch.Tensor:
    """What a sharded layer computes, as a dense [in_features, out_features] float64 matrix: the shard's
    tensors unpacked independently of the slicers, its padded rows folded onto the input columns they read
    (``input_index``), its padded columns dropped."""
    fmt, bits, g = sharded.format, sharded.bits, sharded.geometry
    if fmt == "awq":
        q = formats.unpack_awq(sharded.qweight)
        z = None if sharded.qzeros is None else formats.unpack_awq(sharded.qzeros)
    else:
        q = (formats.unpack_gptq_qweight if bits == 4 else formats.unpack_gptq_qweight_int8)(sharded.qweight)
        unpack_z = formats.unpack_gptq_zeros if bits == 4 else formats.unpack_gptq_zeros_int8
        z = None if sharded.qzeros is None else unpack_z(sharded.qzeros, v1=fmt == "gptq")
    assert q.shape == (g.weight_k, g.weight_n)
    if sharded.g_idx is not None:
        w = formats.dequantize(q, sharded.scales, z, g_idx=sharded.g_idx, bits=bits)
    else:
        w = formats.dequantize(q, sharded.scales, z, group_size=g.shard_group, bits=bits)
    if sharded.input_index is not None:
        w = torch.zeros(g.k_size, g.weight_n, dtype=w.dtype).index_add_(0, sharded.input_index, w)
    assert w.shape[0] == g.k_size
    return w[:, : g.n_size]


def reference_shard(layer: Layer, style: str, rank: int, world: int) -> torch.Tensor:
    w = layer.dense()
    K, N = w.shape
    if style == "column":
        return w[:, rank * N // world: (rank + 1) * N // world]
    return w[rank * K // world: (rank + 1) * K // world]
