"""The shape rules (mixgemm.shape_rules): the extension's table is cpp/generator/shape_rules.py's, row by row; the
Python checks say what the C++ core says for the same shapes (the core's prepare checks the rules before it needs a
GPU); check_runnable accepts a weight some path runs and refuses one none does."""

from __future__ import annotations

import dataclasses
import importlib.util
import itertools
import pathlib
import sys

import pytest

import mixgemm._C as _C
from mixgemm import shape_rules
from mixgemm.kernel_key import KernelKey
from mixgemm.paths import PATHS

GENERATOR = pathlib.Path(__file__).resolve().parents[2] / "cpp" / "generator"


def generator_rules():
    spec = importlib.util.spec_from_file_location("generator_shape_rules", GENERATOR / "shape_rules.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is made
    try:
        spec.loader.exec_module(module)
    finally:
        del sys.modules[spec.name]
    return module.SHAPE_RULES


SHAPE_RULES = generator_rules()


# ===================================================================================================
# The table
# ===================================================================================================


def test_the_extensions_table_is_the_generators_row_by_row():
    table = shape_rules.table()
    assert len(table) == len(SHAPE_RULES) > 0
    for ours, theirs in zip(table, SHAPE_RULES, strict=True):
        assert isinstance(ours, shape_rules.ShapeRule)
        assert dataclasses.asdict(ours) == dataclasses.asdict(theirs)
    # The extension hands the rows over as dicts of exactly those fields.
    assert _C.shape_rules() == [dataclasses.asdict(r) for r in SHAPE_RULES]
    assert [f.name for f in dataclasses.fields(shape_rules.ShapeRule)] == [
        f.name for f in dataclasses.fields(type(SHAPE_RULES[0]))]
    assert shape_rules.table() is table  # read once


def test_rule_and_paths_reading():
    for r in SHAPE_RULES:
        assert dataclasses.asdict(shape_rules.rule(r.path, r.layout)) == dataclasses.asdict(r)
    assert shape_rules.rule("sm90", "sm80") is None
    assert shape_rules.rule("gemv", "sm80") is None
    assert shape_rules.paths_reading("sm80") == ("sm80", "decode", "dequant")
    assert shape_rules.paths_reading("sm90") == ("sm80", "decode", "sm90", "dequant")
    # Each path reads exactly the layouts it has a rule for.
    for layout in ("sm80", "sm90"):
        assert set(shape_rules.paths_reading(layout)) == {n for n, p in PATHS.items() if layout in p.layouts}


@pytest.mark.parametrize("path, layout, n, k, g", [
    ("sm80", "sm80", 64, 64, 32), ("sm80", "sm90", 16, 64, 32), ("decode", "sm80", 64, 64, 32),
    ("decode", "sm90", 64, 64, 32), ("sm90", "sm90", 64, 64, 64), ("dequant", "sm80", 64, 16, 16),
    ("dequant", "sm90", 64, 16, 16),
])
def test_each_rules_multiples(path, layout, n, k, g):
    r = shape_rules.rule(path, layout)
    assert (r.n_multiple, r.k_multiple, r.group_multiple) == (n, k, g)
    assert r.n_per_tile == r.group_may_be_k == (path == "sm90")


# ===================================================================================================
# violation
# ===================================================================================================


def test_violation_messages():
    v = shape_rules.violation
    assert v("sm80", "sm80", 4096, 4096, 128) is None
    assert v("sm80", "sm80", 4128, 4096, 128) == ("N must be a positive multiple of 64 (the sm80 layout's 64-column "
                                                  "strip), got 4128")
    assert v("sm80", "sm80", 0, 4096, 128) == ("N must be a positive multiple of 64 (the sm80 layout's 64-column "
                                               "strip), got 0")
    assert v("sm80", "sm80", 4096, 4000, 32) == ("K must be a positive multiple of 64 (the main loop's 64-deep "
                                                 "k-tile), got 4000")
    assert v("decode", "sm90", 4096, 4096, 16) == ("group_size must be a multiple of 32 that divides K (the 32-row "
                                                   "scale fold), got 16")
    assert v("sm90", "sm90", 4096, 4096, 32) == ("group_size must be a multiple of 64 that divides K or K itself (the "
                                                 "collective reloads scales per whole k-tile), got 32")
    assert v("dequant", "sm80", 4096, 80, 8) == ("group_size must be a multiple of 16 that divides K (one scale row "
                                                 "per 16-deep slab), got 8")
    # N first, then K, then the group size.
    assert v("sm80", "sm80", 4128, 4000, 8).startswith("N must")
    assert v("sm80", "sm80", 4096, 4000, 8).startswith("K must")
    # A path that does not read the layout.
    assert v("sm90", "sm80", 4096, 4096, 128) == "the sm90 path does not read weights in the 'sm80' layout"


def test_the_sm90_rule_takes_the_configs_weight_tile_and_per_channel_groups():
    v = shape_rules.violation
    assert v("sm90", "sm90", 4160, 4096, 128) is None  # 64 by default (a 64-column ping-pong tile)
    assert v("sm90", "sm90", 4160, 4096, 128, tile_n=64) is None
    assert v("sm90", "sm90", 4160, 4096, 128, tile_n=128) == ("N must be a positive multiple of 128 (the config's "
                                                              "weight tile: 64 or 128 columns), got 4160")
    assert v("sm90", "sm90", 4160, 4096, 128, tile_n=32) is None  # never below the rule's own multiple
    # The other rules ignore a tile.
    assert v("sm80", "sm90", 4112, 4096, 128, tile_n=256) is None
    # Per-channel: the group may be K itself, whatever K's multiple of 64.
    assert v("sm90", "sm90", 4096, 4160, 4160) is None
    assert v("sm90", "sm90", 4096, 4160, 4096).startswith("group_size must be a multiple of 64 that divides K or K "
                                                          "itself")
    assert v("sm80", "sm80", 4096, 4160, 4160) is None  # 4160 = 130 x 32 divides itself anyway


def built_kernels():
    """(path, key, a compiled config) of each kernel path and layout this build has."""
    out = []
    for path in ("sm80", "decode", "sm90"):
        for layout in PATHS[path].layouts:
            key = KernelKey(layout=layout)
            configs = PATHS[path].compiled(key)
            if configs:
                out.append((path, key, configs[0]))
    return out


NS = [4096, 4160, 4112, 4128, 64, 16, 0, -64]
KS = [4096, 4160, 4000, 80, 64, 32, 0]
GS = [128, 64, 32, 16, 48, 8, 0, "K", 4096]


@pytest.mark.parametrize("path, key, config", built_kernels(), ids=lambda v: getattr(v, "name", str(v)))
def test_violation_says_what_the_core_raises(path, key, config):
    # prepare checks the config, the rows and the shape rules before it needs a GPU: a broken rule is a ValueError
    # in the same words as violation's; a kept one prepares a launch (the sm80 and decode paths; the sm90 path then
    # asks for the GPU).
    tile_n = getattr(config, "tile_n", 0)
    broken = kept = 0
    for N, K, G in itertools.product(NS, KS, GS):
        group = K if G == "K" else G
        reason = shape_rules.violation(path, key.layout, N, K, group, tile_n)
        args = (path, config.kernel_name, key.as_tuple(), 8, N, K, group)
        if reason is None:
            kept += 1
            if path == "sm90":
                continue  # valid: the sm90 path's prepare needs the GPU next
            launch = _C.prepare(*args)
            assert (launch.workspace_bytes, launch.semaphores) == (0, 0)
        else:
            with pytest.raises(ValueError) as error:
                _C.prepare(*args)
            assert str(error.value) == f"gemm ({path} path): {reason}", (N, K, group)
            broken += 1
    assert broken > 20 and kept > 5


# ===================================================================================================
# check_runnable
# ===================================================================================================


@pytest.mark.parametrize("layout", ["sm80", "sm90"])
@pytest.mark.parametrize("N, K, G", [
    (4096, 4096, 128), (4096, 4096, 32), (4096, 4096, 4096),
    (4096, 80, 16), (4096, 4096, 16), (4096, 4176, 48),  # the dequant path's alone
])
def test_check_runnable_accepts_what_some_path_runs(layout, N, K, G):
    shape_rules.check_runnable("prepack", layout, N, K, G)
    assert any(shape_rules.violation(p, layout, N, K, G) is None for p in shape_rules.paths_reading(layout))


@pytest.mark.parametrize("layout", ["sm80", "sm90"])
def test_check_runnable_refuses_what_no_path_runs_naming_every_paths_rule(layout):
    with pytest.raises(ValueError) as error:
        shape_rules.check_runnable("prepack", layout, 4096, 4096, 8)
    message = str(error.value)
    assert message.startswith(f"prepack: no kernel path runs a weight of K = 4096, N = 4096, group_size = 8 in the "
                              f"{layout!r} layout: ")
    parts = message.split(" layout: ", 1)[1].split("; ")
    assert parts == [f"{p} path: {shape_rules.violation(p, layout, 4096, 4096, 8)}"
                     for p in shape_rules.paths_reading(layout)]
    with pytest.raises(ValueError, match=r"^loader: no kernel path runs a weight of K = 4104, N = 4096, "
                                         r"group_size = 8 "):
        shape_rules.check_runnable("loader", layout, 4096, 4104, 8)


def test_check_runnable_on_the_sm90_layout_counts_the_sm80_paths_16_column_blocks():
    # N = 4112 is no multiple of 64, but the sm80 path's tiles read the sm90 layout's 16-column blocks (the layout
    # itself holds whole 64-column groups: prepack refuses such an N before it asks the rules).
    shape_rules.check_runnable("prepack", "sm90", 4112, 4096, 128)
    with pytest.raises(ValueError, match="no kernel path runs"):
        shape_rules.check_runnable("prepack", "sm80", 4112, 4096, 128)


def test_the_dequant_rule_is_the_widest_on_every_layout_held_shape():
    # Every weight a layout holds (N in its multiple, K in 16-row slabs) that some path runs, the dequant path runs:
    # so a weight outside every kernel path's rules still runs, and prepack can check the dequant rule alone.
    from mixgemm import layouts

    for layout in ("sm80", "sm90"):
        module = layouts.layout(layout)
        for N in range(module.N_MULTIPLE, 5 * module.N_MULTIPLE + 1, module.N_MULTIPLE):
            for K in range(module.K_MULTIPLE, 640 + 1, module.K_MULTIPLE):
                for G in [g for g in range(1, K + 1) if K % g == 0]:
                    some = any(shape_rules.violation(p, layout, N, K, G) is None
                               for p in shape_rules.paths_reading(layout))
                    if some:
                        assert shape_rules.violation("dequant", layout, N, K, G) is None, (layout, N, K, G)
