"""A build's kernel registries written by hand, for CPU tests that must not depend on what this build compiled.

The package reads a build's registries through ``mixgemm.paths.base._compiled_configs(path, key)`` (each kernel
path's ``KernelPath.compiled(key)`` asks it per kernel key; the dequant path overrides ``_compiled`` and is always
there). A test replaces that function:

    from hand_registry import install
    install(monkeypatch, [Sm80Config(...), DecodeConfig(8, 4), Sm90Config(...)], sm90_layout_tiles=[...])

``fake_compiled`` builds the stand-in without installing it. ``set_configs`` gives the configs a generator set
(cpp/generator/kernel_sets.py) compiles for a path and kernel key. ``is_x_multicast_pair`` is the sm90 heuristic's
multicast-pair rule as the invariant tests check it.
"""

from __future__ import annotations

import importlib.util
import pathlib
import sys

from mixgemm.kernel_key import KernelKey
from mixgemm.paths import PATHS, DecodeConfig, Sm80Config, Sm90Config, base
from mixgemm.paths import sm90 as sm90_path

GENERATOR = pathlib.Path(__file__).resolve().parents[1] / "cpp" / "generator"


def _sm80_matches(config, tiles) -> bool:
    """Whether an sm80 config is one of ``tiles`` (Sm80Configs, split or not, or kernel names)."""
    names = {t if isinstance(t, str) else t.kernel_name for t in tiles}
    return config.kernel_name in names


def fake_compiled(configs, sm90_layout_tiles=(), scale_only=()):
    """A stand-in for ``mixgemm.paths.base._compiled_configs(path, key)``: of ``configs`` (every path's, split or
    not: each is listed unsplit, as the extension names kernels), those of ``path`` that read ``key.layout``;
    the sm80 path's only for the tiles in ``sm90_layout_tiles`` on the sm90 layout (the generator compiles a few
    small-M tiles for it). Every config is a scale+offset kernel for both activation types and widths; those in
    ``scale_only`` (configs or kernel names) are also compiled as scale-only kernels."""
    configs = tuple(configs)
    scale_names = {c if isinstance(c, str) else c.kernel_name for c in scale_only}

    def reads(config, layout: str) -> bool:
        if layout not in PATHS[config.path].layouts:
            return False
        return config.path != "sm80" or layout == "sm80" or _sm80_matches(config, sm90_layout_tiles)

    def compiled(path, key):
        name = path if isinstance(path, str) else path.name
        out = {}
        for c in configs:
            if c.path != name or not reads(c, key.layout):
                continue
            if key.quant == "scale" and c.kernel_name not in scale_names:
                continue
            out.setdefault(c.kernel_name, c.with_split_k(1))
        return tuple(out.values())

    return compiled


def install(monkeypatch, configs, sm90_layout_tiles=(), scale_only=(), dequant=True):
    """Makes the package see a build of ``configs`` (see :func:`fake_compiled`); ``dequant=False`` also removes the
    dequant path's config (a build that never has it, for the heuristics' rules without that fallback)."""
    monkeypatch.setattr(base, "_compiled_configs", fake_compiled(configs, sm90_layout_tiles, scale_only))
    if not dequant:
        monkeypatch.setattr(PATHS["dequant"], "_compiled", lambda key: ())


# ---------------------------------------------------------------------------------------------------------
# The generator's kernel sets


def kernel_sets():
    """cpp/generator/kernel_sets.py as a module."""
    sys.path.insert(0, str(GENERATOR))
    try:
        spec = importlib.util.spec_from_file_location("kernel_sets", GENERATOR / "kernel_sets.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path.remove(str(GENERATOR))


def config_of_row(path: str, config: tuple):
    """The package's config for one of kernel_sets.kernels()'s (path, config tuple) rows."""
    if path == "sm80":
        return Sm80Config(*config)
    if path == "decode":
        m_tiles, warps = config
        return DecodeConfig(8 * m_tiles, warps)
    tile_m, tile_n, tile_k, cluster_m, cluster_n, schedule, scheduler = config
    assert tile_k == Sm90Config.tile_k
    return Sm90Config(tile_m, tile_n, cluster_m, cluster_n, schedule, scheduler)


def set_registry(kernel_set: str, sm90: bool = True) -> dict[tuple[str, KernelKey], list]:
    """{(path, kernel key): [configs]} of a generator set, in its order: what a build of it registers."""
    registry: dict[tuple[str, KernelKey], list] = {}
    for path, config, key in kernel_sets().kernels(kernel_set, sm90=sm90):
        registry.setdefault((path, KernelKey(*key)), []).append(config_of_row(path, config))
    return registry


def set_configs(kernel_set: str, path: str, key: KernelKey | None = None, sm90: bool = True) -> list:
    """The configs of ``path`` a build of ``kernel_set`` compiles for exactly ``key`` (default: fp16 int4 on the sm80
    layout, scale+offset)."""
    return list(set_registry(kernel_set, sm90).get((path, key or KernelKey()), []))


# ---------------------------------------------------------------------------------------------------------
# The sm90 heuristic's rules, as tests check them


def is_x_multicast_pair(config: Sm90Config, M: int) -> bool:
    """Whether the sm90 heuristic's pick ``config`` at ``M`` rows must be the cluster of two that shares x by
    multicast: the library's ``_X_MULTICAST_TILE`` on the persistent scheduler, from its ``_X_MULTICAST_MIN_M``
    rows on. The rule's other conditions (K of at least ``_X_MULTICAST_MIN_K``, an even count of weight tiles) are
    the caller's to meet."""
    # The tile and threshold are read from the library at call time, so the tests follow them rather than copies.
    return ((config.tile_m, config.tile_n, config.schedule) == sm90_path._X_MULTICAST_TILE
            and config.scheduler == "persistent" and M >= sm90_path._X_MULTICAST_MIN_M)
