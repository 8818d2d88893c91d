"""Tensor-parallel layers and a whole model against the single-device result, one process per rank.

    torchrun --nproc-per-node 2 tests/tensor_parallel/run_two_gpus.py            # two GPUs, NCCL, our kernels
    torchrun --nproc-per-node 2 tests/tensor_parallel/run_two_gpus.py --cpu      # CPU, gloo, reference kernels

Every rank builds the same random layers (same seeds) and, for each checkpoint format and both styles, its
shard (``QuantLinear.from_awq`` / ``from_gptq`` with ``tp=``) and the whole layer; the shard's output
(column-parallel: the whole output's columns; row-parallel: the all-reduced output) must match the whole
layer's within the dense GPU tests' tolerance (tests/gpu_helpers.py MATH_TOL). Then a small random LLaMA is
written as AWQ, GPTQ and compressed-tensors checkpoints and loaded whole and tensor-parallel with
``load_model``; the logits must match the same way. Rank 0 prints "TP CHECK PASSED" at the end; any mismatch
raises (non-zero exit). tests/tensor_parallel/test_two_gpus.py runs it.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import sys
import tempfile

HERE = pathlib.Path(__file__).resolve().parent
for path in (HERE, HERE.parent, HERE.parent / "checkpoint"):  # mixgemm itself: installed, or on PYTHONPATH
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

from mixgemm.nn import QuantLinear  # noqa: E402
from tp_checkpoints import KINDS, make_layer  # noqa: E402

TOLERANCE = 3e-3  # tests/gpu_helpers.py MATH_TOL[float16]: the dense GPU tests' bound for fp16 outputs
# (K, N, G) per case: plain cuts; N padded (72 columns per rank); groups split (96 rows per rank); regrouped.
SHAPES = {"plain": (512, 512, 64), "n_padded": (256, 144, 64), "groups_split": (192, 128, 64),
          "regrouped": (224, 128, 32)}
STYLES_OF = {"plain": ("column", "row"), "n_padded": ("column",), "groups_split": ("row",), "regrouped": ("row",)}


def use_reference_kernels() -> None:
    """The kernels' pure-PyTorch references (tests/checkpoint/cpu_references.py), act-order gather included."""
    from cpu_references import cpu_gemm, cpu_prepack

    from mixgemm import ops, packing

    def gemm(x, packed, bias=None, config="auto"):
        if packed.perm is not None:
            x = x.index_select(-1, packed.perm)
        return cpu_gemm(x, packed, bias, config)

    ops.gemm = gemm
    packing.prepack = cpu_prepack


def relative_error(out, ref) -> float:
    out, ref = out.double(), ref.double()
    return (torch.linalg.vector_norm(out - ref) / torch.linalg.vector_norm(ref)).item()


def build(layer, device, tp=None, style=None) -> QuantLinear:
    # compressed-tensors sources materialised as the GPTQ v2 tensors (a transposed view: made contiguous, as a
    # checkpoint's tensors are)
    t = {k: (None if v is None else (v if isinstance(v, torch.Tensor) else v[:]).to(device).contiguous())
         for k, v in layer.tensors.items()}
    if layer.fmt == "awq":
        return QuantLinear.from_awq(t["qweight"], t["scales"], t["qzeros"], t["bias"], tp=tp, style=style)
    act_order = t["g_idx"] is not None and KINDS_ACT_ORDER.get(layer.kind, False)
    return QuantLinear.from_gptq(t["qweight"], t["scales"], t["qzeros"], t["g_idx"] if act_order else None, t["bias"],
                                 bits=layer.bits, checkpoint_format=layer.fmt, tp=tp, style=style)


KINDS_ACT_ORDER = {kind: spec[3] for kind, spec in KINDS.items()}


def check_layers(rank: int, world: int, device) -> int:
    checked = 0
    for shape_name, (K, N, G) in SHAPES.items():
        for kind in KINDS:
            if KINDS[kind][1] == 8 and shape_name == "regrouped":
                continue  # int8 packs 4 rows per word: the same cut, covered by the other shapes
            layer = make_layer(kind, K, N, G, seed=checked)
            layer.kind = kind
            # The single-device layer where a whole layer of this shape runs (N = 144 does not: only its
            # shards, padded, do); the mathematical weight x @ W always.
            whole = build(layer, device) if shape_name in ("plain", "groups_split", "regrouped") else None
            dense = layer.dense().to(device)
            for style in STYLES_OF[shape_name]:
                part = build(layer, device, tp=(rank, world), style=style)
                for M in (1, 16, 128):
                    gen = torch.Generator().manual_seed(M)
                    x = torch.randn(M, K, generator=gen).to(torch.float16).to(device)
                    with torch.no_grad():
                        references = {"x @ W": x.double() @ dense}
                        if whole is not None:
                            references["the whole layer"] = whole(x)
                        if style == "column":
                            y = part(x)
                            columns = slice(rank * N // world, (rank + 1) * N // world)
                            references = {k: v[:, columns] + layer.bias[columns].to(device) * (k == "x @ W")
                                          for k, v in references.items()}
                        else:
                            y = part(x[:, rank * K // world: (rank + 1) * K // world].contiguous())
                            references["x @ W"] = references["x @ W"] + layer.bias.to(device)
                    for what, reference in references.items():
                        error = relative_error(y, reference)
                        if not error < TOLERANCE:
                            raise AssertionError(f"rank {rank}: {kind} {shape_name} {style}-parallel M={M}: relative "
                                                 f"error {error:.2e} against {what} (tolerance {TOLERANCE})")
                checked += 1
    return checked


def check_model(rank: int, world: int, device, folder: str) -> None:
    from checkpoint_helpers import random_llama, tiny_llama_config, write_llama_checkpoint

    from mixgemm.checkpoint import load_model

    for method in ("awq", "gptq", "compressed-tensors"):
        path = os.path.join(folder, method)
        if rank == 0:
            write_llama_checkpoint(path, random_llama(tiny_llama_config(), seed=7), method, group_size=64)
        dist.barrier()
        whole, _ = load_model(path, device=device)
        part, report = load_model(path, device=device, tp=(rank, world))
        assert len(report.tensor_parallel) == 14, report.tensor_parallel
        assert part.config.num_attention_heads == whole.config.num_attention_heads // world
        ids = torch.randint(0, whole.config.vocab_size, (2, 24), generator=torch.Generator().manual_seed(0))
        with torch.no_grad():
            expected = whole(input_ids=ids.to(device)).logits
            logits = part(input_ids=ids.to(device)).logits
        error = relative_error(logits, expected)
        if not error < TOLERANCE:
            raise AssertionError(f"rank {rank}: {method} model at TP {world}: logits' relative error {error:.2e} "
                                 f"against TP 1 (tolerance {TOLERANCE})")
        del whole, part


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cpu", action="store_true", help="gloo and the reference kernels on the CPU")
    parser.add_argument("--folder", help="shared folder for the model checkpoints (default: a temporary one)")
    args = parser.parse_args(argv)
    if args.cpu:
        use_reference_kernels()
        dist.init_process_group("gloo")
        device = torch.device("cpu")
    else:
        dist.init_process_group("nccl")
        device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", dist.get_rank())))
        torch.cuda.set_device(device)
    rank, world = dist.get_rank(), dist.get_world_size()
    try:
        checked = check_layers(rank, world, device)
        folder = args.folder or os.path.join(tempfile.gettempdir(), f"mixgemm-tp-{os.environ.get('MASTER_PORT', 0)}")
        check_model(rank, world, device, folder)
        dist.barrier()
        if rank == 0:
            print(f"TP CHECK PASSED: {checked} sharded layers and 3 models at TP {world} on {device.type}")
    finally:
        dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
