#!/usr/bin/env python3
"""A small run of every kernel, for compute-sanitizer (memcheck, racecheck) in tools/gpu_check.sh.

Shapes are tiny so the sanitizer finishes in seconds; they still cover partial M tiles, a partial N
tile (N = 320), every compiled config of both mma.sync paths and each split-K mode (with an empty trailing split),
the decode path and the dequant path on both weight layouts. On an sm_90 GPU every compiled sm90 kernel runs too (N = 256: its configs
need N % tile_n == 0; M = 17 leaves a partial token tile), with and without zero points, bias on.
"""

from __future__ import annotations

import sys

import torch

import mixgemm
from mixgemm import formats


def sm90_cases(x: torch.Tensor, failures: list) -> None:
    from mixgemm import sm90

    K, N, G = x.shape[1], 256, 128
    ckpt = {k: v.cuda() for k, v in formats.random_awq_weight(K, N, G, dtype=torch.float16).items()}
    q, z = formats.unpack_awq(ckpt["qweight"]), formats.unpack_awq(ckpt["qzeros"])
    bias = torch.randn(N, device="cuda").half()
    for zeros in (True, False):
        w = formats.dequantize(q, ckpt["scales"], z if zeros else None, group_size=G)
        ref = x.double() @ w + bias.double()
        packed = sm90.prepack_sm90(ckpt["qweight"], ckpt["scales"], ckpt["qzeros"] if zeros else None, G)
        for config in sm90.compiled_sm90_configs(torch.float16):
            if N % config.tile_n:
                continue
            out = sm90.gemm_sm90(x, packed, bias, config=config)
            err = ((out.double() - ref).norm() / ref.norm()).item()
            if not err < 3e-3:
                failures.append(f"{config.name} zeros={zeros}: relative error {err:.2e}")


def main() -> int:
    K, N, G, M = 384, 320, 128, 17
    ckpt = {k: v.cuda() for k, v in formats.random_awq_weight(K, N, G, dtype=torch.float16).items()}
    x = torch.randn(M, K, device="cuda").half()
    ref = x.double() @ formats.dequantize(
        formats.unpack_awq(ckpt["qweight"]), ckpt["scales"], formats.unpack_awq(ckpt["qzeros"]), group_size=G
    )
    failures = []

    def check(name: str, out: torch.Tensor, tol: float) -> None:
        err = ((out.double() - ref).norm() / ref.norm()).item()
        if not err < tol:
            failures.append(f"{name}: relative error {err:.2e}")

    mixgemm.awq_dequantize(ckpt["qweight"], ckpt["scales"], ckpt["qzeros"])
    check("baseline", mixgemm.baseline.awq_gemm(x, ckpt["qweight"], ckpt["scales"], ckpt["qzeros"], 4), 5e-3)
    packed = mixgemm.prepack(ckpt["qweight"], ckpt["scales"], ckpt["qzeros"], G, layout="sm80")
    for config in mixgemm.compiled_configs(torch.float16):
        for split in ((1, "none"), (4, "serial"), (4, "parallel")):
            cfg = config.with_split_k(*split)
            check(cfg.name, mixgemm.gemm(x, packed, config=cfg), 3e-3)
    # The decode path on both weight layouts (the sm90 one is plain PyTorch to pack and mma.sync to run, so
    # it needs no Hopper GPU): only rows up to its tile_m, and serial split-K only (a 6-batch K split 4 ways
    # leaves the last split one batch, and 4-warp blocks idle warps).
    sm90_packed = mixgemm.prepack(ckpt["qweight"], ckpt["scales"], ckpt["qzeros"], G, layout="sm90")
    for weight in (packed, sm90_packed):
        for config in mixgemm.compiled_configs(torch.float16, path="gemv"):
            rows = slice(0, min(M, config.tile_m))
            for split in ((1, "none"), (4, "serial")):
                cfg = config.with_split_k(*split)
                out = mixgemm.gemm(x[rows].contiguous(), weight, config=cfg)
                err = ((out.double() - ref[rows]).norm() / ref[rows].norm()).item()
                if not err < 3e-3:
                    failures.append(f"{cfg.name} ({weight.layout} layout): relative error {err:.2e}")
    # The dequant path's expansion kernel on both layouts (then cuBLAS).
    for weight in (packed, sm90_packed):
        check(f"dequant_cublas ({weight.layout} layout)", mixgemm.gemm(x, weight, config=mixgemm.GemmConfig.dequant()),
              3e-3)
    from mixgemm import sm90

    if torch.cuda.get_device_capability() == (9, 0) and sm90.available():
        sm90_cases(x, failures)
    torch.cuda.synchronize()
    for f in failures:
        print("FAIL", f)
    print(f"sanitize_small: {len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
