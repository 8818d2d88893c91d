"""Writers of quantized checkpoint folders as AutoAWQ, AutoGPTQ/GPTQModel (v1 zeros) and llm-compressor lay
them out, with a realistic ``quantization_config`` in ``config.json``. They exist for tests and examples:
quantize with :mod:`mixgemm.formats`, write here, load back through :mod:`mixgemm.checkpoint` as a user
would load a downloaded checkpoint. Mixture-of-experts models (one quantized Linear per expert, under the names
the tools use) are written by :mod:`.moe_writer` with these layer writers."""

from __future__ import annotations

import json
import os
from typing import Optional

import torch

from .. import formats
from . import compressed_tensors
from ._args import path_argument
from .files import save_sharded

METHODS = ("awq", "gptq", "compressed-tensors")


def layer_tensors(method: str, q: torch.Tensor, scales: torch.Tensor, zeros: Optional[torch.Tensor],
                  bits: int = 4) -> dict[str, torch.Tensor]:
    """One layer's checkpoint tensors by suffix, from mixgemm's logical ``q [K, N]``, ``scales [K/G, N]`` and
    ``zeros [K/G, N]`` (None: symmetric, z = 2**(bits-1)).

    * ``awq``: ``qweight``, ``qzeros``, ``scales`` (AutoAWQ's GEMM packing, 4-bit; symmetric weights get
      their constant zeros written, as AutoAWQ stores a zeros tensor for every layer);
    * ``gptq``: ``qweight``, ``qzeros`` (v1: stored ``z - 1``, constant for symmetric weights, as AutoGPTQ
      writes), ``scales``, ``g_idx`` (``k // G``);
    * ``compressed-tensors``: see :func:`.compressed_tensors.layer_tensors`.
    """
    K, N = q.shape
    mid = 1 << (bits - 1)
    full_zeros = zeros if zeros is not None else torch.full(scales.shape, mid, dtype=torch.uint8)
    if method == "awq":
        if bits != 4:
            raise ValueError(f"layer_tensors: AWQ is 4-bit, got bits = {bits}")
        return {"qweight": formats.pack_awq(q), "qzeros": formats.pack_awq(full_zeros), "scales": scales}
    if method == "gptq":
        pack_q, pack_z = ((formats.pack_gptq_qweight, formats.pack_gptq_zeros) if bits == 4 else
                          (formats.pack_gptq_qweight_int8, formats.pack_gptq_zeros_int8))
        G = K // scales.shape[0]
        return {"qweight": pack_q(q), "qzeros": pack_z(full_zeros, v1=True), "scales": scales,
                "g_idx": (torch.arange(K) // G).to(torch.int32)}
    if method == "compressed-tensors":
        return compressed_tensors.layer_tensors(q, scales, zeros, bits)
    raise ValueError(f"layer_tensors: method must be one of {METHODS}, got {method!r}")


def quantization_config(method: str, bits: int, group_size: Optional[int], symmetric: bool,
                        ignore: tuple = ("lm_head",)) -> dict:
    """The ``quantization_config`` entry of ``config.json`` that the method's own tools write (the fields
    vLLM and transformers read). ``group_size`` None means per channel."""
    if method == "awq":
        return {"quant_method": "awq", "bits": bits, "group_size": group_size or -1, "zero_point": not symmetric,
                "version": "gemm", "modules_to_not_convert": list(ignore) or None}
    if method == "gptq":
        return {"quant_method": "gptq", "bits": bits, "group_size": group_size or -1, "sym": symmetric,
                "desc_act": False, "checkpoint_format": "gptq", "true_sequential": True, "damp_percent": 0.01}
    if method == "compressed-tensors":
        weights = {"num_bits": bits, "type": "int", "symmetric": symmetric,
                   "strategy": "channel" if group_size is None else "group", "group_size": group_size,
                   "actorder": None, "dynamic": False, "observer": "minmax"}
        return {"quant_method": "compressed-tensors", "format": "pack-quantized", "quantization_status": "compressed",
                "config_groups": {"group_0": {"targets": ["Linear"], "weights": weights,
                                              "input_activations": None, "output_activations": None}},
                "ignore": list(ignore), "kv_cache_scheme": None}
    raise ValueError(f"quantization_config: method must be one of {METHODS}, got {method!r}")


def write_checkpoint(folder: str | os.PathLike, model_config: dict, quant_config: dict,
                     tensors: dict[str, torch.Tensor], max_shard_bytes: int = 2 << 30) -> list[str]:
    """Writes ``config.json`` (``model_config`` with ``quantization_config = quant_config``) and the tensors,
    sharded with an index file when they exceed ``max_shard_bytes``. Returns the files written."""
    folder = path_argument("write_checkpoint", folder, "folder")
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump({**model_config, "quantization_config": quant_config}, f, indent=2)
    return ["config.json"] + save_sharded(folder, tensors, max_shard_bytes)
