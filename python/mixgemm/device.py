"""What the library reads of a GPU, once per device: its name, SM count, compute capability and memory bandwidth
(the paths' heuristics and the tuning cache read them), after the device passed the support check."""

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
        gpu = _facts[device] = Gpu(props.name, props.multi_processor_count, (props.major, props.minor),
                                   memory_bandwidth(props))
    return gpu


def memory_bandwidth(props) -> float:
    """The DRAM's peak bytes per second from CUDA device properties: two transfers per memory clock (kHz) over the
    bus (bits), e.g. an H100 SXM's 2619 MHz x 5120 bits = 3.35 TB/s. 0 where the properties lack either."""
    clock_khz = getattr(props, "memory_clock_rate", 0) or 0
    bus_bits = getattr(props, "memory_bus_width", 0) or 0
    return 2 * clock_khz * 1e3 * bus_bits / 8
