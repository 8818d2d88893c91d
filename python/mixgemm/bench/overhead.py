"""``python -m mixgemm overhead``: what one eager call costs the host, next to torch.matmul (issue 9).

Each entry point is called ``calls`` times back to back in eager mode (no CUDA graph) on one problem, the
wall clock taken around the whole loop and one ``torch.cuda.synchronize()``; the per-call time is that
span over ``calls``. At decode sizes the kernels take a few microseconds, less than the Python around
them, so the GPU keeps up and the number is the host's cost per call (the launch included). Every call
is measured ``repeat`` times, the entry points interleaved, and the median reported.
"""

from __future__ import annotations

import functools
import statistics
import time
from typing import Callable

import torch

REFERENCE = "torch.matmul"


def build_cases(K: int, N: int, M: int, G: int, dtype: torch.dtype, device: str = "cuda"
                ) -> list[tuple[str, Callable[[], object]]]:
    """(label, zero-argument call) for each entry point, all on one random AWQ weight (prepacked in the GPU's
    own layout) and one ``x``."""
    from .. import baseline, formats, gemm, library, prepack
    from ..nn import QuantLinear
    from ..ops import awq_dequantize

    ckpt = formats.random_awq_weight(K, N, G, dtype, device=device)
    packed = prepack(ckpt["qweight"], ckpt["scales"], ckpt["qzeros"], G)
    dense = awq_dequantize(ckpt["qweight"], ckpt["scales"], ckpt["qzeros"])  # [K, N], the same weight
    x = torch.randn(M, K, device=device, dtype=torch.float32).to(dtype)
    layer = QuantLinear(packed)
    cases = [
        (REFERENCE, functools.partial(torch.matmul, x, dense)),
        ("mixgemm.gemm", functools.partial(gemm, x, packed)),
        ("mixgemm.library.gemm", functools.partial(library.gemm, x, packed)),
        ("torch.ops.mixgemm.gemm (custom op)", functools.partial(
            torch.ops.mixgemm.gemm, x, packed.packed, packed.scales, packed.offsets, None, G, N, K, "auto",
            packed.layout, packed.scale_only)),
        ("QuantLinear", functools.partial(layer, x)),
    ]
    if dtype == torch.float16:  # the vLLM-style kernel is fp16 only
        cases.append(("baseline.awq_gemm", functools.partial(
            baseline.awq_gemm, x, ckpt["qweight"], ckpt["scales"], ckpt["qzeros"], 8)))
    return cases


def time_per_call(call: Callable[[], object], calls: int, warmup: int) -> float:
    """Mean microseconds per call over ``calls`` eager calls, after ``warmup`` untimed ones."""
    for _ in range(warmup):
        call()
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(calls):
        call()
    torch.cuda.synchronize()
    return (time.perf_counter() - start) / calls * 1e6


def measure(cases: list[tuple[str, Callable[[], object]]], calls: int, warmup: int, repeat: int) -> list[dict]:
    """One record per case: the median and min of ``repeat`` per-call means, and the ratio to matmul."""
    samples: dict[str, list[float]] = {label: [] for label, _ in cases}
    for _ in range(repeat):
        for label, call in cases:  # interleaved, so a slow patch of the host hits every case alike
            samples[label].append(time_per_call(call, calls, warmup))
    records = [{"call": label, "us_per_call": statistics.median(s), "min_us": min(s), "samples_us": s}
               for label, s in samples.items()]
    reference = samples.get(REFERENCE)
    for r in records:
        r["vs_matmul"] = r["us_per_call"] / statistics.median(reference) if reference else None
    return records
