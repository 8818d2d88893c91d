"""GEMM configurations: the compiled tile configs (queried from the extension) plus run-time split-K."""

from __future__ import annotations

import dataclasses
import functools

import torch

SPLIT_K_MODES = ("none", "serial", "parallel")


@dataclasses.dataclass(frozen=True)
class GemmConfig:
    """One kernel choice: threadblock tile, warp tile, pipeline stages, and how K is split.

    ``split_k == 1`` goes with ``split_k_mode == "none"``; ``split_k > 1`` with ``"serial"`` (each split
    writes fp32 partials and the last split of a tile to finish, counted on a per-tile semaphore, sums them
    in split order: one launch, deterministic) or ``"parallel"`` (a second kernel sums the partials).
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

    def __post_init__(self) -> None:
        if self.split_k_mode not in SPLIT_K_MODES:
            raise ValueError(f"GemmConfig: split_k_mode must be one of {SPLIT_K_MODES}, got {self.split_k_mode!r}")
        if not isinstance(self.split_k, int) or isinstance(self.split_k, bool) or self.split_k < 1:
            raise ValueError(f"GemmConfig: split_k must be a positive int, got {self.split_k!r}")
        if (self.split_k == 1) != (self.split_k_mode == "none"):
            raise ValueError(
                "GemmConfig: split_k == 1 needs split_k_mode 'none' and split_k > 1 needs 'serial' or "
                f"'parallel', got split_k={self.split_k}, split_k_mode={self.split_k_mode!r}"
            )

    @property
    def tile(self) -> tuple[int, int, int, int, int, int, int]:
        """The compiled part, as the extension names it."""
        return (self.tile_m, self.tile_n, self.tile_k, self.warp_m, self.warp_n, self.warp_k, self.stages)

    def with_split_k(self, split_k: int, mode: str | None = None) -> "GemmConfig":
        if mode is None:
            mode = "none" if split_k == 1 else (self.split_k_mode if self.split_k_mode != "none" else "serial")
        return dataclasses.replace(self, split_k=split_k, split_k_mode=mode)

    @property
    def name(self) -> str:
        base = (f"{self.tile_m}x{self.tile_n}x{self.tile_k}_w{self.warp_m}x{self.warp_n}x{self.warp_k}"
                f"_s{self.stages}")
        return base if self.split_k == 1 else f"{base}_k{self.split_k}{self.split_k_mode[0]}"


def compiled_configs(dtype: torch.dtype = torch.float16, bits: int = 4) -> list[GemmConfig]:
    """Every tile config compiled into this build for activation ``dtype`` and ``bits``-bit weights."""
    if dtype not in (torch.float16, torch.bfloat16):
        raise ValueError(f"compiled_configs: dtype must be float16 or bfloat16, got {dtype}")
    if bits not in (4, 8):
        raise ValueError(f"compiled_configs: bits must be 4 or 8, got {bits!r}")
    return list(_compiled(dtype == torch.bfloat16, bits))


@functools.cache
def _compiled(bf16: bool, bits: int) -> tuple[GemmConfig, ...]:
    # The build's registry never changes, and gemm() asks on every call: read it once per kind.
    from . import _C

    return tuple(GemmConfig(*t) for t in _C.gemm_configs(bf16, bits))
