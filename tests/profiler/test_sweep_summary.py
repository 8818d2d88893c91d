"""tools/sweep_summary.py (the per-cell lines tools/gpu_check.sh prints after its sweeps) and tools/sweep_record.py (a
sweep record from device runs), CPU only."""

from __future__ import annotations

import json
import pathlib
import random
import re

from sweep_records import skip_if_parked
from tool_modules import load_tool

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _row(M, peer, config, time_us, status="ok", K=4096, N=5120):
    return {"K": K, "N": N, "M": M, "G": 128, "dtype": "fp16", "peer": peer, "config": config, "status": status,
            "time_us": time_us, "layout": "sm90"}


def test_auto_against_the_fastest_config_and_the_top_three():
    rng = random.Random()
    times = {f"cfg{i}": rng.uniform(10.0, 50.0) for i in range(6)}
    pick = rng.choice(sorted(times))
    auto_us = times[pick] * rng.uniform(0.97, 1.03)  # auto times its pick in its own samples
    rows = [_row(144, "mixgemm", name, us) for name, us in times.items()]
    rows += [_row(144, "mixgemm:auto", pick, auto_us), _row(144, "mixgemm", "broken", 1.0, status="error")]
    [line] = load_tool("sweep_summary").summary_lines(rows)
    best = min(times.values())
    ranked = sorted(times, key=times.get)
    assert line.startswith(f"4096x5120 M=144 sm90: auto {pick} {auto_us:.2f} us {auto_us / best:.3f} | fastest ")
    top = re.findall(r"(cfg\d) ([\d.]+) ([\d.]+)", line.split("| fastest ")[1])
    assert [name for name, _, _ in top] == ranked[:3]  # the failed row is not a config of the cell
    assert [float(ratio) for _, _, ratio in top] == [round(times[n] / best, 3) for n in ranked[:3]]


def test_cells_are_kept_apart_and_a_missing_auto_row_is_said():
    rows = [_row(208, "mixgemm", "a", 20.0), _row(176, "mixgemm", "b", 30.0, N=2560),
            _row(176, "mixgemm:auto", "b", 31.5, N=2560)]
    lines = load_tool("sweep_summary").summary_lines(rows)
    assert lines == ["4096x2560 M=176 sm90: auto b 31.50 us 1.050 | fastest b 30.00 1.000",
                     "4096x5120 M=208 sm90: auto (no auto row) | fastest a 20.00 1.000"]


@skip_if_parked
def test_a_sweep_of_record(tmp_path, capsys):
    # The tool reads the committed records as well as a device run's sweep.json.
    record = ROOT / "benchmarks" / "2026-11-28-h100-sweep-tall-split-and-pingpong-fill.json"
    results = json.loads(record.read_text())["results"]
    cells = {(r["K"], r["N"], r["M"]) for r in results}
    assert load_tool("sweep_summary").main([str(record)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert len(out) == len(cells)
    # 8192x8192 M = 228: auto ran 128 x 128 stream-K, the fastest config's own row.
    line = next(x for x in out if x.startswith("8192x8192 M=228 "))
    fastest = min(r["time_us"] for r in results if (r["K"], r["N"], r["M"], r["peer"]) == (8192, 8192, 228, "mixgemm"))
    assert f"fastest sm90_128x128x64_c1x1_coop_streamk {fastest:.2f} 1.000" in line


def test_a_record_from_device_sweeps(tmp_path):
    # Two device runs (as tools/gpu_check.sh's SWEEP_CELLS writes them) into one record: every run's command without
    # its --out, the rows' kept fields only, one row a line.
    rng = random.Random()
    runs = []
    for shape, M in (("4096x5120", 144), ("8192x8192", 228)):
        K, N = map(int, shape.split("x"))
        rows = [dict(_row(M, "mixgemm", f"cfg{i}", rng.uniform(10, 60), K=K, N=N), samples_us=[1.0, 2.0],
                     round_medians_us=[1.0]) for i in range(3)]
        meta = {"command": "sweep", "gpu": "NVIDIA H100 80GB HBM3",
                "argv": ["sweep", "--shape", shape, "--m", str(M), "--out", f"/root/out/sweep_{shape}", "--no-plots"]}
        path = tmp_path / f"{shape}.json"
        path.write_text(json.dumps({"meta": meta, "results": rows}))
        runs.append((path, rows))
    out = tmp_path / "record.json"
    assert load_tool("sweep_record").main([str(out), "two cells", *(str(p) for p, _ in runs)]) == 0
    rec = json.loads(out.read_text())
    assert rec["note"] == "two cells" and rec["meta"]["gpu"] == "NVIDIA H100 80GB HBM3"
    assert rec["meta"]["argv"] == ["sweep --shape 4096x5120 --m 144 --no-plots",
                                   "sweep --shape 8192x8192 --m 228 --no-plots"]
    assert [r["time_us"] for r in rec["results"]] == [r["time_us"] for _, rows in runs for r in rows]
    assert all("samples_us" not in r and r["round_medians_us"] == [1.0] for r in rec["results"])
    assert len(out.read_text().splitlines()) == 2 + 6  # header line, six rows, closing line
