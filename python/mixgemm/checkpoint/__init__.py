"""Loading quantized checkpoints as users have them: AWQ, GPTQ (v1 zeros by default, ``gptq_v2`` when the
config says so) and compressed-tensors pack-quantized folders, read with their own quantization config and
(sharded) safetensors files; one layer (:func:`load_layer`), the quantized Linears of a model you built
(:func:`replace_quantized_linears`, all or nothing) or a whole transformers model built without its fp16
weights (:func:`load_model`).

Everything but the final prepack is pure PyTorch on the CPU: :func:`read_quant_config` (config.py),
:class:`CheckpointFiles` (files.py), :func:`read_layer` (convert.py), the compressed-tensors layout
(compressed_tensors.py) and the meta-device model (:func:`build_empty_model`, hf.py). writer.py writes such
folders, for tests and examples; memory.py measures what loading costs.
"""

from .config import QuantConfig, QuantScheme, parse_quant_config, read_quant_config
from .convert import PrepackArgs, read_layer
from .files import CheckpointFiles, save_sharded
from .hf import build_empty_model, load_model, parameters_on_meta
from .memory import CheckpointBytes, PeakMemory, checkpoint_tensor_bytes, cuda_peak_memory
from .model import LoadReport, load_layer, replace_quantized_linears

__all__ = [
    "CheckpointBytes", "CheckpointFiles", "LoadReport", "PeakMemory", "PrepackArgs", "QuantConfig", "QuantScheme",
    "build_empty_model", "checkpoint_tensor_bytes", "cuda_peak_memory", "load_layer", "load_model",
    "parameters_on_meta", "parse_quant_config", "read_layer", "read_quant_config", "replace_quantized_linears",
    "save_sharded",
]
