"""mixgemm: mixed-input (int4/int8 weights x fp16/bf16 activations) GEMM kernels for LLM inference.

Public API: ``prepack`` (AWQ/GPTQ -> a weight layout) and ``gemm`` (the mixed-input GEMM on the path and config
``config="auto"`` picks, or the one you name: ``compiled_configs``, the config types ``Sm80Config``,
``DecodeConfig``, ``Sm90Config``, ``DequantConfig``); ``awq_dequantize``; ``dequantize_weight`` (a prepacked
weight back to dense); ``baseline.awq_gemm`` (the vLLM-style kernel we compare against); ``formats`` (AWQ/GPTQ
pack/unpack and quantizers in PyTorch, the references); ``nn.QuantLinear`` and ``checkpoint`` (layers and whole
models from checkpoint folders); ``library`` (the torch.library custom ops); ``moe`` (mixture-of-experts: stacked
experts, routing, the grouped GEMM and the fused layer). The compiled core is ``mixgemm._C``;
docs/architecture.md maps the rest.
"""

from . import baseline, formats
from .kernel_key import KernelKey
from .ops import awq_dequantize, dequantize_weight, gemm
from .packing import PackedWeight, prepack
from .paths import DecodeConfig, DequantConfig, GemmConfig, Sm80Config, Sm90Config, compiled_configs
from . import library, nn  # library registers the torch.ops.mixgemm custom ops
from . import moe  # after library: registers mixgemm::fused_moe

__all__ = [
    "DecodeConfig", "DequantConfig", "GemmConfig", "KernelKey", "PackedWeight", "Sm80Config", "Sm90Config",
    "awq_dequantize", "baseline", "compiled_configs", "dequantize_weight", "formats", "gemm", "library", "nn",
    "moe", "prepack",
]
__version__ = "0.1.0"
