"""CPU tests of the sm80 weight layout (python/mixgemm/layouts/sm80.py, formerly prepack_ref.py), the spec of
"mixgemm int4 v1" and "mixgemm int8 v1", and of the layout interface every layout module shares
(mixgemm.layouts: NAME, N_MULTIPLE, K_MULTIPLE, packed_shape, described_shape, pack, unpack, offsets) for both
layouts, with mixgemm.layouts.layout() and bits_of_packed.

The layout is checked two independent ways: the vectorised pack/unpack pair must round-trip, and a few
words are rebuilt here with plain Python loops straight from the rule (lane -> (t, c) -> (k, n) ->
fragment element -> nibble), so a self-consistent but wrong pack/unpack pair cannot pass.
"""

from __future__ import annotations

import pytest
import torch

from mixgemm import formats, layouts, shape_rules
from mixgemm.layouts import sm80 as sm80_layout
from mixgemm.layouts import sm90 as sm90_layout
from mixgemm.layouts.sm80 import (
    AWQ_ORDER,
    REG_ORDER,
    dequantize_packed_reference,
    fold_zero_points,
    pack_int4_kernel_layout,
    pack_int8_kernel_layout,
    prepack_awq_reference,
    prepack_gptq_int8_reference,
    prepack_int8_reference,
    unpack_int4_kernel_layout,
    unpack_int8_kernel_layout,
)

# --------------------------------------------------------------------------------------------
# Independent, loop-based helpers (deliberately not vectorised, so they share no code with the
# module under test).
# --------------------------------------------------------------------------------------------


def word_from_rule(q: torch.Tensor, nb: int, kb: int, lane: int, j: int) -> int:
    """The unsigned 32-bit word (nb, kb, lane, j) built literally from the layout rule."""
    t, c = lane % 4, lane // 4
    n0 = 64 * nb + 16 * j + c
    n1 = n0 + 8
    k0 = 16 * kb + 2 * t
    e = [
        q[k0, n0], q[k0 + 1, n0], q[k0 + 8, n0], q[k0 + 9, n0],
        q[k0, n1], q[k0 + 1, n1], q[k0 + 8, n1], q[k0 + 9, n1],
    ]  # fmt: skip
    word = 0
    for i in range(8):
        word |= int(e[REG_ORDER[i]]) << (4 * i)
    return word


def as_unsigned(word: int) -> int:
    return word & 0xFFFFFFFF


def pack_awq_loops(values: torch.Tensor) -> torch.Tensor:
    """uint8 [R, 8C] -> AWQ int32 [R, C]: nibble i of word (r, c) holds column 8c + AWQ_ORDER[i]."""
    R, N = values.shape
    out = torch.empty(R, N // 8, dtype=torch.int32)
    for r in range(R):
        for c in range(N // 8):
            word = 0
            for i in range(8):
                word |= int(values[r, 8 * c + AWQ_ORDER[i]]) << (4 * i)
            out[r, c] = word - (1 << 32) if word >= 1 << 31 else word
    return out


def random_awq(K: int, N: int, group_size: int, act_dtype: torch.dtype, seed: int = 0):
    gen = torch.Generator().manual_seed(seed)
    q = torch.randint(0, 16, (K, N), generator=gen, dtype=torch.uint8)
    z = torch.randint(0, 16, (K // group_size, N), generator=gen, dtype=torch.uint8)
    s = (torch.rand(K // group_size, N, generator=gen, dtype=torch.float32) * 0.02 + 1e-3).to(act_dtype)
    return q, z, s, pack_awq_loops(q), pack_awq_loops(z)


# --------------------------------------------------------------------------------------------
# Layout
# --------------------------------------------------------------------------------------------


def test_constants():
    assert REG_ORDER == (0, 2, 4, 6, 1, 3, 5, 7)
    assert AWQ_ORDER == (0, 2, 4, 6, 1, 3, 5, 7)


@pytest.mark.parametrize("K,N", [(16, 64), (32, 128), (48, 192), (128, 64), (256, 512)])
@pytest.mark.parametrize("dtype", [torch.uint8, torch.int32, torch.int64])
def test_round_trip(K, N, dtype):
    gen = torch.Generator().manual_seed(K * 1000 + N)
    q = torch.randint(0, 16, (K, N), generator=gen).to(dtype)
    packed = pack_int4_kernel_layout(q)
    assert packed.dtype == torch.int32
    assert packed.shape == (N // 64, K // 16, 32, 4)
    assert packed.is_contiguous()
    back = unpack_int4_kernel_layout(packed)
    assert back.dtype == torch.uint8
    assert torch.equal(back, q.to(torch.uint8))


def test_round_trip_from_words():
    # The inverse direction: any 32-bit pattern (negative int32s included) survives unpack -> pack.
    gen = torch.Generator().manual_seed(7)
    packed = torch.randint(-(2**31), 2**31, (3, 4, 32, 4), generator=gen, dtype=torch.int64).to(torch.int32)
    assert (packed < 0).any()
    assert torch.equal(pack_int4_kernel_layout(unpack_int4_kernel_layout(packed)), packed)


def test_hand_derived_words():
    # K = 32, N = 128: 2 x 2 blocks. Within one fragment, (k % 2) + 2 * ((k % 16) // 8) + 4 * ((n // 8) % 2)
    # numbers the eight elements 0..7 in fragment order; g is constant over a fragment but varies with
    # t, c, j, kb and nb. So the eight nibbles of every word are distinct (a swapped nibble or row shows
    # up) and words differ between lanes and blocks (a swapped lane or block shows up).
    K, N = 32, 128

    def value(k, n):
        slot = (k % 2) + 2 * ((k % 16) // 8) + 4 * ((n // 8) % 2)
        g = 3 * ((k % 8) // 2) + 5 * (n % 8) + 7 * (n // 16) + 11 * (k // 16)
        return (slot + g) % 16

    q = torch.tensor([[value(k, n) for n in range(N)] for k in range(K)], dtype=torch.uint8)
    packed = pack_int4_kernel_layout(q)

    # Every word against the literal rule.
    for nb in range(N // 64):
        for kb in range(K // 16):
            for lane in range(32):
                for j in range(4):
                    got = as_unsigned(int(packed[nb, kb, lane, j]))
                    assert got == word_from_rule(q, nb, kb, lane, j), (nb, kb, lane, j)
                    assert len({(got >> (4 * i)) & 0xF for i in range(8)}) == 8

    # One word worked out by hand: (nb, kb, lane, j) = (1, 1, 13, 2) -> t = 1, c = 3,
    # n0 = 64 + 32 + 3 = 99, n1 = 107, k0 = 16 + 2 = 18; rows 18, 19, 26, 27.
    # g = 3*1 + 5*3 + 7*6 + 11*1 = 71 = 7 (mod 16) for all eight, slots 0..7 in order, so
    # e = [q(18,99), q(19,99), q(26,99), q(27,99), q(18,107), q(19,107), q(26,107), q(27,107)]
    #   = [7, 8, 9, 10, 11, 12, 13, 14]
    e = [7, 8, 9, 10, 11, 12, 13, 14]
    assert [int(q[k, n]) for n in (99, 107) for k in (18, 19, 26, 27)] == e
    word = as_unsigned(int(packed[1, 1, 13, 2]))
    nibbles = [(word >> (4 * i)) & 0xF for i in range(8)]
    # nibble i = e[REG_ORDER[i]]: the converter's pair p = (nibble p, nibble p + 4) = (e[2p], e[2p+1]).
    assert nibbles == [e[0], e[2], e[4], e[6], e[1], e[3], e[5], e[7]] == [7, 9, 11, 13, 8, 10, 12, 14]
    assert word == 0xECA8DB97  # nibbles 7..0 = E C A 8 D B 9 7
    assert int(packed[1, 1, 13, 2]) == 0xECA8DB97 - 2**32  # nibble 7 >= 8 -> negative int32


def test_block_is_contiguous_512_bytes():
    # A warp's 16 x 64 block (kb, nb) is one contiguous 512-byte run, and consecutive kb follow each
    # other (K-contiguous column strip).
    q = torch.randint(0, 16, (64, 128), dtype=torch.uint8)
    packed = pack_int4_kernel_layout(q)
    assert packed.stride() == (4 * 32 * 4, 32 * 4, 4, 1)
    assert packed[0, 0].numel() * packed.element_size() == 512


# --------------------------------------------------------------------------------------------
# Scales, offsets and the AWQ path
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("act_dtype", [torch.float16, torch.bfloat16])
def test_fold_zero_points_symmetric(act_dtype):
    s = torch.tensor([[0.5, 1.0, 0.01, -2.0], [3.0, 1e-3, 7.25, 0.0]], dtype=act_dtype)
    off = fold_zero_points(s, None, act_dtype)
    assert off.dtype == act_dtype
    expected = (-(8.0 * s.to(torch.float32))).to(act_dtype)
    assert torch.equal(off.view(torch.int16), expected.view(torch.int16))
    # 8 * s is exact in fp16/bf16 (a power of two), so the offset is exactly -8 s.
    assert torch.equal(off.double(), -8.0 * s.double())


@pytest.mark.parametrize("act_dtype", [torch.float16, torch.bfloat16])
def test_fold_zero_points_rounds_once(act_dtype):
    gen = torch.Generator().manual_seed(3)
    s = torch.rand(8, 64, generator=gen, dtype=torch.float32).to(act_dtype)
    z = torch.randint(0, 16, (8, 64), generator=gen, dtype=torch.uint8)
    off = fold_zero_points(s, z, act_dtype)
    # -z * s is exact in float64; a single rounding of it must give the same bits.
    expected = (-(z.double() * s.double())).to(act_dtype)
    assert torch.equal(off.view(torch.int16), expected.view(torch.int16))
    # Scales arriving in float32 are rounded to act_dtype first: the kernel multiplies by that scale.
    off32 = fold_zero_points(s.float() + 1e-7, z, act_dtype)
    expected32 = (-(z.double() * (s.float() + 1e-7).to(act_dtype).double())).to(act_dtype)
    assert torch.equal(off32.view(torch.int16), expected32.view(torch.int16))


@pytest.mark.parametrize("act_dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("K,N,G", [(128, 64, 32), (256, 128, 128), (64, 192, 64), (48, 64, 16)])
def test_prepack_awq_reference(K, N, G, act_dtype):
    q, z, s, qweight, qzeros = random_awq(K, N, G, act_dtype, seed=K + N + G)
    packed, scales, offsets = prepack_awq_reference(qweight, s, qzeros, G)

    assert torch.equal(unpack_int4_kernel_layout(packed), q)  # AWQ values stored unchanged
    assert scales.dtype == act_dtype and torch.equal(scales, s)
    assert offsets.dtype == act_dtype and offsets.shape == (K // G, N)

    # The kernel's weight q*s + offset against the format's definition (q - z) * s, both in float64.
    # The only difference is the single rounding of -z*s to act_dtype, so per group
    #   |error| <= |z*s| * 2^-11 (fp16, 11-bit significand) or 2^-8 (bf16)  (half an ulp, relative).
    got = dequantize_packed_reference(packed, scales, offsets, G)
    zz = z.double().repeat_interleave(G, 0)
    ss = s.double().repeat_interleave(G, 0)
    want = (q.double() - zz) * ss
    rel = 2.0**-11 if act_dtype == torch.float16 else 2.0**-8
    assert got.dtype == torch.float64 and got.shape == (K, N)
    assert torch.all((got - want).abs() <= (zz * ss).abs() * rel)
    # ... and it is exactly q*s + (offset as stored), which is what the kernel computes.
    exact = q.double() * ss + offsets.double().repeat_interleave(G, 0)
    assert torch.equal(got, exact)


def test_prepack_awq_reference_symmetric():
    K, N, G = 64, 64, 32
    q, _, s, qweight, _ = random_awq(K, N, G, torch.float16)
    packed, _, offsets = prepack_awq_reference(qweight, s, None, G)
    assert torch.equal(offsets, fold_zero_points(s, None, torch.float16))
    w = dequantize_packed_reference(packed, s, offsets, G)
    want = (q.double() - 8) * s.double().repeat_interleave(G, 0)
    assert torch.equal(w, want)  # 8*s is exact, so symmetric dequant has no rounding at all


def test_awq_nibbles_with_sign_bit():
    # Every nibble 15 -> qweight words are -1; the values must come through as 15, not as sign-extended junk.
    K, N, G = 16, 64, 16
    qweight = torch.full((K, N // 8), -1, dtype=torch.int32)
    qzeros = torch.full((1, N // 8), -1, dtype=torch.int32)
    s = torch.ones(1, N, dtype=torch.float16)
    packed, _, offsets = prepack_awq_reference(qweight, s, qzeros, G)
    assert torch.all(packed == -1)
    assert torch.all(offsets == -15)


def test_dequantize_other_dtype():
    K, N, G = 32, 64, 16
    q, z, s, qweight, qzeros = random_awq(K, N, G, torch.bfloat16)
    packed, scales, offsets = prepack_awq_reference(qweight, s, qzeros, G)
    w32 = dequantize_packed_reference(packed, scales, offsets, G, dtype=torch.float32)
    assert w32.dtype == torch.float32
    w64 = dequantize_packed_reference(packed, scales, offsets, G)
    assert torch.allclose(w32.double(), w64, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("act_dtype", [torch.float16, torch.bfloat16])
def test_agrees_with_formats(act_dtype):
    # layouts.sm80 decodes AWQ with its own private helper; it must agree with mixgemm.formats, and the
    # kernel's q*s + offset must agree with formats.dequantize's (q - z)*s within the offset rounding.
    from mixgemm import formats
    K, N, G = 128, 128, 64
    gen = torch.Generator().manual_seed(21)
    q = torch.randint(0, 16, (K, N), generator=gen, dtype=torch.uint8)
    z = torch.randint(0, 16, (K // G, N), generator=gen, dtype=torch.uint8)
    s = (torch.randn(K // G, N, generator=gen) * 0.01).to(act_dtype)
    qweight, qzeros = formats.pack_awq(q), formats.pack_awq(z)
    assert torch.equal(qweight, pack_awq_loops(q))  # same AWQ packing as this file's loop packer

    packed, scales, offsets = prepack_awq_reference(qweight, s, qzeros, G)
    assert torch.equal(unpack_int4_kernel_layout(packed), formats.unpack_awq(qweight))
    got = dequantize_packed_reference(packed, scales, offsets, G)
    want = formats.dequantize(q, s, z, group_size=G)
    zs = (z.double() * s.double()).abs().repeat_interleave(G, 0)
    rel = 2.0**-11 if act_dtype == torch.float16 else 2.0**-8
    assert torch.all((got - want).abs() <= zs * rel)


# --------------------------------------------------------------------------------------------
# Every ValueError
# --------------------------------------------------------------------------------------------

_q_ok = torch.zeros(16, 64, dtype=torch.uint8)
_packed_ok = torch.zeros(1, 1, 32, 4, dtype=torch.int32)
_s_ok = torch.ones(1, 64, dtype=torch.float16)
_qw_ok = torch.zeros(16, 8, dtype=torch.int32)
_qz_ok = torch.zeros(1, 8, dtype=torch.int32)


@pytest.mark.parametrize(
    "call,match",
    [
        # pack_int4_kernel_layout
        (lambda: pack_int4_kernel_layout([[0]]), "q must be a torch.Tensor"),
        (lambda: pack_int4_kernel_layout(torch.zeros(16 * 64, dtype=torch.uint8)), "q must be 2-D"),
        (lambda: pack_int4_kernel_layout(torch.zeros(16, 64)), "q must be an integer tensor"),
        (lambda: pack_int4_kernel_layout(torch.zeros(16, 64, dtype=torch.bool)), "q must be an integer tensor"),
        (lambda: pack_int4_kernel_layout(torch.zeros(24, 64, dtype=torch.uint8)), "multiple of 16"),
        (lambda: pack_int4_kernel_layout(torch.zeros(0, 64, dtype=torch.uint8)), "multiple of 16"),
        (lambda: pack_int4_kernel_layout(torch.zeros(16, 96, dtype=torch.uint8)), "multiple of 64"),
        (lambda: pack_int4_kernel_layout(torch.full((16, 64), 16, dtype=torch.uint8)), r"in 0\.\.15"),
        (lambda: pack_int4_kernel_layout(torch.full((16, 64), -1, dtype=torch.int32)), r"in 0\.\.15"),
        # unpack_int4_kernel_layout
        (lambda: unpack_int4_kernel_layout(torch.zeros(1, 1, 32, 4, dtype=torch.int64)), "packed must be int32"),
        (lambda: unpack_int4_kernel_layout(torch.zeros(1, 32, 4, dtype=torch.int32)), "packed must be 4-D"),
        (lambda: unpack_int4_kernel_layout(torch.zeros(1, 1, 16, 4, dtype=torch.int32)), r"\[N/64, K/16, 32, 4\]"),
        (lambda: unpack_int4_kernel_layout(torch.zeros(1, 1, 32, 8, dtype=torch.int32)), r"\[N/64, K/16, 32, 4\]"),
        (lambda: unpack_int4_kernel_layout(torch.zeros(0, 1, 32, 4, dtype=torch.int32)), r"\[N/64, K/16, 32, 4\]"),
        # fold_zero_points
        (lambda: fold_zero_points(_s_ok, None, torch.float32), "act_dtype must be torch.float16 or torch.bfloat16"),
        (lambda: fold_zero_points(_s_ok.view(-1), None, torch.float16), "scales must be 2-D"),
        (lambda: fold_zero_points(_s_ok.int(), None, torch.float16), "scales must be a floating tensor"),
        (lambda: fold_zero_points(_s_ok, torch.zeros(1, 64), torch.float16), "zeros must be an integer tensor"),
        (lambda: fold_zero_points(_s_ok, torch.zeros(1, 32, dtype=torch.uint8), torch.float16), "zeros must have the shape"),
        (lambda: fold_zero_points(_s_ok, torch.full((1, 64), 16, dtype=torch.uint8), torch.float16), r"zeros values must be in 0\.\.15"),
        # prepack_awq_reference
        (lambda: prepack_awq_reference(_qw_ok.to(torch.int64), _s_ok, _qz_ok, 16), "qweight must be int32"),
        (lambda: prepack_awq_reference(_qw_ok.view(-1), _s_ok, _qz_ok, 16), "qweight must be 2-D"),
        (lambda: prepack_awq_reference(_qw_ok, _s_ok.float(), _qz_ok, 16), "scales must be torch.float16 or torch.bfloat16"),
        (lambda: prepack_awq_reference(torch.zeros(8, 8, dtype=torch.int32), _s_ok, _qz_ok, 8), "positive multiple of 16"),
        (lambda: prepack_awq_reference(torch.zeros(16, 4, dtype=torch.int32), _s_ok[:, :32], _qz_ok[:, :4], 16), "positive multiple of 64"),
        (lambda: prepack_awq_reference(_qw_ok, _s_ok, _qz_ok, 0), "group_size must be a positive int"),
        (lambda: prepack_awq_reference(_qw_ok, _s_ok, _qz_ok, 16.0), "group_size must be a positive int"),
        (lambda: prepack_awq_reference(_qw_ok, _s_ok, _qz_ok, 12), "group_size must divide K"),
        (lambda: prepack_awq_reference(_qw_ok, torch.ones(2, 64, dtype=torch.float16), _qz_ok, 16), "scales must have shape"),
        (lambda: prepack_awq_reference(_qw_ok, _s_ok, _qz_ok.to(torch.int64), 16), "qzeros must be int32"),
        (lambda: prepack_awq_reference(_qw_ok, _s_ok, torch.zeros(2, 8, dtype=torch.int32), 16), "qzeros must have shape"),
        # dequantize_packed_reference
        (lambda: dequantize_packed_reference(_packed_ok.long(), _s_ok, _s_ok, 16), "packed must be int32"),
        (lambda: dequantize_packed_reference(_packed_ok, _s_ok.float(), _s_ok, 16), "scales must be torch.float16"),
        (lambda: dequantize_packed_reference(_packed_ok, _s_ok, _s_ok.float(), 16), "offsets must be torch.float16"),
        (lambda: dequantize_packed_reference(_packed_ok, _s_ok, _s_ok, 16, dtype=torch.int32), "dtype must be a floating"),
        (lambda: dequantize_packed_reference(_packed_ok, _s_ok, _s_ok, 5), "group_size must divide K"),
        (lambda: dequantize_packed_reference(_packed_ok, _s_ok, _s_ok, -16), "group_size must be a positive int"),
        (lambda: dequantize_packed_reference(_packed_ok, torch.ones(2, 64, dtype=torch.float16), _s_ok, 16), "scales must have shape"),
        (lambda: dequantize_packed_reference(_packed_ok, _s_ok, _s_ok.bfloat16(), 16), "offsets must have the shape and dtype"),
    ],
)
def test_value_errors(call, match):
    with pytest.raises(ValueError, match=match):
        call()


# ============================================================================================
# mixgemm int8 v1
# ============================================================================================


def word_from_rule_int8(q: torch.Tensor, nb: int, kb: int, lane: int, w: int) -> int:
    """The unsigned 32-bit int8-layout word (nb, kb, lane, w) built literally from the layout rule."""
    t, c = lane % 4, lane // 4
    j, tile = w // 2, w % 2
    n = 64 * nb + 16 * j + 8 * tile + c
    k0 = 16 * kb + 2 * t
    fragment = [q[k0, n], q[k0 + 1, n], q[k0 + 8, n], q[k0 + 9, n]]  # b0 b1 | b2 b3
    word = 0
    for i in range(4):
        word |= int(fragment[i]) << (8 * i)
    return word


def random_int8(K: int, N: int, group_size: int, act_dtype: torch.dtype, seed: int = 0):
    gen = torch.Generator().manual_seed(seed)
    q = torch.randint(0, 256, (K, N), generator=gen, dtype=torch.uint8)
    z = torch.randint(0, 256, (K // group_size, N), generator=gen, dtype=torch.uint8)
    sign = torch.randint(0, 2, (K // group_size, N), generator=gen) * 2 - 1
    s = (sign * (torch.rand(K // group_size, N, generator=gen) * 1e-3 + 1e-4)).to(act_dtype)
    return q, z, s


def rel_rounding(act_dtype: torch.dtype) -> float:
    """Half an ulp, relative: the most one rounding to act_dtype can move a value."""
    return 2.0**-11 if act_dtype == torch.float16 else 2.0**-8


@pytest.mark.parametrize("K,N", [(16, 64), (32, 128), (48, 192), (128, 64), (256, 512)])
@pytest.mark.parametrize("dtype", [torch.uint8, torch.int16, torch.int32, torch.int64])
def test_int8_round_trip(K, N, dtype):
    gen = torch.Generator().manual_seed(K * 1000 + N + 1)
    q = torch.randint(0, 256, (K, N), generator=gen).to(dtype)
    packed = pack_int8_kernel_layout(q)
    assert packed.dtype == torch.int32
    assert packed.shape == (N // 64, K // 16, 32, 8)
    assert packed.is_contiguous()
    back = unpack_int8_kernel_layout(packed)
    assert back.dtype == torch.uint8
    assert torch.equal(back, q.to(torch.uint8))


def test_int8_round_trip_from_words():
    gen = torch.Generator().manual_seed(8)
    packed = torch.randint(-(2**31), 2**31, (2, 3, 32, 8), generator=gen, dtype=torch.int64).to(torch.int32)
    packed[0, 0, 0, :4] = torch.tensor([-(2**31), -1, 0, 2**31 - 1], dtype=torch.int32)
    assert (packed < 0).any()
    assert torch.equal(pack_int8_kernel_layout(unpack_int8_kernel_layout(packed)), packed)


def test_int8_hand_derived_words():
    K, N = 32, 128  # 2 x 2 blocks of 16 x 64
    gen = torch.Generator().manual_seed(11)
    q = torch.randint(0, 256, (K, N), generator=gen, dtype=torch.uint8)

    # Word (nb, kb, lane, w) = (1, 1, 13, 5): t = 1, c = 3, j = 2, tile = 1 ->
    # n = 64 + 32 + 8 + 3 = 107, k0 = 16 + 2 = 18: rows 18, 19, 26, 27 of column 107.
    q[18, 107], q[19, 107], q[26, 107], q[27, 107] = 0x12, 0x34, 0x56, 0xF0
    # Its tile-0 neighbour (1, 1, 13, 4) is column 99, same rows; byte 3 < 128 -> positive.
    q[18, 99], q[19, 99], q[26, 99], q[27, 99] = 0x01, 0x02, 0x03, 0x7F
    # Word (0, 0, 0, 0): t = c = j = tile = 0 -> column 0, rows 0, 1, 8, 9.
    q[0, 0], q[1, 0], q[8, 0], q[9, 0] = 250, 251, 252, 253

    packed = pack_int8_kernel_layout(q)
    assert int(packed[1, 1, 13, 5]) == 0xF0563412 - 2**32  # byte 3 = 0xF0 >= 128: negative int32
    assert int(packed[1, 1, 13, 4]) == 0x7F030201
    assert as_unsigned(int(packed[0, 0, 0, 0])) == 0xFDFCFBFA

    # Every word against the literal rule.
    for nb in range(N // 64):
        for kb in range(K // 16):
            for lane in range(32):
                for w in range(8):
                    got = as_unsigned(int(packed[nb, kb, lane, w]))
                    assert got == word_from_rule_int8(q, nb, kb, lane, w), (nb, kb, lane, w)


def test_int8_one_hot_positions():
    # K = 16, N = 64 (one block): a single nonzero code must land in exactly one byte of one word, and
    # inverting the rule by hand from that position (lane = 4c + t, w = 2j + tile, byte = 2h + b) must
    # give back its (k, n).
    for k, n in [(0, 0), (1, 0), (8, 0), (9, 0), (2, 5), (15, 63), (7, 40), (14, 17), (6, 24)]:
        q = torch.zeros(16, 64, dtype=torch.uint8)
        q[k, n] = 0xAB
        flat = pack_int8_kernel_layout(q).view(-1)  # [1, 1, 32, 8] flattened: index = 8 * lane + w
        nonzero = torch.nonzero(flat).view(-1).tolist()
        assert len(nonzero) == 1, (k, n)
        lane, w = divmod(nonzero[0], 8)
        word = as_unsigned(int(flat[nonzero[0]]))
        byte = next(i for i in range(4) if (word >> (8 * i)) & 0xFF)
        assert word == 0xAB << (8 * byte)
        t, c, j, tile, h, b = lane % 4, lane // 4, w // 2, w % 2, byte // 2, byte % 2
        assert n == 16 * j + 8 * tile + c, (k, n)
        assert k == 8 * h + 2 * t + b, (k, n)


def test_int8_words_are_the_int4_fragment_halves():
    # For codes 0..15, int8 word (nb, kb, lane, 2j + tile) holds fragment elements e[4 tile .. 4 tile + 3]
    # of int4 word (nb, kb, lane, j), in natural byte order.
    gen = torch.Generator().manual_seed(5)
    q = torch.randint(0, 16, (64, 128), generator=gen, dtype=torch.uint8)
    p4 = pack_int4_kernel_layout(q)
    p8 = pack_int8_kernel_layout(q)
    u4 = p4.to(torch.int64) & 0xFFFFFFFF
    u8 = p8.to(torch.int64) & 0xFFFFFFFF
    nibble_of_element = [REG_ORDER.index(m) for m in range(8)]
    for tile in range(2):
        for byte in range(4):
            element = 4 * tile + byte
            from_int4 = (u4 >> (4 * nibble_of_element[element])) & 0xF  # [nb, kb, lane, j]
            from_int8 = (u8[..., tile::2] >> (8 * byte)) & 0xFF  # [nb, kb, lane, j]
            assert torch.equal(from_int4, from_int8)


def test_int8_block_is_contiguous_1024_bytes():
    q = torch.randint(0, 256, (64, 128), dtype=torch.uint8)
    packed = pack_int8_kernel_layout(q)
    assert packed.stride() == (4 * 32 * 8, 32 * 8, 8, 1)
    assert packed[0, 0].numel() * packed.element_size() == 1024
    assert packed[0, 0, 0].numel() * packed.element_size() == 32  # two 16-byte loads per lane


# --------------------------------------------------------------------------------------------
# int8 scales, offsets and entry points
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("act_dtype", [torch.float16, torch.bfloat16])
def test_fold_zero_points_int8_symmetric_is_minus_128_s(act_dtype):
    s = torch.tensor([[0.5, 1.0, 0.01, -2.0], [3.0, 1e-3, 7.25, 0.0]], dtype=act_dtype)
    off = fold_zero_points(s, None, act_dtype, bits=8)
    assert off.dtype == act_dtype
    # 128 is a power of two: the offset is exactly -128 s, no rounding.
    assert torch.equal(off.double(), -128.0 * s.double())
    # The int4 default is unchanged: z = 8.
    assert torch.equal(fold_zero_points(s, None, act_dtype).double(), -8.0 * s.double())


@pytest.mark.parametrize("act_dtype", [torch.float16, torch.bfloat16])
def test_fold_zero_points_int8_rounds_once(act_dtype):
    gen = torch.Generator().manual_seed(4)
    s = (torch.rand(8, 64, generator=gen) - 0.5).to(act_dtype)
    z = torch.randint(0, 256, (8, 64), generator=gen, dtype=torch.uint8)
    z[0, :4] = torch.tensor([0, 128, 255, 1], dtype=torch.uint8)
    off = fold_zero_points(s, z, act_dtype, bits=8)
    expected = (-(z.double() * s.double())).to(act_dtype)
    assert torch.equal(off.view(torch.int16), expected.view(torch.int16))


@pytest.mark.parametrize("act_dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("K,N,G", [(128, 64, 32), (256, 128, 128), (64, 192, 64), (48, 64, 16)])
def test_prepack_int8_reference(K, N, G, act_dtype):
    q, z, s = random_int8(K, N, G, act_dtype, seed=K + N + G)
    packed, scales, offsets = prepack_int8_reference(q, s, z, G)

    assert packed.shape == (N // 64, K // 16, 32, 8)
    assert torch.equal(unpack_int8_kernel_layout(packed), q)  # values stored unchanged
    assert scales.dtype == act_dtype and torch.equal(scales, s)
    assert offsets.dtype == act_dtype and offsets.shape == (K // G, N)
    assert torch.equal(offsets, fold_zero_points(s, z, act_dtype, bits=8))

    # q*s + offset against (q - z) * s: they differ only by the single rounding of -z*s.
    got = dequantize_packed_reference(packed, scales, offsets, G)
    zz = z.double().repeat_interleave(G, 0)
    ss = s.double().repeat_interleave(G, 0)
    want = (q.double() - zz) * ss
    assert got.dtype == torch.float64 and got.shape == (K, N)
    assert torch.all((got - want).abs() <= (zz * ss).abs() * rel_rounding(act_dtype))
    assert torch.equal(got, q.double() * ss + offsets.double().repeat_interleave(G, 0))


@pytest.mark.parametrize("act_dtype", [torch.float16, torch.bfloat16])
def test_prepack_int8_reference_symmetric(act_dtype):
    K, N, G = 64, 128, 32
    q, _, s = random_int8(K, N, G, act_dtype, seed=2)
    packed, _, offsets = prepack_int8_reference(q, s, None, G)
    assert torch.equal(offsets.double(), -128.0 * s.double())
    w = dequantize_packed_reference(packed, s, offsets, G)
    # 128*s is exact, and q*s - 128*s = (q - 128)*s has at most 8 + 11 significant bits: exact in float64.
    assert torch.equal(w, (q.double() - 128) * s.double().repeat_interleave(G, 0))
    assert torch.equal(w, formats.dequantize(q, s, None, group_size=G, bits=8))


def test_prepack_int8_sign_bit_bytes():
    # Every code and zero 255: all packed words are -1, offsets -255 s.
    K, N, G = 16, 64, 16
    q = torch.full((K, N), 255, dtype=torch.uint8)
    z = torch.full((1, N), 255, dtype=torch.uint8)
    s = torch.full((1, N), 0.5, dtype=torch.float16)
    packed, _, offsets = prepack_int8_reference(q, s, z, G)
    assert torch.all(packed == -1)
    assert torch.all(offsets == -127.5)
    assert torch.all(dequantize_packed_reference(packed, s, offsets, G) == 0)


@pytest.mark.parametrize("v1", [False, True])
@pytest.mark.parametrize("act_dtype", [torch.float16, torch.bfloat16])
def test_prepack_gptq_int8_reference(v1, act_dtype):
    K, N, G = 128, 128, 64
    q, z, s = random_int8(K, N, G, act_dtype, seed=31)
    qweight = formats.pack_gptq_qweight_int8(q)
    qzeros = formats.pack_gptq_zeros_int8(z, v1=v1)

    packed, scales, offsets = prepack_gptq_int8_reference(qweight, s, qzeros, G, v1=v1)
    ref = prepack_int8_reference(q, s, z, G)
    assert torch.equal(packed, ref[0]) and torch.equal(scales, ref[1]) and torch.equal(offsets, ref[2])

    got = dequantize_packed_reference(packed, scales, offsets, G)
    want = formats.dequantize(q, s, z, group_size=G, bits=8)
    zs = (z.double() * s.double()).abs().repeat_interleave(G, 0)
    assert torch.all((got - want).abs() <= zs * rel_rounding(act_dtype))


def test_prepack_gptq_int8_reference_symmetric_random_weight():
    K, N, G = 256, 128, 128
    w = formats.random_gptq_int8_weight(K, N, G, generator=torch.Generator().manual_seed(3), symmetric=True)
    packed, scales, offsets = prepack_gptq_int8_reference(w["qweight"], w["scales"], None, G)
    q = formats.unpack_gptq_qweight_int8(w["qweight"])
    assert torch.equal(unpack_int8_kernel_layout(packed), q)
    assert torch.equal(offsets.double(), -128.0 * w["scales"].double())
    got = dequantize_packed_reference(packed, scales, offsets, G)
    assert torch.equal(got, formats.dequantize(q, w["scales"], None, group_size=G, bits=8))


def test_dequantize_packed_reference_int8_other_dtype():
    K, N, G = 32, 64, 16
    q, z, s = random_int8(K, N, G, torch.bfloat16, seed=9)
    packed, scales, offsets = prepack_int8_reference(q, s, z, G)
    w32 = dequantize_packed_reference(packed, scales, offsets, G, dtype=torch.float32)
    assert w32.dtype == torch.float32
    w64 = dequantize_packed_reference(packed, scales, offsets, G)
    assert torch.allclose(w32.double(), w64, rtol=1e-6, atol=1e-7)


# --------------------------------------------------------------------------------------------
# int8 ValueErrors
# --------------------------------------------------------------------------------------------

_q8_ok = torch.zeros(16, 64, dtype=torch.uint8)
_packed8_ok = torch.zeros(1, 1, 32, 8, dtype=torch.int32)
_qw8_ok = torch.zeros(4, 64, dtype=torch.int32)  # K = 16, N = 64
_qz8_ok = torch.zeros(1, 16, dtype=torch.int32)


@pytest.mark.parametrize(
    "call,match",
    [
        # pack_int8_kernel_layout
        (lambda: pack_int8_kernel_layout([[0]]), "pack_int8_kernel_layout: q must be a torch.Tensor"),
        (lambda: pack_int8_kernel_layout(torch.zeros(16 * 64, dtype=torch.uint8)), "q must be 2-D"),
        (lambda: pack_int8_kernel_layout(torch.zeros(16, 64)), "q must be an integer tensor"),
        (lambda: pack_int8_kernel_layout(torch.zeros(24, 64, dtype=torch.uint8)), r"q must have K \(dim 0\) a positive multiple of 16"),
        (lambda: pack_int8_kernel_layout(torch.zeros(16, 96, dtype=torch.uint8)), r"q must have N \(dim 1\) a positive multiple of 64"),
        (lambda: pack_int8_kernel_layout(torch.full((16, 64), 256, dtype=torch.int32)), r"q values must be in 0\.\.255 \(got min 256, max 256\)"),
        (lambda: pack_int8_kernel_layout(torch.full((16, 64), -1, dtype=torch.int8)), r"q values must be in 0\.\.255"),
        # unpack_int8_kernel_layout
        (lambda: unpack_int8_kernel_layout(_packed8_ok.long()), "unpack_int8_kernel_layout: packed must be int32"),
        (lambda: unpack_int8_kernel_layout(torch.zeros(1, 32, 8, dtype=torch.int32)), "packed must be 4-D"),
        (lambda: unpack_int8_kernel_layout(torch.zeros(1, 1, 32, 4, dtype=torch.int32)), r"\[N/64, K/16, 32, 8\]"),
        (lambda: unpack_int8_kernel_layout(torch.zeros(1, 1, 16, 8, dtype=torch.int32)), r"\[N/64, K/16, 32, 8\]"),
        (lambda: unpack_int8_kernel_layout(torch.zeros(1, 0, 32, 8, dtype=torch.int32)), r"\[N/64, K/16, 32, 8\]"),
        # fold_zero_points with bits
        (lambda: fold_zero_points(_s_ok, None, torch.float16, bits=6), r"fold_zero_points: bits must be 4 or 8 \(got 6\)"),
        (lambda: fold_zero_points(_s_ok, None, torch.float16, bits=True), r"bits must be 4 or 8"),
        (lambda: fold_zero_points(_s_ok, torch.full((1, 64), 256, dtype=torch.int32), torch.float16, bits=8), r"zeros values must be in 0\.\.255"),
        (lambda: fold_zero_points(_s_ok, torch.full((1, 64), 200, dtype=torch.uint8), torch.float16), r"zeros values must be in 0\.\.15"),
        # prepack_int8_reference
        (lambda: prepack_int8_reference(_q8_ok.float(), _s_ok, None, 16), "prepack_int8_reference: q must be an integer tensor"),
        (lambda: prepack_int8_reference(_q8_ok, _s_ok.float(), None, 16), "scales must be torch.float16 or torch.bfloat16"),
        (lambda: prepack_int8_reference(_q8_ok[:8], _s_ok, None, 8), "positive multiple of 16"),
        (lambda: prepack_int8_reference(_q8_ok[:, :32], _s_ok[:, :32], None, 16), "positive multiple of 64"),
        (lambda: prepack_int8_reference(_q8_ok, _s_ok, None, 0), "group_size must be a positive int"),
        (lambda: prepack_int8_reference(_q8_ok, _s_ok, None, 12), "group_size must divide K"),
        (lambda: prepack_int8_reference(_q8_ok, torch.ones(2, 64, dtype=torch.float16), None, 16), r"scales must have shape \[K/group_size, N\]"),
        (lambda: prepack_int8_reference(_q8_ok, _s_ok, torch.zeros(1, 64), 16), "zeros must be an integer tensor"),
        (lambda: prepack_int8_reference(_q8_ok, _s_ok, torch.zeros(2, 64, dtype=torch.uint8), 16), r"zeros must have shape \[K/group_size, N\]"),
        (lambda: prepack_int8_reference(_q8_ok, _s_ok, torch.full((1, 64), 300, dtype=torch.int32), 16), r"zeros values must be in 0\.\.255"),
        (lambda: prepack_int8_reference(torch.full((16, 64), 256, dtype=torch.int32), _s_ok, None, 16), r"q values must be in 0\.\.255"),
        # prepack_gptq_int8_reference
        (lambda: prepack_gptq_int8_reference(_qw8_ok.long(), _s_ok, _qz8_ok, 16), "prepack_gptq_int8_reference: qweight must be int32"),
        (lambda: prepack_gptq_int8_reference(_qw8_ok, _s_ok.float(), _qz8_ok, 16), "scales must be torch.float16"),
        (lambda: prepack_gptq_int8_reference(_qw8_ok[:2], _s_ok, _qz8_ok, 8), r"qweight must have K = 4 \* dim 0 a positive multiple of 16 \(got K=8\)"),
        (lambda: prepack_gptq_int8_reference(_qw8_ok[:, :32], _s_ok[:, :32], _qz8_ok[:, :8], 16), r"qweight must have N \(dim 1\) a positive multiple of 64"),
        (lambda: prepack_gptq_int8_reference(_qw8_ok, _s_ok, _qz8_ok, 5), "group_size must divide K"),
        (lambda: prepack_gptq_int8_reference(_qw8_ok, torch.ones(1, 128, dtype=torch.float16), _qz8_ok, 16), "scales must have shape"),
        (lambda: prepack_gptq_int8_reference(_qw8_ok, _s_ok, _qz8_ok.long(), 16), "qzeros must be int32"),
        (lambda: prepack_gptq_int8_reference(_qw8_ok, _s_ok, torch.zeros(1, 8, dtype=torch.int32), 16), r"qzeros must have shape \[K/group_size, N/4\] = \(1, 16\)"),
        # dequantize_packed_reference dispatch
        (lambda: dequantize_packed_reference(_packed8_ok.long(), _s_ok, _s_ok, 16), "dequantize_packed_reference: packed must be int32"),
        (lambda: dequantize_packed_reference(torch.zeros(1, 1, 32, 6, dtype=torch.int32), _s_ok, _s_ok, 16), r"packed must have shape \[N/64, K/16, 32, 4\] \(int4\) or \[N/64, K/16, 32, 8\] \(int8\)"),
        (lambda: dequantize_packed_reference(_packed8_ok, torch.ones(2, 64, dtype=torch.float16), _s_ok, 16), "scales must have shape"),
        (lambda: dequantize_packed_reference(_packed8_ok, _s_ok, _s_ok, 3), "group_size must divide K"),
    ],
)
def test_value_errors_int8(call, match):
    with pytest.raises(ValueError, match=match):
        call()


# --------------------------------------------------------------------------------------------
# The layout interface (mixgemm.layouts), both layouts: what prepack, gemm's weight checks and the
# custom ops read of a layout without knowing which one it is.
# --------------------------------------------------------------------------------------------

LAYOUT_NAMES = ("sm80", "sm90")
# The sign bias of the sm90 layout's signed codes (the sm80 layout stores codes unsigned).
SIGN_BIAS = {4: 8, 8: 128}


def test_layout_lookup():
    assert tuple(layouts.LAYOUTS) == LAYOUT_NAMES
    assert layouts.layout("sm80") is sm80_layout and layouts.layout("sm90") is sm90_layout
    for name in LAYOUT_NAMES:
        assert layouts.layout(name).NAME == name


@pytest.mark.parametrize("name", ["sm91", "SM80", "", "auto", None, 80, ["sm80"]])
def test_layout_lookup_refuses_other_names(name):
    # An unhashable name too: a ValueError naming the layouts, never a bare KeyError / TypeError.
    with pytest.raises(ValueError, match=r"^layout must be one of \('sm80', 'sm90'\), got "):
        layouts.layout(name)


@pytest.mark.parametrize("name", LAYOUT_NAMES)
def test_interface_is_complete(name):
    module = layouts.layout(name)
    for attr in ("packed_shape", "described_shape", "pack", "unpack", "offsets"):
        assert callable(getattr(module, attr)), attr
    assert (module.N_MULTIPLE, module.K_MULTIPLE) == (64, 16)


@pytest.mark.parametrize("name", LAYOUT_NAMES)
def test_the_dequant_path_runs_every_shape_the_layout_holds(name):
    # prepack's "the layout holds it" check is the layout's multiples; the dequant path, which runs the
    # widest shapes, must take exactly those, and every other path reading the layout no wider K or group.
    module = layouts.layout(name)
    dequant = shape_rules.rule("dequant", name)
    assert dequant is not None
    assert (dequant.n_multiple, dequant.k_multiple) == (module.N_MULTIPLE, module.K_MULTIPLE)
    for rule in shape_rules.table():
        if rule.layout == name:
            assert rule.k_multiple % dequant.k_multiple == 0, rule
            assert rule.group_multiple % dequant.group_multiple == 0, rule


@pytest.mark.parametrize(
    "name, K, N, bits, shape",
    [
        ("sm80", 128, 64, 4, (1, 8, 32, 4)),
        ("sm80", 256, 192, 8, (3, 16, 32, 8)),
        ("sm80", 16, 64, 4, (1, 1, 32, 4)),
        ("sm90", 128, 64, 4, (8, 4, 32, 1)),
        ("sm90", 256, 192, 8, (16, 12, 32, 2)),
        ("sm90", 16, 64, 8, (1, 4, 32, 2)),
    ],
)
def test_packed_shape_of_each_layout(name, K, N, bits, shape):
    module = layouts.layout(name)
    assert module.packed_shape(K, N, bits) == shape
    assert module.described_shape(bits) == {
        "sm80": f"[N/64, K/16, 32, {bits}] (the sm80 layout)",
        "sm90": f"[K/16, N/16, 32, {bits // 4}] (the sm90 layout)",
    }[name]
    # The words hold every code exactly once: K * N codes of `bits` bits in 32-bit words.
    words = shape[0] * shape[1] * shape[2] * shape[3]
    assert words * 32 == K * N * bits


@pytest.mark.parametrize("name", LAYOUT_NAMES)
@pytest.mark.parametrize("bits", [4, 8])
@pytest.mark.parametrize("K, N", [(16, 64), (64, 128), (48, 192)])
def test_pack_unpack_round_trip(name, bits, K, N):
    module = layouts.layout(name)
    gen = torch.Generator().manual_seed(K * N + bits)
    q = torch.randint(0, 1 << bits, (K, N), generator=gen, dtype=torch.int32)
    packed = module.pack(q, bits)
    assert packed.dtype == torch.int32 and packed.is_contiguous()
    assert tuple(packed.shape) == module.packed_shape(K, N, bits)
    assert torch.equal(module.unpack(packed, bits).to(torch.int64), q.to(torch.int64))
    # The interface is the layout's own packer.
    own = {("sm80", 4): pack_int4_kernel_layout, ("sm80", 8): pack_int8_kernel_layout,
           ("sm90", 4): lambda c: sm90_layout.pack_sm90(c, 4), ("sm90", 8): lambda c: sm90_layout.pack_sm90(c, 8)}
    assert torch.equal(packed, own[name, bits](q))


@pytest.mark.parametrize("bits", [4, 8])
def test_the_two_layouts_order_the_same_codes_differently(bits):
    # Same codes, same word count, different words: a weight packed for one layout cannot pass for the other.
    gen = torch.Generator().manual_seed(bits)
    q = torch.randint(0, 1 << bits, (64, 128), generator=gen, dtype=torch.int32)
    a, b = sm80_layout.pack(q, bits), sm90_layout.pack(q, bits)
    assert a.numel() == b.numel() and a.shape != b.shape
    assert not torch.equal(a.reshape(-1), b.reshape(-1))


@pytest.mark.parametrize("name", LAYOUT_NAMES)
@pytest.mark.parametrize("bits", [4, 8])
def test_pack_refuses_codes_out_of_range(name, bits):
    module = layouts.layout(name)
    q = torch.zeros(16, 64, dtype=torch.int32)
    q[3, 5] = 1 << bits
    with pytest.raises(ValueError):
        module.pack(q, bits)
    q[3, 5] = -1
    with pytest.raises(ValueError):
        module.pack(q, bits)


@pytest.mark.parametrize("name, K, N", [("sm80", 8, 64), ("sm80", 16, 48), ("sm80", 0, 64),
                                         ("sm90", 8, 64), ("sm90", 16, 8), ("sm90", 16, 0)])
def test_pack_refuses_shapes_the_layout_cannot_hold(name, K, N):
    with pytest.raises(ValueError, match=r"multiple"):
        layouts.layout(name).pack(torch.zeros(K, N, dtype=torch.int32), 4)


@pytest.mark.parametrize("act_dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("bits", [4, 8])
@pytest.mark.parametrize("zeros", [True, False])
def test_offsets_of_each_layout_give_the_same_weight(act_dtype, bits, zeros):
    # W = (q - z) * s in both layouts: the sm80 kernels compute q * s + offset on unsigned codes, the sm90 ones
    # (q - bias) * s + offset on signed codes. The only error is the offset's single rounding.
    K, N, G = 64, 128, 32
    gen = torch.Generator().manual_seed(bits + 2 * zeros)
    q = torch.randint(0, 1 << bits, (K, N), generator=gen, dtype=torch.int32)
    z = torch.randint(0, 1 << bits, (K // G, N), generator=gen, dtype=torch.int32) if zeros else None
    s = (torch.rand(K // G, N, generator=gen) * 0.02 + 1e-3).to(act_dtype)
    zz = (z.double() if zeros else torch.full(s.shape, float(SIGN_BIAS[bits]), dtype=torch.float64))
    want = (q.double() - zz.repeat_interleave(G, 0)) * s.double().repeat_interleave(G, 0)
    rel = 2.0**-11 if act_dtype == torch.float16 else 2.0**-8
    for name in LAYOUT_NAMES:
        module = layouts.layout(name)
        offsets = module.offsets(s, z, bits)
        assert offsets.dtype == act_dtype and offsets.shape == s.shape
        codes = module.unpack(module.pack(q, bits), bits).double()
        if name == "sm90":
            codes = codes - SIGN_BIAS[bits]  # the kernel reads signed codes
        got = codes * s.double().repeat_interleave(G, 0) + offsets.double().repeat_interleave(G, 0)
        bound = offsets.double().abs().repeat_interleave(G, 0) * rel
        assert torch.all((got - want).abs() <= bound), name
    # Symmetric weights: the sm90 layout needs no offset at all (its scale-only kernels), the sm80 one -bias * s.
    if not zeros:
        assert torch.count_nonzero(sm90_layout.offsets(s, None, bits)) == 0
        assert torch.equal(sm80_layout.offsets(s, None, bits).double(), -SIGN_BIAS[bits] * s.double())


def test_sm80_offsets_are_fold_zero_points():
    gen = torch.Generator().manual_seed(4)
    s = torch.rand(2, 64, generator=gen).to(torch.bfloat16)
    z = torch.randint(0, 256, (2, 64), generator=gen, dtype=torch.int32)
    assert torch.equal(sm80_layout.offsets(s, z, 8), fold_zero_points(s, z, torch.bfloat16, bits=8))
    assert torch.equal(sm80_layout.offsets(s, z % 16, 4), fold_zero_points(s, z % 16, torch.bfloat16))


@pytest.mark.parametrize("name", LAYOUT_NAMES)
def test_bits_of_packed_reads_packed_shape_backwards(name):
    module = layouts.layout(name)
    for bits in (4, 8):
        shape = module.packed_shape(128, 128, bits)
        assert layouts.bits_of_packed(name, torch.zeros(shape, dtype=torch.int32)) == bits
        assert layouts.bits_of_packed(name, module.pack(torch.zeros(16, 64, dtype=torch.int32), bits)) == bits
    assert layouts.bits_of_packed(name, torch.zeros(2, 8, 32, 3, dtype=torch.int32)) is None
    assert layouts.bits_of_packed(name, torch.zeros(8, 32, 4, dtype=torch.int32)) is None
    assert layouts.bits_of_packed(name, [[0]]) is None
    assert layouts.bits_of_packed(name, None) is None


def test_bits_of_packed_tells_the_layouts_apart():
    # 4 words per lane are int4 in the sm80 layout, but no width of the sm90 one (1 or 2 words).
    int4_sm80 = torch.zeros(sm80_layout.packed_shape(64, 64, 4), dtype=torch.int32)
    int8_sm90 = torch.zeros(sm90_layout.packed_shape(64, 64, 8), dtype=torch.int32)
    assert layouts.bits_of_packed("sm90", int4_sm80) is None
    assert layouts.bits_of_packed("sm80", int8_sm90) is None


def test_bits_of_packed_refuses_an_unknown_layout():
    with pytest.raises(ValueError, match=r"^layout must be one of"):
        layouts.bits_of_packed("sm70", torch.zeros(1, 1, 32, 4, dtype=torch.int32))


@pytest.mark.parametrize("name", ["sm80", "sm90"])
@pytest.mark.parametrize("bits", [2, 5, 16])
def test_pack_refuses_other_widths(name, bits):
    # A width the layout has no packing for is an error, not another width's packing.
    with pytest.raises(ValueError, match=r"bits must be 4 or 8"):
        layouts.layout(name).pack(torch.zeros(16, 64, dtype=torch.int32), bits)
