"""The tensor-parallel tests use the checkpoint tests' helpers (writers of tiny LLaMA checkpoints, the kernels'
CPU references)."""

from __future__ import annotations

import pathlib
import sys

CHECKPOINT_TESTS = pathlib.Path(__file__).resolve().parents[1] / "checkpoint"
if str(CHECKPOINT_TESTS) not in sys.path:
    sys.path.insert(0, str(CHECKPOINT_TESTS))
