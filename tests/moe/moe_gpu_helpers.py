"""Shared pieces of the grouped-GEMM GPU tests: random experts in checkpoint form with their float64 weights,
router outputs, and the float64 per-slot reference."""

from __future__ import annotations

import torch

from gpu_helpers import DEVICE, random_int_checkpoint
import mixgemm.moe as moe


def random_experts(E: int, K: int, N: int, G: int, dtype: torch.dtype, bits: int = 4, zeros: bool = True,
                   gated: bool = False, layout: str = "auto"):
    """E fresh random experts [K, N] prepacked as one ExpertWeights, and their weights [E, K, N] in float64
    (columns in checkpoint order: gate first, then up, for gated)."""
    ckpts, weights = [], []
    for _ in range(E):
        args, keywords, w = random_int_checkpoint(K, N, G, dtype, bits, zeros)
        ckpts.append(args)
        weights.append(w.double())
    qweights, scales, qzeros = [c[0] for c in ckpts], [c[1] for c in ckpts], [c[2] for c in ckpts]
    packed = moe.prepack_experts(qweights, scales, qzeros if zeros else None, G, gated=gated, layout=layout,
                                 **keywords)
    return packed, torch.stack(weights)


def random_routing(T: int, E: int, top_k: int, *, generator: torch.Generator | None = None, skew: float = 0.0):
    """Router outputs as a model makes them: softmax over random logits (skew > 0 piles tokens on low
    experts), top-k, renormalized. topk_ids int32 [T, top_k], topk_weights float32."""
    logits = torch.randn(T, E, device=DEVICE, generator=generator)
    logits -= skew * torch.arange(E, device=DEVICE, dtype=torch.float32)
    w, ids = torch.topk(torch.softmax(logits, dim=-1), top_k, dim=-1)
    return ids.to(torch.int32), (w / w.sum(dim=-1, keepdim=True)).float()


def reference_grouped(x: torch.Tensor, weights: torch.Tensor, topk_ids: torch.Tensor, x_rows: str,
                      topk_weights: torch.Tensor | None = None, gated: bool = False) -> torch.Tensor:
    """float64: out[s] = x[row of s] @ W[topk_ids.flat[s]] (x weight; gated: SiLU(gate) * up)."""
    T, k = topk_ids.shape
    ids = topk_ids.reshape(-1).long()
    slots = torch.arange(T * k, device=x.device)
    rows = slots // k if x_rows == "token" else slots
    x64 = x.double()[rows]
    out = torch.einsum("sk,skn->sn", x64, weights[ids])
    if gated:
        n = out.shape[1] // 2
        out = torch.nn.functional.silu(out[:, :n]) * out[:, n:]
    if topk_weights is not None:
        out = out * topk_weights.reshape(-1, 1).double()
    return out
