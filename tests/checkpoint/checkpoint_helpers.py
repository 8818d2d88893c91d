"""Shared pieces of the tests under tests/checkpoint: damaging a written checkpoint one tensor or one file at a
time, snapshots that prove a model unchanged, small quantized layers and models written as checkpoints, and tiny
transformers LLaMA checkpoints."""

from __future__ import annotations

import os

import torch

from mixgemm import formats
from mixgemm.checkpoint import CheckpointFiles, read_quant_config
from mixgemm.checkpoint.writer import layer_tensors, quantization_config, write_checkpoint

F16 = torch.float16


def rewrite_tensor(folder, key: str, change) -> str:
    """Replaces checkpoint tensor ``key`` by ``change(tensor)`` in the file that holds it; returns that path."""
    from safetensors.torch import load_file, save_file

    path = CheckpointFiles(folder).path_of(key)
    tensors = load_file(path)
    tensors[key] = change(tensors[key].clone())
    save_file(tensors, path, metadata={"format": "pt"})
    return path


def truncate_file(path, keep_fraction: float = 0.5) -> None:
    data = open(path, "rb").read()
    with open(path, "wb") as f:
        f.write(data[: int(len(data) * keep_fraction)])


def snapshot(model: torch.nn.Module):
    """Every module's class and every state-dict tensor (the object and a copy of its values)."""
    modules = {name: type(module) for name, module in model.named_modules()}
    tensors = {key: (t, None if t.is_meta else t.detach().clone())
               for key, t in model.state_dict(keep_vars=True).items()}
    return modules, tensors


def assert_unchanged(model: torch.nn.Module, before) -> None:
    modules, tensors = before
    assert {name: type(module) for name, module in model.named_modules()} == modules
    now = model.state_dict(keep_vars=True)
    assert now.keys() == tensors.keys()
    for key, (tensor, values) in tensors.items():
        assert now[key] is tensor, key
        assert values is None or torch.equal(now[key].detach(), values), key


def tiny_llama_config(**overrides):
    """A LLaMA config whose linears all meet the GEMM's shape rules (N and K multiples of 64)."""
    from transformers import LlamaConfig

    fields = dict(hidden_size=256, intermediate_size=512, num_hidden_layers=2, num_attention_heads=4,
                  num_key_value_heads=2, vocab_size=512, max_position_embeddings=256, tie_word_embeddings=False)
    return LlamaConfig(**{**fields, **overrides})


def random_llama(config, seed: int) -> torch.nn.Module:
    from transformers import AutoModelForCausalLM

    torch.manual_seed(seed)
    return AutoModelForCausalLM.from_config(config, dtype=F16).eval()


def write_llama_checkpoint(folder, model, method: str, group_size: int = 64, symmetric: bool = False,
                           drop=(), max_shard_bytes: int = 200_000) -> dict:
    """Writes ``model`` as the method's tools would (every Linear but lm_head quantized, the rest dense, the
    state-dict keys in ``drop`` left out, sharded), with its transformers config in config.json. Returns
    {layer: (q, scales, zeros)}."""
    tensors, logical = {}, {}
    for name, module in model.named_modules():
        if isinstance(module, torch.nn.Linear) and name != "lm_head":
            w = module.weight.detach().t().float()  # [K, N]
            q, s, z = ((*formats.quantize_sym(w, group_size), None) if symmetric
                       else formats.quantize_asym(w, group_size))
            logical[name] = (q, s.to(F16), z)
            tensors.update({f"{name}.{k}": v for k, v in layer_tensors(method, q, s.to(F16), z).items()})
    for key, value in model.state_dict().items():
        if key.rpartition(".")[0] not in logical and key not in drop:
            tensors[key] = value
    write_checkpoint(folder, model.config.to_dict(), quantization_config(method, 4, group_size, symmetric), tensors,
                     max_shard_bytes)
    return logical


def shard_files(folder) -> list:
    return sorted(os.path.join(folder, f) for f in os.listdir(folder) if f.endswith(".safetensors"))


def quantized_layer(K, N, G, bits, symmetric, gen, dtype=F16):
    w = torch.randn(K, N, generator=gen).to(dtype)
    if symmetric:
        q, s = formats.quantize_sym(w, G, bits)
        return q, s, None
    return formats.quantize_asym(w, G, bits)


def write_layer_folder(folder, method, tensors, bits, G, symmetric, name="layer"):
    write_checkpoint(folder, {"model_type": "test"}, quantization_config(method, bits, G, symmetric),
                     {f"{name}.{k}": v for k, v in tensors.items()})
    return read_quant_config(folder), CheckpointFiles(folder)


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.up_proj = torch.nn.Linear(128, 192, bias=True)
        self.down_proj = torch.nn.Linear(192, 128, bias=False)


class TinyModel(torch.nn.Module):
    """Module names like a transformers LLM: model.layers.i.*, model.norm, lm_head (kept dense)."""

    def __init__(self):
        super().__init__()
        self.model = torch.nn.Module()
        self.model.layers = torch.nn.ModuleList([Block(), Block()])
        self.model.norm = torch.nn.LayerNorm(128)
        self.lm_head = torch.nn.Linear(128, 64, bias=False)


def write_model(folder, model, method, bits, G, symmetric, max_shard_bytes=40_000):
    """Quantizes every Linear but lm_head like the method's tools would and writes the checkpoint folder.
    Returns {layer name: (q, scales, zeros)} for the references."""
    tensors, logical = {}, {}
    for name, module in model.named_modules():
        if isinstance(module, torch.nn.Linear) and name != "lm_head":
            w = module.weight.detach().t().contiguous()  # [K, N]
            q, s, z = (*formats.quantize_sym(w, G or w.shape[0], bits), None) if symmetric else \
                formats.quantize_asym(w, G or w.shape[0], bits)
            logical[name] = (q, s, z)
            tensors.update({f"{name}.{k}": v for k, v in layer_tensors(method, q, s, z, bits).items()})
            if module.bias is not None:
                tensors[f"{name}.bias"] = module.bias.detach()
    for key, value in model.state_dict().items():
        if key.rpartition(".")[0] not in logical:
            tensors[key] = value
    write_checkpoint(folder, {"model_type": "tiny"}, quantization_config(method, bits, G, symmetric), tensors,
                     max_shard_bytes)
    return logical
