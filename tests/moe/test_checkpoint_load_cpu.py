"""Whole MoE models loaded on the CPU through mixgemm.checkpoint (load_model, replace_quantized_linears), with
every GPU entry point replaced by its reference (prepack / gemm for the dense layers, prepack_experts /
fused_moe for the experts): each family in each checkpoint format computes what the float model holding the
dequantized weights computes, its MoE blocks become QuantMoE (never one QuantLinear per expert), and the
report says what was read."""

from __future__ import annotations

import warnings

import pytest
import torch

from mixgemm.checkpoint import load_model, replace_quantized_linears
from mixgemm.checkpoint.moe_writer import dequantized_moe_model, write_moe_checkpoint
from mixgemm.moe.layer import QuantMoE
from mixgemm.nn import QuantLinear

from moe_helpers import median_token_error, random_moe_model, relative_error, tiny_moe_config, use_cpu_kernels

METHODS = [("awq", False), ("gptq", True), ("compressed-tensors", False)]  # as each tool usually quantizes
ROUTER_KEYS = {"mixtral": "model.layers.{}.block_sparse_moe.gate.weight", "qwen2_moe": "model.layers.{}.mlp.gate.weight",
               "qwen3_moe": "model.layers.{}.mlp.gate.weight"}
EXPECTED_FORMAT = {"awq": "awq", "gptq": "gptq", "compressed-tensors": "gptq_v2"}


def write(tmp_path, family, method, symmetric, seed=0, **config):
    model = random_moe_model(tiny_moe_config(family, **config), seed)
    _, logical = write_moe_checkpoint(tmp_path, model, method, 64, symmetric=symmetric, max_shard_bytes=300_000)
    return model, logical


@pytest.mark.parametrize("family", ["mixtral", "qwen2_moe", "qwen3_moe"])
@pytest.mark.parametrize("method,symmetric", METHODS)
def test_load_model_computes_the_dequantized_model(monkeypatch, tmp_path, family, method, symmetric):
    pytest.importorskip("transformers")
    use_cpu_kernels(monkeypatch)
    model, logical = write(tmp_path, family, method, symmetric)
    reference = dequantized_moe_model(model, logical, 64)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "unused quantized tensors", no "missing" warning
        qmodel, report = load_model(tmp_path, device="cpu")
    torch.manual_seed(1)
    ids = torch.randint(0, model.config.vocab_size, (2, 12))
    with torch.no_grad():
        assert relative_error(qmodel(input_ids=ids).logits, reference(input_ids=ids).logits) < 1e-2

    blocks = ["model.layers.0.mlp", "model.layers.1.mlp"]
    for name in blocks:
        layer = qmodel.get_submodule(name)
        assert isinstance(layer, QuantMoE)
        assert (layer.w13.calls, layer.w2.calls) == (
            {"format": EXPECTED_FORMAT[method], "group_size": 64, "gated": True, "layout": "auto"},
            # w2 takes w13's layout: the fused layer runs one form for both projections
            {"format": EXPECTED_FORMAT[method], "group_size": 64, "gated": False, "layout": "sm80"})
        assert type(layer.gate).__name__.endswith("TopKRouter")  # the model's own router class, kept
        assert layer.gate.weight.device.type == "cpu" and layer.gate.weight.dtype == torch.float16
    assert all(name in report.replaced for name in blocks)
    assert not any(".experts" in name for name in report.replaced)
    linears = 4 + (3 if family == "qwen2_moe" else 0)  # attention (+ the shared expert's three)
    assert len(report.replaced) == 2 * linears + 2
    assert report.missing == []
    assert all(ROUTER_KEYS[family].format(i) in report.loaded for i in (0, 1))
    if family == "qwen2_moe":
        shared = qmodel.get_submodule("model.layers.0.mlp.shared_expert")
        assert all(isinstance(getattr(shared, p), QuantLinear) for p in ("gate_proj", "up_proj", "down_proj"))
        assert type(qmodel.get_submodule("model.layers.0.mlp.shared_expert_gate")) is torch.nn.Linear


def test_a_wrong_loader_would_fail_this_comparison(monkeypatch, tmp_path):
    """The comparison above can fail: the same checkpoint with each expert's gate and up swapped at load time
    computes something else."""
    from mixgemm.checkpoint import moe_experts

    use_cpu_kernels(monkeypatch)
    model, logical = write(tmp_path, "mixtral", "awq", False)
    reference = dequantized_moe_model(model, logical, 64)
    real = moe_experts.concat_columns
    monkeypatch.setattr(moe_experts, "concat_columns", lambda where, gate, up: real(where, up, gate))
    qmodel, _ = load_model(tmp_path, device="cpu")
    ids = torch.randint(0, model.config.vocab_size, (2, 12))
    with torch.no_grad():
        assert relative_error(qmodel(input_ids=ids).logits, reference(input_ids=ids).logits) > 0.1


@pytest.mark.parametrize("family", ["mixtral", "qwen2_moe"])
def test_sparse_routing_computes_the_dequantized_model_for_most_tokens(monkeypatch, tmp_path, family):
    """Top-2 of 4 experts: the median token's logits match (a token whose experts nearly tie may route
    differently in the two models; see tiny_moe_config)."""
    use_cpu_kernels(monkeypatch)
    model, logical = write(tmp_path, family, "awq", False, num_experts_per_tok=2)
    reference = dequantized_moe_model(model, logical, 64)
    qmodel, _ = load_model(tmp_path, device="cpu")
    assert qmodel.model.layers[0].mlp.gate.top_k == 2
    ids = torch.randint(0, model.config.vocab_size, (2, 16))
    with torch.no_grad():
        assert median_token_error(qmodel(input_ids=ids).logits, reference(input_ids=ids).logits) < 1e-2


def test_replace_quantized_linears_on_a_built_model_matches_load_model(monkeypatch, tmp_path):
    use_cpu_kernels(monkeypatch)
    write(tmp_path, "qwen3_moe", "gptq", True)
    loaded, _ = load_model(tmp_path, device="cpu")
    built = random_moe_model(tiny_moe_config("qwen3_moe"), seed=5)  # other weights: all must come from the folder
    report = replace_quantized_linears(built, tmp_path, device="cpu")
    assert isinstance(built.model.layers[1].mlp, QuantMoE) and "model.layers.1.mlp" in report.replaced
    ids = torch.randint(0, built.config.vocab_size, (1, 9))
    with torch.no_grad():
        torch.testing.assert_close(built(input_ids=ids).logits, loaded(input_ids=ids).logits)


def test_bfloat16_load_puts_experts_and_router_in_bfloat16(monkeypatch, tmp_path):
    use_cpu_kernels(monkeypatch)
    model, logical = write(tmp_path, "mixtral", "awq", False)
    qmodel, _ = load_model(tmp_path, device="cpu", dtype="bfloat16")
    layer = qmodel.model.layers[0].mlp
    assert layer.w13.act_dtype == layer.w2.act_dtype == layer.gate.weight.dtype == torch.bfloat16
    reference = dequantized_moe_model(model, logical, 64).to(torch.bfloat16)
    ids = torch.randint(0, model.config.vocab_size, (1, 12))
    with torch.no_grad():
        assert relative_error(qmodel(input_ids=ids).logits, reference(input_ids=ids).logits) < 3e-2


def test_dense_experts_are_left_to_the_dense_loader(monkeypatch, tmp_path):
    """A checkpoint that stores the experts dense, in transformers 5's own fused names (here: the model's
    state dict with only attention quantized), keeps the model's MoE blocks."""
    from mixgemm.checkpoint.writer import layer_tensors, quantization_config, write_checkpoint
    from mixgemm import formats

    use_cpu_kernels(monkeypatch)
    model = random_moe_model(tiny_moe_config("qwen3_moe"), seed=0)
    tensors = dict(model.state_dict())
    for name, module in model.named_modules():
        if isinstance(module, torch.nn.Linear) and name != "lm_head":
            q, s, z = formats.quantize_asym(module.weight.detach().t().float(), 64)
            del tensors[f"{name}.weight"]
            tensors.update({f"{name}.{k}": v for k, v in layer_tensors("awq", q, s, z).items()})
    write_checkpoint(tmp_path, model.config.to_dict(), quantization_config("awq", 4, 64, False), tensors)
    qmodel, report = load_model(tmp_path, device="cpu")
    assert type(qmodel.model.layers[0].mlp).__name__ == "Qwen3MoeSparseMoeBlock"
    assert len(report.replaced) == 8 and "model.layers.0.mlp.experts.gate_up_proj" in report.loaded
    torch.testing.assert_close(qmodel.model.layers[0].mlp.experts.down_proj, model.model.layers[0].mlp.experts.down_proj)
