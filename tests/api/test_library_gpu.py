"""The torch.library custom ops (mixgemm.library) and QuantLinear (mixgemm.nn) on the GPU.

* opcheck: schema, fake-vs-real metadata and AOT dispatch of each op, as torch.library recommends;
* torch.compile(fullgraph=True) matches eager bit for bit (the same kernel with the same config runs
  either way; only code around it is compiled), also across a recompilation with a dynamic M;
* CUDA-graph capture of a QuantLinear forward replays correctly with new inputs;
* QuantLinear from a safetensors file against the float64 weight and a dense nn.Linear; GPTQ (plain, v1,
  act-order) against AWQ and against the float64 weight;
* a two-layer model under torch.compile, plain and with inductor's CUDA graphs (mode="reduce-overhead").
"""

from __future__ import annotations

import pytest
import torch
from safetensors.torch import save_file

import mixgemm
from mixgemm import formats, library
from mixgemm.nn import QuantLinear
from gpu_helpers import DEVICE, random_activations, random_checkpoint, reference_weight, relative_error

pytestmark = pytest.mark.gpu

K, N, G = 512, 256, 128
F16, BF16 = torch.float16, torch.bfloat16
MATH_TOL = {F16: 3e-3, BF16: 2e-2}  # against the float64 weight, as in test_sm80_gpu.py


@pytest.fixture(autouse=True)
def fresh_dynamo():
    # Each test compiles its own functions; a reset keeps one test's caches and recompile limits out of
    # the next.
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def fixed_config(dtype=F16, split=(1, "none")):
    """The first sm80-path config compiled for sm80-layout weights (every layer here is packed in that layout)."""
    return mixgemm.compiled_configs(dtype, path="sm80", layout="sm80")[0].with_split_k(*split)


def awq_layer(k=K, n=N, g=G, dtype=F16, config="auto"):
    """A QuantLinear from a fresh random AWQ checkpoint, with a bias; also returns the checkpoint."""
    ckpt = random_checkpoint(k, n, g, dtype)
    ckpt["bias"] = torch.randn(n, device=DEVICE).to(dtype)
    layer = QuantLinear.from_awq(ckpt["qweight"], ckpt["scales"], ckpt["qzeros"], ckpt["bias"], config=config,
                                 layout="sm80")
    return layer, ckpt


def act_order_checkpoint(k=K, n=N, g=G, dtype=F16, seed=0):
    """A GPTQ act-order checkpoint (g_idx a random permutation of k // g) and its float64 weight."""
    gen = torch.Generator().manual_seed(seed)
    q = torch.randint(0, 16, (k, n), generator=gen)
    z = torch.randint(0, 16, (k // g, n), generator=gen)
    scales = formats.random_awq_weight(k, n, g, dtype=dtype, generator=gen)["scales"]
    g_idx = (torch.arange(k) // g)[torch.randperm(k, generator=gen)].to(torch.int32)
    w64 = formats.dequantize(q, scales, z, g_idx=g_idx)
    ckpt = {"qweight": formats.pack_gptq_qweight(q), "qzeros": formats.pack_gptq_zeros(z), "scales": scales,
            "g_idx": g_idx, "bias": torch.randn(n, generator=gen).to(dtype)}
    return {name: t.to(DEVICE) for name, t in ckpt.items()}, w64.to(DEVICE)


# ---------------------------------------------------------------------------------------------------
# The ops themselves


def test_opcheck_every_op():
    ckpt = random_checkpoint(K, N, G, F16)
    packed = mixgemm.prepack(ckpt["qweight"], ckpt["scales"], ckpt["qzeros"], G, layout="sm80")
    x = random_activations(9, K, F16)
    bias = torch.randn(N, device=DEVICE).to(F16)
    weight = (packed.packed, packed.scales, packed.offsets)
    torch.library.opcheck(torch.ops.mixgemm.gemm.default, (x, *weight, bias, G, N, K, fixed_config().name))
    torch.library.opcheck(torch.ops.mixgemm.gemm.default, (x.reshape(3, 3, K), *weight, None, G, N, K, "auto"))
    torch.library.opcheck(torch.ops.mixgemm.awq_dequantize.default, (ckpt["qweight"], ckpt["scales"], ckpt["qzeros"]))
    torch.library.opcheck(torch.ops.mixgemm.awq_gemm_baseline.default,
                          (x, ckpt["qweight"], ckpt["scales"], ckpt["qzeros"], 4))


def test_wrappers_equal_the_direct_api():
    ckpt = random_checkpoint(K, N, G, F16)
    packed = mixgemm.prepack(ckpt["qweight"], ckpt["scales"], ckpt["qzeros"], G, layout="sm80")
    x = random_activations(17, K, F16)
    bias = torch.randn(N, device=DEVICE).to(F16)
    triple = (ckpt["qweight"], ckpt["scales"], ckpt["qzeros"])
    config = fixed_config(split=(2, "parallel"))
    assert torch.equal(library.gemm(x, packed, bias, config), mixgemm.gemm(x, packed, bias, config))
    assert torch.equal(library.gemm(x, packed, bias, config.name), mixgemm.gemm(x, packed, bias, config))
    assert torch.equal(library.awq_dequantize(*triple), mixgemm.awq_dequantize(*triple))
    assert torch.equal(library.awq_gemm_baseline(x, *triple, 4), mixgemm.baseline.awq_gemm(x, *triple, 4))


def test_compile_fullgraph_matches_eager_bitwise():
    ckpt = random_checkpoint(K, N, G, F16)
    triple = (ckpt["qweight"], ckpt["scales"], ckpt["qzeros"])
    packed = mixgemm.prepack(*triple, G, layout="sm80")
    bias = torch.randn(N, device=DEVICE).to(F16)
    config = fixed_config(split=(2, "serial"))

    def f(x):
        return (library.gemm(x, packed, bias, config=config),
                library.awq_dequantize(*triple),
                library.awq_gemm_baseline(x, *triple, 4))

    compiled = torch.compile(f, fullgraph=True)
    for M in (1, 7, 33):  # the second M recompiles with M dynamic, through the fake implementations
        x = random_activations(M, K, F16)
        for got, want in zip(compiled(x), f(x)):
            assert got.shape == want.shape and got.dtype == want.dtype
            assert torch.equal(got, want), M


# ---------------------------------------------------------------------------------------------------
# QuantLinear


@pytest.mark.parametrize("split", [None, (4, "serial"), (4, "parallel")], ids=["auto", "serial4", "parallel4"])
def test_cuda_graph_capture_of_quant_linear(split):
    M = 9
    config = "auto" if split is None else fixed_config(split=split)
    plain, _ = awq_layer(config=config)
    act_ckpt, _ = act_order_checkpoint(k=N, n=K)
    act_order = QuantLinear.from_gptq(act_ckpt["qweight"], act_ckpt["scales"], act_ckpt["qzeros"], act_ckpt["g_idx"],
                                      act_ckpt["bias"], config=config, layout="sm80")
    model = torch.nn.Sequential(plain, act_order)  # K -> N -> K, the second with an x gather
    static_x = random_activations(M, K, F16)
    model(static_x)  # warm up outside capture (config choice, workspaces)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        static_out = model(static_x)
    for _ in range(3):
        static_x.copy_(random_activations(M, K, F16))
        graph.replay()
        torch.cuda.synchronize()
        assert torch.equal(static_out, model(static_x))


@pytest.mark.parametrize("dtype", [F16, BF16])
def test_from_safetensors_matches_dense(tmp_path, dtype):
    ckpt = formats.random_awq_weight(K, N, G, dtype=dtype)  # on the CPU, as a checkpoint is written
    ckpt["bias"] = torch.randn(N).to(dtype)
    prefix = "model.layers.0.mlp.up_proj"
    tensors = {f"{prefix}.{name}": t for name, t in ckpt.items()}
    tensors["model.layers.0.mlp.down_proj.qweight"] = torch.zeros(8, 8, dtype=torch.int32)  # another layer
    path = tmp_path / "model.safetensors"
    save_file(tensors, str(path))

    layer = QuantLinear.from_safetensors(path, prefix)
    assert (layer.in_features, layer.out_features, layer.group_size, layer.dtype) == (K, N, G, dtype)
    assert layer.packed.device.type == "cuda" and layer.bias.device.type == "cuda"

    w64 = reference_weight({name: t.to(DEVICE) for name, t in ckpt.items()}, G)  # (q - z) * s, float64 [K, N]
    dense = torch.nn.Linear(K, N, device=DEVICE, dtype=dtype)
    with torch.no_grad():
        dense.weight.copy_(w64.t().to(dtype))
        dense.bias.copy_(ckpt["bias"])
    x = random_activations(10, K, dtype).reshape(2, 5, K)
    out, dense_out = layer(x), dense(x)
    assert out.shape == dense_out.shape == (2, 5, N) and out.dtype == dense_out.dtype == dtype
    ref = x.to(torch.float64) @ w64 + ckpt["bias"].to(DEVICE, torch.float64)
    # The dense layer meets the bar too: it is the reference a user would compare with.
    assert relative_error(dense_out, ref) < MATH_TOL[dtype]
    assert relative_error(out, ref) < MATH_TOL[dtype]


@pytest.mark.parametrize("v1", [False, True])
def test_from_gptq_equals_from_awq(v1):
    from_awq, ckpt = awq_layer()
    gq, gz = formats.awq_to_gptq(ckpt["qweight"], ckpt["qzeros"], v1=v1)
    from_gptq = QuantLinear.from_gptq(gq, ckpt["scales"], gz, bias=ckpt["bias"], v1=v1, layout="sm80")
    # A g_idx that is just k // G (what non-act-order GPTQ checkpoints store) changes nothing.
    trivial = (torch.arange(K, device=DEVICE) // G).to(torch.int32)
    with_g_idx = QuantLinear.from_gptq(gq, ckpt["scales"], gz, g_idx=trivial, bias=ckpt["bias"], v1=v1, layout="sm80")
    assert with_g_idx.perm is None
    for M in (1, 16, 100):
        x = random_activations(M, K, F16)
        expected = from_awq(x)
        assert torch.equal(from_gptq(x), expected)
        assert torch.equal(with_g_idx(x), expected)


def test_from_gptq_act_order():
    ckpt, w64 = act_order_checkpoint()
    layer = QuantLinear.from_gptq(ckpt["qweight"], ckpt["scales"], ckpt["qzeros"], ckpt["g_idx"], ckpt["bias"],
                                  layout="sm80")
    assert layer.perm is not None
    x = random_activations(12, K, F16)
    out = layer(x)
    assert relative_error(out, x.to(torch.float64) @ w64 + ckpt["bias"].to(torch.float64)) < MATH_TOL[F16]
    # The library gathers x outside the op, ops.gemm inside: the same kernel on the same data.
    packed = mixgemm.prepack(ckpt["qweight"], ckpt["scales"], ckpt["qzeros"], format="gptq", g_idx=ckpt["g_idx"],
                             layout="sm80")
    assert torch.equal(out, mixgemm.gemm(x, packed, ckpt["bias"]))


def two_layer_model(config):
    first, _ = awq_layer(K, N, G, config=config)
    ckpt, _ = act_order_checkpoint(k=N, n=K)
    second = QuantLinear.from_gptq(ckpt["qweight"], ckpt["scales"], ckpt["qzeros"], ckpt["g_idx"], ckpt["bias"],
                                   config=config, layout="sm80")
    return torch.nn.Sequential(first, torch.nn.SiLU(), second)


def test_compile_fullgraph_two_layer_model():
    model = two_layer_model(fixed_config())
    compiled = torch.compile(model, fullgraph=True)
    for M in (3, 40):
        x = random_activations(M, K, F16).reshape(M, 1, K)
        got, want = compiled(x), model(x)
        assert got.shape == want.shape == (M, 1, K)
        # The GEMMs are the same kernels; only the SiLU and the gather between them are compiled, and
        # inductor's SiLU may round differently from eager's in the last bit.
        assert relative_error(got, want) < 1e-3


def test_compile_reduce_overhead_two_layer_model():
    model = two_layer_model("auto")
    compiled = torch.compile(model, fullgraph=True, mode="reduce-overhead")
    for step in range(4):  # warm-up, recording, then replays with new inputs
        x = random_activations(8, K, F16)
        got = compiled(x).clone()  # CUDA-graph outputs are overwritten by the next replay
        assert relative_error(got, model(x)) < 1e-3, step
