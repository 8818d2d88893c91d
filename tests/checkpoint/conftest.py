"""Fixtures shared by the checkpoint tests."""

from __future__ import annotations

import pytest

from mixgemm import ops, packing
from cpu_references import cpu_gemm, cpu_prepack


@pytest.fixture
def cpu_kernels(monkeypatch):
    """ops.gemm and packing.prepack replaced by their CPU references for one test."""
    monkeypatch.setattr(ops, "gemm", cpu_gemm)
    monkeypatch.setattr(packing, "prepack", cpu_prepack)
