"""tools/benchmarks_record.py: BENCHMARKS.md's tables from bench JSON files (CPU only, no mixgemm import).

The inputs are built here in the exact shapes the two writers produce: ``python -m mixgemm bench`` (records of
python/mixgemm/bench/cli.py ``_base_record`` + ``_time_case``, written by ``report.write_json``) and the peers
harness (rows of ../shared/peers/peers_bench.py ``run_shape``, one ``--out`` file or a ``--report`` merge).
"""

from __future__ import annotations

import json
import pathlib

import pytest

from tool_modules import load_tool

ROOT = pathlib.Path(__file__).resolve().parents[2]  # tests/profiler/ -> the repository root
record = load_tool("benchmarks_record")

H100, H200 = "NVIDIA H100 80GB HBM3", "NVIDIA H200"


def bench_record(K, N, M, peer, time_us, config=None, status="ok", dtype="fp16", G=128):
    """One record as bench.json holds it (timed, or with status "unavailable"/"error" and no time)."""
    base = {"K": K, "N": N, "M": M, "G": G, "dtype": dtype, "peer": peer, "config": config, "status": status,
            "time_us": None, "bytes": K * N // 2, "flops": 2 * M * N * K, "floor_us": 1.0}
    if status != "ok":
        return base | {"reason": "PeerUnavailable: not built", "speedup": None}
    return base | {"time_us": time_us, "min_us": time_us * 0.99, "max_us": time_us * 1.01,
                   "samples_us": [time_us] * 7, "copies": 4, "cuda_graph": True, "tflops": 1.0, "gbps": 1.0,
                   "pct_floor": 50.0, "note": None, "round_medians_us": [time_us] * 3, "speedup": 1.0}


def bench_file(tmp_path, name, records, gpu=H100, date="2026-11-26T10:00:00+00:00"):
    meta = {"command": "bench", "argv": ["bench", "--rounds", "3"], "date": date, "gpu": gpu, "torch": "2.11.0",
            "cuda": "13.0", "mixgemm": "0.1.0", "dtype": "fp16", "group_size": 128,
            "ceilings": {"read_bw_tbs": 3.0, "peak_tflops": 700.0},
            "protocol": {"reps": 7, "warmup": 2, "cuda_graph": True, "l2_rotation_bytes": 256 << 20,
                         "statistic": "median per call", "interleaved_rounds": 3}}
    path = tmp_path / name
    path.write_text(json.dumps({"meta": meta, "results": records}, indent=1) + "\n")
    return str(path)


def peers_row(K, N, M, peer, median_us, ok=True, config=None, error=None):
    """One row as peers_bench.py writes it; median_us None for a peer that did not run."""
    row = {"K": K, "N": N, "M": M, "G": 128, "peer": peer, "variant": peer.split("[")[-1].rstrip("]"),
           "median_us": median_us, "round_medians_us": [] if median_us is None else [median_us] * 2,
           "min_us": median_us, "rel_err": None if median_us is None else 1e-3, "ok": ok,
           "note": f"config={config}" if config else None, "error": error}
    if median_us is not None:
        row |= {"graph": True, "calls_per_sample": 4}
    return row


def peers_file(tmp_path, name, rows, merged=False, gpu=H100):
    meta = {"started": "2026-11-25T09:00:00", "host": "h", "gpu": gpu, "torch": "2.11.0", "cuda": "13.0",
            "python": "3.12.3", "timing": "mixgemm.bench.timing", "rel_tol": 0.01, "args": {"rounds": 2},
            "mixgemm": "0.1.0", "triton": "3.5.0", "finished": "2026-11-25T09:10:00"}
    path = tmp_path / name
    path.write_text(json.dumps({"meta": [meta] if merged else meta, "results": rows}, indent=1))
    return str(path)


def render(*paths):
    return record.render([record.load_run(p, chr(ord("a") + i)) for i, p in enumerate(paths)])


def tables(text):
    """Every table row of the Markdown as {header: cell}, each with its section heading under "section"."""
    rows, head, section = [], None, None
    for line in text.splitlines():
        if line.startswith("### "):
            section, head = line[4:], None
        elif line.startswith("|") and not line.startswith("|---"):
            cells = [c.strip() for c in line.strip("|").split("|")]
            if head is None:
                head = cells
            else:
                rows.append(dict(zip(head, cells), section=section))
        elif not line.strip():
            head = None
    return rows


def row(text, shape, M):
    found = [r for r in tables(text) if r["K x N"] == shape and r["M"] == str(M)]
    assert len(found) == 1, (shape, M, found)
    return found[0]


def test_peers_table_best_peer_ratio_and_verdict(tmp_path):
    cfg = "sm90_128x128x64_c1x1_coop_streamk"
    path = peers_file(tmp_path, "peers.json", [
        peers_row(8192, 28672, 128, "mixgemm[zp]", 102.4, config=cfg),
        peers_row(8192, 28672, 128, "cublas_fp16", 170.0),
        peers_row(8192, 28672, 128, "machete[zp]", 95.0),
        peers_row(8192, 28672, 128, "machete[sym]", 92.4),
        peers_row(8192, 28672, 128, "vllm_marlin[zp]", 110.0),
        # a peer that failed its numerics check is no result, however fast; one that did not load neither
        peers_row(8192, 28672, 128, "ist_marlin[sym]", 50.0, ok=False, error="numerics check failed"),
        peers_row(8192, 28672, 128, "gemlite[zp]", None, ok=False, error="PeerUnavailable: no triton"),
        peers_row(4096, 4096, 128, "mixgemm[zp]", 17.2, config=cfg),
        peers_row(4096, 4096, 128, "vllm_marlin[zp]", 20.6),
        peers_row(4096, 4096, 128, "cublas_fp16", 15.7),
    ])
    text = render(path)
    big = row(text, "8192x28672", 128)
    assert big["mixgemm (config)"] == f"**102.4** (`{cfg}`)"
    assert big["Machete"] == "92.40 (sym)" and big["vLLM Marlin"] == "110.0"
    assert big["best peer"] == "Machete" and big["/ best peer"] == "1.11x"
    assert big["/ cuBLAS"] == "0.60x" and big["cuBLAS fp16"] == "170.0"
    assert big["target"] == "**not met**: 1.108x Machete"
    assert "Marlin" not in big and "gemlite" not in big  # no column for peers without a result
    assert "50.00" not in text
    small = row(text, "4096x4096", 128)
    assert small["best peer"] == "vLLM Marlin" and small["/ best peer"] == "0.83x"
    assert small["target"] == "**not met**: 1.096x cuBLAS"  # ahead of every peer, behind cuBLAS
    assert big["section"].startswith("sm90 path") and big["run"] == "a"
    assert "at least as fast as the best peer: 1 of 2 cells" in text


def test_read_floor_bound_depends_on_the_weight_size_and_stops_at_m16(tmp_path):
    gemv = "gemv_8x64x512_w8x64x64_s2_k4s"
    path = bench_file(tmp_path, "bench.json", [
        bench_record(4096, 4096, 1, "mixgemm", 6.13, gemv), bench_record(4096, 4096, 1, "read_floor", 4.92),
        bench_record(11008, 4096, 1, "mixgemm", 11.48, gemv), bench_record(11008, 4096, 1, "read_floor", 9.89),
        bench_record(8192, 8192, 1, "mixgemm", 15.43, gemv), bench_record(8192, 8192, 1, "read_floor", 13.50),
        bench_record(8192, 8192, 64, "mixgemm", 27.1, "sm90_64x128x64_c1x1_coop_streamk_k2s"),
        bench_record(8192, 8192, 64, "read_floor", 13.6),
    ])
    text = render(path)
    assert row(text, "4096x4096", 1)["/ read floor"] == "1.25x"
    assert row(text, "4096x4096", 1)["target"] == "met"  # 1.25x of the read floor: within 1.3x (small weight)
    assert row(text, "11008x4096", 1)["target"] == "**not met**: 1.161x read floor (> 1.15x)"
    assert row(text, "8192x8192", 1)["target"] == "met"
    above = row(text, "8192x8192", 64)
    assert above["/ read floor"] == "-" and above["target"] == "n/a"
    assert row(text, "4096x4096", 1)["section"].startswith("Decode path")


def test_cublas_target_starts_at_m128(tmp_path):
    sm90 = "sm90_256x128x64_c1x1_coop_persistent"
    path = bench_file(tmp_path, "bench.json", [
        bench_record(4096, 4096, 64, "mixgemm", 30.0, sm90), bench_record(4096, 4096, 64, "cublas_fp16", 15.0),
        bench_record(4096, 4096, 128, "mixgemm", 17.0, sm90), bench_record(4096, 4096, 128, "cublas_fp16", 15.2),
        bench_record(4096, 4096, 1024, "mixgemm", 46.3, sm90), bench_record(4096, 4096, 1024, "cublas_fp16", 47.2),
    ])
    text = render(path)
    assert row(text, "4096x4096", 64)["/ cuBLAS"] == "-" and row(text, "4096x4096", 64)["target"] == "n/a"
    assert row(text, "4096x4096", 128)["target"] == "**not met**: 1.118x cuBLAS"
    assert row(text, "4096x4096", 1024)["target"] == "met"
    assert "at least cuBLAS's speed from M = 128: 1 of 2 cells" in text


def test_ratios_never_mix_two_runs(tmp_path):
    sm90 = "sm90_128x128x64_c1x1_coop_streamk_k2s"
    old = bench_file(tmp_path, "2026-11-24-bench.json", [
        bench_record(8192, 8192, 128, "mixgemm", 20.0, sm90), bench_record(8192, 8192, 128, "cublas_fp16", 10.0)])
    new = bench_file(tmp_path, "2026-11-26-bench.json", [bench_record(8192, 8192, 128, "mixgemm", 30.0, sm90)])
    cell = row(render(old, new), "8192x8192", 128)
    assert cell["mixgemm (config)"].startswith("**30.00**")  # the newest run's time
    assert cell["/ cuBLAS"] == "2.00x"  # 20 / 10 from the run that timed both, not 30 / 10
    assert cell["run"] == "a, b"


def test_sections_follow_the_path_of_mixgemms_config(tmp_path):
    configs = {1: "gemv_8x64x256_w8x64x64_s2_k3s", 16: "16x128x64_w16x32x64_s4_sk528",
               128: "sm90_128x128x64_c1x1_coop_streamk", 8192: "dequant_cublas", 4096: None}
    path = bench_file(tmp_path, "bench.json", [bench_record(8192, 28672, M, "mixgemm", 10.0 + M, c)
                                               for M, c in configs.items()])
    text = render(path)
    heads = [line[4:] for line in text.splitlines() if line.startswith("### ")]
    assert heads == [f"{title}, {H100}" for _, title in record.PATHS]
    assert row(text, "8192x28672", 16)["section"].startswith("sm80 path")
    assert row(text, "8192x28672", 8192)["section"].startswith("Dequant path")


def test_unusable_records_are_left_out(tmp_path):
    path = bench_file(tmp_path, "bench.json", [
        bench_record(4096, 4096, 1, "mixgemm", 6.0, "gemv_8x64x256_w8x64x64_s2_k8s"),
        bench_record(4096, 4096, 1, "cublas_fp16", None, status="error"),
        bench_record(4096, 4096, 1, "torch_int4", None, status="unavailable"),
        bench_record(4096, 4096, 8, "mixgemm", 7.0, "gemv_8x64x256_w8x64x64_s2_k8s", dtype="bf16"),
        bench_record(4096, 4096, 16, "mixgemm", 9.0, "16x128x64_w16x32x64_s4_sk256", G=64),
    ])
    text = render(path)
    assert [(r["K x N"], r["M"]) for r in tables(text)] == [("4096x4096", "1")]
    assert "cuBLAS fp16" not in tables(text)[0]


def test_zero_points_against_scale_only(tmp_path):
    path = peers_file(tmp_path, "peers.json", [
        peers_row(8192, 8192, 256, "mixgemm[zp]", 49.3), peers_row(8192, 8192, 256, "mixgemm[sym]", 44.0),
        peers_row(8192, 8192, 256, "machete[zp]", 55.0)], merged=True)
    cell = row(render(path), "8192x8192", 256)
    assert cell["target"] == "**not met**: zero points 1.120x scale-only"
    assert cell["section"] == f"Path not recorded, {H100}"


def test_one_set_of_tables_per_gpu_and_the_sources_named(tmp_path):
    cfg = "gemv_8x64x256_w8x64x64_s2"
    a = bench_file(tmp_path, "h100.json", [bench_record(8192, 28672, 1, "mixgemm", 47.47, cfg)])
    b = bench_file(tmp_path, "h200.json", [bench_record(8192, 28672, 1, "mixgemm", 33.0, cfg)], gpu=H200,
                   date="2026-12-01T00:00:00+00:00")
    text = render(a, b)
    assert f"### Decode path (batched GEMV), {H100}" in text and f"### Decode path (batched GEMV), {H200}" in text
    assert [r["mixgemm (config)"].split()[0] for r in tables(text)] == ["**47.47**", "**33.00**"]
    assert f"[b] `{b}`: python -m mixgemm bench, {H200}, 2026-12-01" in text


def write_doc(tmp_path):
    doc = tmp_path / "BENCHMARKS.md"
    doc.write_text(f"# Benchmarks\n\nprotocol text\n\n{record.BEGIN}\nold hand-written table\n{record.END}\n\n"
                   "## Where we stand\n\nkept\n")
    return doc


def test_update_replaces_only_the_record_block(tmp_path):
    doc = write_doc(tmp_path)
    path = bench_file(tmp_path, "bench.json", [
        bench_record(4096, 4096, 1, "mixgemm", 6.18, "gemv_8x64x256_w8x64x64_s2_k8s")])
    assert record.main(["--update", str(doc), path]) == 0
    text = doc.read_text()
    assert text.startswith("# Benchmarks\n\nprotocol text\n\n" + record.BEGIN + "\n<!-- generated by")
    assert text.endswith(record.END + "\n\n## Where we stand\n\nkept\n")
    assert "old hand-written table" not in text and "| 4096x4096 | 1 | **6.18**" in text
    assert record.main(["--update", str(doc), path]) == 0
    assert doc.read_text() == text  # a second update with the same files changes nothing


@pytest.mark.parametrize("body", ["no markers\n", f"{record.END}\n{record.BEGIN}\n",
                                  f"{record.BEGIN}\n{record.BEGIN}\n{record.END}\n"])
def test_update_refuses_a_document_without_one_marker_pair(tmp_path, body):
    doc = tmp_path / "BENCHMARKS.md"
    doc.write_text(body)
    path = bench_file(tmp_path, "bench.json", [bench_record(4096, 4096, 1, "mixgemm", 6.0, None)])
    assert record.main(["--update", str(doc), path]) == 2
    assert doc.read_text() == body


def test_refuses_files_without_a_mixgemm_time_or_in_another_format(tmp_path):
    doc = write_doc(tmp_path)
    before = doc.read_text()
    only_cublas = bench_file(tmp_path, "bench.json", [bench_record(4096, 4096, 1, "cublas_fp16", 14.5)])
    assert record.main(["--update", str(doc), only_cublas]) == 1  # an empty block would wipe the tables
    other = tmp_path / "sweep.csv.json"
    other.write_text(json.dumps([{"K": 1}]))
    assert record.main(["--update", str(doc), str(other)]) == 2
    assert doc.read_text() == before


def test_benchmarks_md_has_one_record_block():
    """The committed BENCHMARKS.md keeps the markers the script replaces between."""
    text = (ROOT / "BENCHMARKS.md").read_text()
    assert text.count(record.BEGIN) == 1 and text.count(record.END) == 1
    assert text.index(record.BEGIN) < text.index(record.END)


def test_the_h200_read_floor_tables_are_the_scripts_output():
    """BENCHMARKS.md's H200 read-floor tables, pasted outside the record block, are what the script prints for
    their one file (its path headings one level down, under the H200 section's own)."""
    source = "benchmarks/2026-11-28-h200-m1-16-read-floor-design-split-major.json"
    block = record.render([record.load_run(str(ROOT / source), "a")])
    block = block.replace(str(ROOT / source), source).replace("\n### ", "\n#### ")
    assert "#### Decode path (batched GEMV), NVIDIA H200" in block
    assert block.strip() in (ROOT / "BENCHMARKS.md").read_text()
