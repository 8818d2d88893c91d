"""The kernel key: what a compiled kernel takes besides its tile, carried end to end.

A key names the activation type, the weight width, the weight layout, how codes become values (``"scale"``:
W = q * s, for symmetric weights stored as signed codes; ``"scale_offset"``: W = q * s + offset, the offset
holding the folded zero point) and the activation's own scale operand (``"none"`` for fp16/bf16 activations;
the place an int8/fp8-activation path's per-token scales will go). The generator lists kernels by key
(cpp/generator/kernel_sets.py), the C++ registries look them up by key (cpp/mixgemm/core/kernel_key.h),
:attr:`mixgemm.PackedWeight.key` gives a weight's, and the tuning cache files its winners under it.
"""

from __future__ import annotations

import dataclasses

import torch

ACT_TYPES = {torch.float16: "fp16", torch.bfloat16: "bf16"}
DTYPE_OF_ACT = {name: dtype for dtype, name in ACT_TYPES.items()}
WEIGHT_BITS = (4, 8)
LAYOUTS = ("sm80", "sm90")
QUANT_MODES = ("scale", "scale_offset")
ACT_SCALES = ("none",)


@dataclasses.dataclass(frozen=True)
class KernelKey:
    act: str = "fp16"
    weight_bits: int = 4
    layout: str = "sm80"
    quant: str = "scale_offset"
    act_scale: str = "none"

    def __post_init__(self) -> None:
        for field, allowed in (("act", tuple(DTYPE_OF_ACT)), ("weight_bits", WEIGHT_BITS), ("layout", LAYOUTS),
                               ("quant", QUANT_MODES), ("act_scale", ACT_SCALES)):
            value = getattr(self, field)
            if value not in allowed or type(value) is not type(allowed[0]):  # not 4.0 for 4, nor True for 1
                raise ValueError(f"KernelKey: {field} must be one of {allowed}, got {value!r}")

    @classmethod
    def of(cls, dtype: torch.dtype, bits: int = 4, layout: str = "sm80", quant: str = "scale_offset") -> "KernelKey":
        """The key of activations of ``dtype`` (float16 or bfloat16) and ``bits``-bit weights in ``layout``."""
        if dtype not in ACT_TYPES:
            raise ValueError(f"KernelKey: dtype must be float16 or bfloat16, got {dtype}")
        return cls(ACT_TYPES[dtype], bits, layout, quant)

    @property
    def dtype(self) -> torch.dtype:
        return DTYPE_OF_ACT[self.act]

    def with_quant(self, quant: str) -> "KernelKey":
        return dataclasses.replace(self, quant=quant)

    def kernel_keys(self) -> tuple["KernelKey", ...]:
        """The compiled keys that can run a weight of this key, best first: a scale-only weight of signed codes
        has zero offsets, so a scale+offset kernel computes it exactly too (with one more fma term)."""
        return (self, self.with_quant("scale_offset")) if self.quant == "scale" else (self,)

    def as_tuple(self) -> tuple[str, int, str, str, str]:
        """The key as the extension takes it (cpp/bindings/paths.h)."""
        return (self.act, self.weight_bits, self.layout, self.quant, self.act_scale)

    @property
    def name(self) -> str:
        """``"fp16-int4-sm80-scale_offset"``: how the tuning cache and messages name it."""
        name = f"{self.act}-int{self.weight_bits}-{self.layout}-{self.quant}"
        return name if self.act_scale == "none" else f"{name}-{self.act_scale}"
