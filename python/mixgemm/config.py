"""GEMM configurations: the compiled kernel configs of every path (queried from the extension) plus
run-time split-K.

Paths (DESIGN.md section 3): ``"sm80"``, the CUTLASS-2.x-style mma.sync GEMM (any M); ``"gemv"``, the
decode path, a batched GEMV for up to ``tile_m`` rows of x (M <= 16) on the same packed weights.
"""

from __future__ import annotations

import dataclasses
import functools

import torch

SPLIT_K_MODES = ("none", "serial", "parallel")
PATHS = ("sm80", "gemv")
# Every decode (gemv) kernel covers one 64-column strip per block, a warp per 64-deep k-batch, two
# batches in flight per warp: only its rows (tile_m) and warps per block (tile_k / 64) vary.
_GEMV_STRIP_N = 64
_GEMV_BATCH_K = 64
_GEMV_DEPTH = 2


@dataclasses.dataclass(frozen=True)
class GemmConfig:
    """One kernel choice: the path, threadblock tile, warp tile, pipeline stages, and how K is split.

    ``split_k == 1`` goes with ``split_k_mode == "none"``; ``split_k > 1`` with ``"serial"`` (each split
    writes fp32 partials and the last split of a tile to finish, counted on a per-tile semaphore, sums them
    in split order: one launch, deterministic) or ``"parallel"`` (a second kernel sums the partials; sm80
    path only).

    ``path="gemv"`` (the decode path) reads the fields the same way: a block covers ``tile_m`` rows (the
    largest M it takes, 8 or 16) x one 64-column strip x ``tile_k`` rows of K per step, split among
    ``tile_k / warp_k`` warps of one 64-deep batch each, ``stages`` = 2 batches in flight per warp.
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

    def __post_init__(self) -> None:
        if self.path not in PATHS:
            raise ValueError(f"GemmConfig: path must be one of {PATHS}, got {self.path!r}")
        if self.path == "gemv" and self.split_k_mode == "parallel":
            raise ValueError("GemmConfig: the gemv path reduces split-K in-kernel: split_k_mode must be 'none' "
                             "or 'serial'")
        if self.split_k_mode not in SPLIT_K_MODES:
            raise ValueError(f"GemmConfig: split_k_mode must be one of {SPLIT_K_MODES}, got {self.split_k_mode!r}")
        if not isinstance(self.split_k, int) or isinstance(self.split_k, bool) or self.split_k < 1:
            raise ValueError(f"GemmConfig: split_k must be a positive int, got {self.split_k!r}")
        if (self.split_k == 1) != (self.split_k_mode == "none"):
            raise ValueError(
                "GemmConfig: split_k == 1 needs split_k_mode 'none' and split_k > 1 needs 'serial' or "
                f"'parallel', got split_k={self.split_k}, split_k_mode={self.split_k_mode!r}"
            )

    @classmethod
    def gemv(cls, rows: int, warps: int, split_k: int = 1) -> "GemmConfig":
        """The decode config for up to ``rows`` rows of x with ``warps`` warps per block."""
        return cls(rows, _GEMV_STRIP_N, _GEMV_BATCH_K * warps, rows, _GEMV_STRIP_N, _GEMV_BATCH_K, _GEMV_DEPTH,
                   split_k, "none" if split_k == 1 else "serial", path="gemv")

    @property
    def tile(self) -> tuple[int, int, int, int, int, int, int]:
        """The compiled part, as its path's registry names it (split-K is chosen at run time)."""
        return (self.tile_m, self.tile_n, self.tile_k, self.warp_m, self.warp_n, self.warp_k, self.stages)

    @property
    def gemv_key(self) -> tuple[int, int]:
        """A gemv config as the extension names it: (m_tiles of 8 rows, warps per block)."""
        return (self.tile_m // 8, self.tile_k // self.warp_k)

    def with_split_k(self, split_k: int, mode: str | None = None) -> "GemmConfig":
        if mode is None:
            mode = "none" if split_k == 1 else (self.split_k_mode if self.split_k_mode != "none" else "serial")
        return dataclasses.replace(self, split_k=split_k, split_k_mode=mode)

    @property
    def name(self) -> str:
        base = (f"{self.tile_m}x{self.tile_n}x{self.tile_k}_w{self.warp_m}x{self.warp_n}x{self.warp_k}"
                f"_s{self.stages}")
        if self.path != "sm80":  # sm80 names carry no prefix: they predate the other paths
            base = f"{self.path}_{base}"
        return base if self.split_k == 1 else f"{base}_k{self.split_k}{self.split_k_mode[0]}"


def compiled_configs(dtype: torch.dtype = torch.float16, bits: int = 4, path: str | None = "sm80") -> list[GemmConfig]:
    """Every config compiled into this build for activation ``dtype`` and ``bits``-bit weights, on
    ``path`` (``"sm80"`` by default, ``"gemv"``, or ``None`` for every path)."""
    if dtype not in (torch.float16, torch.bfloat16):
        raise ValueError(f"compiled_configs: dtype must be float16 or bfloat16, got {dtype}")
    if bits not in (4, 8):
        raise ValueError(f"compiled_configs: bits must be 4 or 8, got {bits!r}")
    if path is not None and path not in PATHS:
        raise ValueError(f"compiled_configs: path must be one of {PATHS} or None, got {path!r}")
    return [c for c in _compiled(dtype == torch.bfloat16, bits) if path is None or c.path == path]


@functools.cache
def _compiled(bf16: bool, bits: int) -> tuple[GemmConfig, ...]:
    # The build's registries never change, and gemm() asks on every call: read them once per kind.
    from . import _C

    sm80 = tuple(GemmConfig(*t) for t in _C.gemm_configs(bf16, bits))
    gemv = tuple(GemmConfig.gemv(8 * m_tiles, warps) for m_tiles, warps in _C.gemv_configs(bf16, bits))
    return sm80 + gemv
