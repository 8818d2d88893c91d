"""The kernel paths, one module each (base.py says what a path provides):

  * ``sm80``: the CUTLASS 2.x-style mma.sync GEMM, any M, either layout (the sm90 layout with small-M tiles);
  * ``decode``: a batched GEMV on tensor cores for up to 8 or 16 rows of x, either layout;
  * ``sm90``: the CUTLASS 3.x wgmma/TMA GEMM, any M, sm90 layout, Hopper only;
  * ``dequant``: our dense expansion of the weight, then one cuBLAS GEMM; any M, either layout.

This module holds the list and what reads across it: a config's name, and the configs compiled for a key.
mixgemm.dispatch chooses among them.
"""

from __future__ import annotations

import torch

from ..kernel_key import KernelKey
from . import decode, dequant, sm80, sm90
from .base import GemmConfig, GemmProblem, Gpu, KernelPath, Plan
from .decode import DecodeConfig
from .dequant import DequantConfig
from .sm80 import Sm80Config
from .sm90 import Sm90Config

PATHS: dict[str, KernelPath] = {p.PATH.name: p.PATH for p in (sm80, decode, sm90, dequant)}
AUTO = "auto"

__all__ = ["AUTO", "DecodeConfig", "DequantConfig", "GemmConfig", "GemmProblem", "Gpu", "KernelPath", "PATHS", "Plan",
           "Sm80Config", "Sm90Config", "compiled_configs", "from_dict", "from_name", "path_of", "to_name"]


def path_of(config: GemmConfig) -> KernelPath:
    return PATHS[config.path]


def from_name(name: str) -> GemmConfig | str:
    """``"auto"`` or a path's name (``"sm80"``, ``"decode"``, ``"sm90"``, ``"dequant"``: that path's heuristic
    choice) as given; a config's :attr:`~GemmConfig.name` -> that config. ValueError otherwise.

    Only the syntax and the config's own rules are checked here; whether the kernel is compiled into this build is
    for :func:`mixgemm.gemm` to say, since that needs the weight's key."""
    if not isinstance(name, str):
        raise ValueError(f"invalid config {name!r}: expected a string")
    name = name.strip()
    if name == AUTO or name in PATHS:
        return name
    for path in PATHS.values():
        config = path.parse_name(name)
        if config is not None:
            return config
    raise ValueError(
        f"invalid config {name!r}: expected 'auto', a path name ({', '.join(PATHS)}) or a config name such as "
        "16x128x64_w16x32x64_s4 (sm80; _k4s / _k4p for split-K 4 serial / parallel, _sk264 for stream-K over 264 "
        f"blocks), decode_m8_w4_k4s, sm90_128x128x64_c1x1_coop_streamk_k2s (_k4r: reduce-scatter) or {dequant.NAME}"
    )


def to_name(config: GemmConfig | str) -> str:
    """The inverse of :func:`from_name`: a config or a valid name (checked) -> its canonical name."""
    if isinstance(config, GemmConfig):
        return config.name
    if isinstance(config, str):
        parsed = from_name(config)
        return parsed if isinstance(parsed, str) else parsed.name
    raise ValueError(f"config must be 'auto', a path name, a GemmConfig or a config name, got {type(config).__name__}")


def from_dict(fields: dict) -> GemmConfig:
    """A config from :meth:`GemmConfig.as_dict` (the tuning cache's entries). ValueError or TypeError when the
    fields do not make one."""
    fields = dict(fields)
    path = PATHS.get(fields.pop("path", None))
    if path is None:
        raise ValueError("a config's fields must name its path")
    return path.config_type(**fields)


def compiled_configs(dtype: torch.dtype = torch.float16, bits: int = 4, path: str | None = "sm80",
                     layout: str | None = None) -> list[GemmConfig]:
    """Every config compiled into this build for activation ``dtype`` and ``bits``-bit weights, on ``path``
    (``"sm80"`` by default, ``"decode"``, ``"sm90"`` (empty in a build without sm_90a), ``"dequant"``, or
    ``None`` for every path), reading weights in ``layout`` (``"sm80"`` or ``"sm90"``; ``None``: either), with
    zero points (the scale+offset kernels)."""
    if path is not None and path not in PATHS:
        raise ValueError(f"compiled_configs: path must be one of {tuple(PATHS)} or None, got {path!r}")
    layouts = ("sm80", "sm90") if layout is None else (layout,)
    configs: dict[tuple, GemmConfig] = {}
    for layout_name in layouts:
        try:
            key = KernelKey.of(dtype, bits, layout_name)
        except ValueError as error:
            raise ValueError(f"compiled_configs: {error}") from None
        for p in PATHS.values():
            if path is None or p.name == path:
                for config in p.compiled(key):
                    configs.setdefault((p.name, config.kernel_name), config)
    return list(configs.values())
