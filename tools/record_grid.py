#!/usr/bin/env python3
"""The DESIGN-grid table of BENCHMARKS.md from peers-harness JSON (stdlib only, no GPU).

  python tools/record_grid.py benchmarks/2026-11-27-h100-grid-peers.json [more.json[@M,M...] ...]

One row per (K x N, M): mixgemm with zero points and scale-only, the best peer (the fastest of Machete, vLLM
Marlin, the original Marlin and gemlite in either variant that passed the harness's numerics check, and cuBLAS
fp16 from M = 128, where DESIGN.md section 7 makes it a target), both ratios and the config ``auto`` ran. A ratio
is printed to three places and a cell counts as at or ahead where both print 1.000 or less; a ratio above that is
bold. Where files overlap, the last one given wins the whole cell, so a ratio never mixes two runs. A file named
as ``FILE@8,16`` gives only those rows (M values): the cells of a run that the current ``auto`` still picks.
"""

from __future__ import annotations

import json
import os
import re
import sys

# DESIGN.md section 7: cuBLAS fp16 is a target from M = 128 on, where the GEMM is no longer weight-read bound.
CUBLAS_FROM_M = 128
DISPLAY = {"machete": "Machete", "vllm_marlin": "vLLM Marlin", "ist_marlin": "Marlin", "gemlite": "gemlite",
           "cublas_fp16": "cuBLAS fp16"}
OURS = ("mixgemm[zp]", "mixgemm[sym]")


def family(peer: str) -> str:
    return peer.partition("[")[0]


def display(peer: str) -> str:
    name, _, variant = peer.rstrip("]").partition("[")
    return f"{DISPLAY.get(name, name)} {variant}".strip()


def _path_and_rows(arg: str) -> tuple[str, set[int] | None]:
    """``FILE`` or ``FILE@M,M...``: the file and the rows (M values) to take from it, None for all. A file that
    exists under the whole name is that file, whatever '@' its path holds."""
    if os.path.exists(arg) or "@" not in arg:
        return arg, None
    path, _, only = arg.rpartition("@")
    if not re.fullmatch(r"\d+(,\d+)*", only):
        raise SystemExit(f"record_grid: {arg}: the rows after @ must be a comma list of M, got {only!r}")
    return path, {int(m) for m in only.split(",")}


def load_cells(paths: list[str]) -> dict:
    cells: dict = {}
    for arg in paths:
        p, ms = _path_and_rows(arg)
        run: dict = {}
        try:
            with open(p) as f:
                records = json.load(f)["results"]
            for rec in records:
                if rec["ok"] and rec["median_us"] and (ms is None or rec["M"] in ms):
                    run.setdefault((rec["K"], rec["N"], rec["M"]), {})[rec["peer"]] = (rec["median_us"],
                                                                                       rec.get("note"))
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise SystemExit(f"record_grid: {p}: not a peers-harness record ({exc!r})") from None
        missing = ms - {M for _, _, M in run} if ms is not None else set()
        if missing:
            raise SystemExit(f"record_grid: {arg}: no passing rows at M = {sorted(missing)}")
        cells.update(run)
    return cells


def best_peer(peers: dict, m: int) -> tuple[str, float] | None:
    """The fastest peer of DESIGN.md's families (a yardstick such as ``read_floor`` is no rival), cuBLAS from
    CUBLAS_FROM_M rows."""
    rivals = {k: t for k, (t, _) in peers.items()
              if family(k) in DISPLAY and (k != "cublas_fp16" or m >= CUBLAS_FROM_M)}
    if not rivals:
        return None
    name = min(rivals, key=rivals.get)
    return name, rivals[name]


def grid_table(paths: list[str]) -> str:
    cells = load_cells(paths)
    out = ["| K x N | M | mixgemm zp | mixgemm sym | best peer | zp / best | sym / best | config (zp) |",
           "|---|---|---|---|---|---|---|---|"]
    ahead = zp_ahead = total = incomplete = 0
    behind = []
    for key in sorted(cells, key=lambda k: (k[0] * k[1], k[0], k[2])):
        peers = cells[key]
        best = best_peer(peers, key[2])
        if best is None or any(ours not in peers for ours in OURS):
            incomplete += 1
            continue
        name, t_best = best
        zp, config = peers["mixgemm[zp]"]
        sym, _ = peers["mixgemm[sym]"]
        r_zp, r_sym = round(zp / t_best, 3), round(sym / t_best, 3)
        total += 1
        zp_ahead += r_zp <= 1.0
        ahead += r_zp <= 1.0 and r_sym <= 1.0
        if r_zp > 1.0 or r_sym > 1.0:
            behind.append(f"{key[0]}x{key[1]} M = {key[2]} ({r_zp:.3f} / {r_sym:.3f} {display(name)})")

        def ratio(r):
            return f"**{r:.3f}**" if r > 1.0 else f"{r:.3f}"
        cfg = (config or "").removeprefix("config=")
        out.append(f"| {key[0]}x{key[1]} | {key[2]} | {zp:.2f} | {sym:.2f} | {t_best:.2f} {display(name)} | "
                   f"{ratio(r_zp)} | {ratio(r_sym)} | `{cfg}` |")
    out.append(f"\nAt or ahead of the best peer in {ahead} of {total} cells in both variants, {zp_ahead} with zero "
               f"points. Behind: {'; '.join(behind) if behind else 'none'}.")
    if incomplete:
        out.append(f"Left out: {incomplete} cell{'s' if incomplete > 1 else ''} without both mixgemm variants or a "
                   "rival that passed its check.")
    return "\n".join(out)


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__)
        return 2
    print(grid_table(argv))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
