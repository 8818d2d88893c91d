"""run_two_gpus.py under torchrun: on two GPUs (NCCL, our kernels; marked gpu, skipped with fewer than two) and on
the CPU (gloo, the kernels' references), so the whole tensor-parallel path (sharded loading, padding, the
all-reduce, heads per rank) is checked against the single-device result on every machine."""

from __future__ import annotations

import pathlib

import pytest
import torch

from torchrun import torchrun

SCRIPT = pathlib.Path(__file__).resolve().parent / "run_two_gpus.py"


def _check(result) -> None:
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-8000:]
    assert "TP CHECK PASSED" in result.stdout, result.stdout[-4000:]


def test_layers_and_models_on_two_cpu_processes(tmp_path):
    pytest.importorskip("transformers")
    _check(torchrun(SCRIPT, "--cpu", "--folder", str(tmp_path)))


@pytest.mark.gpu
@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two GPUs")
def test_layers_and_models_on_two_gpus(tmp_path):
    pytest.importorskip("transformers")
    _check(torchrun(SCRIPT, "--folder", str(tmp_path)))
