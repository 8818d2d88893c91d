"""CPU tests of the checkpoint loaders' errors on bad input (issue 32): unreadable safetensors files name the
file (and the shard of a sharded folder), wrong kinds of paths name the argument, dtype strings are
accepted, compressed-tensors shape and act-order rules name the layer, and non-finite scales are refused at
load time naming the layer, the tensor and its file."""

from __future__ import annotations

import os
import re

import pytest
import torch
from safetensors.torch import save_file

from mixgemm.checkpoint import (CheckpointFiles, load_layer, read_layer, read_quant_config,
                                replace_quantized_linears, save_sharded)
from mixgemm.checkpoint import compressed_tensors as ct
from mixgemm.checkpoint.writer import layer_tensors, quantization_config, write_checkpoint
from mixgemm.nn import QuantLinear

from checkpoint_helpers import rewrite_tensor, shard_files, truncate_file
from checkpoint_helpers import TinyModel, quantized_layer, write_layer_folder, write_model

F16, BF16 = torch.float16, torch.bfloat16


def gptq_layer_folder(folder, seed=0, K=128, N=64, G=64, dtype=F16):
    q, s, z = quantized_layer(K, N, G, 4, False, torch.Generator().manual_seed(seed), dtype)
    return write_layer_folder(folder, "gptq", layer_tensors("gptq", q, s, z), 4, G, False)


# ---------------------------------------------------------------------------------------------------
# Unreadable safetensors files


@pytest.mark.parametrize("damage,reason", [
    (lambda path: open(path, "wb").close(), "header too small"),
    (truncate_file, "incomplete metadata"),
    (lambda path: open(path, "wb").write(os.urandom(4096)), "deserializing header"),
])
def test_unreadable_single_file_names_it(tmp_path, damage, reason):
    gptq_layer_folder(tmp_path)
    damage(tmp_path / "model.safetensors")
    path = re.escape(str(tmp_path / "model.safetensors"))
    with pytest.raises(ValueError, match=rf"^CheckpointFiles: {path} is not a readable safetensors file \(.*{reason}"):
        CheckpointFiles(tmp_path)
    with pytest.raises(ValueError, match=rf"{path} is not a readable safetensors file"):
        load_layer(tmp_path, "layer", device="cpu")


def test_truncated_shard_of_a_sharded_folder_is_named(cpu_kernels, tmp_path):
    torch.manual_seed(10)
    write_model(tmp_path, TinyModel().half(), "gptq", 4, 64, False)
    shards = shard_files(tmp_path)
    assert len(shards) >= 3
    files = CheckpointFiles(tmp_path)
    victim = files.path_of("model.layers.1.down_proj.qweight")
    truncate_file(victim, 0.7)
    other = next(s for s in shards if s != victim)
    # The index still lists every tensor; reading one from the damaged shard names that shard, not another.
    with pytest.raises(ValueError, match=rf"^CheckpointFiles: {re.escape(victim)} is not a readable safetensors file"):
        CheckpointFiles(tmp_path).get("model.layers.1.down_proj.qweight")
    with pytest.raises(ValueError, match=re.escape(victim)) as info:
        load_layer(tmp_path, "model.layers.1.down_proj", device="cpu")
    assert other not in str(info.value)


def test_a_directory_among_the_shards_is_named(tmp_path):
    gptq_layer_folder(tmp_path)
    (tmp_path / "extra.safetensors").mkdir()
    with pytest.raises(ValueError, match=r"path must be a safetensors file, got the directory .*extra.safetensors"):
        CheckpointFiles(tmp_path)


def test_index_whose_weight_map_is_not_a_map(tmp_path):
    gptq_layer_folder(tmp_path)
    (tmp_path / "model.safetensors.index.json").write_text('{"weight_map": ["model.safetensors"]}')
    with pytest.raises(ValueError, match=r"'weight_map' must map tensor names to file names, got list"):
        CheckpointFiles(tmp_path)


def test_undecodable_config_json_names_the_file(tmp_path):
    gptq_layer_folder(tmp_path)
    (tmp_path / "config.json").write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(ValueError, match=r"^read_quant_config: cannot read .*config.json as JSON"):
        read_quant_config(tmp_path)


# ---------------------------------------------------------------------------------------------------
# QuantLinear.from_safetensors: one file


def write_one_file(tmp_path, seed=1):
    q, s, z = quantized_layer(128, 64, 64, 4, False, torch.Generator().manual_seed(seed))
    path = tmp_path / "layer.safetensors"
    save_file({f"l.{k}": v for k, v in layer_tensors("awq", q, s, z).items()}, str(path))
    return path


@pytest.mark.parametrize("damage,reason", [
    (lambda path: open(path, "wb").close(), "header too small"),
    (truncate_file, "incomplete metadata"),
])
def test_from_safetensors_names_an_unreadable_file(tmp_path, damage, reason):
    path = write_one_file(tmp_path)
    damage(path)
    with pytest.raises(ValueError, match=rf"^QuantLinear.from_safetensors: {re.escape(str(path))} is not a readable "
                                         rf"safetensors file \(.*{reason}"):
        QuantLinear.from_safetensors(path, "l", device="cpu")


def test_from_safetensors_path_errors(tmp_path):
    with pytest.raises(ValueError, match=r"^QuantLinear.from_safetensors: path must be a path \(str or os.PathLike\), "
                                         r"got None"):
        QuantLinear.from_safetensors(None, "l", device="cpu")
    with pytest.raises(ValueError, match=r"^QuantLinear.from_safetensors: path must be a safetensors file, got the "
                                         r"directory"):
        QuantLinear.from_safetensors(tmp_path, "l", device="cpu")
    with pytest.raises(ValueError, match=r"^QuantLinear.from_safetensors: path must be a safetensors file, got "
                                         r".*absent.safetensors', which does not exist"):
        QuantLinear.from_safetensors(tmp_path / "absent.safetensors", "l", device="cpu")


# ---------------------------------------------------------------------------------------------------
# Paths of the folder loaders


def test_none_and_file_paths_name_the_argument(cpu_kernels, tmp_path):
    gptq_layer_folder(tmp_path)
    none = r"folder must be a path \(str or os.PathLike\), got None"
    with pytest.raises(ValueError, match=rf"^CheckpointFiles: {none}"):
        CheckpointFiles(None)
    with pytest.raises(ValueError, match=rf"^read_quant_config: {none}"):
        read_quant_config(None)
    with pytest.raises(ValueError, match=rf"^load_layer: {none}"):
        load_layer(None, "layer", device="cpu")
    with pytest.raises(ValueError, match=rf"^replace_quantized_linears: {none}"):
        replace_quantized_linears(TinyModel().half(), None, device="cpu")
    with pytest.raises(ValueError, match=r"^load_layer: folder must be a path \(str or os.PathLike\), got int"):
        load_layer(3, "layer", device="cpu")
    with pytest.raises(ValueError, match=r"^load_layer: folder must be a checkpoint directory .*got the file "
                                         r".*model.safetensors"):
        load_layer(tmp_path / "model.safetensors", "layer", device="cpu")
    with pytest.raises(ValueError, match=r"^load_layer: folder must be a checkpoint directory, got .*absent.*which "
                                         r"does not exist"):
        load_layer(tmp_path / "absent", "layer", device="cpu")
    with pytest.raises(ValueError, match=r"^load_layer: name must name a module.*got None"):
        load_layer(tmp_path, None, device="cpu")


def test_writers_name_a_none_folder():
    with pytest.raises(ValueError, match=r"^save_sharded: folder must be a path \(str or os.PathLike\), got None"):
        save_sharded(None, {"a": torch.ones(2)})
    with pytest.raises(ValueError, match=r"^write_checkpoint: folder must be a path \(str or os.PathLike\), got None"):
        write_checkpoint(None, {}, quantization_config("awq", 4, 64, False), {"a": torch.ones(2)})


# ---------------------------------------------------------------------------------------------------
# dtype strings


@pytest.mark.parametrize("given,expected", [
    ("float16", F16), ("fp16", F16), ("half", F16), ("bfloat16", BF16), ("bf16", BF16), ("torch.bfloat16", BF16),
    (" Float16 ", F16), (F16, F16), (BF16, BF16),
])
def test_dtype_strings_are_accepted_everywhere(cpu_kernels, tmp_path, given, expected):
    cfg, files = gptq_layer_folder(tmp_path, seed=2)
    assert read_layer(files, "layer", cfg.scheme_for("layer"), given).scales.dtype == expected
    assert load_layer(tmp_path, "layer", device="cpu", dtype=given).dtype == expected


def test_dtype_strings_reach_replace_quantized_linears(cpu_kernels, tmp_path):
    torch.manual_seed(11)
    write_model(tmp_path, TinyModel().half(), "awq", 4, 64, False)
    model = TinyModel().half()
    replace_quantized_linears(model, tmp_path, device="cpu", dtype="bf16")
    assert model.model.layers[0].up_proj.dtype == BF16


@pytest.mark.parametrize("given,shown", [
    ("float32", r"got the string 'float32'"), ("int4", r"got the string 'int4'"),
    (torch.float32, r"\(mixgemm runs fp16/bf16 activations\); got torch.float32"), (None, r"got None"),
])
def test_other_dtypes_are_refused_showing_the_accepted_values(cpu_kernels, tmp_path, given, shown):
    cfg, files = gptq_layer_folder(tmp_path, seed=3)
    accepted = (r"dtype must be torch.float16 or torch.bfloat16, or one of the strings 'float16', 'fp16', 'half', "
                r"'bfloat16', 'bf16'")
    with pytest.raises(ValueError, match=rf"^load_layer: {accepted}.*{shown}"):
        load_layer(tmp_path, "layer", device="cpu", dtype=given)
    with pytest.raises(ValueError, match=rf"^layer: {accepted}.*{shown}"):
        read_layer(files, "layer", cfg.scheme_for("layer"), given)
    if given is not None:  # dtype=None means the model's own dtype here
        with pytest.raises(ValueError, match=rf"^replace_quantized_linears: {accepted}"):
            replace_quantized_linears(TinyModel().half(), tmp_path, device="cpu", dtype=given)


# ---------------------------------------------------------------------------------------------------
# compressed-tensors rules, naming the layer


def ct_folder(folder, tensors, G, symmetric, name="model.layers.3.mlp.down_proj"):
    write_checkpoint(folder, {}, quantization_config("compressed-tensors", 4, G, symmetric),
                     {f"{name}.{k}": v for k, v in tensors.items()})
    return read_quant_config(folder), CheckpointFiles(folder), name


@pytest.mark.parametrize("N,K,symmetric,letter", [(64, 100, True, "K"), (64, 36, False, "K"), (100, 128, False, "N")])
def test_compressed_tensors_unpackable_shape_names_the_layer(cpu_kernels, tmp_path, N, K, symmetric, letter):
    gen = torch.Generator().manual_seed(4)
    tensors = {
        "weight_packed": torch.randint(-2**31, 2**31 - 1, (N, -(-K // 8)), generator=gen, dtype=torch.int32),
        "weight_scale": torch.rand(N, 1, generator=gen).to(F16),
        "weight_shape": torch.tensor([N, K]),
    }
    if not symmetric:
        tensors["weight_zero_point"] = torch.zeros(-(-N // 8), 1, dtype=torch.int32)
    cfg, files, name = ct_folder(tmp_path, tensors, None, symmetric)
    size = K if letter == "K" else N
    message = (rf"^{re.escape(name)}: weight_shape gives {letter} = {size} .* features, which is not a positive "
               rf"multiple of 8 .*mixgemm needs {letter} a multiple of 64")
    with pytest.raises(ValueError, match=message):
        read_layer(files, name, cfg.scheme_for(name), F16)
    with pytest.raises(ValueError, match=message):
        load_layer(tmp_path, name, device="cpu")


def act_order_tensors(seed, K=256, N=64, G=64):
    gen = torch.Generator().manual_seed(seed)
    q, s, z = quantized_layer(K, N, G, 4, False, gen)
    g_idx = (torch.randperm(K, generator=gen) % (K // G)).to(torch.int32)
    return ct.layer_tensors(q, s, z, 4, g_idx), g_idx


def test_compressed_tensors_g_idx_with_one_unset_entry_is_refused(tmp_path):
    tensors, g_idx = act_order_tensors(5)
    column = int(torch.randint(0, g_idx.numel(), (1,)))
    tensors["weight_g_idx"][column] = -1
    cfg, files, name = ct_folder(tmp_path, tensors, 64, False)
    with pytest.raises(ValueError, match=rf"^{re.escape(name)}.weight_g_idx holds 1 negative entries among 256 \(first "
                                         rf"at column {column}: -1\); every entry must be a group index >= 0, or every "
                                         r"entry -1 \(no act-order\)"):
        read_layer(files, name, cfg.scheme_for(name), F16)


def test_compressed_tensors_g_idx_all_unset_means_column_order(tmp_path):
    tensors, _ = act_order_tensors(6)
    tensors["weight_g_idx"] = torch.full_like(tensors["weight_g_idx"], -1)
    cfg, files, name = ct_folder(tmp_path, tensors, 64, False)
    assert read_layer(files, name, cfg.scheme_for(name), F16).g_idx is None
    # A valid index still loads as act-order.
    tensors, g_idx = act_order_tensors(7)
    cfg, files, name = ct_folder(tmp_path / "valid", tensors, 64, False)
    assert torch.equal(read_layer(files, name, cfg.scheme_for(name), F16).g_idx, g_idx)


def test_compressed_tensors_float_g_idx_is_refused(tmp_path):
    tensors, g_idx = act_order_tensors(8)
    tensors["weight_g_idx"] = g_idx.float()
    cfg, files, name = ct_folder(tmp_path, tensors, 64, False)
    with pytest.raises(ValueError, match=rf"^{re.escape(name)}.weight_g_idx must be an integer tensor"):
        read_layer(files, name, cfg.scheme_for(name), F16)


# ---------------------------------------------------------------------------------------------------
# Non-finite scales, refused at load time


SCALE_KEY = {"awq": "scales", "gptq": "scales", "compressed-tensors": "weight_scale"}


@pytest.mark.parametrize("method", ["awq", "gptq", "compressed-tensors"])
@pytest.mark.parametrize("bad", [float("nan"), float("inf"), float("-inf")])
def test_non_finite_scales_are_refused_naming_layer_tensor_and_file(cpu_kernels, tmp_path, method, bad):
    gen = torch.Generator().manual_seed(9)
    q, s, z = quantized_layer(128, 64, 64, 4, False, gen)
    name = "model.layers.0.self_attn.o_proj"
    write_checkpoint(tmp_path, {}, quantization_config(method, 4, 64, False),
                     {f"{name}.{k}": v for k, v in layer_tensors(method, q, s, z).items()})
    key = f"{name}.{SCALE_KEY[method]}"
    spot = tuple(int(torch.randint(0, n, (1,), generator=gen)) for n in CheckpointFiles(tmp_path).shape_of(key))

    def poison(t):
        t[spot] = bad
        return t

    path = rewrite_tensor(tmp_path, key, poison)
    message = (rf"^{re.escape(key)} in {re.escape(path)} holds 1 NaN or inf values among {s.numel()} \(first at "
               rf"{re.escape(str(list(spot)))}: {re.escape(str(bad))}\); scales must be finite")
    cfg, files = read_quant_config(tmp_path), CheckpointFiles(tmp_path)
    with pytest.raises(ValueError, match=message):
        read_layer(files, name, cfg.scheme_for(name), F16)
    with pytest.raises(ValueError, match=message):
        load_layer(tmp_path, name, device="cpu")


def test_scales_that_overflow_the_activation_dtype_are_refused(cpu_kernels, tmp_path):
    gen = torch.Generator().manual_seed(12)
    q, s, z = quantized_layer(128, 64, 64, 4, False, gen, dtype=BF16)
    s = s.clone()
    s[1, 5] = 1e5  # finite in bf16, inf in fp16
    cfg, files = write_layer_folder(tmp_path, "gptq", layer_tensors("gptq", q, s, z), 4, 64, False)
    with pytest.raises(ValueError, match=r"^layer.scales: scales up to 99840 overflow torch.float16 \(inf after "
                                         r"conversion\); load this checkpoint with dtype=torch.bfloat16"):
        read_layer(files, "layer", cfg.scheme_for("layer"), F16)
    assert torch.equal(read_layer(files, "layer", cfg.scheme_for("layer"), BF16).scales, s)
