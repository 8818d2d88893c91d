"""One quantized layer of a checkpoint -> the arguments of :func:`mixgemm.prepack`, on the CPU.

Everything here is pure PyTorch and needs no GPU: reading a layer's tensors, checking that mixgemm can run
its shape (each failure a ValueError naming the layer and the rule), and converting compressed-tensors
layers into GPTQ terms. Only :func:`mixgemm.prepack` (called by :mod:`.model`) needs CUDA.
"""

from __future__ import annotations

import warnings

import torch

from .. import formats
from ..prepack_args import PrepackArgs
from . import compressed_tensors
from ._args import activation_dtype
from .config import QuantScheme
from .files import CheckpointFiles

_SUFFIXES = {
    "awq": ("qweight", "qzeros", "scales", "bias"),
    "gptq": ("qweight", "qzeros", "scales", "g_idx", "bias"),
    "compressed-tensors": ("weight_packed", "weight_scale", "weight_zero_point", "weight_g_idx", "weight_shape",
                           "bias"),
}


def _check_present(name: str, scheme: QuantScheme, tensors: dict) -> None:
    """An AWQ or GPTQ layer's tensors by suffix (None where the checkpoint lacks one) hold what it needs:
    qweight and scales, and the zero points of an asymmetric AWQ layer."""
    missing = [s for s in ("qweight", "scales") if tensors[s] is None]
    if scheme.method == "awq" and not scheme.symmetric and tensors["qzeros"] is None:
        missing.append("qzeros")
    if missing:
        raise ValueError(f"{name}: the checkpoint has no {', '.join(f'{name}.{m}' for m in missing)} "
                         f"(a {scheme.method} layer needs qweight, qzeros and scales)")


def has_quantized_tensors(files: CheckpointFiles, name: str, method: str) -> bool:
    """Whether the checkpoint holds module ``name`` in quantized form."""
    return f"{name}.{'weight_packed' if method == 'compressed-tensors' else 'qweight'}" in files


def read_layer(files: CheckpointFiles, name: str, scheme: QuantScheme, dtype: torch.dtype) -> PrepackArgs:
    """Layer ``name`` of the checkpoint, stored as ``scheme`` says, as prepack arguments with scales in
    ``dtype`` (fp16 or bf16: a torch dtype or a string such as ``"float16"`` or ``"bf16"``). GPTQ zeros keep
    the config's reading (v1 unless ``gptq_v2``); a symmetric GPTQ layer whose constant zeros contradict it
    warns (:class:`~mixgemm.formats.ZeroPointFormatWarning`). Non-finite scales are refused, naming the
    tensor and its file."""
    dtype = activation_dtype(name, dtype)
    t = {suffix: files.get_optional(f"{name}.{suffix}") for suffix in _SUFFIXES[scheme.method]}
    if scheme.method == "compressed-tensors":
        qweight, scales, qzeros, g_idx = compressed_tensors.to_gptq(
            name, t, scheme.bits, scheme.symmetric, scheme.group_size)
        args = PrepackArgs(qweight, scales, qzeros, g_idx, t["bias"], "gptq_v2", scheme.bits)
    else:
        _check_present(name, scheme, t)
        fmt = "awq" if scheme.method == "awq" else scheme.zero_format
        args = PrepackArgs(t["qweight"], t["scales"], t["qzeros"], t.get("g_idx"), t["bias"], fmt, scheme.bits)
    _check_layout(name, args, scheme)
    _check_runnable(name, args, scheme)
    scale_suffix = "weight_scale" if scheme.method == "compressed-tensors" else "scales"
    scale_key = f"{name}.{scale_suffix}"
    _check_finite(scale_key, files.path_of(scale_key), t[scale_suffix])
    if scheme.method == "gptq" and args.qzeros is not None and scheme.symmetric:
        _check_symmetric_zeros(name, args)
    args.scales = _convert_scales(scale_key, args.scales, dtype)
    if args.bias is not None:
        args.bias = args.bias.to(dtype)
    return args


def _check_layout(name: str, a: PrepackArgs, scheme: QuantScheme) -> None:
    """Tensor dtypes and shapes agree with each other, so a wrong file fails here, naming the layer."""
    per_word = 32 // a.bits
    for key in ("qweight", "qzeros"):
        value = getattr(a, key)
        if value is not None and (value.dtype != torch.int32 or value.dim() != 2):
            raise ValueError(f"{name}.{key} must be a 2-D int32 tensor, got {value.dtype} {tuple(value.shape)}")
    if not a.scales.dtype.is_floating_point or a.scales.dim() != 2:
        raise ValueError(f"{name}.scales must be a 2-D float tensor, got {a.scales.dtype} {tuple(a.scales.shape)}")
    groups, N = a.scales.shape
    if a.format == "awq":
        K = a.qweight.shape[0]
        expected_qweight = (K, N // per_word)
    else:
        K = a.qweight.shape[0] * per_word
        expected_qweight = (K // per_word, N)
    if tuple(a.qweight.shape) != expected_qweight or N % per_word:
        layout = "[K, N/8]" if a.format == "awq" else f"[K/{per_word}, N]"
        raise ValueError(f"{name}.qweight must have shape {layout} with N = scales.shape[1] = {N}, got "
                         f"{tuple(a.qweight.shape)}")
    if a.qzeros is not None and tuple(a.qzeros.shape) != (groups, N // per_word):
        raise ValueError(f"{name}.qzeros must have shape [K/G, N/{per_word}] = {(groups, N // per_word)}, got "
                         f"{tuple(a.qzeros.shape)}")
    if a.bias is not None and tuple(a.bias.shape) != (N,):
        raise ValueError(f"{name}.bias must have shape ({N},), got {tuple(a.bias.shape)}")
    if a.g_idx is not None and (a.g_idx.dim() != 1 or a.g_idx.shape[0] != K or a.g_idx.dtype.is_floating_point):
        raise ValueError(f"{name}.g_idx must be an integer tensor of shape ({K},), got {a.g_idx.dtype} "
                         f"{tuple(a.g_idx.shape)}")
    expected_groups = 1 if scheme.group_size is None else K // scheme.group_size
    if scheme.group_size is not None and K % scheme.group_size:
        raise ValueError(f"{name}: group_size {scheme.group_size} from the config does not divide K = {K}")
    if groups != expected_groups:
        raise ValueError(f"{name}.scales has {groups} rows, but K = {K} with the config's group_size "
                         f"{scheme.group_size or 'per channel'} needs {expected_groups}")


def _check_runnable(name: str, a: PrepackArgs, scheme: QuantScheme) -> None:
    """The shapes prepack takes (a layout holds the weight and some kernel path runs it: mixgemm.shape_rules, the
    table the kernels check), checked here so that the error names the layer, not a prepack argument. The sm80
    layout holds every shape the sm90 one does, so a layer it refuses no layout takes."""
    from ..packing import check_weight_shape

    K, N = a.k, a.n
    G = K if scheme.group_size is None else scheme.group_size
    try:
        check_weight_shape(name, "sm80", K, N, G)
    except ValueError as error:
        raise ValueError(f"{error}; keep this layer dense (the config's ignore / modules_to_not_convert)") from None
    if a.g_idx is not None:
        g = a.g_idx.long()
        groups = K // G
        if int(g.min()) < 0 or int(g.max()) >= groups or not bool((torch.bincount(g, minlength=groups) == G).all()):
            raise ValueError(f"{name}.g_idx must give each of the {groups} groups exactly group_size = {G} rows "
                             "of K (act-order permutes rows; it does not resize groups)")


def _check_finite(key: str, path: str, tensor: torch.Tensor) -> None:
    """Scales must be finite: one NaN or inf makes every output that reads its group NaN, silently. Checked
    once here, at load time, so the error names the tensor and its file. (Zero points are integer codes in
    every format read here, so only the scales can hold a NaN.)"""
    bad = ~torch.isfinite(tensor)
    if bool(bad.any()):
        where = [int(i) for i in bad.nonzero()[0]]
        raise ValueError(f"{key} in {path} holds {int(bad.sum())} NaN or inf values among {tensor.numel()} (first at "
                         f"{where}: {tensor[tuple(where)].item()}); scales must be finite, since a non-finite scale "
                         "makes the layer's outputs NaN. The checkpoint is damaged: download or export it again")


def _convert_scales(key: str, scales: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """``scales`` in the activation dtype; a finite scale that the conversion turns into inf (fp32 or bf16
    scales beyond fp16's 65504) is refused, naming the tensor and the dtype that holds it."""
    converted = scales.to(dtype)
    if scales.dtype != dtype and not bool(torch.isfinite(converted).all()):
        largest = scales.abs().max().item()
        raise ValueError(f"{key}: scales up to {largest:g} overflow {dtype} (inf after conversion); load this "
                         "checkpoint with dtype=torch.bfloat16")
    return converted


def _check_symmetric_zeros(name: str, a: PrepackArgs) -> None:
    unpack = formats.unpack_gptq_zeros if a.bits == 4 else formats.unpack_gptq_zeros_int8
    stored = unpack(a.qzeros, v1=False)
    message = formats.symmetric_zeros_mismatch(stored, a.bits, v1=a.format == "gptq")
    if message is not None:
        warnings.warn(f"{name}: the config says sym with checkpoint_format "
                      f"{a.format!r}, but {message}", formats.ZeroPointFormatWarning, stacklevel=3)
