#!/usr/bin/env python3
"""Times every compiled kernel path on the DESIGN.md section 7 shapes, to choose the Hopper dispatch.

For each shape and M: every compiled sm90 config (int4, fp16, zero points and, where compiled, scale-only),
the decode path on both weight layouts (its heuristic split), ``config="auto"`` on both layouts and cuBLAS
fp16, all under the protocol of python/mixgemm/bench/timing.py (weights rotated past L2, CUDA graphs,
median of 7). Prints one line per (shape, M) with the winner, and writes every time to
``$OUT/path_probe.json`` (or ./path_probe.json):

    python tools/path_probe.py [--shapes 4096x4096,8192x28672] [--m 16,64,1024]
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib

import torch

import mixgemm
from mixgemm import formats, ops, tuning
from mixgemm.bench import timing

SHAPES = [(4096, 4096), (4096, 11008), (11008, 4096), (8192, 8192), (8192, 28672), (28672, 8192)]
MS = [1, 8, 16, 32, 64, 128, 256, 512, 1024, 4096]
G = 128


def shape_list(text: str) -> list[tuple[int, int]]:
    return [tuple(int(v) for v in s.split("x")) for s in text.split(",")]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shapes", type=shape_list, default=SHAPES)
    parser.add_argument("--m", type=lambda t: [int(v) for v in t.split(",")], default=MS)
    args = parser.parse_args()
    out_dir = pathlib.Path(os.environ.get("OUT", "."))
    dtype = torch.float16
    results = []
    for K, N in args.shapes:
        copies = timing.copies_for(K * N // 2)
        ckpts = [{k: v.cuda() for k, v in formats.random_awq_weight(K, N, G, dtype=dtype).items()}]
        ckpts += [{k: v.clone() for k, v in ckpts[0].items()} for _ in range(copies - 1)]
        def packed(layout, zeros=True):
            return [mixgemm.prepack(c["qweight"], c["scales"], c["qzeros"] if zeros else None, G, layout=layout)
                    for c in ckpts]

        weights = {("sm80", "zeros"): packed("sm80"), ("sm90", "zeros"): packed("sm90"),
                   ("sm90", "scale_only"): packed("sm90", zeros=False)}
        dense = mixgemm.awq_dequantize(ckpts[0]["qweight"], ckpts[0]["scales"], ckpts[0]["qzeros"])
        dense_copies = [dense] + [dense.clone() for _ in range(min(copies, timing.copies_for(dense.numel() * 2)) - 1)]
        sm90_configs = mixgemm.compiled_configs(dtype, 4, path="sm90")
        for M in args.m:
            x = torch.randn(M, K, device="cuda").to(dtype)
            row = {}

            def run(label, weight_key, config):
                ws = weights[weight_key]
                try:
                    mixgemm.gemm(x, ws[0], config=config)
                    t = timing.time_fn([lambda w=w: mixgemm.gemm(x, w, config=config) for w in ws]).median_us
                except (ValueError, RuntimeError) as exc:
                    print(f"  {label}: {type(exc).__name__}: {str(exc)[:120]}")
                    return
                row[label] = t

            for layout in ("sm80", "sm90"):
                chosen = ops.resolve_config(M, weights[(layout, "zeros")][0], "auto")
                run(f"auto[{layout}]={chosen.name}", (layout, "zeros"), "auto")
            if M <= 16:
                for layout in ("sm80", "sm90"):
                    configs = [c for c in mixgemm.compiled_configs(dtype, 4, path="gemv") if c.tile_m >= M]
                    for c in configs:
                        cfg = tuning._gemv_config([c], M, N, K, 132, "sm90")  # its split rule, up to 16 rows
                        run(f"{cfg.name}[{layout}]", (layout, "zeros"), cfg)
            for c in sm90_configs:
                if N % c.tile_n == 0:
                    run(c.name, ("sm90", "zeros"), c)
                    if "scale" in mixgemm.config.sm90_modes(False, 4)[c.tile]:
                        run(c.name + "[scale]", ("sm90", "scale_only"), c)
            row["cublas_fp16"] = timing.time_fn([lambda d=d: x @ d for d in dense_copies]).median_us
            best = min((k for k in row if k != "cublas_fp16"), key=row.get, default=None)
            flops = 2 * M * N * K
            print(f"{K}x{N} M={M:5d}  best {best} {row.get(best, float('nan')):9.2f} us  "
                  f"cuBLAS {row['cublas_fp16']:9.2f} us ({flops / row['cublas_fp16'] / 1e6:5.0f} TFLOP/s)", flush=True)
            for label, t in sorted(row.items(), key=lambda kv: kv[1]):
                print(f"    {t:9.2f}  {flops / t / 1e6:6.0f} TFLOP/s  {label}")
            results.append({"K": K, "N": N, "M": M, "times_us": row})
    path = out_dir / "path_probe.json"
    path.write_text(json.dumps(results, indent=1))
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
