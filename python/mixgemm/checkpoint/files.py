"""The safetensors files of a checkpoint folder: one ``model.safetensors``, or shards named by
``model.safetensors.index.json`` (``{"metadata": {...}, "weight_map": {tensor name: file}}``), read tensor by
tensor so that loading a layer costs only its own bytes; and the writer of such folders."""

from __future__ import annotations

import json
import os
from typing import Iterable, Optional

import torch

INDEX_FILE = "model.safetensors.index.json"
SINGLE_FILE = "model.safetensors"


class CheckpointFiles:
    """Tensor name -> file map of the folder ``folder``, built from the index file when there is one."""

    def __init__(self, folder: str | os.PathLike) -> None:
        from safetensors import safe_open

        self.folder = os.fspath(folder)
        if not os.path.isdir(self.folder):
            raise ValueError(f"CheckpointFiles: folder must be a checkpoint directory, got {self.folder!r}")
        index = os.path.join(self.folder, INDEX_FILE)
        self._file_of: dict[str, str] = {}
        if os.path.isfile(index):
            try:
                with open(index) as f:
                    weight_map = json.load(f)["weight_map"]
            except (OSError, ValueError, KeyError, TypeError) as error:
                raise ValueError(f"CheckpointFiles: {index} is not a safetensors index with a 'weight_map' "
                                 f"({error!r})") from None
            for name, filename in weight_map.items():
                if not os.path.isfile(os.path.join(self.folder, filename)):
                    raise ValueError(f"CheckpointFiles: {index} maps {name!r} to {filename!r}, which is not in "
                                     f"{self.folder}")
                self._file_of[name] = filename
        else:
            files = sorted(f for f in os.listdir(self.folder) if f.endswith(".safetensors"))
            if not files:
                raise ValueError(f"CheckpointFiles: {self.folder} holds no .safetensors file (and no {INDEX_FILE}); "
                                 "mixgemm reads safetensors checkpoints only")
            for filename in files:
                with safe_open(os.path.join(self.folder, filename), framework="pt", device="cpu") as f:
                    for name in f.keys():
                        self._file_of.setdefault(name, filename)
        self._open: dict[str, object] = {}

    def __contains__(self, name: str) -> bool:
        return name in self._file_of

    def keys(self) -> Iterable[str]:
        return self._file_of.keys()

    def get(self, name: str) -> torch.Tensor:
        """The tensor ``name`` on the CPU; a ValueError naming it if the checkpoint lacks it."""
        from safetensors import safe_open

        filename = self._file_of.get(name)
        if filename is None:
            raise ValueError(f"CheckpointFiles: {self.folder} has no tensor {name!r}")
        handle = self._open.get(filename)
        if handle is None:
            # safe_open reads the header only; a handle per shard stays open for the next layer's tensors.
            handle = safe_open(os.path.join(self.folder, filename), framework="pt", device="cpu")
            self._open[filename] = handle
        return handle.get_tensor(name)

    def get_optional(self, name: str) -> Optional[torch.Tensor]:
        return self.get(name) if name in self._file_of else None


def save_sharded(folder: str | os.PathLike, tensors: dict[str, torch.Tensor], max_shard_bytes: int = 2 << 30,
                 metadata: Optional[dict[str, str]] = None) -> list[str]:
    """Writes ``tensors`` into ``folder`` as transformers does: ``model.safetensors`` when they fit one shard,
    else ``model-0000i-of-0000n.safetensors`` shards of at most ``max_shard_bytes`` (a larger tensor gets a
    shard of its own) plus ``model.safetensors.index.json``. Returns the file names written."""
    from safetensors.torch import save_file

    if isinstance(max_shard_bytes, bool) or not isinstance(max_shard_bytes, int) or max_shard_bytes <= 0:
        raise ValueError(f"save_sharded: max_shard_bytes must be a positive int, got {max_shard_bytes!r}")
    os.makedirs(folder, exist_ok=True)
    shards: list[dict[str, torch.Tensor]] = [{}]
    size = 0
    for name, tensor in tensors.items():
        nbytes = tensor.numel() * tensor.element_size()
        if shards[-1] and size + nbytes > max_shard_bytes:
            shards.append({})
            size = 0
        # safetensors wants contiguous CPU tensors that share no storage with another entry.
        shards[-1][name] = tensor.detach().to("cpu").contiguous().clone()
        size += nbytes
    meta = {"format": "pt", **(metadata or {})}
    if len(shards) == 1:
        save_file(shards[0], os.path.join(folder, SINGLE_FILE), metadata=meta)
        return [SINGLE_FILE]
    names = [f"model-{i + 1:05d}-of-{len(shards):05d}.safetensors" for i in range(len(shards))]
    weight_map = {}
    for filename, shard in zip(names, shards):
        save_file(shard, os.path.join(folder, filename), metadata=meta)
        weight_map.update({name: filename for name in shard})
    total = sum(t.numel() * t.element_size() for t in tensors.values())
    with open(os.path.join(folder, INDEX_FILE), "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, f, indent=2)
    return names + [INDEX_FILE]
