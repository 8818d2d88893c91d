"""CPU tests of the sm90 weight layout (python/mixgemm/layouts/sm90.py, formerly sm90_layout.py) and of
prepack(..., layout="sm90"), which packs with it in PyTorch (so on CPU tensors too).

The layout is checked three ways: pack/unpack round-trips; every code's bit position against a generic
evaluator of the CuTe layout the kernel is given (reorder_layout.cuh's atom tiled over (N, K), written out
as nested shapes and strides, evaluated the way CuTe does: colexicographic coordinates, inner product
with the strides); and prepack's (codes, scales, offsets) against the float64 weight. The layout interface
both layouts share is tested in test_sm80_layout.py; prepack's and gemm's rules for sm90-layout weights in
tests/api/test_validation_sm90_layout.py.
"""

from __future__ import annotations

import pytest
import torch

import mixgemm
from mixgemm import formats
from mixgemm.layouts import sm90 as sm90_layout
from mixgemm.packing import PackedWeight


def prepack_sm90(*args, **kwargs) -> PackedWeight:
    """What the old mixgemm.sm90.prepack_sm90 was: prepack forced onto the sm90 layout."""
    return mixgemm.prepack(*args, layout="sm90", **kwargs)


def _cute_offset(coord: int, shape, stride) -> int:
    """CuTe's layout function for a 1-D coordinate into a nested (shape, stride): the coordinate is split
    colexicographically (first mode fastest) over the flattened modes."""
    if isinstance(shape, int):
        return coord * stride
    total = 0
    for s, d in zip(shape, stride):
        size = _size(s)
        total += _cute_offset(coord % size, s, d)
        coord //= size
    return total


def _size(shape) -> int:
    if isinstance(shape, int):
        return shape
    out = 1
    for s in shape:
        out *= _size(s)
    return out


def _kernel_layout(N: int, K: int, bits: int):
    """tile_to_shape(ReorderAtom<bits>, (N, K)), as CuTe prints it (see reorder_layout.cuh)."""
    s_j, s_r = (4, 2) if bits == 4 else (2, 4)
    shape = ((((8, 2), 1), N // 16), (((2, 4, 2), 1), K // 16))
    stride = ((((32, 1), 0), 256), (((s_j, 8, s_r), 0), 16 * N))
    return shape, stride


@pytest.mark.parametrize("bits", [4, 8])
@pytest.mark.parametrize("K,N", [(16, 16), (64, 128), (128, 48)])
def test_round_trip(bits, K, N):
    q = torch.randint(0, 1 << bits, (K, N), dtype=torch.int32)
    packed = sm90_layout.pack_sm90(q, bits)
    assert packed.shape == sm90_layout.packed_shape(K, N, bits) and packed.dtype == torch.int32
    assert torch.equal(sm90_layout.unpack_sm90(packed, bits), q)


@pytest.mark.parametrize("bits", [4, 8])
@pytest.mark.parametrize("K,N", [(32, 48), (64, 32)])
def test_bit_positions_match_the_cute_layout(bits, K, N):
    q = torch.randint(0, 1 << bits, (K, N), dtype=torch.int32)
    words = sm90_layout.pack_sm90(q, bits).reshape(-1).to(torch.int64) & 0xFFFFFFFF
    shape, stride = _kernel_layout(N, K, bits)
    per_word = 32 // bits
    seen = set()
    for n in range(N):
        for k in range(K):
            # (n, k) as CuTe's 2-D coordinate: each mode takes its own index.
            offset = _cute_offset(n, shape[0], stride[0]) + _cute_offset(k, shape[1], stride[1])
            seen.add(offset)
            field = (int(words[offset // per_word]) >> (bits * (offset % per_word))) & ((1 << bits) - 1)
            signed = int(q[k, n]) - (1 << (bits - 1))
            assert field == signed & ((1 << bits) - 1), (n, k)
    assert seen == set(range(K * N))  # a bijection onto the packed elements


def test_int4_lane_word_order():
    # One 16 x 16 block: lane 0 holds rows n = 0 (h = 0) and 8 (h = 1), columns k = 0, 1, 8, 9; its word's
    # nibbles are values [0, 2, 4, 6, 1, 3, 5, 7] = (n, k) (0,0) (8,0) (0,8) (8,8) (0,1) (8,1) (0,9) (8,9).
    q = torch.full((16, 16), 8, dtype=torch.int32)  # signed 0 everywhere
    expected = [(0, 0), (8, 0), (0, 8), (8, 8), (0, 1), (8, 1), (0, 9), (8, 9)]
    for i, (n, k) in enumerate(expected):
        q[k, n] = 8 + i  # signed value i in nibble i
    word = int(sm90_layout.pack_sm90(q, 4)[0, 0, 0, 0]) & 0xFFFFFFFF
    assert word == 0x76543210


def _awq(K, N, G, dtype=torch.float16):
    return formats.random_awq_weight(K, N, G, dtype=dtype)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("zeros", [True, False])
@pytest.mark.parametrize("G", [64, 128, 256])
def test_prepack_awq_weight(dtype, zeros, G):
    K, N = 256, 128
    ckpt = _awq(K, N, G, dtype)
    packed = prepack_sm90(ckpt["qweight"], ckpt["scales"], ckpt["qzeros"] if zeros else None)
    assert packed.layout == "sm90" and packed.scale_only == (not zeros) and packed.group_size == G
    q = formats.unpack_awq(ckpt["qweight"])
    z = formats.unpack_awq(ckpt["qzeros"]) if zeros else None
    exact = formats.dequantize(q, ckpt["scales"], z, group_size=G)
    # The kernel's weight: signed code * scale + offset (offset rounded once to the activation dtype).
    signed = (sm90_layout.unpack_sm90(packed.packed, 4) - 8).double()
    s = packed.scales.double().repeat_interleave(G, 0)
    o = packed.offsets.double().repeat_interleave(G, 0)
    model = signed * s + o
    if not zeros:
        assert torch.count_nonzero(packed.offsets) == 0
        assert torch.equal(model, exact)
    else:
        ulp = 2.0 ** -10 if dtype == torch.float16 else 2.0 ** -7
        assert torch.all((model - exact).abs() <= ulp * o.abs() + 1e-30)


def test_prepack_gptq_int8_weight():
    K, N, G = 256, 64, 128
    ckpt = formats.random_gptq_int8_weight(K, N, G)
    q = formats.unpack_gptq_qweight_int8(ckpt["qweight"])
    packed = prepack_sm90(ckpt["qweight"], ckpt["scales"], ckpt.get("qzeros"), format="gptq", bits=8)
    assert packed.bits == 8 and packed.packed.shape == (K // 16, N // 16, 32, 2)
    assert torch.equal(sm90_layout.unpack_sm90(packed.packed, 8), q)


# ---------------------------------------------------------------------------------------------------
# prepack(..., layout="sm90") on CPU tensors: the layout of the codes, whatever the checkpoint format


def _same_weight(a: PackedWeight, b: PackedWeight) -> None:
    for f in ("packed", "scales", "offsets"):
        assert torch.equal(getattr(a, f), getattr(b, f)), f
        assert getattr(a, f).dtype == getattr(b, f).dtype, f
    assert (a.group_size, a.bits, a.act_dtype, a.n, a.k, a.layout, a.scale_only) == (
        b.group_size, b.bits, b.act_dtype, b.n, b.k, b.layout, b.scale_only)
    assert (a.perm is None) == (b.perm is None) and (a.perm is None or torch.equal(a.perm, b.perm))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("fmt", ["awq", "gptq", "gptq_v2"])
@pytest.mark.parametrize("zeros", [True, False])
def test_prepack_layout_sm90_is_the_sm90_layout_of_the_codes(dtype, fmt, zeros):
    K, N, G = 256, 192, 64
    ckpt = _awq(K, N, G, dtype)
    q = formats.unpack_awq(ckpt["qweight"])
    z = formats.unpack_awq(ckpt["qzeros"])
    qweight, qzeros = ckpt["qweight"], ckpt["qzeros"]
    if fmt != "awq":
        qweight, qzeros = formats.awq_to_gptq(qweight, qzeros, v1=fmt == "gptq")
    qzeros = qzeros if zeros else None
    w = mixgemm.prepack(qweight, ckpt["scales"], qzeros, format=fmt, layout="sm90")
    # The same weight whatever format carried it, and whether or not the group size is given.
    awq = mixgemm.prepack(ckpt["qweight"], ckpt["scales"], ckpt["qzeros"] if zeros else None, layout="sm90")
    _same_weight(w, awq)
    _same_weight(w, mixgemm.prepack(qweight, ckpt["scales"], qzeros, G, format=fmt, layout="sm90"))
    assert (w.layout, w.scale_only, w.perm, w.group_size, w.bits, w.n, w.k) == ("sm90", not zeros, None, G, 4, N, K)
    assert w.packed.device.type == "cpu" and w.act_dtype == dtype
    assert torch.equal(w.packed, sm90_layout.pack_sm90(q, 4))
    assert torch.equal(sm90_layout.unpack_sm90(w.packed, 4), q)
    assert torch.equal(w.scales, ckpt["scales"]) and w.scales is not ckpt["scales"]  # a copy
    assert torch.equal(w.offsets, sm90_layout.sign_offsets(ckpt["scales"], z if zeros else None, 4))


def test_prepack_layout_sm90_act_order():
    K, N, G = 256, 64, 64
    ckpt = _awq(K, N, G)
    gq, gz = formats.awq_to_gptq(ckpt["qweight"], ckpt["qzeros"], v1=True)
    g_idx = torch.randperm(K, generator=torch.Generator().manual_seed(5)) % (K // G)
    w = mixgemm.prepack(gq, ckpt["scales"], gz, format="gptq", g_idx=g_idx, layout="sm90")
    perm = torch.sort(g_idx, stable=True).indices
    assert torch.equal(w.perm, perm)
    assert torch.equal(w.packed, sm90_layout.pack_sm90(formats.unpack_awq(ckpt["qweight"])[perm], 4))
    # Groups are whole after the permutation: scales and offsets keep one row per group, unpermuted.
    assert torch.equal(w.scales, ckpt["scales"])
    assert torch.equal(w.offsets, sm90_layout.sign_offsets(ckpt["scales"], formats.unpack_awq(ckpt["qzeros"]), 4))
    # A plain g_idx (k // G) needs no permutation: the weight of the same checkpoint without act-order.
    plain = mixgemm.prepack(gq, ckpt["scales"], gz, format="gptq", g_idx=torch.arange(K) // G, layout="sm90")
    assert plain.perm is None
    _same_weight(plain, mixgemm.prepack(gq, ckpt["scales"], gz, format="gptq", layout="sm90"))


@pytest.mark.parametrize("symmetric", [False, True])
def test_prepack_layout_sm90_int8(symmetric):
    K, N, G = 256, 64, 128
    ckpt = formats.random_gptq_int8_weight(K, N, G, symmetric=symmetric)
    w = mixgemm.prepack(ckpt["qweight"], ckpt["scales"], ckpt["qzeros"], format="gptq", bits=8, layout="sm90")
    assert (w.bits, w.scale_only, w.packed.shape) == (8, symmetric, (K // 16, N // 16, 32, 2))
    assert torch.equal(w.packed, sm90_layout.pack_sm90(formats.unpack_gptq_qweight_int8(ckpt["qweight"]), 8))
    zeros = None if symmetric else formats.unpack_gptq_zeros_int8(ckpt["qzeros"], v1=True)
    assert torch.equal(w.offsets, sm90_layout.sign_offsets(ckpt["scales"], zeros, 8))


def test_prepack_sm90_takes_unaligned_cpu_slices():
    # The sm90 packer is PyTorch gathers into fresh tensors: a checkpoint tensor that starts at an odd
    # address (a slice) packs as it is, to the same result as an aligned copy.
    ckpt = _awq(128, 128, 64)

    def unaligned(t):
        flat = torch.zeros(t.numel() + 1, dtype=t.dtype)
        view = flat[1:].view(t.shape)
        view.copy_(t)
        assert view.data_ptr() % 16 != 0 and view.is_contiguous()
        return view

    ref = prepack_sm90(ckpt["qweight"], ckpt["scales"], ckpt["qzeros"])
    got = prepack_sm90(unaligned(ckpt["qweight"]), unaligned(ckpt["scales"]), unaligned(ckpt["qzeros"]))
    for name in ("packed", "scales", "offsets"):
        assert torch.equal(getattr(got, name), getattr(ref, name)), name
        assert getattr(got, name).data_ptr() % 16 == 0, name
