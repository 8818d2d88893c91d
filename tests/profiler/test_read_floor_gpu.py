"""The read_floor yardstick's kernel reads every byte it is given, once: the xor of its blocks' results equals the
xor of every 32-bit word of the buffers, computed by torch. A word skipped or read twice changes that xor unless
the words involved happen to cancel, which random data makes vanishingly unlikely (2^-32 per case). Sizes cover
a tail shorter than one grid-wide step, more than one step, and three buffers of unequal sizes."""

from __future__ import annotations

import functools

import pytest
import torch

from mixgemm.bench import peers
from gpu_helpers import DEVICE

pytestmark = pytest.mark.gpu


def _random_words(n: int) -> torch.Tensor:
    return torch.randint(-2 ** 31, 2 ** 31 - 1, (n,), dtype=torch.int32, device=DEVICE)


def _xor(t: torch.Tensor) -> int:
    """The xor of every 32-bit word of ``t``, by torch: pairs of words are xor-ed until one is left."""
    words = t.contiguous().view(torch.int32).flatten()
    while words.numel() > 1:
        if words.numel() % 2:
            words = torch.cat([words, words.new_zeros(1)])
        pairs = words.view(-1, 2)
        words = pairs[:, 0] ^ pairs[:, 1]
    return int(words.item()) if words.numel() else 0


@pytest.mark.parametrize("sizes", [(4,), (1 << 20,), (3 * (1 << 18) + 4,), (4 << 20, 1 << 16, 1 << 16), (4, 8, 12)])
def test_reads_every_word_once(sizes):
    buffers = [_random_words(n) for n in sizes]
    folded = peers.read_floor(buffers)
    assert folded.dtype == torch.int32 and folded.shape == (peers.extension().peers.READ_FLOOR_MAX_BLOCKS,)
    expected = functools.reduce(lambda a, b: a ^ b, (_xor(b) for b in buffers), 0)
    assert _xor(folded) == expected
    # Reused (the peer's closures share one output): the same result, the slots past the grid still zero.
    assert _xor(peers.read_floor(buffers, folded)) == expected


def test_reads_half_tensors_by_bytes():
    scales = torch.randn(64, 1024, device=DEVICE, dtype=torch.float16)
    assert _xor(peers.read_floor([scales])) == _xor(scales)


def test_the_peer_reads_the_packed_weight_scales_and_offsets():
    closures, reason = peers.build("read_floor", 1, 512, 1024, 128, torch.float16, 2)
    assert reason is None and len(closures) == 2
    packed = peers._packed_copies(1024, 512, 128, torch.float16, 2)[1]
    folded = closures[1]()
    assert _xor(folded) == _xor(packed.packed) ^ _xor(packed.scales) ^ _xor(packed.offsets)


def test_captured_in_a_cuda_graph():
    buffers = [_random_words(1 << 16)]
    folded = peers.read_floor(buffers)
    folded.zero_()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        peers.read_floor(buffers, folded)
    graph.replay()
    torch.cuda.synchronize()
    assert _xor(folded) == _xor(buffers[0])


@pytest.mark.parametrize("make, pattern", [
    (lambda: [torch.zeros(4, device=DEVICE)[1:]], r"tensors\[0\] must be 16-byte aligned and a positive multiple "
                                                   r"of 16 bytes, got 12 bytes at an address 4 bytes past 16"),
    (lambda: [torch.zeros(6, device=DEVICE)], r"tensors\[0\] must be 16-byte aligned .* got 24 bytes"),
    (lambda: [torch.zeros(4, 4, device=DEVICE).t()], r"tensors\[0\] must be a contiguous CUDA tensor"),
])
def test_bad_tensors_name_the_rule(make, pattern):
    with pytest.raises(ValueError, match=rf"^read_floor: {pattern}"):
        peers.read_floor(make())


def test_bad_folded_names_the_rule():
    buffers = [_random_words(4)]
    with pytest.raises(ValueError, match=r"^read_floor: folded"):
        peers.read_floor(buffers, torch.zeros(16, dtype=torch.int32, device=DEVICE))
