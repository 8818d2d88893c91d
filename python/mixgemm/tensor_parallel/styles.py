"""Which parallel style each linear of a model takes, by the last part of its name.

LLaMA-style decoders (LLaMA, Mistral, Qwen2, ...), as Megatron-LM and vLLM split them: the projections that
produce per-head or per-channel values are column-parallel (each rank computes its heads' q/k/v and its slice
of the MLP's intermediate channels), the ones that consume them are row-parallel (each rank's partial o_proj /
down_proj output, summed by one all-reduce per block half). Embeddings, norms and lm_head are not in the map:
they stay whole on every rank (replicated).
"""

from __future__ import annotations

from typing import Mapping, Optional

from .spec import COLUMN, ROW, STYLES

LLAMA_STYLES: Mapping[str, str] = {
    "q_proj": COLUMN, "k_proj": COLUMN, "v_proj": COLUMN, "gate_proj": COLUMN, "up_proj": COLUMN,
    "o_proj": ROW, "down_proj": ROW,
}


def check_styles(fn: str, styles: object) -> Mapping[str, str]:
    """``styles`` (a mapping of module-name suffix to "column" / "row"), checked."""
    if not isinstance(styles, Mapping) or not styles:
        raise ValueError(f"{fn}: tp_styles must be a non-empty mapping of module name suffix (such as 'q_proj') to "
                         f"'column' or 'row', got {styles!r}")
    for suffix, style in styles.items():
        if not isinstance(suffix, str) or not suffix or style not in STYLES:
            raise ValueError(f"{fn}: tp_styles[{suffix!r}] = {style!r}; each entry maps a module name suffix to "
                             "'column' or 'row'")
    return styles


def style_for(styles: Mapping[str, str], name: str) -> Optional[str]:
    """The style of module ``name``: that of the longest suffix of its dotted name in ``styles`` (so "mlp.up_proj"
    may override "up_proj"), or None (the layer is replicated)."""
    parts = name.split(".")
    for start in range(len(parts)):
        style = styles.get(".".join(parts[start:]))
        if style is not None:
            return style
    return None
