"""Routing preparation: the router's ``topk_ids`` sorted by expert into the blocks the grouped GEMM walks, on
the GPU (cpp/mixgemm/moe/routing.cu), with no host synchronisation.

The buffers are sized by the most blocks any routing of ``num_slots = tokens x top_k`` slots can need, never by
this routing's counts, so a CUDA graph captured once replays correctly when the routing changes.
"""

from __future__ import annotations

import dataclasses

import torch

from .. import _checks
from .._runtime import current_stream, device_guard


@dataclasses.dataclass
class Routing:
    """Slots ``s = t * top_k + j`` sorted by expert, each expert's run padded to a multiple of ``block_m``:
    ``slot_of[p]`` the slot at sorted position p (``num_slots`` for padding), ``token_of[p]`` its token,
    ``block_expert[b]`` the expert of positions ``b * block_m ..``, ``num_padded`` (a 1-element device tensor)
    the positions in use; ``position_of[s]`` the position of slot s (-1: routed nowhere) and ``expert_start[e]``
    the first position of expert e's run (``[E]``: the positions in use), what the sm90 form reads (its
    routing has ``block_m = 1``: unpadded runs)."""

    slot_of: torch.Tensor
    token_of: torch.Tensor
    block_expert: torch.Tensor
    num_padded: torch.Tensor
    position_of: torch.Tensor
    expert_start: torch.Tensor
    block_m: int
    num_tokens: int
    top_k: int
    num_experts: int

    @property
    def num_slots(self) -> int:
        return self.num_tokens * self.top_k

    @property
    def max_blocks(self) -> int:
        return self.block_expert.shape[0]


def _may_sync() -> bool:
    """Whether a host synchronisation is allowed here: not while a CUDA graph is being captured nor while
    torch.compile traces."""
    compiling = getattr(torch.compiler, "is_compiling", lambda: False)()
    return not compiling and not torch.cuda.is_current_stream_capturing()


def check_topk_ids(fn: str, topk_ids: torch.Tensor, num_experts: int, check_range: bool = True) -> None:
    """topk_ids must be a contiguous 2-D int32/int64 CUDA tensor [tokens, top_k]; with ``check_range`` (and
    where a sync is allowed) every id must name one of the experts."""
    from .. import _C

    _checks.check_tensor(fn, "topk_ids", topk_ids, (torch.int32, torch.int64), 2, aligned=False)
    if topk_ids.shape[0] < 1 or topk_ids.shape[1] < 1:
        raise ValueError(f"{fn}: topk_ids must be [tokens >= 1, top_k >= 1], got {tuple(topk_ids.shape)}")
    if not 1 <= num_experts <= _C.moe.MAX_EXPERTS:
        raise ValueError(f"{fn}: the number of experts must be in [1, {_C.moe.MAX_EXPERTS}], got {num_experts}")
    if topk_ids.shape[1] > num_experts:
        raise ValueError(f"{fn}: top_k = {topk_ids.shape[1]} exceeds the {num_experts} experts")
    if check_range and _may_sync():
        lo, hi = (int(v) for v in torch.aminmax(topk_ids))
        if lo < 0 or hi >= num_experts:
            bad = lo if lo < 0 else hi
            raise ValueError(f"{fn}: topk_ids holds expert id {bad}, outside [0, {num_experts}) "
                             f"(the layer has {num_experts} experts)")


def route(topk_ids: torch.Tensor, num_experts: int, block_m: int, *, check_range: bool = True) -> Routing:
    """Sorts the slots of ``topk_ids`` ``[tokens, top_k]`` by expert into blocks of ``block_m`` positions.

    ``check_range``: verify every id is in ``[0, num_experts)`` (a host sync; skipped under CUDA-graph capture
    and torch.compile, where ids out of range route nowhere and their output rows are left unwritten)."""
    from .. import _C

    fn = "mixgemm.moe.route"
    check_topk_ids(fn, topk_ids, num_experts, check_range)
    tokens, top_k = topk_ids.shape
    num_slots = tokens * top_k
    blocks = _C.moe.max_blocks(num_slots, num_experts, block_m)
    device = topk_ids.device
    i32 = dict(dtype=torch.int32, device=device)
    slot_of = torch.empty(blocks * block_m, **i32)
    token_of = torch.empty(blocks * block_m, **i32)
    block_expert = torch.empty(blocks, **i32)
    num_padded = torch.empty(1, **i32)
    position_of = torch.empty(num_slots, **i32)
    expert_start = torch.empty(num_experts + 1, **i32)
    with device_guard(device):
        _C.moe.route(topk_ids.data_ptr(), topk_ids.dtype == torch.int64, num_slots, top_k, num_experts, block_m,
                     slot_of.data_ptr(), token_of.data_ptr(), block_expert.data_ptr(), num_padded.data_ptr(),
                     position_of.data_ptr(), expert_start.data_ptr(), current_stream(device))
    return Routing(slot_of, token_of, block_expert, num_padded, position_of, expert_start, block_m, tokens, top_k,
                   num_experts)
