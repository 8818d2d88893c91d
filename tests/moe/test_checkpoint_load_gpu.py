"""GPU tests of MoE checkpoint loading: small random Mixtral, Qwen3-MoE and Qwen2-MoE models written by our
writer in each format, loaded by load_model onto the GPU (experts prepacked by prepack_experts, run by
fused_moe) and compared with the float model holding the dequantized weights; and the MoE example end to end.
Needs transformers (skipped without it)."""

from __future__ import annotations

import importlib.util
import inspect
import pathlib

import pytest
import torch

from mixgemm.checkpoint import load_model
from mixgemm.checkpoint.moe_writer import dequantized_moe_model, write_moe_checkpoint
from mixgemm.moe.layer import QuantMoE

from moe_helpers import median_token_error, random_moe_model, relative_error, tiny_moe_config

pytestmark = pytest.mark.gpu
EXAMPLE = pathlib.Path(__file__).resolve().parents[2] / "examples" / "quantized_moe.py"
TOLERANCE = {torch.float16: 1e-2, torch.bfloat16: 5e-2}


@pytest.mark.parametrize("family,method,symmetric,dtype", [
    ("mixtral", "awq", False, torch.float16), ("mixtral", "gptq", True, torch.float16),
    ("mixtral", "compressed-tensors", False, torch.float16), ("mixtral", "awq", False, torch.bfloat16),
    ("qwen3_moe", "awq", False, torch.float16), ("qwen3_moe", "gptq", True, torch.float16),
    ("qwen3_moe", "compressed-tensors", False, torch.float16), ("qwen2_moe", "awq", False, torch.float16),
])
def test_load_model_logits_match_the_dequantized_model(tmp_path, family, method, symmetric, dtype):
    pytest.importorskip("transformers")
    model = random_moe_model(tiny_moe_config(family), seed=0)
    _, logical = write_moe_checkpoint(tmp_path, model, method, 64, symmetric=symmetric, max_shard_bytes=1 << 20)
    reference = dequantized_moe_model(model, logical, 64).to(device="cuda", dtype=dtype)
    qmodel, report = load_model(tmp_path, device="cuda", dtype=dtype)
    assert all(isinstance(qmodel.get_submodule(f"model.layers.{i}.mlp"), QuantMoE) for i in (0, 1))
    assert report.missing == [] and not any(".experts" in name for name in report.replaced)
    assert all(t.device.type == "cuda" for t in list(qmodel.parameters()) + list(qmodel.buffers()))
    torch.manual_seed(1)
    ids = torch.randint(0, model.config.vocab_size, (2, 24), device="cuda")
    with torch.no_grad():
        ours, theirs = qmodel(input_ids=ids).logits, reference(input_ids=ids).logits
    assert relative_error(ours, theirs) < TOLERANCE[dtype]


@pytest.mark.parametrize("family", ["mixtral", "qwen3_moe"])
def test_sparse_routing_matches_the_dequantized_model_for_most_tokens(tmp_path, family):
    """Top-2 of 4 experts (few tokens per expert, some experts idle): the median token's logits match (a token
    whose experts nearly tie may route differently in the two models; see tiny_moe_config)."""
    pytest.importorskip("transformers")
    model = random_moe_model(tiny_moe_config(family, num_experts_per_tok=2), seed=0)
    _, logical = write_moe_checkpoint(tmp_path, model, "awq", 64)
    reference = dequantized_moe_model(model, logical, 64).cuda()
    qmodel, _ = load_model(tmp_path, device="cuda")
    ids = torch.randint(0, model.config.vocab_size, (2, 24), device="cuda")
    with torch.no_grad():
        assert median_token_error(qmodel(input_ids=ids).logits, reference(input_ids=ids).logits) < 1e-2


def test_decode_step_by_step_matches_the_prefill(tmp_path):
    """One token at a time (the decode shapes: a handful of rows per expert) computes what the prefill
    computed for the same positions."""
    pytest.importorskip("transformers")
    model = random_moe_model(tiny_moe_config("mixtral"), seed=0)
    write_moe_checkpoint(tmp_path, model, "awq", 64)
    qmodel, _ = load_model(tmp_path, device="cuda")
    # transformers 5.24 renamed past_key_values to cache (the old name warns); take whichever forward has.
    cache_arg = "cache" if "cache" in inspect.signature(qmodel.forward).parameters else "past_key_values"
    ids = torch.randint(0, model.config.vocab_size, (1, 6), device="cuda")
    with torch.no_grad():
        full = qmodel(input_ids=ids).logits
        out = qmodel(input_ids=ids[:, :3], use_cache=True)
        steps = [out.logits]
        for t in range(3, 6):
            out = qmodel(input_ids=ids[:, t:t + 1], use_cache=True, **{cache_arg: out[cache_arg]})
            steps.append(out.logits)
    assert relative_error(torch.cat(steps, dim=1), full) < 1e-2


def test_moe_example_tiny(tmp_path):
    pytest.importorskip("transformers")
    spec = importlib.util.spec_from_file_location("quantized_moe", EXAMPLE)
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    results = example.run("tiny", out=str(tmp_path), new_tokens=4, bench_steps=16)
    r = results["awq"]
    assert r["moe_blocks"] == 2 and r["replaced"] == 2 + 2 * 4
    assert r["median_token_err_vs_dequantized"] < 2e-2, r
    assert len(r["generated"]) == 4 and r["decode_tok_s"] > 0
    assert results["fp16"]["decode_tok_s"] > 0
