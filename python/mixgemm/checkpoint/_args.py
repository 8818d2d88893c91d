"""Argument checks shared by the checkpoint loaders: paths and activation dtypes, each refused with a
ValueError that names the function, the argument and what it accepts."""

from __future__ import annotations

import os

import torch

# Strings users type for the two activation dtypes (as transformers' ``torch_dtype="float16"`` does); they
# are mapped to torch dtypes rather than refused, since a string is not a torch.dtype and comparing one
# with torch.float16 fails without saying why.
DTYPE_NAMES = {
    "float16": torch.float16, "fp16": torch.float16, "half": torch.float16,
    "bfloat16": torch.bfloat16, "bf16": torch.bfloat16,
}
_ACCEPTED = ("torch.float16 or torch.bfloat16, or one of the strings "
             + ", ".join(repr(name) for name in DTYPE_NAMES))


def activation_dtype(fn: str, dtype: object, name: str = "dtype") -> torch.dtype:
    """``dtype`` as the torch dtype of mixgemm's activations: fp16 or bf16, given as a torch dtype or a
    string such as ``"float16"``, ``"bf16"`` (a ``"torch."`` prefix is allowed)."""
    if isinstance(dtype, str):
        key = dtype.strip().lower()
        key = key[len("torch."):] if key.startswith("torch.") else key
        if key in DTYPE_NAMES:
            return DTYPE_NAMES[key]
        raise ValueError(f"{fn}: {name} must be {_ACCEPTED}; got the string {dtype!r}")
    if dtype in (torch.float16, torch.bfloat16):
        return dtype
    raise ValueError(f"{fn}: {name} must be {_ACCEPTED} (mixgemm runs fp16/bf16 activations); got {dtype!r}")


def path_argument(fn: str, value: object, name: str) -> str:
    """``value`` as a path string; None or a non-path is a ValueError naming the argument."""
    if value is None:
        raise ValueError(f"{fn}: {name} must be a path (str or os.PathLike), got None")
    try:
        path = os.fspath(value)
    except TypeError:
        raise ValueError(f"{fn}: {name} must be a path (str or os.PathLike), got {type(value).__name__}") from None
    return os.fsdecode(path)


def folder_argument(fn: str, value: object, name: str = "folder") -> str:
    """``value`` as the path of an existing directory (a checkpoint folder)."""
    path = path_argument(fn, value, name)
    if os.path.isfile(path):
        raise ValueError(f"{fn}: {name} must be a checkpoint directory (config.json and safetensors files), got "
                         f"the file {path!r}; one safetensors file loads through QuantLinear.from_safetensors")
    if not os.path.isdir(path):
        raise ValueError(f"{fn}: {name} must be a checkpoint directory, got {path!r}, which does not exist")
    return path


def file_argument(fn: str, value: object, name: str = "path") -> str:
    """``value`` as the path of an existing regular file."""
    path = path_argument(fn, value, name)
    if os.path.isdir(path):
        raise ValueError(f"{fn}: {name} must be a safetensors file, got the directory {path!r}; a checkpoint folder "
                         "loads through mixgemm.checkpoint (load_layer, load_model)")
    if not os.path.isfile(path):
        raise ValueError(f"{fn}: {name} must be a safetensors file, got {path!r}, which does not exist")
    return path
