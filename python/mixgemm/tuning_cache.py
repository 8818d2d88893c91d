"""The tuned-config cache: the winners of ``python -m mixgemm tune``, one per (GPU, M bucket, N, K, G, kernel key).

``gemm(..., config="auto")`` asks :func:`lookup` first (mixgemm.dispatch) and falls back to the paths'
heuristics. The file is JSON: ``{"version": 2, "entries": {key: {"config": {fields, "path"}, "time_us": float,
"M": the M it was tuned at, "saved": ISO time}}}``. Keys are strings so the file stays diffable and
hand-editable; :func:`cache_key` is the only place that builds them.
"""

from __future__ import annotations

import contextlib
import datetime
import json
import os
import pathlib
import tempfile
import warnings

from .kernel_key import KernelKey
from .paths import GemmConfig, from_dict

#
# Version 2 files key their entries by kernel key and store each config's path (version 1 keyed by dtype and
# layout, with one config class for every path).
_CACHE_VERSION = 2
_BUCKET_CAP = 4096
_OVERFLOW_BUCKET = f">{_BUCKET_CAP}"

# Parsed cache files: path -> ((inode, mtime_ns, size), entries). gemm() consults the cache on every
# "auto" call, so a lookup must cost one os.stat, not a JSON parse. The stat catches another process's
# save: os.replace gives the file a new inode even when the mtime granularity hides the change.
_memo: dict[str, tuple[tuple[int, int, int], dict]] = {}
# Called after every save_choice: gemm's plans (ops.clear_plans) hold configs resolved from the file as it
# was, so a tune run must drop them for the next call to see its choices.
on_save: list = []


def cache_path() -> pathlib.Path:
    """``$MIXGEMM_CACHE`` if set, else ``$XDG_CACHE_HOME/mixgemm/tuned.json`` (``~/.cache`` by default)."""
    override = os.environ.get("MIXGEMM_CACHE")
    if override:
        return pathlib.Path(override).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return pathlib.Path(base) / "mixgemm" / "tuned.json"


def m_bucket(M: int) -> str:
    """The smallest power of two >= M, up to 4096; every larger M shares the bucket ``">4096"``.

    Kernel choice changes with the tile-row count, which is what powers of two track; beyond 4096 rows
    every shape is compute bound and one choice serves all.
    """
    if isinstance(M, bool) or not isinstance(M, int) or M < 1:
        raise ValueError(f"tuning: M must be a positive int, got {M!r}")
    if M > _BUCKET_CAP:
        return _OVERFLOW_BUCKET
    return str(1 << (M - 1).bit_length())


def cache_key(gpu_name: str, M: int, N: int, K: int, G: int, key: KernelKey) -> str:
    """The cache key of one tuned problem, e.g. ``"NVIDIA H100 80GB HBM3|M16|N4096|K4096|G128|fp16-int4-sm80-
    scale_offset"``."""
    if not isinstance(key, KernelKey):
        raise ValueError(f"tuning: key must be a KernelKey, got {type(key).__name__}")
    return f"{gpu_name}|M{m_bucket(M)}|N{int(N)}|K{int(K)}|G{int(G)}|{key.name}"


def load_cache(path=None) -> dict:
    """The entries of the cache file at ``path`` (default :func:`cache_path`); ``{}`` if absent.

    A file that is not valid JSON in our layout (a crash mid-write by an older tool, a hand edit) is
    treated as empty with a warning: a broken cache must never break ``gemm``; the next save rewrites it.
    """
    path = pathlib.Path(path) if path is not None else cache_path()
    try:
        text = path.read_text()
    except FileNotFoundError:
        return {}
    except OSError as exc:
        warnings.warn(f"mixgemm: cannot read tuning cache {path} ({exc}); ignoring it", stacklevel=2)
        return {}
    try:
        data = json.loads(text)
        entries = data["entries"]
        if not isinstance(entries, dict):
            raise TypeError("'entries' is not an object")
    except (ValueError, KeyError, TypeError) as exc:
        warnings.warn(f"mixgemm: tuning cache {path} is corrupt ({exc}); treating it as empty", stacklevel=2)
        return {}
    if data.get("version") != _CACHE_VERSION:
        warnings.warn(f"mixgemm: tuning cache {path} was written by another version of mixgemm (file version "
                      f"{data.get('version')!r}, this one reads {_CACHE_VERSION}); its entries are ignored and the "
                      "next `python -m mixgemm tune` rewrites it", stacklevel=2)
        return {}
    return entries


def _config_from_json(fields) -> GemmConfig | None:
    try:
        return from_dict(fields)
    except (TypeError, ValueError):
        return None


def save_choice(gpu_name: str, M: int, N: int, K: int, G: int, key: KernelKey, config: GemmConfig,
                time_us: float | None = None, path=None) -> pathlib.Path:
    """Records ``config`` as the winner for its key, merged into the file's current contents.

    The file is re-read just before writing (another tuner may have saved meanwhile) and replaced
    atomically: the new JSON goes to a temporary file in the same directory, then ``os.replace`` swaps
    it in, so a reader sees the old file or the new one, never a half-written one.
    """
    if not isinstance(config, GemmConfig):
        raise ValueError(f"tuning: config must be a GemmConfig, got {type(config).__name__}")
    path = pathlib.Path(path) if path is not None else cache_path()
    cache = cache_key(gpu_name, M, N, K, G, key)
    entries = load_cache(path)
    entries[cache] = {
        "config": config.as_dict(),
        "time_us": None if time_us is None else float(time_us),
        "M": int(M),
        "saved": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps({"version": _CACHE_VERSION, "entries": entries}, indent=1, sort_keys=True)
    fd, tmp = tempfile.mkstemp(prefix=path.name + ".", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text + "\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        # Leave no stray temporary file behind; the old cache (if any) is untouched.
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    for hook in on_save:
        hook()
    return path


def _entries_memoized(path: pathlib.Path) -> dict:
    try:
        st = os.stat(path)
    except OSError:
        return {}
    stamp = (st.st_ino, st.st_mtime_ns, st.st_size)
    memo = _memo.get(str(path))
    if memo is not None and memo[0] == stamp:
        return memo[1]
    entries = load_cache(path)
    _memo[str(path)] = (stamp, entries)
    return entries


def lookup(gpu_name: str, M: int, N: int, K: int, G: int, key: KernelKey, path=None) -> GemmConfig | None:
    """The tuned config for this problem's bucket and kernel key, or None (no file, no entry, or an unreadable
    one)."""
    path = pathlib.Path(path) if path is not None else cache_path()
    entry = _entries_memoized(path).get(cache_key(gpu_name, M, N, K, G, key))
    if not isinstance(entry, dict):
        return None
    fields = entry.get("config")
    return _config_from_json(fields) if isinstance(fields, dict) else None
