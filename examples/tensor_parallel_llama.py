"""A small LLaMA-style model run tensor-parallel: each rank loads only its shard of a quantized checkpoint and
the ranks sum their row-parallel outputs with NCCL. Prints decode tokens/s at TP 1 (rank 0's GPU alone) and at
TP = the number of processes, and how far the TP logits are from TP 1's.

Nothing is downloaded: rank 0 builds the model from a LlamaConfig with random weights and writes it as a
quantized checkpoint (examples/quantized_llama.py's writer); every rank then loads it with
``mixgemm.checkpoint.load_model(folder, tp=(rank, world_size))``. Needs CUDA GPUs and transformers. Run:

    torchrun --nproc-per-node 2 examples/tensor_parallel_llama.py --size small
    torchrun --nproc-per-node 2 examples/tensor_parallel_llama.py --size 1b --method gptq

Decoding is timed as in quantized_llama.py: one CUDA-graph replay per token (the all-reduces are captured in the
graph too), batch 1 by default. Small models are latency-bound: TP 2 may be no faster than TP 1 until the
weights are large enough for halving each GPU's reads to outweigh the two all-reduces per layer.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile

import torch
import torch.distributed as dist

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from quantized_llama import METHODS, PRESETS, build_model, decode_tokens_per_second, quantize_model, rel_err  # noqa: E402

from mixgemm.checkpoint import load_model  # noqa: E402
from mixgemm.checkpoint.writer import quantization_config, write_checkpoint  # noqa: E402


def write(folder: str, size: str, method: str, group_size: int) -> None:
    """Rank 0's job: the random model, quantized and written as ``method`` would write it."""
    model = build_model(size, "cpu")
    tensors, _ = quantize_model(model, method, group_size)
    write_checkpoint(folder, model.config.to_dict(), quantization_config(method, 4, group_size, METHODS[method]),
                     tensors)


def run(rank: int, world: int, device: torch.device, size: str = "tiny", method: str = "awq", group_size: int = 128,
        folder: str | None = None, steps: int = 64, batch: int = 1) -> dict:
    """Everything one rank does; rank 0's result holds the numbers (also printed by main)."""
    folder = folder or os.path.join(tempfile.gettempdir(), f"mixgemm-tp-example-{size}-{method}")
    if rank == 0:
        write(folder, size, method, group_size)
    if world > 1:
        dist.barrier()
    torch.manual_seed(1)
    ids = torch.randint(0, PRESETS[size][5], (1, 32)).to(device)
    results = {"size": size, "method": method, "world": world, "device": str(device)}
    if rank == 0:  # TP 1: the whole model on rank 0's device, while the others wait
        whole, _ = load_model(folder, device=device)
        with torch.no_grad():
            results["tp1_logits"] = whole(input_ids=ids).logits
        if steps:
            results["tp1_tok_s"], results["tp1_mode"] = decode_tokens_per_second(whole, batch, 16, steps, str(device))
        del whole
        if device.type == "cuda":
            torch.cuda.empty_cache()
    if world > 1:
        dist.barrier()
    model, report = load_model(folder, device=device, tp=(rank, world) if world > 1 else None)
    with torch.no_grad():
        logits = model(input_ids=ids).logits
    if steps:
        results["tp_tok_s"], results["tp_mode"] = decode_tokens_per_second(model, batch, 16, steps, str(device))
    results["sharded_layers"] = len(report.tensor_parallel)
    if rank == 0:
        results["rel_err_vs_tp1"] = rel_err(logits, results.pop("tp1_logits"))
    return results


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", choices=sorted(PRESETS), default="small")
    parser.add_argument("--method", choices=list(METHODS), default="awq")
    parser.add_argument("--group-size", type=int, default=128)
    parser.add_argument("--steps", type=int, default=64, help="decode steps timed (0: no timing)")
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--folder", help="checkpoint folder shared by the ranks (default: under the temp folder)")
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        parser.error("CUDA GPUs are needed (mixgemm's kernels run on NVIDIA sm_80+)")
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world > 1:
        dist.init_process_group("nccl")
    rank = dist.get_rank() if world > 1 else 0
    device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", rank)))
    torch.cuda.set_device(device)
    try:
        r = run(rank, world, device, args.size, args.method, args.group_size, args.folder, args.steps, args.batch)
    finally:
        if world > 1:
            dist.destroy_process_group()
    if rank == 0:
        print(f"\nLLaMA-style '{r['size']}' ({args.method}, group {args.group_size}), {torch.cuda.get_device_name()}, "
              f"batch {args.batch}")
        print(f"sharded layers per rank: {r['sharded_layers']}; TP {world} logits vs TP 1: relative error "
              f"{r['rel_err_vs_tp1']:.2e}")
        if args.steps:
            print(f"decode tokens/s  TP 1: {r['tp1_tok_s']:.1f}  TP {world}: {r['tp_tok_s']:.1f}  "
                  f"({r['tp_tok_s'] / r['tp1_tok_s']:.2f}x)   [{r['tp1_mode']}; {r['tp_mode']}]")
    return 0


if __name__ == "__main__":
    sys.exit(main())
