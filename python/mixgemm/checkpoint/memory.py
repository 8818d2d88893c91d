"""What loading a checkpoint costs in memory: the bytes a checkpoint folder holds (quantized layers apart
from dense tensors, read from the files' headers), and the peak CUDA memory a block of code allocates. With
both, a test states the bound that :func:`~mixgemm.checkpoint.load_model` keeps: peak memory of about the
quantized checkpoint plus its dense tensors, never the model's fp16 weights."""

from __future__ import annotations

import contextlib
import dataclasses
import os
from typing import Optional

import torch

from ._args import folder_argument
from .config import read_quant_config
from .files import CheckpointFiles
from .model import quantized_modules


@dataclasses.dataclass(frozen=True)
class CheckpointBytes:
    """Bytes of a checkpoint folder's tensors: ``quantized`` those of its quantized layers (packed weights,
    scales, zero points, g_idx; biases excepted) and ``dense`` all the others (embeddings, norms, lm_head,
    biases), as stored."""

    quantized: int
    dense: int

    @property
    def total(self) -> int:
        return self.quantized + self.dense


def checkpoint_tensor_bytes(folder: str | os.PathLike) -> CheckpointBytes:
    """The :class:`CheckpointBytes` of the checkpoint folder ``folder``, from its safetensors headers (no
    tensor is read)."""
    folder = folder_argument("checkpoint_tensor_bytes", folder)
    files = CheckpointFiles(folder)
    quantized_layers = quantized_modules(files, read_quant_config(folder))
    quantized = dense = 0
    for key in files.keys():
        module, _, suffix = key.rpartition(".")
        if module in quantized_layers and suffix != "bias":
            quantized += files.nbytes_of(key)
        else:
            dense += files.nbytes_of(key)
    return CheckpointBytes(quantized, dense)


@dataclasses.dataclass
class PeakMemory:
    """Filled in when the ``with cuda_peak_memory()`` block ends: ``before`` the bytes allocated on the device
    when it began, ``peak`` the most allocated at any time within it, ``after`` at its end. ``peak_increase``
    (``peak - before``) is what the block itself needed at its worst."""

    before: int = 0
    peak: int = 0
    after: int = 0

    @property
    def peak_increase(self) -> int:
        return self.peak - self.before


@contextlib.contextmanager
def cuda_peak_memory(device: Optional[str | torch.device] = None):
    """Measures the CUDA memory the block allocates through torch (``torch.cuda.max_memory_allocated``, the
    peak statistic reset when the block begins): ``with cuda_peak_memory() as memory: ...`` then
    ``memory.peak_increase``. Work queued before the block is finished first, so it is not counted."""
    torch.cuda.synchronize(device)
    memory = PeakMemory(before=torch.cuda.memory_allocated(device))
    torch.cuda.reset_peak_memory_stats(device)
    try:
        yield memory
    finally:
        torch.cuda.synchronize(device)
        memory.peak = torch.cuda.max_memory_allocated(device)
        memory.after = torch.cuda.memory_allocated(device)
