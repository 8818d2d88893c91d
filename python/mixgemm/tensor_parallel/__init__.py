"""Tensor parallelism for quantized layers: each rank loads only its shard of a checkpoint's packed tensors.

* spec.py: :class:`ShardSpec` (rank, world size, style, process group) and :class:`TensorParallel` (the ranks);
* geometry.py: a shard's rows, columns, group size and padding, checked against the kernels' shape rules;
* sources.py: tensors read slice by slice (safetensors), compressed-tensors seen as GPTQ;
* slicing.py, padding.py, act_order.py: cutting AWQ / GPTQ packed tensors, zero padding, act-order rows;
* layer_shard.py: one layer's shard from its full checkpoint tensors (:func:`shard_checkpoint`);
* reduce.py: narrowing padded outputs, the row-parallel all-reduce;
* styles.py, heads.py: LLaMA-style style map, attention heads per rank in transformers models;
* real_models.py: which real models load at TP 2/4/8 (the README's table).

:class:`mixgemm.nn.QuantLinear` takes ``tp=`` / ``style=``; :func:`mixgemm.checkpoint.load_model` and
``replace_quantized_linears`` take ``tp=`` (and ``tp_styles=``).
"""

from . import heads, reduce, sources, spec, styles
from .geometry import ShardGeometry, ShardShapeError, plan_shard
from .layer_shard import LayerShard, ShardedCheckpoint, shard_checkpoint
from .spec import COLUMN, ROW, STYLES, ShardSpec, TensorParallel, shard_spec, tensor_parallel
from .styles import LLAMA_STYLES, style_for

__all__ = [
    "COLUMN", "LLAMA_STYLES", "LayerShard", "ROW", "STYLES", "ShardGeometry", "ShardShapeError", "ShardSpec",
    "ShardedCheckpoint", "TensorParallel", "plan_shard", "shard_checkpoint", "shard_spec", "style_for",
    "tensor_parallel", "heads", "reduce", "sources", "spec", "styles",
]
