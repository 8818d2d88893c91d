"""What every kernel path provides, and the pieces they share.

A path (one module of this package, one folder of cpp/mixgemm, one section of cpp/generator/kernel_sets.py) is:

  * a config type, a frozen dataclass subclassing :class:`GemmConfig`: the compiled kernel's fields and the split
    of K chosen at run time, with a ``name`` that the binding, the tuning cache, the custom op and the profiler
    all use;
  * a :class:`KernelPath` object ``PATH``: which layouts it reads, its compiled configs for a kernel key, whether a
    config can run a problem (and why not), its heuristic choice, the split variants the sweep times, and its plan.

mixgemm.dispatch chooses among the paths; mixgemm.ops validates a call and runs the plan it gets.
"""

from __future__ import annotations

import abc
import dataclasses
import functools
import re
from typing import Callable, ClassVar

import torch

from .. import shape_rules, workspace
from .._runtime import extension
from ..kernel_key import KernelKey

SPLIT_K_MODES = ("none", "serial", "parallel", "streamk")


@dataclasses.dataclass(frozen=True)
class GemmProblem:
    """One dense problem: ``y[M, N] = x[M, K] @ W[K, N]`` with one scale row per ``group_size`` rows of K. A
    grouped (mixture-of-experts) problem will add its groups here; the plan cache and the tuning cache key on it."""

    M: int
    N: int
    K: int
    group_size: int


# The read bandwidth that splits the GPUs measured into two classes for the rules that depend on it (bytes per
# second): the H100 (3.35 TB/s) below, the H200 (4.8 TB/s) above. The sm80 path's widest tiles and the decode path's
# warps at M <= 2 each changed their fastest config between those two GPUs; no GPU in between has been measured.
FAST_DRAM_BANDWIDTH = 4.0e12


@dataclasses.dataclass(frozen=True)
class Gpu:
    """What a path's heuristic reads of the GPU a plan runs on: ``memory_bandwidth`` is the DRAM's peak in bytes per
    second as the driver reports its clock and bus width (0 where it does not)."""

    name: str
    sm_count: int
    capability: tuple[int, int]
    memory_bandwidth: float = 0.0


class GemmConfig:
    """The base of every path's config type (Sm80Config, DecodeConfig, Sm90Config, DequantConfig).

    Each subclass is a frozen dataclass holding its path's compiled fields plus ``split_k``; ``split_k_mode``
    names how K is split (``"none"``, ``"serial"``: the last split of a tile sums the partials in split order;
    ``"parallel"``: a second kernel sums them; ``"streamk"``: ``split_k`` resident blocks share every tile's
    k-tiles; ``"reduce_scatter"``: every split of a tile runs at once and sums and stores the subtiles it owns), and
    which modes a path has is its own rule.
    """

    path: ClassVar[str]
    split_k: int
    split_k_mode: str

    @property
    @abc.abstractmethod
    def kernel_name(self) -> str:
        """The compiled kernel's name, as the extension lists it (the name without its split)."""

    @property
    def name(self) -> str:
        """The config's name: the kernel's name and its split (``_k4s`` / ``_k4p`` / ``_k4r``: split-K 4 serial /
        parallel / reduce-scatter, ``_sk264``: stream-K over 264 blocks)."""
        if self.split_k_mode == "streamk":
            return f"{self.kernel_name}_sk{self.split_k}"
        return self.kernel_name if self.split_k == 1 else f"{self.kernel_name}_k{self.split_k}{self.split_k_mode[0]}"

    def with_split_k(self, split_k: int, mode: str | None = None) -> "GemmConfig":
        """This config split ``split_k`` ways (mode: ``"none"`` for 1, else the path's mode by default)."""
        if mode is None:
            mode = "none" if split_k == 1 else (self.split_k_mode if self.split_k_mode != "none" else "serial")
        return dataclasses.replace(self, **self._split_fields(split_k, mode))

    def _split_fields(self, split_k: int, mode: str) -> dict:
        return {"split_k": split_k, "split_k_mode": mode}

    def as_dict(self) -> dict:
        """The config's fields and path (what the tuning cache stores)."""
        return {"path": self.path, **dataclasses.asdict(self)}


class SerialSplitConfig(GemmConfig):
    """A config whose path splits K only serially (the decode path): the mode follows from ``split_k``."""

    @property
    def split_k_mode(self) -> str:
        return "none" if self.split_k == 1 else "serial"

    def _split_fields(self, split_k: int, mode: str) -> dict:
        check_split(type(self).__name__, split_k, mode, ("none", "serial"))
        return {"split_k": split_k}


def check_positive_ints(config: GemmConfig, names: tuple[str, ...]) -> None:
    """Each of ``config``'s fields ``names`` must be a positive int (not a bool)."""
    for name in names:
        value = getattr(config, name)
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ValueError(f"{type(config).__name__}: {name} must be a positive int, got {value!r}")


def check_split(cls_name: str, split_k, mode: str, modes: tuple[str, ...]) -> None:
    """The rules of a split every path shares: a positive int count, one of the path's ``modes``, and count 1
    exactly with mode "none" (stream-K counts blocks, not splits)."""
    if not isinstance(split_k, int) or isinstance(split_k, bool) or split_k < 1:
        raise ValueError(f"{cls_name}: split_k must be a positive int, got {split_k!r}")
    if mode not in modes:
        raise ValueError(f"{cls_name}: split_k_mode must be one of {modes} on this path, got {mode!r}")
    if mode != "streamk" and (split_k == 1) != (mode == "none"):
        raise ValueError(f"{cls_name}: split_k == 1 needs split_k_mode 'none' and split_k > 1 one of "
                         f"{tuple(m for m in modes if m not in ('none', 'streamk'))}, got split_k={split_k}, "
                         f"split_k_mode={mode!r}")


# The split suffix of a config name: "_k4s", "_k4p" or "_sk264".
SPLIT_SUFFIX = r"(?:_k(\d+)([sp])|_sk(\d+))?"
_MODE_OF_LETTER = {"s": "serial", "p": "parallel"}


def split_of(match: re.Match, first_group: int) -> tuple[int, str]:
    """(split_k, mode) from the groups of SPLIT_SUFFIX starting at ``first_group``."""
    count, letter, stream_k = match.group(first_group, first_group + 1, first_group + 2)
    if stream_k:
        return int(stream_k), "streamk"
    return (int(count), _MODE_OF_LETTER[letter]) if count else (1, "none")


# ---------------------------------------------------------------------------------------------------------
# Plans


class Plan(abc.ABC):
    """How to run one (path, config, kernel key, problem) on one device: resolved once, then reused by every call
    of that shape (mixgemm.ops keeps them)."""

    config: GemmConfig
    device: torch.device

    @abc.abstractmethod
    def run(self, x2: torch.Tensor, weight, bias: torch.Tensor | None, out: torch.Tensor, stream: int) -> None:
        """``out = x2 @ dequant(weight) (+ bias)`` on ``stream`` of the current device (the plan's)."""


@dataclasses.dataclass(frozen=True)
class KernelPlan(Plan):
    """A plan of a kernel path: the extension's PreparedLaunch (kernel bound, shape checked once), with the
    scratch it needs; ``offsets`` False for a scale-only kernel, which reads no offsets."""

    config: GemmConfig
    device: torch.device
    launch: Callable
    workspace_bytes: int
    semaphore_count: int
    offsets: bool = True

    def run(self, x2, weight, bias, out, stream) -> None:
        # Kept referenced until the launch is queued (a per-call workspace goes back to the allocator after it, in
        # stream order).
        scratch = workspace.scratch(self.device, stream, self.workspace_bytes) if self.workspace_bytes else None
        semaphores = (workspace.semaphores(self.device, stream, self.semaphore_count)
                      if self.semaphore_count else None)
        self.launch(x2.data_ptr(), weight.packed.data_ptr(), weight.scales.data_ptr(),
                    weight.offsets.data_ptr() if self.offsets else 0, bias.data_ptr() if bias is not None else 0,
                    out.data_ptr(), scratch.data_ptr() if scratch is not None else 0,
                    semaphores.data_ptr() if semaphores is not None else 0, stream)


# ---------------------------------------------------------------------------------------------------------
# Paths


class KernelPath(abc.ABC):
    """A kernel path. Subclasses set ``name``, ``config_type`` and ``layouts`` and implement the rest."""

    name: ClassVar[str]
    config_type: ClassVar[type]
    layouts: ClassVar[tuple[str, ...]]

    def compiled(self, key: KernelKey) -> list[GemmConfig]:
        """Every config compiled for a weight of ``key`` (for a scale-only key, also the scale+offset kernels that
        compute it with its zero offsets), once each; [] where the path does not read the key's layout."""
        if key.layout not in self.layouts:
            return []
        seen: dict[str, GemmConfig] = {}
        for kernel_key in key.kernel_keys():
            for config in self._compiled(kernel_key):
                seen.setdefault(config.kernel_name, config)
        return list(seen.values())

    def kernel_key(self, config: GemmConfig, key: KernelKey) -> KernelKey:
        """The compiled key that runs ``config`` on a weight of ``key`` (its own, else the first fallback)."""
        for kernel_key in key.kernel_keys():
            if any(c.kernel_name == config.kernel_name for c in self._compiled(kernel_key)):
                return kernel_key
        return key

    def _compiled(self, key: KernelKey) -> tuple[GemmConfig, ...]:
        return _compiled_configs(self, key)

    @abc.abstractmethod
    def parse_name(self, name: str) -> GemmConfig | None:
        """The config a name names, or None when the name is not of this path's form."""

    def fits(self, config: GemmConfig, problem: GemmProblem, key: KernelKey) -> str | None:
        """Why ``config`` cannot run ``problem`` on a weight of ``key``, or None. The shape rules here; a path adds
        its own (rows, split limits)."""
        return shape_rules.violation(self.name, key.layout, problem.N, problem.K, problem.group_size,
                                     getattr(config, "tile_n", 0))

    @abc.abstractmethod
    def choose(self, configs: list[GemmConfig], problem: GemmProblem, key: KernelKey,
               gpu: Gpu) -> GemmConfig | None:
        """The path's heuristic: its best guess among ``configs`` (compiled for the key) for ``problem``, split,
        or None when none of them fits."""

    @abc.abstractmethod
    def split_variants(self, config: GemmConfig, problem: GemmProblem, gpu: Gpu) -> list[GemmConfig]:
        """``config`` with each split the profiler's sweep times (the unsplit one first)."""

    def plan(self, config: GemmConfig, problem: GemmProblem, key: KernelKey, gpu: Gpu,
             device: torch.device) -> Plan:
        """The plan of ``config`` for ``problem`` on ``device`` (current), through the extension's prepare."""
        kernel_key = self.kernel_key(config, key)
        launch = extension().prepare(self.name, config.kernel_name, kernel_key.as_tuple(), problem.M, problem.N,
                                     problem.K, problem.group_size, config.split_k, config.split_k_mode)
        return KernelPlan(config, device, launch, launch.workspace_bytes, launch.semaphores,
                          offsets=kernel_key.quant != "scale")


@functools.cache
def _compiled_configs(path: KernelPath, key: KernelKey) -> tuple[GemmConfig, ...]:
    # The build's registries never change, and gemm() asks on every plan: read them once per key.
    configs = []
    for name in extension().compiled_configs(path.name, key.as_tuple()):
        config = path.parse_name(name)
        if config is None:
            raise RuntimeError(f"mixgemm: the extension lists a {path.name} config {name!r} that "
                               f"mixgemm.paths.{path.name} cannot name: the build and the package disagree")
        configs.append(config)
    return tuple(configs)
