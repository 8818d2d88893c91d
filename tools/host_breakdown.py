"""Where an eager call's host time goes (issue 9): each piece of `mixgemm.gemm` and `QuantLinear` timed alone.

`python -m mixgemm overhead` times whole calls; this times their parts on the same problem (4096 x 4096, M = 1,
G = 128, fp16, the GPU's own layout): the output allocation, the stream query, the launch with its arguments
ready, the fast-path checks, nn.Module's call machinery, ... and prints a cProfile of QuantLinear calls. The
GPU keeps up at this size, so every number is host time (mean over `--calls` calls, median of 5).

    python tools/host_breakdown.py [--calls 20000]
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import statistics

import torch

import mixgemm
from mixgemm import _runtime, formats, library, ops, workspace
from mixgemm.bench.overhead import time_per_call
from mixgemm.nn import QuantLinear


def per_call_us(fn, calls: int) -> float:
    """The overhead command's measurement (mean over ``calls`` calls after 200 untimed ones), median of 5."""
    return statistics.median(time_per_call(fn, calls, 200) for _ in range(5))


class Identity(torch.nn.Module):
    def forward(self, x):
        return x


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=20000)
    args = parser.parse_args()
    K = N = 4096
    G, dtype = 128, torch.float16
    ckpt = formats.random_awq_weight(K, N, G, dtype, device="cuda")
    packed = mixgemm.prepack(ckpt["qweight"], ckpt["scales"], ckpt["qzeros"], G)
    dense = torch.randn(K, N, device="cuda", dtype=dtype)
    x = torch.randn(1, K, device="cuda", dtype=dtype)
    layer = QuantLinear(packed)
    mixgemm.gemm(x, packed)
    layer(x)
    state = packed._gemm_state
    plan = ops._plan_for("gemm", state, 1, "auto")
    out = torch.empty(1, N, device="cuda", dtype=dtype)
    stream = _runtime.current_stream(x.device)
    scratch = workspace.scratch(plan.device, stream, max(plan.workspace_bytes, 1))
    semaphores = workspace.semaphores(plan.device, stream, max(plan.semaphore_count, 1))
    addresses = (x.data_ptr(), packed.packed.data_ptr(), packed.scales.data_ptr(), packed.offsets.data_ptr(), 0,
                 out.data_ptr(), scratch.data_ptr(), semaphores.data_ptr(), stream)

    def launch_only():
        plan.launch(*addresses)

    identity = Identity()
    pieces = [
        ("torch.matmul(x, w)", lambda: torch.matmul(x, dense)),
        ("torch.empty((1, N), ...)", lambda: torch.empty((1, N), dtype=dtype, device=x.device)),
        ("x.new_empty((1, N))", lambda: x.new_empty((1, N))),
        ("workspace (cached)", lambda: workspace.scratch(plan.device, stream, plan.workspace_bytes)),
        ("workspace new_empty(bytes)", lambda: out.new_empty(plan.workspace_bytes or 1, dtype=torch.uint8)),
        ("stream_capturing()", _runtime.stream_capturing),
        ("current_stream(device)", lambda: _runtime.current_stream(x.device)),
        ("x.data_ptr()", x.data_ptr),
        ("x.device", lambda: x.device),
        ("x.is_contiguous()", x.is_contiguous),
        ("x.shape[-1]", lambda: x.shape[-1]),
        ("state.holds(packed)", lambda: state.holds(packed)),
        ("plan lookup (_plan_for)", lambda: ops._plan_for("gemm", state, 1, "auto")),
        (f"launch only ({plan.config.name})", launch_only),
        ("plan.run(...)", lambda: plan.run(x, packed, None, out, stream)),
        ("mixgemm.gemm(x, packed)", lambda: mixgemm.gemm(x, packed)),
        ("library.eager_call(x)", lambda: library.eager_call(x)),
        ("layer._eager_weight()", layer._eager_weight),
        ("Identity() module call", lambda: identity(x)),
        ("layer.forward(x)", lambda: layer.forward(x)),
        ("layer(x)", lambda: layer(x)),
    ]
    print(f"{'piece':<44} {'us/call':>8}")
    for label, fn in pieces:
        print(f"{label:<44} {per_call_us(fn, args.calls):8.2f}", flush=True)

    profile = cProfile.Profile()
    profile.enable()
    for _ in range(args.calls):
        layer(x)
    torch.cuda.synchronize()
    profile.disable()
    text = io.StringIO()
    pstats.Stats(profile, stream=text).sort_stats("tottime").print_stats(18)
    print(text.getvalue())


if __name__ == "__main__":
    main()
