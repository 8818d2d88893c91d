"""Presenting results: a fixed-width table for the terminal, JSON and CSV files, and PNG plots.

A result is a flat dict (one per timed or skipped case). Keys used here: ``K``, ``N``, ``M``, ``peer``,
``config``, ``time_us`` (None when the case did not run), ``tflops``, ``gbps``, ``pct_floor``,
``speedup`` and, for sweeps, ``tile``, ``stages``, ``split_k``, ``split_k_mode``. Nothing here needs a
GPU; matplotlib is imported only to plot (Agg backend: no display needed), and is optional.
"""

from __future__ import annotations

import csv
import json
import math
import pathlib
import warnings
from typing import Iterable, Sequence

REFERENCE_PEER = "mixgemm"

# The CSV's leading columns, in this order; any other keys follow in first-seen order.
_CSV_FIRST = ("K", "N", "M", "G", "dtype", "peer", "config", "status", "time_us", "min_us", "max_us",
              "tflops", "gbps", "pct_floor", "floor_us", "speedup")


def _case(record: dict) -> tuple:
    return (record.get("K"), record.get("N"), record.get("M"), record.get("G"), record.get("dtype"))


def _timed(record: dict) -> bool:
    t = record.get("time_us")
    return isinstance(t, (int, float)) and math.isfinite(t) and t > 0


def add_speedups(records: list[dict], reference: str = REFERENCE_PEER) -> None:
    """Sets ``speedup`` = peer time / ``reference`` time on every timed record of the same problem.

    Above 1 means the reference (our GEMM) is faster than that peer; the reference row itself gets 1.
    """
    reference_time = {_case(r): r["time_us"] for r in records if r.get("peer") == reference and _timed(r)}
    for r in records:
        ref = reference_time.get(_case(r))
        r["speedup"] = r["time_us"] / ref if ref and _timed(r) else None


# ---------------------------------------------------------------------------------------------------
# Table


def _fmt_us(t) -> str:
    if t is None:
        return "n/a"
    return f"{t:.2f}" if t < 100 else f"{t:.1f}"


def _fmt(value, spec: str, suffix: str = "") -> str:
    return "-" if value is None else format(value, spec) + suffix


# (header, function of a record, right-aligned?)
_COLUMNS = {
    "shape": ("K x N", lambda r: f"{r['K']}x{r['N']}", False),
    "M": ("M", lambda r: str(r["M"]), True),
    "peer": ("peer", lambda r: str(r.get("peer", "")), False),
    "config": ("config", lambda r: str(r.get("config") or ""), False),
    "layout": ("layout", lambda r: str(r.get("layout") or ""), False),
    "us": ("us", lambda r: _fmt_us(r.get("time_us")), True),
    "tflops": ("TFLOP/s", lambda r: _fmt(r.get("tflops"), ".1f"), True),
    "gbps": ("GB/s", lambda r: _fmt(r.get("gbps"), ".0f"), True),
    "pct_floor": ("% floor", lambda r: _fmt(r.get("pct_floor"), ".1f"), True),
    "speedup": ("mixgemm speedup", lambda r: _fmt(r.get("speedup"), ".2f", "x"), True),
}
BENCH_COLUMNS = ("shape", "M", "peer", "config", "us", "tflops", "gbps", "pct_floor", "speedup")
SWEEP_COLUMNS = ("shape", "M", "peer", "layout", "config", "us", "tflops", "gbps", "pct_floor")


def format_grid(headers: Sequence[str], rows: Sequence[Sequence[str]], right: Sequence[bool],
                breaks: Sequence[bool] | None = None) -> str:
    """Fixed-width text: a header, a rule, the rows; a blank line before each row whose ``breaks`` is set."""
    widths = [max([len(h)] + [len(row[i]) for row in rows]) for i, h in enumerate(headers)]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(c.rjust(w) if r else c.ljust(w) for c, w, r in zip(cells, widths, right)).rstrip()

    out = [line(headers), "  ".join("-" * w for w in widths)]
    for i, row in enumerate(rows):
        if breaks is not None and breaks[i] and i > 0:
            out.append("")
        out.append(line(row))
    return "\n".join(out)


def format_table(records: Sequence[dict], columns: Sequence[str] = BENCH_COLUMNS) -> str:
    """One row per record, a blank line between problems (K, N, M)."""
    rows = [[_COLUMNS[c][1](r) for c in columns] for r in records]
    problems = [(r.get("K"), r.get("N"), r.get("M")) for r in records]
    breaks = [i > 0 and problems[i] != problems[i - 1] for i in range(len(records))]
    return format_grid([_COLUMNS[c][0] for c in columns], rows, [_COLUMNS[c][2] for c in columns], breaks)


# ---------------------------------------------------------------------------------------------------
# Files


def _jsonable(value):
    # JSON has no NaN/inf; the files must load in any strict parser.
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    return str(value)


def write_json(path, records: Iterable[dict], meta: dict | None = None) -> pathlib.Path:
    """``{"meta": ..., "results": [...]}``, with non-finite numbers written as null."""
    path = pathlib.Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(_jsonable({"meta": meta or {}, "results": list(records)}), indent=1) + "\n")
    return path


def write_csv(path, records: Iterable[dict]) -> pathlib.Path:
    """One row per record; list-valued fields (raw samples) are left to the JSON file."""
    path = pathlib.Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    records = list(records)
    keys: list[str] = [k for k in _CSV_FIRST if any(k in r for r in records)]
    for r in records:
        keys.extend(k for k, v in r.items() if k not in keys and not isinstance(v, (list, tuple, dict)))
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=keys, extrasaction="ignore")
        writer.writeheader()
        for r in records:
            writer.writerow({k: "" if r.get(k) is None else r.get(k) for k in keys})
    return path


# ---------------------------------------------------------------------------------------------------
# Plots


def _pyplot():
    """matplotlib's pyplot on the Agg backend, or None (with a warning) if matplotlib is missing."""
    try:
        import matplotlib

        matplotlib.use("Agg")  # files only: works on headless machines
        import matplotlib.pyplot as plt
    except ImportError:
        warnings.warn("mixgemm.bench: matplotlib is not installed; skipping plots", stacklevel=3)
        return None
    return plt


def _best(records: Iterable[dict], key) -> dict:
    """The fastest timed record for each value of ``key(record)``."""
    best: dict = {}
    for r in records:
        if _timed(r):
            k = key(r)
            if k not in best or r["time_us"] < best[k]["time_us"]:
                best[k] = r
    return best


def plot_time_vs_m(records: Sequence[dict], path, title: str = "") -> pathlib.Path | None:
    """Time vs M (log-log), one line per tile config at its best split-K setting for each M.

    Records whose ``peer`` is not "mixgemm" (e.g. "mixgemm:auto", "cublas_fp16") are drawn dashed, as
    references to read the configs against.
    """
    plt = _pyplot()
    if plt is None:
        return None
    lines: dict[str, dict[int, float]] = {}
    for (label, M), r in _best(records, lambda r: (_line_label(r), r["M"])).items():
        lines.setdefault(label, {})[M] = r["time_us"]

    fig, ax = plt.subplots(figsize=(10, 6))
    for label in sorted(lines, key=lambda s: (not s.startswith("("), s)):
        points = sorted(lines[label].items())
        style = "--" if label.startswith("(") else "-"
        ax.plot([m for m, _ in points], [t for _, t in points], style, marker="o", markersize=3, label=label)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("M (rows of x)")
    ax.set_ylabel("time per call (us)")
    ax.set_title(title or "time vs M per config (best split-K)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return _save(fig, plt, path)


def _line_label(record: dict) -> str:
    if record.get("peer", REFERENCE_PEER) != REFERENCE_PEER:
        return f"({record['peer']})"
    return str(record.get("tile") or record.get("config"))


def plot_stages_splitk_heatmap(records: Sequence[dict], path, title: str = "") -> pathlib.Path | None:
    """One heat map per M: rows = pipeline stages, columns = split-K, cell = best time over the other
    choices (tile, split-K mode). Colour is time relative to that M's best cell, so panels compare."""
    plt = _pyplot()
    if plt is None:
        return None
    swept = [r for r in records if r.get("peer", REFERENCE_PEER) == REFERENCE_PEER and r.get("stages")]
    best = _best(swept, lambda r: (r["M"], r["stages"], r["split_k"]))
    ms = sorted({M for M, _, _ in best})
    stages = sorted({s for _, s, _ in best})
    splits = sorted({k for _, _, k in best})
    if not ms:
        raise ValueError("plot_stages_splitk_heatmap: no timed sweep records (with 'stages', 'split_k')")

    cols = min(len(ms), 4)
    rows = math.ceil(len(ms) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(3.2 * cols + 1, 2.6 * rows + 0.8), squeeze=False,
                             constrained_layout=True)  # room for the titles and the shared colour bar
    image = None
    for ax, M in zip(axes.flat, ms):
        fastest = min(r["time_us"] for (m, _, _), r in best.items() if m == M)
        grid = [[best[(M, s, k)]["time_us"] / fastest if (M, s, k) in best else math.nan for k in splits]
                for s in stages]
        image = ax.imshow(grid, cmap="viridis_r", vmin=1.0, vmax=2.0, aspect="auto")
        for i, s in enumerate(stages):
            for j, k in enumerate(splits):
                if (M, s, k) in best:
                    ax.text(j, i, _fmt_us(best[(M, s, k)]["time_us"]), ha="center", va="center", fontsize=7,
                            color="white" if grid[i][j] > 1.5 else "black")
        ax.set_title(f"M = {M}", fontsize=9)
        ax.set_xticks(range(len(splits)), [str(k) for k in splits], fontsize=8)
        ax.set_yticks(range(len(stages)), [str(s) for s in stages], fontsize=8)
        ax.set_xlabel("split-K", fontsize=8)
        ax.set_ylabel("stages", fontsize=8)
    for ax in list(axes.flat)[len(ms):]:
        ax.axis("off")
    fig.colorbar(image, ax=axes.ravel().tolist(), label="time / best at this M (us in cells)", shrink=0.8)
    fig.suptitle(title or "best time by stages x split-K")
    return _save(fig, plt, path)


def _save(fig, plt, path) -> pathlib.Path:
    path = pathlib.Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120, bbox_inches="tight")
    plt.close(fig)
    return path
