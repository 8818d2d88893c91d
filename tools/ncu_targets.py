#!/usr/bin/env python3
"""Runs one kernel a few times for Nsight Compute (tools/gpu_check.sh's NCU step): the path config="auto"
takes for ``--shape KxN`` at ``--m`` rows on this GPU's own weight layout (or ``--layout``), the config named
by ``--config``, or a peer of the peers harness (``--peer``, with ``--peers-dir``), e.g.

    ncu -k regex:device_kernel -s 2 -c 1 --section SpeedOfLight python3 tools/ncu_targets.py --m 4096
    python3 tools/ncu_targets.py --m 4096 --layout sm80 --config 128x256x64_w128x32x64_s4
    ncu --profile-from-start off -c 4 python3 tools/ncu_targets.py --shape 8192x8192 --m 16 \\
        --peer "ist_marlin[sym]" --peers-dir ../shared/peers

The timed calls run inside a CUDA profiler range (cudaProfilerStart / Stop) after two warm-up calls, so
``ncu --profile-from-start off`` sees only them, every kernel a call launches (a split-K pair's reduction
too) and the same way for our kernels and a peer's; ``-c`` then counts kernels, not calls. A peer is named as
tools/model_order_bench.py names it (``mixgemm[zp]@CONFIG`` runs one of our configs on the harness's weights).
The records of benchmarks/2026-11-27-h100-ncu-m16-m32-m4096.json were made this way.
"""

from __future__ import annotations

import argparse
import pathlib
import sys

import torch

from mixgemm.bench import cli

HERE = pathlib.Path(__file__).resolve().parent


def parse_args(argv=None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("--shape", default="8192x28672", type=cli.parse_shape, help="KxN")
    ap.add_argument("--m", type=int, default=1)
    ap.add_argument("--calls", type=int, default=4, help="calls inside the profiler range")
    ap.add_argument("--layout", choices=("auto", "sm80", "sm90"), default="auto")
    ap.add_argument("--config", default="auto", help="a config name (python -m mixgemm sweep lists them) or auto")
    ap.add_argument("--peer", help="a peer of the peers harness instead of our path (needs --peers-dir)")
    ap.add_argument("--peers-dir", type=pathlib.Path, help="the folder holding peers_bench.py")
    args = ap.parse_args(argv)
    if args.m < 1 or args.calls < 1:
        ap.error(f"--m and --calls must be >= 1, got {args.m} and {args.calls}")
    if args.peer is not None and args.peers_dir is None:
        ap.error("--peer needs --peers-dir (the folder holding peers_bench.py)")
    if args.peer is not None and (args.layout != "auto" or args.config != "auto"):
        ap.error("--peer runs the harness's own setup: --layout and --config are ours only "
                 "(name one of our configs as --peer 'mixgemm[zp]@CONFIG')")
    return args


def our_calls(K: int, N: int, M: int, layout: str, config_name: str):
    """One call of our path on a random AWQ weight, and what it runs."""
    import mixgemm
    from mixgemm import formats, ops
    from mixgemm.paths import from_name

    ckpt = {k: v.cuda() for k, v in formats.random_awq_weight(K, N, 128, dtype=torch.float16).items()}
    packed = mixgemm.prepack(ckpt["qweight"], ckpt["scales"], ckpt["qzeros"], 128, layout=layout)
    x = torch.randn(M, K, device="cuda").half()
    config = ops.resolve_config(M, packed, from_name(config_name))
    return [lambda: mixgemm.gemm(x, packed, config=config)], f"{config.name} on the {packed.layout} layout"


def peer_calls(K: int, N: int, M: int, name: str, peers_dir: pathlib.Path):
    """One call per weight copy of a harness peer, and what it runs (the peer's own note)."""
    sys.path.insert(0, str(HERE))
    import model_order_bench as mob

    pb = mob.load_harness(peers_dir)
    (peer,) = mob.make_peers(pb, [name])
    state = peer.setup(pb.make_problem(K, N, 128, 0))
    x = torch.randn((M, K), device="cuda").half()
    return peer.closures(state, x), f"{name} ({peer.info(state, M)})"


def main(argv=None) -> int:
    args = parse_args(argv)
    if not torch.cuda.is_available():
        raise SystemExit("ncu_targets: needs a CUDA GPU")
    K, N = args.shape
    if args.peer is None:
        calls, what = our_calls(K, N, args.m, args.layout, args.config)
    else:
        calls, what = peer_calls(K, N, args.m, args.peer, args.peers_dir)
    for i in range(2):  # module loading, handles, autotuning: outside the range
        calls[i % len(calls)]()
    torch.cuda.synchronize()
    print(f"{K}x{N} M={args.m}: {what}", flush=True)
    torch.cuda.profiler.start()
    for i in range(args.calls):
        calls[i % len(calls)]()
    torch.cuda.synchronize()
    torch.cuda.profiler.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
