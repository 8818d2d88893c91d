"""CPU tests of the device guard: a launch on tensors of a GPU other than the current one makes their GPU
current for the launch (the CUDA runtime launches on the current device and refuses another device's
stream), and costs nothing when it already is current.

No GPU is needed: the current device is a variable of the test, and torch.cuda.device is replaced by a
context that sets and restores it, as the real one does.
"""

from __future__ import annotations

import contextlib

import pytest
import torch

from mixgemm import _runtime, ops
from mixgemm.config import GemmConfig
from mixgemm.packing import PackedWeight


class FakeDevices:
    """The process's current CUDA device, and torch.cuda.device's switch of it."""

    def __init__(self, current: int = 0):
        self.current = current
        self.switches = []

    def current_index(self) -> int:
        return self.current

    @contextlib.contextmanager
    def device(self, index: int):
        self.switches.append(index)
        before, self.current = self.current, index
        try:
            yield
        finally:
            self.current = before


@pytest.fixture
def devices(monkeypatch):
    fake = FakeDevices(current=0)
    monkeypatch.setattr(_runtime, "_current_index", fake.current_index)
    monkeypatch.setattr(torch.cuda, "device", fake.device)
    return fake


def launch_one_row(plan) -> None:
    """ops._launch of ``plan`` on one row of x and a 64 x 64 weight (CPU tensors: only addresses are read)."""
    K, N, G = 64, 64, 64
    w = PackedWeight(torch.zeros(N // 64, K // 16, 32, 4, dtype=torch.int32), torch.zeros(K // G, N, dtype=torch.float16),
                     torch.zeros(K // G, N, dtype=torch.float16), G, 4, torch.float16, N, K, None)
    ops._launch(plan, torch.zeros(1, K, dtype=torch.float16), w, None, torch.empty(1, N, dtype=torch.float16))


def test_no_switch_for_the_current_device_or_a_cpu_tensor(devices):
    assert _runtime.device_guard(torch.device("cuda", 0)) is _runtime._NO_SWITCH
    assert _runtime.device_guard(torch.device("cpu")) is _runtime._NO_SWITCH
    with _runtime.device_guard(torch.device("cuda", 0)):
        assert devices.current == 0
    assert devices.switches == []


def test_another_device_is_made_current_for_the_block_and_restored(devices):
    with _runtime.device_guard(torch.device("cuda", 1)):
        assert devices.current == 1
    assert devices.current == 0
    assert devices.switches == [1]


def test_gemm_launches_on_the_weights_device(devices, monkeypatch):
    # A plan for a weight on cuda:1 while cuda:0 is current: the launch must run with cuda:1 current, and
    # the stream it is handed must be cuda:1's.
    seen = []
    streams = []
    monkeypatch.setattr(ops, "current_stream", lambda device: streams.append(device) or 7)

    def launch(*args):
        seen.append((devices.current, args[-1]))

    plan = ops._Plan(GemmConfig(16, 256, 64, 16, 64, 64, 3), torch.device("cuda", 1), launch)
    launch_one_row(plan)
    assert seen == [(1, 7)]
    assert streams == [torch.device("cuda", 1)]
    assert devices.current == 0  # restored after the call


def test_gemm_sizes_its_plan_and_workspace_on_the_weights_device(devices, monkeypatch):
    # The plan (the sm90 path's stream-K workspace is sized for the current device's SMs) and the workspace
    # (capture check and cached buffer, per device and stream) are both resolved with cuda:1 current.
    made, workspaces = [], []
    monkeypatch.setattr(ops, "_make_plan", lambda fn, state, M, config: made.append(devices.current) or "plan")
    monkeypatch.setattr(ops, "_plans", {})
    state = type("State", (), {"shape_key": ("k",), "device": torch.device("cuda", 1)})()
    assert ops._plan_for("gemm", state, 1, "auto") == "plan"
    assert made == [1] and devices.current == 0

    monkeypatch.setattr(ops, "current_stream", lambda device: 7)
    monkeypatch.setattr(ops, "_workspace", lambda device, stream, nbytes: workspaces.append(devices.current)
                        or torch.zeros(1))
    plan = ops._Plan(GemmConfig(16, 256, 64, 16, 64, 64, 3), torch.device("cuda", 1), lambda *args: None,
                     workspace_bytes=256)
    launch_one_row(plan)
    assert workspaces == [1] and devices.current == 0
