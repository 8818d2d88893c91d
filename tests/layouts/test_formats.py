"""CPU tests of the pure-PyTorch reference formats (mixgemm.formats).

Every test draws its own random data from a generator seeded by the test's
node id, so tests are independent of each other and of execution order but
still reproducible run to run.
"""

import zlib

import pytest
import torch

from mixgemm import formats


@pytest.fixture
def gen(request):
    g = torch.Generator()
    g.manual_seed(zlib.crc32(request.node.nodeid.encode()))
    return g


def rand_codes(shape, gen, high=16, dtype=torch.uint8):
    return torch.randint(0, high, shape, generator=gen).to(dtype)


def u32_to_i32(u):
    """The int32 with the same bits as the unsigned 32-bit value u (hand-checked wrap)."""
    return u - (1 << 32) if u >= (1 << 31) else u


# ---------------------------------------------------------------------------
# Constants
# ---------------------------------------------------------------------------


def test_awq_order_constants():
    assert formats.AWQ_ORDER == (0, 2, 4, 6, 1, 3, 5, 7)
    assert formats.AWQ_NIBBLE_OF_COLUMN == (0, 4, 1, 5, 2, 6, 3, 7)
    for nibble, column in enumerate(formats.AWQ_ORDER):
        assert formats.AWQ_NIBBLE_OF_COLUMN[column] == nibble


# ---------------------------------------------------------------------------
# AWQ packing
# ---------------------------------------------------------------------------


def test_pack_awq_hand_example_row_0_to_7():
    # Nibble i holds column AWQ_ORDER[i] = value AWQ_ORDER[i] here, so the
    # nibbles 0..7 are 0,2,4,6,1,3,5,7 -> hex digits (nibble 7 first) 7531 6420.
    packed = formats.pack_awq(torch.arange(8).reshape(1, 8))
    assert packed.dtype == torch.int32
    assert packed.tolist() == [[0x75316420]]
    assert formats.unpack_awq(packed).tolist() == [list(range(8))]


# Hand table: column j lives in nibble (0,4,1,5,2,6,3,7)[j], i.e. at bit 4*that.
AWQ_SHIFT_OF_COLUMN = {0: 0, 1: 16, 2: 4, 3: 20, 4: 8, 5: 24, 6: 12, 7: 28}


@pytest.mark.parametrize("column", range(8))
def test_pack_awq_single_column_position(column):
    values = torch.zeros(1, 8, dtype=torch.int64)
    values[0, column] = 0x9
    expected = u32_to_i32(0x9 << AWQ_SHIFT_OF_COLUMN[column])
    assert formats.pack_awq(values).tolist() == [[expected]]


def test_pack_awq_two_words_and_two_rows_are_independent():
    values = torch.tensor(
        [
            [0, 1, 2, 3, 4, 5, 6, 7, 15, 14, 13, 12, 11, 10, 9, 8],
            [1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1],
        ]
    )
    # Second word of row 0: nibbles hold columns 8+(0,2,4,6,1,3,5,7) =
    # values 15,13,11,9,14,12,10,8 -> hex (nibble 7 first) 8ACE 9BDF.
    expected = [
        [0x75316420, u32_to_i32(0x8ACE9BDF)],
        [0x00000001, 0x10000000],  # column 15 = column 7 of word 1 -> nibble 7
    ]
    assert formats.pack_awq(values).tolist() == expected


@pytest.mark.parametrize("top", range(8, 16))
def test_pack_awq_sign_bit(top):
    # Column 7 lives in nibble 7, so values 8..15 there set bit 31.
    values = torch.zeros(1, 8, dtype=torch.uint8)
    values[0, 7] = top
    packed = formats.pack_awq(values)
    assert packed.item() == (top << 28) - (1 << 32)
    assert packed.item() < 0
    assert torch.equal(formats.unpack_awq(packed), values)


def test_pack_awq_all_fifteen_is_minus_one():
    packed = formats.pack_awq(torch.full((2, 16), 15, dtype=torch.int32))
    assert packed.tolist() == [[-1, -1], [-1, -1]]
    assert formats.pack_awq(torch.zeros(1, 8, dtype=torch.int8)).tolist() == [[0]]


@pytest.mark.parametrize("shape", [(1, 8), (3, 16), (64, 128), (5, 1024), (0, 8)])
@pytest.mark.parametrize("dtype", [torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64])
def test_awq_round_trip(shape, dtype, gen):
    values = rand_codes(shape, gen, dtype=dtype)
    packed = formats.pack_awq(values)
    assert packed.dtype == torch.int32
    assert packed.shape == (shape[0], shape[1] // 8)
    unpacked = formats.unpack_awq(packed)
    assert unpacked.dtype == torch.uint8
    assert torch.equal(unpacked, values.to(torch.uint8))


def test_awq_unpack_pack_is_bijective_on_int32(gen):
    # Every int32 (negatives included) is a valid word: unpack then pack is identity.
    words = torch.randint(-(1 << 31), 1 << 31, (32, 16), generator=gen, dtype=torch.int64)
    words = words.to(torch.int32)
    words[0, :4] = torch.tensor([-(1 << 31), -1, 0, (1 << 31) - 1], dtype=torch.int32)
    assert torch.equal(formats.pack_awq(formats.unpack_awq(words)), words)


def test_awq_packs_along_last_dim_only(gen):
    values = rand_codes((4, 24), gen)
    packed = formats.pack_awq(values)
    for r in range(4):
        for c in range(3):
            assert packed[r, c] == formats.pack_awq(values[r : r + 1, 8 * c : 8 * c + 8])[0, 0]


# ---------------------------------------------------------------------------
# GPTQ packing
# ---------------------------------------------------------------------------


def test_pack_gptq_qweight_hand_example():
    # Column 0 carries K-rows 0..7 = values 0..7 -> nibble i = i -> 0x76543210.
    # Column 1 carries 15,0,0,...,0,8: nibble 0 = 15, nibble 7 = 8 -> 0x8000000F.
    # Rows 8..15 form the second packed row: only K-row 9 of column 0 is set.
    values = torch.zeros(16, 2, dtype=torch.int64)
    values[:8, 0] = torch.arange(8)
    values[0, 1] = 15
    values[7, 1] = 8
    values[9, 0] = 3
    packed = formats.pack_gptq_qweight(values)
    assert packed.dtype == torch.int32
    assert packed.tolist() == [[0x76543210, u32_to_i32(0x8000000F)], [0x30, 0]]
    assert torch.equal(formats.unpack_gptq_qweight(packed), values.to(torch.uint8))


@pytest.mark.parametrize("top", range(8, 16))
def test_pack_gptq_qweight_sign_bit(top):
    values = torch.zeros(8, 1, dtype=torch.uint8)
    values[7, 0] = top  # K-row 7 -> nibble 7
    packed = formats.pack_gptq_qweight(values)
    assert packed.item() == (top << 28) - (1 << 32)
    assert torch.equal(formats.unpack_gptq_qweight(packed), values)


@pytest.mark.parametrize("shape", [(8, 1), (16, 8), (128, 64), (1024, 3), (0, 4)])
def test_gptq_qweight_round_trip(shape, gen):
    values = rand_codes(shape, gen, dtype=torch.int32)
    packed = formats.pack_gptq_qweight(values)
    assert packed.dtype == torch.int32
    assert packed.shape == (shape[0] // 8, shape[1])
    unpacked = formats.unpack_gptq_qweight(packed)
    assert unpacked.dtype == torch.uint8
    assert torch.equal(unpacked, values.to(torch.uint8))


def test_gptq_qweight_unpack_pack_is_bijective_on_int32(gen):
    words = torch.randint(-(1 << 31), 1 << 31, (8, 24), generator=gen).to(torch.int32)
    assert torch.equal(formats.pack_gptq_qweight(formats.unpack_gptq_qweight(words)), words)


def test_pack_gptq_zeros_hand_example():
    zeros = torch.tensor([[0, 1, 2, 3, 4, 5, 6, 7], [15, 0, 0, 0, 0, 0, 0, 9]])
    packed = formats.pack_gptq_zeros(zeros, v1=False)  # gptq_v2: stored as is, so the layout shows
    assert packed.tolist() == [[0x76543210], [u32_to_i32(0x9000000F)]]
    assert torch.equal(formats.unpack_gptq_zeros(packed, v1=False), zeros.to(torch.uint8))


def test_pack_gptq_zeros_v1_stores_z_minus_one():
    # z = 1..8 is stored as 0..7 -> 0x76543210.
    zeros = torch.arange(1, 9).reshape(1, 8)
    packed = formats.pack_gptq_zeros(zeros, v1=True)
    assert packed.tolist() == [[0x76543210]]
    assert torch.equal(formats.unpack_gptq_zeros(packed, v1=True), zeros.to(torch.uint8))
    # Read as gptq_v2, the stored codes are z - 1; v1 is the default reading.
    assert formats.unpack_gptq_zeros(packed, v1=False).tolist() == [list(range(8))]
    assert torch.equal(formats.pack_gptq_zeros(zeros), packed)
    assert torch.equal(formats.unpack_gptq_zeros(packed), zeros.to(torch.uint8))


def test_pack_gptq_zeros_v1_zero_wraps_to_fifteen():
    zeros = torch.zeros(1, 8, dtype=torch.uint8)
    packed = formats.pack_gptq_zeros(zeros, v1=True)
    assert packed.item() == -1  # all nibbles 15
    assert torch.equal(formats.unpack_gptq_zeros(packed, v1=True), zeros)


@pytest.mark.parametrize("v1", [False, True])
@pytest.mark.parametrize("shape", [(1, 8), (4, 64), (32, 256), (0, 16)])
@pytest.mark.parametrize("dtype", [torch.uint8, torch.int8, torch.int64])
def test_gptq_zeros_round_trip(shape, v1, dtype, gen):
    zeros = rand_codes(shape, gen, dtype=dtype)
    packed = formats.pack_gptq_zeros(zeros, v1=v1)
    assert packed.dtype == torch.int32
    assert packed.shape == (shape[0], shape[1] // 8)
    unpacked = formats.unpack_gptq_zeros(packed, v1=v1)
    assert unpacked.dtype == torch.uint8
    assert torch.equal(unpacked, zeros.to(torch.uint8))
    stored = formats.unpack_gptq_zeros(packed, v1=False)
    expected_stored = (zeros.to(torch.int64) - (1 if v1 else 0)) % 16
    assert torch.equal(stored.to(torch.int64), expected_stored)


# ---------------------------------------------------------------------------
# AWQ <-> GPTQ conversion
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("v1", [False, True])
@pytest.mark.parametrize("K,N,G", [(8, 8, 8), (64, 32, 16), (256, 128, 128)])
def test_awq_gptq_conversion_round_trip(K, N, G, v1, gen):
    q = rand_codes((K, N), gen)
    z = rand_codes((K // G, N), gen)
    awq_qw, awq_qz = formats.pack_awq(q), formats.pack_awq(z)

    gptq_qw, gptq_qz = formats.awq_to_gptq(awq_qw, awq_qz, v1=v1)
    assert gptq_qw.shape == (K // 8, N) and gptq_qz.shape == (K // G, N // 8)
    assert torch.equal(gptq_qw, formats.pack_gptq_qweight(q))
    assert torch.equal(gptq_qz, formats.pack_gptq_zeros(z, v1=v1))
    assert torch.equal(formats.unpack_gptq_qweight(gptq_qw), q)
    assert torch.equal(formats.unpack_gptq_zeros(gptq_qz, v1=v1), z)

    back_qw, back_qz = formats.gptq_to_awq(gptq_qw, gptq_qz, v1=v1)
    assert torch.equal(back_qw, awq_qw)
    assert torch.equal(back_qz, awq_qz)


def test_conversion_preserves_dequantized_weight(gen):
    K, N, G = 128, 64, 32
    w = formats.random_awq_weight(K, N, G, generator=gen)
    gq, gz = formats.awq_to_gptq(w["qweight"], w["qzeros"], v1=True)
    deq_awq = formats.dequantize(
        formats.unpack_awq(w["qweight"]), w["scales"], formats.unpack_awq(w["qzeros"]), G
    )
    deq_gptq = formats.dequantize(
        formats.unpack_gptq_qweight(gq), w["scales"], formats.unpack_gptq_zeros(gz, v1=True), G
    )
    assert torch.equal(deq_awq, deq_gptq)


# ---------------------------------------------------------------------------
# Quantisation
# ---------------------------------------------------------------------------


def assert_within_half_step(w, deq, step_per_element):
    """|w - deq| <= step/2 elementwise, up to float64 rounding."""
    err = (w.to(torch.float64) - deq).abs()
    bound = step_per_element.abs() / 2 * (1 + 1e-12) + 1e-12
    worst = (err - bound).max().item()
    assert worst <= 0, f"error exceeds half a step by {worst}"


def expand_groups(t, G):
    return t.to(torch.float64).repeat_interleave(G, dim=0)


QUANT_CASES = [
    # (K, N, G, w dtype)
    (8, 8, 8, torch.float16),
    (64, 16, 16, torch.float16),
    (128, 40, 32, torch.bfloat16),
    (256, 24, 128, torch.float32),
    (96, 8, 96, torch.float64),
    (32, 5, 1, torch.float16),
]


@pytest.mark.parametrize("bits", [4, 8, 2])
@pytest.mark.parametrize("K,N,G,dtype", QUANT_CASES)
def test_quantize_asym_error_within_half_step(K, N, G, dtype, bits, gen):
    w = (torch.randn(K, N, generator=gen) * 0.05 + torch.randn(1, N, generator=gen) * 0.02)
    w = w.to(dtype)
    q, scales, zeros = formats.quantize_asym(w, G, bits=bits)

    expected_scale_dtype = dtype if dtype in (torch.float16, torch.bfloat16) else torch.float16
    assert q.dtype == torch.uint8 and q.shape == (K, N)
    assert zeros.dtype == torch.uint8 and zeros.shape == (K // G, N)
    assert scales.dtype == expected_scale_dtype and scales.shape == (K // G, N)
    maxq = 2**bits - 1
    assert int(q.max()) <= maxq and int(zeros.max()) <= maxq
    assert (scales > 0).all()

    deq = formats.dequantize(q, scales, zeros, group_size=G, bits=bits)
    assert deq.dtype == torch.float64
    assert_within_half_step(w, deq, expand_groups(scales, G))

    # The stored scale is never below the exact (range including 0) / maxq.
    wg = w.to(torch.float64).reshape(K // G, G, N)
    exact = (wg.amax(1).clamp(min=0) - wg.amin(1).clamp(max=0)) / maxq
    assert (scales.to(torch.float64) >= exact).all()


def test_quantize_asym_uses_full_code_range(gen):
    w = torch.randn(128, 16, generator=gen).half()
    q, scales, zeros = formats.quantize_asym(w, 128)
    # min and max of each column map to the ends of the grid.
    assert (q.amin(0) == 0).all()
    assert (q.amax(0) >= 14).all()


def test_quantize_asym_special_groups():
    # Groups: all positive, all negative, constant nonzero, all zero, a big outlier.
    w = torch.tensor(
        [
            [0.5, -0.5, 0.3, 0.0, 0.01],
            [1.0, -1.0, 0.3, 0.0, -0.02],
            [0.75, -0.25, 0.3, 0.0, 0.03],
            [0.6, -0.9, 0.3, 0.0, 100.0],
        ],
        dtype=torch.float16,
    )
    q, scales, zeros = formats.quantize_asym(w, 4)
    deq = formats.dequantize(q, scales, zeros, group_size=4)
    assert_within_half_step(w, deq, expand_groups(scales, 4))
    # An all-positive group has zero point 0, an all-negative one 15.
    assert zeros[0, 0] == 0 and zeros[0, 1] == 15
    # The all-zero column dequantises exactly to 0 with a tiny positive scale.
    assert (deq[:, 3] == 0).all() and scales[0, 3] > 0
    # Zero is always exactly representable.
    assert (formats.dequantize(zeros.expand(4, 5).contiguous(), scales, zeros, group_size=4) == 0).all()


@pytest.mark.parametrize("bits", [4, 8])
@pytest.mark.parametrize("K,N,G,dtype", QUANT_CASES)
def test_quantize_sym_error_within_half_step(K, N, G, dtype, bits, gen):
    w = (torch.randn(K, N, generator=gen) * 0.05).to(dtype)
    q, scales = formats.quantize_sym(w, G, bits=bits)

    expected_scale_dtype = dtype if dtype in (torch.float16, torch.bfloat16) else torch.float16
    assert q.dtype == torch.uint8 and q.shape == (K, N)
    assert scales.dtype == expected_scale_dtype and scales.shape == (K // G, N)
    assert int(q.max()) <= 2**bits - 1
    assert (scales > 0).all()

    deq = formats.dequantize(q, scales, None, group_size=G, bits=bits)
    assert_within_half_step(w, deq, expand_groups(scales, G))

    wg = w.to(torch.float64).reshape(K // G, G, N)
    exact = 2 * wg.abs().amax(1) / (2**bits - 1)
    assert (scales.to(torch.float64) >= exact).all()


def test_quantize_sym_bias_convention():
    # One column: absmax 7.5 -> exact scale 2*7.5/15 = 1 (exact in fp16).
    w = torch.tensor([[-7.5], [-3.0], [0.0], [2.0], [7.0], [7.5]], dtype=torch.float16)
    q, scales = formats.quantize_sym(w, 6)
    assert scales.tolist() == [[1.0]]
    # round half to even: -7.5 -> -8 -> code 0; 7.5 -> 8 -> clamped to 7 -> code 15.
    assert q.flatten().tolist() == [0, 5, 8, 10, 15, 15]
    assert formats.dequantize(q, scales, group_size=6).flatten().tolist() == [
        -8.0, -3.0, 0.0, 2.0, 7.0, 7.0,
    ]


def test_quantize_zero_matrix():
    w = torch.zeros(16, 8, dtype=torch.bfloat16)
    q, s, z = formats.quantize_asym(w, 8)
    assert (formats.dequantize(q, s, z, group_size=8) == 0).all()
    q, s = formats.quantize_sym(w, 8)
    assert (formats.dequantize(q, s, group_size=8) == 0).all()
    assert (s > 0).all()


# ---------------------------------------------------------------------------
# Dequantisation
# ---------------------------------------------------------------------------


def test_dequantize_hand_example():
    q = torch.tensor([[0, 15], [3, 8], [15, 1], [7, 7]], dtype=torch.uint8)
    scales = torch.tensor([[0.5, -2.0], [0.25, 1.0]], dtype=torch.float16)
    zeros = torch.tensor([[1, 8], [15, 0]], dtype=torch.uint8)
    deq = formats.dequantize(q, scales, zeros, group_size=2)
    assert deq.tolist() == [
        [(0 - 1) * 0.5, (15 - 8) * -2.0],
        [(3 - 1) * 0.5, (8 - 8) * -2.0],
        [(15 - 15) * 0.25, (1 - 0) * 1.0],
        [(7 - 15) * 0.25, (7 - 0) * 1.0],
    ]
    # Symmetric: zero is 8 for int4, 128 for int8.
    assert formats.dequantize(q, scales, group_size=2).tolist()[0] == [-8 * 0.5, 7 * -2.0]
    q8 = torch.tensor([[0], [128], [255]], dtype=torch.uint8)
    s8 = torch.tensor([[0.5]], dtype=torch.float16)
    assert formats.dequantize(q8, s8, group_size=3, bits=8).flatten().tolist() == [-64.0, 0.0, 63.5]


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.float16, torch.bfloat16])
def test_dequantize_output_dtype(dtype, gen):
    q = rand_codes((32, 16), gen)
    z = rand_codes((2, 16), gen)
    s = torch.randn(2, 16, generator=gen).half()
    deq = formats.dequantize(q, s, z, group_size=16, dtype=dtype)
    assert deq.dtype == dtype and deq.shape == (32, 16)
    # Computed in dtype: equals the float64 result rounded, within dtype precision.
    ref = formats.dequantize(q, s, z, group_size=16)
    torch.testing.assert_close(deq.to(torch.float64), ref, rtol=torch.finfo(dtype).eps * 4, atol=0)


def test_dequantize_scales_upcast_before_multiply():
    # 4000 * 60 overflows fp16 (max 65504) but not the float32 compute dtype.
    q = torch.tensor([[15]], dtype=torch.uint8)
    s = torch.tensor([[4000.0]], dtype=torch.float16)
    z = torch.tensor([[0]], dtype=torch.uint8)
    assert formats.dequantize(q, s, z, group_size=1, dtype=torch.float32).item() == 60000.0
    s = torch.tensor([[1e-3]], dtype=torch.bfloat16)
    deq = formats.dequantize(q, s, z, group_size=1)
    assert deq.item() == 15 * s.double().item()


def test_dequantize_g_idx_canonical_equals_group_size(gen):
    K, N, G = 64, 16, 16
    q, z = rand_codes((K, N), gen), rand_codes((K // G, N), gen)
    s = torch.randn(K // G, N, generator=gen).half()
    g_idx = torch.arange(K, dtype=torch.int32) // G
    assert torch.equal(
        formats.dequantize(q, s, z, g_idx=g_idx), formats.dequantize(q, s, z, group_size=G)
    )


@pytest.mark.parametrize("symmetric", [False, True])
def test_dequantize_permuted_g_idx_equals_gathered_groups(symmetric, gen):
    K, N, G = 128, 24, 32
    q = rand_codes((K, N), gen)
    z = None if symmetric else rand_codes((K // G, N), gen)
    s = torch.randn(K // G, N, generator=gen).bfloat16()
    # Act-order style: each group still has G rows, but scattered over K.
    g_idx = (torch.arange(K) // G)[torch.randperm(K, generator=gen)]
    deq = formats.dequantize(q, s, z, g_idx=g_idx)
    # Same thing with the per-row parameters gathered explicitly (group size 1).
    s_rows = s[g_idx]
    z_rows = None if symmetric else z[g_idx]
    assert torch.equal(deq, formats.dequantize(q, s_rows, z_rows, group_size=1))
    # And elementwise by the definition.
    zz = 8.0 if symmetric else z[g_idx].double()
    assert torch.equal(deq, (q.double() - zz) * s[g_idx].double())


def test_dequantize_act_order_row_permutation(gen):
    # Permuting K rows of q together with g_idx permutes the dense rows.
    K, N, G = 96, 16, 32
    q, z = rand_codes((K, N), gen), rand_codes((K // G, N), gen)
    s = torch.randn(K // G, N, generator=gen).half()
    perm = torch.randperm(K, generator=gen)
    g_idx = torch.arange(K) // G
    deq = formats.dequantize(q, s, z, group_size=G)
    assert torch.equal(formats.dequantize(q[perm], s, z, g_idx=g_idx[perm]), deq[perm])


def test_dequantize_g_idx_takes_precedence_over_group_size(gen):
    K, N = 32, 8
    q, z = rand_codes((K, N), gen), rand_codes((2, N), gen)
    s = torch.randn(2, N, generator=gen).half()
    g_idx = torch.randint(0, 2, (K,), generator=gen)
    assert torch.equal(
        formats.dequantize(q, s, z, group_size=16, g_idx=g_idx),
        formats.dequantize(q, s, z, g_idx=g_idx),
    )


# ---------------------------------------------------------------------------
# random_awq_weight
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("K,N,G", [(128, 64, 128), (256, 256, 64), (64, 8, 32)])
def test_random_awq_weight_shapes_and_dtypes(K, N, G, dtype, gen):
    w = formats.random_awq_weight(K, N, G, dtype=dtype, generator=gen)
    assert set(w) == {"qweight", "scales", "qzeros"}
    assert w["qweight"].dtype == torch.int32 and w["qweight"].shape == (K, N // 8)
    assert w["qzeros"].dtype == torch.int32 and w["qzeros"].shape == (K // G, N // 8)
    assert w["scales"].dtype == dtype and w["scales"].shape == (K // G, N)
    for t in w.values():
        assert t.device.type == "cpu"
    a = w["scales"].abs().float()
    assert (a > 0).all() and (a < 1).all()


def test_random_awq_weight_distribution(gen):
    w = formats.random_awq_weight(512, 256, 64, generator=gen)
    q = formats.unpack_awq(w["qweight"])
    z = formats.unpack_awq(w["qzeros"])
    assert set(q.unique().tolist()) == set(range(16))
    assert set(z.unique().tolist()) == set(range(16))
    assert (w["qweight"] < 0).any()  # sign-bit words occur
    s = w["scales"].float()
    assert (s > 0).any() and (s < 0).any()
    assert 1e-3 < s.abs().median().item() < 5e-2


def test_random_awq_weight_reproducible():
    g1, g2 = torch.Generator().manual_seed(7), torch.Generator().manual_seed(7)
    a = formats.random_awq_weight(64, 32, 32, generator=g1)
    b = formats.random_awq_weight(64, 32, 32, generator=g2)
    for key in a:
        assert torch.equal(a[key], b[key])
    # Without a generator it still works (global RNG).
    c = formats.random_awq_weight(64, 32, 32, device=torch.device("cpu"))
    assert c["qweight"].shape == (64, 4)


# ---------------------------------------------------------------------------
# Argument validation
# ---------------------------------------------------------------------------

_i32 = torch.zeros(2, 1, dtype=torch.int32)
_q = torch.zeros(16, 8, dtype=torch.uint8)
_s = torch.ones(2, 8, dtype=torch.float16)
_z = torch.zeros(2, 8, dtype=torch.uint8)
_w = torch.randn(16, 8)

BAD_CALLS = [
    # pack_awq
    ("pack_awq_cols", lambda: formats.pack_awq(torch.zeros(2, 12, dtype=torch.int32)),
     r"pack_awq: values must have a last dimension divisible by 8, got 12"),
    ("pack_awq_float", lambda: formats.pack_awq(torch.zeros(2, 8)),
     r"pack_awq: values must have an integer dtype"),
    ("pack_awq_bool", lambda: formats.pack_awq(torch.zeros(2, 8, dtype=torch.bool)),
     r"pack_awq: values must have an integer dtype"),
    ("pack_awq_high", lambda: formats.pack_awq(torch.full((1, 8), 16)),
     r"pack_awq: values must lie in 0\.\.15, got values in 16\.\.16"),
    ("pack_awq_neg", lambda: formats.pack_awq(torch.full((1, 8), -1)),
     r"pack_awq: values must lie in 0\.\.15"),
    ("pack_awq_1d", lambda: formats.pack_awq(torch.zeros(8, dtype=torch.int32)),
     r"pack_awq: values must be 2-D"),
    ("pack_awq_not_tensor", lambda: formats.pack_awq([[0] * 8]),
     r"pack_awq: values must be a torch.Tensor"),
    # unpack_awq
    ("unpack_awq_dtype", lambda: formats.unpack_awq(torch.zeros(2, 1, dtype=torch.int64)),
     r"unpack_awq: packed must have dtype torch.int32"),
    ("unpack_awq_3d", lambda: formats.unpack_awq(torch.zeros(2, 1, 1, dtype=torch.int32)),
     r"unpack_awq: packed must be 2-D"),
    # GPTQ qweight
    ("pack_gptq_qweight_rows", lambda: formats.pack_gptq_qweight(torch.zeros(12, 4, dtype=torch.int32)),
     r"pack_gptq_qweight: values must have a first dimension divisible by 8, got 12"),
    ("pack_gptq_qweight_range", lambda: formats.pack_gptq_qweight(torch.full((8, 1), 20)),
     r"pack_gptq_qweight: values must lie in 0\.\.15"),
    ("unpack_gptq_qweight_dtype", lambda: formats.unpack_gptq_qweight(torch.zeros(1, 4, dtype=torch.uint8)),
     r"unpack_gptq_qweight: packed must have dtype torch.int32"),
    # GPTQ zeros
    ("pack_gptq_zeros_cols", lambda: formats.pack_gptq_zeros(torch.zeros(1, 4, dtype=torch.int32), v1=True),
     r"pack_gptq_zeros: zeros must have a last dimension divisible by 8, got 4"),
    ("pack_gptq_zeros_range", lambda: formats.pack_gptq_zeros(torch.full((1, 8), 16)),
     r"pack_gptq_zeros: zeros must lie in 0\.\.15"),
    ("unpack_gptq_zeros_dtype", lambda: formats.unpack_gptq_zeros(torch.zeros(1, 1), v1=True),
     r"unpack_gptq_zeros: packed must have dtype torch.int32"),
    # conversions
    ("awq_to_gptq_mismatch", lambda: formats.awq_to_gptq(torch.zeros(8, 2, dtype=torch.int32), _i32),
     r"awq_to_gptq: qweight and qzeros must describe the same N, got 16 and 8"),
    ("awq_to_gptq_k", lambda: formats.awq_to_gptq(torch.zeros(4, 1, dtype=torch.int32), _i32),
     r"pack_gptq_qweight: values must have a first dimension divisible by 8, got 4"),
    ("gptq_to_awq_mismatch", lambda: formats.gptq_to_awq(torch.zeros(1, 16, dtype=torch.int32), _i32),
     r"gptq_to_awq: qweight and qzeros must describe the same N, got 16 and 8"),
    # quantize_asym
    ("asym_group_divides", lambda: formats.quantize_asym(_w, 6),
     r"quantize_asym: group_size must divide K \(the first dimension\), got K=16, group_size=6"),
    ("asym_group_positive", lambda: formats.quantize_asym(_w, 0),
     r"quantize_asym: group_size must be a positive int, got 0"),
    ("asym_group_type", lambda: formats.quantize_asym(_w, 8.0),
     r"quantize_asym: group_size must be a positive int, got 8.0"),
    ("asym_int_w", lambda: formats.quantize_asym(_q, 8),
     r"quantize_asym: w must have a floating-point dtype, got torch.uint8"),
    ("asym_1d", lambda: formats.quantize_asym(torch.zeros(16), 8),
     r"quantize_asym: w must be 2-D"),
    ("asym_bits", lambda: formats.quantize_asym(_w, 8, bits=9),
     r"quantize_asym: bits must be an int in 2\.\.8, got 9"),
    # quantize_sym
    ("sym_group_divides", lambda: formats.quantize_sym(_w, 5),
     r"quantize_sym: group_size must divide K"),
    ("sym_bits", lambda: formats.quantize_sym(_w, 8, bits=1),
     r"quantize_sym: bits must be an int in 2\.\.8, got 1"),
    # dequantize
    ("deq_no_groups", lambda: formats.dequantize(_q, _s, _z),
     r"dequantize: one of group_size or g_idx must be given"),
    ("deq_q_range", lambda: formats.dequantize(torch.full((16, 8), 16, dtype=torch.uint8), _s, _z, 8),
     r"dequantize: q must lie in 0\.\.15, got values in 16\.\.16"),
    ("deq_q_float", lambda: formats.dequantize(_w, _s, _z, 8),
     r"dequantize: q must have an integer dtype"),
    ("deq_scales_int", lambda: formats.dequantize(_q, _z, _z, 8),
     r"dequantize: scales must have a floating-point dtype"),
    ("deq_scales_cols", lambda: formats.dequantize(_q, torch.ones(2, 4), None, 8),
     r"dequantize: scales must have N=8 columns like q, got shape \(2, 4\)"),
    ("deq_scales_rows", lambda: formats.dequantize(_q, torch.ones(4, 8), None, 8),
     r"dequantize: scales must have K/group_size=2 rows, got 4"),
    ("deq_zeros_shape", lambda: formats.dequantize(_q, _s, torch.zeros(4, 8, dtype=torch.uint8), 8),
     r"dequantize: zeros must have the same shape as scales \(2, 8\), got \(4, 8\)"),
    ("deq_zeros_range", lambda: formats.dequantize(_q, _s, torch.full((2, 8), 200, dtype=torch.uint8), 8),
     r"dequantize: zeros must lie in 0\.\.15"),
    ("deq_group_divides", lambda: formats.dequantize(_q, _s, _z, 3),
     r"dequantize: group_size must divide K \(the first dimension\), got K=16, group_size=3"),
    ("deq_g_idx_len", lambda: formats.dequantize(_q, _s, _z, g_idx=torch.zeros(8, dtype=torch.int64)),
     r"dequantize: g_idx must be a 1-D tensor of length K=16, got \(8,\)"),
    ("deq_g_idx_dtype", lambda: formats.dequantize(_q, _s, _z, g_idx=torch.zeros(16)),
     r"dequantize: g_idx must have an integer dtype"),
    ("deq_g_idx_range", lambda: formats.dequantize(_q, _s, _z, g_idx=torch.full((16,), 2)),
     r"dequantize: g_idx must lie in 0\.\.1 \(the rows of scales\), got values in 2\.\.2"),
    ("deq_dtype", lambda: formats.dequantize(_q, _s, _z, 8, dtype=torch.int32),
     r"dequantize: dtype must be a floating-point torch.dtype"),
    ("deq_bits", lambda: formats.dequantize(_q, _s, _z, 8, bits=16),
     r"dequantize: bits must be an int in 2\.\.8, got 16"),
    # random_awq_weight
    ("rand_n", lambda: formats.random_awq_weight(64, 12, 32),
     r"random_awq_weight: N must have a value divisible by 8, got 12"),
    ("rand_k", lambda: formats.random_awq_weight(0, 8, 32),
     r"random_awq_weight: K must be a positive int, got 0"),
    ("rand_group", lambda: formats.random_awq_weight(64, 8, 48),
     r"random_awq_weight: group_size must divide K \(the first dimension\), got K=64, group_size=48"),
    ("rand_dtype", lambda: formats.random_awq_weight(64, 8, 32, dtype=torch.int8),
     r"random_awq_weight: dtype must be a floating-point torch.dtype"),
]


@pytest.mark.parametrize("call,match", [c[1:] for c in BAD_CALLS], ids=[c[0] for c in BAD_CALLS])
def test_value_errors(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_bits8_codes_allowed_in_dequantize(gen):
    # Range checks follow bits: 8-bit codes up to 255 are valid there.
    q = torch.randint(0, 256, (16, 8), generator=gen).to(torch.uint8)
    z = torch.randint(0, 256, (2, 8), generator=gen).to(torch.uint8)
    deq = formats.dequantize(q, _s, z, group_size=8, bits=8)
    assert torch.equal(deq, q.double() - z.double().repeat_interleave(8, 0))


# ---------------------------------------------------------------------------
# GPTQ 8-bit packing
# ---------------------------------------------------------------------------


def test_pack_gptq_qweight_int8_hand_example():
    # Column 0 carries K-rows 0..3 = 0, 1, 2, 3 -> byte i = i -> 0x03020100.
    # Column 1 carries 250..253 -> bytes FA FB FC FD (byte 0 first) -> 0xFDFCFBFA, a negative int32.
    # K-rows 4..7 form the second packed row: only K-row 6 of column 1 is set (byte 2).
    values = torch.zeros(8, 2, dtype=torch.int64)
    values[:4, 0] = torch.tensor([0, 1, 2, 3])
    values[:4, 1] = torch.tensor([250, 251, 252, 253])
    values[6, 1] = 0x7F
    packed = formats.pack_gptq_qweight_int8(values)
    assert packed.dtype == torch.int32 and packed.shape == (2, 2)
    assert packed.tolist() == [[0x03020100, u32_to_i32(0xFDFCFBFA)], [0, 0x007F0000]]
    assert u32_to_i32(0xFDFCFBFA) == -33752070
    assert torch.equal(formats.unpack_gptq_qweight_int8(packed), values.to(torch.uint8))


@pytest.mark.parametrize("top", [128, 129, 200, 255])
def test_pack_gptq_qweight_int8_sign_bit(top):
    values = torch.zeros(4, 1, dtype=torch.uint8)
    values[3, 0] = top  # K-row 3 -> byte 3 (bits 24..31)
    packed = formats.pack_gptq_qweight_int8(values)
    assert packed.item() == (top << 24) - (1 << 32)
    assert packed.item() < 0
    assert torch.equal(formats.unpack_gptq_qweight_int8(packed), values)


def test_pack_gptq_qweight_int8_byte_3_below_128_is_positive():
    values = torch.tensor([[255], [255], [255], [127]], dtype=torch.uint8)
    assert formats.pack_gptq_qweight_int8(values).item() == 0x7FFFFFFF
    assert formats.pack_gptq_qweight_int8(torch.full((4, 3), 255)).tolist() == [[-1, -1, -1]]


@pytest.mark.parametrize("shape", [(4, 1), (16, 8), (128, 64), (1024, 3), (0, 4)])
@pytest.mark.parametrize("dtype", [torch.uint8, torch.int16, torch.int32, torch.int64])
def test_gptq_qweight_int8_round_trip(shape, dtype, gen):
    values = rand_codes(shape, gen, high=256, dtype=dtype)
    packed = formats.pack_gptq_qweight_int8(values)
    assert packed.dtype == torch.int32
    assert packed.shape == (shape[0] // 4, shape[1])
    unpacked = formats.unpack_gptq_qweight_int8(packed)
    assert unpacked.dtype == torch.uint8
    assert torch.equal(unpacked, values.to(torch.uint8))


def test_gptq_qweight_int8_unpack_pack_is_bijective_on_int32(gen):
    words = torch.randint(-(1 << 31), 1 << 31, (8, 24), generator=gen).to(torch.int32)
    words[0, :4] = torch.tensor([-(1 << 31), -1, 0, (1 << 31) - 1], dtype=torch.int32)
    assert torch.equal(formats.pack_gptq_qweight_int8(formats.unpack_gptq_qweight_int8(words)), words)


def test_gptq_qweight_int8_packs_along_k_per_column(gen):
    values = rand_codes((12, 5), gen, high=256)
    packed = formats.pack_gptq_qweight_int8(values)
    for r in range(3):
        for n in range(5):
            word = sum(int(values[4 * r + i, n]) << (8 * i) for i in range(4))
            assert int(packed[r, n]) == u32_to_i32(word)


def test_pack_gptq_zeros_int8_hand_example():
    # Byte i of word c is column 4c + i.
    zeros = torch.tensor([[0, 1, 2, 3, 250, 251, 252, 253], [128, 0, 0, 0, 0, 0, 0, 9]])
    packed = formats.pack_gptq_zeros_int8(zeros, v1=False)  # gptq_v2: stored as is, so the layout shows
    assert packed.dtype == torch.int32 and packed.shape == (2, 2)
    assert packed.tolist() == [
        [0x03020100, u32_to_i32(0xFDFCFBFA)],
        [0x00000080, 0x09000000],
    ]
    assert torch.equal(formats.unpack_gptq_zeros_int8(packed, v1=False), zeros.to(torch.uint8))


def test_pack_gptq_zeros_int8_v1_stores_z_minus_one():
    # z = 1, 2, 3, 4 is stored as 0, 1, 2, 3 -> 0x03020100.
    zeros = torch.tensor([[1, 2, 3, 4]])
    packed = formats.pack_gptq_zeros_int8(zeros, v1=True)
    assert packed.tolist() == [[0x03020100]]
    assert torch.equal(formats.unpack_gptq_zeros_int8(packed, v1=True), zeros.to(torch.uint8))
    assert formats.unpack_gptq_zeros_int8(packed, v1=False).tolist() == [[0, 1, 2, 3]]
    assert torch.equal(formats.pack_gptq_zeros_int8(zeros), packed)  # v1 is the default


def test_pack_gptq_zeros_int8_v1_wraps_mod_256():
    # z = 0 is stored as 255 (all bytes 0xFF -> -1); z = 255 as 254 comes back as 255.
    zeros = torch.zeros(1, 4, dtype=torch.uint8)
    packed = formats.pack_gptq_zeros_int8(zeros, v1=True)
    assert packed.item() == -1
    assert torch.equal(formats.unpack_gptq_zeros_int8(packed, v1=True), zeros)
    zeros = torch.tensor([[255, 0, 128, 1]], dtype=torch.uint8)
    packed = formats.pack_gptq_zeros_int8(zeros, v1=True)
    assert packed.item() == u32_to_i32(0x007FFFFE)  # stored 254, 255, 127, 0
    assert torch.equal(formats.unpack_gptq_zeros_int8(packed, v1=True), zeros)


@pytest.mark.parametrize("v1", [False, True])
@pytest.mark.parametrize("shape", [(1, 4), (4, 64), (32, 256), (0, 16)])
@pytest.mark.parametrize("dtype", [torch.uint8, torch.int16, torch.int64])
def test_gptq_zeros_int8_round_trip(shape, v1, dtype, gen):
    zeros = rand_codes(shape, gen, high=256, dtype=dtype)
    packed = formats.pack_gptq_zeros_int8(zeros, v1=v1)
    assert packed.dtype == torch.int32
    assert packed.shape == (shape[0], shape[1] // 4)
    unpacked = formats.unpack_gptq_zeros_int8(packed, v1=v1)
    assert unpacked.dtype == torch.uint8
    assert torch.equal(unpacked, zeros.to(torch.uint8))
    stored = formats.unpack_gptq_zeros_int8(packed, v1=False)
    expected_stored = (zeros.to(torch.int64) - (1 if v1 else 0)) % 256
    assert torch.equal(stored.to(torch.int64), expected_stored)


def test_int8_and_int4_gptq_packing_differ_only_in_field_width():
    # Codes 0..15 packed both ways describe the same matrix.
    q = torch.arange(16 * 8).reshape(16, 8) % 16
    assert torch.equal(
        formats.unpack_gptq_qweight_int8(formats.pack_gptq_qweight_int8(q)),
        formats.unpack_gptq_qweight(formats.pack_gptq_qweight(q)),
    )


# ---------------------------------------------------------------------------
# random_gptq_int8_weight and int8 dequantisation
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("K,N,G", [(128, 64, 128), (256, 256, 64), (64, 8, 32)])
def test_random_gptq_int8_weight_shapes_and_dtypes(K, N, G, dtype, gen):
    w = formats.random_gptq_int8_weight(K, N, G, dtype=dtype, generator=gen)
    assert set(w) == {"qweight", "scales", "qzeros"}
    assert w["qweight"].dtype == torch.int32 and w["qweight"].shape == (K // 4, N)
    assert w["qzeros"].dtype == torch.int32 and w["qzeros"].shape == (K // G, N // 4)
    assert w["scales"].dtype == dtype and w["scales"].shape == (K // G, N)
    for t in w.values():
        assert t.device.type == "cpu"
    a = w["scales"].abs().float()
    assert (a > 0).all() and (a < 1 / 16).all()


def test_random_gptq_int8_weight_symmetric(gen):
    w = formats.random_gptq_int8_weight(64, 32, 32, generator=gen, symmetric=True)
    assert set(w) == {"qweight", "scales", "qzeros"}
    assert w["qzeros"] is None
    q = formats.unpack_gptq_qweight_int8(w["qweight"])
    deq = formats.dequantize(q, w["scales"], None, group_size=32, bits=8)
    assert torch.equal(deq, (q.double() - 128) * w["scales"].double().repeat_interleave(32, 0))


def test_random_gptq_int8_weight_distribution(gen):
    w = formats.random_gptq_int8_weight(512, 256, 64, generator=gen)
    q = formats.unpack_gptq_qweight_int8(w["qweight"])
    z = formats.unpack_gptq_zeros_int8(w["qzeros"])
    assert set(q.unique().tolist()) == set(range(256))
    assert int(z.min()) < 8 and int(z.max()) > 247
    assert (w["qweight"] < 0).any() and (w["qzeros"] < 0).any()  # sign-bit words occur
    s = w["scales"].float()
    assert (s > 0).any() and (s < 0).any()
    # ~16x smaller than the int4 scales, so (q - z) * s (|q - z| <= 255) has the int4 magnitudes.
    assert 1e-3 / 16 < s.abs().median().item() < 5e-2 / 16
    deq = formats.dequantize(q, w["scales"], z, group_size=64, bits=8, dtype=torch.float16)
    assert torch.isfinite(deq).all()
    assert 0.02 < deq.abs().float().mean().item() < 1.0


def test_random_gptq_int8_weight_reproducible():
    g1, g2 = torch.Generator().manual_seed(7), torch.Generator().manual_seed(7)
    a = formats.random_gptq_int8_weight(64, 32, 32, generator=g1)
    b = formats.random_gptq_int8_weight(64, 32, 32, generator=g2)
    for key in a:
        assert torch.equal(a[key], b[key])
    c = formats.random_gptq_int8_weight(64, 32, 32, device=torch.device("cpu"))
    assert c["qweight"].shape == (16, 32)


@pytest.mark.parametrize("v1", [False, True])
def test_dequantize_gptq_int8_by_definition(v1, gen):
    K, N, G = 64, 16, 16
    q = rand_codes((K, N), gen, high=256)
    z = rand_codes((K // G, N), gen, high=256)
    s = (torch.randn(K // G, N, generator=gen) * 1e-3).half()
    qweight, qzeros = formats.pack_gptq_qweight_int8(q), formats.pack_gptq_zeros_int8(z, v1=v1)
    deq = formats.dequantize(
        formats.unpack_gptq_qweight_int8(qweight), s,
        formats.unpack_gptq_zeros_int8(qzeros, v1=v1), group_size=G, bits=8,
    )  # fmt: skip
    for k in (0, 17, 63):
        for n in (0, 5, 15):
            g = k // G
            assert deq[k, n].item() == (int(q[k, n]) - int(z[g, n])) * s[g, n].double().item()


def test_dequantize_int8_symmetric_zero_is_128():
    q = torch.tensor([[0, 127, 128, 255]], dtype=torch.uint8)
    s = torch.tensor([[0.5, 0.5, 0.5, -0.25]], dtype=torch.float16)
    assert formats.dequantize(q, s, None, group_size=1, bits=8).tolist() == [[-64.0, -0.5, 0.0, -31.75]]


BAD_CALLS_INT8 = [
    ("pack_q8_rows", lambda: formats.pack_gptq_qweight_int8(torch.zeros(6, 4, dtype=torch.int32)),
     r"pack_gptq_qweight_int8: values must have a first dimension divisible by 4, got 6"),
    ("pack_q8_high", lambda: formats.pack_gptq_qweight_int8(torch.full((4, 1), 256)),
     r"pack_gptq_qweight_int8: values must lie in 0\.\.255, got values in 256\.\.256"),
    ("pack_q8_neg", lambda: formats.pack_gptq_qweight_int8(torch.full((4, 1), -1, dtype=torch.int8)),
     r"pack_gptq_qweight_int8: values must lie in 0\.\.255"),
    ("pack_q8_float", lambda: formats.pack_gptq_qweight_int8(torch.zeros(4, 1)),
     r"pack_gptq_qweight_int8: values must have an integer dtype"),
    ("pack_q8_1d", lambda: formats.pack_gptq_qweight_int8(torch.zeros(4, dtype=torch.int32)),
     r"pack_gptq_qweight_int8: values must be 2-D"),
    ("unpack_q8_dtype", lambda: formats.unpack_gptq_qweight_int8(torch.zeros(1, 4, dtype=torch.int64)),
     r"unpack_gptq_qweight_int8: packed must have dtype torch.int32"),
    ("unpack_q8_3d", lambda: formats.unpack_gptq_qweight_int8(torch.zeros(1, 1, 4, dtype=torch.int32)),
     r"unpack_gptq_qweight_int8: packed must be 2-D"),
    ("pack_z8_cols", lambda: formats.pack_gptq_zeros_int8(torch.zeros(1, 6, dtype=torch.int32), v1=True),
     r"pack_gptq_zeros_int8: zeros must have a last dimension divisible by 4, got 6"),
    ("pack_z8_high", lambda: formats.pack_gptq_zeros_int8(torch.full((1, 4), 300)),
     r"pack_gptq_zeros_int8: zeros must lie in 0\.\.255, got values in 300\.\.300"),
    ("unpack_z8_dtype", lambda: formats.unpack_gptq_zeros_int8(torch.zeros(1, 1), v1=True),
     r"unpack_gptq_zeros_int8: packed must have dtype torch.int32"),
    ("rand8_k", lambda: formats.random_gptq_int8_weight(6, 8, 2),
     r"random_gptq_int8_weight: K must have a value divisible by 4, got 6"),
    ("rand8_n", lambda: formats.random_gptq_int8_weight(64, 6, 32),
     r"random_gptq_int8_weight: N must have a value divisible by 4, got 6"),
    ("rand8_n_pos", lambda: formats.random_gptq_int8_weight(64, 0, 32),
     r"random_gptq_int8_weight: N must be a positive int, got 0"),
    ("rand8_group", lambda: formats.random_gptq_int8_weight(64, 8, 48),
     r"random_gptq_int8_weight: group_size must divide K \(the first dimension\), got K=64, group_size=48"),
    ("rand8_dtype", lambda: formats.random_gptq_int8_weight(64, 8, 32, dtype=torch.int8),
     r"random_gptq_int8_weight: dtype must be a floating-point torch.dtype"),
    ("deq8_q_range", lambda: formats.dequantize(torch.full((16, 8), 256, dtype=torch.int32), _s, None, 8, bits=8),
     r"dequantize: q must lie in 0\.\.255, got values in 256\.\.256"),
]


@pytest.mark.parametrize("call,match", [c[1:] for c in BAD_CALLS_INT8], ids=[c[0] for c in BAD_CALLS_INT8])
def test_value_errors_int8(call, match):
    with pytest.raises(ValueError, match=match):
        call()


# ---------------------------------------------------------------------------
# Non-finite weights and GPTQ zero-point conventions
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("quantize", [formats.quantize_asym, formats.quantize_sym])
@pytest.mark.parametrize("bad", [float("nan"), float("inf"), float("-inf")])
def test_quantizers_reject_non_finite_weights(quantize, bad, gen):
    w = torch.randn(64, 16, generator=gen).to(torch.float16)
    k, n = int(torch.randint(0, 64, (1,), generator=gen)), int(torch.randint(0, 16, (1,), generator=gen))
    w[k, n] = bad
    with pytest.raises(ValueError, match=rf"^{quantize.__name__}: w must be finite, .* \(the first at w\[{k}, {n}\]\)"):
        quantize(w, 32)


@pytest.mark.parametrize("bits", [4, 8])
def test_symmetric_zeros_mismatch_names_the_other_format(bits):
    mid = 1 << (bits - 1)
    v1_sym = torch.full((2, 64), mid - 1, dtype=torch.uint8)  # how a symmetric v1 checkpoint stores z = mid
    v2_sym = torch.full((2, 64), mid, dtype=torch.uint8)
    assert formats.symmetric_zeros_mismatch(v1_sym, bits, v1=True) is None
    assert formats.symmetric_zeros_mismatch(v2_sym, bits, v1=False) is None
    assert "gptq_v2" in formats.symmetric_zeros_mismatch(v2_sym, bits, v1=True)
    assert "checkpoint_format 'gptq'" in formats.symmetric_zeros_mismatch(v1_sym, bits, v1=False)


def test_symmetric_zeros_mismatch_ignores_asymmetric_zeros(gen):
    z = rand_codes((4, 64), gen)
    assert formats.symmetric_zeros_mismatch(z, 4, v1=True) is None
    assert formats.symmetric_zeros_mismatch(z, 4, v1=False) is None
