"""A build's config registries written by hand, for CPU tests that must not depend on what this build compiled."""

from __future__ import annotations


def fake_compiled(configs, sm90_layout_tiles=()):
    """A stand-in for ``mixgemm.config._compiled``: ``configs`` (every path's), of which each weight layout gets
    those whose path reads it, the sm80 path's only for the tiles in ``sm90_layout_tiles`` on the sm90 layout
    (the generator compiles a few small-M tiles for it); ``layout=None`` gets all of them."""
    def compiled(bf16, bits, layout):
        return tuple(c for c in configs if layout is None or (
            layout in c.layouts and (c.path != "sm80" or layout == "sm80" or c.tile in sm90_layout_tiles)))
    return compiled
