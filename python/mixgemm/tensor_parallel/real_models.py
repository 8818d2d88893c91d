"""Which real models load tensor-parallel, worked out from their shapes and the kernels' shape rules (the
README's "Tensor parallel" table is this module's :func:`markdown_table`; a test keeps them equal).

A model loads at TP ``w`` when its head counts split over ``w`` ranks and every LLaMA-style linear's shard
(int4, groups of 128, AWQ or GPTQ packing) is cut at whole words and runs on some kernel path, padded where
needed (geometry.py). The table says what each needs beyond a plain cut.
"""

from __future__ import annotations

import dataclasses

from .geometry import ShardShapeError
from .layer_shard import plain_geometry
from .spec import ShardSpec
from .styles import LLAMA_STYLES


@dataclasses.dataclass(frozen=True)
class ModelShape:
    name: str
    hidden: int
    intermediate: int
    heads: int
    kv_heads: int
    head_dim: int = 128

    def linears(self) -> dict[str, tuple[int, int]]:
        """Each projection's (K, N)."""
        q, kv = self.heads * self.head_dim, self.kv_heads * self.head_dim
        return {"q_proj": (self.hidden, q), "k_proj": (self.hidden, kv), "v_proj": (self.hidden, kv),
                "o_proj": (q, self.hidden), "gate_proj": (self.hidden, self.intermediate),
                "up_proj": (self.hidden, self.intermediate), "down_proj": (self.intermediate, self.hidden)}

    def sharded_gemms(self, world: int) -> dict[str, tuple[int, int]]:
        """The (K, N) of the GEMMs one rank runs at TP ``world``, fused as vLLM fuses them (QKVParallelLinear,
        MergedColumnParallelLinear): qkv and gate_up column-parallel (N split), o and down row-parallel (K
        split)."""
        q, kv = self.heads * self.head_dim, self.kv_heads * self.head_dim
        return {"qkv": (self.hidden, (q + 2 * kv) // world), "o": (q // world, self.hidden),
                "gate_up": (self.hidden, 2 * self.intermediate // world), "down": (self.intermediate // world,
                                                                                   self.hidden)}


def model_named(name: str) -> ModelShape:
    for m in MODELS:
        if m.name == name:
            return m
    raise ValueError(f"unknown model {name!r}; known: {', '.join(m.name for m in MODELS)}")


MODELS = (
    ModelShape("Llama-3-8B", 4096, 14336, 32, 8),
    ModelShape("Llama-3-70B", 8192, 28672, 64, 8),
    ModelShape("Mistral-7B", 4096, 14336, 32, 8),
    ModelShape("Qwen2.5-7B", 3584, 18944, 28, 4),
    ModelShape("Qwen2.5-72B", 8192, 29568, 64, 8),
)
WORLD_SIZES = (2, 4, 8)
GROUP_SIZE = 128


def support(model: ModelShape, world: int, group_size: int = GROUP_SIZE, bits: int = 4) -> str:
    """"yes", "yes: <what it costs>" or "no: <the rule>" for ``model`` at TP ``world``."""
    for field, count in (("heads", model.heads), ("kv heads", model.kv_heads)):
        if count % world:
            return f"no: {count} {field} do not split over {world}"
    notes = []
    for name, (K, N) in model.linears().items():
        style = LLAMA_STYLES[name]
        # Every rank's shard: regrouped ones differ in size between ranks; the table gives the largest.
        try:
            shards = [plain_geometry(name, ShardSpec(r, world, style), "gptq", bits, K, N, group_size)
                      for r in range(world)]
        except ShardShapeError as error:
            return f"no: {error}"
        g = max(shards, key=lambda s: s.weight_k)
        if g.n_pad:
            notes.append(f"{name} N {g.n_size} padded to {g.weight_n}")
        if g.k_pad:
            notes.append(f"{name} K {g.k_size} padded to {g.weight_k}")
        if g.shard_group != group_size:
            notes.append(f"{name} in groups of {g.shard_group}")
    return "yes: " + ", ".join(notes) if notes else "yes"


def markdown_table() -> str:
    """The README's table: one row per model, one column per TP size."""
    lines = ["| model (hidden, intermediate, heads / kv heads) | " + " | ".join(f"TP {w}" for w in WORLD_SIZES) + " |",
             "|---|" + "---|" * len(WORLD_SIZES)]
    for m in MODELS:
        cells = [support(m, w) for w in WORLD_SIZES]
        lines.append(f"| {m.name} ({m.hidden}, {m.intermediate}, {m.heads} / {m.kv_heads}) | " + " | ".join(cells)
                     + " |")
    return "\n".join(lines)
