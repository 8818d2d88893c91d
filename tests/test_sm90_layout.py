"""CPU tests of the sm90 path's weight layout and prepack (python/mixgemm/sm90_layout.py, sm90.py).

The layout is checked three ways: pack/unpack round-trips; every code's bit position against a generic
evaluator of the CuTe layout the kernel is given (reorder_layout.cuh's atom tiled over (N, K), written out
as nested shapes and strides, evaluated the way CuTe does: colexicographic coordinates, inner product
with the strides); and prepack's (codes, scales, offsets) against the float64 weight.
"""

from __future__ import annotations

import dataclasses

import pytest
import torch

import mixgemm
from mixgemm import formats, ops, packing, sm90, sm90_layout
from mixgemm import config as config_module
from mixgemm.config import GemmConfig
from mixgemm.packing import PackedWeight
from hand_registry import fake_compiled


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
    [(256, 96, 128, r"N = scales\.shape\[1\] must be a positive multiple of 64, got 96"),
     (96, 128, 32, r"K must be a positive multiple of 64 for the sm90 layout, got 96"),
     (256, 128, 32, r"group_size must be K or a multiple of 64 dividing K on the sm90 path .*, got 32")],
)
def test_prepack_rejects_unsupported_sizes(K, N, G, match):
    # prepack_sm90 is prepack(layout="sm90"): its errors are prepack's.
    ckpt = _awq(K, N, G)
    with pytest.raises(ValueError, match=rf"^prepack: {match}"):
        sm90.prepack_sm90(ckpt["qweight"], ckpt["scales"], ckpt["qzeros"])
    with pytest.raises(ValueError, match=rf"^prepack: {match}"):
        mixgemm.prepack(ckpt["qweight"], ckpt["scales"], ckpt["qzeros"], layout="sm90")


def test_per_channel_group_is_accepted():
    K, N = 192, 64  # G = K = 192, not a multiple of 128 but the whole of K
    ckpt = _awq(K, N, K)
    assert sm90.prepack_sm90(ckpt["qweight"], ckpt["scales"], ckpt["qzeros"]).group_size == K


def test_prepack_rejects_bad_arguments():
    ckpt = _awq(128, 64, 64)
    with pytest.raises(ValueError, match=r"^prepack: bits must be 4 or 8, got 3"):
        sm90.prepack_sm90(ckpt["qweight"], ckpt["scales"], bits=3)
    with pytest.raises(ValueError, match=r"^prepack: format must be 'awq', 'gptq' \(v1 zeros\) or 'gptq_v2'"):
        sm90.prepack_sm90(ckpt["qweight"], ckpt["scales"], format="exl2")
    with pytest.raises(ValueError, match=r"^prepack: group_size = 128 disagrees with K / scales\.shape\[0\] = 64"):
        sm90.prepack_sm90(ckpt["qweight"], ckpt["scales"], group_size=128)
    with pytest.raises(ValueError, match=r"^prepack: g_idx \(act-order\) is a GPTQ field"):
        sm90.prepack_sm90(ckpt["qweight"], ckpt["scales"], g_idx=torch.arange(128) // 64)
    with pytest.raises(ValueError, match=r"^prepack: qweight must have dtype int32"):
        sm90.prepack_sm90(ckpt["qweight"].float(), ckpt["scales"])
    with pytest.raises(ValueError, match=r"^prepack: qzeros is on meta but qweight is on cpu"):
        sm90.prepack_sm90(ckpt["qweight"], ckpt["scales"], torch.empty(2, 8, dtype=torch.int32, device="meta"))


# A build's sm90 registry, by hand (two kernels), so these tests do not depend on what this build compiled.
SM90_PERSISTENT = GemmConfig.sm90(128, 128, 64, 1, 1, "coop", "persistent")
SM90_STREAMK = GemmConfig.sm90(16, 128, 64, 1, 1, "coop", "streamk")
SM80_TILE = GemmConfig(16, 256, 64, 16, 64, 64, 3)


@pytest.fixture
def hand_compiled(monkeypatch):
    monkeypatch.setattr(config_module, "_compiled",
                        fake_compiled((SM80_TILE, GemmConfig.gemv(8, 4), SM90_PERSISTENT, SM90_STREAMK)))


def test_layouts_never_cross(hand_compiled, cpu_as_cuda):
    # A weight reaches only the kernels that read its layout: the decode path reads both, the sm90 GEMM its
    # own, the sm80 GEMM the sm90 layout only with the tiles a build compiles for it (none in this one).
    ckpt = _awq(128, 128, 64)
    packed = sm90.prepack_sm90(ckpt["qweight"], ckpt["scales"], ckpt["qzeros"])
    empty = torch.zeros(0, 128, dtype=torch.float16)  # gemm checks the config, launches nothing
    with pytest.raises(ValueError, match=r"^gemm: config 16x256x64_w16x64x64_s3 is not compiled for weights in the "
                                         r"'sm90' layout in this build"):
        mixgemm.gemm(empty, packed, config=SM80_TILE)
    with pytest.raises(ValueError, match=r"^gemm: config sm90_128x128x64_c1x1_coop_persistent \(sm90 path\) cannot "
                                         r"read a weight in the 'sm80' layout"):
        mixgemm.gemm(empty, dataclasses.replace(packed, layout="sm80",
                                                packed=torch.zeros(2, 8, 32, 4, dtype=torch.int32)),
                     config=SM90_PERSISTENT)
    assert mixgemm.gemm(empty, packed, config=GemmConfig.gemv(8, 4)).shape == (0, 128)
    # Past the config: a valid sm90 call stops at the device rule.
    with pytest.raises(RuntimeError, match=r"^gemm: no CUDA GPU"):
        mixgemm.gemm(torch.zeros(2, 128, dtype=torch.float16), packed)


def test_gemm_sm90_takes_only_sm90_weights_and_configs(hand_compiled, cpu_as_cuda):
    ckpt = _awq(128, 128, 64)
    packed = sm90.prepack_sm90(ckpt["qweight"], ckpt["scales"], ckpt["qzeros"])
    x = torch.zeros(2, 128, dtype=torch.float16)
    sm80_like = PackedWeight(packed.packed, packed.scales, packed.offsets, 64, 4, torch.float16, 128, 128)
    with pytest.raises(ValueError, match=r"^gemm_sm90: packed must be an sm90-layout PackedWeight \(mixgemm\.prepack"
                                         r"\(\.\.\., layout='sm90'\)\), got 'sm80'"):
        sm90.gemm_sm90(x, sm80_like)
    with pytest.raises(ValueError, match=r"^gemm_sm90: packed must be an sm90-layout PackedWeight .*, got 'dict'"):
        sm90.gemm_sm90(x, ckpt)
    for config in (SM80_TILE, GemmConfig.gemv(8, 4)):  # never another path, the decode path included
        with pytest.raises(ValueError,
                           match=rf"^gemm_sm90: config must be an sm90 GemmConfig or None, got {config.name}"):
            sm90.gemm_sm90(x, packed, config=config)
    with pytest.raises(ValueError, match=r"^gemm_sm90: config must be an sm90 GemmConfig or None, got str"):
        sm90.gemm_sm90(x, packed, config="auto")
    # The weight's tensors are checked as gemm checks them (CPU tensors pass for device ones here).
    bad = PackedWeight(packed.packed[:1], packed.scales, packed.offsets, 64, 4, torch.float16, 128, 128, layout="sm90")
    with pytest.raises(ValueError, match=r"^gemm: packed\.packed must have shape \(8, 8, 32, 1\) "
                                         r"\(\[K/16, N/16, 32, 1\] \(the sm90 layout\) for 4-bit weights\), "
                                         r"got \(1, 8, 32, 1\)"):
        sm90.gemm_sm90(x, bad, config=SM90_PERSISTENT)


def test_gemm_sm90_checks_the_weight_before_choosing_a_config(hand_compiled, cpu_as_cuda):
    # config=None reads the weight's dtype and width to find a config: a malformed field must be reported
    # by the weight check, naming the field, not by the config lookup.
    ckpt = _awq(128, 128, 64)
    packed = sm90.prepack_sm90(ckpt["qweight"], ckpt["scales"], ckpt["qzeros"])
    x = torch.zeros(2, 128, dtype=torch.float16)
    with pytest.raises(ValueError, match=r"^gemm_sm90: packed\.bits must be 4 or 8, got 3"):
        sm90.gemm_sm90(x, dataclasses.replace(packed, bits=3))
    with pytest.raises(ValueError, match=r"^gemm_sm90: packed\.act_dtype must be float16 or bfloat16"):
        sm90.gemm_sm90(x, dataclasses.replace(packed, act_dtype=torch.float32))


def test_bits_of_packed_reads_packed_shape_backwards():
    for layout in ("sm80", "sm90"):
        for bits in (4, 8):
            shape, _ = packing.packed_shape(layout, 128, 128, bits)
            assert packing.bits_of_packed(layout, torch.zeros(shape, dtype=torch.int32)) == bits
        assert packing.bits_of_packed(layout, torch.zeros(2, 8, 32, 3, dtype=torch.int32)) is None
        assert packing.bits_of_packed(layout, torch.zeros(8, 32, 4, dtype=torch.int32)) is None


def test_gemm_sm90_picks_an_sm90_config_even_for_one_row(hand_compiled, monkeypatch):
    ckpt = _awq(128, 128, 64)
    packed = sm90.prepack_sm90(ckpt["qweight"], ckpt["scales"], ckpt["qzeros"])
    seen = []
    monkeypatch.setattr(ops, "gemm", lambda x, w, bias, config: seen.append((x.shape, w, config)))
    for shape in [(1, 128), (3, 5, 128), (100, 128), (128,)]:
        sm90.gemm_sm90(torch.zeros(shape, dtype=torch.float16), packed)
    assert [config for *_, config in seen] == [SM90_STREAMK, SM90_STREAMK, SM90_PERSISTENT, SM90_STREAMK]
    assert all(w is packed for _, w, _ in seen)
    sm90.gemm_sm90(torch.zeros(1, 128, dtype=torch.float16), packed, config=SM90_PERSISTENT)
    assert seen[-1][2] == SM90_PERSISTENT
    # No compiled sm90 tile divides N = 64: a clear error rather than a launch.
    narrow = sm90.prepack_sm90(*(_awq(128, 64, 64)[k] for k in ("qweight", "scales", "qzeros")))
    with pytest.raises(ValueError, match=r"^gemm_sm90: no compiled sm90 config fits N = 64 for torch\.float16 int4"):
        sm90.gemm_sm90(torch.zeros(1, 128, dtype=torch.float16), narrow)


# ---------------------------------------------------------------------------------------------------
# prepack(..., layout="sm90") on CPU tensors: the same weight as prepack_sm90, and the layout of the codes


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
    _same_weight(w, sm90.prepack_sm90(qweight, ckpt["scales"], qzeros, format=fmt))
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
    _same_weight(w, sm90.prepack_sm90(gq, ckpt["scales"], gz, format="gptq", g_idx=g_idx))
    perm = torch.sort(g_idx, stable=True).indices
    assert torch.equal(w.perm, perm)
    assert torch.equal(w.packed, sm90_layout.pack_sm90(formats.unpack_awq(ckpt["qweight"])[perm], 4))


@pytest.mark.parametrize("symmetric", [False, True])
def test_prepack_layout_sm90_int8(symmetric):
    K, N, G = 256, 64, 128
    ckpt = formats.random_gptq_int8_weight(K, N, G, symmetric=symmetric)
    w = mixgemm.prepack(ckpt["qweight"], ckpt["scales"], ckpt["qzeros"], format="gptq", bits=8, layout="sm90")
    _same_weight(w, sm90.prepack_sm90(ckpt["qweight"], ckpt["scales"], ckpt["qzeros"], format="gptq", bits=8))
    assert (w.bits, w.scale_only, w.packed.shape) == (8, symmetric, (K // 16, N // 16, 32, 2))
    assert torch.equal(w.packed, sm90_layout.pack_sm90(formats.unpack_gptq_qweight_int8(ckpt["qweight"]), 8))
    zeros = None if symmetric else formats.unpack_gptq_zeros_int8(ckpt["qzeros"], v1=True)
    assert torch.equal(w.offsets, sm90_layout.sign_offsets(ckpt["scales"], zeros, 8))


@pytest.mark.parametrize("layout", ["sm80", "sm90"])
def test_8_bit_weights_need_the_gptq_format(layout):
    ckpt = _awq(256, 64, 64)
    with pytest.raises(ValueError, match=r"^prepack: 8-bit weights come in the GPTQ layout; pass format='gptq'"):
        mixgemm.prepack(ckpt["qweight"], ckpt["scales"], None, bits=8, layout=layout)


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

    ref = sm90.prepack_sm90(ckpt["qweight"], ckpt["scales"], ckpt["qzeros"])
    got = sm90.prepack_sm90(unaligned(ckpt["qweight"]), unaligned(ckpt["scales"]), unaligned(ckpt["qzeros"]))
    for name in ("packed", "scales", "offsets"):
        assert torch.equal(getattr(got, name), getattr(ref, name)), name
        assert getattr(got, name).data_ptr() % 16 == 0, name
