"""The timing protocol (mixgemm.bench.timing): how many calls a sample holds and the order of interleaved rounds,
on the CPU; on a GPU, that a short call's samples are lengthened to the floor and that the floor takes the
replay's fixed cost out of the per-call time."""

from __future__ import annotations

import contextlib

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


class _FakeGraph:
    def __init__(self, calls: int):
        self.calls = calls

    def replay(self) -> None:
        pass


@pytest.fixture
def fake_gpu_timer(monkeypatch):
    """time_fn's GPU steps stood in for: a capture runs the calls once and counts them into its graph (failing from
    ``fail_from`` calls on, if set), and a sample of n calls, graph or eager, lasts FIXED_US + n * PER_CALL_US, as
    the H100 measured for the split 8192x28672 M = 16 GEMM (about 24 us a sample, 50 a call)."""
    state = {"captures": [], "fail_from": None, "made": 0}

    def closure():
        state["made"] += 1

    def counted(run) -> int:
        state["made"] = 0
        run()
        return state["made"]

    def capture(run):
        n = counted(run)
        if state["fail_from"] is not None and n >= state["fail_from"]:
            raise RuntimeError("capture failed")
        state["captures"].append(n)
        return _FakeGraph(n)

    def sample_us(launch, hide_enqueue):
        graph = getattr(launch, "__self__", None)
        n = graph.calls if isinstance(graph, _FakeGraph) else counted(launch)
        return FIXED_US + n * PER_CALL_US

    class _Stream:
        def wait_stream(self, other):
            pass

    monkeypatch.setattr(timing, "capture_graph", capture)
    monkeypatch.setattr(timing, "sample_us", sample_us)
    monkeypatch.setattr(torch.cuda, "Stream", _Stream)
    monkeypatch.setattr(torch.cuda, "current_stream", lambda: _Stream())
    monkeypatch.setattr(torch.cuda, "stream", lambda s: contextlib.nullcontext())
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: None)
    state["closures"] = [closure] * 3
    return state


FIXED_US, PER_CALL_US = 24.0, 50.0


def test_time_fn_lengthens_a_short_sample_until_it_lasts_the_floor(fake_gpu_timer):
    t = timing.time_fn(fake_gpu_timer["closures"])
    # One pass: 174 us, read as 58 us a call -> 6 passes (924 us, still short: 51.3 a call) -> 7 passes (1074 us).
    assert fake_gpu_timer["captures"] == [3, 18, 21]
    assert t.calls_per_sample == 21 and t.graph and t.note is None
    assert t.median_us == pytest.approx((FIXED_US + 21 * PER_CALL_US) / 21)


def test_time_fn_keeps_the_callers_count(fake_gpu_timer):
    t = timing.time_fn(fake_gpu_timer["closures"], copies=5)
    assert fake_gpu_timer["captures"] == [5] and t.calls_per_sample == 5
    assert t.median_us == pytest.approx((FIXED_US + 5 * PER_CALL_US) / 5)


def test_time_fn_keeps_the_length_that_captured_when_a_longer_one_fails(fake_gpu_timer):
    fake_gpu_timer["fail_from"] = 10
    t = timing.time_fn(fake_gpu_timer["closures"])
    assert t.graph and t.calls_per_sample == 3
    assert "18 calls failed to capture" in t.note and "kept 3" in t.note


def test_time_fn_times_one_pass_eagerly_where_capture_fails_or_graphs_are_off(fake_gpu_timer):
    fake_gpu_timer["fail_from"] = 1
    t = timing.time_fn(fake_gpu_timer["closures"])
    assert not t.graph and t.calls_per_sample == 3 and "capture failed" in t.note
    fake_gpu_timer["fail_from"] = None
    t = timing.time_fn(fake_gpu_timer["closures"], use_graph=False)
    assert not t.graph and t.calls_per_sample == 3 and "disabled" in t.note
    assert fake_gpu_timer["captures"] == []


@pytest.mark.gpu
def test_a_tiny_kernels_samples_last_the_floor_and_lose_the_replays_fixed_cost():
    t = torch.zeros(1, device="cuda")
    one = timing.time_fn([lambda: t.add_(1)], copies=1)  # the caller's count is kept exactly
    assert one.calls_per_sample == 1 and one.graph
    floored = timing.time_fn([lambda: t.add_(1)] * 3)
    assert floored.graph and floored.calls_per_sample % 3 == 0 and floored.calls_per_sample > 3
    assert floored.calls_per_sample * floored.median_us >= 0.9 * MIN_SAMPLE_US or floored.calls_per_sample == MAX_COPIES
    # A single-call sample adds what a sample pays once to the add's own time (the H100 read 3.3 us with the
    # enqueue hidden, 1.2-1.3 us at 16-64 calls a sample).
    assert floored.median_us < 0.75 * one.median_us


def test_each_round_starts_one_item_later_and_keeps_every_item():
    items = {"a": 1, "b": 2, "c": 3}  # a dict gives its keys, as the tools pass their peers
    orders = [timing.round_order(items, r) for r in range(4)]
    assert orders == [["a", "b", "c"], ["b", "c", "a"], ["c", "a", "b"], ["a", "b", "c"]]
    assert [order[0] for order in orders[:3]] == ["a", "b", "c"]  # every item leads one round in three
    assert timing.round_order([], 5) == []
