"""``python -m mixgemm bench-moe``: the fused MoE layer beside vLLM's Marlin MoE and the dense and per-expert
yardsticks, in one run of the peers' MoE harness (``shared/peers/moe/moe_bench.py``: its problems, routing,
float32 reference, weight-copy rotation and timing protocol), with mixgemm's grouped kernels added as the peer
``mixgemm_moe[zp]`` / ``mixgemm_moe[sym]`` (and ``[zp-sm80]`` / ``[sym-sm80]``: experts kept in the sm80 layout).

Measures per peer and token count: ``moe`` (the whole layer: routing, gate/up, SiLU-and-mul, down with the top-k
weights, sum over the top-k), ``g1`` (the gate/up grouped GEMM; ours includes SiLU-and-mul, fused in its
epilogue) and ``g2`` (the down grouped GEMM with the top-k weights). The harness checks every peer's layer
output against its float32 reference before timing it.
"""

from __future__ import annotations

import argparse
import functools
import importlib
import json
import os
import pathlib
import sys
import types

# [zp] / [sym]: experts in the layout prepack_experts picks for the GPU; [zp-sm80] / [sym-sm80]: forced to the
# sm80 layout (no sm90 form), to compare the forms in one run.
MIXGEMM_PEERS = ("mixgemm_moe[zp]", "mixgemm_moe[sym]", "mixgemm_moe[zp-sm80]", "mixgemm_moe[sym-sm80]")
HARNESS_PEERS = ("marlin_moe[zp]", "marlin_moe[sym]", "dense_fp16_loop", "grouped_mm_bf16", "mixgemm_loop[zp]",
                 "mixgemm_loop[sym]")
DEFAULT_PEERS = ("mixgemm_moe[zp]", "mixgemm_moe[sym]", "marlin_moe[zp]", "marlin_moe[sym]", "dense_fp16_loop",
                 "grouped_mm_bf16")


def default_peers_dir() -> pathlib.Path | None:
    """$MIXGEMM_PEERS_DIR, else ../shared/peers or .peers beside the working directory."""
    for candidate in (os.environ.get("MIXGEMM_PEERS_DIR"), "../shared/peers", ".peers"):
        if candidate and (pathlib.Path(candidate) / "moe" / "moe_bench.py").exists():
            return pathlib.Path(candidate)
    return None


def add_parser(sub) -> None:
    p = sub.add_parser("bench-moe", help="the fused MoE layer beside vLLM's Marlin MoE (the peers' MoE harness)")
    p.add_argument("--models", default="mixtral,qwen3,dsv2lite", help="comma list: mixtral, qwen3, dsv2lite")
    p.add_argument("--ms", default="1,4,16,64,256,1024,4096,16384", help="token counts")
    p.add_argument("--peers", default=",".join(DEFAULT_PEERS),
                   help=f"comma list of {', '.join(MIXGEMM_PEERS + HARNESS_PEERS)}")
    p.add_argument("--rounds", type=int, default=2, help="interleaved rounds; median of the round medians (2)")
    p.add_argument("--copy-budget-gb", type=float, default=10.0, help="GiB of weight copies per peer (10)")
    p.add_argument("--check-max-m", type=int, default=1 << 30, help="skip the numerics checks above this M")
    p.add_argument("--peers-dir", type=pathlib.Path, default=None,
                   help="the peers folder holding moe/moe_bench.py ($MIXGEMM_PEERS_DIR, ../shared/peers, .peers)")
    p.add_argument("--out", type=pathlib.Path, default=pathlib.Path("moe_bench.json"))
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--verbose", action="store_true")


def load_harness(peers_dir: pathlib.Path | None):
    peers_dir = peers_dir or default_peers_dir()
    if peers_dir is None or not (peers_dir / "moe" / "moe_bench.py").exists():
        raise SystemExit("bench-moe: the peers' MoE harness (moe/moe_bench.py) was not found; pass --peers-dir "
                         "or set MIXGEMM_PEERS_DIR")
    sys.path.insert(0, str(peers_dir / "moe"))
    return importlib.import_module("moe_bench")


def mixgemm_peer_class(mb):
    """The mixgemm grouped-kernel peer, a subclass of the harness's Peer (its interface: setup, prepare, moe,
    fns, checks, info)."""
    import torch

    from .. import moe

    class MixgemmMoePeer(mb.Peer):
        dtype = torch.float16

        def __init__(self, variant):
            self.name = f"mixgemm_moe[{variant}]"
            self.variant = variant.partition("-")[0]

        @property
        def layout(self):
            # From the name: the harness's teardown keeps only name, variant and int4 between models.
            return self.name[:-1].partition("-")[2] or "auto"

        def setup(self, p, ctx):
            self.p = p
            zp = self.variant == "zp"

            def pack(q, z, s, gated):
                E = q.shape[0]
                return moe.prepack_experts([mb.pf.pack_awq(q[e]) for e in range(E)], [s[e].contiguous() for e in range(E)],
                                           [mb.pf.pack_awq(z[e]) for e in range(E)] if zp else None, p.G, gated=gated,
                                           layout=self.layout)

            def both():
                return {"w13": pack(p.q13, p.z13, p.s13, True), "w2": pack(p.q2, p.z2, p.s2, False)}
            first = both()
            per = sum(t.numel() * t.element_size() for w in first.values() for t in (w.packed, w.scales, w.offsets))
            n, self.copy_note = mb.n_copies(per, ctx["min_hit_int4"][self.variant], ctx["budget"])
            self.copies = [first] + [both() for _ in range(n - 1)]

        def prepare(self, r):
            from .. import device
            from ..moe.functional import plan_tiles

            p, w = self.p, self.copies[0]
            sms = device.facts("bench-moe", r.x.device).sm_count
            st = types.SimpleNamespace(r=r, M=r.M)
            st.block_m, st.config13, st.config2 = plan_tiles(r.M, p.topk, w["w13"], w["w2"], sms)
            st.routing = moe.route(r.topk_ids, p.E, st.block_m)
            return st

        def moe(self, st, w):
            r = st.r
            return moe.fused_moe(r.x, w["w13"], w["w2"], r.topk_weights, r.topk_ids, check_ids=False)

        def g1(self, st, w):
            return moe.grouped_gemm(st.r.x, w["w13"], st.routing, config=st.config13)

        def g2(self, st, w):
            return moe.grouped_gemm(st.r.a2, w["w2"], st.routing, x_rows="slot", topk_weights=st.r.topk_weights,
                                    config=st.config2)

        def fns(self, st, measure):
            f = {"moe": self.moe, "g1": self.g1, "g2": self.g2}[measure]
            return [functools.partial(f, st, w) for w in self.copies]

        def checks(self, st, r):
            p, w = self.p, self.copies[0]
            slots = mb.sample_slots(r.M * p.topk, 256, r.M)
            h = mb.reference_rows_g1(p, r, self.variant, slots)
            out = {"g1": mb.rel_err(self.g1(st, w)[slots], mb.silu_and_mul(h)),
                   "g2": mb.rel_err(self.g2(st, w)[slots], mb.reference_rows_g2(p, r, self.variant, slots))}
            return out

        def info(self, st):
            notes = [f"block_m={st.block_m} g1={st.config13} g2={st.config2}"]
            if self.copy_note:
                notes.append(self.copy_note)
            return "; ".join(notes)

    return MixgemmMoePeer


def run(args) -> None:
    import torch

    mb = load_harness(args.peers_dir)
    torch.backends.cuda.matmul.allow_tf32 = False
    names = [n for n in args.peers.split(",") if n]
    unknown = [n for n in names if n not in MIXGEMM_PEERS + HARNESS_PEERS]
    if unknown:
        raise SystemExit(f"bench-moe: unknown peers {unknown}; known: {', '.join(MIXGEMM_PEERS + HARNESS_PEERS)}")
    ours = mixgemm_peer_class(mb)
    peers = [ours(n[len("mixgemm_moe["):-1]) if n in MIXGEMM_PEERS else mb.make_peers([n])[0] for n in names]
    models = [mb.ALIASES.get(m, m) for m in args.models.split(",") if m]
    for m in models:
        if m not in mb.MODELS:
            raise SystemExit(f"bench-moe: unknown model {m!r}; known: {', '.join(mb.ALIASES)}")
    hargs = types.SimpleNamespace(seed=args.seed, ms=[int(m) for m in args.ms.split(",")], rounds=args.rounds,
                                  copy_budget_gb=args.copy_budget_gb, check_max_m=args.check_max_m,
                                  verbose=args.verbose)
    results = {"env": mb.environment(), "args": {k: str(v) for k, v in vars(args).items()}, "rows": [],
               "peer_errors": {}}

    def log(msg):
        print(msg, flush=True)

    def dump():
        args.out.write_text(json.dumps(results, indent=1))
    log(f"bench-moe: {results['env']}")
    for name in models:
        mb.run_model(name, mb.MODELS[name], hargs, peers, results, log, dump)
        dump()
    mb.print_table(results, log)
    log(f"\nwrote {args.out}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m mixgemm")
    add_parser(parser.add_subparsers(dest="command", required=True))
    run(parser.parse_args(argv))
    return 0
