"""``python -m mixgemm {bench,dequant,sweep,tune,overhead}``: compare, profile and tune on the GPU.

  bench     every peer on DESIGN.md section 7's shapes (or a quick subset, or your own); prints the table
  dequant   the standalone dequantize against the copy bandwidth of the same GPU
  sweep     every compiled config x split-K x split-K mode for one shape; plots
  tune      sweep, then store the fastest config per M bucket in the cache gemm(config="auto") reads
  overhead  the host's cost of one eager call of each entry point, next to torch.matmul's

Each writes JSON and CSV (and sweep/tune PNGs) into ``--out``. Argument parsing needs no GPU.
"""

from __future__ import annotations

import argparse
import datetime
import math
import pathlib
import re
import sys

from .. import tuning_cache
from ..layouts import LAYOUTS
from . import metrics, moe, report
from .timing import MIN_REPS, round_order

# DESIGN.md section 7.
DESIGN_SHAPES = ((4096, 4096), (4096, 11008), (11008, 4096), (8192, 8192), (8192, 28672), (28672, 8192))
DESIGN_MS = (1, 8, 16, 32, 64, 128, 256, 512, 1024, 4096)
QUICK_SHAPES = ((4096, 4096), (8192, 28672))
QUICK_MS = (1, 16, 128, 4096)
PEER_NAMES = ("mixgemm", "mixgemm_sm80", "vllm_style", "vllm_dequant_matmul", "cublas_fp16", "cutlass2_fp16",
              "torch_int4")
# Yardsticks timed only when asked for by name (``--peers``): read_floor is no GEMM, only the time a kernel
# that reads the decode path's bytes takes, so it belongs beside the decode rows, not in every table.
YARDSTICK_NAMES = ("read_floor",)
COPY_YARDSTICK_BYTES = 1 << 30
DEFAULT_OUT = "mixgemm-bench"


# ---------------------------------------------------------------------------------------------------
# Argument types: each raises ArgumentTypeError, which argparse reports as "argument --x: <message>".


def parse_shape(text: str) -> tuple[int, int]:
    """``"KxN"`` -> ``(K, N)``."""
    match = re.fullmatch(r"\s*(\d+)\s*[xX]\s*(\d+)\s*", text)
    if not match or int(match[1]) == 0 or int(match[2]) == 0:
        raise argparse.ArgumentTypeError(
            f"invalid shape {text!r}: expected KxN with positive integers, e.g. 4096x11008"
        )
    return int(match[1]), int(match[2])


# The tensor-parallel shards of Llama-3-70B (issue 34): each rank's fused qkv, o, gate_up and down GEMMs at
# TP 2, 4 and 8 (mixgemm.tensor_parallel.real_models).
TP_MODEL = "Llama-3-70B"
TP_WORLDS = (2, 4, 8)


def tp_shapes(worlds=TP_WORLDS) -> list[tuple[int, int]]:
    from ..tensor_parallel.real_models import model_named

    model = model_named(TP_MODEL)
    return [shape for w in worlds for shape in model.sharded_gemms(w).values()]


def parse_shapes(text: str) -> list[tuple[int, int]]:
    """``design``, ``quick``, ``tp`` (Llama-3-70B's shards at TP 2, 4, 8), ``tp2`` / ``tp4`` / ``tp8``, or a
    comma-separated list of ``KxN``."""
    if text == "design":
        return list(DESIGN_SHAPES)
    if text == "quick":
        return list(QUICK_SHAPES)
    if text == "tp":
        return tp_shapes()
    if text in {f"tp{w}" for w in TP_WORLDS}:
        return tp_shapes((int(text[2:]),))
    return [parse_shape(part) for part in text.split(",")]


def parse_ms(text: str) -> list[int]:
    """A comma-separated list of positive ints, e.g. ``1,16,128``."""
    try:
        values = [int(part) for part in text.split(",")]
    except ValueError:
        values = []
    if not values or any(v < 1 for v in values):
        raise argparse.ArgumentTypeError(f"invalid M list {text!r}: expected positive integers like 1,16,128")
    return values


def parse_peers(text: str) -> list[str]:
    if text == "all":
        return list(PEER_NAMES)
    names = [part.strip() for part in text.split(",")]
    unknown = [n for n in names if n not in PEER_NAMES + YARDSTICK_NAMES]
    if unknown or not names:
        raise argparse.ArgumentTypeError(f"unknown peer(s) {unknown}; choose from "
                                         f"{', '.join(PEER_NAMES + YARDSTICK_NAMES)} or 'all'")
    return names


def parse_config(text: str):
    """``"auto"``, a path's name or a config's name such as ``16x128x64_w16x32x64_s4`` or ``..._s4_k4s``."""
    from ..paths import from_name

    try:
        return from_name(text)
    except ValueError as exc:  # argparse reports ArgumentTypeError as "argument --config: <message>"
        raise argparse.ArgumentTypeError(str(exc)) from None


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (value > 0 and math.isfinite(value)):
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}")
    return value


def _reps(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < MIN_REPS:
        raise argparse.ArgumentTypeError(f"--reps must be an integer >= {MIN_REPS} (median of >= 7), got {text!r}")
    return value


def _non_negative_int(text: str) -> int:
    if not text.isdigit():
        raise argparse.ArgumentTypeError(f"expected an integer >= 0, got {text!r}")
    return int(text)


def _positive_int(text: str) -> int:
    if not text.isdigit() or int(text) == 0:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1, got {text!r}")
    return int(text)


# ---------------------------------------------------------------------------------------------------
# Parser

_EXAMPLES = """examples:
  python -m mixgemm bench --shapes quick
  python -m mixgemm bench --shapes 4096x4096,8192x28672 --m 1,16,128 --peers mixgemm,cublas_fp16 --out runs/a
  python -m mixgemm dequant --shape 8192x28672
  python -m mixgemm sweep --shape 8192x28672 --m 1,16,128,4096
  python -m mixgemm tune --shape 4096x4096 --m 1,16,64,256,4096   # then gemm(config="auto") uses it
  python -m mixgemm overhead --shape 4096x4096 --m 1 --calls 3000
"""


def build_parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--group-size", type=int, default=128, metavar="G", help="quantization group size (128)")
    common.add_argument("--dtype", choices=("fp16", "bf16"), default="fp16", help="activation dtype (fp16)")
    common.add_argument("--out", type=pathlib.Path, default=pathlib.Path(DEFAULT_OUT),
                        help=f"directory for JSON/CSV/PNG results (./{DEFAULT_OUT})")
    common.add_argument("--reps", type=_reps, default=MIN_REPS, help=f"timed graph replays, >= {MIN_REPS}")
    common.add_argument("--warmup", type=_non_negative_int, default=2,
                        help="eager passes over all copies before capture (2; at least 1 runs)")
    common.add_argument("--no-graph", action="store_true", help="time eager launches instead of CUDA graphs")
    common.add_argument("--read-bw", type=_positive_float, default=metrics.READ_BW_TBS, metavar="TB/S",
                        help=f"read-bandwidth ceiling for the floor ({metrics.READ_BW_TBS} TB/s, H100)")
    common.add_argument("--peak-tflops", type=_positive_float, default=metrics.PEAK_TFLOPS, metavar="TFLOP/S",
                        help=f"fp16 compute ceiling for the floor ({metrics.PEAK_TFLOPS} TFLOP/s, H100)")

    parser = argparse.ArgumentParser(
        prog="python -m mixgemm", description="mixgemm: compare, profile and tune the int4 GEMM on this GPU.",
        epilog=_EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", required=True,
                                metavar="{bench,dequant,sweep,tune,overhead,bench-moe}")
    parser.subcommands = sub.choices  # parse_args reports cross-argument errors through the subcommand

    bench = sub.add_parser("bench", parents=[common], help="compare every peer on a set of shapes")
    bench.add_argument("--shapes", type=parse_shapes, default="design",
                       help="'design' (docs/DESIGN.md s.7), 'quick', 'tp' (Llama-3-70B's TP 2/4/8 shards; "
                            "'tp2', 'tp4', 'tp8' one size), or KxN[,KxN...]")
    bench.add_argument("--m", type=parse_ms, default=None, help=(
        f"M values (design: {','.join(map(str, DESIGN_MS))}; quick: {','.join(map(str, QUICK_MS))})"))
    bench.add_argument("--peers", type=parse_peers, default=list(PEER_NAMES),
                       help=f"comma-separated subset of {','.join(PEER_NAMES)} ('all', the default), "
                            f"and of the yardsticks {','.join(YARDSTICK_NAMES)}")
    bench.add_argument("--config", type=parse_config, default="auto", help="our GEMM's config: 'auto' or a name")
    bench.add_argument("--rounds", type=_positive_int, default=1, help=(
        "time every peer of a cell this many times, interleaved (peer 1, 2, ..., then again), and report "
        "each peer's median over the rounds (1). Under sustained large GEMMs the H100's clocks drift with "
        "power, and a peer timed later in a cell than another ran on a hotter GPU; interleaving gives every "
        "peer the same share of the drift"))

    dequant = sub.add_parser("dequant", parents=[common], help="awq_dequantize vs device-to-device copy")
    dequant.add_argument("--shape", type=parse_shape, default=(8192, 28672), help="KxN (8192x28672)")

    for name, text in (("sweep", "every compiled config x split-K x mode for one shape"),
                       ("tune", "sweep, then cache the fastest config per M bucket")):
        p = sub.add_parser(name, parents=[common], help=text)
        p.add_argument("--shape", type=parse_shape, required=True, help="KxN")
        p.add_argument("--m", type=parse_ms, default=list(DESIGN_MS), help="M values (docs/DESIGN.md s.7's list)")
        p.add_argument("--no-plots", action="store_true", help="skip the PNG plots")
        p.add_argument("--layout", choices=("auto", *LAYOUTS, "all"), default="auto" if name == "tune" else "all",
                       help="weight layouts whose paths compete: the GPU's own ('auto'), one, or every layout "
                            f"this GPU runs ('all'); default {'auto' if name == 'tune' else 'all'}")
        p.add_argument("--rounds", type=_positive_int, default=1, help=(
            "time every case of a cell (M x layout) this many times, interleaved in an order rotated each round, "
            "and report each case's median round (1): two configs a few percent apart are ranked on the same "
            "drift of clocks and power"))
        p.add_argument("--after-elementwise", action="store_true", help=(
            "time each case as a model runs it, after an elementwise kernel that writes its input (the pair less "
            "that kernel alone), instead of back to back, where the dependent launches (the decode and sm90 "
            "paths, the sm80 path's small tiles) hide their prologue under the previous call"))
    tune = sub.choices["tune"]
    tune.add_argument("--cache", type=pathlib.Path, default=None,
                      help="tuning cache file ($MIXGEMM_CACHE, else $XDG_CACHE_HOME/mixgemm/tuned.json)")

    # Not `common`: no graphs, reps or ceilings here; eager calls timed back to back.
    overhead = sub.add_parser("overhead", help="host cost of one eager call per entry point, vs torch.matmul")
    overhead.add_argument("--shape", type=parse_shape, default=(4096, 4096), help="KxN (4096x4096)")
    overhead.add_argument("--m", type=_positive_int, default=1, help="rows of x (1)")
    overhead.add_argument("--group-size", type=int, default=128, metavar="G", help="quantization group size (128)")
    overhead.add_argument("--dtype", choices=("fp16", "bf16"), default="fp16", help="activation dtype (fp16)")
    overhead.add_argument("--calls", type=_positive_int, default=3000, help="timed calls per measurement (3000)")
    overhead.add_argument("--warmup", type=_non_negative_int, default=200, help="untimed calls before each (200)")
    overhead.add_argument("--repeat", type=_positive_int, default=5,
                          help="measurements per entry point, interleaved; the median is reported (5)")
    overhead.add_argument("--out", type=pathlib.Path, default=pathlib.Path(DEFAULT_OUT),
                          help=f"directory for overhead.json/csv (./{DEFAULT_OUT})")
    moe.add_parser(sub)
    return parser


def _check_shape(parser: argparse.ArgumentParser, K: int, N: int, G: int) -> None:
    """The shape must be one prepack takes (its layout holds it and some kernel path runs it)."""
    from ..packing import check_weight_shape

    try:
        check_weight_shape(f"shape {K}x{N}, --group-size {G}", "sm80", K, N, G)
    except ValueError as error:
        parser.error(str(error))


def parse_args(argv=None) -> argparse.Namespace:
    """Parses and cross-checks the arguments (no GPU needed); errors exit through argparse."""
    top = build_parser()
    args = top.parse_args(argv)
    parser = top.subcommands[args.command]
    if args.command == "bench-moe":
        return args  # its harness (bench/moe.py) checks its own arguments
    if args.group_size < 1:
        parser.error(f"--group-size must be a positive integer, got {args.group_size}")
    if args.command == "bench":
        # (argparse runs `type` on string defaults too, so args.shapes is already a list here.)
        if args.m is None:
            args.m = list(QUICK_MS) if args.shapes == list(QUICK_SHAPES) else list(DESIGN_MS)
        shapes = args.shapes
    else:
        shapes = [args.shape]
    for K, N in shapes:
        _check_shape(parser, K, N, args.group_size)
    return args


# ---------------------------------------------------------------------------------------------------
# Running (GPU only from here on)


def _torch_dtype(name: str):
    import torch

    return {"fp16": torch.float16, "bf16": torch.bfloat16}[name]


def _meta(args: argparse.Namespace, argv) -> dict:
    import torch

    from .. import __version__
    from . import timing as protocol

    return {
        "command": args.command,
        "argv": list(argv) if argv is not None else sys.argv[1:],
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "gpu": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "mixgemm": __version__,
        "dtype": args.dtype,
        "group_size": args.group_size,
        "ceilings": {"read_bw_tbs": args.read_bw, "peak_tflops": args.peak_tflops},
        "protocol": {"reps": args.reps, "warmup": args.warmup, "cuda_graph": not args.no_graph,
                     "l2_rotation_bytes": protocol.L2_SAFE_BYTES, "min_sample_us": protocol.MIN_SAMPLE_US,
                     "enqueue_hidden_cycles": protocol.HIDE_ENQUEUE_CYCLES, "statistic": "median per call",
                     "interleaved_rounds": getattr(args, "rounds", 1),
                     "order": "after_elementwise" if getattr(args, "after_elementwise", False) else "back_to_back"},
    }


def _time_case(problem: metrics.Problem, record: dict, closures, args, rounds: list | None = None) -> dict:
    """Times ``closures`` into ``record`` (status ok/error), adding the rates against ``problem``.

    ``rounds``: the Timings of this case's earlier interleaved rounds (bench --rounds); the new one is
    appended and the record reports the round whose median is the median of all rounds' medians."""
    from .timing import time_after_elementwise, time_fn

    after_elementwise = getattr(args, "after_elementwise", False)
    try:
        if after_elementwise:  # sweep/tune --after-elementwise: the closures of mixgemm_peer, which keep their x
            timing = time_after_elementwise(closures, closures.x, warmup=args.warmup, reps=args.reps,
                                            use_graph=not args.no_graph)
        else:
            timing = time_fn(closures, warmup=args.warmup, reps=args.reps, use_graph=not args.no_graph)
    except Exception as exc:  # noqa: BLE001 - recorded; the run goes on with the next case
        from .peers import describe

        record.update(status="error", reason=describe(exc))
        return record
    if rounds is not None:
        rounds.append(timing)
        timing = sorted(rounds, key=lambda t: t.median_us)[(len(rounds) - 1) // 2]  # the (lower) median round
        record["round_medians_us"] = [t.median_us for t in rounds]
    rates = problem.rates(timing.median_us)
    notes = [n for n in (getattr(closures, "note", None), timing.note) if n]
    record.update(
        status="ok", time_us=timing.median_us, min_us=timing.min_us, max_us=timing.max_us,
        samples_us=timing.samples_us, calls_per_sample=timing.calls_per_sample, cuda_graph=timing.graph,
        tflops=rates.tflops, gbps=rates.gbps, pct_floor=rates.pct_of_floor, note="; ".join(notes) or None,
    )
    return record


def _base_record(problem: metrics.Problem, peer: str, dtype: str) -> dict:
    return {
        "K": problem.K, "N": problem.N, "M": problem.M, "G": problem.G, "dtype": dtype, "peer": peer,
        "config": None, "status": None, "time_us": None, "bytes": problem.bytes, "flops": problem.flops,
        "floor_us": problem.floor_us,
    }


def _log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _notes(records: list[dict]) -> str:
    """Why peers did not run, and any measurement caveats, once each."""
    lines = []
    for r in records:
        for text in (r.get("reason"), r.get("note")):
            line = f"  {r['peer']}: {text}" if text else None
            if line and line not in lines:
                lines.append(line)
    return "notes:\n" + "\n".join(lines) if lines else ""


def run_bench(args, argv=None) -> list[dict]:
    from . import peers
    from .timing import copies_for

    dtype = _torch_dtype(args.dtype)
    ceilings = metrics.Ceilings(args.read_bw, args.peak_tflops)
    records = []
    for K, N in args.shapes:
        copies = copies_for(metrics.Problem(0, N, K, args.group_size).weight_bytes)
        for M in args.m:
            problem = metrics.Problem(M, N, K, args.group_size, ceilings)
            if args.rounds == 1:  # each peer's closures (weight copies) live only while it is timed
                for peer in args.peers:
                    record, closures = _bench_case(problem, peer, dtype, copies, args)
                    if closures is not None:
                        _time_case(problem, record, closures, args)
                    del closures
                    records.append(record)
                    _log(f"[bench] {K}x{N} M={M} {peer}: {_fmt_time(record)}")
                continue
            # Interleaved rounds: every peer's closures stay built across the rounds.
            cases = [(*_bench_case(problem, peer, dtype, copies, args), []) for peer in args.peers]
            for _ in range(args.rounds):
                for record, closures, rounds in cases:
                    if closures is not None and record["status"] != "error":
                        _time_case(problem, record, closures, args, rounds)
            for record, closures, rounds in cases:
                records.append(record)
                _log(f"[bench] {K}x{N} M={M} {record['peer']}: {_fmt_time(record)}"
                     + (f" (rounds: {', '.join(f'{t.median_us:.2f}' for t in rounds)})" if rounds else ""))
            del cases
        peers.clear_caches()
    report.add_speedups(records)
    out = args.out
    report.write_json(out / "bench.json", records, _meta(args, argv))
    report.write_csv(out / "bench.csv", records)
    notes = _notes(records)
    if notes:
        print(notes + "\n")
    print(f"results: {out / 'bench.json'}, {out / 'bench.csv'}\n")
    print(report.format_table(records))
    return records


def _bench_case(problem: metrics.Problem, peer: str, dtype, copies: int, args) -> tuple[dict, object]:
    """(record, closures) of one peer in one cell; closures None (record says why) if it cannot run."""
    from . import peers

    options = {"config": args.config} if peer == "mixgemm" else {}
    record = _base_record(problem, peer, args.dtype)
    closures, reason = peers.build(peer, problem.M, problem.N, problem.K, args.group_size, dtype, copies, **options)
    if closures is None:
        record.update(status="unavailable", reason=reason)
    else:
        record["config"] = closures.config if isinstance(closures, peers.Closures) else None
    return record, closures


def _fmt_time(record: dict) -> str:
    if record.get("status") == "ok":
        return f"{record['time_us']:.2f} us"
    return f"{record.get('status')} ({record.get('reason')})"


def run_dequant(args, argv=None) -> list[dict]:
    from . import peers
    from .timing import copies_for, time_fn

    dtype = _torch_dtype(args.dtype)
    K, N = args.shape
    G = args.group_size
    # The bytes a dequantize must move: read the int4 weight, write it as fp16/bf16. (Scales and zeros
    # add 1/G of that and are left out, so the comparison with a plain copy is like for like.)
    moved = K * N // 2 + 2 * K * N
    timing_args = dict(warmup=args.warmup, reps=args.reps, use_graph=not args.no_graph)
    records = []

    def add(op: str, nbytes: int, timing) -> None:
        records.append({"op": op, "K": K, "N": N, "G": G, "dtype": args.dtype, "bytes": nbytes,
                        "time_us": timing.median_us, "min_us": timing.min_us, "max_us": timing.max_us,
                        "samples_us": timing.samples_us, "calls_per_sample": timing.calls_per_sample,
                        "cuda_graph": timing.graph, "note": timing.note,
                        "gbps": nbytes / (timing.median_us * 1e-6) / 1e9})

    # The yardstick: one 1 GiB copy (already 20x L2, so no rotation), counting read + write.
    add("copy 1 GiB (read+write)", 2 * COPY_YARDSTICK_BYTES,
        time_fn(peers.copy_closures(COPY_YARDSTICK_BYTES, 1), **timing_args))
    # A copy moving exactly the dequantize's bytes: the time a perfect dequantize would take.
    half = moved // 2
    add("copy same bytes", 2 * half, time_fn(peers.copy_closures(half, copies_for(half)), **timing_args))
    weight_bytes = metrics.Problem(0, N, K, G).weight_bytes
    add("awq_dequantize", moved,
        time_fn(peers.dequant_closures(K, N, G, dtype, copies_for(weight_bytes)), **timing_args))
    peers.clear_caches()

    copy_bw = records[0]["gbps"]
    for r in records:
        r["pct_copy_bw"] = 100.0 * r["gbps"] / copy_bw
    report.write_json(args.out / "dequant.json", records, _meta(args, argv))
    report.write_csv(args.out / "dequant.csv", records)
    notes = sorted({r["note"] for r in records if r["note"]})
    if notes:
        print("notes:\n" + "\n".join(f"  {n}" for n in notes) + "\n")
    print(f"results: {args.out / 'dequant.json'}, {args.out / 'dequant.csv'}\n")
    rows = [[r["op"], f"{K}x{N}", f"{r['bytes'] / 1e6:.1f}", f"{r['time_us']:.1f}", f"{r['gbps']:.0f}",
             f"{r['pct_copy_bw']:.1f}"] for r in records]
    print(report.format_grid(["op", "K x N", "MB moved", "us", "GB/s", "% copy BW"], rows,
                             [False, False, True, True, True, True]))
    return records


def sweep_cases(K: int, N: int, G: int, M: int, key, gpu) -> list:
    """Every compiled config of every path that reads ``key``'s layout, in each split its path sweeps
    (``KernelPath.split_variants``), that runs this M x N x K problem (``KernelPath.fits``)."""
    from ..paths import PATHS, GemmProblem

    problem = GemmProblem(M, N, K, G)
    return [variant for path in PATHS.values() for config in path.compiled(key)
            for variant in path.split_variants(config, problem, gpu) if path.fits(variant, problem, key) is None]


class _Progress:
    """tqdm when it is installed, else a line every ~5%."""

    def __init__(self, total: int, desc: str):
        self.total, self.desc, self.done = total, desc, 0
        self.every = max(1, total // 20)
        try:
            from tqdm import tqdm

            self.bar = tqdm(total=total, desc=desc, file=sys.stderr, leave=False)
        except ImportError:
            self.bar = None

    def step(self, info: str = "") -> None:
        self.done += 1
        if self.bar is not None:
            self.bar.update(1)
            self.bar.set_postfix_str(info, refresh=False)
        elif self.done % self.every == 0 or self.done == self.total:
            _log(f"[{self.desc}] {self.done}/{self.total} {info}")

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def sweep_layouts(choice: str, K: int, N: int, G: int, dtype) -> list[str]:
    """The weight layouts a sweep covers: ``choice`` from --layout, on this GPU ("all": sm80 and, where the
    sm90 kernels fit, sm90; "auto": the one prepack picks)."""
    from . import peers

    own = peers.auto_layout(K, N, G, dtype)
    if choice == "auto":
        return [own]
    if choice == "all":
        return list(LAYOUTS) if own == "sm90" else ["sm80"]
    return [choice]


def sweep(args, argv=None, label: str = "sweep") -> list[dict]:
    """Times every compiled config x split setting of each weight layout's paths for each M; writes
    <label>.json/csv and PNGs."""
    import torch

    from .. import device
    from ..kernel_key import KernelKey
    from . import peers
    from .timing import copies_for

    dtype = _torch_dtype(args.dtype)
    K, N = args.shape
    G = args.group_size
    ceilings = metrics.Ceilings(args.read_bw, args.peak_tflops)
    copies = copies_for(metrics.Problem(0, N, K, G).weight_bytes)
    layouts = sweep_layouts(getattr(args, "layout", "auto"), K, N, G, dtype)
    gpu = device.facts(label, torch.device("cuda", torch.cuda.current_device()))
    # Every path's configs compete alike, each on the layout it reads and where it runs the problem.
    fitting = {(layout, M): sweep_cases(K, N, G, M, KernelKey.of(dtype, 4, layout), gpu)
               for layout in layouts for M in args.m}
    progress = _Progress(sum(len(v) + 1 for v in fitting.values()), f"{label} {K}x{N}")
    records = []
    # The first case timed after a layout's weight copies are made read up to 12% high against the same config
    # timed later in the same cell (H100, M = 16 of 13 shapes; docs/perf-notes/2026-11-26-wide-weight-tiles.md):
    # that case is timed once more first, and the throwaway timing discarded.
    unsettled = set(layouts)
    rounds = getattr(args, "rounds", 1)
    for M in args.m:
        problem = metrics.Problem(M, N, K, G, ceilings)
        for layout in layouts:
            # What config="auto" does today (tuned cache or heuristic): the line the sweep should beat.
            cases = [("mixgemm:auto", "auto")] + [("mixgemm", v) for v in fitting[(layout, M)]]
            if rounds == 1:  # each case's plan and output live only while it is timed
                for peer_label, config in cases:
                    record, closures = _sweep_case(problem, peer_label, config, layout, args.dtype, copies)
                    if closures is not None:
                        if layout in unsettled:
                            unsettled.discard(layout)
                            _time_case(problem, {}, closures, args)
                        _time_case(problem, record, closures, args)
                    del closures
                    records.append(record)
                    progress.step(f"M={M} {record['config'] or ''}")
                continue
            # Interleaved rounds: every case's closures stay built (they share the cached weight copies), and each
            # round starts one case later, so no config is always timed first in a cell.
            built = [(*_sweep_case(problem, peer_label, config, layout, args.dtype, copies), [])
                     for peer_label, config in cases]
            timed = [case for case in built if case[1] is not None]
            if timed and layout in unsettled:
                unsettled.discard(layout)
                _time_case(problem, {}, timed[0][1], args)
            for r in range(rounds if timed else 0):
                for record, closures, history in round_order(timed, r):
                    if record["status"] != "error":
                        _time_case(problem, record, closures, args, history)
            for record, _, _ in built:
                records.append(record)
                progress.step(f"M={M} {record['config'] or ''}")
            del built, timed
    progress.close()
    peers.clear_caches()

    out = args.out
    report.write_json(out / f"{label}.json", records, _meta(args, argv))
    report.write_csv(out / f"{label}.csv", records)
    written = [out / f"{label}.json", out / f"{label}.csv"]
    if not args.no_plots and any(r["status"] == "ok" and r["peer"] == "mixgemm" for r in records):
        title = f"{K}x{N} G={G} {args.dtype}"
        for plotted in (report.plot_time_vs_m(records, out / f"{label}_time_vs_m.png", title),
                        report.plot_stages_splitk_heatmap(records, out / f"{label}_stages_splitk.png", title)):
            if plotted is not None:
                written.append(plotted)
    print("results: " + ", ".join(str(p) for p in written) + "\n")
    return records


def _sweep_case(problem: metrics.Problem, peer_label: str, config, layout: str, dtype: str, copies: int):
    """One sweep case's record (config fields filled) and closures; where the case cannot run, None closures and
    an "unavailable" record with the reason."""
    from . import peers

    record = _base_record(problem, peer_label, dtype)
    record["layout"] = layout
    closures, reason = peers.build("mixgemm", problem.M, problem.N, problem.K, problem.G, _torch_dtype(dtype),
                                   copies, config=config, layout=layout)
    if config != "auto":
        record.update(config=config.name, tile=config.kernel_name, stages=getattr(config, "stages", None),
                      split_k=config.split_k, split_k_mode=config.split_k_mode, path=config.path)
    elif closures is not None:
        record["config"] = closures.config
    if closures is None:
        record.update(status="unavailable", reason=reason)
    return record, closures


def _top(records: list[dict], per_m: int = 5) -> list[dict]:
    """Each M's auto rows (one per layout) and its ``per_m`` fastest configs over every layout, fastest first."""
    shown = []
    for M in sorted({r["M"] for r in records}):
        rows = [r for r in records if r["M"] == M and r["status"] == "ok"]
        auto = [r for r in rows if r["peer"] != "mixgemm"]
        shown.extend(auto + sorted((r for r in rows if r["peer"] == "mixgemm"), key=lambda r: r["time_us"])[:per_m])
    return shown


def run_sweep(args, argv=None) -> list[dict]:
    records = sweep(args, argv)
    failed = sum(r["status"] != "ok" for r in records)
    if failed:
        print(f"{failed} of {len(records)} cases did not run (see 'reason' in the JSON)\n")
    print(report.format_table(_top(records), report.SWEEP_COLUMNS))
    return records


def run_tune(args, argv=None) -> list[dict]:
    import torch

    from ..kernel_key import KernelKey

    records = sweep(args, argv, label="tune")
    K, N = args.shape
    gpu = torch.cuda.get_device_name()
    path = args.cache if args.cache is not None else tuning_cache.cache_path()
    # One winner per weight layout and M bucket (a weight runs only the paths of its layout, so each layout
    # keeps its own choices); where several swept M share a bucket, the largest (the one nearest the
    # bucket's upper end, which the bucket stands for) decides. What "auto" ran competes too: the
    # heuristic's split-K need not be one of the swept powers of two, and it may be the fastest.
    winners: dict[tuple[str, str], dict] = {}
    for layout in dict.fromkeys(r["layout"] for r in records):
        for M in sorted(args.m):
            timed = [r for r in records if r["M"] == M and r["layout"] == layout
                     and r["peer"] in ("mixgemm", "mixgemm:auto") and r["status"] == "ok" and r["config"]]
            if timed:
                winners[(layout, tuning_cache.m_bucket(M))] = min(timed, key=lambda r: r["time_us"])
    rows = []
    for (layout, bucket), best in winners.items():
        config = parse_config(best["config"])
        # The sweep's weights have zero points: their key is the scale+offset one of the layout.
        key = KernelKey.of(_torch_dtype(args.dtype), 4, layout)
        tuning_cache.save_choice(gpu, best["M"], N, K, args.group_size, key, config, best["time_us"], path=path)
        auto = next((r for r in records if r["M"] == best["M"] and r["layout"] == layout
                     and r["peer"] == "mixgemm:auto"), None)
        gain = auto["time_us"] / best["time_us"] if auto and auto["status"] == "ok" else None
        rows.append([layout, bucket, str(best["M"]), best["config"], f"{best['time_us']:.2f}",
                     "-" if auto is None or auto["status"] != "ok" else f"{auto['time_us']:.2f} ({auto['config']})",
                     "-" if gain is None else f"{gain:.2f}x"])
    if not rows:
        print("no config ran successfully; nothing cached")
        return records
    print(f"cached {len(rows)} choice(s) for '{gpu}' in {path}\n")
    print(report.format_grid(["layout", "M bucket", "M", "tuned config", "us", "auto before (config)", "gain"], rows,
                             [False, True, True, False, True, True, True]))
    return records


def run_overhead(args, argv=None) -> list[dict]:
    import torch

    from .. import __version__
    from . import overhead

    K, N = args.shape
    cases = overhead.build_cases(K, N, args.m, args.group_size, _torch_dtype(args.dtype))
    records = overhead.measure(cases, args.calls, args.warmup, args.repeat)
    for r in records:
        r.update(K=K, N=N, M=args.m, G=args.group_size, dtype=args.dtype)
    meta = {
        "command": "overhead", "argv": list(argv) if argv is not None else sys.argv[1:],
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "cuda": torch.version.cuda,
        "mixgemm": __version__,
        "protocol": {"calls": args.calls, "warmup": args.warmup, "repeat": args.repeat, "cuda_graph": False,
                     "statistic": "median over repeats of (wall clock of the loop + one synchronize) / calls"},
    }
    report.write_json(args.out / "overhead.json", records, meta)
    report.write_csv(args.out / "overhead.csv", records)
    print(f"results: {args.out / 'overhead.json'}, {args.out / 'overhead.csv'}\n")
    print(f"eager host overhead, {K}x{N} M={args.m} G={args.group_size} {args.dtype}, mean over {args.calls} "
          f"calls, median of {args.repeat}:")
    rows = [[r["call"], f"{r['us_per_call']:.1f}", f"{r['min_us']:.1f}",
             "-" if r["vs_matmul"] is None else f"{r['vs_matmul']:.2f}x"] for r in records]
    print(report.format_grid(["call", "us per call", "min", "vs torch.matmul"], rows, [False, True, True, True]))
    return records


_COMMANDS = {"bench": run_bench, "dequant": run_dequant, "sweep": run_sweep, "tune": run_tune,
             "overhead": run_overhead, "bench-moe": lambda args, argv: moe.run(args)}


def main(argv=None) -> int:
    args = parse_args(argv)
    import torch

    if not torch.cuda.is_available():
        print(f"python -m mixgemm {args.command}: no CUDA GPU is visible; benchmarks need one", file=sys.stderr)
        return 2
    _COMMANDS[args.command](args, argv)
    return 0
