"""The grouped GEMM: every routed (token, expert) product of one projection in one launch: the sm80 kernel's
grouped schedule or the decode GEMV's grouped form (cpp/mixgemm/moe/grouped_runner.h), or the sm90 form
(sm90_form.py) between a gather of x's rows and a scatter of the products."""

from __future__ import annotations

import torch

from .. import _checks, device, workspace
from .._runtime import current_stream, device_guard
from . import heuristic, sm90_form
from .experts import ExpertWeights
from .routing import Routing

X_ROWS = ("token", "slot")
K_TILE = 64  # K per k-tile of both kernel forms (the sm80 main loop's and the GEMV's batch): split-K's unit
FLOAT32_BYTES = 4  # split-K partials are fp32


def grouped_gemm(x: torch.Tensor, experts: ExpertWeights, routing: Routing, *, x_rows: str = "token",
                 topk_weights: torch.Tensor | None = None, config: str | None = None,
                 split_k: int | None = None) -> torch.Tensor:
    """``out[s] = x[row of s] @ dequant(W[expert of s])`` for every slot ``s = t * top_k + j`` of ``routing``,
    as ``[tokens * top_k, experts.out_features]`` in x's dtype; gated experts give ``SiLU(gate) * up``.

    ``x_rows="token"``: x is ``[tokens, k]`` and slot s reads row ``s // top_k`` (the first projection);
    ``"slot"``: x is ``[tokens * top_k, k]``, one row per slot (the second). ``topk_weights`` ``[tokens,
    top_k]`` float32 multiplies each slot's row. ``config``: a compiled config whose routing block is
    ``routing.block_m`` (default: the heuristic's; the sm90 form's, ``sm90_*``, take ``block_m = 1``);
    ``split_k``: K splits of the sm80 and decode forms (default: the heuristic's, more than one only at decode).
    Rows of slots whose expert id was out of range are undefined (see :func:`mixgemm.moe.route`).
    """
    from .. import _C

    fn = "mixgemm.moe.grouped_gemm"
    if not isinstance(experts, ExpertWeights):
        raise ValueError(f"{fn}: experts must be a mixgemm.moe.ExpertWeights (mixgemm.moe.prepack_experts), "
                         f"got {type(experts).__name__}")
    if x_rows not in X_ROWS:
        raise ValueError(f"{fn}: x_rows must be one of {X_ROWS}, got {x_rows!r}")
    _checks.check_tensor(fn, "x", x, (experts.act_dtype,), 2)
    rows = routing.num_tokens if x_rows == "token" else routing.num_slots
    _checks.check_shape(fn, "x", x, (rows, experts.k), f"{'tokens' if x_rows == 'token' else 'tokens x top_k'} x "
                        "the experts' K")
    if routing.num_experts != experts.num_experts:
        raise ValueError(f"{fn}: the routing is over {routing.num_experts} experts, the weights hold "
                         f"{experts.num_experts}")
    weights_ptr = 0
    if topk_weights is not None:
        _checks.check_tensor(fn, "topk_weights", topk_weights, (torch.float32,), 2, aligned=False)
        _checks.check_shape(fn, "topk_weights", topk_weights, (routing.num_tokens, routing.top_k),
                            "tokens x top_k, as topk_ids")
        weights_ptr = topk_weights.data_ptr()
    tensors = {"x": x, "packed experts": experts.packed, "routing": routing.slot_of}
    if topk_weights is not None:
        tensors["topk_weights"] = topk_weights
    _checks.check_same_device(fn, **tensors)
    sm_count = device.facts(fn, x.device).sm_count
    if config is None and routing.block_m == 1:  # an unpadded routing: the sm90 form's
        fits = heuristic.sm90_form_fits(experts.n, experts.k, experts.group_size)
        config = heuristic.sm90_config_for(routing.num_slots, routing.num_experts, experts) or next(
            (name for _, name in heuristic.sm90_configs(experts.key) if fits), None)
        if config is None:
            raise ValueError(f"{fn}: a routing of block_m = 1 is the sm90 form's, which this build has not for "
                             f"{experts.key} or which does not take [K={experts.k}, N={experts.n}] group "
                             f"{experts.group_size} (route with the heuristic's block_m instead)")
    if config is None:
        config = heuristic.config_for(routing.block_m, routing.num_slots, routing.num_experts, experts.n, experts.key,
                                      sm_count)
    else:
        block_m = heuristic.block_height(config)
        if block_m != routing.block_m:
            raise ValueError(f"{fn}: config {config} takes blocks of {block_m} rows but the routing was built for "
                             f"block_m = {routing.block_m}")
    if heuristic.is_sm90_form(config):
        if split_k not in (None, 1):
            raise ValueError(f"{fn}: the sm90 form ({config}) does not split K; got split_k = {split_k!r}")
        return _sm90_grouped_gemm(x, experts, routing, x_rows, topk_weights, config)
    if split_k is None:
        split_k = heuristic.split_for(routing.block_m, config, routing.num_slots, routing.num_experts, experts.n,
                                      experts.k, sm_count)
    elif isinstance(split_k, bool) or not isinstance(split_k, int) or not 1 <= split_k <= experts.k // K_TILE:
        raise ValueError(f"{fn}: split_k must be an int in [1, K / {K_TILE} = {experts.k // K_TILE}], got "
                         f"{split_k!r}")
    out = torch.empty((routing.num_slots, experts.out_features), dtype=x.dtype, device=x.device)
    a_rows = routing.token_of if x_rows == "token" else routing.slot_of
    stream = current_stream(x.device)
    scratch_ptr = semaphores_ptr = 0
    if split_k > 1:
        tile_m, tile_n = heuristic.tile_of(config)
        tiles = routing.max_blocks * -(-experts.n // tile_n)
        scratch_ptr = workspace.scratch(x.device, stream, FLOAT32_BYTES * split_k * tiles * tile_m * tile_n).data_ptr()
        semaphores_ptr = workspace.semaphores(x.device, stream, tiles).data_ptr()
    with device_guard(x.device):
        _C.moe.grouped_gemm(config, experts.key.as_tuple(), experts.gated, x.data_ptr(), experts.packed.data_ptr(),
                            experts.scales.data_ptr(), experts.offsets.data_ptr(), out.data_ptr(), a_rows.data_ptr(),
                            routing.slot_of.data_ptr(), routing.block_expert.data_ptr(),
                            routing.num_padded.data_ptr(), weights_ptr, rows, experts.n, experts.k,
                            experts.group_size, routing.num_slots, routing.max_blocks,
                            experts.packed.stride(0), experts.scales.stride(0), split_k, scratch_ptr,
                            semaphores_ptr, stream)
    return out


def _sm90_grouped_gemm(x: torch.Tensor, experts: ExpertWeights, routing: Routing, x_rows: str,
                       topk_weights: torch.Tensor | None, config: str) -> torch.Tensor:
    """The sm90 form: x's rows gathered by expert, the products (SiLU(gate) * up of them when gated), scattered
    back to slot order times the slot weights."""
    xs = sm90_form.gather(x, routing.token_of if x_rows == "token" else routing.slot_of, routing)
    ys = sm90_form.gemm_sorted(xs, experts, routing, config)
    if experts.gated:
        ys = sm90_form.silu_mul(ys, experts, routing)
    return sm90_form.combine(ys, experts, routing, topk_weights, top_k=1)
