"""Mixture-of-experts blocks in whole-model loading: :func:`.model.replace_quantized_linears` (and so
:func:`.hf.load_model`) asks :func:`plan_moe_blocks` which MoE blocks of the model the checkpoint holds
quantized, leaves their experts and routers out of its own Linear and dense-tensor plans, calls
:meth:`MoeLoad.prepare` with the other layers (read, checked and prepacked before the model changes: the
all-or-nothing rule holds for MoE blocks too), and swaps in the :class:`~mixgemm.moe.QuantMoE` it returns.

A block is replaced when the checkpoint holds its experts quantized; a block whose experts are stored dense
is left to the dense loader. The block's router is read here, not by the dense loader, because checkpoints
may name the block differently from the model (Mixtral's ``block_sparse_moe`` is transformers 5's ``mlp``).
Qwen2-MoE's shared expert keeps its own module and name, so its Linears are replaced like any other.
"""

from __future__ import annotations

import copy
import dataclasses
import warnings
from typing import Optional

import torch

from .. import _checks, formats
from .config import QuantConfig
from .files import CheckpointFiles
from .moe_blocks import FAMILIES, MoeBlock, find_moe_blocks
from .moe_experts import (ExpertNames, ExpertTensors, holds_quantized_experts, locate_experts, quantized_marker,
                          read_block_experts)


@dataclasses.dataclass
class _BlockPlan:
    block: MoeBlock
    names: ExpertNames
    router_key: str
    device: torch.device
    dtype: torch.dtype


@dataclasses.dataclass
class MoeLoad:
    """The MoE blocks a load replaces. ``owned_modules``: model modules whose tensors come from here (each
    block's experts and router), for the other plans to skip; ``checkpoint_modules``: the checkpoint's
    quantized expert modules read here; ``loaded``: dense checkpoint keys read here (the routers)."""

    plans: list = dataclasses.field(default_factory=list)

    @property
    def owned_modules(self) -> set:
        return {f"{p.block.name}.{child}" for p in self.plans for child in ("experts", "gate")}

    @property
    def checkpoint_modules(self) -> set:
        return {m for p in self.plans for m in p.names.modules(p.block.num_experts)}

    @property
    def loaded(self) -> list:
        return [p.router_key for p in self.plans]

    def prepare(self, files: CheckpointFiles, quant_config: QuantConfig) -> dict:
        """``{block name: QuantMoE}``: every planned block read, checked and prepacked on its device; the model
        is not touched."""
        return {p.block.name: _prepare_block(p, files, quant_config) for p in self.plans}


def plan_moe_blocks(fn: str, model: torch.nn.Module, files: CheckpointFiles, quant_config: QuantConfig,
                    target: Optional[torch.device], act_dtype: Optional[torch.dtype]) -> MoeLoad:
    """The MoE blocks of ``model`` that the checkpoint holds quantized, checked cheaply (names, router shape,
    device, dtype) before anything is read. A block of a class mixgemm does not know, whose experts the
    checkpoint holds quantized, is refused, naming its class."""
    blocks, unknown = find_moe_blocks(model)
    for name, class_name in unknown:
        # Were its experts left alone, _plan_layers would make each expert Linear a QuantLinear of its own.
        if holds_quantized_experts(files, [name], quant_config.method):
            why = ("its experts are not transformers 5's fused gate_up_proj / down_proj parameters (a model built "
                   "by an older transformers?)" if class_name in FAMILIES else
                   "mixgemm's MoE loader knows only the blocks " + ", ".join(sorted(FAMILIES)) +
                   " (softmax top-k routing, SwiGLU experts)")
            raise ValueError(f"{fn}: {name} is a {class_name}, whose experts the checkpoint holds quantized, but "
                             f"{why}; its experts cannot be loaded as separate layers either")
    load = MoeLoad()
    for block in blocks:
        names = locate_experts(files, block, quant_config.method)
        if names is None:
            if holds_quantized_experts(files, block.checkpoint_prefixes(), quant_config.method):
                raise ValueError(f"{fn}: {block.name}: the checkpoint holds quantized experts under "
                                 f"{block.checkpoint_prefixes()} but not expert 0's gate projection under any of "
                                 f"the names {[p[0] for p in block.family.projections]}")
            continue  # experts stored dense: the dense loader reads them
        router_key = _router_key(fn, block, names, files, quant_config.method)
        load.plans.append(_BlockPlan(block, names, router_key, _block_device(fn, block, target),
                                     _block_dtype(fn, block, act_dtype)))
    return load


def _router_key(fn: str, block: MoeBlock, names: ExpertNames, files: CheckpointFiles, method: str) -> str:
    """The router's dense weight, under the checkpoint's block name or the model's, shape-checked."""
    routers = list(dict.fromkeys([f"{names.prefix}.gate", f"{block.name}.gate"]))
    candidates = [f"{r}.weight" for r in routers]
    key = next((k for k in candidates if k in files), None)
    if key is None:
        quantized = [q for q in (f"{r}.{quantized_marker(method)}" for r in routers) if q in files]
        why = (f"; it holds {quantized[0]}, but mixgemm keeps routers dense (list the router in the config's "
               "modules_to_not_convert / ignore when quantizing)") if quantized else ""
        raise ValueError(f"{fn}: {block.name}: the checkpoint ({files.folder}) has no router weight "
                         f"{' or '.join(candidates)}{why}")
    expected = tuple(block.router.weight.shape)
    if tuple(files.shape_of(key)) != expected:
        raise ValueError(f"{fn}: {key} has shape {tuple(files.shape_of(key))} in the checkpoint but the model's "
                         f"router {block.name}.gate.weight is {expected} ({files.path_of(key)})")
    return key


def _block_device(fn: str, block: MoeBlock, target: Optional[torch.device]) -> torch.device:
    if target is not None:
        return target
    weight = block.experts.gate_up_proj
    if weight.is_meta:
        raise ValueError(f"{fn}: {block.name} is on the meta device (a model built without memory), so it says "
                         "nothing about where to load; pass device= (such as 'cuda')")
    return _checks.check_load_device(fn, weight.device)


def _block_dtype(fn: str, block: MoeBlock, act_dtype: Optional[torch.dtype]) -> torch.dtype:
    dtype = act_dtype if act_dtype is not None else block.experts.gate_up_proj.dtype
    if dtype not in (torch.float16, torch.bfloat16):
        raise ValueError(f"{fn}: {block.name} has dtype {dtype}; mixgemm runs float16 or bfloat16 activations "
                         "(build the model with dtype=torch.float16 or pass dtype=)")
    return dtype


def _prepare_block(plan: _BlockPlan, files: CheckpointFiles, quant_config: QuantConfig):
    from ..moe.layer import QuantMoE  # here: a model without MoE blocks loads without importing mixgemm.moe

    block = plan.block
    tensors = read_block_experts(files, block, plan.names, quant_config, plan.dtype).to(plan.device)
    w13, w2 = prepack_block_experts(block.name, tensors)
    family = block.family
    return QuantMoE(_router_copy(block.router, files.get(plan.router_key), plan.device, plan.dtype), w13, w2,
                    shared_expert=block.module.shared_expert if family.shared_expert else None,
                    shared_expert_gate=block.module.shared_expert_gate if family.shared_expert else None)


def prepack_block_experts(name: str, tensors: ExpertTensors):
    """``(w13, w2)`` ExpertWeights of one block's experts (tensors on the GPU), errors naming block ``name``."""
    from .. import moe as moe_api

    def prepack(args: list, gated: bool, layout: str):
        first = args[0]
        zeros = None if first.qzeros is None else [a.qzeros for a in args]
        return moe_api.prepack_experts([a.qweight for a in args], [a.scales for a in args], zeros,
                                       first.k // first.scales.shape[0], format=first.format, bits=first.bits,
                                       gated=gated, layout=layout)

    try:
        with warnings.catch_warnings():
            # read_layer has already compared symmetric GPTQ zeros with the config, naming each expert.
            warnings.simplefilter("ignore", formats.ZeroPointFormatWarning)
            w13 = prepack(tensors.w13, True, "auto")
            # One layout for the block: the fused layer runs the sm90 form only when both projections have it.
            return w13, prepack(tensors.w2, False, w13.layout)
    except ValueError as error:
        raise ValueError(f"{name}: {error}") from error


def _router_copy(router: torch.nn.Module, weight: torch.Tensor, device: torch.device,
                 dtype: torch.dtype) -> torch.nn.Module:
    """The model's router module (its class and routing kept, so the model's routing and its router-logit
    recording stay the model's) as a new object holding the checkpoint's weight on ``device``: the model's
    own router is not touched before the swap."""
    value = torch.empty(weight.shape, dtype=dtype, device=device)
    value.copy_(weight)
    twin = copy.copy(router)
    twin._parameters = dict(router._parameters)
    twin._parameters["weight"] = torch.nn.Parameter(value, requires_grad=False)
    return twin
