"""Whole Hugging Face transformers models from a quantized checkpoint folder, without ever holding their
fp16 weights: the model is built with its parameters on the meta device (no memory), every quantized Linear
becomes a QuantLinear read from the folder, and only the dense tensors the folder holds (embeddings, norms,
``lm_head``, biases) are allocated, on the target device. A 70B model thus costs its int4 checkpoint plus
its dense parts, not the 140 GB of random fp16 weights that ``from_config(...).cuda()`` would allocate first.

Buffers are not put on the meta device: modules compute some at construction (rotary ``inv_freq``) and
never save them, so they are built for real, on the CPU (they are small), and moved to the device at the
end. transformers is an optional extra (``pip install ".[models]"``); accelerate is not needed.
"""

from __future__ import annotations

import contextlib
import os
from typing import Optional

import torch

from .. import _checks, library
from ._args import activation_dtype, folder_argument
from .model import LoadReport, replace_quantized_linears


def load_model(
    folder: str | os.PathLike,
    *,
    device: str | torch.device = "cuda",
    dtype: torch.dtype | str = torch.float16,
    layout: str = "auto",
    config: library.ConfigArg = "auto",
    model_config: Optional[object] = None,
    tp: object = None,
    tp_styles: Optional[dict] = None,
) -> tuple[torch.nn.Module, LoadReport]:
    """The causal LM of the checkpoint folder ``folder`` on ``device``, in eval mode, with activations in
    ``dtype`` (fp16 or bf16, a torch dtype or a string such as ``"float16"``), and the
    :class:`~mixgemm.checkpoint.LoadReport` of the load.

    The architecture comes from the folder's ``config.json`` through transformers' ``AutoConfig`` (or from
    ``model_config``, a transformers config). The model is built by :func:`build_empty_model`, then
    :func:`~mixgemm.checkpoint.replace_quantized_linears` puts a QuantLinear (prepacked in ``layout``, run
    with kernel ``config``) in place of every Linear the folder holds quantized and allocates the folder's
    other tensors on ``device``; a parameter the folder lacks is an error, since it would have no values.

    ``tp`` / ``tp_styles``: tensor parallel, as :func:`~mixgemm.checkpoint.replace_quantized_linears` takes
    them; each rank (process) calls load_model with its own rank and device and gets its shard of the model.
    """
    fn = "load_model"
    require_transformers(fn)
    folder = folder_argument(fn, folder)
    act_dtype = activation_dtype(fn, dtype)
    target = _checks.check_load_device(fn, device)
    model = _build_empty_model(fn, folder if model_config is None else model_config, act_dtype)
    report = replace_quantized_linears(model, folder, device=target, dtype=act_dtype, config=config, layout=layout,
                                       tp=tp, tp_styles=tp_styles)
    model.to(target)  # the buffers built on the CPU at construction; everything else is there already
    return model.eval(), report


def build_empty_model(model_config: object, *, dtype: torch.dtype | str = torch.float16) -> torch.nn.Module:
    """A transformers ``AutoModelForCausalLM`` of ``model_config`` (a transformers config, or a folder with
    its ``config.json``) whose parameters are all on the meta device, in ``dtype``, and whose buffers hold the
    values computed at construction, on the CPU. No parameter memory is allocated (each parameter's CPU
    storage is dropped, untouched, as it is registered)."""
    fn = "build_empty_model"
    return _build_empty_model(fn, model_config, activation_dtype(fn, dtype))


def _build_empty_model(fn: str, model_config: object, dtype: torch.dtype) -> torch.nn.Module:
    transformers = require_transformers(fn)
    if not isinstance(model_config, transformers.PretrainedConfig):
        model_config = read_model_config(fn, model_config)
    with parameters_on_meta():
        return transformers.AutoModelForCausalLM.from_config(model_config, dtype=dtype)


@contextlib.contextmanager
def parameters_on_meta():
    """Within the block, every parameter a module registers is moved to the meta device; buffers are not.

    Why not ``with torch.device("meta")``: that puts buffers on meta too, and a buffer computed at
    construction and never saved (rotary ``inv_freq``) would then have no value anywhere. This is what
    accelerate's ``init_empty_weights()`` does, without needing accelerate."""
    register = torch.nn.Module.register_parameter

    def register_on_meta(module, name, param):
        register(module, name, param)
        # A parameter already on meta is kept as the same object: weight tying registers the twin's object.
        if param is not None and not param.is_meta:
            module._parameters[name] = torch.nn.Parameter(param.detach().to("meta"), requires_grad=param.requires_grad)

    torch.nn.Module.register_parameter = register_on_meta
    try:
        yield
    finally:
        torch.nn.Module.register_parameter = register


def require_transformers(fn: str):
    """The transformers module, or an ImportError that says how to install it."""
    try:
        import transformers
    except ImportError:
        raise ImportError(f"{fn}: loading a whole model needs transformers, an optional extra of mixgemm: "
                          'pip install ".[models]" in the mixgemm checkout (or pip install transformers)') from None
    return transformers


def read_model_config(fn: str, folder: object):
    """The transformers config of the checkpoint folder ``folder``, from its ``config.json``."""
    transformers = require_transformers(fn)
    folder = folder_argument(fn, folder, "model_config")
    try:
        return transformers.AutoConfig.from_pretrained(folder)
    except (OSError, ValueError, KeyError) as error:
        raise ValueError(f"{fn}: cannot read a transformers model config from {os.path.join(folder, 'config.json')} "
                         f"({error}); the folder needs the model's config.json (with its model_type), or pass "
                         "model_config=") from None
