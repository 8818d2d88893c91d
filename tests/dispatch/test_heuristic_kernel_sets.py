"""The heuristics and the kernel sets are tied: in every set the generator can build (cpp/generator/kernel_sets.py),
with and without the sm90 path, config="auto" names only kernels that set compiles, for every problem of a grid
of shapes, rows, group sizes and kernel keys. A rule that asked for a tile a set lacks would otherwise surface as a
"not compiled" error on the first call of some shape in some build."""

from __future__ import annotations

import itertools

import pytest

from mixgemm import dispatch
from mixgemm.kernel_key import KernelKey
from mixgemm.paths import PATHS, GemmProblem, Gpu

from hand_registry import kernel_sets

KERNEL_SETS = kernel_sets()
KEY_FIELDS = {"fp16": "fp16", "bf16": "bf16"}


def compiled_by(kernel_set: str, sm90: bool) -> dict[KernelKey, dict[str, list]]:
    """Per kernel key, per path, the configs the set compiles, parsed by each path module as the extension's
    names would be (every path's config tuple maps to its name the way the C++ config's name() writes it)."""
    by_key: dict[KernelKey, dict[str, list]] = {}
    for path, config, (act, bits, layout, quant) in KERNEL_SETS.kernels(kernel_set, sm90=sm90):
        key = KernelKey(act, bits, layout, quant)
        if path == "sm80":
            name = "{}x{}x{}_w{}x{}x{}_s{}".format(*config)
        elif path == "decode":
            name = f"decode_m{8 * config[0]}_w{config[1]}"
        else:
            tile_m, tile_n, tile_k, cluster_m, cluster_n, schedule, scheduler = config
            name = f"sm90_{tile_m}x{tile_n}x{tile_k}_c{cluster_m}x{cluster_n}_{schedule}_{scheduler}"
        parsed = PATHS[path].parse_name(name)
        assert parsed is not None and parsed.kernel_name == name, f"{path} cannot name {name}"
        by_key.setdefault(key, {}).setdefault(path, []).append(parsed)
    return by_key


def candidates_for(by_key, key: KernelKey) -> dict[str, list]:
    """What KernelPath.compiled(key) returns for a build of these kernels (a scale key falls back to the
    scale+offset kernels)."""
    out: dict[str, list] = {}
    for kernel_key in key.kernel_keys():
        for path, configs in by_key.get(kernel_key, {}).items():
            if kernel_key.layout in PATHS[path].layouts:
                names = {c.kernel_name for c in out.get(path, [])}
                out.setdefault(path, []).extend(c for c in configs if c.kernel_name not in names)
    out["dequant"] = PATHS["dequant"]._compiled(key)
    return out


SHAPES = [(4096, 4096), (4096, 11008), (11008, 4096), (8192, 28672), (28672, 8192), (1024, 320), (4096, 4160),
          (7168, 2048), (2048, 1408)]
MS = [1, 3, 8, 9, 16, 17, 32, 64, 65, 128, 200, 256, 512, 1024, 4096, 8192, 16384]
GROUPS = [32, 64, 128, "K"]
GPUS = [Gpu("NVIDIA H100 80GB HBM3", 132, (9, 0)), Gpu("NVIDIA A100-SXM4-80GB", 108, (8, 0)),
        Gpu("NVIDIA H200", 132, (9, 0))]


@pytest.mark.parametrize("sm90", [True, False])
@pytest.mark.parametrize("kernel_set", KERNEL_SETS.SETS)
def test_heuristic_names_only_compiled_kernels(kernel_set, sm90):
    by_key = compiled_by(kernel_set, sm90)
    checked = 0
    for act, bits, layout, quant in itertools.product(("fp16", "bf16"), (4, 8), ("sm80", "sm90"),
                                                      ("scale_offset", "scale")):
        if quant == "scale" and layout == "sm80":
            continue  # an sm80-layout weight always has offsets (unsigned codes)
        key = KernelKey(act, bits, layout, quant)
        candidates = candidates_for(by_key, key)
        for (K, N), M, G, gpu in itertools.product(SHAPES, MS, GROUPS, GPUS):
            group_size = K if G == "K" else G
            problem = GemmProblem(M, N, K, group_size)
            config = dispatch.heuristic(candidates, problem, key, gpu)
            compiled_names = {c.kernel_name for c in candidates.get(config.path, [])}
            assert config.kernel_name in compiled_names, (kernel_set, sm90, key, problem, config.name)
            assert PATHS[config.path].fits(config, problem, key) is None, (key, problem, config.name)
            checked += 1
    assert checked > 1000


def test_every_set_gives_each_path_a_kernel_for_the_default_key():
    # The minimal set must still exercise every runner: each path has a kernel for fp16 int4.
    for kernel_set in KERNEL_SETS.SETS:
        by_key = compiled_by(kernel_set, sm90=True)
        assert set(by_key[KernelKey("fp16", 4, "sm80")]) == {"sm80", "decode"}
        assert set(by_key[KernelKey("fp16", 4, "sm90")]) == {"sm80", "decode", "sm90"}
