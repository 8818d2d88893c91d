"""CPU tests of mixgemm.checkpoint: quantization configs, sharded safetensors folders, the compressed-tensors
pack-quantized layout, layer conversion into prepack arguments, and the whole-model swap end to end (with
the kernel entry points replaced by their pure-PyTorch references, as in test_library.py)."""

from __future__ import annotations

import json
import warnings

import pytest
import torch

from mixgemm import formats, ops, packing
from mixgemm.checkpoint import (CheckpointFiles, QuantScheme, load_layer, parse_quant_config, read_layer,
                                read_quant_config, replace_quantized_linears, save_sharded)
from mixgemm.checkpoint import compressed_tensors as ct
from mixgemm.checkpoint.writer import layer_tensors, quantization_config, write_checkpoint
from mixgemm.nn import QuantLinear

from checkpoint_helpers import TinyModel, quantized_layer, write_layer_folder, write_model
from cpu_references import cpu_prepack, cpu_sm90_gemm

F16 = torch.float16


# ---------------------------------------------------------------------------------------------------
# Quantization configs


def write_json(folder, name, data):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(json.dumps(data))


def test_gptq_config_defaults_to_v1_zeros_and_reads_v2():
    base = {"quant_method": "gptq", "bits": 4, "group_size": 128, "sym": True, "desc_act": False}
    assert parse_quant_config(base).scheme_for("model.layers.0.mlp.down_proj") == QuantScheme(
        "gptq", 4, 128, True, "gptq", False)
    assert parse_quant_config({**base, "checkpoint_format": "gptq"}).groups[0][1].zero_format == "gptq"
    v2 = parse_quant_config({**base, "checkpoint_format": "gptq_v2", "desc_act": True, "group_size": -1})
    assert v2.groups[0][1] == QuantScheme("gptq", 4, None, True, "gptq_v2", True)


def test_awq_config_fields_and_modules_to_not_convert():
    cfg = parse_quant_config({"quant_method": "awq", "bits": 4, "group_size": 128, "zero_point": True,
                              "version": "GEMM", "modules_to_not_convert": ["lm_head", "mlp.gate"]})
    assert cfg.scheme_for("model.layers.0.self_attn.q_proj") == QuantScheme("awq", 4, 128, False)
    assert cfg.scheme_for("lm_head") is None and cfg.scheme_for("model.layers.3.mlp.gate") is None
    assert cfg.scheme_for("model.layers.3.mlp.gate_proj") is not None  # a part of the path, not a prefix
    # Older AutoAWQ quant_config.json spelling.
    old = parse_quant_config({"w_bit": 4, "q_group_size": 64, "zero_point": False, "version": "gemm"})
    assert old.groups[0][1] == QuantScheme("awq", 4, 64, True)


def test_compressed_tensors_config_targets_and_ignore():
    cfg = parse_quant_config({
        "quant_method": "compressed-tensors", "format": "pack-quantized", "ignore": ["lm_head", "re:.*router$"],
        "config_groups": {
            "attn": {"targets": ["re:.*self_attn\\..*"], "weights": {"num_bits": 8, "type": "int", "symmetric": True,
                                                                    "strategy": "channel"}},
            "rest": {"targets": ["Linear"], "weights": {"num_bits": 4, "type": "int", "symmetric": False,
                                                      "strategy": "group", "group_size": 128, "actorder": "group"}},
        }})
    assert cfg.scheme_for("model.layers.0.self_attn.q_proj") == QuantScheme("compressed-tensors", 8, None, True)
    assert cfg.scheme_for("model.layers.0.mlp.up_proj") == QuantScheme("compressed-tensors", 4, 128, False,
                                                                       act_order=True)
    assert cfg.scheme_for("lm_head") is None and cfg.scheme_for("model.layers.0.mlp.router") is None
    assert cfg.scheme_for("model.embed_tokens", "Embedding") is None


def test_read_quant_config_prefers_config_json_and_falls_back(tmp_path):
    write_json(tmp_path, "quantize_config.json", {"bits": 4, "group_size": 64, "sym": False})
    write_json(tmp_path, "config.json", {"model_type": "llama"})  # dense config.json: keep looking
    cfg = read_quant_config(tmp_path)
    assert cfg.method == "gptq" and cfg.source.endswith("quantize_config.json")
    assert cfg.groups[0][1] == QuantScheme("gptq", 4, 64, False)
    write_json(tmp_path, "config.json", {"quantization_config": quantization_config("awq", 4, 128, False)})
    assert read_quant_config(tmp_path).method == "awq"


@pytest.mark.parametrize("data,message", [
    ({"quant_method": "gptq", "bits": 3, "group_size": 128}, r"bits = 3 is not supported for gptq; .*4-bit and 8-bit"),
    ({"quant_method": "exl2", "bits": 4}, r"quant_method 'exl2' is not supported"),
    ({"quant_method": "gptq", "bits": 4, "group_size": 128, "checkpoint_format": "marlin"},
     r"checkpoint_format 'marlin' is not supported"),
    ({"quant_method": "gptq", "bits": 4, "group_size": 128, "is_marlin_format": True},
     r"checkpoint_format 'marlin' is not supported"),
    ({"quant_method": "awq", "bits": 4, "group_size": 128, "version": "gemv"}, r"AWQ version 'gemv' is not supported"),
    ({"quant_method": "awq", "bits": 8, "group_size": 128}, r"bits = 8 is not supported for awq"),
    ({"quant_method": "gptq", "bits": 4, "group_size": 0}, r"group_size must be a positive integer or -1"),
    ({"quant_method": "compressed-tensors", "format": "float-quantized", "config_groups": {"g": {}}},
     r"config_groups.g: format 'float-quantized' is not supported"),
    ({"quant_method": "compressed-tensors", "format": "pack-quantized", "config_groups": {"g": {
        "targets": ["Linear"], "weights": {"num_bits": 8, "type": "int", "strategy": "channel"},
        "input_activations": {"num_bits": 8, "type": "int"}}}}, r"activation quantization is not supported"),
    ({"quant_method": "compressed-tensors", "format": "pack-quantized", "config_groups": {"g": {
        "targets": ["Linear"], "weights": {"num_bits": 4, "type": "int", "strategy": "tensor"}}}},
     r"strategy 'tensor' is not supported"),
    ({"quant_method": "compressed-tensors", "format": "pack-quantized", "config_groups": {"g": {
        "targets": ["Linear"], "weights": {"num_bits": 2, "type": "int", "strategy": "group", "group_size": 32}}}},
     r"num_bits = 2 is not supported"),
])
def test_unsupported_configs_name_the_field(data, message):
    with pytest.raises(ValueError, match=message):
        parse_quant_config(data, "ckpt/config.json")


def test_folder_without_config_is_a_clear_error(tmp_path):
    with pytest.raises(ValueError, match=r"has no quantization config: none of config.json, quantize_config.json"):
        read_quant_config(tmp_path)


# ---------------------------------------------------------------------------------------------------
# Sharded files


def test_sharded_save_and_read_back(tmp_path):
    gen = torch.Generator().manual_seed(0)
    tensors = {f"layer{i}.w": torch.randn(64, 64, generator=gen).to(F16) for i in range(5)}
    tensors["tied"] = tensors["layer0.w"]  # shared storage must still save
    written = save_sharded(tmp_path, tensors, max_shard_bytes=64 * 64 * 2 * 2)
    index = json.loads((tmp_path / "model.safetensors.index.json").read_text())
    assert len(set(index["weight_map"].values())) == 3 and written[-1] == "model.safetensors.index.json"
    files = CheckpointFiles(tmp_path)
    assert set(files.keys()) == set(tensors)
    for name, t in tensors.items():
        assert torch.equal(files.get(name), t)
    assert files.get_optional("absent") is None
    with pytest.raises(ValueError, match=r"has no tensor 'absent'"):
        files.get("absent")


def test_single_file_and_missing_files(tmp_path):
    save_sharded(tmp_path / "one", {"a": torch.ones(2)})
    assert (tmp_path / "one" / "model.safetensors").is_file() and "a" in CheckpointFiles(tmp_path / "one")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match=r"holds no .safetensors file"):
        CheckpointFiles(tmp_path / "empty")


# ---------------------------------------------------------------------------------------------------
# compressed-tensors pack-quantized


def test_pack_quantized_hand_example():
    # Signed int4 values -8..-1 are stored shifted by 8 (0..7); input column 8c + i sits in nibble i.
    q = torch.arange(8, dtype=torch.uint8).reshape(8, 1).repeat(1, 64)  # [K=8, N=64]: row k holds code k
    t = ct.layer_tensors(q, torch.ones(1, 64, dtype=F16), None, 4)
    assert t["weight_packed"].shape == (64, 1) and (t["weight_packed"] == 0x76543210).all()
    assert t["weight_shape"].tolist() == [64, 8] and t["weight_scale"].shape == (64, 1)
    # int8: 4 bytes per word; zero points pack along N (byte i of word r = output row 4r + i).
    z = torch.arange(4, dtype=torch.uint8).repeat(16).reshape(1, 64)  # row n holds zero n % 4
    t8 = ct.layer_tensors(torch.zeros(4, 64, dtype=torch.uint8), torch.ones(1, 64, dtype=F16), z, 8)
    assert t8["weight_zero_point"].shape == (16, 1) and (t8["weight_zero_point"] == 0x03020100).all()


def dense_weight(args, group_size):
    """The float64 weight that prepack arguments describe, decoded with mixgemm.formats."""
    per_word_k = args.format != "awq"
    if args.format == "awq":
        q, z = formats.unpack_awq(args.qweight), None if args.qzeros is None else formats.unpack_awq(args.qzeros)
    else:
        v1 = args.format == "gptq"
        if args.bits == 4:
            q = formats.unpack_gptq_qweight(args.qweight)
            z = None if args.qzeros is None else formats.unpack_gptq_zeros(args.qzeros, v1=v1)
        else:
            q = formats.unpack_gptq_qweight_int8(args.qweight)
            z = None if args.qzeros is None else formats.unpack_gptq_zeros_int8(args.qzeros, v1=v1)
    assert per_word_k or args.g_idx is None
    return formats.dequantize(q, args.scales, z, group_size, g_idx=args.g_idx, bits=args.bits)


CASES = [  # method, bits, group size (None: per channel), symmetric
    ("awq", 4, 64, False), ("awq", 4, 128, True),
    ("gptq", 4, 64, False), ("gptq", 4, 128, True), ("gptq", 8, 64, False), ("gptq", 8, None, True),
    ("compressed-tensors", 4, 64, False), ("compressed-tensors", 4, 128, True), ("compressed-tensors", 4, None, False),
    ("compressed-tensors", 8, 64, False), ("compressed-tensors", 8, None, True),
]


@pytest.mark.parametrize("method,bits,G,symmetric", CASES)
@pytest.mark.parametrize("seed", [0, 1])
def test_written_layer_reads_back_to_the_float64_reference(tmp_path, method, bits, G, symmetric, seed):
    gen = torch.Generator().manual_seed(seed)
    K, N = 256, 192
    q, s, z = quantized_layer(K, N, G or K, bits, symmetric, gen)
    cfg, files = write_layer_folder(tmp_path, method, layer_tensors(method, q, s, z, bits), bits, G, symmetric)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a correctly declared checkpoint must not warn
        args = read_layer(files, "layer", cfg.scheme_for("layer"), F16)
    assert args.format == {"awq": "awq", "gptq": "gptq", "compressed-tensors": "gptq_v2"}[method]
    assert (args.k, args.n, args.bits) == (K, N, bits)
    expected = formats.dequantize(q, s, z, G or K, bits=bits)
    assert torch.equal(dense_weight(args, G or K), expected)


@pytest.mark.parametrize("bits,symmetric", [(4, False), (4, True), (8, False)])
def test_compressed_tensors_act_order_g_idx(tmp_path, bits, symmetric):
    gen = torch.Generator().manual_seed(2)
    K, N, G = 256, 64, 64
    q, s, z = quantized_layer(K, N, G, bits, symmetric, gen)
    g_idx = (torch.randperm(K, generator=gen) % (K // G)).to(torch.int32)  # each group keeps G rows
    tensors = ct.layer_tensors(q, s, z, bits, g_idx)
    cfg, files = write_layer_folder(tmp_path, "compressed-tensors", tensors, bits, G, symmetric)
    args = read_layer(files, "layer", cfg.scheme_for("layer"), F16)
    assert torch.equal(args.g_idx, g_idx)
    expected = formats.dequantize(q, s, z, g_idx=g_idx, bits=bits)
    assert torch.equal(dense_weight(args, G), expected)
    # An unset act-order index (-1) means plain column order.
    assert ct.to_gptq("l", {**tensors, "weight_g_idx": torch.full((K,), -1)}, bits, symmetric, G)[3] is None


def test_symmetric_gptq_zeros_that_contradict_the_config_warn(tmp_path):
    gen = torch.Generator().manual_seed(3)
    q, s = formats.quantize_sym(torch.randn(128, 64, generator=gen).to(F16), 64)
    tensors = layer_tensors("gptq", q, s, None)  # v1: constant stored zeros 7
    cfg_data = {**quantization_config("gptq", 4, 64, True), "checkpoint_format": "gptq_v2"}  # but declared v2
    write_checkpoint(tmp_path, {}, cfg_data, {f"model.proj.{k}": v for k, v in tensors.items()})
    with pytest.warns(formats.ZeroPointFormatWarning, match=r"^model.proj: the config says sym with checkpoint_format "
                                                            r"'gptq_v2', but every stored zero point is 7"):
        read_layer(CheckpointFiles(tmp_path), "model.proj", read_quant_config(tmp_path).scheme_for("model.proj"), F16)


@pytest.mark.parametrize("K,N,G,message", [
    (128, 96, 64, r"^layer: N must be a positive multiple of 64 for the sm80 layout, got 96; keep this layer dense"),
    (120, 64, 8, r"^layer: K must be a positive multiple of 16 for the sm80 layout, got 120; keep this layer dense"),
    (128, 64, 8, r"^layer: no kernel path runs a weight of K = 128, N = 64, group_size = 8 in the 'sm80' layout: "
                 r".*dequant path: group_size must be a multiple of 16 that divides K"),
])
def test_unrunnable_shapes_name_the_layer(tmp_path, K, N, G, message):
    q, s, z = quantized_layer(K, N, G, 4, False, torch.Generator().manual_seed(4))
    cfg, files = write_layer_folder(tmp_path, "compressed-tensors", ct.layer_tensors(q, s, z, 4), 4, G, False)
    with pytest.raises(ValueError, match=message):
        read_layer(files, "layer", cfg.scheme_for("layer"), F16)


@pytest.mark.parametrize("K,N,G", [(96, 64, 32), (128, 64, 16), (80, 128, 16)])
def test_shapes_only_the_dequant_path_runs_load(tmp_path, K, N, G):
    # K outside the 64-deep k-tile or groups of 16: the kernel paths refuse them, the dequant path runs them
    # (mixgemm.shape_rules), so a layer of such a shape loads.
    q, s, z = quantized_layer(K, N, G, 4, False, torch.Generator().manual_seed(4))
    cfg, files = write_layer_folder(tmp_path, "compressed-tensors", ct.layer_tensors(q, s, z, 4), 4, G, False)
    args = read_layer(files, "layer", cfg.scheme_for("layer"), F16)
    assert (args.k, args.n) == (K, N)


def test_layer_tensors_that_disagree_name_the_layer(tmp_path):
    q, s, z = quantized_layer(128, 64, 64, 4, False, torch.Generator().manual_seed(5))
    tensors = layer_tensors("gptq", q, s, z)
    tensors["scales"], tensors["qzeros"] = tensors["scales"][:1], tensors["qzeros"][:1]  # 1 group; config: G = 64
    cfg, files = write_layer_folder(tmp_path, "gptq", tensors, 4, 64, False)
    with pytest.raises(ValueError, match=r"^layer.scales has 1 rows, but K = 128 with the config's group_size 64"):
        read_layer(files, "layer", cfg.scheme_for("layer"), F16)
    no_zp = ct.layer_tensors(q, s, None, 4)
    cfg, files = write_layer_folder(tmp_path / "ct", "compressed-tensors", no_zp, 4, 64, False)
    with pytest.raises(ValueError, match=r"^layer: the config says asymmetric but the checkpoint has no "
                                         r"layer.weight_zero_point"):
        read_layer(files, "layer", cfg.scheme_for("layer"), F16)


# ---------------------------------------------------------------------------------------------------
# The whole-model swap, end to end on the CPU


def _check_against_reference(layer, bias, x, q, s, z, G, bits, name):
    """A replaced layer's output against the float64 product with its checkpoint's dequantized weight."""
    inp = x if layer.in_features == 128 else torch.randn(3, 192).to(F16)
    ref = inp.double() @ formats.dequantize(q, s, z, G or layer.in_features, bits=bits)
    ref = ref if bias is None else ref + bias.double()
    err = (torch.linalg.vector_norm(layer(inp).double() - ref) / torch.linalg.vector_norm(ref)).item()
    assert err < 3e-3, (name, err)


@pytest.mark.parametrize("method,bits,G,symmetric", [c for c in CASES if c[2] in (64, None)])
def test_replace_quantized_linears_end_to_end(cpu_kernels, tmp_path, method, bits, G, symmetric):
    torch.manual_seed(6)
    source = TinyModel().half()
    logical = write_model(tmp_path, source, method, bits, G, symmetric)
    assert (tmp_path / "model.safetensors.index.json").is_file()  # sharded
    fresh = TinyModel().half()  # different random weights: everything must come from the folder
    report = replace_quantized_linears(fresh, tmp_path, device="cpu")
    assert sorted(report.replaced) == sorted(logical)
    assert report.missing == [] and "lm_head.weight" in report.loaded and "model.norm.weight" in report.loaded
    assert isinstance(fresh.lm_head, torch.nn.Linear) and torch.equal(fresh.lm_head.weight, source.lm_head.weight)
    x = torch.randn(3, 128).to(F16)
    for name, (q, s, z) in logical.items():
        layer = fresh.get_submodule(name)
        assert isinstance(layer, QuantLinear)
        _check_against_reference(layer, source.get_submodule(name).bias, x, q, s, z, G, bits, name)


def test_replace_quantized_linears_errors(cpu_kernels, tmp_path):
    torch.manual_seed(7)
    write_model(tmp_path, TinyModel().half(), "gptq", 4, 64, False)
    with pytest.raises(ValueError, match=r"model.layers.0.up_proj has dtype torch.float32; mixgemm runs float16"):
        replace_quantized_linears(TinyModel(), tmp_path, device="cpu")
    wrong = TinyModel().half()
    wrong.model.layers[1].down_proj = torch.nn.Linear(256, 128, bias=False).half()
    with pytest.raises(ValueError, match=r"model.layers.1.down_proj is a Linear\(256 -> 128\) in the model but "
                                         r"\(192 -> 128\) in the checkpoint"):
        replace_quantized_linears(wrong, tmp_path, device="cpu")


# ---------------------------------------------------------------------------------------------------
# The whole-model swap in the sm90 layout: prepack(layout="sm90") is pure PyTorch and runs here as it is; the
# GEMM is the sm90 weight's math (signed code x scale + offset) on the CPU.


@pytest.mark.parametrize("method,bits,G,symmetric", [
    ("awq", 4, 64, False), ("gptq", 4, 64, True), ("gptq", 8, 64, False), ("compressed-tensors", 4, None, False),
    ("compressed-tensors", 4, 64, True),
])
def test_replace_quantized_linears_in_the_sm90_layout(monkeypatch, tmp_path, method, bits, G, symmetric):
    monkeypatch.setattr(ops, "gemm", cpu_sm90_gemm)
    real_prepack = packing.prepack

    def prepack_copies(*args, **kwargs):
        # On a GPU the loader's .to(device) gives prepack fresh (aligned) tensors; on the CPU they are views
        # into the safetensors file, at any offset, so copy them as that move would.
        args = [a.clone() if isinstance(a, torch.Tensor) else a for a in args]
        kwargs = {k: v.clone() if isinstance(v, torch.Tensor) else v for k, v in kwargs.items()}
        assert kwargs["layout"] == "sm90"
        return real_prepack(*args, **kwargs)

    monkeypatch.setattr(packing, "prepack", prepack_copies)
    torch.manual_seed(8)
    source = TinyModel().half()
    logical = write_model(tmp_path, source, method, bits, G, symmetric)
    fresh = TinyModel().half()
    report = replace_quantized_linears(fresh, tmp_path, device="cpu", layout="sm90")
    assert sorted(report.replaced) == sorted(logical)
    x = torch.randn(3, 128).to(F16)
    for name, (q, s, z) in logical.items():
        layer = fresh.get_submodule(name)
        # GPTQ files store symmetric zero points (all 8: zero offsets); compressed-tensors ones have none.
        assert (layer.layout, layer.scale_only, layer.bits) == (
            "sm90", symmetric and method == "compressed-tensors", bits), name
        assert (torch.count_nonzero(layer.offsets) == 0) == symmetric, name
        assert layer.packed.shape == (layer.in_features // 16, layer.out_features // 16, 32, bits // 4)
        _check_against_reference(layer, source.get_submodule(name).bias, x, q, s, z, G, bits, name)
    # One layer at a time, likewise.
    layer = load_layer(tmp_path, "model.layers.1.down_proj", device="cpu", layout="sm90")
    assert layer.layout == "sm90" and torch.equal(layer.packed, fresh.model.layers[1].down_proj.packed)


def test_layout_reaches_prepack_only_when_chosen(monkeypatch, tmp_path):
    torch.manual_seed(9)
    write_model(tmp_path, TinyModel().half(), "gptq", 4, 64, False)
    calls = []
    real_prepack = packing.prepack

    def recording_prepack(*args, **kwargs):
        calls.append(kwargs.get("layout", "<prepack's default>"))
        return cpu_prepack(*args, **{k: v for k, v in kwargs.items() if k != "layout"})

    monkeypatch.setattr(packing, "prepack", recording_prepack)
    load_layer(tmp_path, "model.layers.0.up_proj", device="cpu")
    load_layer(tmp_path, "model.layers.0.up_proj", device="cpu", layout="sm80")
    replace_quantized_linears(TinyModel().half(), tmp_path, device="cpu", layout="sm80", load_other_tensors=False)
    replace_quantized_linears(TinyModel().half(), tmp_path, device="cpu", load_other_tensors=False)
    assert calls == ["<prepack's default>", "sm80"] + ["sm80"] * 4 + ["<prepack's default>"] * 4
    # A layout prepack refuses is reported as that layer's error.
    monkeypatch.setattr(packing, "prepack", real_prepack)
    with pytest.raises(ValueError, match=r"^model\.layers\.0\.up_proj: prepack: layout must be 'auto', 'sm80' or "
                                         r"'sm90', got 'sm91'"):
        load_layer(tmp_path, "model.layers.0.up_proj", device="cpu", layout="sm91")
