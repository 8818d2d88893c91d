"""Whole models: swap every quantized ``nn.Linear`` of a model (a Hugging Face transformers model or any
``torch.nn.Module`` whose module names match the checkpoint's tensor names) for a
:class:`~mixgemm.nn.QuantLinear` loaded from a checkpoint folder, reading the folder's own quantization
config. transformers itself is not needed here."""

from __future__ import annotations

import dataclasses
import os
import warnings
from typing import Optional

import torch

from .. import _checks, formats, library, packing
from ..nn import QuantLinear
from .config import QuantConfig, QuantScheme, read_quant_config
from .convert import PrepackArgs, has_quantized_tensors, read_layer
from .files import CheckpointFiles


@dataclasses.dataclass
class LoadReport:
    """What :func:`replace_quantized_linears` did: module names swapped for QuantLinear, state-dict keys
    loaded from the checkpoint, and keys the checkpoint lacked (left as they were)."""

    replaced: list
    loaded: list
    missing: list


def build_quant_linear(name: str, args: PrepackArgs, scheme: QuantScheme,
                       config: library.ConfigArg = "auto", layout: str = "auto") -> QuantLinear:
    """prepack (on the tensors' device, a GPU; ``layout`` as prepack takes it) + QuantLinear, with errors
    naming layer ``name``."""
    extra = {} if args.g_idx is None else {"g_idx": args.g_idx}
    if layout != "auto":
        extra["layout"] = layout
    try:
        with warnings.catch_warnings():
            if scheme.method == "gptq" and scheme.symmetric:
                # read_layer has already compared the zeros with the config, naming the layer.
                warnings.simplefilter("ignore", formats.ZeroPointFormatWarning)
            packed = packing.prepack(args.qweight, args.scales, args.qzeros, format=args.format, bits=args.bits,
                                     **extra)
        return QuantLinear(packed, args.bias, config=config)
    except ValueError as error:
        raise ValueError(f"{name}: {error}") from error


def load_layer(folder: str | os.PathLike, name: str, *, device: str | torch.device = "cuda",
               dtype: torch.dtype = torch.float16, config: library.ConfigArg = "auto",
               layout: str = "auto") -> QuantLinear:
    """One quantized linear ``name`` (such as ``"model.layers.0.mlp.down_proj"``) of the checkpoint folder
    ``folder``, read the way the folder's quantization config says (GPTQ zeros v1 unless it says
    ``checkpoint_format: "gptq_v2"``), on ``device`` with activations in ``dtype``, prepacked in ``layout``
    (:func:`mixgemm.prepack`'s argument: "auto" is the GPU's own)."""
    fn = "load_layer"
    quant_config = read_quant_config(folder)
    files = CheckpointFiles(folder)
    scheme = quant_config.scheme_for(name)
    if scheme is None:
        raise ValueError(f"{fn}: {quant_config.source} keeps {name!r} dense (ignore / modules_to_not_convert)")
    if not has_quantized_tensors(files, name, scheme.method):
        raise ValueError(f"{fn}: {files.folder} holds no quantized tensors for {name!r}")
    target = _checks.check_load_device(fn, device)
    return build_quant_linear(name, read_layer(files, name, scheme, dtype).to(target), scheme, config, layout)


def replace_quantized_linears(
    model: torch.nn.Module,
    folder: str | os.PathLike,
    *,
    device: Optional[str | torch.device] = None,
    dtype: Optional[torch.dtype] = None,
    config: library.ConfigArg = "auto",
    load_other_tensors: bool = True,
    layout: str = "auto",
) -> LoadReport:
    """Replaces, in place, each ``nn.Linear`` of ``model`` that the checkpoint folder holds quantized (and
    its config does not keep dense through ``ignore`` / ``modules_to_not_convert``) by a QuantLinear under
    the same name, loaded from the (possibly sharded) safetensors files.

    ``device`` / ``dtype`` default to those of each replaced Linear's weight (the activation dtype must be
    fp16 or bf16). With ``load_other_tensors`` every other state-dict entry found in the checkpoint
    (embeddings, norms, dense layers such as ``lm_head``) is copied into the model, so a model freshly built
    from its config becomes the checkpoint's; entries the checkpoint lacks are reported with a warning
    (tied weights that were loaded through their twin excepted). ``layout`` is :func:`mixgemm.prepack`'s
    ("auto": each layer in its GPU's own layout).
    """
    fn = "replace_quantized_linears"
    if not isinstance(model, torch.nn.Module):
        raise ValueError(f"{fn}: model must be a torch.nn.Module, got {type(model).__name__}")
    quant_config: QuantConfig = read_quant_config(folder)
    files = CheckpointFiles(folder)
    replaced = []
    for name, module in list(model.named_modules()):
        if not isinstance(module, torch.nn.Linear):
            continue
        scheme = quant_config.scheme_for(name, type(module).__name__)
        if scheme is None or not has_quantized_tensors(files, name, scheme.method):
            continue  # kept dense by the config, or stored dense (its weight is loaded below)
        target = _checks.check_load_device(fn, device if device is not None else module.weight.device)
        act_dtype = dtype if dtype is not None else module.weight.dtype
        if act_dtype not in (torch.float16, torch.bfloat16):
            raise ValueError(f"{fn}: {name} has dtype {act_dtype}; mixgemm runs float16 or bfloat16 activations "
                             "(build the model with torch_dtype=torch.float16 or pass dtype=)")
        args = read_layer(files, name, scheme, act_dtype)
        if (args.k, args.n) != (module.in_features, module.out_features):
            raise ValueError(f"{fn}: {name} is a Linear({module.in_features} -> {module.out_features}) in the "
                             f"model but ({args.k} -> {args.n}) in the checkpoint")
        if (module.bias is None) != (args.bias is None):
            raise ValueError(f"{fn}: {name} has {'a' if module.bias is not None else 'no'} bias in the model but "
                             f"{'one' if args.bias is not None else 'none'} in the checkpoint")
        model.set_submodule(name, build_quant_linear(name, args.to(target), scheme, config, layout))
        replaced.append(name)
    _warn_unused_quantized(files, quant_config, set(replaced))
    loaded, missing = _load_other_tensors(model, files, set(replaced)) if load_other_tensors else ([], [])
    if missing:
        warnings.warn(f"{fn}: {len(missing)} entries of the model's state dict are not in {files.folder} and keep "
                      f"their current values: {missing[:8]}{' ...' if len(missing) > 8 else ''}", stacklevel=2)
    return LoadReport(replaced, loaded, missing)


def _warn_unused_quantized(files: CheckpointFiles, quant_config: QuantConfig, replaced: set) -> None:
    marker = ".weight_packed" if quant_config.method == "compressed-tensors" else ".qweight"
    unused = sorted(k[: -len(marker)] for k in files.keys() if k.endswith(marker) and k[: -len(marker)] not in replaced)
    if unused:
        warnings.warn(f"replace_quantized_linears: the checkpoint holds quantized weights for {len(unused)} modules "
                      f"that are not nn.Linear modules of the model (or that the config keeps dense), left as they "
                      f"were: {unused[:8]}", stacklevel=3)


def _load_other_tensors(model: torch.nn.Module, files: CheckpointFiles, replaced: set):
    loaded, missing, filled = [], [], set()
    state = model.state_dict(keep_vars=True)
    pending = []
    for key, tensor in state.items():
        if key.rpartition(".")[0] in replaced:
            continue
        if key not in files:
            pending.append((key, tensor))
            continue
        value = files.get(key)
        if tuple(value.shape) != tuple(tensor.shape):
            raise ValueError(f"replace_quantized_linears: {key} has shape {tuple(tensor.shape)} in the model but "
                             f"{tuple(value.shape)} in the checkpoint")
        with torch.no_grad():
            tensor.copy_(value)
        loaded.append(key)
        filled.add(tensor.data_ptr())
    # A tied weight (lm_head sharing the embedding) is saved once; it counts as loaded through its twin.
    missing = [key for key, tensor in pending if tensor.data_ptr() not in filled]
    return loaded, missing
