#!/usr/bin/env python3
"""Regenerates the tables of BENCHMARKS.md from committed bench JSON files (stdlib only, no GPU, no mixgemm).

Two input formats, detected per file:
  * ``python -m mixgemm bench --out DIR`` writes DIR/bench.json: ``{"meta": {...}, "results": [record, ...]}``,
    one record per (shape, M, peer) with K, N, M, G, dtype, peer ("mixgemm", "cublas_fp16", "read_floor", ...),
    config, status ("ok" / "error" / "unavailable") and time_us (python/mixgemm/bench/cli.py, report.py).
  * the peers harness (../shared/peers/peers_bench.py ``--out``, one peers_KxN.json per shape, or its ``--report``
    merge, whose "meta" is a list): ``{"meta": ..., "results": [row, ...]}``, one row per (shape, M, peer) with
    K, N, M, G, peer ("mixgemm[zp]", "machete[sym]", ...), median_us, ok (numerics check passed) and note
    ("config=<name>" on mixgemm's rows).

Usage:
  python tools/benchmarks_record.py benchmarks/*.json                          # print the Markdown
  python tools/benchmarks_record.py --update BENCHMARKS.md benchmarks/*.json   # replace the record block

Give the files oldest first (date-prefixed names sort so): where several runs time the same cell, the last
one given wins. Every ratio divides two times of one run, never of two runs: DESIGN.md section 7 compares
only peers timed in the same run, since clocks and the machine differ between runs.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import pathlib
import re
import sys

BEGIN, END = "<!-- record:begin -->", "<!-- record:end -->"
GROUP = 128  # BENCHMARKS.md records DESIGN's setting: fp16 activations, group size 128

# The peers DESIGN.md section 7 names; "best peer" is the fastest of these four families (as the peers
# harness's _best_peer does: any variant that passed its numerics check). cuBLAS fp16 is a separate target.
FAMILIES = (("Machete", ("machete[zp]", "machete[sym]")),
            ("vLLM Marlin", ("vllm_marlin[zp]", "vllm_marlin[sym]")),
            ("Marlin", ("ist_marlin[sym]",)),
            ("gemlite", ("gemlite[zp]", "gemlite[sym]")))
CUBLAS, READ_FLOOR, SM80_LAYOUT = "cublas_fp16", "read_floor", "mixgemm_sm80"
MIXGEMM = {"bench": "mixgemm", "peers": "mixgemm[zp]"}  # AWQ weights with zero points in both harnesses

# DESIGN.md section 7 targets, as mixgemm time / other time (<= the bound is met).
READ_FLOOR_BOUND = {True: 1.15, False: 1.3}  # weights of 4096x11008 and larger: 1.15x, smaller: 1.3x
LARGE_WEIGHT = 4096 * 11008
ZERO_POINT_BOUND = 1.03  # zero points within 3% of scale-only

# Sections by the path of mixgemm's config (python/mixgemm/paths/*.py spell the names; runs before the paths were
# modules named the decode path's configs gemv_...).
PATHS = (("decode", "Decode path (batched GEMV)"), ("sm80", "sm80 path (mma.sync tiles)"),
         ("sm90", "sm90 path (wgmma/TMA)"), ("dequant", "Dequant path (expand, then cuBLAS)"),
         ("unknown", "Path not recorded"))


def path_of(config: str | None) -> str:
    for path, pattern in (("decode", r"(decode|gemv)_"), ("sm90", r"sm90_"), ("dequant", r"dequant_cublas$"),
                          ("sm80", r"\d+x\d+x\d+_w")):
        if config and re.match(pattern, config):
            return path
    return "unknown"


@dataclasses.dataclass
class Run:
    tag: str    # "a", "b", ... in the order given
    path: str
    kind: str   # "bench" or "peers"
    gpu: str
    date: str
    cells: dict = dataclasses.field(default_factory=dict)    # (K, N, M) -> {peer: time_us}
    configs: dict = dataclasses.field(default_factory=dict)  # (K, N, M) -> mixgemm's config

    def time(self, key, peer):
        return self.cells.get(key, {}).get(peer)

    @property
    def mixgemm(self) -> str:
        return MIXGEMM[self.kind]


def _positive(t) -> bool:
    return isinstance(t, (int, float)) and math.isfinite(t) and t > 0


def load_run(path: str, tag: str) -> Run:
    data = json.loads(pathlib.Path(path).read_text())
    results = data.get("results") if isinstance(data, dict) else None
    if not isinstance(results, list):
        raise ValueError(f"{path}: not a bench or peers JSON (no 'results' list)")
    metas = data.get("meta") or {}
    metas = [m for m in (metas if isinstance(metas, list) else [metas]) if isinstance(m, dict)]
    kind = "peers" if any("median_us" in r for r in results) else "bench"
    gpus = sorted({m["gpu"] for m in metas if m.get("gpu")})
    dates = sorted(str(m.get("date") or m.get("started") or "")[:10] for m in metas)
    run = Run(tag, path, kind, " / ".join(gpus) or "unknown GPU", (dates[-1] if dates else "") or "undated")
    for r in results:
        if r.get("G", GROUP) != GROUP:
            continue
        if kind == "bench":  # only timed fp16 records; an error or unavailable peer has no time
            ok, t = r.get("status") == "ok" and r.get("dtype", "fp16") == "fp16", r.get("time_us")
            config = r.get("config")
        else:  # a peer that failed its numerics check is not a result
            ok, t = bool(r.get("ok")), r.get("median_us")
            note = re.search(r"config=(\S+)", r.get("note") or "")
            config = note and note[1].rstrip(";")
        if not (ok and _positive(t)):
            continue
        key = (int(r["K"]), int(r["N"]), int(r["M"]))
        run.cells.setdefault(key, {})[r["peer"]] = float(t)
        if r["peer"] == run.mixgemm and config:
            run.configs[key] = config
    return run


def fmt_us(t) -> str:  # as python -m mixgemm bench prints times
    return "-" if t is None else f"{t:.2f}" if t < 100 else f"{t:.1f}"


def fmt_x(r) -> str:
    return "-" if r is None else f"{r:.2f}x"


def cell(key, runs):
    """One table row's values for cell ``key`` from ``runs`` (one GPU's, oldest first), or None without a
    mixgemm time. Each comparison takes the last run that timed both mixgemm and what it is compared with."""
    K, N, M = key
    have = [r for r in runs if r.time(key, r.mixgemm) is not None]
    if not have:
        return None

    def last(*names):
        return next((r for r in reversed(have) if any(r.time(key, n) is not None for n in names)), None)
    peer_run = last(*(n for _, names in FAMILIES for n in names))
    main = peer_run or have[-1]  # the run whose mixgemm time the row shows
    mix = main.time(key, main.mixgemm)
    row = {"key": key, "mixgemm": mix, "config": main.configs.get(key), "runs": {main.tag}, "checks": [],
           "sm80": main.time(key, SM80_LAYOUT), "families": {}, "best": None, "best_ratio": None}
    for family, names in FAMILIES if peer_run else ():
        timed = [(main.time(key, n), n) for n in names if main.time(key, n) is not None]
        if timed:
            row["families"][family] = min(timed)
    if row["families"]:
        t, family = min((t, f) for f, (t, _) in row["families"].items())
        row["best"], row["best_ratio"] = family, mix / t
        row["checks"].append(("peer", row["best_ratio"] <= 1.0, f"{row['best_ratio']:.3f}x {family}"))
    cublas_run = last(CUBLAS)
    row["cublas"] = cublas_run.time(key, CUBLAS) if cublas_run else None
    row["cublas_ratio"] = None
    if cublas_run and M >= 128:  # the cuBLAS target starts at M = 128
        row["cublas_ratio"] = cublas_run.time(key, cublas_run.mixgemm) / row["cublas"]
        row["checks"].append(("cublas", row["cublas_ratio"] <= 1.0, f"{row['cublas_ratio']:.3f}x cuBLAS"))
    floor_run = last(READ_FLOOR) if M <= 16 else None  # the read-floor target covers M <= 16 only
    row["floor_ratio"] = None
    if floor_run:
        row["floor_ratio"] = floor_run.time(key, floor_run.mixgemm) / floor_run.time(key, READ_FLOOR)
        bound = READ_FLOOR_BOUND[K * N >= LARGE_WEIGHT]
        row["checks"].append(("floor", row["floor_ratio"] <= bound,
                              f"{row['floor_ratio']:.3f}x read floor (> {bound}x)"))
    if main.kind == "peers" and main.time(key, "mixgemm[sym]") is not None:
        zp_sym = mix / main.time(key, "mixgemm[sym]")
        row["checks"].append(("zp", zp_sym <= ZERO_POINT_BOUND, f"zero points {zp_sym:.3f}x scale-only"))
    row["runs"] |= {r.tag for r in (cublas_run, floor_run) if r is not None}
    return row


def verdict(row) -> str:
    failed = [text for _, ok, text in row["checks"] if not ok]
    return "n/a" if not row["checks"] else "met" if not failed else "**not met**: " + "; ".join(failed)


def render(runs: list[Run]) -> str:
    """The Markdown of the record block: per GPU, one table per path, then the sources and the counts."""
    out = [(f"<!-- generated by tools/benchmarks_record.py from {', '.join(r.path for r in runs)}; "
            "regenerate, do not edit by hand -->"), "",
           ("Times in us (median per call). `/ x` is mixgemm's time over x's in the same run (below 1: mixgemm is "
            "faster); `/ read floor` only at M <= 16, `/ cuBLAS` only from M = 128. Target: DESIGN.md section 7 "
            "(at least as fast as the best peer; read floor within 1.15x, 1.3x below 4096x11008; cuBLAS's speed "
            "from M = 128; zero points within 3% of scale-only)."), ""]
    for gpu in dict.fromkeys(r.gpu for r in runs):
        group = [r for r in runs if r.gpu == gpu]
        keys = sorted({k for r in group for k in r.cells}, key=lambda k: (k[0] * k[1], k[0], k[2]))
        rows = [row for row in (cell(k, group) for k in keys) if row is not None]
        families = [f for f, _ in FAMILIES if any(f in row["families"] for row in rows)]
        extra = [("cuBLAS fp16", "cublas")] * any(r["cublas"] for r in rows) + \
                [("sm80 layout", "sm80")] * any(r["sm80"] for r in rows)
        head = (["K x N", "M", "mixgemm (config)"] + families + [h for h, _ in extra] +
                ["best peer", "/ best peer", "/ read floor", "/ cuBLAS", "target", "run"])
        for path, title in PATHS:
            chosen = [row for row in rows if path_of(row["config"]) == path]
            if not chosen:
                continue
            out += [f"### {title}, {gpu}", "", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
            for row in chosen:
                K, N, M = row["key"]
                config = f" (`{row['config']}`)" if row["config"] else ""
                fams = []
                for f in families:
                    t, name = row["families"].get(f, (None, ""))
                    fams.append(fmt_us(t) + (" (sym)" if name.endswith("[sym]") else ""))
                cells = ([f"{K}x{N}", str(M), f"**{fmt_us(row['mixgemm'])}**{config}"] + fams +
                         [fmt_us(row[k]) for _, k in extra] +
                         [row["best"] or "-", fmt_x(row["best_ratio"]), fmt_x(row["floor_ratio"]),
                          fmt_x(row["cublas_ratio"]), verdict(row), ", ".join(sorted(row["runs"]))])
                out.append("| " + " | ".join(cells) + " |")
            out.append("")
        counts = []
        for label, kind in (("at least as fast as the best peer", "peer"), ("within the read-floor bound", "floor"),
                            ("at least cuBLAS's speed from M = 128", "cublas"),
                            ("zero points within 3% of scale-only", "zp")):
            checks = [ok for row in rows for k, ok, _ in row["checks"] if k == kind]
            if checks:
                counts.append(f"{label}: {sum(checks)} of {len(checks)} cells")
        if counts:
            out += [f"Targets met on the {gpu}: " + "; ".join(counts) + ".", ""]
    out.append("Runs (ratios divide times of one run): " + "; ".join(
        f"[{r.tag}] `{r.path}`: {'python -m mixgemm bench' if r.kind == 'bench' else 'peers harness'}, "
        f"{r.gpu}, {r.date}" for r in runs) + ".")
    return "\n".join(out) + "\n"


def update(doc_path: str, block: str) -> None:
    """Replaces the text between the record markers of ``doc_path`` with ``block``; the rest stays."""
    doc = pathlib.Path(doc_path).read_text()
    if doc.count(BEGIN) != 1 or doc.count(END) != 1 or doc.index(BEGIN) > doc.index(END):
        raise ValueError(f"{doc_path}: needs exactly one {BEGIN} followed by one {END}")
    head, rest = doc.split(BEGIN)
    tail = rest.split(END)[1]
    pathlib.Path(doc_path).write_text(f"{head}{BEGIN}\n{block.rstrip()}\n{END}{tail}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("json", nargs="+", help="bench.json / peers JSON files, oldest first")
    parser.add_argument("--update", metavar="MARKDOWN", help="replace the record block of this file")
    args = parser.parse_args(argv)
    try:
        runs = [load_run(p, chr(ord("a") + i) if i < 26 else f"r{i}") for i, p in enumerate(args.json)]
    except (OSError, ValueError, KeyError, TypeError) as exc:  # json.JSONDecodeError is a ValueError
        print(f"benchmarks_record: {exc}", file=sys.stderr)
        return 2
    if not any(r.time(k, r.mixgemm) for r in runs for k in r.cells):
        # An empty block would wipe the standing tables: refuse instead.
        print("benchmarks_record: no timed mixgemm cell in the given files", file=sys.stderr)
        return 1
    block = render(runs)
    if args.update is None:
        sys.stdout.write(block)
        return 0
    try:
        update(args.update, block)
    except (OSError, ValueError) as exc:
        print(f"benchmarks_record: {exc}", file=sys.stderr)
        return 2
    print(f"benchmarks_record: updated {args.update} from {len(runs)} file(s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
