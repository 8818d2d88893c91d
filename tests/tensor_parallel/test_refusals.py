"""Shards that cannot be cut or run are refused when the layer is built, never at its first forward, with a
message naming the layer, the rank, the shard's shape and the rule; and whole models whose heads do not split."""

from __future__ import annotations

import pytest
import torch

from mixgemm.tensor_parallel import ShardShapeError, ShardSpec, shard_checkpoint

from tp_checkpoints import make_layer


def cut(kind, K, N, G, rank, world, style, closed_world=0):
    layer = make_layer(kind, K, N, G, closed_world=closed_world)
    t = layer.tensors
    return shard_checkpoint("model.layers.3.mlp.down_proj", ShardSpec(rank, world, style), layer.fmt, layer.bits,
                            t["qweight"], t["scales"], t["qzeros"], t["g_idx"], t["bias"])


@pytest.mark.parametrize("args, parts", [
    (("awq", 256, 256, 64, 1, 3, "column"), ["rank 1 of 3, column-parallel", "N = 256 output features",
                                             "N % world_size == 0"]),
    (("gptq_v1", 384, 128, 64, 2, 5, "row"), ["rank 2 of 5, row-parallel", "K = 384", "K % world_size == 0"]),
    (("awq", 256, 24, 64, 0, 2, "column"), ["N = 24 / 2 = 12", "multiple of 8", "N / world_size % 8 == 0"]),
    (("gptq_v1", 48, 128, 16, 1, 4, "row"), ["K = 48 / 4 = 12", "not a multiple of 8", "packs along K"]),
])
def test_shards_that_cannot_be_cut(args, parts):
    try:
        cut(*args)
    except ShardShapeError as error:
        text = str(error)
        assert text.startswith("model.layers.3.mlp.down_proj: "), text
        for part in parts:
            assert part in text, (part, text)
    else:
        pytest.fail(f"{args} was not refused")


def test_shard_no_kernel_path_runs_names_shape_and_rule():
    # AWQ K = 200 in groups of 20 (not a size mixgemm runs, but a checkpoint can say it): a row shard of 100
    # rows padded to 128 would need groups of 4; every path's rule is named.
    with pytest.raises(ShardShapeError) as error:
        cut("awq", 200, 128, 20, 1, 2, "row")
    text = str(error.value)
    for part in ("model.layers.3.mlp.down_proj", "rank 1 of 2, row-parallel", "K = 100, N = 128, group_size = 4",
                 "padded to K = 128", "sm80 path: group_size must be a multiple of 32", "dequant path"):
        assert part in text, (part, text)


def test_act_order_column_shard_whose_k_needs_padding():
    with pytest.raises(ShardShapeError, match="act-order layer's K = 224 must be a multiple of 64"):
        cut("gptq_act_order", 224, 128, 32, 0, 2, "column")


@pytest.mark.parametrize("style", ["row", "column"])
@pytest.mark.parametrize("bad", ["out_of_range", "negative", "unequal_groups"])
def test_bad_g_idx_is_a_value_error(style, bad):
    # A corrupt g_idx is refused with the whole-layer loader's rule, not an IndexError while a row shard
    # indexes the scales with it.
    layer = make_layer("gptq_act_order", 256, 128, 64)
    t = layer.tensors
    g_idx = t["g_idx"].clone()
    if bad == "out_of_range":
        g_idx[0] = 4
    elif bad == "negative":
        g_idx[0] = -1
    else:
        g_idx[g_idx == 1] = 0
    with pytest.raises(ValueError, match="g_idx must give each of the 4 groups exactly group_size = 64 rows"):
        shard_checkpoint("model.layers.3.mlp.down_proj", ShardSpec(0, 2, style), layer.fmt, layer.bits,
                         t["qweight"], t["scales"], t["qzeros"], g_idx, t["bias"])


def test_heads_that_do_not_split(tmp_path):
    pytest.importorskip("transformers")
    from checkpoint_helpers import random_llama, tiny_llama_config, snapshot, assert_unchanged, write_llama_checkpoint

    from mixgemm.checkpoint import replace_quantized_linears

    model = random_llama(tiny_llama_config(), seed=0)  # 4 heads, 2 kv heads
    write_llama_checkpoint(tmp_path, model, "awq")
    before = snapshot(model)
    with pytest.raises(ValueError, match=r"num_attention_heads = 4, which does not split over 8 tensor-parallel "
                                         r"ranks \(rule: num_attention_heads % world_size == 0\)"):
        replace_quantized_linears(model, tmp_path, tp=(0, 8))
    with pytest.raises(ValueError, match=r"num_key_value_heads = 2, which does not split over 4"):
        replace_quantized_linears(model, tmp_path, tp=(0, 4))
    assert_unchanged(model, before)


def test_dense_layer_of_the_style_map_is_refused(tmp_path):
    pytest.importorskip("transformers")
    from checkpoint_helpers import random_llama, tiny_llama_config, write_llama_checkpoint

    from mixgemm.checkpoint import replace_quantized_linears

    model = random_llama(tiny_llama_config(), seed=0)
    write_llama_checkpoint(tmp_path, model, "awq")
    with pytest.raises(ValueError, match=r"lm_head is column-parallel in the tensor-parallel style map but the "
                                         r"checkpoint holds it dense"):
        replace_quantized_linears(model, tmp_path, tp=(0, 2), tp_styles={"q_proj": "column", "lm_head": "column"})
    with pytest.raises(ValueError, match="tp_styles given without tp="):
        replace_quantized_linears(model, tmp_path, tp_styles={"q_proj": "column"})
    with pytest.raises(ValueError, match=r"tp_styles\['q_proj'\] = 'diagonal'"):
        replace_quantized_linears(model, tmp_path, tp=(0, 2), tp_styles={"q_proj": "diagonal"})


def test_whole_model_on_one_process_with_world_one(tmp_path, monkeypatch):
    """tp=(0, 1) shards nothing away: the model computes what the plain load computes, and the report names
    the sharded layers."""
    pytest.importorskip("transformers")
    from checkpoint_helpers import random_llama, tiny_llama_config, write_llama_checkpoint
    from cpu_references import cpu_gemm, cpu_prepack

    from mixgemm import ops, packing
    from mixgemm.checkpoint import load_model

    monkeypatch.setattr(ops, "gemm", cpu_gemm)
    monkeypatch.setattr(packing, "prepack", cpu_prepack)
    write_llama_checkpoint(tmp_path, random_llama(tiny_llama_config(), seed=0), "gptq")
    whole, _ = load_model(tmp_path, device="cpu")
    part, report = load_model(tmp_path, device="cpu", tp=(0, 1))
    assert sorted(set(report.tensor_parallel.values())) == ["column", "row"] and len(report.tensor_parallel) == 14
    ids = torch.tensor([[1, 2, 3, 4]])
    with torch.no_grad():
        assert torch.equal(part(ids).logits, whole(ids).logits)
