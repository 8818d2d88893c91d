"""CPU tests of whole-model loading without fp16 weights (issue 32): build_empty_model puts every parameter of
a transformers model on the meta device while its buffers keep the values computed at construction;
load_model fills such a model from a checkpoint folder (kernels replaced by their pure-PyTorch references)
into the same model that the materialised path gives; a model built wholly on meta gets its rotary buffers
recomputed; checkpoint_tensor_bytes counts a folder from its headers. Tests that need transformers skip
without it; the missing-transformers message is tested everywhere."""

from __future__ import annotations

import re
import sys

import pytest
import torch

from mixgemm.checkpoint import (build_empty_model, checkpoint_tensor_bytes, load_model, parameters_on_meta,
                                replace_quantized_linears)
from mixgemm.checkpoint.writer import layer_tensors
from mixgemm.nn import QuantLinear

from checkpoint_helpers import (assert_unchanged, random_llama, snapshot, tiny_llama_config,
                                write_llama_checkpoint)
from checkpoint_helpers import TinyModel, write_model

F16, BF16 = torch.float16, torch.bfloat16
ROTARY = ("model.rotary_emb.inv_freq", "model.rotary_emb.original_inv_freq")


@pytest.fixture
def transformers():
    return pytest.importorskip("transformers")


def logits(model, ids):
    with torch.no_grad():
        return model(input_ids=ids).logits


def test_missing_transformers_names_the_extra(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "transformers", None)  # `import transformers` now raises ImportError
    for call in (lambda: load_model(tmp_path, device="cpu"), lambda: build_empty_model(tmp_path)):
        with pytest.raises(ImportError, match=r"needs transformers, an optional extra of mixgemm: "
                                              r'pip install "\.\[models\]"'):
            call()


def test_parameters_on_meta_keeps_buffers_and_restores_torch():
    register = torch.nn.Module.register_parameter
    with pytest.raises(RuntimeError, match="inside"):
        with parameters_on_meta():
            layer = torch.nn.Linear(64, 32)
            layer.register_buffer("table", torch.arange(4.0))
            raise RuntimeError("inside")
    assert torch.nn.Module.register_parameter is register  # restored, even after an error in the block
    assert layer.weight.is_meta and layer.bias.is_meta and torch.equal(layer.table, torch.arange(4.0))
    assert not torch.nn.Linear(4, 4).weight.is_meta


@pytest.mark.parametrize("tied", [False, True])
def test_build_empty_model_has_meta_parameters_and_real_buffers(transformers, tied):
    config = tiny_llama_config(tie_word_embeddings=tied, rope_theta=float(torch.randint(1000, 100000, (1,))))
    model = build_empty_model(config, dtype="float16")
    assert all(p.is_meta and p.dtype == F16 for p in model.parameters())
    real = random_llama(config, seed=0)
    buffers = dict(model.named_buffers())
    for key in ROTARY:
        assert not buffers[key].is_meta and torch.equal(buffers[key], dict(real.named_buffers())[key]), key
    assert (model.lm_head.weight is model.model.embed_tokens.weight) == tied


@pytest.mark.parametrize("method,symmetric", [("awq", False), ("gptq", True), ("compressed-tensors", False)])
def test_load_model_matches_the_materialised_path(transformers, cpu_kernels, tmp_path, method, symmetric):
    config = tiny_llama_config()
    source = random_llama(config, seed=int(torch.randint(0, 1000, (1,))))
    logical = write_llama_checkpoint(tmp_path, source, method, symmetric=symmetric)
    model, report = load_model(tmp_path, device="cpu")
    assert sorted(report.replaced) == sorted(logical) and len(logical) == 14
    assert report.missing == [] and report.recomputed == [] and "lm_head.weight" in report.loaded
    assert not model.training
    assert not any(t.is_meta for t in list(model.parameters()) + list(model.buffers()))
    assert all(isinstance(model.get_submodule(name), QuantLinear) for name in logical)
    for key in ("model.embed_tokens.weight", "lm_head.weight", "model.norm.weight",
                "model.layers.1.input_layernorm.weight") + ROTARY:
        assert torch.equal(model.state_dict().get(key, dict(model.named_buffers()).get(key)),
                           source.state_dict().get(key, dict(source.named_buffers()).get(key))), key
    # The README's way (a materialised model with other random weights, then the swap) gives the same model.
    materialised = random_llama(config, seed=1)
    replace_quantized_linears(materialised, tmp_path, device="cpu")
    ids = torch.randint(0, config.vocab_size, (2, 12))
    assert torch.equal(logits(model, ids), logits(materialised, ids))


def test_load_model_in_bf16_from_a_string(transformers, cpu_kernels, tmp_path):
    source = random_llama(tiny_llama_config(), seed=3)
    write_llama_checkpoint(tmp_path, source, "gptq", symmetric=True)
    model, _ = load_model(tmp_path, device="cpu", dtype="bf16")
    assert model.model.layers[0].mlp.down_proj.dtype == BF16 and model.lm_head.weight.dtype == BF16
    assert torch.equal(model.lm_head.weight, source.lm_head.weight.to(BF16))
    assert torch.isfinite(logits(model, torch.randint(0, 512, (1, 8)))).all()


def test_load_model_keeps_tied_embeddings_saved_once(transformers, cpu_kernels, tmp_path):
    source = random_llama(tiny_llama_config(tie_word_embeddings=True), seed=4)
    assert source.lm_head.weight is source.model.embed_tokens.weight
    write_llama_checkpoint(tmp_path, source, "awq", drop=("lm_head.weight",))  # as transformers saves a tied weight
    model, report = load_model(tmp_path, device="cpu")
    assert model.lm_head.weight is model.model.embed_tokens.weight
    assert torch.equal(model.lm_head.weight, source.lm_head.weight)
    assert report.missing == [] and "lm_head.weight" not in report.loaded


def test_fully_meta_model_gets_rotary_buffers_recomputed(transformers, cpu_kernels, tmp_path):
    config = tiny_llama_config(rope_theta=12345.0)
    source = random_llama(config, seed=5)
    write_llama_checkpoint(tmp_path, source, "compressed-tensors")
    with torch.device("meta"):  # buffers on meta too: inv_freq has no value anywhere
        model = transformers.AutoModelForCausalLM.from_config(config, dtype=F16)
    assert model.model.rotary_emb.inv_freq.is_meta
    report = replace_quantized_linears(model, tmp_path, device="cpu")
    assert sorted(report.recomputed) == sorted(ROTARY)
    buffers, expected = dict(model.named_buffers()), dict(source.named_buffers())
    for key in ROTARY:
        assert torch.equal(buffers[key], expected[key]), key
    loaded, _ = load_model(tmp_path, device="cpu")
    ids = torch.randint(0, config.vocab_size, (1, 10))
    assert torch.equal(logits(model, ids), logits(loaded, ids))


def test_load_model_refuses_a_checkpoint_missing_a_parameter(transformers, cpu_kernels, tmp_path):
    source = random_llama(tiny_llama_config(), seed=6)
    dropped = "model.layers.1.post_attention_layernorm.weight"
    write_llama_checkpoint(tmp_path, source, "gptq", symmetric=True, drop=(dropped,))
    with pytest.raises(ValueError, match=r"^replace_quantized_linears: 1 parameters of the model are on the meta "
                                         rf"device but not in .*: \['{re.escape(dropped)}'\]"):
        load_model(tmp_path, device="cpu")


def test_load_model_argument_errors(transformers, cpu_kernels, tmp_path):
    source = random_llama(tiny_llama_config(), seed=7)
    write_llama_checkpoint(tmp_path, source, "awq")
    with pytest.raises(ValueError, match=r"^load_model: folder must be a path \(str or os.PathLike\), got None"):
        load_model(None, device="cpu")
    with pytest.raises(ValueError, match=r"^load_model: dtype must be torch.float16 or torch.bfloat16, or one of the "
                                         r"strings .*got the string 'float32'"):
        load_model(tmp_path, device="cpu", dtype="float32")
    with pytest.raises(ValueError, match=r"^load_model: device must be a torch.device"):
        load_model(tmp_path, device="gpu0")
    # A folder whose config.json holds only the quantization config: no architecture to build.
    write_model(tmp_path / "no_arch", TinyModel().half(), "awq", 4, 64, False)
    with pytest.raises(ValueError, match=r"(?s)^load_model: cannot read a transformers model config from "
                                         r".*no_arch/config.json .*pass model_config="):
        load_model(tmp_path / "no_arch", device="cpu")


def test_model_config_argument_builds_another_architecture(transformers, cpu_kernels, tmp_path):
    config = tiny_llama_config()
    write_llama_checkpoint(tmp_path, random_llama(config, seed=8), "awq")
    wider = tiny_llama_config(intermediate_size=1024)  # the checkpoint's mlp is 512 wide
    with pytest.raises(ValueError, match=r"model.layers.0.mlp.gate_proj is a Linear\(256 -> 1024\) in the model but "
                                         r"\(256 -> 512\) in the checkpoint"):
        load_model(tmp_path, device="cpu", model_config=wider)
    model, _ = load_model(tmp_path, device="cpu", model_config=config)
    assert model.model.layers[0].mlp.gate_proj.out_features == 512


# ---------------------------------------------------------------------------------------------------
# Bytes of a checkpoint (the GPU test's memory bound)


def test_checkpoint_tensor_bytes_counts_quantized_and_dense(tmp_path):
    torch.manual_seed(int(torch.randint(0, 1000, (1,))))
    model = TinyModel().half()
    logical = write_model(tmp_path, model, "gptq", 4, 64, False)
    quantized = sum(t.numel() * t.element_size() for name, (q, s, z) in logical.items()
                    for t in layer_tensors("gptq", q, s, z).values())
    dense = sum(t.numel() * t.element_size() for key, t in model.state_dict().items()
                if key.rpartition(".")[0] not in logical or key.endswith(".bias"))
    counted = checkpoint_tensor_bytes(tmp_path)
    assert (counted.quantized, counted.dense, counted.total) == (quantized, dense, quantized + dense)


def test_meta_model_failure_leaves_it_unchanged(transformers, cpu_kernels, tmp_path):
    source = random_llama(tiny_llama_config(), seed=9)
    write_llama_checkpoint(tmp_path, source, "awq", drop=("model.norm.weight",))
    model = build_empty_model(tiny_llama_config())
    before = snapshot(model)
    with pytest.raises(ValueError, match=r"\['model.norm.weight'\]"):
        replace_quantized_linears(model, tmp_path, device="cpu")
    assert_unchanged(model, before)
