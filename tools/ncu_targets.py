#!/usr/bin/env python3
"""Runs one kernel a few times for Nsight Compute (tools/gpu_check.sh's NCU step): the path config="auto"
takes for ``--shape KxN`` at ``--m`` rows on this GPU's own weight layout, e.g.

    ncu -k regex:device_kernel -s 2 -c 1 --section SpeedOfLight python3 tools/ncu_targets.py --m 4096
"""

from __future__ import annotations

import argparse

import torch

import mixgemm
from mixgemm import formats, ops

parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
parser.add_argument("--shape", default="8192x28672")
parser.add_argument("--m", type=int, default=1)
parser.add_argument("--calls", type=int, default=4)
args = parser.parse_args()
K, N = (int(v) for v in args.shape.split("x"))
ckpt = {k: v.cuda() for k, v in formats.random_awq_weight(K, N, 128, dtype=torch.float16).items()}
packed = mixgemm.prepack(ckpt["qweight"], ckpt["scales"], ckpt["qzeros"], 128)
x = torch.randn(args.m, K, device="cuda").half()
chosen = ops.resolve_config(args.m, packed, "auto").name
print(f"{K}x{N} M={args.m}: {chosen} on the {packed.layout} layout", flush=True)
for _ in range(args.calls):
    mixgemm.gemm(x, packed)
torch.cuda.synchronize()
