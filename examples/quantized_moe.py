"""A small Mixtral-style (or Qwen3-MoE) mixture-of-experts model end to end: quantize it, write an AWQ checkpoint
folder as AutoAWQ lays one out (one quantized Linear per expert, ``block_sparse_moe.experts.<e>.w1 / w3 / w2``),
load it back through mixgemm.checkpoint.load_model (each MoE block becomes one QuantMoE running the grouped
GEMMs of mixgemm.moe.fused_moe), check logits, generate, and time decoding with CUDA graphs against fp16.

Nothing is downloaded: the model is built from a transformers config with random weights. Needs a CUDA GPU and
transformers (an optional extra of mixgemm). Run:

    python examples/quantized_moe.py --size tiny                       # seconds: what the GPU test runs
    python examples/quantized_moe.py --size small --family qwen3_moe   # larger shapes, for real numbers

The logits are compared with the fp16 model whose experts and linears hold the *dequantized* weights (the
error of loading and of our kernels only), per token: routing is discrete, so a token whose experts nearly tie
may pick another expert after any rounding (and, through attention, change the tokens after it); the median
token's error is the check, the error over all logits is printed beside it.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile

import torch

from mixgemm.checkpoint import load_model
from mixgemm.checkpoint.moe_writer import dequantized_moe_model, write_moe_checkpoint

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from quantized_llama import decode_tokens_per_second, rel_err  # noqa: E402  (the LLaMA example's timing)

PRESETS = {  # hidden, expert intermediate, layers, heads, kv heads, vocab, experts, experts per token
    "tiny": (256, 512, 2, 4, 2, 1024, 8, 2),
    "small": (1024, 1408, 8, 16, 4, 32000, 8, 2),
}
FAMILIES = ("mixtral", "qwen3_moe")
METHODS = {"awq": False, "gptq": True, "compressed-tensors": False}  # method -> symmetric, as the tools do


def build_model(size: str, family: str, device: str, seed: int = 0):
    import transformers

    hidden, inter, layers, heads, kv_heads, vocab, experts, top_k = PRESETS[size]
    common = dict(hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=heads,
                  num_key_value_heads=kv_heads, vocab_size=vocab, max_position_embeddings=2048,
                  num_experts_per_tok=top_k, tie_word_embeddings=False, attn_implementation="sdpa")
    if family == "mixtral":
        config = transformers.MixtralConfig(intermediate_size=inter, num_local_experts=experts, **common)
    else:
        config = transformers.Qwen3MoeConfig(intermediate_size=4 * inter, moe_intermediate_size=inter,
                                             num_experts=experts, norm_topk_prob=True, head_dim=hidden // heads,
                                             **common)
    torch.manual_seed(seed)
    return transformers.AutoModelForCausalLM.from_config(config).to(device=device, dtype=torch.float16).eval()


def median_token_error(ours, ref) -> float:
    ours, ref = ours.double().flatten(0, -2), ref.double().flatten(0, -2)
    per_token = torch.linalg.vector_norm(ours - ref, dim=-1) / torch.linalg.vector_norm(ref, dim=-1)
    return per_token.median().item()


def run(size="tiny", family="mixtral", methods=("awq",), group_size=128, out=None, new_tokens=8, bench_steps=64,
        batch=1, device="cuda") -> dict:
    """Runs everything and returns the numbers (also printed)."""
    model = build_model(size, family, device)
    torch.manual_seed(1)
    ids = torch.randint(0, model.config.vocab_size, (2, 32), device=device)
    with torch.no_grad():
        fp16_logits = model(input_ids=ids).logits
    results = {"size": size, "family": family, "fp16": {}}
    out = out or tempfile.mkdtemp(prefix="mixgemm-moe-")
    gen_kwargs = dict(max_new_tokens=new_tokens, do_sample=False, pad_token_id=model.config.eos_token_id)
    for method in methods:
        folder = os.path.join(out, method)
        files, logical = write_moe_checkpoint(folder, model, method, group_size, symmetric=METHODS[method],
                                              max_shard_bytes=64 << 20)
        reference = dequantized_moe_model(model, logical, group_size)
        qmodel, report = load_model(folder, device=device)  # no fp16 weights allocated: all from the folder
        with torch.no_grad():
            q_logits, ref_logits = qmodel(input_ids=ids).logits, reference(input_ids=ids).logits
        prompt = ids[:1, :8]
        q_tokens = qmodel.generate(prompt, **gen_kwargs)[0, 8:].tolist()
        ref_tokens = reference.generate(prompt, **gen_kwargs)[0, 8:].tolist()
        results[method] = {
            "files": files, "replaced": len(report.replaced),
            "moe_blocks": sum(type(m).__name__ == "QuantMoE" for m in qmodel.modules()),
            "rel_err_vs_dequantized": rel_err(q_logits, ref_logits),
            "median_token_err_vs_dequantized": median_token_error(q_logits, ref_logits),
            "rel_err_vs_fp16": rel_err(q_logits, fp16_logits),
            "generated": q_tokens, "generated_matches_dequantized": q_tokens == ref_tokens,
        }
        if bench_steps:
            results[method]["decode_tok_s"], results[method]["decode_mode"] = decode_tokens_per_second(
                qmodel, batch, 16, bench_steps, device)
        del qmodel, reference
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
    if bench_steps:
        results["fp16"]["decode_tok_s"], results["fp16"]["decode_mode"] = decode_tokens_per_second(
            model, batch, 16, bench_steps, device)
    print_table(results, methods)
    return results


def print_table(results, methods):
    device = torch.cuda.get_device_name() if torch.cuda.is_available() else "CPU (reference kernels)"
    print(f"\n{results['family']} model '{results['size']}', {device}")
    print(f"{'checkpoint':<20}{'MoE':>5}{'err vs deq':>12}{'median tok':>11}{'err vs fp16':>13}{'gen==deq':>10}"
          f"{'decode tok/s':>14}")
    for method in methods:
        r = results[method]
        print(f"{method:<20}{r['moe_blocks']:>5}{r['rel_err_vs_dequantized']:>12.2e}"
              f"{r['median_token_err_vs_dequantized']:>11.2e}{r['rel_err_vs_fp16']:>13.2e}"
              f"{str(r['generated_matches_dequantized']):>10}{r.get('decode_tok_s', float('nan')):>14.1f}")
    if "decode_tok_s" in results["fp16"]:
        print(f"{'fp16':<20}{'':>5}{'':>12}{'':>11}{'':>13}{'':>10}{results['fp16']['decode_tok_s']:>14.1f}")
        modes = {results[m].get("decode_mode") for m in methods} | {results["fp16"]["decode_mode"]}
        print(f"decode timing: {', '.join(sorted(m for m in modes if m))}")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", choices=sorted(PRESETS), default="tiny")
    parser.add_argument("--family", choices=FAMILIES, default="mixtral")
    parser.add_argument("--methods", default="awq", help="comma-separated: " + ", ".join(METHODS))
    parser.add_argument("--group-size", type=int, default=128)
    parser.add_argument("--out", help="folder for the checkpoints (default: a new temporary folder)")
    parser.add_argument("--new-tokens", type=int, default=8)
    parser.add_argument("--bench-steps", type=int, default=64, help="decode steps timed (0: no timing)")
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--json", help="also write the results to this JSON file")
    args = parser.parse_args(argv)
    methods = tuple(m for m in args.methods.split(",") if m)
    unknown = [m for m in methods if m not in METHODS]
    if unknown:
        parser.error(f"--methods: unknown {unknown}; choose from {list(METHODS)}")
    if not torch.cuda.is_available():
        parser.error("a CUDA GPU is needed (mixgemm's kernels run on NVIDIA sm_80+)")
    results = run(args.size, args.family, methods, args.group_size, args.out, args.new_tokens, args.bench_steps,
                  args.batch)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
