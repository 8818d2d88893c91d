"""The timing protocol's sample length (mixgemm.bench.timing): how many calls a sample holds, on the CPU; on a GPU,
that a short call's samples are lengthened to the floor and that the floor takes the replay's fixed cost out of
the per-call time."""

from __future__ import annotations

import pytest
import torch

from mixgemm.bench import timing
from mixgemm.bench.timing import MAX_COPIES, MIN_SAMPLE_US, passes_for_floor


def test_a_sample_that_lasts_the_floor_keeps_its_calls():
    assert passes_for_floor(MIN_SAMPLE_US, 3, 3) == 3
    assert passes_for_floor(5 * MIN_SAMPLE_US, 1, 1) == 1


@pytest.mark.parametrize("sample_us, calls, closures, expected", [
    (176.4, 3, 3, 18),        # 58.8 us a call over 3 copies: 6 passes reach 1058 us
    (157.6, 1, 1, 7),         # one 157.6 us call: 7 of them reach 1103 us
    (999.9, 9, 9, 18),        # just short: a second pass
    (100.0, 1000, 1000, 1000),  # at most MAX_COPIES calls, and never less than one pass
    (0.0, 1, 1, MAX_COPIES),  # a sample too short to read: as many calls as the graph may hold
])
def test_a_short_sample_takes_whole_passes_up_to_the_floor(sample_us, calls, closures, expected):
    wanted = passes_for_floor(sample_us, calls, closures)
    assert wanted == expected
    assert wanted % closures == 0  # whole passes: no copy is read twice in a row, within a replay or across two
    assert wanted <= max(closures, MAX_COPIES)


def test_every_wanted_length_reaches_the_floor_or_the_cap():
    for per_call in (0.7, 1.3, 9.0, 51.0, 157.6, 333.0):
        for closures in (1, 2, 3, 9, 33, 600):
            wanted = passes_for_floor(per_call * closures, closures, closures)
            assert wanted * per_call >= MIN_SAMPLE_US or wanted + closures > MAX_COPIES, (per_call, closures)
            assert (wanted - closures) * per_call < MIN_SAMPLE_US  # one pass less would fall short


@pytest.mark.gpu
def test_a_tiny_kernels_samples_last_the_floor_and_lose_the_replays_fixed_cost():
    t = torch.zeros(1, device="cuda")
    one = timing.time_fn([lambda: t.add_(1)], copies=1)  # the caller's count is kept exactly
    assert one.calls_per_sample == 1 and one.graph
    floored = timing.time_fn([lambda: t.add_(1)] * 3)
    assert floored.graph and floored.calls_per_sample % 3 == 0 and floored.calls_per_sample > 3
    assert floored.calls_per_sample * floored.max_us >= 0.5 * MIN_SAMPLE_US or floored.calls_per_sample == MAX_COPIES
    # A one-element add runs in a few microseconds a call; a single-call sample adds the replay's start to it
    # (the H100 read 3.3 us with its enqueue hidden, 17.5 without, 1.3 at 64 calls a sample).
    assert floored.median_us < 3.0 < one.median_us + 1.0
    assert floored.median_us < one.median_us
