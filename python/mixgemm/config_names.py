"""GEMM config names: the one parser from a :attr:`GemmConfig.name` string back to a :class:`GemmConfig`.

A name is what crosses boundaries where a dataclass cannot: the ``str config`` argument of the
``mixgemm::gemm`` custom op (library.py), the ``--config`` flag of the profiler (bench/cli.py) and the
tuning cache. Names look like ``16x128x64_w16x32x64_s4`` (tile M x N x K, warp tile, pipeline stages),
with ``_k4s`` / ``_k4p`` appended for split-K 4, serial / parallel, ``_sk264`` for stream-K over 264
blocks, and a ``gemv_`` prefix for the decode
path (``gemv_8x64x256_w8x64x64_s2_k4s``). sm90 configs are named by tile, cluster, schedule and scheduler
(``sm90_256x128x64_c1x1_coop_persistent``; a stream-K one split K ways ends in ``_k4s``); the dequant path
has one config, ``dequant_cublas``.
``"auto"`` stands for "let :func:`mixgemm.gemm` choose".
"""

from __future__ import annotations

import re

from .config import DEQUANT_NAME, GemmConfig

AUTO = "auto"

_NAME = re.compile(r"(?:(gemv)_)?(\d+)x(\d+)x(\d+)_w(\d+)x(\d+)x(\d+)_s(\d+)(?:_k(\d+)([sp])|_sk(\d+))?")
_SM90_NAME = re.compile(r"sm90_(\d+)x(\d+)x(\d+)_c(\d+)x(\d+)_([a-z]+)_([a-z]+)(?:_k(\d+)([sp]))?")
_MODE_OF_LETTER = {"s": "serial", "p": "parallel", None: "none"}


def from_name(name: str) -> GemmConfig | str:
    """``"auto"`` -> ``"auto"``; a :attr:`GemmConfig.name` -> that GemmConfig. Raises ValueError otherwise.

    Only the syntax and GemmConfig's own rules (split-K count vs mode) are checked here; whether the tile
    is compiled into this build is for :func:`mixgemm.gemm` to say, since that needs the extension.
    """
    if not isinstance(name, str):
        raise ValueError(f"invalid config {name!r}: expected a string")
    if name == AUTO:
        return AUTO
    if name.strip() == DEQUANT_NAME:
        return GemmConfig.dequant()
    sm90 = _SM90_NAME.fullmatch(name.strip())
    if sm90:
        *sizes, schedule, scheduler, split_k, mode = sm90.groups()
        config = GemmConfig.sm90(*(int(v) for v in sizes), schedule, scheduler)
        # GemmConfig refuses what the sm90 path cannot split (a persistent config, "_k4p", "_k1s").
        return config if split_k is None else config.with_split_k(int(split_k), _MODE_OF_LETTER[mode])
    match = _NAME.fullmatch(name.strip())
    if not match:
        raise ValueError(
            f"invalid config {name!r}: expected 'auto', a name like 16x128x64_w16x32x64_s4 (optionally "
            "_k4s / _k4p for split-K 4, serial / parallel, _sk264 for stream-K over 264 blocks; gemv_ for the "
            "decode path), "
            f"sm90_256x128x64_c1x1_coop_persistent or {DEQUANT_NAME}"
        )
    tile = [int(v) for v in match.groups()[1:8]]
    if match[11]:  # stream-K over that many blocks; GemmConfig refuses it off the sm80 path
        return GemmConfig(*tile, split_k=int(match[11]), split_k_mode="streamk", path=match[1] or "sm80")
    split_k = int(match[9]) if match[9] else 1
    # GemmConfig raises ValueError for a contradiction such as "_k1s" (split-K 1 cannot be serial).
    return GemmConfig(*tile, split_k=split_k, split_k_mode=_MODE_OF_LETTER[match[10]], path=match[1] or "sm80")


def to_name(config: GemmConfig | str) -> str:
    """The inverse of :func:`from_name`: a GemmConfig or a valid name (checked) -> its canonical name."""
    if isinstance(config, GemmConfig):
        return config.name
    if isinstance(config, str):
        parsed = from_name(config)
        return parsed if isinstance(parsed, str) else parsed.name
    raise ValueError(f"config must be 'auto', a GemmConfig or a GemmConfig name, got {type(config).__name__}")
