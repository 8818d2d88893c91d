"""The safetensors files of a checkpoint folder: one ``model.safetensors``, or shards named by
``model.safetensors.index.json`` (``{"metadata": {...}, "weight_map": {tensor name: file}}``), read tensor by
tensor so that loading a layer costs only its own bytes; and the writer of such folders."""

from __future__ import annotations

import json
import math
import os
from typing import Iterable, Optional

import torch

from ._args import file_argument, folder_argument, path_argument

INDEX_FILE = "model.safetensors.index.json"
SINGLE_FILE = "model.safetensors"
# Bytes per element of the dtypes a safetensors header names (``get_slice(name).get_dtype()``).
HEADER_DTYPE_BYTES = {
    "BOOL": 1, "U8": 1, "I8": 1, "F8_E4M3": 1, "F8_E5M2": 1, "I16": 2, "U16": 2, "F16": 2, "BF16": 2,
    "I32": 4, "U32": 4, "F32": 4, "I64": 8, "U64": 8, "F64": 8,
}


def open_safetensors(fn: str, path: str):
    """A ``safe_open`` handle of the file ``path`` (its header read, no tensor yet), with every way the file
    can be unreadable (absent, a directory, empty, truncated, not safetensors) a ValueError naming it:
    safetensors' own errors name neither the file nor, in a sharded folder, the shard."""
    try:
        from safetensors import SafetensorError, safe_open
    except ImportError:
        raise ImportError(f"{fn}: reading safetensors checkpoints needs the safetensors package: "
                          'pip install safetensors (or pip install ".[models]" in a mixgemm checkout)') from None
    path = file_argument(fn, path, "path")
    try:
        return safe_open(path, framework="pt", device="cpu")
    except (SafetensorError, OSError) as error:
        raise ValueError(f"{fn}: {path} is not a readable safetensors file ({error}); it may be empty, truncated "
                         "or corrupt: download or write it again") from None


class CheckpointFiles:
    """Tensor name -> file map of the folder ``folder``, built from the index file when there is one."""

    def __init__(self, folder: str | os.PathLike) -> None:
        self.folder = folder_argument("CheckpointFiles", folder)
        index = os.path.join(self.folder, INDEX_FILE)
        self._file_of: dict[str, str] = {}
        self._open: dict[str, object] = {}  # shard file name -> its open safe_open handle
        if os.path.isfile(index):
            weight_map = _read_weight_map(index)
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
                for name in self._handle(filename).keys():
                    self._file_of.setdefault(name, filename)

    def __contains__(self, name: str) -> bool:
        return name in self._file_of

    def keys(self) -> Iterable[str]:
        return self._file_of.keys()

    def path_of(self, name: str) -> str:
        """The path of the file (shard) that holds tensor ``name``, for messages."""
        return os.path.join(self.folder, self._filename_of(name))

    def get(self, name: str) -> torch.Tensor:
        """The tensor ``name`` on the CPU; a ValueError naming it if the checkpoint lacks it, and naming its
        file if that file cannot be read."""
        from safetensors import SafetensorError

        filename = self._filename_of(name)
        handle = self._handle(filename)
        try:
            return handle.get_tensor(name)
        except (SafetensorError, OSError, RuntimeError) as error:
            raise ValueError(f"CheckpointFiles: cannot read tensor {name!r} from {self.path_of(name)} ({error}); "
                             "the file may be truncated or corrupt") from None

    def get_optional(self, name: str) -> Optional[torch.Tensor]:
        return self.get(name) if name in self._file_of else None

    def lazy(self, name: str):
        """Tensor ``name`` as a source read slice by slice (only the bytes of the slices asked for): what a
        tensor-parallel rank reads its shard through (mixgemm.tensor_parallel.sources)."""
        from ..tensor_parallel.sources import SafetensorsSlice

        return SafetensorsSlice(self._handle(self._filename_of(name)), name)

    def lazy_optional(self, name: str):
        return self.lazy(name) if name in self._file_of else None

    def shape_of(self, name: str) -> tuple:
        """The shape of tensor ``name`` from its file's header, without reading the tensor."""
        return tuple(self._handle(self._filename_of(name)).get_slice(name).get_shape())

    def nbytes_of(self, name: str) -> int:
        """The bytes tensor ``name`` takes in its file, from the header."""
        info = self._handle(self._filename_of(name)).get_slice(name)
        return math.prod(info.get_shape()) * HEADER_DTYPE_BYTES.get(info.get_dtype(), 1)

    def _filename_of(self, name: str) -> str:
        filename = self._file_of.get(name)
        if filename is None:
            raise ValueError(f"CheckpointFiles: {self.folder} has no tensor {name!r}")
        return filename

    def _handle(self, filename: str):
        # safe_open reads the header only; a handle per shard stays open for the next layer's tensors.
        handle = self._open.get(filename)
        if handle is None:
            handle = open_safetensors("CheckpointFiles", os.path.join(self.folder, filename))
            self._open[filename] = handle
        return handle


def _read_weight_map(index: str) -> dict:
    """The ``weight_map`` of the index file ``index``: tensor name -> shard file name."""
    try:
        with open(index) as f:
            weight_map = json.load(f)["weight_map"]
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise ValueError(f"CheckpointFiles: {index} is not a safetensors index with a 'weight_map' "
                         f"({error!r})") from None
    if not isinstance(weight_map, dict) or not all(isinstance(v, str) for v in weight_map.values()):
        raise ValueError(f"CheckpointFiles: {index}: 'weight_map' must map tensor names to file names, got "
                         f"{type(weight_map).__name__}")
    return weight_map


def save_sharded(folder: str | os.PathLike, tensors: dict[str, torch.Tensor], max_shard_bytes: int = 2 << 30,
                 metadata: Optional[dict[str, str]] = None) -> list[str]:
    """Writes ``tensors`` into ``folder`` as transformers does: ``model.safetensors`` when they fit one shard,
    else ``model-0000i-of-0000n.safetensors`` shards of at most ``max_shard_bytes`` (a larger tensor gets a
    shard of its own) plus ``model.safetensors.index.json``. Returns the file names written."""
    from safetensors.torch import save_file

    folder = path_argument("save_sharded", folder, "folder")
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
