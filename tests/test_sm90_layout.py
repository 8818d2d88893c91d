"""CPU tests of the sm90 path's weight layout and prepack (python/mixgemm/sm90_layout.py, sm90.py).

The layout is checked three ways: pack/unpack round-trips; every code's bit position against a generic
evaluator of the CuTe layout the kernel is given (reorder_layout.cuh's atom tiled over (N, K), written out
as nested shapes and strides, evaluated the way CuTe does: colexicographic coordinates, inner product
with the strides); and prepack's (codes, scales, offsets) against the float64 weight.
"""

from __future__ import annotations

import pytest
import torch

from mixgemm import formats, sm90, sm90_layout
from mixgemm.packing import PackedWeight


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
    packed = sm90.prepack_sm90(ckpt["qweight"], ckpt["scales"], ckpt["qzeros"] if zeros else None)
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
    packed = sm90.prepack_sm90(ckpt["qweight"], ckpt["scales"], ckpt.get("qzeros"), format="gptq", bits=8)
    assert packed.bits == 8 and packed.packed.shape == (K // 16, N // 16, 32, 2)
    assert torch.equal(sm90_layout.unpack_sm90(packed.packed, 8), q)


@pytest.mark.parametrize(
    "K,N,G,match",
    [(256, 96, 128, "N must be a positive multiple of 64"), (96, 128, 32, "K must be a positive multiple of 64"),
     (256, 128, 32, "group_size must be K or a multiple of 64")],
)
def test_prepack_rejects_unsupported_sizes(K, N, G, match):
    ckpt = _awq(K, N, G)
    with pytest.raises(ValueError, match=match):
        sm90.prepack_sm90(ckpt["qweight"], ckpt["scales"], ckpt["qzeros"])


def test_per_channel_group_is_accepted():
    K, N = 192, 64  # G = K = 192, not a multiple of 128 but the whole of K
    ckpt = _awq(K, N, K)
    assert sm90.prepack_sm90(ckpt["qweight"], ckpt["scales"], ckpt["qzeros"]).group_size == K


def test_prepack_rejects_bad_arguments():
    ckpt = _awq(128, 64, 64)
    with pytest.raises(ValueError, match="bits must be 4 or 8"):
        sm90.prepack_sm90(ckpt["qweight"], ckpt["scales"], bits=3)
    with pytest.raises(ValueError, match="format must be"):
        sm90.prepack_sm90(ckpt["qweight"], ckpt["scales"], format="exl2")
    with pytest.raises(ValueError, match="disagrees"):
        sm90.prepack_sm90(ckpt["qweight"], ckpt["scales"], group_size=128)


def test_layouts_never_cross():
    import mixgemm

    ckpt = _awq(128, 64, 64)
    packed = sm90.prepack_sm90(ckpt["qweight"], ckpt["scales"], ckpt["qzeros"])
    x = torch.zeros(2, 128, dtype=torch.float16)
    with pytest.raises(ValueError, match="'sm90' layout; this kernel takes only 'sm80'"):
        mixgemm.gemm(x, packed)
    sm80_like = PackedWeight(packed.packed, packed.scales, packed.offsets, 64, 4, torch.float16, 64, 128)
    with pytest.raises(ValueError, match="sm90 kernels take only 'sm90'"):
        sm90.gemm_sm90(x, sm80_like)
    with pytest.raises(ValueError, match="packed.packed must"):  # a CPU tensor here; a wrong shape on a GPU
        sm90.gemm_sm90(x, PackedWeight(packed.packed[:1], packed.scales, packed.offsets, 64, 4, torch.float16, 64,
                                       128, layout="sm90"))
