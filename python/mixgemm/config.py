"""GEMM configurations: the compiled kernel configs of every path (queried from the extension) plus
run-time split-K.

Paths (DESIGN.md section 3): ``"sm80"``, the CUTLASS-2.x-style mma.sync GEMM (any M); ``"gemv"``, the
decode path, a batched GEMV for up to ``tile_m`` rows of x (M <= 16); ``"sm90"``, the CUTLASS 3.x
wgmma/TMA GEMM (Hopper, any M); ``"dequant"``, the whole weight expanded to a dense fp16/bf16 temporary by
our kernel, then one cuBLAS GEMM (any M; it wins only at large M, where cuBLAS outruns the mixed-input
kernels by more than the expansion costs). Each path reads the weight layouts of :data:`LAYOUTS_OF_PATH`:
a weight prepacked for one GPU serves its decode path, its GEMM paths and the dequant path. The sm80 path
reads the sm90 layout with the tiles of small M only (the build's list: :func:`compiled_configs` with
``layout="sm90"``), where Hopper's sm90 GEMM has the larger fixed cost.
"""

from __future__ import annotations

import dataclasses
import functools

import torch

SPLIT_K_MODES = ("none", "serial", "parallel", "streamk")
PATHS = ("sm80", "gemv", "sm90", "dequant")
# The weight layouts (PackedWeight.layout) and which of them each path's kernels read
# (cpp/include/mixgemm/gemv/weight_layouts.cuh).
LAYOUTS = ("sm80", "sm90")
LAYOUTS_OF_PATH = {"sm80": ("sm80", "sm90"), "gemv": ("sm80", "sm90"), "sm90": ("sm90",), "dequant": ("sm80", "sm90")}
# sm90 kernels: "coop" (two consumer warpgroups split one weight tile) or "pingpong" (they alternate
# whole tiles); tile scheduler "persistent" or "streamk" (tools/generate_kernels.py).
SM90_SCHEDULES = ("coop", "pingpong")
SM90_SCHEDULERS = ("persistent", "streamk")
# Every decode (gemv) kernel covers one 64-column strip per block, a warp per 64-deep k-batch, two
# batches in flight per warp: only its rows (tile_m) and warps per block (tile_k / 64) vary.
_GEMV_STRIP_N = 64
_GEMV_BATCH_K = 64
_GEMV_DEPTH = 2
# The dequant path's config name: what it does, in the order it does it.
DEQUANT_NAME = "dequant_cublas"


@dataclasses.dataclass(frozen=True)
class GemmConfig:
    """One kernel choice: the path, threadblock tile, warp tile, pipeline stages, and how K is split.

    ``split_k == 1`` goes with ``split_k_mode == "none"``; ``split_k > 1`` with ``"serial"`` (each split
    writes fp32 partials and the last split of a tile to finish, counted on a per-tile semaphore, sums them
    in split order: one launch, deterministic) or ``"parallel"`` (a second kernel sums the partials; sm80
    path only). ``"streamk"`` (sm80 path only) launches ``split_k`` blocks that share all the k-tiles of all
    the output tiles equally; a tile cut between blocks is summed in block order by the last of them to
    finish (deterministic). The heuristic gives it one block per resident place on the GPU.

    ``path="gemv"`` (the decode path) reads the fields the same way: a block covers ``tile_m`` rows (the
    largest M it takes, 8 or 16) x one 64-column strip x ``tile_k`` rows of K per step, split among
    ``tile_k / warp_k`` warps of one 64-deep batch each, ``stages`` = 2 batches in flight per warp.

    ``path="sm90"`` (build with :meth:`sm90`): ``tile_m`` tokens (rows of x) x ``tile_n`` weight columns x
    ``tile_k`` = 64 per CTA, ``cluster_m`` x ``cluster_n`` CTAs per cluster, ``schedule`` and
    ``scheduler`` as in :data:`SM90_SCHEDULES` / :data:`SM90_SCHEDULERS`. Its warp fields give one consumer
    warpgroup's tile (half the weight columns for "coop") and ``stages`` is 0: CUTLASS sizes the pipeline
    to the shared memory. A "streamk" config with ``split_k == 1`` lets CUTLASS's stream-K scheduler
    divide the K x tiles work over the SMs; ``split_k > 1`` (mode ``"serial"``) makes the same scheduler
    cut every tile's K into ``split_k`` runs instead, whose fp32 partials are added in split order in the
    workspace (deterministic) and the last split runs the epilogue.

    ``path="dequant"`` (build with :meth:`dequant`) has no tile: every size field is 0 and ``split_k`` 1;
    cuBLAS chooses its own kernel for the dense GEMM.
    """

    tile_m: int
    tile_n: int
    tile_k: int
    warp_m: int
    warp_n: int
    warp_k: int
    stages: int
    split_k: int = 1
    split_k_mode: str = "none"
    path: str = "sm80"
    cluster_m: int = 1
    cluster_n: int = 1
    schedule: str = ""
    scheduler: str = ""

    def __post_init__(self) -> None:
        if self.path not in PATHS:
            raise ValueError(f"GemmConfig: path must be one of {PATHS}, got {self.path!r}")
        if self.path == "sm90":
            if self.schedule not in SM90_SCHEDULES or self.scheduler not in SM90_SCHEDULERS:
                raise ValueError(f"GemmConfig: an sm90 config needs schedule in {SM90_SCHEDULES} and scheduler "
                                 f"in {SM90_SCHEDULERS}, got {self.schedule!r}, {self.scheduler!r}")
            if self.split_k != 1 and (self.scheduler != "streamk" or self.split_k_mode != "serial"):
                raise ValueError("GemmConfig: an sm90 config splits K only through its stream-K scheduler: split_k "
                                 "> 1 needs scheduler 'streamk' and split_k_mode 'serial'")
        elif self.schedule or self.scheduler or (self.cluster_m, self.cluster_n) != (1, 1):
            raise ValueError(f"GemmConfig: schedule, scheduler and clusters belong to the sm90 path, not {self.path!r}")
        if self.path == "dequant" and self.split_k != 1:
            raise ValueError("GemmConfig: the dequant path runs one cuBLAS GEMM: split_k must be 1")
        if self.split_k_mode == "streamk" and self.path != "sm80":
            raise ValueError(f"GemmConfig: split_k_mode 'streamk' (blocks sharing the work) belongs to the sm80 "
                             f"path, not {self.path!r}")
        if self.path == "gemv" and self.split_k_mode == "parallel":
            raise ValueError("GemmConfig: the gemv path reduces split-K in-kernel: split_k_mode must be 'none' "
                             "or 'serial'")
        if self.split_k_mode not in SPLIT_K_MODES:
            raise ValueError(f"GemmConfig: split_k_mode must be one of {SPLIT_K_MODES}, got {self.split_k_mode!r}")
        if not isinstance(self.split_k, int) or isinstance(self.split_k, bool) or self.split_k < 1:
            raise ValueError(f"GemmConfig: split_k must be a positive int, got {self.split_k!r}")
        if self.split_k_mode != "streamk" and (self.split_k == 1) != (self.split_k_mode == "none"):
            raise ValueError(
                "GemmConfig: split_k == 1 needs split_k_mode 'none' and split_k > 1 needs 'serial' or "
                f"'parallel', got split_k={self.split_k}, split_k_mode={self.split_k_mode!r}"
            )

    @classmethod
    def gemv(cls, rows: int, warps: int, split_k: int = 1) -> "GemmConfig":
        """The decode config for up to ``rows`` rows of x with ``warps`` warps per block."""
        return cls(rows, _GEMV_STRIP_N, _GEMV_BATCH_K * warps, rows, _GEMV_STRIP_N, _GEMV_BATCH_K, _GEMV_DEPTH,
                   split_k, "none" if split_k == 1 else "serial", path="gemv")

    @classmethod
    def sm90(cls, tile_m: int, tile_n: int, tile_k: int, cluster_m: int, cluster_n: int, schedule: str,
             scheduler: str) -> "GemmConfig":
        """An sm90 config, from the fields the extension lists it by (``_C.gemm_sm90_configs``)."""
        consumer_n = tile_n // 2 if schedule == "coop" else tile_n
        return cls(tile_m, tile_n, tile_k, tile_m, consumer_n, tile_k, 0, path="sm90", cluster_m=cluster_m,
                   cluster_n=cluster_n, schedule=schedule, scheduler=scheduler)

    @classmethod
    def dequant(cls) -> "GemmConfig":
        """The dequant path's one config: dense expansion of the weight, then cuBLAS."""
        return cls(0, 0, 0, 0, 0, 0, 0, path="dequant")

    @property
    def tile(self) -> tuple:
        """The compiled part, as its path's registry names it (split-K is chosen at run time)."""
        if self.path == "sm90":
            return (self.tile_m, self.tile_n, self.tile_k, self.cluster_m, self.cluster_n, self.schedule,
                    self.scheduler)
        if self.path == "dequant":
            return ()
        return (self.tile_m, self.tile_n, self.tile_k, self.warp_m, self.warp_n, self.warp_k, self.stages)

    @property
    def layouts(self) -> tuple[str, ...]:
        """The weight layouts this config's path reads (which of its tiles a build compiles for each layout:
        :func:`compiled_configs`)."""
        return LAYOUTS_OF_PATH[self.path]

    @property
    def gemv_key(self) -> tuple[int, int]:
        """A gemv config as the extension names it: (m_tiles of 8 rows, warps per block)."""
        return (self.tile_m // 8, self.tile_k // self.warp_k)

    def stream_k_units(self, M: int, N: int, K: int) -> int:
        """The units of work an sm80 stream-K grid of this tile shares for an M x N x K problem: one k-tile
        of one output tile each, at most one block per unit (cpp/include/mixgemm/gemm/kernel/
        stream_k_partition.h)."""
        return -(-M // self.tile_m) * -(-N // self.tile_n) * (K // self.tile_k)

    def with_split_k(self, split_k: int, mode: str | None = None) -> "GemmConfig":
        if mode is None:
            mode = "none" if split_k == 1 else (self.split_k_mode if self.split_k_mode != "none" else "serial")
        return dataclasses.replace(self, split_k=split_k, split_k_mode=mode)

    @property
    def name(self) -> str:
        if self.path == "dequant":
            return DEQUANT_NAME
        if self.path == "sm90":
            base = (f"sm90_{self.tile_m}x{self.tile_n}x{self.tile_k}_c{self.cluster_m}x{self.cluster_n}_"
                    f"{self.schedule}_{self.scheduler}")
            return base if self.split_k == 1 else f"{base}_k{self.split_k}s"
        base = (f"{self.tile_m}x{self.tile_n}x{self.tile_k}_w{self.warp_m}x{self.warp_n}x{self.warp_k}"
                f"_s{self.stages}")
        if self.path != "sm80":  # sm80 names carry no prefix: they predate the other paths
            base = f"{self.path}_{base}"
        if self.split_k_mode == "streamk":
            return f"{base}_sk{self.split_k}"
        return base if self.split_k == 1 else f"{base}_k{self.split_k}{self.split_k_mode[0]}"


def compiled_configs(dtype: torch.dtype = torch.float16, bits: int = 4, path: str | None = "sm80",
                     layout: str | None = None) -> list[GemmConfig]:
    """Every config compiled into this build for activation ``dtype`` and ``bits``-bit weights, on
    ``path`` (``"sm80"`` by default, ``"gemv"``, ``"sm90"`` (empty in a build without sm_90a),
    ``"dequant"``, or ``None`` for every path), and with ``layout`` (``"sm80"`` or ``"sm90"``) only those
    compiled to read weights in that layout (``None``: any layout)."""
    if dtype not in (torch.float16, torch.bfloat16):
        raise ValueError(f"compiled_configs: dtype must be float16 or bfloat16, got {dtype}")
    if bits not in (4, 8):
        raise ValueError(f"compiled_configs: bits must be 4 or 8, got {bits!r}")
    if path is not None and path not in PATHS:
        raise ValueError(f"compiled_configs: path must be one of {PATHS} or None, got {path!r}")
    if layout is not None and layout not in LAYOUTS:
        raise ValueError(f"compiled_configs: layout must be one of {LAYOUTS} or None, got {layout!r}")
    configs = _compiled(dtype == torch.bfloat16, bits, layout)
    return [c for c in configs if path is None or c.path == path]


@functools.cache
def _compiled(bf16: bool, bits: int, layout: str | None) -> tuple[GemmConfig, ...]:
    # The build's registries never change, and gemm() asks on every call: read them once per kind.
    from . import _C

    # Any layout (None) lists the sm80 layout's sm80 tiles: the generator makes the sm90 layout's a subset.
    sm80 = tuple(GemmConfig(*t) for t in _C.gemm_configs(bf16, bits, layout == "sm90"))
    gemv = tuple(GemmConfig.gemv(8 * m_tiles, warps) for m_tiles, warps in _C.gemv_configs(bf16, bits))
    # One config per sm90 schedule, whatever conversion modes were compiled for it.
    sm90 = tuple(GemmConfig.sm90(*key) for key in sm90_modes(bf16, bits)) if layout != "sm80" else ()
    # The dequant path's expansion kernel is compiled for every dtype, width and layout.
    return sm80 + gemv + sm90 + (GemmConfig.dequant(),)


@functools.cache
def sm90_modes(bf16: bool, bits: int) -> dict[tuple, tuple[str, ...]]:
    """sm90 config tile -> the conversion modes compiled for it ("scale": scale-only, "offset": with
    folded zero points)."""
    from . import _C

    modes: dict[tuple, list[str]] = {}
    for key, mode in _C.gemm_sm90_configs(bf16, bits):
        modes.setdefault(tuple(key), []).append(mode)
    return {key: tuple(sorted(m)) for key, m in modes.items()}
