"""Loading quantized checkpoints as users have them: AWQ, GPTQ (v1 zeros by default, ``gptq_v2`` when the
config says so) and compressed-tensors pack-quantized folders, read with their own quantization config and
(sharded) safetensors files; one layer (:func:`load_layer`) or a whole model
(:func:`replace_quantized_linears`).

Everything but the final prepack is pure PyTorch on the CPU: :func:`read_quant_config` (config.py),
:class:`CheckpointFiles` (files.py), :func:`read_layer` (convert.py) and the compressed-tensors layout
(compressed_tensors.py). writer.py writes such folders, for tests and examples.
"""

from .config import QuantConfig, QuantScheme, parse_quant_config, read_quant_config
from .convert import PrepackArgs, read_layer
from .files import CheckpointFiles, save_sharded
from .model import LoadReport, load_layer, replace_quantized_linears

__all__ = [
    "CheckpointFiles", "LoadReport", "PrepackArgs", "QuantConfig", "QuantScheme", "load_layer", "parse_quant_config",
    "read_layer", "read_quant_config", "replace_quantized_linears", "save_sharded",
]
