"""The GEMMs as a decoder layer runs them: each call preceded by the elementwise kernel that writes its input.

The peers harness times one GEMM back to back, so each call's launch and prologue overlap the previous GEMM's
tail; the paths launched as programmatic dependents (decode, sm90, the sm80 path's 16- and 32-row tiles) even run
their prologue (the sm90 path's barrier setup and descriptor prefetch, the others' weight prefetch) under it. In a
model the kernel before a projection is a short memory-bound one (the residual add and norm before QKV / gate-up,
the activation before down). Here every call is `x = h + r` (one elementwise kernel
writing the GEMM's [M, K] input) and then the GEMM on x; what the GEMM adds to the layer is the pair's time less
the elementwise kernel's time alone (mixgemm.bench.timing.time_after_elementwise). Both are timed under mixgemm's
protocol (L2-rotated weight copies, one CUDA graph per sample), with CALLS_PER_SAMPLE calls per sample, in rounds
that rotate the peers' order; the back-to-back time is timed beside them, with as many calls.

Peers come from the peers harness (`peers_bench.py` in --peers-dir); `mixgemm[zp]@CONFIG` times a path's own pick
(`@sm80`) or one compiled config by name (`@32x128x64_w32x32x64_s4_k4p`) instead of `auto`.

    python tools/model_order_bench.py --peers-dir ../shared/peers --shapes 8192x8192 --ms 16,32,64 \\
        --peers "mixgemm[zp],machete[zp],vllm_marlin[sym],ist_marlin[sym]" --out model_order.json
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import pathlib
import statistics
import sys

import torch

from mixgemm.bench import cli, timing
from mixgemm.library import parse_config  # a config's name -> its GemmConfig; a path's name stays as it is
from mixgemm.ops import resolve_config


def load_harness(peers_dir: pathlib.Path):
    if not (peers_dir / "peers_bench.py").exists():
        raise SystemExit(f"model_order_bench: --peers-dir {peers_dir} holds no peers_bench.py")
    sys.path.insert(0, str(peers_dir))
    import peers_bench

    return peers_bench


def config_peer(pb, variant: str, config: str):
    """mixgemm on one named config: the harness's mixgemm peer with ``config`` passed to every call."""

    class ConfigPeer(pb.MixgemmPeer):
        def __init__(self):
            super().__init__(variant)
            self.name = f"mixgemm[{variant}]@{config}"
            self.config = parse_config(config)

        def closures(self, st, x):
            return [functools.partial(self.mixgemm.gemm, x, packed, None, self.config) for packed in st["copies"]]

        def info(self, st, M):
            return f"config={resolve_config(M, st['copies'][0], self.config).name}"

    return ConfigPeer()


def make_peers(pb, names: list[str]):
    peers = []
    for name in names:
        if "@" in name:
            base, config = name.split("@", 1)
            if base not in ("mixgemm[zp]", "mixgemm[sym]"):
                raise SystemExit(f"model_order_bench: --peers {name}: only mixgemm[zp|sym] takes @CONFIG")
            try:
                peers.append(config_peer(pb, base[len("mixgemm["):-1], config))
            except ValueError as error:  # parse_config's: not auto, a path or a config name
                raise SystemExit(f"model_order_bench: --peers {name}: {error}") from None
        elif name in pb.ALL_PEERS:
            peers += pb.make_peers([name])
        else:
            raise SystemExit(f"model_order_bench: --peers {name}: not one of {', '.join(pb.ALL_PEERS)}")
    return peers


# Calls per timed sample, whatever the weight copies: a sample pays some costs once (the first call's start with
# nothing to overlap, up to ~24 us on a split GEMM; time_fn hides the replay's enqueue; H100,
# docs/perf-notes/2026-11-26-replay-fixed-cost.md), which 64 calls spread to under 0.4 us a call, the same count
# back to back and in a model's order.
CALLS_PER_SAMPLE = 64


def run_cell(pb, K, N, M, refs_weight, states, reasons, peers, rounds, log):
    """One cell: every available peer checked against float64, then timed back to back and after the elementwise
    kernel in ``rounds`` rounds, each round starting one peer later. ``refs_weight(variant)``: the float64 weight."""
    x = torch.randn((M, K), device=pb.DEVICE, dtype=torch.float32).half()
    refs = {v: x.double() @ refs_weight(v) for v in ("zp", "sym")}
    live, rows = {}, {}
    for peer in peers:
        row = dict(K=K, N=N, M=M, peer=peer.name, ok=False, error=None, note=None, back_to_back_us=[],
                   after_elementwise_us=[], elementwise_us=[], positions=[])
        rows[peer.name] = row
        if peer.name not in states:
            row["error"] = f"unavailable: {reasons.get(peer.name, 'no state')}"
            continue
        try:
            fns = peer.closures(states[peer.name], x)
            # timing.time_after_elementwise rewrites x to the values it holds, so this output is the pair's too.
            err = pb.rel_err(fns[0](), refs[peer.variant])
            pb.sync()
            row.update(rel_err=err, ok=bool(err < pb.REL_TOL), note=peer.info(states[peer.name], M))
            if row["ok"]:
                live[peer.name] = fns
            else:
                row["error"] = f"numerics check failed: relative error {err:.3g} >= {pb.REL_TOL}"
        except Exception as exc:  # noqa: BLE001 - one peer failing keeps the others
            row["error"] = pb.describe(exc)
            pb.sync()
    for rnd in range(rounds):
        for position, name in enumerate(timing.round_order(live, rnd)):
            fns, row = live[name], rows[name]
            row["positions"].append(position)  # where in the round's order it ran
            calls = len(fns) * math.ceil(CALLS_PER_SAMPLE / len(fns))  # whole passes: no copy read twice in a row
            try:
                after = timing.time_after_elementwise(fns, x, calls)
                row["back_to_back_us"].append(timing.time_fn(fns, calls).median_us)
            except Exception as exc:  # noqa: BLE001 - a peer that fails to time is dropped, the others go on
                row["error"] = f"timing failed: {pb.describe(exc)}"
                live.pop(name)
                pb.sync()
                continue
            row["after_elementwise_us"].append(after.median_us)
            row["elementwise_us"].append(after.subtracted_us)
    for row in rows.values():
        if row["after_elementwise_us"] and not row["error"]:
            row["in_model_order_us"] = statistics.median(row["after_elementwise_us"])
            row["back_to_back_median_us"] = statistics.median(row["back_to_back_us"])
    log_cell(K, N, M, rows, log)
    return list(rows.values())


def _ratio(ours: float, theirs: float) -> str:
    return f"{ours / theirs:.3f}" if theirs > 0 else "-"


def log_cell(K, N, M, rows, log):
    timed = {n: r for n, r in rows.items() if "in_model_order_us" in r}
    others = {n: r for n, r in timed.items() if not n.startswith("mixgemm") and n != "cublas_fp16"}
    best = min(others, key=lambda n: others[n]["in_model_order_us"]) if others else None
    for name, row in timed.items():
        line = (f"{K}x{N} M={M:<4} {name:<44} back-to-back {row['back_to_back_median_us']:8.2f}  "
                f"after elementwise {row['in_model_order_us']:8.2f}")
        if best and name.startswith("mixgemm"):
            line += (f"  / {best}: {_ratio(row['back_to_back_median_us'], others[best]['back_to_back_median_us'])}"
                     f" -> {_ratio(row['in_model_order_us'], others[best]['in_model_order_us'])}")
        log(line + (f"  {row['note']}" if row["note"] else ""))
    for name, row in rows.items():
        if row["error"]:
            log(f"{K}x{N} M={M:<4} {name}: {row['error']}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--peers-dir", type=pathlib.Path, required=True, help="the folder holding peers_bench.py")
    ap.add_argument("--shapes", required=True, type=cli.parse_shapes,
                    help="comma list of KxN, or a shape set of python -m mixgemm bench (design, tp, ...)")
    ap.add_argument("--ms", required=True, type=cli.parse_ms, help="comma list of M")
    ap.add_argument("--peers", default="mixgemm[zp],machete[zp],vllm_marlin[zp],vllm_marlin[sym],ist_marlin[sym]",
                    help="comma list of the harness's peer names; mixgemm[zp]@CONFIG times one config")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--group", type=int, default=128)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=pathlib.Path, default=pathlib.Path("model_order.json"))
    args = ap.parse_args(argv)
    if not torch.cuda.is_available():
        raise SystemExit("model_order_bench: needs a CUDA GPU")
    if args.rounds < 1:
        raise SystemExit(f"model_order_bench: --rounds must be >= 1, got {args.rounds}")
    pb = load_harness(args.peers_dir)
    peers = make_peers(pb, [n for n in args.peers.split(",") if n])
    results = []
    meta = dict(gpu=torch.cuda.get_device_name(0), torch=torch.__version__, args=vars(args) | {
        "peers_dir": str(args.peers_dir), "out": str(args.out)})
    print(f"model_order_bench: {meta['gpu']}", flush=True)
    for K, N in args.shapes:
        problem = pb.make_problem(K, N, args.group, args.seed)
        states, reasons = {}, {}
        for peer in peers:
            try:
                states[peer.name] = peer.setup(problem)
            except Exception as exc:  # noqa: BLE001 - an unavailable peer is reported per cell
                reasons[peer.name] = pb.describe(exc)
                print(f"{K}x{N} setup {peer.name}: {reasons[peer.name]}", flush=True)
        weights = functools.lru_cache(maxsize=2)(problem.w64)  # float64, once per shape and variant
        for M in args.ms:
            results += run_cell(pb, K, N, M, weights, states, reasons, peers, args.rounds,
                                lambda s: print(s, flush=True))
            args.out.write_text(json.dumps(dict(meta=meta, results=results), indent=1))
        del states
        torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main())
