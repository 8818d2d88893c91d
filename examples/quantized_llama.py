"""A small LLaMA-style model end to end: quantize, write AWQ / GPTQ-v1 / compressed-tensors checkpoint
folders as those tools lay them out, load each back through mixgemm.checkpoint.load_model (the model built
from the folder's config.json with no fp16 weights, then filled from the folder), check logits, generate, and
time decoding with CUDA graphs against fp16.

Nothing is downloaded: the model is built from a LlamaConfig with random weights. Needs a CUDA GPU and
transformers (an optional extra of mixgemm). Run:

    python examples/quantized_llama.py --size tiny          # seconds: what the GPU test runs
    python examples/quantized_llama.py --size 1b            # TinyLlama-1.1B shapes, for real numbers

The logits are compared twice: against the fp16 model (quantization error included, informative only) and
against the fp16 model whose linears hold the *dequantized* weights (the error of loading and of our
kernels only: this is the check that the checkpoint was read right).
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import sys
import tempfile
import time

import torch

from mixgemm import formats
from mixgemm.checkpoint import load_model
from mixgemm.checkpoint.writer import layer_tensors, quantization_config, write_checkpoint

PRESETS = {  # hidden, intermediate, layers, heads, kv heads, vocab
    "tiny": (256, 512, 2, 4, 2, 1024),
    "small": (1024, 2816, 8, 16, 4, 32000),
    "1b": (2048, 5632, 22, 32, 4, 32000),  # TinyLlama-1.1B's shapes
}
# How each tool typically quantizes: AWQ asymmetric, GPTQ symmetric (v1 zeros), llm-compressor W4A16 asymmetric.
METHODS = {"awq": False, "gptq": True, "compressed-tensors": False}  # method -> symmetric


def build_model(size: str, device: str, seed: int = 0):
    from transformers import LlamaConfig, LlamaForCausalLM

    hidden, inter, layers, heads, kv_heads, vocab = PRESETS[size]
    config = LlamaConfig(hidden_size=hidden, intermediate_size=inter, num_hidden_layers=layers,
                         num_attention_heads=heads, num_key_value_heads=kv_heads, vocab_size=vocab,
                         max_position_embeddings=2048, tie_word_embeddings=False, attn_implementation="sdpa")
    torch.manual_seed(seed)
    model = LlamaForCausalLM(config).to(device=device, dtype=torch.float16).eval()
    return model


def quantize_model(model, method: str, group_size: int):
    """Checkpoint tensors (quantized linears of the decoder layers, everything else dense; lm_head stays
    fp16 as the tools leave it) and {name: (q, scales, zeros)} of each quantized layer."""
    symmetric = METHODS[method]
    tensors, logical = {}, {}
    for name, module in model.named_modules():
        if isinstance(module, torch.nn.Linear) and name != "lm_head":
            w = module.weight.detach().t().float().cpu()  # [K, N]
            if symmetric:
                q, s = formats.quantize_sym(w, group_size)
                z = None
            else:
                q, s, z = formats.quantize_asym(w, group_size)
            logical[name] = (q, s, z)
            tensors.update({f"{name}.{k}": v for k, v in layer_tensors(method, q, s, z).items()})
    for key, value in model.state_dict().items():
        if key.rpartition(".")[0] not in logical:
            tensors[key] = value
    return tensors, logical


def dequantized_model(model, logical, group_size):
    """The fp16 model with each quantized linear holding its dequantized weight: what a correct load computes."""
    ref = copy.deepcopy(model)
    with torch.no_grad():
        for name, (q, s, z) in logical.items():
            w = formats.dequantize(q, s, z, group_size)  # float64 [K, N]
            ref.get_submodule(name).weight.copy_(w.t().to(torch.float16))
    return ref


def rel_err(a, b) -> float:
    a, b = a.double(), b.double()
    return (torch.linalg.vector_norm(a - b) / torch.linalg.vector_norm(b)).item()


@torch.no_grad()
def decode_tokens_per_second(model, batch: int, prompt_len: int, steps: int, device: str):
    """Greedy decoding of `steps` tokens, one CUDA-graph replay per token (the single-token forward with a
    static KV cache, argmax fed back inside the graph). Falls back to eager steps if capture fails."""
    from transformers import StaticCache

    cache = StaticCache(config=model.config, max_cache_len=prompt_len + steps + 4)
    prompt = torch.randint(0, model.config.vocab_size, (batch, prompt_len), device=device)
    logits = model(input_ids=prompt, past_key_values=cache, use_cache=True).logits
    token = logits[:, -1:].argmax(-1).clone()

    def step():
        out = model(input_ids=token, past_key_values=cache, use_cache=True).logits
        token.copy_(out[:, -1:].argmax(-1))

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm-up (autotune, lazy state) off the capture stream, as CUDA graphs want
        for _ in range(2):
            step()
    torch.cuda.current_stream().wait_stream(side)
    mode = "cuda-graph"
    try:
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            step()
        run = graph.replay
    except Exception as error:  # report honestly rather than crash: eager numbers are still numbers
        mode = f"eager (graph capture failed: {type(error).__name__}: {str(error)[:120]})"
        torch.cuda.synchronize()
        run = step
    timed = steps - 3  # the prefill, two warm-ups and the capture used 3 cache slots beyond the prompt
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(timed):
        run()
    torch.cuda.synchronize()
    return batch * timed / (time.perf_counter() - start), mode


def run(size="tiny", methods=tuple(METHODS), group_size=128, out=None, new_tokens=8, bench_steps=64, batch=1,
        device="cuda", max_shard_bytes=None) -> dict:
    """Runs everything and returns the numbers (also printed)."""
    model = build_model(size, device)
    vocab = model.config.vocab_size
    torch.manual_seed(1)
    ids = torch.randint(0, vocab, (2, 32), device=device)
    with torch.no_grad():
        fp16_logits = model(input_ids=ids).logits
    results = {"size": size, "fp16": {}}
    out = out or tempfile.mkdtemp(prefix="mixgemm-llama-")
    gen_kwargs = dict(max_new_tokens=new_tokens, do_sample=False, pad_token_id=model.config.eos_token_id)
    for method in methods:
        tensors, logical = quantize_model(model, method, group_size)
        folder = os.path.join(out, method)
        total = sum(t.numel() * t.element_size() for t in tensors.values())
        files = write_checkpoint(folder, model.config.to_dict(),
                                 quantization_config(method, 4, group_size, METHODS[method]), tensors,
                                 max_shard_bytes or max(total // 3, 1))  # sharded, with an index file
        reference = dequantized_model(model, logical, group_size)
        # Built from the folder's config.json with no weights at all (parameters on the meta device): every
        # tensor of qmodel comes from the folder, and its fp16 weights are never allocated.
        qmodel, report = load_model(folder, device=device)
        with torch.no_grad():
            q_logits = qmodel(input_ids=ids).logits
            ref_logits = reference(input_ids=ids).logits
        prompt = ids[:1, :8]
        q_tokens = qmodel.generate(prompt, **gen_kwargs)[0, 8:].tolist()
        ref_tokens = reference.generate(prompt, **gen_kwargs)[0, 8:].tolist()
        results[method] = {
            "files": files, "replaced": len(report.replaced),
            "rel_err_vs_dequantized": rel_err(q_logits, ref_logits),
            "rel_err_vs_fp16": rel_err(q_logits, fp16_logits),
            "generated": q_tokens, "generated_matches_dequantized": q_tokens == ref_tokens,
        }
        if bench_steps:
            results[method]["decode_tok_s"], results[method]["decode_mode"] = decode_tokens_per_second(
                qmodel, batch, 16, bench_steps, device)
        del qmodel, reference
        torch.cuda.empty_cache()
    if bench_steps:
        results["fp16"]["decode_tok_s"], results["fp16"]["decode_mode"] = decode_tokens_per_second(
            model, batch, 16, bench_steps, device)
    print_table(results, methods)
    return results


def print_table(results, methods):
    device = torch.cuda.get_device_name() if torch.cuda.is_available() else "CPU (reference kernels)"
    print(f"\nLLaMA-style model '{results['size']}', {device}")
    print(f"{'checkpoint':<20}{'layers':>8}{'err vs deq':>12}{'err vs fp16':>13}{'gen==deq':>10}{'decode tok/s':>14}")
    for method in methods:
        r = results[method]
        print(f"{method:<20}{r['replaced']:>8}{r['rel_err_vs_dequantized']:>12.2e}{r['rel_err_vs_fp16']:>13.2e}"
              f"{str(r['generated_matches_dequantized']):>10}{r.get('decode_tok_s', float('nan')):>14.1f}")
    if "decode_tok_s" in results["fp16"]:
        print(f"{'fp16':<20}{'':>8}{'':>12}{'':>13}{'':>10}{results['fp16']['decode_tok_s']:>14.1f}")
        modes = {results[m].get("decode_mode") for m in methods} | {results["fp16"]["decode_mode"]}
        print(f"decode timing: {', '.join(sorted(m for m in modes if m))}")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", choices=sorted(PRESETS), default="tiny")
    parser.add_argument("--methods", default=",".join(METHODS), help="comma-separated: " + ", ".join(METHODS))
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
    results = run(args.size, methods, args.group_size, args.out, args.new_tokens, args.bench_steps, args.batch)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
