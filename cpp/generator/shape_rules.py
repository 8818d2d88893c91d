"""The shape rules of every kernel path: which N, K and group sizes a path's kernels take on a weight layout.

One table for the library: generate.py writes it into the build's shape_rules.inc, which the C++ runners'
can_implement read (cpp/mixgemm/core/shape_rules.h), and the extension hands the same rows to Python
(mixgemm.shape_rules), where prepack, the checkpoint loaders and each path's fits check read them. A path that
reads a layout has exactly one row for it.

A rule: N a positive multiple of ``n_multiple`` (and, with ``n_per_tile``, of the config's tile_n); K a positive
multiple of ``k_multiple``; the group size a multiple of ``group_multiple`` that divides K, or K itself where
``group_may_be_k``. The ``*_why`` texts say what each multiple is, for error messages.
"""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class ShapeRule:
    path: str
    layout: str
    n_multiple: int
    n_per_tile: bool
    k_multiple: int
    group_multiple: int
    group_may_be_k: bool
    n_why: str
    k_why: str
    group_why: str


_MAIN_LOOP_K = "the main loop's 64-deep k-tile"
_HALF_TILE_GROUP = "one row of scales per 32-row half of a k-tile"
_DECODE_N = "a block's 64-column strip"
_DECODE_K = "the 64-deep k-batch"
_DECODE_GROUP = "the 32-row scale fold"
_EXPAND_N = "the 64-column strip the expansion walks"
_EXPAND_K = "the 16-deep slab"
_EXPAND_GROUP = "one scale row per 16-deep slab"

SHAPE_RULES = (
    ShapeRule("sm80", "sm80", 64, False, 64, 32, False, "the sm80 layout's 64-column strip", _MAIN_LOOP_K,
              _HALF_TILE_GROUP),
    ShapeRule("sm80", "sm90", 16, False, 64, 32, False, "the sm90 layout's 16-column block", _MAIN_LOOP_K,
              _HALF_TILE_GROUP),
    ShapeRule("decode", "sm80", 64, False, 64, 32, False, _DECODE_N, _DECODE_K, _DECODE_GROUP),
    ShapeRule("decode", "sm90", 64, False, 64, 32, False, _DECODE_N, _DECODE_K, _DECODE_GROUP),
    ShapeRule("sm90", "sm90", 64, True, 64, 64, True, "the config's weight tile: 64 or 128 columns",
              "the 64-deep k-tile", "the collective reloads scales per whole k-tile"),
    ShapeRule("dequant", "sm80", 64, False, 16, 16, False, _EXPAND_N, _EXPAND_K, _EXPAND_GROUP),
    ShapeRule("dequant", "sm90", 64, False, 16, 16, False, _EXPAND_N, _EXPAND_K, _EXPAND_GROUP),
)
