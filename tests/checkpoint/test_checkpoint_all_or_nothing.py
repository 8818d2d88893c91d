"""CPU tests of replace_quantized_linears as a transaction (issue 32): whatever fails - a damaged scale in the
last layer, a prepack refusal, a dense tensor of the wrong shape, a truncated shard - the model is left
exactly as it was (same module objects, same tensor objects, same values); and a model whose parameters are
on the meta device is filled from the checkpoint (kernels replaced by their pure-PyTorch references)."""

from __future__ import annotations

import re

import pytest
import torch

from mixgemm import packing
from mixgemm.checkpoint import CheckpointFiles, replace_quantized_linears
from mixgemm.nn import QuantLinear

from checkpoint_helpers import assert_unchanged, rewrite_tensor, snapshot, truncate_file
from checkpoint_helpers import TinyModel, write_model
from cpu_references import cpu_prepack

F16 = torch.float16
LAST_LAYER = "model.layers.1.down_proj"  # the last quantized Linear in module order


@pytest.fixture
def checkpoint(tmp_path):
    """A sharded GPTQ folder of a random TinyModel and the model it was written from."""
    torch.manual_seed(int(torch.randint(0, 2**31, (1,))))
    source = TinyModel().half()
    logical = write_model(tmp_path, source, "gptq", 4, 64, False)
    return tmp_path, source, logical


def fresh_model():
    return TinyModel().half()


def assert_refused_unchanged(model, folder, match: str) -> None:
    """replace_quantized_linears(model, folder) raises a ValueError matching ``match`` and leaves every module,
    parameter and buffer of the model as it was."""
    before = snapshot(model)
    with pytest.raises(ValueError, match=match):
        replace_quantized_linears(model, folder, device="cpu")
    assert_unchanged(model, before)


def test_nan_scale_in_the_last_layer_leaves_the_model_unchanged(cpu_kernels, checkpoint):
    folder, _, _ = checkpoint
    # Column 3 of every group (K = 192, G = 64: 3 rows of scales) NaN.
    path = rewrite_tensor(folder, f"{LAST_LAYER}.scales", lambda t: t.index_fill_(1, torch.tensor([3]), float("nan")))
    model = fresh_model()
    assert_refused_unchanged(model, folder, rf"^{re.escape(LAST_LAYER)}.scales in {re.escape(path)} holds 3 NaN or inf "
                                            r"values")


def test_prepack_failing_on_a_late_layer_leaves_the_model_unchanged(monkeypatch, checkpoint):
    folder, _, logical = checkpoint
    calls = []

    def prepack_failing_last(*args, **kwargs):
        calls.append(1)
        if len(calls) == len(logical):
            raise ValueError("prepack: refused for the test")
        return cpu_prepack(*args, **kwargs)

    monkeypatch.setattr(packing, "prepack", prepack_failing_last)
    model = fresh_model()
    before = snapshot(model)
    with pytest.raises(ValueError, match=rf"^{re.escape(LAST_LAYER)}: prepack: refused for the test"):
        replace_quantized_linears(model, folder, device="cpu")
    assert len(calls) == len(logical)  # every earlier layer was prepacked, and none of them swapped in
    assert_unchanged(model, before)


def test_a_dense_tensor_of_the_wrong_shape_leaves_the_model_unchanged(cpu_kernels, checkpoint):
    folder, _, _ = checkpoint
    model = fresh_model()
    model.lm_head = torch.nn.Linear(128, 32, bias=False).half()  # the checkpoint's lm_head is 128 -> 64
    assert_refused_unchanged(model, folder, r"^replace_quantized_linears: lm_head.weight has shape \(32, 128\) in the "
                                            r"model but \(64, 128\) in the checkpoint \(.*safetensors\)")


def test_a_wrong_linear_late_in_the_model_leaves_it_unchanged(cpu_kernels, checkpoint):
    folder, _, _ = checkpoint
    model = fresh_model()
    model.model.layers[1].down_proj = torch.nn.Linear(256, 128, bias=False).half()
    assert_refused_unchanged(model, folder, rf"{re.escape(LAST_LAYER)} is a Linear\(256 -> 128\) in the model but "
                                            r"\(192 -> 128\) in the checkpoint")


def test_a_truncated_shard_leaves_the_model_unchanged(cpu_kernels, checkpoint):
    folder, _, _ = checkpoint
    shard = CheckpointFiles(folder).path_of("model.norm.weight")
    truncate_file(shard, 0.9)
    model = fresh_model()
    assert_refused_unchanged(model, folder, rf"{re.escape(shard)} is not a readable safetensors file")


def test_success_swaps_every_layer_and_loads_every_tensor(cpu_kernels, checkpoint):
    folder, source, logical = checkpoint
    model = fresh_model()
    report = replace_quantized_linears(model, folder, device="cpu")
    assert sorted(report.replaced) == sorted(logical) and report.missing == [] and report.recomputed == []
    assert all(isinstance(model.get_submodule(name), QuantLinear) for name in logical)
    for key in ("lm_head.weight", "model.norm.weight", "model.norm.bias", "model.layers.0.up_proj.bias"):
        assert torch.equal(model.state_dict()[key], source.state_dict()[key]), key
    assert "model.layers.0.up_proj.bias" not in report.loaded  # it went into the QuantLinear with its layer
    assert report.loaded == ["model.norm.weight", "model.norm.bias", "lm_head.weight"]


# ---------------------------------------------------------------------------------------------------
# A model whose parameters are on the meta device


def meta_model():
    with torch.device("meta"):
        return TinyModel().half()


def test_meta_model_is_allocated_from_the_checkpoint(cpu_kernels, checkpoint):
    folder, source, logical = checkpoint
    model = meta_model()
    report = replace_quantized_linears(model, folder, device="cpu")
    assert sorted(report.replaced) == sorted(logical) and report.missing == []
    assert not any(t.is_meta for t in model.state_dict().values())
    # The same layers as a materialised model gets, and the dense tensors the checkpoint's, in the model's dtype.
    reference = fresh_model()
    replace_quantized_linears(reference, folder, device="cpu")
    for name in logical:
        layer, expected = model.get_submodule(name), reference.get_submodule(name)
        x = torch.randn(5, layer.in_features).to(F16)
        assert torch.equal(layer(x), expected(x)), name
    assert torch.equal(model.lm_head.weight, source.lm_head.weight) and model.lm_head.weight.dtype == F16
    assert isinstance(model.lm_head.weight, torch.nn.Parameter) and model.lm_head.weight.requires_grad
    assert torch.equal(model.model.norm.weight, source.model.norm.weight)


def test_meta_model_needs_a_device(cpu_kernels, checkpoint):
    folder, _, _ = checkpoint
    model = meta_model()
    before = snapshot(model)
    with pytest.raises(ValueError, match=r"^replace_quantized_linears: model.layers.0.up_proj is on the meta device "
                                         r".*pass device="):
        replace_quantized_linears(model, folder)
    assert_unchanged(model, before)
    dense_only = meta_model()
    dense_only.model.layers = torch.nn.ModuleList()  # no quantized layer to say where to load
    before = snapshot(dense_only)
    with pytest.raises(ValueError, match=r"^replace_quantized_linears: the model's model.norm.weight \(and 2 more\) is "
                                         r"on the meta device; pass device="):
        replace_quantized_linears(dense_only, folder)
    assert_unchanged(dense_only, before)


def test_meta_parameter_the_checkpoint_lacks_is_an_error(cpu_kernels, tmp_path):
    torch.manual_seed(13)
    source = TinyModel().half()
    write_model(tmp_path, source, "awq", 4, 64, False)
    model = meta_model()
    model.model.extra = torch.nn.LayerNorm(128, device="meta", dtype=F16)  # not in the checkpoint
    assert_refused_unchanged(model, tmp_path, r"^replace_quantized_linears: 2 parameters of the model are on the "
                                              r"meta device but not in .*, so they would have no values: "
                                              r"\['model.extra.weight', 'model.extra.bias'\]")


def test_meta_buffer_of_a_plain_module_cannot_be_recomputed(cpu_kernels, tmp_path):
    torch.manual_seed(14)
    write_model(tmp_path, TinyModel().half(), "awq", 4, 64, False)
    model = meta_model()
    model.model.norm.register_buffer("table", torch.empty(4, device="meta"), persistent=False)
    assert_refused_unchanged(model, tmp_path, r"the model's buffers \['model.norm.table'\] are on the meta device "
                                              r"and not in .*only a transformers model's own _init_weights can "
                                              r"recompute")


def test_tied_meta_weights_stay_tied(cpu_kernels, tmp_path):
    torch.manual_seed(15)
    source = TinyModel().half()
    source.model.embed = torch.nn.Embedding(64, 128).half()
    source.lm_head.weight = source.model.embed.weight  # tied: the writer saves it under both names
    write_model(tmp_path, source, "gptq", 4, 64, False)
    model = meta_model()
    model.model.embed = torch.nn.Embedding(64, 128, device="meta", dtype=F16)
    model.lm_head.weight = model.model.embed.weight
    report = replace_quantized_linears(model, tmp_path, device="cpu")
    assert model.lm_head.weight is model.model.embed.weight
    assert torch.equal(model.lm_head.weight, source.lm_head.weight)
    assert report.missing == [] and "lm_head.weight" not in report.loaded  # read once, through its first name
