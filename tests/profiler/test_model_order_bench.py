"""tools/model_order_bench.py on the CPU: the pairing of each GEMM with the elementwise kernel before it, the
subtraction, the numerics gate and the peer names, with the peers harness and the timer replaced by fakes (the
harness lives outside the repository; the GPU run is the tool's job, not CI's)."""

from __future__ import annotations

import functools
import types

import pytest
import torch

from mixgemm.bench import timing
from tool_modules import load_tool

tool = load_tool("model_order_bench")


def fake_harness():
    """What the tool reads of peers_bench.py, on the CPU."""
    return types.SimpleNamespace(
        DEVICE="cpu", REL_TOL=1e-2, ALL_PEERS=["mixgemm[zp]", "machete[zp]"],
        rel_err=lambda out, ref: ((out.double() - ref).norm() / ref.norm()).item(),
        describe=lambda exc: f"{type(exc).__name__}: {exc}", sync=lambda: None,
        make_peers=lambda names: [Peer(n) for n in names], MixgemmPeer=Peer)


class Peer:
    """A peer whose GEMM is x @ W in float64 (``error`` adds to every output), recording the x it was handed."""

    def __init__(self, name, error=0.0):
        self.name, self.variant, self.error, self.inputs = name, "zp", error, []

    def closures(self, st, x):
        def call(w):
            self.inputs.append(x.clone())
            return (x.double() @ w + self.error).half()
        return [functools.partial(call, w) for w in st["copies"]]

    def info(self, st, M):
        return None


def fake_timer(calls_made, gemm_us=9.0, elementwise_us=2.0, replay_us=8.0):
    """timing.time_fn stand-in: makes its calls as the real one does (cycling the closures) and prices a sample as
    the real one would: per call, the kernel's time plus the replay's fixed ``replay_us`` spread over the calls. A
    pair (time_after_elementwise's) costs both kernels, the elementwise kernel alone its own, a GEMM closure
    ``gemm_us``."""
    def time_fn(fns, copies=None, warmup=2, reps=7, use_graph=True):
        calls = len(fns) if copies is None else copies
        for i in range(calls):
            fns[i % len(fns)]()
        calls_made.append(calls)
        name = getattr(getattr(fns[0], "func", fns[0]), "__name__", "")
        per_call = {"pair": gemm_us + elementwise_us, "write_input": elementwise_us}.get(name, gemm_us)
        t = per_call + replay_us / calls
        return timing.Timing(t, t, t, [t] * reps, calls, use_graph, None)
    return time_fn


def test_the_gemm_in_model_order_is_the_pair_less_the_elementwise_kernel(monkeypatch):
    calls_made = []
    monkeypatch.setattr(timing, "time_fn", fake_timer(calls_made))
    K, N, M = 64, 32, 4
    w = torch.randn(K, N, dtype=torch.float64)
    ours, other, bad = Peer("mixgemm[zp]"), Peer("machete[zp]"), Peer("gemlite[zp]", error=1.0)
    absent = Peer("vllm_marlin[sym]")
    states = {p.name: {"copies": [w, w]} for p in (ours, other, bad)}
    rows = tool.run_cell(fake_harness(), K, N, M, lambda v: w, states, {"vllm_marlin[sym]": "no library"},
                         [ours, other, bad, absent], rounds=3, log=lambda line: None)
    by = {r["peer"]: r for r in rows}
    # Every timing made CALLS_PER_SAMPLE calls (2 copies < 64): the replay's cost cancels in the model-order time
    # and adds 8 / 64 us to the back-to-back one.
    assert set(calls_made) == {tool.CALLS_PER_SAMPLE} and len(calls_made) == 2 * 3 * 3
    assert by["mixgemm[zp]"]["ok"] and by["mixgemm[zp]"]["in_model_order_us"] == pytest.approx(9.0)
    assert by["mixgemm[zp]"]["back_to_back_median_us"] == pytest.approx(9.0 + 8.0 / 64)
    assert by["mixgemm[zp]"]["elementwise_us"] == pytest.approx([2.0 + 8.0 / 64] * 3)
    # The rounds rotate the order: each timed peer runs first, second and last once in three rounds... of two.
    assert by["mixgemm[zp]"]["positions"] == [0, 1, 0] and by["machete[zp]"]["positions"] == [1, 0, 1]
    # A peer off the reference is reported, never timed; one without a state says why.
    assert not by["gemlite[zp]"]["ok"] and "numerics check failed" in by["gemlite[zp]"]["error"]
    assert "in_model_order_us" not in by["gemlite[zp]"] and by["gemlite[zp]"]["positions"] == []
    assert by["vllm_marlin[sym]"]["error"] == "unavailable: no library"


def test_a_sample_holds_whole_passes_over_the_copies(monkeypatch):
    # Three copies: 66 calls (22 passes), not 64, so no copy is read twice in a row across two replays.
    calls_made = []
    monkeypatch.setattr(timing, "time_fn", fake_timer(calls_made))
    w = torch.randn(64, 32, dtype=torch.float64)
    ours = Peer("mixgemm[zp]")
    tool.run_cell(fake_harness(), 64, 32, 4, lambda v: w, {ours.name: {"copies": [w, w, w]}}, {}, [ours], 1,
                  log=lambda line: None)
    assert calls_made == [66, 66, 66]


def test_every_gemm_call_reads_the_input_its_reference_was_taken_on(monkeypatch):
    monkeypatch.setattr(timing, "time_fn", fake_timer([]))
    w = torch.randn(64, 32, dtype=torch.float64)
    ours = Peer("mixgemm[zp]")
    drawn = []
    real_randn = torch.randn

    def randn(*args, **kwargs):  # the tool's x as drawn, before any elementwise kernel wrote it
        x = real_randn(*args, **kwargs)
        drawn.append(x.half())
        return x

    monkeypatch.setattr(torch, "randn", randn)
    rows = tool.run_cell(fake_harness(), 64, 32, 4, lambda v: w, {ours.name: {"copies": [w]}}, {}, [ours], 2,
                         lambda line: None)
    assert rows[0]["ok"] and len(ours.inputs) > 2 and len(drawn) == 1
    assert all(torch.equal(x, drawn[0]) for x in ours.inputs)


def test_a_peer_that_fails_to_time_is_dropped(monkeypatch):
    w = torch.randn(64, 32, dtype=torch.float64)
    failing_weight = w.clone()  # the other peer's copy: its GEMM checks out, its back-to-back timing fails
    real = fake_timer([])

    def failing(fns, copies=None, **kwargs):
        if getattr(fns[0], "func", None) is not None and fns[0].args[0] is failing_weight:
            raise RuntimeError("launch failed")
        return real(fns, copies, **kwargs)

    monkeypatch.setattr(timing, "time_fn", failing)
    ours, other = Peer("mixgemm[zp]"), Peer("machete[zp]")
    states = {ours.name: {"copies": [w]}, other.name: {"copies": [failing_weight]}}
    rows = tool.run_cell(fake_harness(), 64, 32, 4, lambda v: w, states, {}, [ours, other], 3, lambda line: None)
    by = {r["peer"]: r for r in rows}
    assert by["machete[zp]"]["error"] == "timing failed: RuntimeError: launch failed"
    assert "in_model_order_us" not in by["machete[zp]"]
    assert by["mixgemm[zp]"]["error"] is None and len(by["mixgemm[zp]"]["positions"]) == 3


def test_peer_names():
    pb = fake_harness()
    peers = tool.make_peers(pb, ["mixgemm[zp]", "mixgemm[sym]@sm80", "machete[zp]"])
    assert [p.name for p in peers] == ["mixgemm[zp]", "mixgemm[sym]@sm80", "machete[zp]"]
    with pytest.raises(SystemExit, match="only mixgemm"):
        tool.make_peers(pb, ["machete[zp]@sm80"])
    with pytest.raises(SystemExit, match=r"--peers mixgemm\[zp\]@32x128x64_bogus: invalid config"):
        tool.make_peers(pb, ["mixgemm[zp]@32x128x64_bogus"])
    with pytest.raises(SystemExit, match="not one of"):
        tool.make_peers(pb, ["marlin"])


def test_the_ratio_needs_a_positive_time():
    assert tool._ratio(9.0, 10.0) == "0.900" and tool._ratio(9.0, 0.0) == "-"


def test_a_config_peer_passes_the_parsed_config():
    from mixgemm.paths import GemmConfig

    peer = tool.config_peer(fake_harness(), "zp", "32x128x64_w32x32x64_s4_sk132")
    peer.mixgemm = types.SimpleNamespace(gemm=lambda x, packed, bias, config: config)  # what setup imports
    config = peer.closures({"copies": [object()]}, torch.zeros(1))[0]()
    assert isinstance(config, GemmConfig) and config.name == "32x128x64_w32x32x64_s4_sk132"
    path_peer = tool.config_peer(fake_harness(), "zp", "sm80")
    path_peer.mixgemm = peer.mixgemm
    assert path_peer.closures({"copies": [object()]}, torch.zeros(1))[0]() == "sm80"
    assert path_peer.name == "mixgemm[zp]@sm80"


@pytest.mark.parametrize("argv, message", [
    (["--shapes", "8192", "--ms", "16"], "argument --shapes: invalid shape '8192'"),
    (["--shapes", "64x64", "--ms", "16,x"], "argument --ms: invalid M list '16,x'"),
])
def test_bad_shapes_and_ms_name_the_argument(argv, message, capsys):
    with pytest.raises(SystemExit):
        tool.main(["--peers-dir", "."] + argv)
    assert message in capsys.readouterr().err
