#!/usr/bin/env python3
"""A sweep record for benchmarks/ from one or more ``python -m mixgemm sweep`` JSON files (stdlib only, no GPU).

  python tools/sweep_record.py benchmarks/YYYY-MM-DD-h100-sweep-NAME.json "NOTE" OUT/sweep_*/sweep.json

The record is ``{"note", "meta", "results"}``: the first file's meta with ``argv`` the list of every run's command
(each without its ``--out``, which named a folder of the device machine), and every run's rows with the fields the
heuristic tests and the notes read (the samples dropped: a record of 50 cells stays under a megabyte). One row a
line, so a diff shows the rows that changed. The note says what ran: GPU, build, which rules the ``auto`` rows ran.
"""

from __future__ import annotations

import json
import sys

KEPT = ("K", "N", "M", "G", "dtype", "peer", "config", "status", "time_us", "round_medians_us", "min_us", "max_us",
        "layout")


def _command(argv: list[str]) -> str:
    argv = list(argv)
    if "--out" in argv:
        i = argv.index("--out")
        del argv[i:i + 2]
    return " ".join(argv)


def record(note: str, runs: list[dict]) -> dict:
    """The record of ``runs`` (each a sweep's JSON), in the order given."""
    if not runs:
        raise ValueError("sweep_record: no sweep given")
    meta = dict(runs[0]["meta"])
    meta["argv"] = [_command(run["meta"]["argv"]) for run in runs]
    rows = [{k: r[k] for k in KEPT if k in r} for run in runs for r in run["results"]]
    return {"note": note, "meta": meta, "results": rows}


def dumps(rec: dict) -> str:
    """``rec`` as JSON text with one result row a line."""
    rows = ",\n".join(json.dumps(r, separators=(",", ":")) for r in rec["results"])
    return (f'{{"note": {json.dumps(rec["note"])}, "meta": {json.dumps(rec["meta"])}, "results": [\n'
            f"{rows}\n]}}\n")


def main(argv: list[str]) -> int:
    if len(argv) < 3:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    out, note, paths = argv[0], argv[1], argv[2:]
    runs = []
    for path in paths:
        with open(path) as f:
            runs.append(json.load(f))
    rec = record(note, runs)
    with open(out, "w") as f:
        f.write(dumps(rec))
    print(f"{out}: {len(rec['results'])} rows from {len(runs)} sweeps")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
