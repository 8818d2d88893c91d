"""Whole models: swap every quantized ``nn.Linear`` of a model (a Hugging Face transformers model or any
``torch.nn.Module`` whose module names match the checkpoint's tensor names) for a
:class:`~mixgemm.nn.QuantLinear` loaded from a checkpoint folder, reading the folder's own quantization
config. transformers itself is not needed here (:mod:`.hf` builds transformers models for it).

The swap is all or nothing: every layer is read, checked and prepacked, and every other tensor checked
against the checkpoint's headers, before the model changes. A model whose parameters are on the meta device
(built without memory) gets the checkpoint's tensors allocated on ``device``."""

from __future__ import annotations

import copy
import dataclasses
import os
import warnings
from typing import Optional

import torch

from .. import _checks, formats, library, packing
from .. import tensor_parallel as tp_
from ..nn import QuantLinear
from ._args import activation_dtype, folder_argument
from .config import QuantConfig, QuantScheme, read_quant_config
from .convert import PrepackArgs, has_quantized_tensors, read_layer
from .files import CheckpointFiles
from .sharded import build_sharded_quant_linear, prepare_shard, read_layer_shard
from .moe import plan_moe_blocks


@dataclasses.dataclass
class LoadReport:
    """What :func:`replace_quantized_linears` did: module names swapped for QuantLinear (or QuantMoE), keys
    loaded from the checkpoint, keys the checkpoint lacked (left as they were) and, for a model built on the
    meta device, buffers whose values the model's own initialisation recomputed (such as rotary
    ``inv_freq``). ``tensor_parallel``: the style ("column" / "row") of each replaced layer that holds only
    this rank's shard (empty without ``tp``; replaced layers not in it are whole on every rank)."""

    replaced: list
    loaded: list
    missing: list
    recomputed: list = dataclasses.field(default_factory=list)
    tensor_parallel: dict = dataclasses.field(default_factory=dict)


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
               layout: str = "auto", tp: object = None, style: Optional[str] = None) -> QuantLinear:
    """One quantized linear ``name`` (such as ``"model.layers.0.mlp.down_proj"``) of the checkpoint folder
    ``folder``, read the way the folder's quantization config says (GPTQ zeros v1 unless it says
    ``checkpoint_format: "gptq_v2"``), on ``device`` with activations in ``dtype`` (fp16 or bf16, a torch
    dtype or a string such as ``"float16"``), prepacked in ``layout`` (:func:`mixgemm.prepack`'s argument:
    "auto" is the GPU's own). ``tp`` / ``style`` as :class:`~mixgemm.nn.QuantLinear` takes them: only this
    rank's shard is read."""
    fn = "load_layer"
    folder = folder_argument(fn, folder)
    if not isinstance(name, str) or not name.strip("."):
        raise ValueError(f"{fn}: name must name a module, such as 'model.layers.0.mlp.down_proj', got {name!r}")
    dtype = activation_dtype(fn, dtype)
    quant_config = read_quant_config(folder)
    files = CheckpointFiles(folder)
    scheme = quant_config.scheme_for(name)
    if scheme is None:
        raise ValueError(f"{fn}: {quant_config.source} keeps {name!r} dense (ignore / modules_to_not_convert)")
    if not has_quantized_tensors(files, name, scheme.method):
        raise ValueError(f"{fn}: {files.folder} holds no quantized tensors for {name!r}")
    target = _checks.check_load_device(fn, device)
    spec = tp_.shard_spec(fn, tp, style)
    if spec is not None:
        tp_.spec.check_process_group(fn, spec)
        sharded = read_layer_shard(files, name, scheme, dtype, spec).to(target)
        return build_sharded_quant_linear(name, sharded, scheme, config, layout)
    return build_quant_linear(name, read_layer(files, name, scheme, dtype).to(target), scheme, config, layout)


def replace_quantized_linears(
    model: torch.nn.Module,
    folder: str | os.PathLike,
    *,
    device: Optional[str | torch.device] = None,
    dtype: Optional[torch.dtype | str] = None,
    config: library.ConfigArg = "auto",
    load_other_tensors: bool = True,
    layout: str = "auto",
    tp: object = None,
    tp_styles: Optional[dict] = None,
) -> LoadReport:
    """Replaces, in place, each ``nn.Linear`` of ``model`` that the checkpoint folder holds quantized (and
    its config does not keep dense through ``ignore`` / ``modules_to_not_convert``) by a QuantLinear under
    the same name, loaded from the (possibly sharded) safetensors files. A mixture-of-experts block whose
    experts the checkpoint holds quantized (Mixtral, Qwen2-MoE, Qwen3-MoE) becomes one
    :class:`~mixgemm.moe.QuantMoE` under the block's name instead (:mod:`.moe`); its experts are never
    replaced one by one.

    ``device`` / ``dtype`` default to those of each replaced Linear's weight (the activation dtype must be
    fp16 or bf16; ``dtype`` may be a string such as ``"float16"``). With ``load_other_tensors`` every other
    state-dict entry found in the checkpoint (embeddings, norms, dense layers such as ``lm_head``) is copied
    into the model, so a model freshly built from its config becomes the checkpoint's; entries the checkpoint
    lacks are reported with a warning (a tied weight is read once, through the first of its names that the
    checkpoint holds). ``layout`` is :func:`mixgemm.prepack`'s ("auto": each layer in its GPU's own layout).

    All or nothing: every quantized layer is read, checked and prepacked, and every other entry checked
    against the checkpoint's headers, before the model changes; on any error the model is as it was. So the
    quantized layers briefly coexist with the Linears they replace: to load a large model without ever
    holding its fp16 weights, use :func:`mixgemm.checkpoint.load_model`.

    A model whose parameters are on the meta device (built without memory, as ``load_model`` does, or under
    ``with torch.device("meta")``) needs ``device``: the checkpoint's tensors are allocated there, in the
    dtype the model was built with, and a parameter the checkpoint lacks is an error. Meta buffers the
    checkpoint lacks (rotary ``inv_freq``, computed at construction and never saved) are recomputed by a
    transformers model's own ``_init_weights``; buffers that are real (on the CPU) stay where they are.

    Tensor parallel: ``tp`` (a ``(rank, world_size)`` pair, a torch.distributed process group or a
    :class:`~mixgemm.tensor_parallel.TensorParallel`) loads into each replaced layer whose name ends in a key of
    ``tp_styles`` (default: :data:`~mixgemm.tensor_parallel.LLAMA_STYLES`, q/k/v/gate/up column-parallel,
    o/down row-parallel) only this rank's shard, read slice by slice from the files; other layers, embeddings,
    norms and ``lm_head`` are loaded whole (replicated). A transformers model's head counts (config and
    attention modules) are divided by the world size after the swap; counts that do not divide, a shard no
    kernel path runs (named with its rank, shape and rule) and a Linear of the style map that the checkpoint
    keeps dense are errors before the model changes.
    """
    fn = "replace_quantized_linears"
    if not isinstance(model, torch.nn.Module):
        raise ValueError(f"{fn}: model must be a torch.nn.Module, got {type(model).__name__}")
    folder = folder_argument(fn, folder)
    act_dtype = None if dtype is None else activation_dtype(fn, dtype)
    target = None if device is None else _checks.check_load_device(fn, device)
    quant_config: QuantConfig = read_quant_config(folder)
    files = CheckpointFiles(folder)
    ranks, styles = _tensor_parallel_arguments(fn, model, tp, tp_styles)

    # Everything that can fail comes first, with the model untouched, so that an error in the last layer
    # does not leave a half-converted model: the cheap checks (names, shapes from the files' headers), then
    # reading, checking and prepacking each layer, then the dense tensors (those a meta model needs allocated
    # on the device; the others opened only, as safetensors maps a file's tensors without reading them).
    moe = plan_moe_blocks(fn, model, files, quant_config, target, act_dtype)  # MoE blocks: checkpoint/moe.py
    plans = _plan_layers(fn, model, files, quant_config, target, act_dtype, ranks, styles)
    dense = (_plan_dense(fn, model, files, set(plans) | moe.owned_modules, target) if load_other_tensors
             else _DensePlan())
    recomputed = _recompute_meta_buffers(fn, model, files.folder, dense.unset_buffers, target)
    layers = {name: _prepare_layer(fn, plan, files, config, layout) for name, plan in plans.items()}
    moe_blocks = moe.prepare(files, quant_config)
    allocated = [(entry, _read_dense(files, key, entry.tensor, target)) for entry, key in dense.allocations]
    copies = [(tensor, files.get(key)) for tensor, key in dense.copies]

    # The swap: assignments, and copies into tensors whose shapes were checked above.
    for name, layer in list(layers.items()) + list(moe_blocks.items()):
        model.set_submodule(name, layer)
    for entry, value in allocated + recomputed:
        _assign(model, entry, value)
    with torch.no_grad():
        for tensor, value in copies:
            tensor.copy_(value)
    sharded = {name: plan.spec.style for name, plan in plans.items() if plan.spec is not None}
    if sharded:
        tp_.heads.divide_heads(model, ranks.world_size)

    replaced = list(layers) + list(moe_blocks)
    _warn_unused_quantized(files, quant_config, set(replaced) | moe.checkpoint_modules)
    if dense.missing:
        warnings.warn(f"{fn}: {len(dense.missing)} entries of the model's state dict are not in {files.folder} and "
                      f"keep their current values: {dense.missing[:8]}{' ...' if len(dense.missing) > 8 else ''}",
                      stacklevel=2)
    return LoadReport(replaced, dense.loaded + moe.loaded, dense.missing, [entry.names[0] for entry, _ in recomputed],
                      sharded)


@dataclasses.dataclass
class _LayerPlan:
    """A Linear of the model that the checkpoint holds quantized, and where its QuantLinear will live."""

    name: str
    module: torch.nn.Linear
    scheme: QuantScheme
    device: torch.device
    dtype: torch.dtype
    spec: Optional[tp_.ShardSpec] = None  # tensor parallel: this rank's shard of it; None: loaded whole


@dataclasses.dataclass
class _ModelTensor:
    """One parameter or buffer of the model under every name it has (tied weights have several)."""

    names: list
    tensor: torch.Tensor
    is_parameter: bool


@dataclasses.dataclass
class _DensePlan:
    """The model's tensors outside the replaced layers, sorted by what loading does with them."""

    copies: list = dataclasses.field(default_factory=list)  # (materialised tensor, checkpoint key): copied in place
    allocations: list = dataclasses.field(default_factory=list)  # (meta _ModelTensor, key): allocated on device
    unset_buffers: list = dataclasses.field(default_factory=list)  # meta buffers the checkpoint lacks
    loaded: list = dataclasses.field(default_factory=list)  # checkpoint keys read, in state-dict order
    missing: list = dataclasses.field(default_factory=list)  # state-dict keys the checkpoint lacks


def _plan_layers(fn: str, model: torch.nn.Module, files: CheckpointFiles, quant_config: QuantConfig,
                 target: Optional[torch.device], act_dtype: Optional[torch.dtype],
                 ranks: Optional[tp_.TensorParallel] = None, styles: Optional[dict] = None) -> dict:
    plans = {}
    for name, module in model.named_modules():
        if not isinstance(module, torch.nn.Linear):
            continue
        style = None if ranks is None else tp_.style_for(styles, name)
        scheme = quant_config.scheme_for(name, type(module).__name__)
        if scheme is None or not has_quantized_tensors(files, name, scheme.method):
            if style is not None and ranks.world_size > 1:
                # Its neighbours are split by head or channel; a whole dense copy would not match them.
                raise ValueError(f"{fn}: {name} is {style}-parallel in the tensor-parallel style map but the "
                                 "checkpoint holds it dense; mixgemm shards quantized layers only")
            continue  # kept dense by the config, or stored dense (its weight is loaded with the other tensors)
        spec = None if style is None else ranks.shard(style)
        if spec is not None:
            tp_.spec.check_process_group(fn, spec)
        plans[name] = _LayerPlan(name, module, scheme, _layer_device(fn, name, module, target),
                                 _layer_dtype(fn, name, module, act_dtype), spec)
    return plans


def _tensor_parallel_arguments(fn: str, model: torch.nn.Module, tp: object, tp_styles: Optional[dict]):
    """``tp`` as a TensorParallel (or None) and the style map, checked; the model's head counts must split."""
    ranks = tp_.tensor_parallel(fn, tp)
    if ranks is None:
        if tp_styles is not None:
            raise ValueError(f"{fn}: tp_styles given without tp=; pass tp=(rank, world_size) or a process group")
        return None, None
    styles = tp_.styles.check_styles(fn, tp_.LLAMA_STYLES if tp_styles is None else tp_styles)
    tp_.heads.check_heads(fn, model, ranks.world_size)
    return ranks, styles


def _layer_device(fn: str, name: str, module: torch.nn.Linear, target: Optional[torch.device]) -> torch.device:
    if target is not None:
        return target
    if module.weight.is_meta:
        raise ValueError(f"{fn}: {name} is on the meta device (a model built without memory), so it says nothing "
                         "about where to load; pass device= (such as 'cuda')")
    return _checks.check_load_device(fn, module.weight.device)


def _layer_dtype(fn: str, name: str, module: torch.nn.Linear, act_dtype: Optional[torch.dtype]) -> torch.dtype:
    dtype = act_dtype if act_dtype is not None else module.weight.dtype
    if dtype not in (torch.float16, torch.bfloat16):
        raise ValueError(f"{fn}: {name} has dtype {dtype}; mixgemm runs float16 or bfloat16 activations "
                         "(build the model with dtype=torch.float16 or pass dtype=)")
    return dtype


def _prepare_layer(fn: str, plan: _LayerPlan, files: CheckpointFiles, config: library.ConfigArg,
                   layout: str) -> QuantLinear:
    """Layer ``plan.name`` read, checked against the model's Linear and prepacked: the QuantLinear that will
    replace it."""
    name, module = plan.name, plan.module
    if plan.spec is not None:
        return prepare_shard(fn, name, module, files, plan.scheme, plan.dtype, plan.device, plan.spec, config, layout)
    args = read_layer(files, name, plan.scheme, plan.dtype)
    if (args.k, args.n) != (module.in_features, module.out_features):
        raise ValueError(f"{fn}: {name} is a Linear({module.in_features} -> {module.out_features}) in the "
                         f"model but ({args.k} -> {args.n}) in the checkpoint")
    if (module.bias is None) != (args.bias is None):
        raise ValueError(f"{fn}: {name} has {'a' if module.bias is not None else 'no'} bias in the model but "
                         f"{'one' if args.bias is not None else 'none'} in the checkpoint")
    return build_quant_linear(name, args.to(plan.device), plan.scheme, config, layout)


def _model_tensors(model: torch.nn.Module, replaced: set) -> list:
    """The model's parameters and buffers outside the layers being replaced, each once with all its names."""
    by_identity: dict = {}
    for is_parameter, named in ((True, model.named_parameters(remove_duplicate=False)),
                                (False, model.named_buffers(remove_duplicate=False))):
        for key, tensor in named:
            if key.rpartition(".")[0] in replaced:
                continue
            entry = by_identity.setdefault(id(tensor), _ModelTensor([], tensor, is_parameter))
            entry.names.append(key)
    return list(by_identity.values())


def _plan_dense(fn: str, model: torch.nn.Module, files: CheckpointFiles, replaced: set,
                target: Optional[torch.device]) -> _DensePlan:
    """What loading does with each tensor outside the replaced layers; shapes checked against the files'
    headers, and a meta parameter that the checkpoint cannot fill refused, all before anything is read."""
    plan = _DensePlan()
    order = {key: i for i, key in enumerate(model.state_dict(keep_vars=True))}  # the saved (persistent) names
    unfillable, no_device = [], []
    for entry in _model_tensors(model, replaced):
        saved = sorted((key for key in entry.names if key in order), key=order.get)
        source = next((key for key in saved if key in files), None)
        if source is not None:
            _check_dense_shape(fn, source, entry.tensor, files)
            plan.loaded.append(source)
        if not entry.tensor.is_meta:
            if source is not None:
                plan.copies.append((entry.tensor, source))
            else:
                plan.missing.extend(saved)
        elif source is not None:
            (no_device if target is None else plan.allocations).append((entry, source))
        elif entry.is_parameter:
            unfillable.extend(entry.names)
        else:
            plan.unset_buffers.append(entry)
    if unfillable:
        raise ValueError(f"{fn}: {len(unfillable)} parameters of the model are on the meta device but not in "
                         f"{files.folder}, so they would have no values: {unfillable[:8]}"
                         f"{' ...' if len(unfillable) > 8 else ''}; the checkpoint does not match the model")
    if no_device:
        raise ValueError(f"{fn}: the model's {no_device[0][1]} (and {len(no_device) - 1} more) is on the meta "
                         "device; pass device= (such as 'cuda') to allocate the checkpoint's tensors on")
    plan.loaded.sort(key=order.get)
    return plan


def _check_dense_shape(fn: str, key: str, tensor: torch.Tensor, files: CheckpointFiles) -> None:
    stored = files.shape_of(key)
    if tuple(stored) != tuple(tensor.shape):
        raise ValueError(f"{fn}: {key} has shape {tuple(tensor.shape)} in the model but {tuple(stored)} in the "
                         f"checkpoint ({files.path_of(key)})")


def _read_dense(files: CheckpointFiles, key: str, like: torch.Tensor, device: torch.device) -> torch.Tensor:
    """Checkpoint tensor ``key`` allocated once on ``device`` in the dtype of the model's ``like`` (what the
    model was built with), converted in the copy rather than through a second tensor on the device."""
    value = torch.empty(like.shape, dtype=like.dtype, device=device)
    value.copy_(files.get(key))
    return value


def _recompute_meta_buffers(fn: str, model: torch.nn.Module, folder: str, entries: list,
                            target: Optional[torch.device]) -> list:
    """Values for meta buffers the checkpoint lacks: those a model built wholly on the meta device computed
    at construction without keeping a value, such as rotary ``inv_freq`` (non-persistent, never saved).

    transformers fills them after its own meta-device loads by running the model's ``_init_weights`` on
    their module; so does this, on a copy of the module whose parameters stay on meta, so that nothing else
    of the model is touched. The buffers start as NaN, so one that ``_init_weights`` leaves unset is an
    error rather than uninitialised memory."""
    by_module: dict = {}
    for entry in entries:
        by_module.setdefault(entry.names[0].rpartition(".")[0], []).append(entry)
    init_weights = getattr(model, "_init_weights", None)
    values = []
    for module_name, group in by_module.items():
        names = [entry.names[0] for entry in group]
        if target is None:
            raise ValueError(f"{fn}: the model's buffers {names} are on the meta device; pass device= (such as "
                             "'cuda') to compute them on")
        if not callable(init_weights) or not all(entry.tensor.dtype.is_floating_point for entry in group):
            raise ValueError(f"{fn}: the model's buffers {names} are on the meta device and not in {folder}, and "
                             "only a transformers model's own _init_weights can recompute (float) buffers; build "
                             "the model with its parameters alone on meta (mixgemm.checkpoint.build_empty_model "
                             "or load_model), so that buffers keep the values computed at construction")
        probe = _module_probe(model.get_submodule(module_name))
        for entry in group:
            probe._buffers[entry.names[0].rpartition(".")[2]] = torch.full(
                entry.tensor.shape, float("nan"), dtype=entry.tensor.dtype, device=target)
        try:
            with torch.no_grad():
                init_weights(probe)
        except (AttributeError, KeyError, TypeError, ValueError, RuntimeError) as error:
            raise ValueError(f"{fn}: the model's buffers {names} are on the meta device and not in {folder}, and the "
                             f"model's _init_weights failed to recompute them ({type(error).__name__}: {error}); "
                             "build the model with mixgemm.checkpoint.build_empty_model") from error
        for entry in group:
            value = probe._buffers[entry.names[0].rpartition(".")[2]]
            if value is None or value.is_meta or bool(value.isnan().any()):
                raise ValueError(f"{fn}: the model's buffer {entry.names[0]} is on the meta device and not in "
                                 f"{folder}, and the model's _init_weights did not compute it; build the model "
                                 "with mixgemm.checkpoint.build_empty_model (buffers computed at construction)")
            values.append((entry, value))
    return values


def _module_probe(module: torch.nn.Module) -> torch.nn.Module:
    """A shallow copy of ``module`` with its own buffer dict, meta copies of its parameters and no children:
    initialising it writes nothing into the model."""
    probe = copy.copy(module)
    probe._modules = {}
    probe._parameters = {key: None if p is None else torch.nn.Parameter(torch.empty_like(p, device="meta"),
                                                                        requires_grad=False)
                         for key, p in module._parameters.items()}
    probe._buffers = dict(module._buffers)
    return probe


def _assign(model: torch.nn.Module, entry: _ModelTensor, value: torch.Tensor) -> None:
    """``value`` in place of the meta tensor ``entry`` under each of its names, one object for all so that
    tied weights stay tied."""
    if entry.is_parameter:
        value = torch.nn.Parameter(value, requires_grad=entry.tensor.requires_grad)
    for key in entry.names:
        module_name, _, attr = key.rpartition(".")
        module = model.get_submodule(module_name)
        (module._parameters if entry.is_parameter else module._buffers)[attr] = value


def _warn_unused_quantized(files: CheckpointFiles, quant_config: QuantConfig, replaced: set) -> None:
    unused = sorted(quantized_modules(files, quant_config) - replaced)
    if unused:
        warnings.warn(f"replace_quantized_linears: the checkpoint holds quantized weights for {len(unused)} modules "
                      f"that are not nn.Linear modules of the model (or that the config keeps dense), left as they "
                      f"were: {unused[:8]}", stacklevel=3)


def quantized_modules(files: CheckpointFiles, quant_config: QuantConfig) -> set:
    """The module names whose quantized weights the checkpoint holds (by their qweight / weight_packed)."""
    marker = ".weight_packed" if quant_config.method == "compressed-tensors" else ".qweight"
    return {key[: -len(marker)] for key in files.keys() if key.endswith(marker)}
