"""Every checkpoint format's shards, cut from the packed tensors, against the same slice of the unpacked
(dense) weight: column- and row-parallel, every rank, plain cuts, padded N and K, groups split between ranks,
act-order rows (closed and regrouped). CPU only."""

from __future__ import annotations

import pytest
import torch

from mixgemm.tensor_parallel import ShardSpec, shard_checkpoint

from tp_checkpoints import KINDS, make_layer, reference_shard, shard_dense

PLAIN = [k for k, v in KINDS.items() if not v[3]]
ACT_ORDER = [k for k, v in KINDS.items() if v[3]]


def shard(layer, style, rank, world, name="layer"):
    t = layer.tensors
    return shard_checkpoint(name, ShardSpec(rank, world, style), layer.fmt, layer.bits, t["qweight"], t["scales"],
                            t["qzeros"], t["g_idx"], t["bias"])


def check(layer, style, rank, world):
    sharded = shard(layer, style, rank, world)
    assert torch.equal(shard_dense(sharded), reference_shard(layer, style, rank, world))
    N = layer.q.shape[1]
    if style == "column":
        expected_bias = layer.bias[rank * N // world: (rank + 1) * N // world]
    else:
        expected_bias = layer.bias if rank == 0 else None  # added once, by rank 0, before the all-reduce
    if expected_bias is None:
        assert sharded.bias is None
    else:
        assert torch.equal(sharded.bias[: expected_bias.shape[0]], expected_bias)
        assert not sharded.bias[expected_bias.shape[0]:].any()
    return sharded


@pytest.mark.parametrize("kind", list(KINDS))
@pytest.mark.parametrize("style", ["column", "row"])
@pytest.mark.parametrize("world", [2, 4])
def test_plain_cut_matches_the_dense_slice(kind, style, world):
    layer = make_layer(kind, K=512, N=512, G=64, seed=world)
    for rank in range(world):
        sharded = check(layer, style, rank, world)
        g = sharded.geometry
        if not KINDS[kind][3] or style == "column":
            assert (g.k_pad, g.n_pad, sharded.input_index) == (0, 0, None), "a plain cut needs no padding"


@pytest.mark.parametrize("kind", PLAIN)
def test_column_shard_padded_to_64_columns(kind):
    # N / 2 = 72: a multiple of 8 (whole int32 words) but not of 64: padded to 128, narrowed back.
    layer = make_layer(kind, K=256, N=144, G=64)
    for rank in range(2):
        g = check(layer, "column", rank, 2).geometry
        assert (g.n_size, g.weight_n) == (72, 128)


@pytest.mark.parametrize("kind", PLAIN)
def test_row_shard_splitting_groups_uses_smaller_groups_and_pads_k(kind):
    # K / 2 = 96 rows: the boundary falls in the middle of a group of 64, so groups of 32; padded to 128 rows.
    layer = make_layer(kind, K=192, N=128, G=64)
    for rank in range(2):
        sharded = check(layer, "row", rank, 2)
        g = sharded.geometry
        assert (g.shard_group, g.k_size, g.weight_k) == (32, 96, 128)
        assert sharded.input_index is not None


@pytest.mark.parametrize("kind", PLAIN)
def test_row_shard_whose_groups_would_be_too_small_is_regrouped(kind):
    # K / 2 = 112 with groups of 32: cutting at the boundary would need groups of 16 (dequant path only);
    # regrouped into groups of 32 with the split group padded.
    layer = make_layer(kind, K=224, N=64, G=32)
    for rank in range(2):
        sharded = check(layer, "row", rank, 2)
        assert sharded.geometry.shard_group == 32 and sharded.geometry.weight_k == 128


@pytest.mark.parametrize("kind", ["awq", "gptq_v1"])
def test_per_channel_row_shard_keeps_one_group_per_shard(kind):
    layer = make_layer(kind, K=256, N=128, G=256)
    for rank in range(2):
        assert check(layer, "row", rank, 2).geometry.shard_group == 128


@pytest.mark.parametrize("kind", ACT_ORDER)
def test_act_order_row_shard_holding_whole_groups_keeps_them(kind):
    layer = make_layer(kind, K=512, N=128, G=64, closed_world=2)
    for rank in range(2):
        sharded = check(layer, "row", rank, 2)
        assert sharded.g_idx is not None and sharded.input_index is None  # prepack permutes, as for any act-order
        assert sharded.geometry.weight_k == 256


@pytest.mark.parametrize("kind", ACT_ORDER)
@pytest.mark.parametrize("world", [2, 4])
def test_act_order_row_shard_is_regrouped_exactly(kind, world):
    layer = make_layer(kind, K=1024, N=128, G=128, seed=3)
    for rank in range(world):
        sharded = check(layer, "row", rank, world)
        g = sharded.geometry
        assert sharded.g_idx is None and sharded.format == "gptq_v2" and g.shard_group == 32
        assert g.weight_k % 64 == 0 and g.k_size <= g.weight_k <= g.k_size + 31 * (1024 // 128) + 63


def test_act_order_column_shard_keeps_g_idx():
    layer = make_layer("gptq_act_order", K=512, N=256, G=64)
    sharded = check(layer, "column", 1, 2)
    assert torch.equal(sharded.g_idx.long(), layer.g_idx)


def test_plain_g_idx_is_dropped():
    # GPTQ writes g_idx = k // G for every layer: not act-order, so the shard is cut by position.
    layer = make_layer("gptq_v1", K=512, N=128, G=64)
    assert shard(layer, "row", 1, 2).g_idx is None


def test_lazy_sources_read_only_the_shard(monkeypatch):
    """A source that records what is read: the shard's slices only, never the whole qweight."""
    layer = make_layer("gptq_v1", K=512, N=256, G=64)
    reads = []

    class Recording:
        def __init__(self, t, key):
            self.t, self.key, self.shape = t, key, tuple(t.shape)

        def __getitem__(self, index):
            part = self.t[index]
            reads.append((self.key, tuple(part.shape)))
            return part

    t = {k: (Recording(v, k) if isinstance(v, torch.Tensor) and k != "g_idx" else v)
         for k, v in layer.tensors.items()}
    shard_checkpoint("layer", ShardSpec(1, 2, "column"), "gptq", 4, t["qweight"], t["scales"], t["qzeros"],
                     t["g_idx"], t["bias"])
    assert dict(reads) == {"qweight": (64, 128), "scales": (8, 128), "qzeros": (8, 16), "bias": (128,)}
