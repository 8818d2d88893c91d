"""tools/model_order_bench.py on the CPU: the pairing of each GEMM with the elementwise kernel before it, the
subtraction, the numerics gate and the peer names, with the peers harness and the timer replaced by fakes (the
harness lives outside the repository; the GPU run is the tool's job, not CI's)."""

from __future__ import annotations

import functools
import importlib.util
import pathlib
import sys
import types

import pytest
import torch

ROOT = pathlib.Path(__file__).resolve().parents[2]  # tests/profiler/ -> the repository root
_spec = importlib.util.spec_from_file_location("model_order_bench", ROOT / "tools" / "model_order_bench.py")
tool = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = tool
_spec.loader.exec_module(tool)


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


class Problem:
    def __init__(self, w):
        self.w = w

    def w64(self, variant):
        return self.w


def fake_timer(times):
    """time_fn stand-in: a pair (closure built by after_elementwise) costs times["pair"], the elementwise kernel
    alone times["elementwise"], a GEMM closure times["gemm"]; each call is made, as the real timer makes them."""
    def time_fn(fns):
        fns = list(fns)
        for fn in fns:
            fn()
        kind = ("pair" if getattr(fns[0], "func", None) is not None and fns[0].func.__name__ == "pair"
                else "gemm" if isinstance(fns[0], functools.partial) else "elementwise")
        return types.SimpleNamespace(median_us=times[kind])
    return time_fn


def test_the_gemm_in_model_order_is_the_pair_less_the_elementwise_kernel(monkeypatch):
    monkeypatch.setattr(tool, "time_fn", fake_timer({"pair": 12.5, "elementwise": 2.0, "gemm": 9.0}))
    K, N, M = 64, 32, 4
    w = torch.randn(K, N, dtype=torch.float64)
    ours, bad, absent = Peer("mixgemm[zp]"), Peer("machete[zp]", error=1.0), Peer("vllm_marlin[sym]")
    rows = tool.run_cell(fake_harness(), K, N, M, Problem(w), {p.name: {"copies": [w, w]} for p in (ours, bad)},
                         [ours, bad, absent], rounds=3, log=lambda line: None)
    by = {r["peer"]: r for r in rows}
    assert by["mixgemm[zp]"]["ok"] and by["mixgemm[zp]"]["in_model_order_us"] == pytest.approx(10.5)
    assert by["mixgemm[zp]"]["back_to_back_median_us"] == 9.0 and len(by["mixgemm[zp]"]["pair_us"]) == 3
    # A peer off the reference is reported, never timed; one without a state is unavailable.
    assert not by["machete[zp]"]["ok"] and "numerics check failed" in by["machete[zp]"]["error"]
    assert "in_model_order_us" not in by["machete[zp]"] and by["vllm_marlin[sym]"]["error"] == "unavailable"
    # Every GEMM call read the x the elementwise kernel wrote (h + r), equal to the x its reference was taken on.
    assert all(torch.equal(x, ours.inputs[0]) for x in ours.inputs)


def test_after_elementwise_writes_the_input_before_each_gemm():
    x, h, r = torch.zeros(2, 4), torch.ones(2, 4), torch.full((2, 4), 2.0)
    seen = []
    pairs = tool.after_elementwise([lambda: seen.append(x.clone())] * 2, x, h, r)
    assert len(pairs) == 2
    pairs[0]()
    assert torch.equal(seen[0], torch.full((2, 4), 3.0))


def test_peer_names():
    pb = fake_harness()
    peers = tool.make_peers(pb, ["mixgemm[zp]", "mixgemm[sym]@sm80", "machete[zp]"])
    assert [p.name for p in peers] == ["mixgemm[zp]", "mixgemm[sym]@sm80", "machete[zp]"]
    with pytest.raises(SystemExit, match="only mixgemm"):
        tool.make_peers(pb, ["machete[zp]@sm80"])
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
