"""Quantized mixture-of-experts checkpoints written from a transformers model (Mixtral, Qwen2-MoE, Qwen3-MoE),
as AutoAWQ, the GPTQ tools and llm-compressor lay them out, for tests and examples: every expert projection as
its own quantized Linear under the checkpoint's names (Mixtral ``block_sparse_moe.experts.<e>.w1 / w3 / w2``,
Qwen ``mlp.experts.<e>.gate_proj / up_proj / down_proj``), the router dense under the same block name, the
other Linears quantized as :mod:`.writer` quantizes them, ``lm_head`` and Qwen2-MoE's one-column
``shared_expert_gate`` kept dense (listed in the config's ignore list, as the tools do).

:func:`dequantized_moe_model` is the other half a test needs: the model with every quantized weight replaced
by its dequantized value, the float reference a correct load must reproduce.
"""

from __future__ import annotations

import copy
import os
from typing import Optional

import torch

from .. import formats
from .moe_blocks import find_moe_blocks
from .moe_experts import ExpertNames
from .writer import layer_tensors, quantization_config, write_checkpoint

# Linears the tools leave dense in MoE models: the LM head and Qwen2-MoE's [hidden -> 1] shared-expert gate.
DENSE_LINEARS = ("lm_head", "shared_expert_gate")


def moe_quantization_config(method: str, bits: int, group_size: Optional[int], symmetric: bool) -> dict:
    """:func:`.writer.quantization_config` with the dense Linears of an MoE model in its ignore list (AWQ's
    ``modules_to_not_convert`` matches name parts; compressed-tensors' ``ignore`` needs patterns)."""
    if method == "compressed-tensors":
        ignore = tuple(f"re:(.*\\.)?{name}$" for name in DENSE_LINEARS)
    else:
        ignore = DENSE_LINEARS
    return quantization_config(method, bits, group_size, symmetric, ignore=ignore)


def checkpoint_expert_names(block) -> ExpertNames:
    """The names this writer gives a block's experts: the family's usual checkpoint names."""
    gate, up, down = block.family.projections[0]
    return ExpertNames(block.checkpoint_prefixes()[0], gate, up, down)


def quantize_moe_model(model: torch.nn.Module, method: str, group_size: Optional[int], *, symmetric: bool = False,
                       bits: int = 4) -> tuple[dict, dict]:
    """``(tensors, logical)``: the checkpoint's tensors by key, and ``{checkpoint module: (q, scales, zeros)}``
    of every quantized layer (codes ``q [K, N]``, fp16 scales, zeros None when symmetric)."""
    tensors, logical = {}, {}

    def quantize(name: str, w_kn: torch.Tensor) -> None:
        G = group_size or w_kn.shape[0]
        w = w_kn.detach().float().cpu()
        q, s, z = (*formats.quantize_sym(w, G, bits), None) if symmetric else formats.quantize_asym(w, G, bits)
        logical[name] = (q, s, z)
        tensors.update({f"{name}.{k}": v for k, v in layer_tensors(method, q, s, z, bits).items()})

    blocks, _ = find_moe_blocks(model)
    skipped = set()  # model modules whose tensors are written under checkpoint names here
    for block in blocks:
        names = checkpoint_expert_names(block)
        inter = block.intermediate_size
        for e in range(block.num_experts):
            gate_up, down = block.experts.gate_up_proj[e], block.experts.down_proj[e]  # [2I, H], [H, I]
            quantize(names.module(e, names.gate), gate_up[:inter].t())
            quantize(names.module(e, names.up), gate_up[inter:].t())
            quantize(names.module(e, names.down), down.t())
        tensors[f"{names.prefix}.gate.weight"] = block.router.weight.detach()
        skipped |= {f"{block.name}.experts", f"{block.name}.gate"}
    for name, module in model.named_modules():
        if isinstance(module, torch.nn.Linear) and name.rpartition(".")[2] not in DENSE_LINEARS:
            if module.bias is not None:
                tensors[f"{name}.bias"] = module.bias.detach()
            quantize(name, module.weight.t())
            skipped.add(name)
    for key, value in model.state_dict().items():
        if key.rpartition(".")[0] not in skipped:
            tensors[key] = value
    return tensors, logical


def write_moe_checkpoint(folder: str | os.PathLike, model: torch.nn.Module, method: str,
                         group_size: Optional[int] = 64, *, symmetric: bool = False, bits: int = 4,
                         max_shard_bytes: int = 2 << 30) -> tuple[list, dict]:
    """Writes ``model`` (its transformers config in ``config.json``) as a ``method`` checkpoint folder;
    returns the files written and the ``logical`` codes of :func:`quantize_moe_model`."""
    tensors, logical = quantize_moe_model(model, method, group_size, symmetric=symmetric, bits=bits)
    files = write_checkpoint(folder, model.config.to_dict(),
                             moe_quantization_config(method, bits, group_size, symmetric), tensors, max_shard_bytes)
    return files, logical


def dequantized_moe_model(model: torch.nn.Module, logical: dict, group_size: Optional[int],
                          bits: int = 4) -> torch.nn.Module:
    """A copy of ``model`` whose quantized weights (``logical``, as :func:`quantize_moe_model` returns) hold
    their dequantized values, in the model's dtype: what the model computes once loaded correctly."""
    ref = copy.deepcopy(model)

    def dense(name: str) -> torch.Tensor:  # [K, N] in float64
        q, s, z = logical[name]
        return formats.dequantize(q, s, z, group_size or q.shape[0], bits=bits)

    with torch.no_grad():
        blocks, _ = find_moe_blocks(ref)
        for block in blocks:
            names = checkpoint_expert_names(block)
            inter = block.intermediate_size
            gate_up, down = block.experts.gate_up_proj, block.experts.down_proj
            for e in range(block.num_experts):
                gate_up[e, :inter].copy_(dense(names.module(e, names.gate)).t())
                gate_up[e, inter:].copy_(dense(names.module(e, names.up)).t())
                down[e].copy_(dense(names.module(e, names.down)).t())
        for name, module in ref.named_modules():
            if isinstance(module, torch.nn.Linear) and name in logical:
                module.weight.copy_(dense(name).t())
    return ref
