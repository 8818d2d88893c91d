#!/usr/bin/env python3
"""The MoE and tensor-parallel tables of BENCHMARKS.md, from committed JSON (stdlib only, no GPU).

  python tools/record_moe_tp.py moe benchmarks/2026-11-26-h100-moe-sm90.json
  python tools/record_moe_tp.py tp benchmarks/2026-11-26-h100-tp-shards-floor.json \
      benchmarks/2026-11-26-h100-tp-shards-tp2-tp4.json benchmarks/2026-11-26-h100-tp-shards-tp8.json
  python tools/record_moe_tp.py tp - benchmarks/2026-11-27-h200-tp-shards-peers.json

moe: rows of ``python -m mixgemm bench-moe`` (the peers' MoE harness with mixgemm's grouped kernels added), whole
layer, AWQ zeros, fp16, group 128, each ratio between peers of one run (and the sm80-layout peer's column, where
the run has it). tp: the peers harness on Llama-3-70B's
TP shards (mixgemm[zp] against the fastest other peer that passed its numerics check; a file of summary ``rows``
gives that pair per cell) and ``python -m mixgemm bench``'s read floor at M = 1 and 16 (several bench files
joined by commas: FLOOR.json,LATER.json), or ``-`` for a GPU without a bench run (no read-floor column; the shards
are the first peers file's shapes). Where files overlap, the last one given wins the whole cell.
"""

from __future__ import annotations

import json
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from record_grid import load_cells  # the peers-harness reader of the grid table

MODEL_NAMES = {"qwen3-30b-a3b": "Qwen3-30B-A3B", "mixtral-8x7b": "Mixtral-8x7B", "deepseek-v2-lite": "DeepSeek-V2-Lite"}


def moe_table(paths: list[str]) -> str:
    rows = [r for p in paths for r in json.load(open(p))["rows"]]
    # A run with the sm80-layout peer (no sm90 form) gets its column: the same kernels below the sm90 form's
    # threshold, the sm80 tiles above it.
    sm80 = any("mixgemm_moe[zp-sm80]" in r["peers"] for r in rows)
    out = ["| model | tokens | mixgemm | " + ("sm80 layout | " if sm80 else "") + "Marlin MoE | / Marlin | best dense "
           "16-bit | / best dense | read floor (3.0 TB/s) | / floor |",
           "|---|---|---|---|---|---|---|---|---|" + ("---|" if sm80 else "")]
    for r in rows:
        peers = r["peers"]

        def moe_us(name):
            e = peers.get(name, {})
            return e.get("us", {}).get("moe") if e.get("ok", True) and "error" not in e else None
        ours, marlin = moe_us("mixgemm_moe[zp]"), moe_us("marlin_moe[zp]")
        dense = [t for t in (moe_us("dense_fp16_loop"), moe_us("grouped_mm_bf16")) if t]
        floor = r["read_us_at_3TBs"]["int4_zp"]
        best = min(dense) if dense else None
        other = ""
        if sm80:
            t = moe_us("mixgemm_moe[zp-sm80]")
            other = f"{t:.1f} | " if t else "- | "
        out.append(f"| {MODEL_NAMES.get(r['model'], r['model'])} | {r['M']} | {ours:.1f} | {other}{marlin:.1f} | "
                   f"{marlin / ours:.2f}x faster | {best:.1f} | {best / ours:.2f}x | {floor:.1f} | "
                   f"{ours / floor:.2f}x |")
    return "\n".join(out)


def _peer_times(path: str) -> dict:
    """One peers run's cells, (K, N, M) -> {peer: median us}, by the grid table's reader. A run whose per-peer JSON
    was lost keeps the harness's printed summary ("rows"): ours and the fastest other peer per cell."""
    with open(path) as f:
        rows = json.load(f).get("rows")
    if rows is not None:
        return {(r["K"], r["N"], r["M"]): {"mixgemm[zp]": r["mixgemm_zp_us"], r["best_peer"]: r["best_peer_us"]}
                for r in rows}
    return {key: {peer: us for peer, (us, _) in peers.items()} for key, peers in load_cells([path]).items()}


def tp_table(floor_paths: str, grid_paths: list[str]) -> str:
    """``floor_paths``: one bench file, or several joined by commas, the later winning a cell (its read floor and
    our time of the same run, so the ratio never mixes two runs). The shards are the first file's shapes (its
    shape set "tp"); a later one may hold other shapes beside them. ``-``: no floor, the shards are the first peers
    file's shapes."""
    floor, ours_bench = {}, {}
    shards: set = set()
    for floor_path in [] if floor_paths == "-" else floor_paths.split(","):
        run_floor, run_ours = {}, {}
        for rec in json.load(open(floor_path))["results"]:
            key = (rec["K"], rec["N"], rec["M"])
            if rec["peer"] == "read_floor":
                run_floor[key] = rec["time_us"]
            elif rec["peer"] == "mixgemm":
                run_ours[key] = rec["time_us"]
        shards = shards or {(K, N) for K, N, _ in (*run_floor, *run_ours)}
        for key in run_floor.keys() & run_ours.keys():
            floor[key], ours_bench[key] = run_floor[key], run_ours[key]
    # A peers run may hold other shapes beside the shards, too. A later file's cell replaces the whole cell, so a
    # ratio never mixes two runs.
    cells: dict = {}
    for p in grid_paths:
        times = _peer_times(p)
        shards = shards or {key[:2] for key in times}  # "-": the first peers file's shapes
        cells.update({key: peers for key, peers in times.items() if key[:2] in shards})
    out = ["| K x N | M | mixgemm | best other peer | mixgemm / best | mixgemm / read floor |",
           "|---|---|---|---|---|---|"]
    won = total = 0
    for key in sorted(cells, key=lambda k: (k[0] * k[1], k)):
        p = cells[key]
        ours = p.get("mixgemm[zp]")
        others = {k: v for k, v in p.items() if not k.startswith("mixgemm")}
        if ours is None or not others:
            continue
        best = min(others, key=others.get)
        total += 1
        won += ours <= others[best]
        fl = f"{ours_bench[key] / floor[key]:.2f}x" if key in floor else "-"
        mark = "" if ours <= others[best] else " **behind**"
        out.append(f"| {key[0]}x{key[1]} | {key[2]} | {ours:.1f} | {others[best]:.1f} {best} | "
                   f"{ours / others[best]:.3f}{mark} | {fl} |")
    out.append(f"\nAt or ahead of every peer in {won} of {total} cells.")
    return "\n".join(out)


def main(argv: list[str]) -> int:
    if len(argv) >= 2 and argv[0] == "moe":
        print(moe_table(argv[1:]))
    elif len(argv) >= 3 and argv[0] == "tp":
        print(tp_table(argv[1], argv[2:]))
    else:
        print(__doc__)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
