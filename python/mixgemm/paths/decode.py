"""The decode path: a batched GEMV on tensor cores for a few rows of x (cpp/mixgemm/decode), on either layout.

The weight is the mma's A operand and x its B operand, so M rides in the mma's 8-wide dimension: a kernel of
``rows`` = 8 or 16 takes up to that many rows. A block covers one 64-column strip with ``warps`` warps of one
64-deep k-batch each, two batches in flight per warp; ``split_k`` > 1 splits K over blocks and the last split of
a strip sums the partials in split order, in-kernel (mode ``"serial"``).
"""

from __future__ import annotations

import dataclasses
import re

from ..kernel_key import KernelKey
from .base import (FAST_DRAM_BANDWIDTH, SPLIT_SUFFIX, GemmProblem, Gpu, KernelPath, SerialSplitConfig,
                   check_positive_ints, check_split, split_of)

STRIP_N = 64  # columns per block
BATCH_K = 64  # K rows per warp step


@dataclasses.dataclass(frozen=True)
class DecodeConfig(SerialSplitConfig):
    """A decode kernel for up to ``rows`` rows of x with ``warps`` warps per block, split ``split_k`` ways."""

    rows: int
    warps: int
    split_k: int = 1

    path = "decode"

    def __post_init__(self) -> None:
        if self.rows not in (8, 16) or isinstance(self.rows, bool):
            raise ValueError(f"DecodeConfig: rows must be 8 or 16 (one or two n8 mma tiles), got {self.rows!r}")
        check_positive_ints(self, ("warps",))
        check_split("DecodeConfig", self.split_k, self.split_k_mode, ("none", "serial"))

    @property
    def kernel_name(self) -> str:
        return f"decode_m{self.rows}_w{self.warps}"


_NAME = re.compile(r"decode_m(\d+)_w(\d+)" + SPLIT_SUFFIX)

# ---------------------------------------------------------------------------------------------------------
# The heuristic (docs/perf-notes/2026-11-24-decode-8-warp-blocks.md, 2026-11-23-decode-scale-after-mma-pdl.md).
#
# The int4 kernels are held to 128 registers, so 16 warps fit per SM (4 blocks of 4 warps or 2 of 8), and K is
# split until the strips x splits blocks make one full wave, never a partial second one (a second wave of a few
# blocks costs as much as the first). Each warp keeps at least this many 64-deep batches so its two-batch
# pipeline fills (the m16 kernel four: at split 8 it lost to split 4).
_WARPS_PER_SM = 16
_MIN_BATCHES_PER_WARP = {8: 2, 16: 4}
_MAX_SPLIT_K = 16
# 4 or 8 warps: where 8-warp blocks at half the split keep as many warps busy (their wave at least 90% as full
# as 4 warps'), they won at every M (half the partials to write and sum); where they fill less, 4 warps won up
# to M = 4 and 8 warps from M = 5, where each split's partial has M rows.
_WIDE_WARPS = 8
_WIDE_MIN_FILL = 0.9
_WIDE_FROM_M = 5
# On a GPU of 4 TB/s or more (the H200), at M <= 2, 4 warps at twice the split are the better pick where the
# 8-warp pick splits K 2 to 4 ways, though both fill the wave alike. In the H200's sweeps of the 39 cells this
# moves (docs/perf-notes/2026-11-28-h200-decode-lane-addresses.md section 7), 4 warps took 0.997x-1.030x the
# fastest config's time and 8 warps 0.994x-1.055x (4 warps faster in 29, slower in 10 by at most 2.2%, or 3.0%
# where the auto row read high); the mechanism is not isolated. Not past that: where 8 warps split 6 or 8 ways, 4
# warps split 13-16, leaving the last split that many partials to sum, and took 1.02x-1.05x; nor from M = 3, where
# each partial has M rows (1.00x-1.09x at M = 3, up to 1.16x at M = 4). On the H100 (3.35 TB/s) the same swap
# stayed within 3% but was slower in 3 of 5 cells, so the rule holds from base.FAST_DRAM_BANDWIDTH on.
_NARROW_FAST_DRAM_MAX_M = 2
_NARROW_FAST_DRAM_WIDE_SPLITS = range(2, 5)
SWEEP_SPLIT_KS = (2, 4, 8, 16)


def split_for(config: DecodeConfig, N: int, K: int, sm_count: int) -> DecodeConfig:
    """A decode config with the split-K the rule above gives it."""
    strips = N // STRIP_N
    batches = K // BATCH_K
    one_wave = _WARPS_PER_SM // config.warps * sm_count // strips
    min_batches = _MIN_BATCHES_PER_WARP.get(config.rows, max(_MIN_BATCHES_PER_WARP.values()))
    split_k = max(1, min(one_wave, batches // (config.warps * min_batches), _MAX_SPLIT_K))
    return config.with_split_k(split_k, "none" if split_k == 1 else "serial")


def _fill(config: DecodeConfig, N: int, sm_count: int) -> float:
    """The share of the GPU's warp places a config's blocks take (above 1: more than one wave)."""
    return N // STRIP_N * config.split_k * config.warps / (_WARPS_PER_SM * sm_count)


def heuristic(configs: list[DecodeConfig], M: int, N: int, K: int, sm_count: int,
              memory_bandwidth: float = 0.0) -> DecodeConfig | None:
    """The kernel of the fewest rows that takes M, with 4 or 8 warps by the rules above (``memory_bandwidth``:
    the GPU's DRAM peak in bytes per second, 0 where unknown), split by :func:`split_for`; None when no compiled
    kernel takes M rows."""
    candidates = [c for c in configs if c.rows >= M]
    if not candidates:
        return None
    rows = min(c.rows for c in candidates)
    by_warps = {c.warps: split_for(c, N, K, sm_count) for c in candidates if c.rows == rows}
    narrow = by_warps[min(by_warps)]
    wide = by_warps.get(_WIDE_WARPS)
    if wide is None or wide == narrow or _fill(wide, N, sm_count) > 1:
        return narrow
    if (M <= _NARROW_FAST_DRAM_MAX_M and wide.split_k in _NARROW_FAST_DRAM_WIDE_SPLITS
            and memory_bandwidth >= FAST_DRAM_BANDWIDTH):
        return narrow
    fills_as_well = _fill(wide, N, sm_count) >= _WIDE_MIN_FILL * _fill(narrow, N, sm_count)
    return wide if fills_as_well or M >= _WIDE_FROM_M else narrow


class DecodePath(KernelPath):
    name = "decode"
    config_type = DecodeConfig
    layouts = ("sm80", "sm90")

    def parse_name(self, name: str) -> DecodeConfig | None:
        match = _NAME.fullmatch(name)
        if not match:
            return None
        split_k, mode = split_of(match, 3)
        if mode not in ("none", "serial"):
            raise ValueError(f"invalid config {name!r}: the decode path splits K serially only (_k<n>s)")
        check_split("DecodeConfig", split_k, mode, ("none", "serial"))  # "_k1s": a split of one is no split
        return DecodeConfig(int(match[1]), int(match[2]), split_k)

    def fits(self, config: DecodeConfig, problem: GemmProblem, key: KernelKey) -> str | None:
        if problem.M > config.rows:
            return f"{config.name} takes at most {config.rows} rows of x, got M = {problem.M}"
        reason = super().fits(config, problem, key)
        if reason is None and config.split_k > problem.K // BATCH_K:
            return f"split_k = {config.split_k} is more than K / {BATCH_K} = {problem.K // BATCH_K} k-batches"
        return reason

    def choose(self, configs, problem, key, gpu) -> DecodeConfig | None:
        return heuristic(configs, problem.M, problem.N, problem.K, gpu.sm_count, gpu.memory_bandwidth)

    def split_variants(self, config: DecodeConfig, problem: GemmProblem, gpu: Gpu) -> list[DecodeConfig]:
        # The sweep's splits and the one split_for gives this config here (3 or 6 where one wave holds that many
        # splits of the strips), so the pick of either warp count is timed, not only the one auto runs.
        base = config.with_split_k(1)
        splits = set(SWEEP_SPLIT_KS) | {split_for(base, problem.N, problem.K, gpu.sm_count).split_k}
        return [base] + [base.with_split_k(k) for k in sorted(splits) if 1 < k <= problem.K // BATCH_K]


PATH = DecodePath()
