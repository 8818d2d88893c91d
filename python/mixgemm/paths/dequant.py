"""The dequant path: the whole weight expanded by our kernel (cpp/mixgemm/dequant/packed_dequantize*) into a dense
fp16/bf16 temporary ``W^T [N, K]`` (freed when the call's GEMM is done with it), then one cuBLAS GEMM on it.

It runs any M on either layout and the widest shapes of all paths (K in 16-deep slabs, groups of 16), so it is
also where a weight outside every other path's rules runs. It is fast only for many rows, where cuBLAS outruns
the mixed-input kernels by more than the expansion costs (mixgemm.dispatch says from which M).
"""

from __future__ import annotations

import dataclasses

import torch

from .._runtime import extension
from ..kernel_key import KernelKey
from .base import GemmConfig, GemmProblem, Gpu, KernelPath, Plan

NAME = "dequant_cublas"  # what it does, in the order it does it


@dataclasses.dataclass(frozen=True)
class DequantConfig(GemmConfig):
    """The dequant path's one config: cuBLAS chooses its own kernel for the dense GEMM."""

    path = "dequant"
    split_k = 1
    split_k_mode = "none"

    @property
    def kernel_name(self) -> str:
        return NAME

    def _split_fields(self, split_k: int, mode: str) -> dict:
        if split_k != 1:
            raise ValueError("DequantConfig: the dequant path runs one cuBLAS GEMM: split_k must be 1")
        return {}


def expand(weight, stream: int) -> torch.Tensor:
    """W^T ``[N, K]`` (row-major, the activation dtype) from a PackedWeight's tensors, by our kernel on ``stream``;
    every value is ``q * scale + offset`` rounded once, as the GEMM kernels multiply it."""
    dense = torch.empty((weight.n, weight.k), dtype=weight.act_dtype, device=weight.packed.device)
    extension().dequantize_packed(weight.key.as_tuple(), weight.packed.data_ptr(), weight.scales.data_ptr(),
                                  weight.offsets.data_ptr(), dense.data_ptr(), weight.n, weight.k, weight.group_size,
                                  stream)
    return dense


@dataclasses.dataclass(frozen=True)
class DequantPlan(Plan):
    config: GemmConfig
    device: torch.device

    def run(self, x2, weight, bias, out, stream) -> None:
        # W^T is what torch.nn.Linear keeps too, so cuBLAS runs its usual "TN" GEMM.
        dense = expand(weight, stream)
        if bias is None:
            torch.mm(x2, dense.t(), out=out)
        else:
            torch.addmm(bias, x2, dense.t(), out=out)


class DequantPath(KernelPath):
    name = "dequant"
    config_type = DequantConfig
    layouts = ("sm80", "sm90")

    def _compiled(self, key: KernelKey) -> tuple[GemmConfig, ...]:
        # The expansion kernel is compiled for every type, width and layout.
        return (DequantConfig(),)

    def parse_name(self, name: str) -> DequantConfig | None:
        return DequantConfig() if name == NAME else None

    def choose(self, configs, problem, key, gpu) -> DequantConfig | None:
        return configs[0] if configs else None

    def split_variants(self, config, problem: GemmProblem, gpu: Gpu) -> list[GemmConfig]:
        return [config]

    def plan(self, config, problem, key, gpu, device) -> DequantPlan:
        return DequantPlan(config, device)


PATH = DequantPath()
