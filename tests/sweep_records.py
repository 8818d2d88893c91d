"""Whether the committed sweep records (benchmarks/*-sweep-*.json) are parked outside the tree for a device call by
tools/park_sweep_records.sh, for the tests that read them.

Parked, the records are gone and benchmarks/SWEEP_RECORDS_PARKED says where they went: those tests skip. Only the
marker without any record counts as parked, so a marker committed by mistake cannot hide a missing record.
"""

from __future__ import annotations

import pathlib

import pytest

BENCHMARKS = pathlib.Path(__file__).resolve().parents[1] / "benchmarks"
PARK_MARKER = BENCHMARKS / "SWEEP_RECORDS_PARKED"


def records_present() -> bool:
    return any(BENCHMARKS.glob("*-sweep-*.json"))


PARKED = PARK_MARKER.exists() and not records_present()
skip_if_parked = pytest.mark.skipif(PARKED, reason="sweep records parked by tools/park_sweep_records.sh")
