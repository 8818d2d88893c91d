"""The mixture-of-experts computation in plain PyTorch, float32, one expert at a time: what
:func:`mixgemm.moe.fused_moe` computes, written so that it can be read and trusted. It runs on any device (the
CPU tests use it with dense weights; the GPU tests compare the grouped kernel against it)."""

from __future__ import annotations

import torch
import torch.nn.functional as F


def reference_fused_moe(x: torch.Tensor, w13_dense: torch.Tensor, w2_dense: torch.Tensor,
                        topk_weights: torch.Tensor, topk_ids: torch.Tensor) -> torch.Tensor:
    """``out[t] = sum_j topk_weights[t, j] * (silu(x[t] @ W1[e]) * (x[t] @ W3[e])) @ W2[e]``, ``e = topk_ids[t, j]``,
    in float32 (returned as float32 ``[T, hidden]`` on x's device).

    ``x [T, hidden]``; ``w13_dense [E, hidden, 2 * inter]`` with each expert's gate columns (W1) first, then its
    up columns (W3); ``w2_dense [E, inter, hidden]``; ``topk_weights [T, k]`` (used as given: the model's
    renormalisation, if any, is already in them); ``topk_ids [T, k]`` integer expert indices in ``0 .. E - 1``.
    """
    fn = "reference_fused_moe"
    _check(fn, x, w13_dense, w2_dense, topk_weights, topk_ids)
    T, hidden = x.shape
    inter = w2_dense.shape[1]
    xf = x.float()
    weights = topk_weights.float()
    out = torch.zeros(T, hidden, dtype=torch.float32, device=x.device)
    for e in torch.unique(topk_ids).tolist():
        tokens, slots = torch.nonzero(topk_ids == e, as_tuple=True)  # each (token, slot) routed to expert e
        h = xf[tokens] @ w13_dense[e].float()
        y = (F.silu(h[:, :inter]) * h[:, inter:]) @ w2_dense[e].float()
        out.index_add_(0, tokens, y * weights[tokens, slots].unsqueeze(1))
    return out


def _check(fn: str, x, w13, w2, topk_weights, topk_ids) -> None:
    for name, t, dims in (("x", x, 2), ("w13_dense", w13, 3), ("w2_dense", w2, 3), ("topk_weights", topk_weights, 2),
                          ("topk_ids", topk_ids, 2)):
        if not isinstance(t, torch.Tensor) or t.dim() != dims:
            got = f"shape {tuple(t.shape)}" if isinstance(t, torch.Tensor) else type(t).__name__
            raise ValueError(f"{fn}: {name} must be a {dims}-D tensor, got {got}")
    T, hidden = x.shape
    E, inter = w2.shape[0], w2.shape[1]
    if tuple(w2.shape) != (E, inter, hidden):
        raise ValueError(f"{fn}: w2_dense must be [E, inter, hidden] with hidden = x.shape[1] = {hidden}, got "
                         f"{tuple(w2.shape)}")
    if tuple(w13.shape) != (E, hidden, 2 * inter):
        raise ValueError(f"{fn}: w13_dense must be [E, hidden, 2 * inter] = {(E, hidden, 2 * inter)} (gate columns "
                         f"first, then up) to match w2_dense {tuple(w2.shape)}, got {tuple(w13.shape)}")
    if topk_ids.shape[0] != T or tuple(topk_weights.shape) != tuple(topk_ids.shape):
        raise ValueError(f"{fn}: topk_weights and topk_ids must both be [T, k] with T = x.shape[0] = {T}, got "
                         f"{tuple(topk_weights.shape)} and {tuple(topk_ids.shape)}")
    if topk_ids.dtype.is_floating_point or topk_ids.dtype == torch.bool:
        raise ValueError(f"{fn}: topk_ids must hold integer expert indices, got {topk_ids.dtype}")
    if topk_ids.numel() and (int(topk_ids.min()) < 0 or int(topk_ids.max()) >= E):
        raise ValueError(f"{fn}: topk_ids must lie in 0 .. {E - 1} (the experts of w13_dense), got values in "
                         f"{int(topk_ids.min())} .. {int(topk_ids.max())}")
