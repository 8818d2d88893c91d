#!/usr/bin/env python3
"""A small run of every kernel, for compute-sanitizer (memcheck, racecheck) in tools/gpu_check.sh.

Shapes are tiny so the sanitizer finishes in seconds; they still cover partial M tiles, a partial N
tile (N = 320), every compiled config of both mma.sync paths and each split-K mode (with an empty trailing
split) and stream-K, the sm80 path's tiles on sm90-layout weights, the decode path and the dequant path on both weight
layouts. On an sm_90 GPU every compiled sm90 kernel runs too (N = 256: its configs need N % tile_n == 0;
M = 17 leaves a partial token tile), with and without zero points, bias on, and the stream-K ones also
split K 2 ways. Then the grouped GEMM's every form and tile on both layouts and the fused MoE layer (moe_cases).

    python tools/sanitize_small.py [--only sm90|decode|sm80|sm80_on_sm90_layout|moe]
        # the sm90 kernels, the decode kernels, the sm80 path on both layouts, or its tiles on sm90-layout
        # weights alone (a full build's sm80 set under racecheck takes minutes)
"""

from __future__ import annotations

import argparse
import sys

import torch

import mixgemm
from mixgemm import formats


def relative_error(out: torch.Tensor, ref: torch.Tensor) -> float:
    """||out - ref|| / ||ref||, in float64 (NaN, from an unwritten output, fails every `<`)."""
    return ((out.double() - ref).norm() / ref.norm()).item()


def sm90_cases(x: torch.Tensor, failures: list) -> None:
    K, N, G = x.shape[1], 256, 128
    ckpt = {k: v.cuda() for k, v in formats.random_awq_weight(K, N, G, dtype=torch.float16).items()}
    q, z = formats.unpack_awq(ckpt["qweight"]), formats.unpack_awq(ckpt["qzeros"])
    bias = torch.randn(N, device="cuda").half()
    for zeros in (True, False):
        w = formats.dequantize(q, ckpt["scales"], z if zeros else None, group_size=G)
        ref = x.double() @ w + bias.double()
        packed = mixgemm.prepack(ckpt["qweight"], ckpt["scales"], ckpt["qzeros"] if zeros else None, G, layout="sm90")
        for config in mixgemm.compiled_configs(torch.float16, path="sm90"):
            if N % config.tile_n:
                continue
            # Stream-K configs also split K 2 ways (K = 384: 3 + 3 k-tiles): the split-K locks and partials.
            splits = (1, 2) if config.scheduler == "streamk" else (1,)
            for cfg in (config.with_split_k(s) for s in splits):
                err = relative_error(mixgemm.gemm(x, packed, bias, config=cfg), ref)
                if not err < 3e-3:
                    failures.append(f"{cfg.name} zeros={zeros}: relative error {err:.2e}")


def prepacked_weights(K: int, N: int, G: int, dtype: torch.dtype, bits: int, layouts) -> list:
    """A random checkpoint (AWQ int4, or GPTQ int8 with zero points) prepacked to each of `layouts`, each with
    the weight (q - z) * s its GEMMs must reproduce."""
    if bits == 4:
        c = {k: v.cuda() for k, v in formats.random_awq_weight(K, N, G, dtype=dtype).items()}
        w = formats.dequantize(formats.unpack_awq(c["qweight"]), c["scales"], formats.unpack_awq(c["qzeros"]),
                               group_size=G)
        keywords = {}
    else:
        c = {k: (v.cuda() if v is not None else None)
             for k, v in formats.random_gptq_int8_weight(K, N, G, dtype=dtype, symmetric=False).items()}
        w = formats.dequantize(formats.unpack_gptq_qweight_int8(c["qweight"]), c["scales"],
                               formats.unpack_gptq_zeros_int8(c["qzeros"]), group_size=G, bits=8)
        keywords = {"format": "gptq", "bits": 8}
    return [(mixgemm.prepack(c["qweight"], c["scales"], c["qzeros"], G, layout=layout, **keywords), w)
            for layout in layouts]


def decode_cases(x: torch.Tensor, failures: list) -> None:
    """The decode path on both weight layouts (the sm90 one is plain PyTorch to pack and mma.sync to run,
    so it needs no Hopper GPU): fp16 and bf16, int4 (G = 128, and G = 32 on the sm80 layout: two scale rows
    per batch) and int8, only rows up to each kernel's tile_m, and serial split-K only (a 6-batch K split 4
    ways leaves the last split one batch, and 4-warp blocks idle warps). On sm_90 the kernels run as
    programmatic dependent launches, back to back."""
    K, N = x.shape[1], 320
    for dtype in (torch.float16, torch.bfloat16):
        xs = x.to(dtype)
        weights = (prepacked_weights(K, N, 128, dtype, 4, ("sm80", "sm90"))
                   + prepacked_weights(K, N, 32, dtype, 4, ("sm80",))
                   + prepacked_weights(K, N, 128, dtype, 8, ("sm80", "sm90")))
        for packed, w in weights:
            for config in mixgemm.compiled_configs(dtype, packed.bits, path="decode"):
                rows = slice(0, min(x.shape[0], config.rows))
                ref = xs[rows].double() @ w.double()
                for split in ((1, "none"), (4, "serial")):
                    cfg = config.with_split_k(*split)
                    err = relative_error(mixgemm.gemm(xs[rows].contiguous(), packed, config=cfg), ref)
                    if not err < 2e-2:
                        failures.append(f"{cfg.name} ({dtype}, int{packed.bits}, G {packed.group_size}, "
                                        f"{packed.layout} layout): relative error {err:.2e}")


# The sm80 path's split modes: an empty trailing split (K = 384 is 6 k-tiles: split 4 runs 2, 2, 2, 0), and
# stream-K over 5 blocks, whose shares cut tiles at several k offsets.
SM80_SPLITS = ((1, "none"), (4, "serial"), (4, "parallel"), (5, "streamk"))


def sm80_on_sm90_layout_cases(x: torch.Tensor, failures: list) -> None:
    """The sm80 path's tiles compiled for sm90-layout weights (ldmatrix reads of the layout's blocks): int4 and
    int8, fp16 and bf16, N = 320 (a partial 256-column tile), every split mode of SM80_SPLITS."""
    K, N, G = x.shape[1], 320, 128
    for dtype in (torch.float16, torch.bfloat16):
        xs = x.to(dtype)
        weights = prepacked_weights(K, N, G, dtype, 4, ("sm90",)) + prepacked_weights(K, N, G, dtype, 8, ("sm90",))
        for packed, w in weights:
            ref = xs.double() @ w.double()
            for config in mixgemm.compiled_configs(dtype, packed.bits, path="sm80", layout="sm90"):
                for split in SM80_SPLITS:
                    cfg = config.with_split_k(*split)
                    err = relative_error(mixgemm.gemm(xs, packed, config=cfg), ref)
                    if not err < 2e-2:
                        failures.append(f"{cfg.name} ({dtype}, int{packed.bits}, sm90 layout): relative error "
                                        f"{err:.2e}")


def moe_cases(failures: list, on_sm90: bool) -> None:
    """The grouped GEMM's every compiled form and tile (decode GEMV, sm80 tiles, and on Hopper the sm90 form) on
    both weight layouts, gated and plain, K split where the form splits: 8 experts, 40 tokens, top-2 (experts
    with few and with no tokens), then the fused layer once per layout."""
    import mixgemm.moe as moe
    from mixgemm.moe import heuristic

    E, T, top_k, K, N, G = 8, 40, 2, 256, 256, 128
    gen = torch.Generator(device="cuda").manual_seed(1)
    ids = torch.stack([torch.randperm(E - 1, device="cuda", generator=gen)[:top_k] for _ in range(T)]).int()
    w = torch.rand(T, top_k, device="cuda", generator=gen)
    x = torch.randn(T, K, device="cuda", generator=gen).half()
    ckpts = [{k: v.cuda() for k, v in formats.random_awq_weight(K, N, G, dtype=torch.float16).items()} for _ in range(E)]
    dense = torch.stack([formats.dequantize(formats.unpack_awq(c["qweight"]), c["scales"],
                                            formats.unpack_awq(c["qzeros"]), group_size=G) for c in ckpts]).double()
    slots = ids.reshape(-1).long()
    plain = torch.einsum("sk,skn->sn", x.double()[torch.arange(T * top_k, device="cuda") // top_k], dense[slots])
    refs = {False: plain * w.reshape(-1, 1).double(),
            True: (torch.nn.functional.silu(plain[:, :N // 2]) * plain[:, N // 2:]) * w.reshape(-1, 1).double()}
    args = ([c["qweight"] for c in ckpts], [c["scales"] for c in ckpts], [c["qzeros"] for c in ckpts], G)
    for layout in ("sm80", "sm90") if on_sm90 else ("sm80",):
        for gated in (False, True):
            experts = moe.prepack_experts(*args, gated=gated, layout=layout)
            names = [name for _, _, name in heuristic.compiled_tiles(experts.key)]
            names += [name for _, name in heuristic.sm90_configs(experts.key)]
            for config in names:
                routing = moe.route(ids, E, heuristic.block_height(config))
                for split_k in (None,) if heuristic.is_sm90_form(config) else (1, 2):
                    out = moe.grouped_gemm(x, experts, routing, topk_weights=w, config=config, split_k=split_k)
                    err = relative_error(out, refs[gated])
                    if not err < 2e-2:
                        failures.append(f"moe {config} split {split_k} ({layout}, gated={gated}): relative error "
                                        f"{err:.2e}")
        w13 = moe.prepack_experts(*args, gated=True, layout=layout)
        w2 = moe.prepack_experts([c["qweight"][:N // 2] for c in ckpts], [c["scales"][:(N // 2) // G] for c in ckpts],
                                 [c["qzeros"][:(N // 2) // G] for c in ckpts], G, layout=layout)
        for tokens in (T, 1):  # the sm90 form where the layout has it (forced: 5 slots per expert) and decode
            saved = heuristic.SM90_MIN_LOAD
            heuristic.SM90_MIN_LOAD = 0 if tokens == T else saved
            try:
                out = moe.fused_moe(x[:tokens], w13, w2, w[:tokens], ids[:tokens])
            finally:
                heuristic.SM90_MIN_LOAD = saved
            if not torch.isfinite(out).all():
                failures.append(f"moe fused_moe ({layout}, {tokens} tokens): non-finite output")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", choices=("sm90", "decode", "sm80", "sm80_on_sm90_layout", "moe"),
                        help="run only these kernels")
    only = parser.parse_args().only
    K, N, G, M = 384, 320, 128, 17
    ckpt = {k: v.cuda() for k, v in formats.random_awq_weight(K, N, G, dtype=torch.float16).items()}
    x = torch.randn(M, K, device="cuda").half()
    ref = x.double() @ formats.dequantize(
        formats.unpack_awq(ckpt["qweight"]), ckpt["scales"], formats.unpack_awq(ckpt["qzeros"]), group_size=G
    )
    failures = []

    def check(name: str, out: torch.Tensor, tol: float) -> None:
        err = relative_error(out, ref)
        if not err < tol:
            failures.append(f"{name}: relative error {err:.2e}")

    on_sm90 = torch.cuda.get_device_capability() == (9, 0) and mixgemm.compiled_configs(path="sm90") != []
    if only == "sm90":
        if not on_sm90:
            print("sanitize_small: --only sm90 needs an sm_90 GPU and a build with 90a")
            return 1
        sm90_cases(x, failures)
        return report(failures)
    if only == "decode":
        decode_cases(x, failures)
        return report(failures)
    if only == "sm80_on_sm90_layout":
        sm80_on_sm90_layout_cases(x, failures)
        return report(failures)
    if only == "moe":
        moe_cases(failures, on_sm90)
        return report(failures)
    if only != "sm80":
        mixgemm.awq_dequantize(ckpt["qweight"], ckpt["scales"], ckpt["qzeros"])
        check("baseline", mixgemm.baseline.awq_gemm(x, ckpt["qweight"], ckpt["scales"], ckpt["qzeros"], 4), 5e-3)
    packed = mixgemm.prepack(ckpt["qweight"], ckpt["scales"], ckpt["qzeros"], G, layout="sm80")
    for config in mixgemm.compiled_configs(torch.float16):
        for split in SM80_SPLITS:
            cfg = config.with_split_k(*split)
            check(cfg.name, mixgemm.gemm(x, packed, config=cfg), 3e-3)
    if only == "sm80":
        sm80_on_sm90_layout_cases(x, failures)
        return report(failures)
    decode_cases(x, failures)
    sm80_on_sm90_layout_cases(x, failures)
    sm90_packed = mixgemm.prepack(ckpt["qweight"], ckpt["scales"], ckpt["qzeros"], G, layout="sm90")
    # The dequant path's expansion kernel on both layouts (then cuBLAS).
    for weight in (packed, sm90_packed):
        check(f"dequant_cublas ({weight.layout} layout)", mixgemm.gemm(x, weight, config=mixgemm.DequantConfig()),
              3e-3)
    if on_sm90:
        sm90_cases(x, failures)
    moe_cases(failures, on_sm90)
    return report(failures)


def report(failures: list) -> int:
    torch.cuda.synchronize()
    for f in failures:
        print("FAIL", f)
    print(f"sanitize_small: {len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
