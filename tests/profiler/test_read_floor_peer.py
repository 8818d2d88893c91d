"""CPU tests of the read_floor yardstick (cpp/mixgemm/peers/read_floor.cu, bound as ``mixgemm._C.peers.read_floor``;
``mixgemm.bench.peers``): its place in the profiler and the argument rules of ``read_floor`` and of its binding that
are checked before any GPU is touched. The GPU half is tests/profiler/test_read_floor_gpu.py."""

from __future__ import annotations

import importlib
import types

import pytest
import torch

from mixgemm import _runtime
from mixgemm.bench import cli, peers

_C = importlib.import_module("mixgemm._C")
# The bench-only yardsticks live in the submodule _C.peers, apart from the library's kernels.
HAS_BINDING = hasattr(getattr(_C, "peers", None), "read_floor")
NO_BINDING = "this build of mixgemm._C has no read_floor"


def test_timed_only_when_named():
    assert peers.PEERS["read_floor"] is peers.read_floor_peer
    assert "read_floor" not in cli.parse_args(["bench"]).peers  # not a GEMM: not in every table
    assert cli.parse_args(["bench", "--peers", "mixgemm,read_floor"]).peers == ["mixgemm", "read_floor"]
    with pytest.raises(SystemExit):
        cli.parse_args(["bench", "--peers", "read_ceiling"])


def test_an_extension_without_the_binding_makes_it_unavailable(monkeypatch):
    # What a build without the yardstick looks like: a peers submodule without the binding.
    monkeypatch.setattr(_runtime, "_extension", types.SimpleNamespace(peers=types.SimpleNamespace()))
    with pytest.raises(peers.PeerUnavailable, match=NO_BINDING):
        peers.read_floor_peer(1, 4096, 4096, 128, torch.float16, 3)


def test_an_extension_without_the_peers_submodule_makes_it_unavailable(monkeypatch):
    monkeypatch.setattr(_runtime, "_extension", types.SimpleNamespace())  # a build from before _C.peers
    with pytest.raises(peers.PeerUnavailable, match=NO_BINDING):
        peers.read_floor_peer(1, 4096, 4096, 128, torch.float16, 3)


@pytest.mark.parametrize("tensors, error, pattern", [
    ([], ValueError, r"tensors must hold 1 to 3 tensors, got 0"),
    ([torch.zeros(16)] * 4, ValueError, r"tensors must hold 1 to 3 tensors, got 4"),
    ([torch.zeros(16).numpy()], TypeError, r"tensors\[0\] must be a torch.Tensor, got ndarray"),
    ([torch.zeros(16)], ValueError, r"tensors\[0\] must be a contiguous CUDA tensor, got cpu"),
])
def test_read_floor_rules_on_cpu(tensors, error, pattern):
    with pytest.raises(error, match=rf"^read_floor: {pattern}"):
        peers.read_floor(tensors)


# ---------------------------------------------------------------------------------------------------
# The binding's own rules: checked before the device is, so fake addresses reach them safely.

pytestmark_binding = pytest.mark.skipif(not HAS_BINDING, reason="this extension predates the read_floor binding")
FOLDED = 1 << 20  # an address that is never dereferenced: every case below fails a rule first


@pytestmark_binding
@pytest.mark.parametrize("buffers, pattern", [
    ([], r"1 to 3 buffers, got 0"),
    ([(1 << 20, 16)] * 4, r"1 to 3 buffers, got 4"),
    ([(0, 16)], r"buffer 0 must be non-null, 16-byte aligned and a positive multiple of 16 bytes, got 16 bytes"),
    ([(1 << 20, 16), ((1 << 20) + 8, 16)], r"buffer 1 must be non-null, 16-byte aligned"),
    ([(1 << 20, 24)], r"buffer 0 .* got 24 bytes"),
    ([(1 << 20, 0)], r"buffer 0 .* got 0 bytes"),
])
def test_binding_rules(buffers, pattern):
    with pytest.raises(ValueError, match=rf"^read_floor: {pattern}"):
        _C.peers.read_floor(buffers, FOLDED, 0)


@pytestmark_binding
def test_binding_needs_folded():
    with pytest.raises(ValueError, match=r"^read_floor: folded .* must be non-null"):
        _C.peers.read_floor([(1 << 20, 16)], 0, 0)
    assert _C.peers.READ_FLOOR_MAX_BLOCKS == 2048
    assert not hasattr(_C, "read_floor") and not hasattr(_C, "READ_FLOOR_MAX_BLOCKS")  # apart from the kernels
