"""Attention heads per rank in a transformers model whose q/k/v/o projections are sharded by head.

Column-parallel q/k/v give each rank ``heads / world`` query heads and ``kv_heads / world`` key/value heads
(contiguous, so rank r's query heads use exactly its kv heads: the grouping ``heads / kv_heads`` is kept). In
transformers 5.x, LlamaAttention (and Mistral's, Qwen2's) reshapes projections with ``view(..., -1,
head_dim)`` and caches size themselves from the key states, so the forward needs only ``head_dim`` unchanged;
the config's head counts are still divided, as vLLM and Megatron do, so that what reads them (a static cache
built from the config, generation utilities, a user) sees this rank's model. ``head_dim`` is written into the
config first, since a config without it derives it as ``hidden_size / num_attention_heads``.
"""

from __future__ import annotations

import torch

# Attributes that count heads, on configs and on attention modules of transformers' model families.
_HEAD_FIELDS = ("num_attention_heads", "num_key_value_heads")
_MODULE_FIELDS = ("num_heads", "num_key_value_heads", "num_attention_heads")


def check_heads(fn: str, model: torch.nn.Module, world_size: int) -> None:
    """Every head count of the model's config must split into ``world_size`` equal parts."""
    config = getattr(model, "config", None)
    for field in _HEAD_FIELDS:
        value = getattr(config, field, None)
        if isinstance(value, int) and value % world_size:
            raise ValueError(f"{fn}: the model has {field} = {value}, which does not split over {world_size} "
                             f"tensor-parallel ranks (rule: {field} % world_size == 0); use a world size that "
                             f"divides it")


def divide_heads(model: torch.nn.Module, world_size: int) -> None:
    """Divides the config's and the attention modules' head counts by ``world_size`` (check_heads first)."""
    if world_size == 1:
        return
    config = getattr(model, "config", None)
    if config is not None and getattr(config, "num_attention_heads", None):
        if getattr(config, "head_dim", None) is None:
            config.head_dim = config.hidden_size // config.num_attention_heads
        for field in _HEAD_FIELDS:
            value = getattr(config, field, None)
            if isinstance(value, int):
                setattr(config, field, value // world_size)
    for module in model.modules():
        if module is model:
            continue
        for field in _MODULE_FIELDS:
            value = module.__dict__.get(field)
            if isinstance(value, int) and not isinstance(value, bool):
                setattr(module, field, value // world_size)
