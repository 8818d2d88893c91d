"""The shape rules of every kernel path, as the build's table holds them (cpp/generator/shape_rules.py writes
it; the C++ runners check the same rows): which N, K and group sizes each path takes on each weight layout.

prepack refuses a weight no path can run (:func:`check_runnable`), the checkpoint loaders name the rule a layer
breaks, and each path's fits check (mixgemm.paths) asks :func:`violation` before it offers a config.
"""

from __future__ import annotations

import dataclasses
import functools


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

    def violation(self, N: int, K: int, group_size: int, tile_n: int = 0) -> str | None:
        """What N, K or group_size breaks, in the C++ core's words (core/shape_rules.cpp), or None."""
        n_multiple = tile_n if self.n_per_tile and tile_n > self.n_multiple else self.n_multiple
        if N < n_multiple or N % n_multiple:
            return f"N must be a positive multiple of {n_multiple} ({self.n_why}), got {N}"
        if K < self.k_multiple or K % self.k_multiple:
            return f"K must be a positive multiple of {self.k_multiple} ({self.k_why}), got {K}"
        per_channel = self.group_may_be_k and group_size == K
        if not per_channel and (group_size < self.group_multiple or group_size % self.group_multiple
                                or K % group_size):
            either = " or K itself" if self.group_may_be_k else ""
            return (f"group_size must be a multiple of {self.group_multiple} that divides K{either} "
                    f"({self.group_why}), got {group_size}")
        return None


@functools.cache
def table() -> tuple[ShapeRule, ...]:
    """Every rule of the build's table."""
    from ._runtime import extension

    return tuple(ShapeRule(**row) for row in extension().shape_rules())


def rule(path: str, layout: str) -> ShapeRule | None:
    """The rule of ``path`` on ``layout``, or None when the path does not read that layout."""
    return next((r for r in table() if r.path == path and r.layout == layout), None)


def paths_reading(layout: str) -> tuple[str, ...]:
    return tuple(r.path for r in table() if r.layout == layout)


def violation(path: str, layout: str, N: int, K: int, group_size: int, tile_n: int = 0) -> str | None:
    """Why ``path`` cannot run a weight of this shape in ``layout``, or None."""
    r = rule(path, layout)
    if r is None:
        return f"the {path} path does not read weights in the {layout!r} layout"
    return r.violation(N, K, group_size, tile_n)


def check_runnable(fn: str, layout: str, N: int, K: int, group_size: int) -> None:
    """A weight of this shape must be runnable by some path that reads ``layout``; else a ValueError that gives
    every path's broken rule."""
    broken = {r.path: r.violation(N, K, group_size) for r in table() if r.layout == layout}
    if broken and all(reason is not None for reason in broken.values()):
        raise ValueError(f"{fn}: no kernel path runs a weight of K = {K}, N = {N}, group_size = {group_size} in the "
                         f"{layout!r} layout: " + "; ".join(f"{path} path: {why}" for path, why in broken.items()))
