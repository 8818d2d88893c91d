"""Test session setup.

Tests that need a GPU carry ``@pytest.mark.gpu``. Where no CUDA GPU is visible (CI) they are deselected,
not skipped, and the header says how many: the CPU suite is the whole suite for such a machine. On the
GPU machine (tools/gpu_check.sh) the same command runs everything but the few ``nogpu`` tests (which
check behaviour without a GPU), and ``--require-gpu`` makes a missing GPU an error, not a deselection.
"""

from __future__ import annotations

import pytest
import torch


def pytest_addoption(parser):
    parser.addoption("--require-gpu", action="store_true", help="fail instead of deselecting GPU tests")


def _gpu_available() -> bool:
    return torch.cuda.is_available() and torch.cuda.device_count() > 0


def _deselect(config, items, marker: str) -> None:
    chosen = [item for item in items if item.get_closest_marker(marker)]
    if chosen:
        config.hook.pytest_deselected(items=chosen)
        items[:] = [item for item in items if not item.get_closest_marker(marker)]


def pytest_collection_modifyitems(config, items):
    if _gpu_available():
        # Tests marked 'nogpu' assert what happens on a machine without a GPU (fake pointers must be
        # refused before any launch); CI runs them, a GPU machine cannot.
        _deselect(config, items, "nogpu")
        return
    if config.getoption("--require-gpu"):
        raise pytest.UsageError("--require-gpu given but torch sees no CUDA GPU")
    _deselect(config, items, "gpu")


def pytest_report_header(config):
    if _gpu_available():
        return f"mixgemm: GPU {torch.cuda.get_device_name(0)}, GPU tests enabled"
    return "mixgemm: no CUDA GPU visible, tests marked 'gpu' are deselected"



@pytest.fixture
def cpu_as_cuda(monkeypatch):
    """The entry points take CPU tensors for device ones (``check_tensor`` runs with ``cuda=False``) and the
    extension reports no GPU, so the rules past the device check are reached and a valid call stops, before
    any launch, at RuntimeError "no CUDA GPU" -- on any machine, with or without a GPU."""
    from mixgemm import _C, _checks

    real = _checks.check_tensor

    def check_tensor(fn, name, t, dtypes, ndim, *, cuda=True, aligned=True):
        return real(fn, name, t, dtypes, ndim, cuda=False, aligned=aligned)

    monkeypatch.setattr(_checks, "check_tensor", check_tensor)
    monkeypatch.setattr(_C, "cuda_device_count", lambda: 0)
