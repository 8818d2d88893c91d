"""The gated projection's column interleave (mixgemm.moe.experts): runs of 8 columns alternate gate and up,
and moving whole words of each checkpoint packing equals permuting the unpacked columns."""

from __future__ import annotations

import torch

from mixgemm import formats
from mixgemm.moe.experts import GATED_RUN, gated_run_order, interleave_runs


def interleaved_columns(n: int) -> torch.Tensor:
    """Source column of each interleaved column, written out directly from the rule."""
    inter = n // 2
    cols = []
    for run in range(n // (2 * GATED_RUN)):
        cols += [run * GATED_RUN + j for j in range(GATED_RUN)]            # gate's columns of this run
        cols += [inter + run * GATED_RUN + j for j in range(GATED_RUN)]    # then up's same columns
    return torch.tensor(cols)


def test_run_order_alternates_gate_and_up():
    assert gated_run_order(64).tolist() == [0, 4, 1, 5, 2, 6, 3, 7]


def test_values_move_as_columns():
    n = 96
    scales = torch.randn(3, n)
    assert torch.equal(interleave_runs(scales, n), scales[:, interleaved_columns(n)])


def test_awq_words_move_as_columns():
    K, n = 64, 128
    codes = torch.randint(0, 16, (K, n), dtype=torch.int32)
    moved = interleave_runs(formats.pack_awq(codes), n)
    assert torch.equal(formats.unpack_awq(moved), formats.unpack_awq(formats.pack_awq(codes))[:, interleaved_columns(n)])


def test_gptq_qweight_and_zeros_move_as_columns():
    K, n = 64, 64
    codes = torch.randint(0, 16, (K, n), dtype=torch.int32)
    qweight = formats.pack_gptq_qweight(codes)  # [K / 8, N]: plain columns
    assert torch.equal(formats.unpack_gptq_qweight(interleave_runs(qweight, n)), codes[:, interleaved_columns(n)])
    zeros = torch.randint(1, 15, (4, n), dtype=torch.int32)
    packed = formats.pack_gptq_zeros(zeros)  # [K/G, N / 8]
    assert torch.equal(formats.unpack_gptq_zeros(interleave_runs(packed, n)), zeros[:, interleaved_columns(n)])


def test_gptq_int8_zeros_move_two_words_per_run():
    n = 64
    zeros = torch.randint(1, 250, (2, n), dtype=torch.int32)
    packed = formats.pack_gptq_zeros_int8(zeros)  # [K/G, N / 4]: two words per run of 8
    assert torch.equal(formats.unpack_gptq_zeros_int8(interleave_runs(packed, n)), zeros[:, interleaved_columns(n)])
