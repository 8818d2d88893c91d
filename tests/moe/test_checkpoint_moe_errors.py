"""MoE checkpoints that cannot load, on the CPU: each refusal is a ValueError naming the key, module, block
or class and the rule, raised before the model changes (all or nothing, as for dense layers)."""

from __future__ import annotations

import pytest
import torch

from mixgemm.checkpoint import load_model, replace_quantized_linears
from mixgemm.checkpoint.moe_writer import write_moe_checkpoint
from mixgemm.checkpoint.writer import layer_tensors, quantization_config, write_checkpoint
from mixgemm import formats

from moe_helpers import checkpoint_test_module, random_moe_model, tiny_moe_config, use_cpu_kernels

helpers = checkpoint_test_module("checkpoint_helpers")
MIXTRAL = "model.layers.{}.block_sparse_moe"


def written(tmp_path, family="mixtral", method="awq", symmetric=False, **config):
    model = random_moe_model(tiny_moe_config(family, **config), seed=0)
    write_moe_checkpoint(tmp_path, model, method, 64, symmetric=symmetric)
    return model


def drop_tensor(folder, key: str) -> None:
    from safetensors.torch import load_file, save_file

    path = helpers.CheckpointFiles(folder).path_of(key)
    tensors = load_file(path)
    del tensors[key]
    save_file(tensors, path, metadata={"format": "pt"})


def add_tensor(folder, key: str, value: torch.Tensor) -> None:
    from safetensors.torch import load_file, save_file

    path = helpers.shard_files(folder)[0]
    tensors = load_file(path)
    tensors[key] = value
    save_file(tensors, path, metadata={"format": "pt"})


def refused_unchanged(monkeypatch, tmp_path, message: str, family="mixtral", **config) -> None:
    """replace_quantized_linears on a model built of ``family`` (with ``config``) raises ``message`` and leaves
    the model as it was."""
    use_cpu_kernels(monkeypatch)
    model = random_moe_model(tiny_moe_config(family, **config), seed=7)
    before = helpers.snapshot(model)
    with pytest.raises(ValueError, match=message):
        replace_quantized_linears(model, tmp_path, device="cpu")
    helpers.assert_unchanged(model, before)


def test_a_missing_expert_tensor_is_named_and_the_model_unchanged(monkeypatch, tmp_path):
    written(tmp_path)
    key = f"{MIXTRAL.format(1)}.experts.3.w3.qweight"  # the last expert of the last block: the others prepared
    drop_tensor(tmp_path, key)
    refused_unchanged(monkeypatch, tmp_path, f"model.layers.1.mlp: the checkpoint has no {key}")


def test_a_missing_expert_scale_is_named(monkeypatch, tmp_path):
    written(tmp_path)
    drop_tensor(tmp_path, f"{MIXTRAL.format(0)}.experts.2.w2.scales")
    refused_unchanged(monkeypatch, tmp_path, f"the checkpoint has no {MIXTRAL.format(0)}.experts.2.w2.scales")


def test_experts_of_another_shape_than_the_model_are_refused(monkeypatch, tmp_path):
    written(tmp_path)  # intermediate 128
    refused_unchanged(monkeypatch, tmp_path, f"{MIXTRAL.format(0)}.experts.0.w1: the checkpoint holds a "
                      r"\[256 -> 128\] projection but the model's model.layers.0.mlp \(MixtralSparseMoeBlock\) needs "
                      r"\[256 -> 192\]", intermediate_size=192)


def test_an_expert_stored_unlike_the_others_is_refused(monkeypatch, tmp_path):
    written(tmp_path, method="gptq", symmetric=False)
    drop_tensor(tmp_path, f"{MIXTRAL.format(0)}.experts.2.w2.qzeros")
    refused_unchanged(monkeypatch, tmp_path, f"{MIXTRAL.format(0)}.experts.2.w2 is gptq 4-bit .* symmetric.* but "
                      f"{MIXTRAL.format(0)}.experts.0.w2 is .* with zero points.*; every expert of a block must be "
                      "quantized alike")


def test_an_expert_group_size_unlike_the_config_is_refused(monkeypatch, tmp_path):
    written(tmp_path)
    key = f"{MIXTRAL.format(0)}.experts.1.w1.scales"
    helpers.rewrite_tensor(tmp_path, key, lambda s: s[::2].contiguous())
    refused_unchanged(monkeypatch, tmp_path, f"{MIXTRAL.format(0)}.experts.1.w1.qzeros must have shape")


def test_act_order_experts_are_refused(monkeypatch, tmp_path):
    written(tmp_path, method="gptq", symmetric=True)
    key = f"{MIXTRAL.format(1)}.experts.0.w2.g_idx"
    helpers.rewrite_tensor(tmp_path, key, lambda g: g[torch.randperm(g.numel(), generator=torch.Generator()
                                                                     .manual_seed(0))].contiguous())
    refused_unchanged(monkeypatch, tmp_path, f"{MIXTRAL.format(1)}.experts.0.w2: the expert is quantized with "
                      "act-order")


def test_an_expert_bias_is_refused(monkeypatch, tmp_path):
    written(tmp_path)
    add_tensor(tmp_path, f"{MIXTRAL.format(0)}.experts.1.w2.bias", torch.zeros(256, dtype=torch.float16))
    refused_unchanged(monkeypatch, tmp_path, f"{MIXTRAL.format(0)}.experts.1.w2: the checkpoint holds a bias")


def test_more_experts_in_the_checkpoint_than_the_model_are_refused(monkeypatch, tmp_path):
    written(tmp_path)  # 4 experts
    for layer in (0, 1):
        helpers.rewrite_tensor(tmp_path, f"{MIXTRAL.format(layer)}.gate.weight", lambda w: w[:3].contiguous())
    refused_unchanged(monkeypatch, tmp_path, f"model.layers.0.mlp: the checkpoint holds {MIXTRAL.format(0)}.experts.3.w1 "
                      "but the model's block has 3 experts", num_local_experts=3)


def test_a_router_of_another_shape_is_refused(monkeypatch, tmp_path):
    written(tmp_path)
    refused_unchanged(monkeypatch, tmp_path, rf"{MIXTRAL.format(0)}.gate.weight has shape \(4, 256\) in the "
                      r"checkpoint but the model's router model.layers.0.mlp.gate.weight is \(3, 256\)",
                      num_local_experts=3)


def test_a_missing_router_is_named(monkeypatch, tmp_path):
    written(tmp_path, family="qwen3_moe")
    drop_tensor(tmp_path, "model.layers.1.mlp.gate.weight")
    refused_unchanged(monkeypatch, tmp_path, "model.layers.1.mlp: the checkpoint .* has no router weight "
                      "model.layers.1.mlp.gate.weight", family="qwen3_moe")


@pytest.mark.parametrize("method, marker", [("awq", "qweight"), ("compressed-tensors", "weight_packed")])
def test_a_quantized_router_is_refused(monkeypatch, tmp_path, method, marker):
    written(tmp_path, family="qwen3_moe", method=method)
    drop_tensor(tmp_path, "model.layers.0.mlp.gate.weight")
    add_tensor(tmp_path, f"model.layers.0.mlp.gate.{marker}", torch.zeros(256, 1, dtype=torch.int32))
    refused_unchanged(monkeypatch, tmp_path, f"holds model.layers.0.mlp.gate.{marker}, but mixgemm keeps routers "
                      "dense", family="qwen3_moe")


def test_an_expert_the_config_keeps_dense_is_refused(monkeypatch, tmp_path):
    import json

    written(tmp_path, method="compressed-tensors")
    path = tmp_path / "config.json"
    data = json.loads(path.read_text())
    data["quantization_config"]["ignore"].append("re:.*experts\\.1\\.w3$")
    path.write_text(json.dumps(data))
    refused_unchanged(monkeypatch, tmp_path, f"keeps {MIXTRAL.format(0)}.experts.1.w3 dense .* mixgemm loads a "
                      "block's experts all quantized")


def test_experts_under_unknown_projection_names_are_refused(monkeypatch, tmp_path):
    written(tmp_path)
    for layer in (0, 1):
        for e in range(4):
            for suffix in ("qweight", "qzeros", "scales"):
                old = f"{MIXTRAL.format(layer)}.experts.{e}.w1.{suffix}"
                value = helpers.CheckpointFiles(tmp_path).get(old)
                drop_tensor(tmp_path, old)
                add_tensor(tmp_path, old.replace(".w1.", ".fc1."), value)
    refused_unchanged(monkeypatch, tmp_path, "model.layers.0.mlp: the checkpoint holds quantized experts under .* but "
                      r"not expert 0's gate projection under any of the names \['w1', 'gate_proj'\]")


class Expert(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.w1 = torch.nn.Linear(128, 64, bias=False)
        self.w2 = torch.nn.Linear(64, 128, bias=False)


class HomemadeMoe(torch.nn.Module):
    """An MoE block of a class mixgemm does not know: its experts must not become QuantLinears one by one."""

    def __init__(self):
        super().__init__()
        self.gate = torch.nn.Linear(128, 2, bias=False)
        self.experts = torch.nn.ModuleList([Expert(), Expert()])


def test_an_unknown_moe_block_with_quantized_experts_is_refused_by_class(monkeypatch, tmp_path):
    use_cpu_kernels(monkeypatch)
    model = torch.nn.Module()
    model.layers = torch.nn.ModuleList([HomemadeMoe()]).half()
    tensors = {}
    for name, module in model.named_modules():
        if name.startswith("layers.0.experts") and isinstance(module, torch.nn.Linear):
            q, s, z = formats.quantize_asym(module.weight.detach().t().float(), 64)
            tensors.update({f"{name}.{k}": v for k, v in layer_tensors("awq", q, s, z).items()})
    tensors["layers.0.gate.weight"] = model.layers[0].gate.weight.detach()
    write_checkpoint(tmp_path, {"model_type": "homemade"}, quantization_config("awq", 4, 64, False), tensors)
    before = helpers.snapshot(model)
    with pytest.raises(ValueError, match="layers.0 is a HomemadeMoe, whose experts the checkpoint holds quantized, "
                                         "but mixgemm's MoE loader knows only the blocks MixtralSparseMoeBlock"):
        replace_quantized_linears(model, tmp_path, device="cpu")
    helpers.assert_unchanged(model, before)


def test_a_known_block_without_fused_experts_is_refused(monkeypatch, tmp_path):
    """A Mixtral block whose experts are per-expert modules (as transformers 4 built them) is not read as one
    QuantLinear per expert either."""
    class MixtralSparseMoeBlock(HomemadeMoe):
        pass

    use_cpu_kernels(monkeypatch)
    model = torch.nn.Module()
    model.layers = torch.nn.ModuleList([MixtralSparseMoeBlock()]).half()
    q, s, z = formats.quantize_asym(torch.randn(128, 64), 64)
    write_checkpoint(tmp_path, {"model_type": "old"}, quantization_config("awq", 4, 64, False),
                     {f"layers.0.experts.0.w1.{k}": v for k, v in layer_tensors("awq", q, s, z).items()})
    with pytest.raises(ValueError, match="layers.0 is a MixtralSparseMoeBlock, .* its experts are not transformers "
                                         "5's fused gate_up_proj / down_proj parameters"):
        replace_quantized_linears(model, tmp_path, device="cpu")


def test_load_model_names_the_missing_key_too(monkeypatch, tmp_path):
    pytest.importorskip("transformers")
    use_cpu_kernels(monkeypatch)
    written(tmp_path, family="qwen3_moe", method="compressed-tensors")
    key = "model.layers.0.mlp.experts.1.down_proj.weight_packed"
    drop_tensor(tmp_path, key)
    with pytest.raises(ValueError, match=f"model.layers.0.mlp: the checkpoint has no {key}"):
        load_model(tmp_path, device="cpu")
