"""Shared pieces of the GPU tests: fresh random checkpoints, poisoned allocations, error metrics."""

from __future__ import annotations

import torch

from mixgemm import formats
from mixgemm.layouts import sm90 as sm90_layout
from mixgemm.layouts.sm80 import dequantize_packed_reference

DEVICE = "cuda"


def poison_allocator(nbytes: int, blocks: int = 1) -> None:
    """Fills `blocks` blocks of at least `nbytes` each with NaN and frees them back to PyTorch's caching allocator.

    The op under test allocates its output with torch.empty right after, which normally reuses such a
    block: any element the kernel fails to write stays NaN and fails the finiteness checks. Several blocks
    serve several allocations made after one fill (a chain of calls with no other kernel between them).
    """
    junk = [torch.full((nbytes // 2 + 1024,), float("nan"), dtype=torch.float16, device=DEVICE)
            for _ in range(blocks)]
    del junk


def random_checkpoint(K: int, N: int, group_size: int, dtype: torch.dtype) -> dict[str, torch.Tensor]:
    """A fresh random AWQ checkpoint on the GPU (q, z uniform in 0..15; scales of both signs)."""
    return {k: v.to(DEVICE) for k, v in formats.random_awq_weight(K, N, group_size, dtype=dtype).items()}


def reference_weight(ckpt: dict[str, torch.Tensor], group_size: int) -> torch.Tensor:
    """W = (q - z) * s in float64, the mathematical weight."""
    q = formats.unpack_awq(ckpt["qweight"])
    z = formats.unpack_awq(ckpt["qzeros"])
    return formats.dequantize(q, ckpt["scales"], z, group_size=group_size, dtype=torch.float64)


def relative_error(out: torch.Tensor, ref: torch.Tensor) -> float:
    """||out - ref|| / ||ref|| in float64; NaN anywhere gives NaN, which fails every `<` comparison."""
    out64, ref64 = out.to(torch.float64), ref.to(torch.float64)
    return (torch.linalg.vector_norm(out64 - ref64) / torch.linalg.vector_norm(ref64)).item()


def random_int_checkpoint(K: int, N: int, G: int, dtype: torch.dtype, bits: int, zeros: bool):
    """A fresh random checkpoint, AWQ for int4 and GPTQ (with zero points) for int8, on the GPU: prepack's
    positional arguments (qweight, scales, qzeros or None for scale-only, G), the keywords its format needs,
    and the mathematical weight (q - z) * s (z the symmetric code when `zeros` is False)."""
    if bits == 4:
        ckpt = {k: v.to(DEVICE) for k, v in formats.random_awq_weight(K, N, G, dtype=dtype).items()}
        q, z = formats.unpack_awq(ckpt["qweight"]), formats.unpack_awq(ckpt["qzeros"])
        keywords = {}
    else:
        ckpt = {k: (v.to(DEVICE) if v is not None else None)
                for k, v in formats.random_gptq_int8_weight(K, N, G, dtype=dtype).items()}
        q, z = formats.unpack_gptq_qweight_int8(ckpt["qweight"]), formats.unpack_gptq_zeros_int8(ckpt["qzeros"])
        keywords = {"format": "gptq", "bits": 8}
    math_w = formats.dequantize(q, ckpt["scales"], z if zeros else None, group_size=G, bits=bits)
    return (ckpt["qweight"], ckpt["scales"], ckpt["qzeros"] if zeros else None, G), keywords, math_w


def sm90_layout_terms(packed):
    """An sm90-layout weight's signed codes, scales and offsets, one row per row of K, in float64: the terms
    of each kernel's model of the weight."""
    G = packed.group_size
    signed = (sm90_layout.unpack_sm90(packed.packed, packed.bits) - (1 << (packed.bits - 1))).double()
    return signed, packed.scales.double().repeat_interleave(G, 0), packed.offsets.double().repeat_interleave(G, 0)


def kernel_model_weight(packed) -> torch.Tensor:
    """The kernels' model of a packed weight of either layout: code * scale + offset in float64, rounded once to the
    activation dtype (the one fma each kernel does per weight element), back in float64."""
    if packed.layout == "sm90":
        signed, s, o = sm90_layout_terms(packed)
        w = signed * s + o
    else:
        w = dequantize_packed_reference(packed.packed, packed.scales, packed.offsets, packed.group_size,
                                        torch.float64)
    return w.to(packed.act_dtype).to(torch.float64)


# Tolerances of the kernel-model and mathematical-weight references (check_model_and_math): the model (codes *
# scale + offset rounded to the activation dtype, as a kernel converts them, times x in float64) differs from the
# output only by fp32 accumulation and the output rounding; the mathematical weight (q - z) * s also by the
# weight's rounding to fp16 / bf16.
MODEL_TOL = {torch.float16: 1e-3, torch.bfloat16: 8e-3}
MATH_TOL = {torch.float16: 3e-3, torch.bfloat16: 2e-2}


def check_model_and_math(out, x, bias, model_w, math_w, dtype, what: str) -> None:
    """`out` = x @ W (+ bias) against both references, finite everywhere (a poisoned element never written
    stays NaN)."""
    extra = bias.double() if bias is not None else 0.0
    assert torch.isfinite(out).all(), f"{what}: non-finite output (an element was never written)"
    err_model = relative_error(out, x.double() @ model_w + extra)
    err_math = relative_error(out, x.double() @ math_w + extra)
    assert err_model < MODEL_TOL[dtype], f"{what}: kernel-model error {err_model:.2e}"
    assert err_math < MATH_TOL[dtype], f"{what}: math error {err_math:.2e}"


def random_activations(M: int, K: int, dtype: torch.dtype) -> torch.Tensor:
    return torch.randn(M, K, dtype=torch.float32, device=DEVICE).to(dtype)


def check_rows_and_bias(run, rows, K: int, N: int, bias, model_w, math_w, dtype, what: str) -> None:
    """``run(x, b)`` on fresh activations of each M in ``rows``, without and with ``bias``, each output in
    poisoned memory and checked against both references (check_model_and_math)."""
    for M in rows:
        x = random_activations(M, K, dtype)
        for b in (None, bias):
            poison_allocator(M * N * 2)
            check_model_and_math(run(x, b), x, b, model_w, math_w, dtype, f"{what} M={M} bias={b is not None}")


def gptq_act_order_checkpoint(K: int, N: int, G: int) -> dict[str, torch.Tensor]:
    """A fresh random GPTQ act-order checkpoint on the GPU (q, z uniform in 0..15, positive fp16 scales,
    g_idx scattering each group's rows over K): the packed tensors, g_idx, the raw codes ``q`` / ``z`` and
    the float64 weight ``w``."""
    groups = K // G
    q = torch.randint(0, 16, (K, N), dtype=torch.uint8).to(DEVICE)
    z = torch.randint(0, 16, (groups, N), dtype=torch.uint8).to(DEVICE)
    scales = (torch.rand(groups, N) * 0.02 + 0.001).half().to(DEVICE)
    g_idx = (torch.randperm(K) % groups).to(torch.int32).to(DEVICE)
    return {"qweight": formats.pack_gptq_qweight(q.cpu()).to(DEVICE), "scales": scales,
            "qzeros": formats.pack_gptq_zeros(z.cpu()).to(DEVICE), "g_idx": g_idx, "q": q, "z": z,
            "w": formats.dequantize(q, scales, z, g_idx=g_idx)}
