"""mixgemm: mixed-input (int4/int8 weights x fp16/bf16 activations) GEMM kernels for LLM inference.

Public API: ``prepack`` (AWQ/GPTQ -> our kernel layout) and ``gemm`` (the mixed-input GEMM, with
``GemmConfig`` / ``compiled_configs`` to choose tiles and split-K); ``awq_dequantize``;
``dequantize_weight`` (a prepacked weight back to dense);
``baseline.awq_gemm`` (the vLLM-style kernel we compare against); ``formats`` (AWQ/GPTQ pack/unpack and
quantizers in PyTorch, the references). The compiled core is ``mixgemm._C``.
"""

from . import baseline, formats
from .config import GemmConfig, compiled_configs
from .ops import awq_dequantize, dequantize_weight, gemm
from .packing import PackedWeight, prepack
from . import library, nn  # library registers the torch.ops.mixgemm custom ops

__all__ = [
    "GemmConfig", "PackedWeight", "awq_dequantize", "baseline", "compiled_configs", "dequantize_weight", "formats",
    "gemm", "prepack",
    "library", "nn",
]
__version__ = "0.1.0"
