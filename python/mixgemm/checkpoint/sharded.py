"""One rank's shard of a checkpoint layer (tensor parallel): the layer's tensors opened lazily in the
safetensors files, the shard's slices read (mixgemm.tensor_parallel cuts them), and the same load-time checks
as :func:`.convert.read_layer`, so the error names the layer (and, for shapes, the rank and the rule).

compressed-tensors layers are read as the GPTQ v2 layers they are, transposed (tensor_parallel/sources.py):
only the shard's rows or columns of ``weight_packed`` are read, never the whole layer.
"""

from __future__ import annotations

import torch

from ..tensor_parallel import ShardedCheckpoint, ShardSpec, shard_checkpoint
from ..tensor_parallel.sources import Transposed
from . import compressed_tensors
from ._args import activation_dtype
from .config import QuantScheme
from .convert import _check_finite, _check_present, _check_symmetric_zeros, _convert_scales
from .files import CheckpointFiles


def read_layer_shard(files: CheckpointFiles, name: str, scheme: QuantScheme, dtype: torch.dtype,
                     spec: ShardSpec) -> ShardedCheckpoint:
    """Rank ``spec.rank``'s shard of layer ``name``, stored as ``scheme`` says, with scales (and bias) in
    ``dtype``. ``geometry.k`` / ``geometry.n`` are the full layer's K and N."""
    dtype = activation_dtype(name, dtype)
    if scheme.method == "compressed-tensors":
        sources, fmt, scale_key = _compressed_tensors_sources(files, name, scheme), "gptq_v2", f"{name}.weight_scale"
    else:
        fmt = "awq" if scheme.method == "awq" else scheme.zero_format
        sources, scale_key = _awq_gptq_sources(files, name, scheme), f"{name}.scales"
    g_idx = sources["g_idx"]
    if g_idx is not None and (g_idx.dim() != 1 or g_idx.dtype.is_floating_point):
        raise ValueError(f"{name}.g_idx must be a 1-D integer tensor, got {g_idx.dtype} {tuple(g_idx.shape)}")
    sharded = shard_checkpoint(name, spec, fmt, scheme.bits, sources["qweight"], sources["scales"], sources["qzeros"],
                               g_idx, sources["bias"], scheme.group_size)
    for key, value in (("qweight", sharded.qweight), ("qzeros", sharded.qzeros)):
        if value is not None and value.dtype != torch.int32:
            raise ValueError(f"{name}.{key} must be an int32 tensor, got {value.dtype}")
    if not sharded.scales.dtype.is_floating_point:
        raise ValueError(f"{name}: scales must be a float tensor, got {sharded.scales.dtype}")
    _check_finite(scale_key, files.path_of(scale_key), sharded.scales)
    if scheme.method == "gptq" and scheme.symmetric and sharded.qzeros is not None and sharded.format == fmt:
        _check_symmetric_zeros(name, sharded)
    sharded.scales = _convert_scales(scale_key, sharded.scales, dtype)
    if sharded.bias is not None:
        sharded.bias = sharded.bias.to(dtype)
    return sharded


def has_bias(files: CheckpointFiles, name: str) -> bool:
    """Whether the full layer has a bias (a row-parallel shard holds it on rank 0 only)."""
    return f"{name}.bias" in files


def _awq_gptq_sources(files: CheckpointFiles, name: str, scheme: QuantScheme) -> dict:
    lazy = {suffix: files.lazy_optional(f"{name}.{suffix}") for suffix in ("qweight", "qzeros", "scales", "bias")}
    _check_present(name, scheme, lazy)
    g_idx = files.get_optional(f"{name}.g_idx") if scheme.method == "gptq" else None  # K integers: read whole
    return {**lazy, "g_idx": g_idx}


def _compressed_tensors_sources(files: CheckpointFiles, name: str, scheme: QuantScheme) -> dict:
    """A pack-quantized layer's tensors as GPTQ v2 sources: its packed tensors transposed, after the checks
    of compressed_tensors.to_gptq on their shapes (from the files' headers)."""
    packed, scale = files.lazy_optional(f"{name}.weight_packed"), files.lazy_optional(f"{name}.weight_scale")
    shape = files.get_optional(f"{name}.weight_shape")
    for key, value in (("weight_packed", packed), ("weight_scale", scale), ("weight_shape", shape)):
        if value is None:
            raise ValueError(f"{name}: the checkpoint has no {name}.{key} (a pack-quantized layer needs "
                             "weight_packed, weight_scale and weight_shape)")
    if shape.numel() != 2 or shape.dtype.is_floating_point:
        raise ValueError(f"{name}.weight_shape must hold the two integers (N, K), got {shape.tolist()}")
    N, K = (int(v) for v in shape.tolist())
    per_word = 32 // scheme.bits
    compressed_tensors._check_packable(name, N, K, per_word)
    if tuple(packed.shape) != (N, K // per_word):
        raise ValueError(f"{name}.weight_packed must have shape [N, K/{per_word}] = {(N, K // per_word)} for "
                         f"weight_shape (N, K) = {(N, K)}, got {tuple(packed.shape)}")
    zero_point = None
    if not scheme.symmetric:
        zero_point = files.lazy_optional(f"{name}.weight_zero_point")
        if zero_point is None:
            raise ValueError(f"{name}: the config says asymmetric but the checkpoint has no "
                             f"{name}.weight_zero_point")
        if tuple(zero_point.shape) != (N // per_word, scale.shape[1]):
            raise ValueError(f"{name}.weight_zero_point must have shape [N/{per_word}, K/G] = "
                             f"{(N // per_word, scale.shape[1])}, got {tuple(zero_point.shape)}")
    g_idx = compressed_tensors._act_order_index(name, files.get_optional(f"{name}.weight_g_idx"), K)
    return {"qweight": Transposed(packed), "scales": Transposed(scale),
            "qzeros": None if zero_point is None else Transposed(zero_point), "g_idx": g_idx,
            "bias": files.lazy_optional(f"{name}.bias")}


def build_sharded_quant_linear(name: str, sharded: ShardedCheckpoint, scheme: QuantScheme,
                               config="auto", layout: str = "auto"):
    """prepack of one rank's shard + the QuantLinear that holds it, with errors naming the layer and rank
    (model.build_quant_linear for a shard)."""
    import warnings

    from .. import formats
    from ..nn import QuantLinear

    extra = {} if layout == "auto" else {"layout": layout}
    try:
        with warnings.catch_warnings():
            if scheme.method == "gptq" and scheme.symmetric:
                warnings.simplefilter("ignore", formats.ZeroPointFormatWarning)  # read_layer_shard checked them
            return QuantLinear._from_shard(sharded, config, extra)
    except ValueError as error:
        raise ValueError(f"{name} ({sharded.geometry.spec.describe()}): {error}") from error


def prepare_shard(fn: str, name: str, module: torch.nn.Linear, files: CheckpointFiles, scheme: QuantScheme,
                  dtype: torch.dtype, device: torch.device, spec: ShardSpec, config="auto", layout: str = "auto"):
    """The QuantLinear that replaces ``module`` on this rank: its shard read, checked against the model's
    Linear (the full layer's shape and bias) and prepacked on ``device``."""
    sharded = read_layer_shard(files, name, scheme, dtype, spec)
    g = sharded.geometry
    if (g.k, g.n) != (module.in_features, module.out_features):
        raise ValueError(f"{fn}: {name} is a Linear({module.in_features} -> {module.out_features}) in the "
                         f"model but ({g.k} -> {g.n}) in the checkpoint")
    if (module.bias is None) == has_bias(files, name):
        raise ValueError(f"{fn}: {name} has {'a' if module.bias is not None else 'no'} bias in the model but "
                         f"{'one' if has_bias(files, name) else 'none'} in the checkpoint")
    return build_sharded_quant_linear(name, sharded.to(device), scheme, config, layout)
