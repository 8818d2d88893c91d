"""The routing kernel (cpp/mixgemm/moe/routing.cu) against the rule it implements: every slot exactly once, in
its expert's run, each run padded to a multiple of block_m, blocks in expert order."""

from __future__ import annotations

import pytest
import torch

import mixgemm.moe as moe
from moe_gpu_helpers import random_routing

pytestmark = pytest.mark.gpu


def check_routing(r: moe.Routing, topk_ids: torch.Tensor, E: int, block_m: int) -> None:
    ids = topk_ids.reshape(-1).long().cpu()
    S = ids.numel()
    counts = torch.bincount(ids, minlength=E)
    padded = (counts + block_m - 1) // block_m * block_m
    used = int(r.num_padded.item())
    assert used == int(padded.sum())
    slot_of = r.slot_of.cpu()[:used].long()
    token_of = r.token_of.cpu()[:used].long()
    block_expert = r.block_expert.cpu()[: used // block_m].long()
    start = 0
    for e in range(E):
        run = slot_of[start:start + padded[e]]
        real = run[run < S]
        assert real.numel() == counts[e], f"expert {e}"
        assert torch.equal(real.sort().values, (ids == e).nonzero().flatten()), f"expert {e}'s slots"
        assert torch.all(run[counts[e]:] == S), "padding holds num_slots"
        assert torch.all(block_expert[start // block_m:(start + padded[e]) // block_m] == e)
        start += int(padded[e])
    assert torch.equal(token_of, slot_of // topk_ids.shape[1])
    assert r.max_blocks >= used // block_m
    # The sm90 form's views: each expert's first position, and each slot's position.
    starts = torch.cat([torch.zeros(1, dtype=torch.long), padded.cumsum(0)])
    assert torch.equal(r.expert_start.cpu().long(), starts)
    position_of = r.position_of.cpu().long()
    assert torch.equal(slot_of[position_of], torch.arange(S)), "position_of inverts slot_of"


@pytest.mark.parametrize("T,E,top_k,block_m", [(1, 8, 2, 16), (1, 128, 8, 16), (16, 128, 8, 16), (37, 64, 6, 32),
                                               (1, 8, 2, 1), (300, 128, 8, 1), (999, 1024, 4, 1),
                                               (256, 8, 2, 64), (1000, 128, 8, 128), (4096, 64, 6, 64)])
@pytest.mark.parametrize("id_dtype", [torch.int32, torch.int64])
def test_routing_sorts_every_slot(T, E, top_k, block_m, id_dtype):
    ids, _ = random_routing(T, E, top_k)
    ids = ids.to(id_dtype)
    check_routing(moe.route(ids, E, block_m), ids, E, block_m)


def test_routing_all_tokens_on_one_expert_and_empty_experts():
    E, T, block_m = 16, 300, 64
    ids = torch.full((T, 1), 5, dtype=torch.int32, device="cuda")
    r = moe.route(ids, E, block_m)
    check_routing(r, ids, E, block_m)
    assert int(r.num_padded.item()) == 320  # 300 slots padded to 5 blocks of 64, every other expert empty


def test_routing_refuses_out_of_range_ids():
    ids = torch.tensor([[0, 3], [1, 8]], dtype=torch.int32, device="cuda")
    with pytest.raises(ValueError, match="expert id 8, outside \\[0, 8\\)"):
        moe.route(ids, 8, 16)
    with pytest.raises(ValueError, match="expert id -1"):
        moe.route(ids - 1, 8, 16)


def test_routing_refuses_bad_arguments():
    ids = torch.zeros((4, 2), dtype=torch.int32, device="cuda")
    with pytest.raises(ValueError, match="topk_ids must have dtype int32 or int64"):
        moe.route(ids.float(), 8, 16)
    with pytest.raises(ValueError, match="topk_ids must be 2-D"):
        moe.route(ids.reshape(-1), 8, 16)
    with pytest.raises(ValueError, match="top_k = 2 exceeds the 1 experts"):
        moe.route(ids, 1, 16)
    with pytest.raises(ValueError, match="number of experts must be in"):
        moe.route(ids, 5000, 16)


def test_out_of_range_ids_have_no_position():
    """Unchecked (as under graph capture), an out-of-range id routes nowhere: position -1, other slots placed."""
    ids = torch.tensor([[0, 3], [1, 8]], dtype=torch.int32, device="cuda")
    r = moe.route(ids, 8, 1, check_range=False)
    assert r.position_of.cpu().tolist()[3] == -1
    assert int(r.num_padded.item()) == 3 and int(r.expert_start[-1].item()) == 3
