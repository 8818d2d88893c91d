"""What a GEMM problem must move and compute, and the fastest it could possibly run (DESIGN.md s.7).

Every peer solves the same problem, so every peer is measured against the same bytes, flops and floor:
those of the int4 problem (a dense-fp16 peer that moves 4x the weight bytes is slower *because* of it,
and its "% of floor" shows exactly that).
"""

from __future__ import annotations

import dataclasses

# Ceilings measured on the H100 80GB HBM3 (DESIGN.md section 7); the CLI can override both.
READ_BW_TBS = 3.0  # `sum` of a 1 GiB tensor
PEAK_TFLOPS = 700.0  # dense fp16 through cuBLAS

_ACT_BYTES = 2  # fp16 / bf16


@dataclasses.dataclass(frozen=True)
class Ceilings:
    read_bw_tbs: float = READ_BW_TBS
    peak_tflops: float = PEAK_TFLOPS

    def __post_init__(self) -> None:
        if not (self.read_bw_tbs > 0 and self.peak_tflops > 0):
            raise ValueError(f"Ceilings must be positive, got {self}")


def gemm_bytes(M: int, N: int, K: int, G: int) -> int:
    """Bytes an ideal int4 GEMM moves: each operand read once, the output written once.

    int4 weights ``K*N/2``; scales and offsets, two fp16 ``[K/G, N]`` tensors; ``x`` ``[M, K]`` and
    ``y`` ``[M, N]`` in fp16.
    """
    weights = K * N // 2
    scales_offsets = 2 * _ACT_BYTES * (K // G) * N
    return weights + scales_offsets + _ACT_BYTES * M * K + _ACT_BYTES * M * N


def gemm_flops(M: int, N: int, K: int) -> int:
    """One multiply and one add per (m, n, k)."""
    return 2 * M * N * K


def floor_us(nbytes: int, flops: int, ceilings: Ceilings = Ceilings()) -> float:
    """The roofline floor: the slower of streaming the bytes and doing the flops, in microseconds."""
    bandwidth_us = nbytes / (ceilings.read_bw_tbs * 1e12) * 1e6
    compute_us = flops / (ceilings.peak_tflops * 1e12) * 1e6
    return max(bandwidth_us, compute_us)


@dataclasses.dataclass(frozen=True)
class Rates:
    tflops: float
    gbps: float
    pct_of_floor: float  # 100 means the kernel runs at the floor


def rates(time_us: float, nbytes: int, flops: int, floor: float) -> Rates:
    """Throughputs achieved by a call of ``time_us`` microseconds on a problem of this size."""
    if not time_us > 0:
        raise ValueError(f"rates: time_us must be positive, got {time_us}")
    seconds = time_us * 1e-6
    return Rates(tflops=flops / seconds / 1e12, gbps=nbytes / seconds / 1e9, pct_of_floor=100.0 * floor / time_us)


@dataclasses.dataclass(frozen=True)
class Problem:
    """One GEMM problem ``[M, K] x [K, N]`` with group size ``G``, and its metrics."""

    M: int
    N: int
    K: int
    G: int
    ceilings: Ceilings = Ceilings()

    @property
    def bytes(self) -> int:
        return gemm_bytes(self.M, self.N, self.K, self.G)

    @property
    def flops(self) -> int:
        return gemm_flops(self.M, self.N, self.K)

    @property
    def floor_us(self) -> float:
        return floor_us(self.bytes, self.flops, self.ceilings)

    @property
    def weight_bytes(self) -> int:
        """Bytes of one int4 weight copy (packed weight plus scales and offsets): what timing rotates."""
        return gemm_bytes(0, self.N, self.K, self.G)

    def rates(self, time_us: float) -> Rates:
        return rates(time_us, self.bytes, self.flops, self.floor_us)
