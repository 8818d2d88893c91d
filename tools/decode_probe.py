#!/usr/bin/env python3
"""Times the decode path (issue 8) at every split-K on the DESIGN.md section 7 shapes, against the floor.

For each shape and M, every compiled decode kernel that takes M, at split_k 1..16 (as far as K allows), on the
GPU's own weight layout, under the protocol of python/mixgemm/bench/timing.py (weights rotated past L2, CUDA
graphs, median of 7). Prints one line per (shape, M, kernel): the time per split, the best, the heuristic's
pick and the floor (bytes / 3.0 TB/s); writes ``$OUT/decode_probe.json``.

    python tools/decode_probe.py [--shapes 4096x4096,8192x28672] [--m 1,8]
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib

import torch

import mixgemm
from mixgemm import formats, ops
from mixgemm.paths import decode
from mixgemm.bench import timing

SHAPES = [(4096, 4096), (4096, 11008), (11008, 4096), (8192, 8192), (8192, 28672), (28672, 8192)]
G = 128
READ_BW = 3.0e12


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shapes", type=lambda t: [tuple(int(v) for v in s.split("x")) for s in t.split(",")],
                        default=SHAPES)
    parser.add_argument("--m", type=lambda t: [int(v) for v in t.split(",")], default=[1, 8])
    parser.add_argument("--splits", type=lambda t: [int(v) for v in t.split(",")], default=list(range(1, 17)))
    args = parser.parse_args()
    out_dir = pathlib.Path(os.environ.get("OUT", "."))
    dtype = torch.float16
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    results = []
    for K, N in args.shapes:
        copies = timing.copies_for(K * N // 2)
        ckpt = {k: v.cuda() for k, v in formats.random_awq_weight(K, N, G, dtype=dtype).items()}
        first = mixgemm.prepack(ckpt["qweight"], ckpt["scales"], ckpt["qzeros"], G)
        weights = [first] + [mixgemm.PackedWeight(first.packed.clone(), first.scales.clone(), first.offsets.clone(),
                                                  G, 4, dtype, N, K, None, layout=first.layout)
                             for _ in range(copies - 1)]
        # bytes of one call: packed int4 weights, scales and offsets (fp16), x and the output
        floor_us = (K * N // 2 + 2 * 2 * (K // G) * N) / READ_BW * 1e6
        for M in args.m:
            x = torch.randn(M, K, device="cuda").to(dtype)
            auto = ops.resolve_config(M, first, "auto")
            fitting = [c for c in mixgemm.compiled_configs(dtype, 4, path="decode") if c.rows >= M]
            rows = min(c.rows for c in fitting)  # the kernels of the fewest rows that take M
            for config in (c for c in fitting if c.rows == rows):
                times = {}
                for split in args.splits:
                    if split > K // decode.BATCH_K:
                        break
                    cfg = config.with_split_k(split)
                    t = timing.time_fn([lambda w=w, c=cfg, x=x: mixgemm.gemm(x, w, None, c) for w in weights])
                    times[split] = t.median_us
                best = min(times, key=times.get)
                pick = decode.split_for(config, N, K, sms).split_k
                line = " ".join(f"{s}:{us:.1f}" for s, us in times.items())
                print(f"{K}x{N} M={M} {config.name} floor {floor_us:.1f} best split {best} {times[best]:.1f} us "
                      f"({times[best] / floor_us:.2f}x) heuristic {pick} "
                      f"{times.get(pick, float('nan')):.1f} auto={auto.name} | {line}", flush=True)
                results.append({"K": K, "N": N, "M": M, "config": config.name, "floor_us": floor_us,
                                "times_us": times, "heuristic_split": pick, "auto": auto.name,
                                "layout": first.layout})
            del x
        del weights, first
        torch.cuda.empty_cache()
    (out_dir / "decode_probe.json").write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
