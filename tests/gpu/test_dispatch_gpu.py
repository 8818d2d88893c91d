"""One prepack, one gemm: the weight layout prepack picks for this GPU (layout="auto") and the paths
config="auto" then takes at every M, checked against float64 references.

On a Hopper GPU with sm90 kernels the auto layout is the sm90 one, read by the decode path for a few rows
and by the sm90 GEMM above; elsewhere it is the sm80 layout (decode path, then the sm80 GEMM). Either way
every result is checked against the mathematical weight (q - z) * s within the tolerances of
test_gemm_gpu.py (fp16 3e-3, bf16 2e-2), on outputs poisoned with NaN first.
"""

from __future__ import annotations

import pytest
import torch

import mixgemm
from mixgemm import formats, library, ops, sm90
from mixgemm.nn import QuantLinear
from gpu_helpers import (DEVICE, gptq_act_order_checkpoint, poison_allocator, random_activations, random_checkpoint,
                         reference_weight, relative_error)

pytestmark = pytest.mark.gpu

MATH_TOL = {torch.float16: 3e-3, torch.bfloat16: 2e-2}
M_VALUES = [1, 5, 8, 9, 16, 17, 33, 64, 128, 300, 1024]


def _own_layout() -> str:
    hopper = torch.cuda.get_device_capability() == (9, 0) and mixgemm.compiled_configs(torch.float16, path="sm90")
    return "sm90" if hopper else "sm80"


def _gemm_path(layout: str) -> str:
    return "sm90" if layout == "sm90" else "sm80"


def test_prepack_picks_the_gpus_own_layout():
    ckpt = random_checkpoint(512, 256, 128, torch.float16)
    packed = mixgemm.prepack(ckpt["qweight"], ckpt["scales"], ckpt["qzeros"], 128)
    assert packed.layout == _own_layout()
    assert packed.layout == mixgemm.packing.auto_layout(ckpt["qweight"], ckpt["scales"])
    # Group size 32 is beyond the sm90 kernels (scales per whole 64-deep k-tile): the sm80 layout serves it.
    ckpt32 = random_checkpoint(512, 256, 32, torch.float16)
    assert mixgemm.prepack(ckpt32["qweight"], ckpt32["scales"], ckpt32["qzeros"], 32).layout == "sm80"
    # An explicit layout is honoured whatever the GPU.
    for layout in ("sm80", "sm90"):
        assert mixgemm.prepack(ckpt["qweight"], ckpt["scales"], ckpt["qzeros"], 128, layout=layout).layout == layout


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_auto_runs_every_m_on_the_own_layout(dtype):
    K, N, G = 1024, 512, 128
    ckpt = random_checkpoint(K, N, G, dtype)
    packed = mixgemm.prepack(ckpt["qweight"], ckpt["scales"], ckpt["qzeros"], G)
    w = reference_weight(ckpt, G)
    bias = torch.randn(N, device=DEVICE).to(dtype)
    paths = set()
    for M in M_VALUES:
        config = ops.resolve_config(M, packed, "auto")
        assert packed.layout in config.layouts, (M, config.name)
        paths.add(config.path)
        if 8 < M <= 16:  # both layouts: the sm80 path's 16-row tiles
            assert config.path == "sm80", (M, config.name)
        if M > 16:  # above the sm80 tiles' rows, the layout's own GEMM
            assert config.path == _gemm_path(packed.layout), (M, config.name)
        x = random_activations(M, K, dtype)
        poison_allocator(M * N * 2)
        out = mixgemm.gemm(x, packed, bias)
        torch.cuda.synchronize()
        assert torch.isfinite(out).all(), M
        assert relative_error(out, x.double() @ w + bias.double()) < MATH_TOL[dtype], (M, config.name)
    assert paths == {"gemv", "sm80", _gemm_path(packed.layout)}


@pytest.mark.parametrize("symmetric", [False, True], ids=["zeros", "symmetric"])
def test_int8_on_the_own_layout(symmetric):
    K, N, G = 1024, 256, 128
    ckpt = formats.random_gptq_int8_weight(K, N, G, dtype=torch.float16, symmetric=symmetric)
    ckpt = {k: (v.to(DEVICE) if v is not None else None) for k, v in ckpt.items()}
    packed = mixgemm.prepack(ckpt["qweight"], ckpt["scales"], ckpt["qzeros"], format="gptq", bits=8)
    assert packed.layout == _own_layout() and packed.scale_only == symmetric
    q = formats.unpack_gptq_qweight_int8(ckpt["qweight"])
    z = formats.unpack_gptq_zeros_int8(ckpt["qzeros"]) if ckpt["qzeros"] is not None else None
    w = formats.dequantize(q, ckpt["scales"], z, group_size=G, bits=8)
    for M in (1, 16, 100):
        x = random_activations(M, K, torch.float16)
        assert relative_error(mixgemm.gemm(x, packed), x.double() @ w) < MATH_TOL[torch.float16], M


def test_symmetric_and_act_order_on_the_own_layout():
    K, N, G = 1024, 256, 128
    ckpt = gptq_act_order_checkpoint(K, N, G)
    qweight, scales = ckpt["qweight"], ckpt["scales"]
    act_order = mixgemm.prepack(qweight, scales, ckpt["qzeros"], format="gptq", g_idx=ckpt["g_idx"])
    symmetric = mixgemm.prepack(qweight, scales, None, format="gptq")
    assert act_order.perm is not None and symmetric.scale_only
    w_act = ckpt["w"]
    w_sym = formats.dequantize(ckpt["q"], scales, None, group_size=G)
    for M in (3, 40, 257):
        x = random_activations(M, K, torch.float16)
        assert relative_error(mixgemm.gemm(x, act_order), x.double() @ w_act) < 3e-3, M
        assert relative_error(mixgemm.gemm(x, symmetric), x.double() @ w_sym) < 3e-3, M


def test_quant_linear_eager_op_and_compile_agree():
    K, N, G = 1024, 512, 128
    ckpt = random_checkpoint(K, N, G, torch.float16)
    bias = torch.randn(N, device=DEVICE).half()
    layer = QuantLinear.from_awq(ckpt["qweight"], ckpt["scales"], ckpt["qzeros"], bias)
    assert layer.layout == _own_layout()
    assert (f"layout={layer.layout}" in repr(layer)) == (layer.layout != "sm80")
    w = reference_weight(ckpt, G)
    compiled = torch.compile(layer, fullgraph=True)
    for M in (1, 12, 200):
        x = random_activations(M, K, torch.float16)
        eager = layer(x)
        assert relative_error(eager, x.double() @ w + bias.double()) < 3e-3, M
        via_op = torch.ops.mixgemm.gemm(x, layer.packed, layer.scales, layer.offsets, layer.bias, G, N, K, "auto",
                                        layer.layout, layer.scale_only)
        assert torch.equal(eager, via_op), M
        assert torch.equal(compiled(x), eager), M
        assert torch.equal(library.gemm(x, layer.packed_weight(), bias), eager), M


@pytest.mark.parametrize("M", [1, 64])
def test_cuda_graph_of_auto(M):
    K, N, G = 1024, 256, 128
    ckpt = random_checkpoint(K, N, G, torch.float16)
    packed = mixgemm.prepack(ckpt["qweight"], ckpt["scales"], ckpt["qzeros"], G)
    x = random_activations(M, K, torch.float16)
    mixgemm.gemm(x, packed)  # warm-up outside the capture (plan, workspace sizes)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = mixgemm.gemm(x, packed)
    for _ in range(3):
        x.copy_(random_activations(M, K, torch.float16))
        graph.replay()
        torch.cuda.synchronize()
        assert torch.equal(out, mixgemm.gemm(x, packed))


def test_sm90_weights_need_a_hopper_gpu_for_their_gemm():
    """The sm90 layout is packed anywhere and its decode path runs on any GPU; its GEMM needs sm_90."""
    K, N, G = 512, 256, 128
    ckpt = random_checkpoint(K, N, G, torch.float16)
    packed = mixgemm.prepack(ckpt["qweight"], ckpt["scales"], ckpt["qzeros"], G, layout="sm90")
    w = reference_weight(ckpt, G)
    x = random_activations(4, K, torch.float16)
    assert relative_error(mixgemm.gemm(x, packed), x.double() @ w) < 3e-3
    x = random_activations(64, K, torch.float16)
    if _own_layout() == "sm90":
        assert relative_error(mixgemm.gemm(x, packed), x.double() @ w) < 3e-3
    elif torch.cuda.get_device_capability() != (9, 0):
        with pytest.raises((RuntimeError, ValueError), match="sm90|9.0"):
            mixgemm.gemm(x, packed)
    assert sm90.fits(packed.packed.device, torch.float16, 4, K, N, G) == (_own_layout() == "sm90")
