#!/usr/bin/env python3
"""One line per cell of ``python -m mixgemm sweep`` JSON (stdlib only, no GPU): where ``config="auto"`` stands.

  python tools/sweep_summary.py OUT/sweep_*/sweep.json benchmarks/2026-11-28-h100-sweep-wide-tile-splits.json

For each (K x N, M, layout): the config ``auto`` ran and its time over the fastest compiled config's (the sweep's
verdict: issue 35 wants it within 3%), then the three fastest configs with theirs. The ``auto`` row is its own
timing of the pick, so it can read below 1.000 where its samples ran faster than the pick's own config row.
"""

from __future__ import annotations

import json
import sys

TOP = 3


def summary_lines(results: list[dict]) -> list[str]:
    """The lines for one sweep's result rows."""
    cells: dict = {}
    for r in results:
        if r.get("status") != "ok":
            continue
        cell = cells.setdefault((r["K"], r["N"], r["M"], r.get("layout", "")), {"configs": [], "auto": None})
        if r["peer"] == "mixgemm":
            cell["configs"].append((r["time_us"], r["config"]))
        elif r["peer"] == "mixgemm:auto":
            cell["auto"] = (r["time_us"], r["config"])
    lines = []
    for (K, N, M, layout), cell in sorted(cells.items()):
        if not cell["configs"]:
            continue
        ranked = sorted(cell["configs"])
        best = ranked[0][0]
        auto = cell["auto"]
        auto_text = f"{auto[1]} {auto[0]:.2f} us {auto[0] / best:.3f}" if auto else "(no auto row)"
        top = " ; ".join(f"{name} {us:.2f} {us / best:.3f}" for us, name in ranked[:TOP])
        lines.append(f"{K}x{N} M={M} {layout}: auto {auto_text} | fastest {top}")
    return lines


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    for path in argv:
        with open(path) as f:
            results = json.load(f)["results"]
        for line in summary_lines(results):
            print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
