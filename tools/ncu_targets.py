#!/usr/bin/env python3
"""Runs one kernel a few times for Nsight Compute (tools/gpu_check.sh's NCU step): the path config="auto"
takes for ``--shape KxN`` at ``--m`` rows on this GPU's own weight layout (or ``--layout``), or the config
named by ``--config``, e.g.

    ncu -k regex:device_kernel -s 2 -c 1 --section SpeedOfLight python3 tools/ncu_targets.py --m 4096
    python3 tools/ncu_targets.py --m 4096 --layout sm80 --config 128x256x64_w128x32x64_s4
"""

from __future__ import annotations

import argparse

import torch

import mixgemm
from mixgemm import formats, ops
from mixgemm.paths import from_name

parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
parser.add_argument("--shape", default="8192x28672")
parser.add_argument("--m", type=int, default=1)
parser.add_argument("--calls", type=int, default=4)
parser.add_argument("--layout", choices=("auto", "sm80", "sm90"), default="auto")
parser.add_argument("--config", default="auto", help="a config name (python -m mixgemm sweep lists them) or auto")
args = parser.parse_args()
K, N = (int(v) for v in args.shape.split("x"))
ckpt = {k: v.cuda() for k, v in formats.random_awq_weight(K, N, 128, dtype=torch.float16).items()}
packed = mixgemm.prepack(ckpt["qweight"], ckpt["scales"], ckpt["qzeros"], 128, layout=args.layout)
x = torch.randn(args.m, K, device="cuda").half()
config = ops.resolve_config(args.m, packed, from_name(args.config))
print(f"{K}x{N} M={args.m}: {config.name} on the {packed.layout} layout", flush=True)
for _ in range(args.calls):
    mixgemm.gemm(x, packed, config=config)
torch.cuda.synchronize()
