"""A checkpoint folder's own quantization metadata, parsed into what mixgemm needs to load it.

Read from ``config.json``'s ``quantization_config`` (what transformers and vLLM read), else from
``quantize_config.json`` (AutoGPTQ / GPTQModel) or ``quant_config.json`` (older AutoAWQ). Three methods load:

* ``awq`` (AutoAWQ's GEMM packing): 4-bit, ``zero_point`` true (asymmetric) or false (symmetric);
* ``gptq`` (AutoGPTQ / GPTQModel): 4- or 8-bit, ``sym``, ``desc_act``, ``group_size`` (-1 = per channel) and
  ``checkpoint_format``: ``"gptq"`` or absent means v1 zeros (stored ``z - 1``), ``"gptq_v2"`` zeros as
  stored (DESIGN.md section 1);
* ``compressed-tensors`` with ``format: "pack-quantized"`` (llm-compressor's W4A16 / W8A16): integer weights,
  ``strategy`` ``"group"`` or ``"channel"``, symmetric or not, optional act-order, per ``config_groups``
  entry with its ``targets``, and a top-level ``ignore`` list.

Anything else (3-bit, exl2, Marlin/BitBLAS repacks, activation quantization, ...) is a ``ValueError`` naming
the file, the field and the rule, raised before any tensor is read.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
from typing import Optional

from ._args import folder_argument

CONFIG_FILES = ("config.json", "quantize_config.json", "quant_config.json")
METHODS = ("awq", "gptq", "compressed-tensors")
SUPPORTED_BITS = {"awq": (4,), "gptq": (4, 8), "compressed-tensors": (4, 8)}


@dataclasses.dataclass(frozen=True)
class QuantScheme:
    """How one layer's weight is stored.

    ``method``: ``"awq"``, ``"gptq"`` or ``"compressed-tensors"``. ``group_size`` None means one group per
    output channel (G = K). ``zero_format`` is for GPTQ: ``"gptq"`` (v1, stored ``z - 1``) or ``"gptq_v2"``.
    ``act_order``: the checkpoint may carry a non-trivial ``g_idx``.
    """

    method: str
    bits: int
    group_size: Optional[int]
    symmetric: bool
    zero_format: str = "gptq"
    act_order: bool = False


@dataclasses.dataclass(frozen=True)
class QuantConfig:
    """A checkpoint's quantization config: one scheme per target (compressed-tensors may have several).

    ``targets``: ``[(targets, scheme)]`` in file order; a target is a module class name (``"Linear"``), an
    exact module name, or ``"re:<regex>"`` matched from the start of the name. AWQ/GPTQ configs hold one
    entry targeting every Linear. ``ignore``: module names (or ``re:`` patterns) kept dense.
    ``source``: the file it came from, for messages.
    """

    method: str
    groups: tuple
    ignore: tuple
    source: str

    def scheme_for(self, name: str, class_name: str = "Linear") -> Optional[QuantScheme]:
        """The scheme of module ``name`` (of class ``class_name``), or None if the config keeps it dense."""
        if any(_matches(pattern, name, class_name, substring=self.method != "compressed-tensors")
               for pattern in self.ignore):
            return None
        for targets, scheme in self.groups:
            if any(_matches(t, name, class_name) for t in targets):
                return scheme
        return None


def _matches(pattern: str, name: str, class_name: str, substring: bool = False) -> bool:
    if pattern.startswith("re:"):
        return re.match(pattern[3:], name) is not None
    if pattern in (name, class_name):
        return True
    # AWQ/GPTQ `modules_to_not_convert` entries name a module or a part of its dotted path ("lm_head",
    # "mlp.gate"), as transformers applies them.
    return substring and (name.endswith("." + pattern) or f".{pattern}." in f".{name}.")


def read_quant_config(folder: str | os.PathLike) -> QuantConfig:
    """The quantization config of the checkpoint folder ``folder`` (see the module docstring)."""
    folder = folder_argument("read_quant_config", folder)
    for filename in CONFIG_FILES:
        path = os.path.join(folder, filename)
        if not os.path.isfile(path):
            continue
        try:
            with open(path) as f:
                data = json.load(f)
        except (OSError, ValueError) as error:  # ValueError: bad JSON, or bytes that are not UTF-8
            raise ValueError(f"read_quant_config: cannot read {path} as JSON: {error}") from None
        if filename == "config.json":
            if "quantization_config" not in data:
                continue  # a dense model's config; a quantize_config.json beside it may still say more
            data = data["quantization_config"]
        return parse_quant_config(data, path)
    raise ValueError(
        f"read_quant_config: {folder} has no quantization config: none of {', '.join(CONFIG_FILES)} is there "
        "with one (config.json needs a 'quantization_config' entry)"
    )


def parse_quant_config(data: dict, source: str = "quantization_config") -> QuantConfig:
    """Parses a ``quantization_config`` dictionary (``source`` names it in messages)."""
    if not isinstance(data, dict):
        raise ValueError(f"{source}: the quantization config must be a JSON object, got {type(data).__name__}")
    method = _method_of(data, source)
    if method == "awq":
        return _parse_awq(data, source)
    if method == "gptq":
        return _parse_gptq(data, source)
    return _parse_compressed_tensors(data, source)


def _method_of(data: dict, source: str) -> str:
    method = data.get("quant_method")
    if method is None:
        # AutoGPTQ's quantize_config.json predates quant_method; older AutoAWQ writes w_bit / q_group_size.
        if "w_bit" in data or "q_group_size" in data:
            return "awq"
        if "bits" in data and "group_size" in data:
            return "gptq"
        raise ValueError(f"{source}: no quant_method, and the fields do not say AWQ or GPTQ")
    method = str(method).lower()
    if method not in METHODS:
        raise ValueError(
            f"{source}: quant_method {method!r} is not supported; mixgemm loads {', '.join(METHODS)} "
            "(weight-only int4/int8)"
        )
    return method


def _int_field(data: dict, keys: tuple, source: str, default=None) -> Optional[int]:
    for key in keys:
        if key in data:
            value = data[key]
            if isinstance(value, bool) or not isinstance(value, int):
                raise ValueError(f"{source}: {key} must be an integer, got {value!r}")
            return value
    return default


def _bool_field(data: dict, key: str, source: str, default: bool) -> bool:
    value = data.get(key, default)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise ValueError(f"{source}: {key} must be true or false, got {value!r}")
    return value


def _check_bits(method: str, bits, source: str, key: str = "bits") -> int:
    if bits not in SUPPORTED_BITS[method]:
        raise ValueError(
            f"{source}: {key} = {bits!r} is not supported for {method}; mixgemm's kernels run "
            f"{' and '.join(f'{b}-bit' for b in SUPPORTED_BITS[method])} weights"
        )
    return bits


def _group_size(value, source: str, key: str = "group_size") -> Optional[int]:
    """-1 (or None) means per channel; otherwise a positive group size."""
    if value is None or value == -1:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValueError(f"{source}: {key} must be a positive integer or -1 (per channel), got {value!r}")
    return value


def _names(data: dict, key: str, source: str) -> tuple:
    value = data.get(key) or []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ValueError(f"{source}: {key} must be a list of module names, got {value!r}")
    return tuple(value)


def _parse_awq(data: dict, source: str) -> QuantConfig:
    bits = _check_bits("awq", _int_field(data, ("bits", "w_bit"), source), source)
    group_size = _group_size(_int_field(data, ("group_size", "q_group_size"), source), source)
    version = str(data.get("version") or "gemm").lower()
    if version != "gemm":
        raise ValueError(
            f"{source}: AWQ version {version!r} is not supported; mixgemm reads AutoAWQ's 'gemm' packing "
            "(qweight [K, N/8]); re-export the model with version 'gemm'"
        )
    symmetric = not _bool_field(data, "zero_point", source, True)
    scheme = QuantScheme("awq", bits, group_size, symmetric)
    return QuantConfig("awq", ((("Linear",), scheme),), _names(data, "modules_to_not_convert", source), source)


def _parse_gptq(data: dict, source: str) -> QuantConfig:
    bits = _check_bits("gptq", _int_field(data, ("bits",), source), source)
    group_size = _group_size(_int_field(data, ("group_size",), source, -1), source)
    # AutoGPTQ >= 0.8 and GPTQModel write checkpoint_format; older AutoGPTQ had is_marlin_format /
    # is_bitblas_format flags for repacked weights.
    zero_format = str(data.get("checkpoint_format") or "gptq").lower()
    if data.get("is_marlin_format") or data.get("is_bitblas_format"):
        zero_format = "marlin" if data.get("is_marlin_format") else "bitblas"
    if zero_format not in ("gptq", "gptq_v2"):
        raise ValueError(
            f"{source}: checkpoint_format {zero_format!r} is not supported; mixgemm reads GPTQ's own packing, "
            "'gptq' (v1 zeros, the default) or 'gptq_v2'"
        )
    if data.get("dynamic"):
        raise ValueError(f"{source}: per-module overrides ('dynamic') are not supported; quantize every layer alike")
    scheme = QuantScheme("gptq", bits, group_size, _bool_field(data, "sym", source, True), zero_format,
                         _bool_field(data, "desc_act", source, False))
    return QuantConfig("gptq", ((("Linear",), scheme),), _names(data, "modules_to_not_convert", source), source)


def _parse_compressed_tensors(data: dict, source: str) -> QuantConfig:
    top_format = data.get("format")
    groups_data = data.get("config_groups")
    if not isinstance(groups_data, dict) or not groups_data:
        raise ValueError(f"{source}: compressed-tensors config needs a non-empty 'config_groups' object")
    groups = []
    for group_name, group in groups_data.items():
        where = f"{source}: config_groups.{group_name}"
        if not isinstance(group, dict):
            raise ValueError(f"{where} must be an object")
        fmt = group.get("format") or top_format
        if fmt != "pack-quantized":
            raise ValueError(
                f"{where}: format {fmt!r} is not supported; mixgemm reads 'pack-quantized' (int4/int8 weights "
                "packed into int32, as llm-compressor writes W4A16 / W8A16)"
            )
        if group.get("input_activations") or group.get("output_activations"):
            raise ValueError(f"{where}: activation quantization is not supported; mixgemm runs weight-only "
                             "schemes (W4A16, W8A16) with fp16/bf16 activations")
        weights = group.get("weights")
        if not isinstance(weights, dict):
            raise ValueError(f"{where}: needs a 'weights' object")
        wtype = weights.get("type", "int")
        if wtype != "int":
            raise ValueError(f"{where}.weights: type {wtype!r} is not supported; mixgemm runs integer weights")
        bits = _check_bits("compressed-tensors", weights.get("num_bits"), where + ".weights", "num_bits")
        strategy = weights.get("strategy")
        if strategy == "group":
            group_size = _group_size(weights.get("group_size"), where + ".weights")
            if group_size is None:
                raise ValueError(f"{where}.weights: strategy 'group' needs a positive group_size")
        elif strategy == "channel":
            group_size = None
        else:
            raise ValueError(f"{where}.weights: strategy {strategy!r} is not supported; mixgemm runs 'group' and "
                             "'channel' scales")
        if weights.get("dynamic"):
            raise ValueError(f"{where}.weights: dynamic weight quantization is not supported")
        symmetric = weights.get("symmetric", True)
        if not isinstance(symmetric, bool):
            raise ValueError(f"{where}.weights: symmetric must be true or false, got {symmetric!r}")
        targets = group.get("targets")
        if not isinstance(targets, list) or not targets or not all(isinstance(t, str) for t in targets):
            raise ValueError(f"{where}: targets must be a non-empty list of names, classes or 're:' patterns")
        scheme = QuantScheme("compressed-tensors", bits, group_size, symmetric,
                             act_order=weights.get("actorder") not in (None, False))
        groups.append((tuple(targets), scheme))
    return QuantConfig("compressed-tensors", tuple(groups), _names(data, "ignore", source), source)
