"""The dequant path (expand the prepacked weight with our kernel, then one cuBLAS GEMM) and
``mixgemm.dequantize_weight``, on both weight layouts, int4 and int8, fp16 and bf16.

The expansion is checked two ways:
* against the mathematical weight (q - z) * s in float64, element by element: the kernel computes
  q * s + o with the offset o = -z * s folded (and rounded) by prepack, then rounds once, so each value is
  within 0.5 ulp of itself plus 0.5 ulp of z * s of the truth; both are at most one ulp of 16 |s| (int4;
  256 |s| for int8), i.e. 16 |s| * 2^-10 for fp16 and 2^-7 for bf16. A value in the wrong place is off by
  about |s| and fails;
* bit for bit against what the GEMM kernels of the layout multiply: gemm(I, W) on each GEMM path that reads
  the layout (the sm80 path; the sm90 path on Hopper) returns each weight value exactly (one nonzero product per
  output, accumulated in fp32).
GEMM results against float64 references use test_sm80_gpu.py's tolerances (fp16 3e-3, bf16 2e-2), on
outputs poisoned with NaN first.
"""

from __future__ import annotations

import dataclasses

import pytest
import torch

import mixgemm
from mixgemm import DequantConfig, dispatch, formats, ops, shape_rules, tuning_cache
from mixgemm.paths import PATHS, GemmProblem
from gpu_helpers import DEVICE, gptq_act_order_checkpoint, poison_allocator, random_activations, relative_error

pytestmark = pytest.mark.gpu

DTYPES = [torch.float16, torch.bfloat16]
TOL = {torch.float16: 3e-3, torch.bfloat16: 2e-2}
ULP_BITS = {torch.float16: 10, torch.bfloat16: 7}  # mantissa bits: ulp(x) <= |x| * 2^-bits
DEQUANT = DequantConfig()


def _layouts(N, K, group_size):
    """The layouts prepack takes a weight of this shape in (some kernel path reads it there: the sm90 layout is
    read by the sm80, decode and dequant paths on any GPU, the sm90 path on Hopper)."""
    layouts = []
    for layout in ("sm80", "sm90"):
        try:
            shape_rules.check_runnable("test", layout, N, K, group_size)
        except ValueError:
            continue
        layouts.append(layout)
    assert "sm80" in layouts
    return layouts


def _checkpoint(K, N, G, dtype, bits, symmetric=False, seed=0):
    """(prepack kwargs, float64 weight, scales) of a fresh random checkpoint."""
    gen = torch.Generator().manual_seed(seed)
    if bits == 4:
        ckpt = formats.random_awq_weight(K, N, G, dtype=dtype, generator=gen)
        q, z = formats.unpack_awq(ckpt["qweight"]), formats.unpack_awq(ckpt["qzeros"])
        kwargs = dict(qweight=ckpt["qweight"], scales=ckpt["scales"], qzeros=ckpt["qzeros"])
        if symmetric:
            kwargs["qzeros"], z = None, None
        w = formats.dequantize(q, ckpt["scales"], z, group_size=G, dtype=torch.float64)
    else:
        ckpt = formats.random_gptq_int8_weight(K, N, G, dtype=dtype, generator=gen, symmetric=symmetric)
        q = formats.unpack_gptq_qweight_int8(ckpt["qweight"])
        z = formats.unpack_gptq_zeros_int8(ckpt["qzeros"]) if ckpt["qzeros"] is not None else None
        kwargs = dict(qweight=ckpt["qweight"], scales=ckpt["scales"], qzeros=ckpt["qzeros"], format="gptq", bits=8)
        w = formats.dequantize(q, ckpt["scales"], z, group_size=G, bits=8)
    kwargs = {k: (v.to(DEVICE) if isinstance(v, torch.Tensor) else v) for k, v in kwargs.items()}
    return kwargs, w.to(DEVICE), ckpt["scales"].to(DEVICE)


def _prepack(kwargs, G, layout):
    return mixgemm.prepack(group_size=G, layout=layout, **kwargs)


def _gemm_configs(packed, M):
    """The first compiled config of each GEMM path that reads the weight's layout and runs it here (the sm80
    path; the sm90 path on a Hopper GPU) and fits an M-row problem on it."""
    problem = GemmProblem(M, packed.n, packed.k, packed.group_size)
    configs = []
    for name in ("sm80", "sm90"):
        if name == "sm90" and torch.cuda.get_device_capability() != (9, 0):
            continue
        path = PATHS[name]
        fitting = [c for c in path.compiled(packed.key) if path.fits(c, problem, packed.key) is None]
        configs += fitting[:1]
    return configs


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("bits", [4, 8])
@pytest.mark.parametrize("G", [32, 64, 128, 256])
def test_dequantize_weight_is_the_weight(dtype, bits, G):
    K, N = 256, 192
    kwargs, w64, scales = _checkpoint(K, N, G, dtype, bits, seed=G + bits)
    for layout in _layouts(N, K, G):
        packed = _prepack(kwargs, G, layout)
        poison_allocator(K * N * 2)
        dense = mixgemm.dequantize_weight(packed)
        torch.cuda.synchronize()
        assert dense.shape == (K, N) and dense.dtype == dtype and dense.t().is_contiguous(), layout
        assert torch.isfinite(dense).all(), f"{layout}: unwritten (poisoned) elements"
        levels = 16 if bits == 4 else 256
        bound = levels * scales.double().abs().repeat_interleave(G, dim=0) * 2.0 ** -ULP_BITS[dtype]
        err = (dense.double() - w64).abs()
        assert (err <= bound).all(), f"{layout}: max error {err.max().item()} (in units of the bound: " \
                                     f"{(err / bound).max().item():.2f})"


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("bits", [4, 8])
@pytest.mark.parametrize("symmetric", [False, True])
def test_expansion_equals_what_the_gemm_kernels_multiply(dtype, bits, symmetric):
    K, N, G = 256, 256, 128
    kwargs, _, _ = _checkpoint(K, N, G, dtype, bits, symmetric=symmetric, seed=7)
    eye = torch.eye(K, dtype=dtype, device=DEVICE)
    layouts = _layouts(N, K, G)
    assert layouts == ["sm80", "sm90"]
    for layout in layouts:
        packed = _prepack(kwargs, G, layout)
        configs = _gemm_configs(packed, K)
        assert configs, f"{layout}: no GEMM config compiled for {packed.key.name}"
        dense = mixgemm.dequantize_weight(packed)
        for config in configs:
            assert torch.equal(dense, mixgemm.gemm(eye, packed, config=config)), (layout, config.name)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("bits", [4, 8])
@pytest.mark.parametrize("M", [1, 17, 300])
def test_dequant_path_gemm(dtype, bits, M):
    K, N, G = 512, 320, 64
    kwargs, w64, _ = _checkpoint(K, N, G, dtype, bits, seed=M)
    bias = torch.randn(N, device=DEVICE).to(dtype)
    for layout in _layouts(N, K, G):
        packed = _prepack(kwargs, G, layout)
        x = random_activations(M, K, dtype)
        ref = x.double() @ w64
        for b in (None, bias):
            poison_allocator(M * N * 2)
            out = mixgemm.gemm(x, packed, bias=b, config=DEQUANT)
            torch.cuda.synchronize()
            assert out.shape == (M, N) and out.dtype == dtype
            assert torch.isfinite(out).all(), f"{layout}: unwritten (poisoned) output elements"
            expected = ref if b is None else ref + b.double()
            assert relative_error(out, expected) < TOL[dtype], (layout, b is not None)


def test_dequant_path_with_act_order_and_a_batch_of_rows():
    K, N, G = 1024, 256, 128
    ckpt = gptq_act_order_checkpoint(K, N, G)
    packed = mixgemm.prepack(ckpt["qweight"], ckpt["scales"], ckpt["qzeros"], format="gptq", g_idx=ckpt["g_idx"])
    assert packed.perm is not None
    w = ckpt["w"]
    x = torch.randn(3, 5, K, device=DEVICE).half()  # leading dimensions fold into M = 15
    out = mixgemm.gemm(x, packed, config=DEQUANT)
    assert out.shape == (3, 5, N)
    assert relative_error(out.reshape(15, N), x.reshape(15, K).double() @ w) < 3e-3


def test_dequant_path_in_a_cuda_graph():
    K, N, G = 512, 256, 128
    kwargs, w64, _ = _checkpoint(K, N, G, torch.float16, 4, seed=3)
    packed = mixgemm.prepack(group_size=G, **kwargs)
    x = random_activations(64, K, torch.float16)
    mixgemm.gemm(x, packed, config=DEQUANT)  # warm up outside the capture (cuBLAS handles, plans)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = mixgemm.gemm(x, packed, config=DEQUANT)
    for _ in range(2):
        x.copy_(random_activations(64, K, torch.float16))
        graph.replay()
        torch.cuda.synchronize()
        assert relative_error(out, x.double() @ w64) < 3e-3


def test_dequant_path_through_the_custom_op_and_compile():
    K, N, G = 512, 256, 128
    kwargs, w64, _ = _checkpoint(K, N, G, torch.float16, 4, seed=5)
    packed = mixgemm.prepack(group_size=G, **kwargs)
    x = random_activations(40, K, torch.float16)
    eager = mixgemm.library.gemm(x, packed, config="dequant_cublas")  # by name, as the custom op takes it
    # The path's name runs the path's one config: the same kernel and GEMM, the same bits.
    assert torch.equal(mixgemm.library.gemm(x, packed, config="dequant"), eager)
    torch._dynamo.reset()

    @torch.compile(fullgraph=True)
    def layer(x):
        return mixgemm.library.gemm(x, packed, config="dequant_cublas")

    assert relative_error(eager, x.double() @ w64) < 3e-3
    assert torch.equal(layer(x), eager)


def test_auto_takes_the_dequant_path_where_the_heuristic_says(monkeypatch):
    monkeypatch.setattr(tuning_cache, "lookup", lambda *a, **k: None)  # the heuristic, not a tuned cache
    ops.clear_plans()
    K, N, G = 8192, 8192, 128
    kwargs, w64, _ = _checkpoint(K, N, G, torch.float16, 4, seed=9)
    packed = mixgemm.prepack(group_size=G, **kwargs)

    sm_count = torch.cuda.get_device_properties(DEVICE).multi_processor_count

    def dequant_first(M):
        return dispatch.path_order(GemmProblem(M, N, K, G), packed.layout, sm_count)[0] == "dequant"

    for M in (1, 256, 1024, 4096, 8192):
        config = ops.resolve_config(M, packed, "auto")
        assert (config.path == "dequant") == dequant_first(M), (M, config.name)
    assert dequant_first(8192)  # the rule takes it somewhere here
    assert not dequant_first(1)
    x = random_activations(4096, K, torch.float16)
    assert relative_error(mixgemm.gemm(x, packed), x.double() @ w64) < 3e-3
    ops.clear_plans()


def test_dequantize_weight_errors():
    with pytest.raises(ValueError, match="dequantize_weight: packed must be a PackedWeight"):
        mixgemm.dequantize_weight(torch.zeros(4))
    # Group size 8: the expansion reads one scale row per 16-deep slab, and no other path takes it either, so
    # prepack refuses the weight, naming every path's rule (the dequant path's among them).
    kwargs, _, _ = _checkpoint(64, 64, 8, torch.float16, 4)
    with pytest.raises(ValueError, match=r"^prepack: no kernel path runs a weight of K = 64, N = 64, group_size = 8 "
                                         r"in the 'sm80' layout: .*dequant path: group_size must be a multiple of 16 "
                                         r"that divides K \(one scale row per 16-deep slab\), got 8"):
        mixgemm.prepack(group_size=8, layout="sm80", **kwargs)
    # A PackedWeight made by hand with group size 8 (the same weight as a group-16 one, each scale row twice):
    # dequantize_weight and gemm's dequant path name the rule before any launch.
    kwargs, _, _ = _checkpoint(64, 64, 16, torch.float16, 4)
    packed16 = mixgemm.prepack(group_size=16, layout="sm80", **kwargs)
    packed = dataclasses.replace(packed16, scales=packed16.scales.repeat_interleave(2, 0).contiguous(),
                                 offsets=packed16.offsets.repeat_interleave(2, 0).contiguous(), group_size=8)
    with pytest.raises(ValueError, match=r"^dequantize_weight: group_size must be a multiple of 16 that divides K "
                                         r"\(one scale row per 16-deep slab\), got 8"):
        mixgemm.dequantize_weight(packed)
    for config in (DEQUANT, "dequant"):
        with pytest.raises(ValueError, match=r"group_size must be a multiple of 16 that divides K \(one scale row "
                                             r"per 16-deep slab\), got 8"):
            mixgemm.gemm(random_activations(4096, 64, torch.float16), packed, config=config)
