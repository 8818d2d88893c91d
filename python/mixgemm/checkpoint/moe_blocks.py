"""The mixture-of-experts blocks of a transformers model, and how checkpoints name their experts.

transformers 5 stores each block's experts fused, in one ``*Experts`` module: ``gate_up_proj [E, 2 * inter,
hidden]`` (each expert's gate rows first, then its up rows) and ``down_proj [E, hidden, inter]``, beside a
router module ``gate`` (``weight [E, hidden]``). Quantized checkpoints (AutoAWQ, GPTQ tools, llm-compressor)
keep one quantized Linear per expert and projection instead, under the names the model had when they were
written: Mixtral ``<layer>.block_sparse_moe.experts.<e>.w1`` (gate), ``w3`` (up), ``w2`` (down); Qwen2-MoE and
Qwen3-MoE ``<layer>.mlp.experts.<e>.gate_proj``, ``up_proj``, ``down_proj``. transformers renames those at
load time (its conversion mapping); this table does the same for the blocks mixgemm loads.

Only the classes listed in :data:`FAMILIES` are known to compute softmax-top-k routed SwiGLU experts; any other
block with ``experts`` is refused by the loader (naming its class) when the checkpoint holds its experts
quantized.
"""

from __future__ import annotations

import dataclasses

import torch


@dataclasses.dataclass(frozen=True)
class MoeFamily:
    """How one model family's MoE block is laid out in checkpoints.

    ``block_names``: the last component of the block's module name in checkpoints, most usual first (Mixtral's
    ``block_sparse_moe`` is transformers 5's ``mlp``). ``projections``: ``(gate, up, down)`` names of an
    expert's Linears, most usual first. ``shared_expert``: the block also has Qwen2-MoE's ``shared_expert`` and
    ``shared_expert_gate`` (ordinary Linears, loaded as any other).
    """

    block_names: tuple
    projections: tuple
    shared_expert: bool = False


_SWIGLU_NAMES = ("gate_proj", "up_proj", "down_proj")
FAMILIES = {
    "MixtralSparseMoeBlock": MoeFamily(("block_sparse_moe", "mlp"), (("w1", "w3", "w2"), _SWIGLU_NAMES)),
    "Qwen2MoeSparseMoeBlock": MoeFamily(("mlp",), (_SWIGLU_NAMES,), shared_expert=True),
    "Qwen3MoeSparseMoeBlock": MoeFamily(("mlp",), (_SWIGLU_NAMES,)),
}


@dataclasses.dataclass
class MoeBlock:
    """One MoE block of a model: its module name and module, its family, and the expert shapes read off the
    fused parameters (available on the meta device too)."""

    name: str
    module: torch.nn.Module
    family: MoeFamily
    num_experts: int
    hidden_size: int
    intermediate_size: int

    @property
    def experts(self) -> torch.nn.Module:
        return self.module.experts

    @property
    def router(self) -> torch.nn.Module:
        return self.module.gate

    def checkpoint_prefixes(self) -> list:
        """Where the checkpoint may hold this block: the block's name with its last component replaced by each
        of the family's checkpoint names, then the model's own name."""
        parent, _, own = self.name.rpartition(".")
        names = [n for n in self.family.block_names if n != own] + [own]
        return [f"{parent}.{n}" if parent else n for n in names]


def find_moe_blocks(model: torch.nn.Module) -> tuple[list, list]:
    """``(blocks, unknown)``: the MoE blocks of ``model`` whose family mixgemm knows, as :class:`MoeBlock`, and
    ``(name, class name)`` of every other module with an ``experts`` child (a block it does not know)."""
    blocks, unknown = [], []
    for name, module in model.named_modules():
        family = FAMILIES.get(type(module).__name__)
        if family is not None and _fused_experts(module):
            blocks.append(_block(name, module, family))
        elif isinstance(getattr(module, "experts", None), torch.nn.Module):
            unknown.append((name, type(module).__name__))
    return blocks, unknown


def _fused_experts(module: torch.nn.Module) -> bool:
    experts, router = getattr(module, "experts", None), getattr(module, "gate", None)
    return (isinstance(getattr(experts, "gate_up_proj", None), torch.Tensor)
            and isinstance(getattr(experts, "down_proj", None), torch.Tensor)
            and isinstance(getattr(router, "weight", None), torch.Tensor))


def _block(name: str, module: torch.nn.Module, family: MoeFamily) -> MoeBlock:
    gate_up, down = module.experts.gate_up_proj, module.experts.down_proj
    E, two_inter, hidden = gate_up.shape
    if two_inter % 2 or tuple(down.shape) != (E, hidden, two_inter // 2):
        raise ValueError(f"{name} ({type(module).__name__}): experts.gate_up_proj {tuple(gate_up.shape)} and "
                         f"experts.down_proj {tuple(down.shape)} are not [E, 2 * inter, hidden] and [E, hidden, inter]")
    return MoeBlock(name, module, family, E, hidden, two_inter // 2)
