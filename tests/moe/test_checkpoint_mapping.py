"""Which checkpoint tensors land in which expert, and in which order, on the CPU and without prepack: a small MoE
model written by our writer in each format, its experts read back by read_block_experts, each expert's
concatenated [gate | up] and down tensors unpacked and compared with the codes, scales and zeros the writer
quantized (the ``logical`` it returns), expert by expert."""

from __future__ import annotations

import pytest
import torch

from mixgemm import formats
from mixgemm.checkpoint import CheckpointFiles, read_quant_config
from mixgemm.checkpoint.moe_blocks import find_moe_blocks
from mixgemm.checkpoint.moe_experts import ExpertNames, locate_experts, read_block_experts
from mixgemm.checkpoint.moe_writer import write_moe_checkpoint

from moe_helpers import random_moe_model, tiny_moe_config

# The names each family's checkpoints use (what AutoAWQ / GPTQ tools / llm-compressor wrote for them).
CHECKPOINT_NAMES = {
    "mixtral": ("model.layers.{l}.block_sparse_moe", "w1", "w3", "w2"),
    "qwen2_moe": ("model.layers.{l}.mlp", "gate_proj", "up_proj", "down_proj"),
    "qwen3_moe": ("model.layers.{l}.mlp", "gate_proj", "up_proj", "down_proj"),
}


def unpack(args):
    """A PrepackArgs' codes, zeros (None when symmetric) and scales, in the checkpoint's own packing."""
    if args.format == "awq":
        return formats.unpack_awq(args.qweight), None if args.qzeros is None else formats.unpack_awq(args.qzeros), \
            args.scales
    unpack_q = formats.unpack_gptq_qweight if args.bits == 4 else formats.unpack_gptq_qweight_int8
    unpack_z = formats.unpack_gptq_zeros if args.bits == 4 else formats.unpack_gptq_zeros_int8
    z = None if args.qzeros is None else unpack_z(args.qzeros, v1=args.format == "gptq")
    return unpack_q(args.qweight), z, args.scales


def expected_zeros(z, scales, bits):
    """The writer stores constant zeros for symmetric AWQ and GPTQ layers (as the tools do): 2**(bits-1)."""
    return z if z is not None else torch.full(scales.shape, 1 << (bits - 1), dtype=torch.uint8)


@pytest.mark.parametrize("family", ["mixtral", "qwen2_moe", "qwen3_moe"])
@pytest.mark.parametrize("method,bits,symmetric", [
    ("awq", 4, False), ("awq", 4, True), ("gptq", 4, True), ("gptq", 8, False),
    ("compressed-tensors", 4, False), ("compressed-tensors", 8, True),
])
def test_each_expert_gets_its_own_gate_then_up_and_down(tmp_path, family, method, bits, symmetric):
    model = random_moe_model(tiny_moe_config(family), seed=3)
    _, logical = write_moe_checkpoint(tmp_path, model, method, 64, symmetric=symmetric, bits=bits,
                                      max_shard_bytes=200_000)
    files, quant_config = CheckpointFiles(tmp_path), read_quant_config(tmp_path)
    blocks, unknown = find_moe_blocks(model)
    assert unknown == [] and [b.name for b in blocks] == ["model.layers.0.mlp", "model.layers.1.mlp"]
    prefix, gate, up, down = CHECKPOINT_NAMES[family]
    for layer, block in enumerate(blocks):
        names = locate_experts(files, block, method)
        assert names == ExpertNames(prefix.format(l=layer), gate, up, down)
        tensors = read_block_experts(files, block, names, quant_config, torch.float16)
        assert len(tensors.w13) == len(tensors.w2) == 4
        for e, (w13, w2) in enumerate(zip(tensors.w13, tensors.w2)):
            (qg, sg, zg), (qu, su, zu), (qd, sd, zd) = (logical[names.module(e, p)] for p in (gate, up, down))
            q, z, s = unpack(w13)
            assert torch.equal(q, torch.cat([qg, qu], dim=1)), (layer, e)
            assert torch.equal(s, torch.cat([sg, su], dim=1).half()), (layer, e)
            if z is not None:
                assert torch.equal(z, torch.cat([expected_zeros(zg, sg, bits), expected_zeros(zu, su, bits)], 1))
            else:
                assert symmetric and method == "compressed-tensors"  # the only format that stores no zeros
            q, z, s = unpack(w2)
            assert torch.equal(q, qd) and torch.equal(s, sd.half()), (layer, e)
            assert z is None or torch.equal(z, expected_zeros(zd, sd, bits))
            assert (w13.k, w13.n, w2.k, w2.n) == (256, 256, 128, 256)
            assert w13.g_idx is None and w2.g_idx is None and w13.bias is None


def test_the_experts_differ_so_the_mapping_is_tested(tmp_path):
    """The codes compared above differ between experts and between gate and up, so a swap would fail them."""
    model = random_moe_model(tiny_moe_config("mixtral"), seed=3)
    _, logical = write_moe_checkpoint(tmp_path, model, "awq", 64)
    name = "model.layers.0.block_sparse_moe.experts.{}.{}"
    codes = [logical[name.format(e, p)][0] for e in (0, 1) for p in ("w1", "w3")]
    assert all(not torch.equal(a, b) for i, a in enumerate(codes) for b in codes[i + 1:])


def test_router_and_dense_tensors_are_written_under_checkpoint_names(tmp_path):
    model = random_moe_model(tiny_moe_config("mixtral"), seed=3)
    write_moe_checkpoint(tmp_path, model, "awq", 64)
    keys = set(CheckpointFiles(tmp_path).keys())
    assert "model.layers.0.block_sparse_moe.gate.weight" in keys
    assert not any(".mlp.experts" in k or k.endswith("gate_up_proj") for k in keys)
    assert "model.layers.0.self_attn.q_proj.qweight" in keys and "lm_head.weight" in keys
    assert "lm_head" in read_quant_config(tmp_path).ignore
