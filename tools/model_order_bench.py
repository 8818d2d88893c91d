"""The GEMMs as a decoder layer runs them: each call preceded by the elementwise kernel that writes its input.

The peers harness times one GEMM back to back, so each call's launch and prologue overlap the previous GEMM's
tail; the sm90 path, launched as a programmatic dependent, even runs its prologue (barrier setup, descriptor
prefetch) under it. In a model the kernel before a projection is a short memory-bound one (the residual add and
norm before QKV / gate-up, the activation before down). Here every call is `x = h + r` (one elementwise kernel
writing the GEMM's [M, K] input) and then the GEMM on x; what the GEMM adds to the layer is the pair's time less
the elementwise kernel's time alone. Both are timed under mixgemm's protocol (L2-rotated weight copies, one CUDA
graph per sample), in rounds that rotate the peers' order; the back-to-back time is timed beside them.

Peers come from the peers harness (`peers_bench.py` in --peers-dir); `mixgemm[zp]@CONFIG` times a path's own pick
(`@sm80`) or one compiled config by name (`@32x128x64_w32x32x64_s4_k4p`) instead of `auto`.

    python tools/model_order_bench.py --peers-dir ../shared/peers --shapes 8192x8192 --ms 16,32,64 \\
        --peers "mixgemm[zp],machete[zp],vllm_marlin[sym],ist_marlin[sym]" --out model_order.json
"""

from __future__ import annotations

import argparse
import functools
import json
import pathlib
import statistics
import sys

import torch

from mixgemm.bench.timing import time_fn


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

        def closures(self, st, x):
            from mixgemm.library import parse_config  # a config's name -> its GemmConfig; "sm80" stays a path

            chosen = parse_config(config)
            return [functools.partial(self.mixgemm.gemm, x, packed, None, chosen) for packed in st["copies"]]

        def info(self, st, M):
            return f"config={config}"

    return ConfigPeer()


def make_peers(pb, names: list[str]):
    peers = []
    for name in names:
        if "@" in name:
            base, config = name.split("@", 1)
            if base not in ("mixgemm[zp]", "mixgemm[sym]"):
                raise SystemExit(f"model_order_bench: --peers {name}: only mixgemm[zp|sym] takes @CONFIG")
            peers.append(config_peer(pb, base[len("mixgemm["):-1], config))
        elif name in pb.ALL_PEERS:
            peers += pb.make_peers([name])
        else:
            raise SystemExit(f"model_order_bench: --peers {name}: not one of {', '.join(pb.ALL_PEERS)}")
    return peers


def after_elementwise(fns, x, h, r):
    """Each closure preceded by ``x = h + r`` (the kernel writing the GEMM's input)."""

    def pair(fn):
        torch.add(h, r, out=x)
        return fn()

    return [functools.partial(pair, fn) for fn in fns]


def run_cell(pb, K, N, M, problem, states, peers, rounds, log):
    x = torch.randn((M, K), device=pb.DEVICE, dtype=torch.float32).half()
    h, r = x * 0.5, x * 0.5  # h + r == x exactly in fp16: the GEMM sees the input its reference was taken on
    refs = {v: x.double() @ problem.w64(v) for v in ("zp", "sym")}
    live, rows = {}, {}
    for peer in peers:
        row = dict(K=K, N=N, M=M, peer=peer.name, ok=False, error=None, note=None,
                   back_to_back_us=[], pair_us=[], elementwise_us=[])
        rows[peer.name] = row
        if peer.name not in states:
            row["error"] = "unavailable"
            continue
        try:
            fns = peer.closures(states[peer.name], x)
            err = pb.rel_err(after_elementwise(fns, x, h, r)[0](), refs[peer.variant])
            pb.sync()
            row.update(rel_err=err, ok=bool(err < pb.REL_TOL), note=peer.info(states[peer.name], M))
            if row["ok"]:
                live[peer.name] = fns
            else:
                row["error"] = f"numerics check failed: relative error {err:.3g} >= {pb.REL_TOL}"
        except Exception as exc:  # noqa: BLE001 - one peer failing keeps the others
            row["error"] = pb.describe(exc)
            pb.sync()
    order = list(live)
    for rnd in range(rounds):
        for name in order[rnd % max(1, len(order)):] + order[: rnd % max(1, len(order))]:
            fns, row = live[name], rows[name]
            # The elementwise kernel alone, as many calls per sample as the pair: its share to subtract.
            row["elementwise_us"].append(time_fn([lambda: torch.add(h, r, out=x)] * len(fns)).median_us)
            row["pair_us"].append(time_fn(after_elementwise(fns, x, h, r)).median_us)
            row["back_to_back_us"].append(time_fn(fns).median_us)
    for row in rows.values():
        if row["pair_us"]:
            row["in_model_order_us"] = statistics.median(
                p - e for p, e in zip(row["pair_us"], row["elementwise_us"]))
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
    ap.add_argument("--shapes", required=True, help="comma list of KxN")
    ap.add_argument("--ms", required=True, help="comma list of M")
    ap.add_argument("--peers", default="mixgemm[zp],machete[zp],vllm_marlin[zp],vllm_marlin[sym],ist_marlin[sym]",
                    help="comma list of the harness's peer names; mixgemm[zp]@CONFIG times one config")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--group", type=int, default=128)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=pathlib.Path, default=pathlib.Path("model_order.json"))
    args = ap.parse_args(argv)
    if not torch.cuda.is_available():
        raise SystemExit("model_order_bench: needs a CUDA GPU")
    try:
        shapes = [tuple(int(v) for v in s.lower().split("x")) for s in args.shapes.split(",") if s]
        ms = [int(m) for m in args.ms.split(",") if m]
    except ValueError:
        raise SystemExit(f"model_order_bench: --shapes takes KxN,KxN and --ms M,M; got {args.shapes!r}, {args.ms!r}")
    if args.rounds < 1:
        raise SystemExit(f"model_order_bench: --rounds must be >= 1, got {args.rounds}")
    pb = load_harness(args.peers_dir)
    peers = make_peers(pb, [n for n in args.peers.split(",") if n])
    results = []
    meta = dict(gpu=torch.cuda.get_device_name(0), torch=torch.__version__, args=vars(args) | {
        "peers_dir": str(args.peers_dir), "out": str(args.out)})
    print(f"model_order_bench: {meta['gpu']}", flush=True)
    for K, N in shapes:
        problem = pb.make_problem(K, N, args.group, args.seed)
        states = {}
        for peer in peers:
            try:
                states[peer.name] = peer.setup(problem)
            except Exception as exc:  # noqa: BLE001 - an unavailable peer is reported per cell
                print(f"{K}x{N} setup {peer.name}: {pb.describe(exc)}", flush=True)
        for M in ms:
            results += run_cell(pb, K, N, M, problem, states, peers, args.rounds, lambda s: print(s, flush=True))
            args.out.write_text(json.dumps(dict(meta=meta, results=results), indent=1))
        del states
        torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main())
