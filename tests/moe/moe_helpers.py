"""Shared pieces of the MoE layer and checkpoint tests: tiny transformers MoE configs whose projections meet the
kernels' shape rules, random models, CPU stand-ins for the GPU entry points (so the loaders and QuantMoE run
end to end without a GPU), and the error metric."""

from __future__ import annotations

import dataclasses
import importlib.util
import pathlib

import pytest
import torch

from mixgemm import formats, moe, ops, packing
from mixgemm.moe.reference import reference_fused_moe

F16 = torch.float16
FAMILIES = ("mixtral", "qwen2_moe", "qwen3_moe")


def tiny_moe_config(family: str, **overrides):
    """A small config of ``family`` whose every quantized projection has N and K multiples of 64 (hidden 256,
    expert intermediate 128, 4 experts).

    Every token takes all 4 experts (``num_experts_per_tok=4``) unless overridden: routing is discrete, and with
    top-2 of 4 a token whose second and third experts nearly tie picks another expert after any rounding
    difference (the quantized model against its float reference, the GPU against the CPU, prefill against
    decode), which changes its logits entirely and, through attention, those of the tokens after it. With
    every expert taken, the routing weights (the softmax, different per expert) are continuous in the input,
    so a model-level comparison can be strict; a swapped expert or swapped gate/up still spoils it. Sparse
    routing is tested where the reference shares the routing (QuantMoE against reference_fused_moe) and with
    :func:`median_token_error`."""
    transformers = pytest.importorskip("transformers")
    common = dict(hidden_size=256, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                  vocab_size=512, max_position_embeddings=256, tie_word_embeddings=False, num_experts_per_tok=4)
    if family == "mixtral":
        fields = dict(common, intermediate_size=128, num_local_experts=4)
        cls = transformers.MixtralConfig
    elif family == "qwen2_moe":
        fields = dict(common, intermediate_size=256, moe_intermediate_size=128, num_experts=4,
                      shared_expert_intermediate_size=192, norm_topk_prob=False)
        cls = transformers.Qwen2MoeConfig
    elif family == "qwen3_moe":
        fields = dict(common, intermediate_size=256, moe_intermediate_size=128, num_experts=4, head_dim=64,
                      norm_topk_prob=True)
        cls = transformers.Qwen3MoeConfig
    else:
        raise ValueError(family)
    return cls(**{**fields, **overrides})


def random_moe_model(config, seed: int, dtype=F16) -> torch.nn.Module:
    """The causal LM of ``config`` with random weights, in ``dtype``, eval mode, on the CPU.

    The experts (and Qwen2-MoE's shared expert) get weights of std ``1 / sqrt(fan_in)`` instead of the
    default 0.02, so that their output is as large as the residual stream it is added to: with the default
    init it is about 1% of it, and a comparison of logits would hardly see a wrong expert. The routers get
    std 0.1, so that the softmax spreads over several experts (every one of them matters)."""
    from transformers import AutoModelForCausalLM

    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(config, dtype=dtype).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("mlp.gate.weight"):
                p.normal_(0.0, 0.1)
            elif name.endswith(("experts.gate_up_proj", "experts.down_proj")):
                p.normal_(0.0, p.shape[-1] ** -0.5)
            elif ".shared_expert." in name:
                p.normal_(0.0, p.shape[-1] ** -0.5)
    return model


def relative_error(out: torch.Tensor, ref: torch.Tensor) -> float:
    out64, ref64 = out.double(), ref.double()
    return (torch.linalg.vector_norm(out64 - ref64) / torch.linalg.vector_norm(ref64)).item()


# ------------------------------------------------------------------------------------------------------------
# CPU stand-ins for the GPU entry points


@dataclasses.dataclass
class DenseExperts:
    """What the CPU stand-in of prepack_experts returns: the experts' dense float32 weights ``[E, k, n]``
    (gate columns first for gated ones) and the ExpertWeights fields QuantMoE checks."""

    dense: torch.Tensor
    num_experts: int
    n: int
    k: int
    gated: bool
    act_dtype: torch.dtype
    bits: int
    group_size: int
    scale_only: bool
    calls: dict
    layout: str = "sm80"  # the CPU has no sm90 form: "auto" packs the sm80 layout there


def dequantize_checkpoint_tensor(qweight, scales, qzeros, group_size, fmt, bits) -> torch.Tensor:
    """One expert's checkpoint tensors (prepack's arguments) -> dense float64 ``[K, N]``, by the references."""
    if fmt == "awq":
        q, z = formats.unpack_awq(qweight), None if qzeros is None else formats.unpack_awq(qzeros)
    elif bits == 4:
        q = formats.unpack_gptq_qweight(qweight)
        z = None if qzeros is None else formats.unpack_gptq_zeros(qzeros, v1=fmt == "gptq")
    else:
        q = formats.unpack_gptq_qweight_int8(qweight)
        z = None if qzeros is None else formats.unpack_gptq_zeros_int8(qzeros, v1=fmt == "gptq")
    return formats.dequantize(q.cpu(), scales.cpu(), None if z is None else z.cpu(), group_size, bits=bits)


def cpu_prepack_experts(qweights, scales, qzeros=None, group_size=None, *, format="awq", bits=4, gptq_v1=None,
                        gated=False, layout="auto"):
    """mixgemm.moe.prepack_experts' contract computed by the references: a DenseExperts."""
    E = len(qweights)
    zeros = [None] * E if qzeros is None else list(qzeros)
    K = qweights[0].shape[0] * (1 if format == "awq" else 32 // bits)
    G = group_size or K
    dense = torch.stack([dequantize_checkpoint_tensor(q, s, z, G, format, bits)
                         for q, s, z in zip(qweights, scales, zeros)]).float()
    return DenseExperts(dense, E, dense.shape[2], K, gated, scales[0].dtype, bits, G, qzeros is None,
                        {"format": format, "group_size": group_size, "gated": gated, "layout": layout},
                        "sm80" if layout == "auto" else layout)


def cpu_fused_moe(x, w13, w2, topk_weights, topk_ids, *, check_ids=True):
    """mixgemm.moe.fused_moe's contract on DenseExperts: the float32 reference, rounded to x's dtype (which checks
    every id, whatever check_ids says)."""
    assert topk_weights.dtype == torch.float32, topk_weights.dtype
    return reference_fused_moe(x, w13.dense, w2.dense, topk_weights, topk_ids).to(x.dtype)


def checkpoint_test_module(name: str):
    """A helper module of tests/checkpoint (``cpu_references``, ``checkpoint_helpers``), loaded by path: that
    folder is on sys.path only when pytest collects it, and these tests also run alone."""
    path = pathlib.Path(__file__).resolve().parents[1] / "checkpoint" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"moe_tests_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def use_cpu_kernels(monkeypatch) -> None:
    """Every GPU entry point the loaders and layers call replaced by its CPU reference for one test."""
    refs = checkpoint_test_module("cpu_references")
    monkeypatch.setattr(ops, "gemm", refs.cpu_gemm)
    monkeypatch.setattr(packing, "prepack", refs.cpu_prepack)
    monkeypatch.setattr(moe, "prepack_experts", cpu_prepack_experts)
    monkeypatch.setattr(moe, "fused_moe", cpu_fused_moe)
    monkeypatch.setattr(moe, "fused_moe_op", cpu_fused_moe)  # what QuantMoE calls


def median_token_error(ours: torch.Tensor, ref: torch.Tensor) -> float:
    """The median over tokens of ``||ours - ref|| / ||ref||`` (logits ``[..., vocab]``), after checking that
    everything is finite: robust to the few tokens whose sparse routing flips (see :func:`tiny_moe_config`),
    while a loading error (experts or gate/up swapped, wrong zeros or scales) spoils every token."""
    assert torch.isfinite(ours).all()
    ours64, ref64 = ours.double().flatten(0, -2), ref.double().flatten(0, -2)
    per_token = torch.linalg.vector_norm(ours64 - ref64, dim=-1) / torch.linalg.vector_norm(ref64, dim=-1)
    return per_token.median().item()
