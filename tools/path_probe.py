#!/usr/bin/env python3
"""Times every compiled kernel path on the DESIGN.md section 7 shapes, to choose the dispatch.

For each shape and M, the kernel families named by ``--paths``:
  auto   ``config="auto"`` on both weight layouts;
  decode the decode path on both layouts (its heuristic split), M <= 16;
  sm90   every compiled sm90 config (int4, fp16, zero points and, where compiled, scale-only), the stream-K
         ones also split K by each of ``--sm90-splits``;
  sm80   every compiled sm80 config on each layout it is compiled for, each with the heuristic's split for its
         tile and with stream-K over each of ``--sm80-stream-k`` blocks per SM, and
         the cutlass2_fp16 peer (CUTLASS 2.x's dense fp16 mma.sync GEMM: this path's ceiling);
  dequant  the dequant path on both layouts, its expansion alone (``expand[layout]``), and vLLM's large-M
         plan on the AWQ checkpoint (our awq_dequantize, then cuBLAS: "dequantize + cuBLAS");
plus cuBLAS fp16, all under the protocol of python/mixgemm/bench/timing.py (weights rotated past L2, CUDA
graphs, median of 7). Prints one line per (shape, M) with the winner and Marlin's figure where DESIGN.md
section 7 has one, and writes every time to ``$OUT/path_probe.json`` (or ./path_probe.json):

    python tools/path_probe.py [--shapes 4096x4096,8192x28672] [--m 16,64,1024] [--paths sm80,auto]
                               [--sm90-splits 2,4,8] [--sm80-stream-k 1,2,3] [--only REGEX]
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import pathlib
import re

import torch

import mixgemm
from mixgemm import formats, ops
from mixgemm.paths import decode, sm80
from mixgemm.bench import peers, timing

SHAPES = [(4096, 4096), (4096, 11008), (11008, 4096), (8192, 8192), (8192, 28672), (28672, 8192)]
MS = [1, 8, 16, 32, 64, 128, 256, 512, 1024, 4096]
G = 128
PATHS = ("auto", "decode", "sm90", "sm80", "dequant")
# Marlin (symmetric int4, G = 128, fp16), us, measured on this H100 with the same protocol: DESIGN.md section 7.
MARLIN_US = {
    (4096, 4096): {1: 14.5, 16: 15.4, 64: 24.0, 128: 21.6, 256: 28.3, 1024: 93.8, 4096: 426},
    (8192, 8192): {1: 19.8, 16: 20.2, 64: 33.0, 128: 49.8, 256: 95.2, 1024: 351, 4096: 1613},
    (8192, 28672): {1: 62.0, 16: 52.8, 64: 84.5, 128: 158.8, 256: 308, 1024: 1206, 4096: 5386},
    (28672, 8192): {1: 62.8, 16: 53.6, 64: 88.3, 128: 156.4, 256: 304, 1024: 1316, 4096: 6298},
}


def shape_list(text: str) -> list[tuple[int, int]]:
    return [tuple(int(v) for v in s.split("x")) for s in text.split(",")]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shapes", type=shape_list, default=SHAPES)
    parser.add_argument("--m", type=lambda t: [int(v) for v in t.split(",")], default=MS)
    parser.add_argument("--paths", type=lambda t: t.split(","), default=["auto", "decode", "sm90"],
                        help=f"comma-separated subset of {','.join(PATHS)} (auto,decode,sm90)")
    parser.add_argument("--sm90-splits", type=lambda t: [int(v) for v in t.split(",")], default=[],
                        help="split-K factors (> 1) also timed on every sm90 stream-K config (none)")
    parser.add_argument("--sm80-stream-k", type=lambda t: [int(v) for v in t.split(",")], default=[],
                        help="blocks per SM at which every sm80 config is also timed with stream-K; 0 times it "
                             "unsplit (none)")
    parser.add_argument("--only", type=re.compile, default=None,
                        help="regular expression: time only our kernels whose label it matches (re.search), e.g. "
                             "'_s[34](_sk\\d+)?\\[sm80\\]'; cuBLAS and cutlass2_fp16 always run (all)")
    args = parser.parse_args()
    sm_count = torch.cuda.get_device_properties(0).multi_processor_count
    unknown = set(args.paths) - set(PATHS)
    if unknown:
        parser.error(f"--paths: unknown {sorted(unknown)}; choose from {PATHS}")
    out_dir = pathlib.Path(os.environ.get("OUT", "."))
    dtype = torch.float16
    results = []
    for K, N in args.shapes:
        copies = timing.copies_for(K * N // 2)
        ckpts = [{k: v.cuda() for k, v in formats.random_awq_weight(K, N, G, dtype=dtype).items()}]
        ckpts += [{k: v.clone() for k, v in ckpts[0].items()} for _ in range(copies - 1)]
        @functools.cache
        def packed(layout, zeros=True):  # prepacked only when a path asks, once per shape
            return [mixgemm.prepack(c["qweight"], c["scales"], c["qzeros"] if zeros else None, G, layout=layout)
                    for c in ckpts]

        dense = mixgemm.awq_dequantize(ckpts[0]["qweight"], ckpts[0]["scales"], ckpts[0]["qzeros"])
        dense_copies = [dense] + [dense.clone() for _ in range(min(copies, timing.copies_for(dense.numel() * 2)) - 1)]
        sm90_configs = mixgemm.compiled_configs(dtype, 4, path="sm90")
        for M in args.m:
            x = torch.randn(M, K, device="cuda").to(dtype)
            row = {}

            def run(label, weight_key, config):
                if args.only is not None and not args.only.search(label):
                    return
                ws = packed(*weight_key)
                try:
                    mixgemm.gemm(x, ws[0], config=config)
                    t = timing.time_fn([lambda w=w: mixgemm.gemm(x, w, config=config) for w in ws]).median_us
                except (ValueError, RuntimeError) as exc:
                    print(f"  {label}: {type(exc).__name__}: {str(exc)[:120]}")
                    return
                row[label] = t

            layouts = ("sm80", "sm90") if sm90_configs else ("sm80",)
            if "auto" in args.paths:
                for layout in layouts:
                    chosen = ops.resolve_config(M, packed(layout)[0], "auto")
                    run(f"auto[{layout}]={chosen.name}", (layout, True), "auto")
            if "decode" in args.paths and M <= 16:
                for layout in layouts:
                    configs = [c for c in mixgemm.compiled_configs(dtype, 4, path="decode") if c.rows >= M]
                    for c in configs:
                        cfg = decode.split_for(c, N, K, sm_count)  # the decode path's split rule
                        run(f"{cfg.name}[{layout}]", (layout, True), cfg)
            for c in sm90_configs if "sm90" in args.paths else []:
                if N % c.tile_n == 0:
                    run(c.name, ("sm90", True), c)
                    scale_only = mixgemm.paths.sm90.PATH.compiled(mixgemm.KernelKey.of(dtype, 4, "sm90", "scale"))
                    if any(s.kernel_name == c.kernel_name for s in scale_only):
                        run(c.name + "[scale]", ("sm90", False), c)
                    for split in args.sm90_splits if c.scheduler == "streamk" else []:
                        if K // c.tile_k >= split > 1:
                            cfg = c.with_split_k(split)
                            run(cfg.name, ("sm90", True), cfg)
            if "sm80" in args.paths:
                for layout in layouts:
                    for c in mixgemm.compiled_configs(dtype, 4, path="sm80", layout=layout):
                        cfg = sm80.heuristic([c], M, N, K, sm_count)  # the heuristic's split for this tile
                        run(f"{cfg.name}[{layout}]", (layout, True), cfg)
                        for per_sm in args.sm80_stream_k:  # 0: the data-parallel grid, no split
                            cfg = c.with_split_k(per_sm * sm_count, "streamk") if per_sm else c
                            run(f"{cfg.name}[{layout}]", (layout, True), cfg)
                try:
                    out = torch.empty(M, N, device="cuda", dtype=dtype)
                    row["cutlass2_fp16"] = timing.time_fn(
                        [lambda d=d: peers.cutlass2_fp16_matmul(x, d, out) for d in dense_copies]).median_us
                except (ValueError, RuntimeError) as exc:
                    print(f"  cutlass2_fp16: {type(exc).__name__}: {str(exc)[:120]}")
            if "dequant" in args.paths:
                for layout in layouts:
                    run(f"dequant_cublas[{layout}]", (layout, True), mixgemm.DequantConfig())
                    row[f"expand[{layout}]"] = timing.time_fn(
                        [lambda w=w: mixgemm.dequantize_weight(w) for w in packed(layout, True)]).median_us
                row["awq_dequantize+cuBLAS"] = timing.time_fn(
                    [lambda c=c: x @ mixgemm.awq_dequantize(c["qweight"], c["scales"], c["qzeros"])
                     for c in ckpts]).median_us
            row["cublas_fp16"] = timing.time_fn([lambda d=d: x @ d for d in dense_copies]).median_us
            # The winner among our GEMMs (peers and the expansion alone are not candidates).
            best = min((k for k in row if k not in ("cublas_fp16", "cutlass2_fp16", "awq_dequantize+cuBLAS")
                        and not k.startswith("expand[")), key=row.get, default=None)
            flops = 2 * M * N * K
            print(f"{K}x{N} M={M:5d}  best {best} {row.get(best, float('nan')):9.2f} us  "
                  f"cuBLAS {row['cublas_fp16']:9.2f} us ({flops / row['cublas_fp16'] / 1e6:5.0f} TFLOP/s)"
                  f"  Marlin {MARLIN_US.get((K, N), {}).get(M, float('nan')):7.1f} us", flush=True)
            for label, t in sorted(row.items(), key=lambda kv: kv[1]):
                print(f"    {t:9.2f}  {flops / t / 1e6:6.0f} TFLOP/s  {label}")
            results.append({"K": K, "N": N, "M": M, "times_us": row})
    path = out_dir / "path_probe.json"
    path.write_text(json.dumps(results, indent=1))
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
