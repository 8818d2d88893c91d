"""What the library reads of a GPU, once per device: its name, SM count and compute capability (the paths'
heuristics and the tuning cache read them), after the device passed the support check."""

from __future__ import annotations

import torch

from . import _checks
from .paths.base import Gpu

_facts: dict[torch.device, Gpu] = {}


def facts(fn: str, device: torch.device) -> Gpu:
    """The facts of ``device``, which must be a GPU this build runs on (else ``fn``'s RuntimeError)."""
    gpu = _facts.get(device)
    if gpu is None:
        _checks.check_device_supported(fn, device)
        props = torch.cuda.get_device_properties(device)
        gpu = _facts[device] = Gpu(props.name, props.multi_processor_count, (props.major, props.minor))
    return gpu
