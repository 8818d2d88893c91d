"""CPU tests of the device guard: a launch on tensors of a GPU other than the current one makes their GPU
current for the launch (the CUDA runtime launches on the current device and refuses another device's
stream), and costs nothing when it already is current.

ops.gemm runs its plan (``paths.base.KernelPlan`` / ``paths.dequant.DequantPlan``, ``.run(x2, weight, bias, out,
stream)``) under ``device_guard(plan.device)``, and resolves the plan itself (``ops._make_plan``) under the
weight's device too.

No GPU is needed: the current device is a variable of the test, and torch.cuda.device is replaced by a
context that sets and restores it, as the real one does.
"""

from __future__ import annotations

import contextlib

import pytest
import torch

import mixgemm
from mixgemm import _C, _checks, _runtime, device, ops, workspace
from mixgemm.kernel_key import KernelKey
from mixgemm.packing import PackedWeight
from mixgemm.paths import Gpu, Sm80Config
from mixgemm.paths.base import KernelPlan
from mixgemm.paths.dequant import DequantConfig, DequantPlan

K, N, G = 64, 64, 64
CONFIG = Sm80Config(16, 256, 64, 16, 64, 64, 3)
CUDA1 = torch.device("cuda", 1)


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


@pytest.fixture
def cpu_tensors(monkeypatch):
    """gemm's checks take the CPU tensors below for device ones (only their addresses are read)."""
    real = _checks.check_tensor
    monkeypatch.setattr(_checks, "check_tensor", lambda fn, name, t, dtypes, ndim, *, cuda=True, aligned=True:
                        real(fn, name, t, dtypes, ndim, cuda=False, aligned=aligned))


def weight() -> PackedWeight:
    """A 64 x 64 weight (CPU tensors)."""
    return PackedWeight(torch.zeros(N // 64, K // 16, 32, 4, dtype=torch.int32),
                        torch.zeros(K // G, N, dtype=torch.float16), torch.zeros(K // G, N, dtype=torch.float16),
                        G, 4, torch.float16, N, K, None)


def gemm_one_row(monkeypatch, plan):
    """mixgemm.gemm of one row of x, with ``plan`` as the plan it resolves."""
    monkeypatch.setattr(ops, "_plan_for", lambda fn, state, M, config: plan)
    return mixgemm.gemm(torch.zeros(1, K, dtype=torch.float16), weight())


def test_no_switch_for_the_current_device_or_a_cpu_tensor(devices):
    assert _runtime.device_guard(torch.device("cuda", 0)) is _runtime._NO_SWITCH
    assert _runtime.device_guard(torch.device("cpu")) is _runtime._NO_SWITCH
    with _runtime.device_guard(torch.device("cuda", 0)):
        assert devices.current == 0
    assert devices.switches == []


def test_another_device_is_made_current_for_the_block_and_restored(devices):
    with _runtime.device_guard(CUDA1):
        assert devices.current == 1
    assert devices.current == 0
    assert devices.switches == [1]


def test_gemm_launches_on_the_weights_device(devices, cpu_tensors, monkeypatch):
    # A plan for a weight on cuda:1 while cuda:0 is current: the launch must run with cuda:1 current, and
    # the stream it is handed must be cuda:1's.
    seen = []
    streams = []
    monkeypatch.setattr(ops, "current_stream", lambda device: streams.append(device) or 7)

    def launch(*args):
        seen.append((devices.current, args[-1]))

    gemm_one_row(monkeypatch, KernelPlan(CONFIG, CUDA1, launch, workspace_bytes=0, semaphore_count=0))
    assert seen == [(1, 7)]
    assert streams == [CUDA1]
    assert devices.current == 0  # restored after the call
    assert devices.switches == [1]


def test_gemm_runs_the_dequant_plan_on_the_weights_device(devices, cpu_tensors, monkeypatch):
    # The dequant path's expansion is our kernel: it too launches with the weight's GPU current, on its stream.
    seen = []
    monkeypatch.setattr(ops, "current_stream", lambda device: 7)
    monkeypatch.setattr(_C, "dequantize_packed",
                        lambda key, *args: seen.append((devices.current, key, args[-1])))
    out = gemm_one_row(monkeypatch, DequantPlan(DequantConfig(), CUDA1))
    assert seen == [(1, KernelKey().as_tuple(), 7)]
    assert tuple(out.shape) == (1, N) and devices.current == 0


def test_gemm_sizes_its_plan_and_workspace_on_the_weights_device(devices, cpu_tensors, monkeypatch):
    # The plan (the sm90 path's stream-K workspace is sized for the current device's SMs) and the scratch
    # (capture check and cached buffer, per device and stream) are both resolved with cuda:1 current.
    made = []
    monkeypatch.setattr(ops, "_plans", {})
    monkeypatch.setattr(ops, "_choose", lambda fn, state, M, config: made.append(("choose", devices.current))
                        or CONFIG)
    monkeypatch.setattr(device, "facts", lambda fn, dev: made.append(("facts", devices.current))
                        or Gpu("FakeGPU", 132, (9, 0)))

    class Launch:
        workspace_bytes, semaphores = 256, 4

    monkeypatch.setattr(_C, "prepare", lambda *args: made.append(("prepare", devices.current)) or Launch())
    state = ops._WeightState(weight())
    state.device = CUDA1  # as if the weight lived on cuda:1
    plan = ops._plan_for("gemm", state, 1, "auto")
    assert isinstance(plan, KernelPlan) and plan.device == CUDA1
    assert (plan.workspace_bytes, plan.semaphore_count) == (256, 4)
    assert made == [("choose", 1), ("facts", 1), ("prepare", 1)] and devices.current == 0

    scratch = []
    monkeypatch.setattr(ops, "current_stream", lambda device: 7)
    monkeypatch.setattr(workspace, "scratch", lambda device, stream, nbytes: scratch.append(
        ("scratch", devices.current, device, stream, nbytes)) or torch.zeros(1))
    monkeypatch.setattr(workspace, "semaphores", lambda device, stream, count: scratch.append(
        ("semaphores", devices.current, device, stream, count)) or torch.zeros(1))
    gemm_one_row(monkeypatch, KernelPlan(CONFIG, CUDA1, lambda *args: None, workspace_bytes=256,
                                         semaphore_count=4))
    assert scratch == [("scratch", 1, CUDA1, 7, 256), ("semaphores", 1, CUDA1, 7, 4)] and devices.current == 0
