#!/usr/bin/env python3
"""Clock and power under a compute-bound GEMM: each peer's calls replayed back to back for a few seconds while
NVML samples the SM clock, the board's power and the throttle reasons.

At M = 4096 the large DESIGN shapes run at the GPU's power limit: the SM clock falls until the board draws its
cap, so two kernels of equal cycles per call can differ in time by how much power a cycle of each draws, and a
peer's time depends on how hot the GPU was when its turn came. The peers harness's samples (tens of ms) see the
clock wherever it happens to be; here each peer runs long enough (``--seconds``) for the clock to settle, and the
record gives, beside the time per call, the mean SM clock over the window, the cycles per call (time x clock: the
kernel's own cost, which power does not move), the board power and the energy per call. Peers come from the peers
harness (``peers_bench.py`` in --peers-dir), each with its own L2-rotated weight copies, in rounds that rotate
their order; as in tools/model_order_bench.py, ``mixgemm[zp]@CONFIG`` times one compiled config by name.

    python tools/power_clock_probe.py --peers-dir ../shared/peers --shapes 8192x28672,28672x8192 --ms 4096 \\
        --peers "mixgemm[zp],cublas_fp16,machete[zp]" --out power.json
    python tools/power_clock_probe.py --report power.json      # its table (no GPU)
"""

from __future__ import annotations

import argparse
import ctypes
import json
import pathlib
import statistics
import sys
import threading
import time

import torch

from mixgemm.bench import cli, timing

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from model_order_bench import load_harness, make_peers  # the peers harness, and mixgemm[zp]@CONFIG peers

# NVML's constants (nvml.h): the SM clock domain, and the throttle-reason bits a power-bound run raises.
NVML_CLOCK_SM = 1
THROTTLE_BITS = {"sw_power_cap": 0x4, "hw_slowdown": 0x8, "sw_thermal": 0x20, "hw_thermal": 0x40,
                 "hw_power_brake": 0x80}
# One replay lasts about this long: long enough that its enqueue is nothing beside it. The host keeps at most
# HOST_AHEAD replays queued, so a window runs up to that many replays (~0.2 s) past --seconds; the clock samples
# cover the same span, so the per-call time and the mean clock stay paired.
REPLAY_MS = 50.0
HOST_AHEAD = 4
SAMPLE_EVERY_S = 0.02


class Nvml:
    """The few NVML calls the probe needs, through the driver's libnvidia-ml (no Python package needed)."""

    def __init__(self, index: int, expected_name: str):
        try:
            self.lib = ctypes.CDLL("libnvidia-ml.so.1")
        except OSError as exc:
            raise SystemExit(f"power_clock_probe: NVML (libnvidia-ml.so.1) not found: {exc}") from None
        self._check(self.lib.nvmlInit_v2(), "nvmlInit_v2")
        self.handle = ctypes.c_void_p()
        self._check(self.lib.nvmlDeviceGetHandleByIndex_v2(index, ctypes.byref(self.handle)), "GetHandleByIndex")
        # NVML numbers the GPUs of the machine, CUDA those CUDA_VISIBLE_DEVICES leaves, in its own order: the same
        # index may be two GPUs. A differing name proves it; an equal one (same model) cannot, hence the note.
        name = ctypes.create_string_buffer(96)
        self._check(self.lib.nvmlDeviceGetName(self.handle, name, ctypes.c_uint(96)), "GetName")
        self.name = name.value.decode()
        if self.name != expected_name:
            raise SystemExit(f"power_clock_probe: NVML's GPU {index} is {self.name!r}, CUDA's is {expected_name!r}: "
                             "run with CUDA_VISIBLE_DEVICES unset (the probe samples NVML's GPU of CUDA's index)")
        limit_mw = ctypes.c_uint()
        self._check(self.lib.nvmlDeviceGetEnforcedPowerLimit(self.handle, ctypes.byref(limit_mw)),
                    "GetEnforcedPowerLimit")
        self.power_limit_w = limit_mw.value / 1000.0

    @staticmethod
    def _check(rc: int, what: str) -> None:
        if rc != 0:
            raise SystemExit(f"power_clock_probe: NVML {what} returned {rc}")

    def sample(self) -> tuple[int, float, int]:
        """(SM clock in MHz, board power in W, throttle-reason bits)."""
        mhz, mw, reasons = ctypes.c_uint(), ctypes.c_uint(), ctypes.c_ulonglong()
        self._check(self.lib.nvmlDeviceGetClockInfo(self.handle, NVML_CLOCK_SM, ctypes.byref(mhz)), "GetClockInfo")
        self._check(self.lib.nvmlDeviceGetPowerUsage(self.handle, ctypes.byref(mw)), "GetPowerUsage")
        self._check(self.lib.nvmlDeviceGetCurrentClocksThrottleReasons(self.handle, ctypes.byref(reasons)),
                    "GetCurrentClocksThrottleReasons")
        return mhz.value, mw.value / 1000.0, reasons.value


def sampled_window(nvml: Nvml, replay, seconds: float) -> tuple[float, int, list]:
    """Replays ``replay`` for ``seconds`` while a thread samples NVML: (elapsed GPU ms, replays, samples)."""
    samples, failures, stop = [], [], threading.Event()

    def sampler():
        try:
            while not stop.is_set():
                samples.append(nvml.sample())
                time.sleep(SAMPLE_EVERY_S)
        except BaseException as exc:  # noqa: BLE001 - re-raised in the main thread below, never lost with the thread
            failures.append(exc)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    thread = threading.Thread(target=sampler)
    replays, t0 = 0, time.perf_counter()
    start.record()
    thread.start()
    while time.perf_counter() - t0 < seconds:
        replay()
        replays += 1
        if replays % HOST_AHEAD == 0:  # the host at most HOST_AHEAD replays ahead: the window is the GPU's
            torch.cuda.synchronize()
    end.record()
    torch.cuda.synchronize()
    stop.set()
    thread.join()
    if failures:
        raise failures[0]
    return start.elapsed_time(end), replays, samples


def summarize(elapsed_ms: float, calls: int, samples: list) -> dict:
    """A window's record: ``calls`` calls in ``elapsed_ms`` of GPU time, NVML's (MHz, W, reasons) ``samples``."""
    if not samples or calls < 1:
        raise ValueError(f"power_clock_probe: a window needs NVML samples and calls (got {len(samples)}, {calls})")
    us = elapsed_ms * 1e3 / calls
    mhz = statistics.mean(s[0] for s in samples)
    watts = statistics.mean(s[1] for s in samples)
    shares = {name: sum(bool(s[2] & bit) for s in samples) / len(samples) for name, bit in THROTTLE_BITS.items()}
    return dict(us_per_call=us, sm_mhz=mhz, sm_mhz_min=min(s[0] for s in samples),
                mcycles_per_call=us * mhz / 1e6, watts=watts, mj_per_call=watts * us / 1e3,
                throttled_share={k: round(v, 3) for k, v in shares.items() if v}, samples=len(samples), calls=calls)


def probe(nvml, fns, warm_s: float, seconds: float) -> dict:
    """One peer's window: ``fns`` calls it on each of its L2-rotated weight copies, replayed in whole passes."""
    copies = len(fns)
    probe_us = timing.time_fn(fns, copies).median_us  # a first time per call, to size the replay
    passes = max(1, round(REPLAY_MS * 1e3 / (probe_us * copies)))
    graph = timing.capture_graph(lambda: [fn() for _ in range(passes) for fn in fns])
    sampled_window(nvml, graph.replay, warm_s)  # reach the power state of a long run
    elapsed_ms, replays, samples = sampled_window(nvml, graph.replay, seconds)
    return summarize(elapsed_ms, replays * passes * copies, samples)


MEAN_FIELDS = ("us_per_call", "sm_mhz", "mcycles_per_call", "watts", "mj_per_call")


def cell_means(rows: list[dict]) -> dict:
    """{(K, N, M): {peer: {field: its mean over the rounds}}} of a record's rows, cells and peers in the record's
    order (the fields of MEAN_FIELDS)."""
    groups: dict = {}
    for r in rows:
        groups.setdefault((r["K"], r["N"], r["M"]), {}).setdefault(r["peer"], []).append(r)
    return {cell: {peer: {f: statistics.mean(r[f] for r in runs) for f in MEAN_FIELDS} for peer, runs in peers.items()}
            for cell, peers in groups.items()}


def report(rows: list[dict]) -> str:
    """The record's table: each peer's mean over its rounds per cell, and our time over each peer's. Energy a
    cycle (W / MHz) is what the power cap trades against the clock; mJ a call is time x power."""
    out = ["| shape | M | peer | us a call | SM MHz | M cycles a call | W | uJ a cycle | mJ a call | "
           "ours / peer (time) |",
           "|---|---|---|---|---|---|---|---|---|---|"]
    for (K, N, M), peers in cell_means(rows).items():
        ours = next((m for p, m in peers.items() if p.startswith("mixgemm")), None)
        for name, m in peers.items():
            ratio = f"{ours['us_per_call'] / m['us_per_call']:.3f}" if ours else "-"
            out.append(f"| {K}x{N} | {M} | {name} | {m['us_per_call']:.0f} | {m['sm_mhz']:.0f} | "
                       f"{m['mcycles_per_call']:.3f} | {m['watts']:.0f} | {m['watts'] / m['sm_mhz']:.4f} | "
                       f"{m['mj_per_call']:.0f} | {ratio} |")
    return "\n".join(out)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--peers-dir", type=pathlib.Path,
                    help="the folder holding peers_bench.py (needed but for --report)")
    ap.add_argument("--shapes", default="8192x28672,28672x8192", type=cli.parse_shapes,
                    help="comma list of KxN, or a shape set of python -m mixgemm bench (design, tp, ...)")
    ap.add_argument("--ms", default="4096", type=cli.parse_ms, help="comma list of M")
    ap.add_argument("--peers", default="mixgemm[zp],cublas_fp16,machete[zp],machete[sym]")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--warm", type=float, default=1.0, help="seconds each peer runs before its window")
    ap.add_argument("--seconds", type=float, default=2.0, help="seconds of each peer's sampled window")
    ap.add_argument("--group", type=int, default=128)
    ap.add_argument("--out", type=pathlib.Path, default=pathlib.Path("power_clock.json"))
    ap.add_argument("--report", type=pathlib.Path, help="print the table of a record this tool wrote, and exit")
    args = ap.parse_args(argv)
    if args.report:
        try:
            rows = json.loads(args.report.read_text())["results"]
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise SystemExit(f"power_clock_probe: --report {args.report}: not a record of this tool ({exc!r})")
        print(report(rows))
        return 0
    if args.peers_dir is None:
        raise SystemExit("power_clock_probe: --peers-dir is needed to time the peers")
    if args.rounds < 1 or args.seconds <= 0 or args.warm < 0:
        raise SystemExit("power_clock_probe: --rounds must be >= 1, --seconds > 0 and --warm >= 0")
    names = [n for n in args.peers.split(",") if n]
    if not names:
        raise SystemExit("power_clock_probe: --peers names no peer")
    if not torch.cuda.is_available():
        raise SystemExit("power_clock_probe: needs a CUDA GPU")
    pb = load_harness(args.peers_dir)
    peers = make_peers(pb, names)
    device = torch.cuda.current_device()
    nvml = Nvml(device, torch.cuda.get_device_name(device))
    meta = dict(gpu=nvml.name, power_limit_w=nvml.power_limit_w, torch=torch.__version__, args=vars(args) | {
        "peers_dir": str(args.peers_dir), "out": str(args.out), "report": None}, replay_ms=REPLAY_MS,
        sample_every_s=SAMPLE_EVERY_S)
    print(f"power_clock_probe: {meta['gpu']}", flush=True)
    results = []
    for K, N in args.shapes:
        problem = pb.make_problem(K, N, args.group, 0)
        states = {p.name: p.setup(problem) for p in peers}
        for M in args.ms:
            x = torch.randn((M, K), device="cuda", dtype=torch.float32).half()
            fns = {p.name: p.closures(states[p.name], x) for p in peers}
            for rnd in range(args.rounds):
                for position, name in enumerate(timing.round_order(fns, rnd)):
                    row = dict(K=K, N=N, M=M, peer=name, round=rnd, position=position,
                               **probe(nvml, fns[name], args.warm, args.seconds))
                    results.append(row)
                    print(f"{K}x{N} M={M} r{rnd} {name:<18} {row['us_per_call']:9.1f} us  {row['sm_mhz']:6.0f} MHz "
                          f"(min {row['sm_mhz_min']})  {row['mcycles_per_call']:7.3f} Mcycles  {row['watts']:5.0f} W  "
                          f"{row['mj_per_call']:7.2f} mJ  {row['throttled_share']}", flush=True)
                    args.out.write_text(json.dumps(dict(meta=meta, results=results), indent=1))
        del states, fns
        torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main())
