#!/usr/bin/env python3
"""Times one sm90 config on x whose last token tile takes different loads, to tell what a partial tile costs.

Per shape and config, in interleaved rounds (python/mixgemm/bench/timing.py's protocol, weights rotated past L2):
  skip   ``--m-skip`` rows of x: the last 128- or 256-token tile has 64 or more rows past M, so it loads x in
         64-row blocks up to M (cpp/mixgemm/sm90/x_rows_past_m_skipped.cuh);
  zeros  the same rows followed by zero rows up to ``--m-box``: fewer than 64 rows past M, so the stock load of
         the whole box (the same real data, the same tiles);
  box    ``--m-box`` rows of random x (zeros against random rows: what the data costs);
  whole  ``--m-whole`` random rows, and ``whole_zeros``, rows from ``--m-skip`` on zero.
skip / zeros is the row-block load's own cost. Outputs of skip and zeros are checked against whole's first rows.
Writes ``$OUT/x_fill_probe.json`` (or ./x_fill_probe.json):

    python tools/x_fill_probe.py [--shapes 8192x5120,8192x8192] [--configs NAME,...] [--m-skip 176]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics

import torch

import mixgemm
from mixgemm import formats
from mixgemm.bench import timing

G = 128
CONFIGS = "sm90_128x128x64_c1x1_coop_streamk,sm90_256x64x64_c1x1_pingpong_persistent"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shapes", default="8192x5120,8192x8192")
    parser.add_argument("--configs", default=CONFIGS)
    parser.add_argument("--m-skip", type=int, default=176)
    parser.add_argument("--m-box", type=int, default=240)
    parser.add_argument("--m-whole", type=int, default=256)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    if not args.m_skip < args.m_box <= args.m_whole:
        raise SystemExit("x_fill_probe: need --m-skip < --m-box <= --m-whole")
    compiled = {c.name: c for c in mixgemm.compiled_configs(torch.float16, 4, path="sm90")}
    missing = [n for n in args.configs.split(",") if n not in compiled]
    if missing:
        raise SystemExit(f"x_fill_probe: not compiled in this build: {', '.join(missing)}")
    results = []
    for shape in args.shapes.split(","):
        K, N = (int(v) for v in shape.split("x"))
        ckpt = {k: v.cuda() for k, v in formats.random_awq_weight(K, N, G, dtype=torch.float16).items()}
        weights = [mixgemm.prepack(ckpt["qweight"].clone(), ckpt["scales"].clone(), ckpt["qzeros"].clone(), G,
                                   layout="sm90") for _ in range(timing.copies_for(K * N // 2))]
        real = torch.randn(args.m_whole, K, device="cuda").half()

        def padded(rows: int) -> torch.Tensor:  # real rows up to --m-skip, then zero rows
            return torch.cat([real[:args.m_skip], real.new_zeros(rows - args.m_skip, K)])

        xs = {"skip": real[:args.m_skip].contiguous(), "zeros": padded(args.m_box),
              "box": real[:args.m_box].contiguous(), "whole": real.clone(), "whole_zeros": padded(args.m_whole)}
        for name in args.configs.split(","):
            config = compiled[name]
            ref = mixgemm.gemm(xs["whole"], weights[0], config=config).float()[:args.m_skip]
            for label in ("skip", "zeros"):
                y = mixgemm.gemm(xs[label], weights[0], config=config).float()[:args.m_skip]
                torch.testing.assert_close(y, ref, rtol=1e-2, atol=1e-1)  # fp16 outputs of one kernel's sums
            times = {label: [] for label in xs}
            for r in range(args.rounds):
                for label in timing.round_order(list(xs), r):
                    x = xs[label]
                    times[label].append(timing.time_fn(
                        [lambda w=w, x=x: mixgemm.gemm(x, w, config=config) for w in weights]).median_us)
            median = {label: statistics.median(v) for label, v in times.items()}
            results.append({"K": K, "N": N, "config": name, "rounds_us": times, "median_us": median})
            ratios = (f"skip/zeros {median['skip'] / median['zeros']:.3f}  "
                      f"zeros/box {median['zeros'] / median['box']:.3f}")
            print(f"{K}x{N} {name} " + " ".join(f"{label} {t:.2f}" for label, t in median.items()) + "  " + ratios,
                  flush=True)
    meta = {"gpu": torch.cuda.get_device_name(), "m_skip": args.m_skip, "m_box": args.m_box, "m_whole": args.m_whole,
            "rounds": args.rounds}
    path = os.path.join(os.environ.get("OUT", "."), "x_fill_probe.json")
    with open(path, "w") as f:
        json.dump({"meta": meta, "results": results}, f, indent=1)


if __name__ == "__main__":
    main()
