"""The decode path (batched GEMV, M <= 16) against float64 references, on both weight layouts it reads:
the sm80 layout and the sm90 layout (the latter is packed in PyTorch and run with mma.sync, so it is tested
on any GPU, Hopper or not).

References and tolerances as in test_sm80_gpu.py: the kernel model (W = code * s + offset rounded once to the
activation dtype, then float64; fp16 1e-3, bf16 8e-3) and the mathematical weight (q - z) * s (fp16 3e-3,
bf16 2e-2). Outputs are poisoned with NaN through the caching allocator before each call.
"""

from __future__ import annotations

import pytest
import torch

import mixgemm
from mixgemm import _C, DecodeConfig, formats, ops, paths, shape_rules, workspace
from mixgemm.kernel_key import KernelKey
from gpu_helpers import (DEVICE, kernel_model_weight, poison_allocator, random_activations, random_checkpoint,
                         reference_weight, relative_error)

pytestmark = pytest.mark.gpu

MODEL_TOL = {torch.float16: 1e-3, torch.bfloat16: 8e-3}
MATH_TOL = {torch.float16: 3e-3, torch.bfloat16: 2e-2}
# (K, N, G): G = 32 and 96 give two scale rows per 64-deep batch; G = K is per-channel; N = 320 is 5 strips.
SHAPES = [(256, 128, 64), (512, 320, 128), (1024, 256, 32), (768, 192, 768), (1536, 128, 96)]
LAYOUTS = ["sm80", "sm90"]


def _shapes(layout):
    """The shapes the decode path runs on ``layout`` (mixgemm.shape_rules: N in 64-column strips, K in 64-deep
    batches, groups of a multiple of 32 rows): every shape above, on either layout."""
    return [s for s in SHAPES if shape_rules.violation("decode", layout, s[1], s[0], s[2]) is None]


GRID = [pytest.param(layout, *shape, id=f"{layout}-{'x'.join(map(str, shape))}")
        for layout in LAYOUTS for shape in _shapes(layout)]


def _decode_configs(dtype, bits=4, layout="sm80"):
    """The decode configs compiled for weights of ``layout`` (zero points: the scale+offset kernels)."""
    return mixgemm.compiled_configs(dtype, bits, path="decode", layout=layout)


def _check(out, x, packed, math_weight, bias=None, model_weight=None):
    torch.cuda.synchronize()
    assert torch.isfinite(out).all(), "unwritten (poisoned) or non-finite output elements"
    x64 = x.to(torch.float64)
    extra = bias.to(torch.float64) if bias is not None else 0.0
    model_weight = kernel_model_weight(packed) if model_weight is None else model_weight
    assert relative_error(out, x64 @ model_weight + extra) < MODEL_TOL[packed.act_dtype]
    assert relative_error(out, x64 @ math_weight + extra) < MATH_TOL[packed.act_dtype]


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("layout,K,N,G", GRID)
def test_decode_grid_int4(layout, K, N, G, dtype):
    ckpt = random_checkpoint(K, N, G, dtype)
    packed = mixgemm.prepack(ckpt["qweight"], ckpt["scales"], ckpt["qzeros"], G, layout=layout)
    math_weight, model_weight = reference_weight(ckpt, G), kernel_model_weight(packed)
    assert _decode_configs(dtype, layout=layout)
    for base in _decode_configs(dtype, layout=layout):
        for M in range(1, base.rows + 1):
            for split in (1, 2, 3, K // 64):
                config = base.with_split_k(split, "none" if split == 1 else "serial")
                x = random_activations(M, K, dtype)
                bias = torch.randn(N, device=DEVICE).to(dtype) if M % 2 else None
                poison_allocator(M * N * 2)
                out = mixgemm.gemm(x, packed, bias=bias, config=config)
                _check(out, x, packed, math_weight, bias, model_weight)


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("symmetric", [False, True], ids=["zeros", "symmetric"])
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_decode_int8(dtype, symmetric, layout):
    K, N, G = 1024, 192, 128
    ckpt = formats.random_gptq_int8_weight(K, N, G, dtype=dtype, symmetric=symmetric)
    ckpt = {k: (v.to(DEVICE) if v is not None else None) for k, v in ckpt.items()}
    packed = mixgemm.prepack(ckpt["qweight"], ckpt["scales"], ckpt["qzeros"], format="gptq", bits=8, layout=layout)
    q = formats.unpack_gptq_qweight_int8(ckpt["qweight"])
    z = formats.unpack_gptq_zeros_int8(ckpt["qzeros"]) if ckpt["qzeros"] is not None else None
    math_weight = formats.dequantize(q, ckpt["scales"], z, group_size=G, bits=8)
    assert _decode_configs(dtype, bits=8, layout=layout)
    for base in _decode_configs(dtype, bits=8, layout=layout):
        for M in (1, 3, base.rows):
            for split in (1, 4):
                x = random_activations(M, K, dtype)
                poison_allocator(M * N * 2)
                out = mixgemm.gemm(x, packed, config=base.with_split_k(split, "none" if split == 1 else "serial"))
                _check(out, x, packed, math_weight)


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_decode_symmetric_int4(dtype, layout):
    K, N, G = 512, 256, 128
    ckpt = random_checkpoint(K, N, G, dtype)
    packed = mixgemm.prepack(ckpt["qweight"], ckpt["scales"], None, G, layout=layout)
    q = formats.unpack_awq(ckpt["qweight"])
    math_weight = formats.dequantize(q, ckpt["scales"], torch.full_like(q[: K // G], 8), group_size=G,
                                     dtype=torch.float64)
    for M in (1, 8):
        x = random_activations(M, K, dtype)
        _check(mixgemm.gemm(x, packed, config=_decode_configs(dtype, layout=layout)[0]), x, packed, math_weight)


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_decode_converter_exhaustive(dtype, layout):
    """x = e_k rows pick single K rows of the weight: with scale 1 and zero 0 the outputs are the codes
    themselves, every value 0..15 in every nibble position and column, exactly (on the sm90 layout the
    codes are stored signed and the offset 8 * s adds the 8 back)."""
    K, N, G = 256, 128, 64
    q = ((torch.arange(K)[:, None] + torch.arange(N)[None, :]) % 16).to(torch.uint8)
    qweight = formats.pack_awq(q).to(DEVICE)
    qzeros = formats.pack_awq(torch.zeros(K // G, N, dtype=torch.uint8)).to(DEVICE)
    packed = mixgemm.prepack(qweight, torch.ones(K // G, N, dtype=dtype, device=DEVICE), qzeros, G, layout=layout)
    eye = torch.eye(K, dtype=dtype, device=DEVICE)
    config = _decode_configs(dtype, layout=layout)[0]
    for start in range(0, K, config.rows):
        out = mixgemm.gemm(eye[start:start + config.rows], packed, config=config)
        assert torch.equal(out, q[start:start + config.rows].to(dtype).to(DEVICE)), start


def test_auto_picks_the_decode_path_up_to_8_rows_on_the_sm80_layout(tmp_path, monkeypatch):
    monkeypatch.setenv("MIXGEMM_CACHE", str(tmp_path / "tuned.json"))  # the heuristic, not a tuned choice
    K, N, G = 4096, 4096, 128
    ckpt = random_checkpoint(K, N, G, torch.float16)
    packed = mixgemm.prepack(ckpt["qweight"], ckpt["scales"], ckpt["qzeros"], G, layout="sm80")
    if not _decode_configs(torch.float16):
        pytest.skip("no decode configs compiled")
    for M in (1, 8):
        assert ops.resolve_config(M, packed, "auto").path == "decode"
    assert ops.resolve_config(9, packed, "auto").path == "sm80"
    assert ops.resolve_config(64, packed, "auto").path == "sm80"


@pytest.mark.parametrize("layout", LAYOUTS)
def test_decode_serial_split_is_deterministic_and_leaves_semaphores_zero(layout):
    K, N, G, M = 4096, 512, 128, 5
    ckpt = random_checkpoint(K, N, G, torch.float16)
    packed = mixgemm.prepack(ckpt["qweight"], ckpt["scales"], ckpt["qzeros"], G, layout=layout)
    x = random_activations(M, K, torch.float16)
    config = _decode_configs(torch.float16, layout=layout)[0].with_split_k(16, "serial")
    runs = [mixgemm.gemm(x, packed, config=config) for _ in range(5)]
    for r in runs[1:]:
        assert torch.equal(r.view(torch.int16), runs[0].view(torch.int16))
    torch.cuda.synchronize()
    assert all(int(buffer.abs().sum()) == 0 for buffer in workspace._semaphores.values())


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("split", [1, 4])
def test_decode_cuda_graph_capture_and_replay(split, layout):
    K, N, G, M = 1024, 256, 128, 3
    ckpt = random_checkpoint(K, N, G, torch.float16)
    packed = mixgemm.prepack(ckpt["qweight"], ckpt["scales"], ckpt["qzeros"], G, layout=layout)
    config = _decode_configs(torch.float16, layout=layout)[0].with_split_k(split, "none" if split == 1 else "serial")
    static_x = random_activations(M, K, torch.float16)
    mixgemm.gemm(static_x, packed, config=config)  # warm up outside capture
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        static_out = mixgemm.gemm(static_x, packed, config=config)
    for _ in range(3):
        static_x.copy_(random_activations(M, K, torch.float16))
        graph.replay()
        torch.cuda.synchronize()
        assert torch.equal(static_out, mixgemm.gemm(static_x, packed, config=config))


@pytest.mark.parametrize("layout", LAYOUTS)
def test_graph_replays_beside_eager_calls_on_another_stream(layout):
    """Eager calls reuse one split-K workspace per stream (issue 9), a captured call owns its own: replays on
    a side stream racing eager calls on the main stream must not share partials or semaphores."""
    K, N, G, M = 4096, 1024, 128, 4
    ckpt = random_checkpoint(K, N, G, torch.float16)
    packed = mixgemm.prepack(ckpt["qweight"], ckpt["scales"], ckpt["qzeros"], G, layout=layout)
    config = _decode_configs(torch.float16, layout=layout)[0].with_split_k(8, "serial")
    static_x, x = random_activations(M, K, torch.float16), random_activations(M, K, torch.float16)
    expected_graph = mixgemm.gemm(static_x, packed, config=config)
    expected_eager = mixgemm.gemm(x, packed, config=config)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        static_out = mixgemm.gemm(static_x, packed, config=config)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(20):
            graph.replay()
    outs = [mixgemm.gemm(x, packed, config=config) for _ in range(20)]
    torch.cuda.synchronize()
    assert torch.equal(static_out, expected_graph)
    assert all(torch.equal(out, expected_eager) for out in outs)


def _chain(packs, x, config):
    """Each call's output is the next call's x, on one stream with no synchronisation between them."""
    outs = []
    for packed in packs:
        poison_allocator(x.shape[0] * packed.n * 2)
        x = mixgemm.gemm(x, packed, config=config)
        outs.append(x)
    return outs


@pytest.mark.parametrize("layout", LAYOUTS)
def test_dependent_launches_read_the_previous_calls_output(layout):
    """On sm_90 the decode kernel starts before the previous kernel ends (programmatic dependent launch)
    and may only prefetch weights before griddepcontrol.wait. A chain y_i = y_(i-1) @ W_i on one stream,
    each output freshly allocated over NaN and read at once by the next call, with split-K calls reusing
    one workspace: reading x, the partials or the semaphores early would show as NaN or wrong values."""
    K = N = 2048
    G, M = 128, 4
    ckpts = [random_checkpoint(K, N, G, torch.float16) for _ in range(4)]
    packs = [mixgemm.prepack(c["qweight"], c["scales"], c["qzeros"], G, layout=layout) for c in ckpts]
    # Values grow about 3x per call (|W| ~ 0.07, K = 2048), far inside fp16's range after four; each call
    # is checked against its actual input.
    x = random_activations(M, K, torch.float16)
    for split in (1, 8):
        config = _decode_configs(torch.float16, layout=layout)[0]
        config = config.with_split_k(split, "none" if split == 1 else "serial")
        for _ in range(3):
            outs = _chain(packs, x, config)
            torch.cuda.synchronize()
            inputs = [x] + outs[:-1]
            for inp, out, packed, ckpt in zip(inputs, outs, packs, ckpts):
                assert torch.isfinite(inp).all() and inp.abs().max() < 6e4, "chain left fp16 range"
                _check(out, inp, packed, reference_weight(ckpt, G))


@pytest.mark.parametrize("layout", LAYOUTS)
def test_dependent_launch_right_after_prepack(layout):
    """The weight written by the kernel just before (prepack) is what the decode kernel prefetches into L2
    before it waits for that kernel: the result must still be the new weight's."""
    K, N, G, M = 4096, 1024, 128, 2
    x = random_activations(M, K, torch.float16)
    config = _decode_configs(torch.float16, layout=layout)[0].with_split_k(4, "serial")
    for _ in range(3):
        ckpt = random_checkpoint(K, N, G, torch.float16)
        packed = mixgemm.prepack(ckpt["qweight"], ckpt["scales"], ckpt["qzeros"], G, layout=layout)
        out = mixgemm.gemm(x, packed, config=config)  # no synchronisation after prepack
        _check(out, x, packed, reference_weight(ckpt, G))


@pytest.mark.parametrize("layout", LAYOUTS)
def test_dependent_launch_chain_in_a_cuda_graph(layout):
    """Captured, the chain's launches become programmatic graph edges: replays with fresh x match eager."""
    K = N = 1024
    G, M = 64, 3
    ckpts = [random_checkpoint(K, N, G, torch.float16) for _ in range(3)]
    packs = [mixgemm.prepack(c["qweight"], c["scales"], c["qzeros"], G, layout=layout) for c in ckpts]
    config = _decode_configs(torch.float16, layout=layout)[0].with_split_k(4, "serial")
    static_x = random_activations(M, K, torch.float16)
    _chain(packs, static_x, config)  # warm up outside capture
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        static_outs = _chain(packs, static_x, config)
    for _ in range(3):
        static_x.copy_(random_activations(M, K, torch.float16))
        graph.replay()
        eager = _chain(packs, static_x, config)
        torch.cuda.synchronize()
        for got, want in zip(static_outs, eager):
            assert torch.equal(got, want)


def test_decode_config_errors():
    K, N, G = 512, 128, 128
    ckpt = random_checkpoint(K, N, G, torch.float16)
    packed = mixgemm.prepack(ckpt["qweight"], ckpt["scales"], ckpt["qzeros"], G, layout="sm80")
    config = _decode_configs(torch.float16)[0]
    with pytest.raises(ValueError, match=rf"^gemm: config {config.name} cannot run M = {config.rows + 1}, N = {N}, "
                                         rf"K = {K}, group_size = {G}: {config.name} takes at most {config.rows} rows "
                                         rf"of x, got M = {config.rows + 1}"):
        mixgemm.gemm(random_activations(config.rows + 1, K, torch.float16), packed, config=config)
    with pytest.raises(ValueError, match=r"split_k = 9 is more than K / 64 = 8 k-batches"):
        mixgemm.gemm(random_activations(1, K, torch.float16), packed, config=config.with_split_k(9, "serial"))
    # The extension's prepare checks the same rules itself.
    key = KernelKey.of(torch.float16, 4, "sm80").as_tuple()
    with pytest.raises(ValueError, match=r"^gemm \(decode path\): split_k must be in \[1, K / 64 = 8\]"):
        _C.prepare("decode", config.kernel_name, key, 1, N, K, G, 9, "serial")
    with pytest.raises(ValueError, match=rf"^gemm \(decode path\): M \(rows of x\) must be in \[1, {config.rows}\]"):
        _C.prepare("decode", config.kernel_name, key, config.rows + 1, N, K, G, 1, "none")
    # The decode path reduces split-K in-kernel (serially) only.
    with pytest.raises(ValueError, match=r"^DecodeConfig: split_k_mode must be one of \('none', 'serial'\) on this "
                                         r"path, got 'parallel'"):
        DecodeConfig(8, 4, split_k=2).with_split_k(2, "parallel")
    with pytest.raises(ValueError, match=r"the decode path splits K serially only"):
        paths.from_name(f"{config.kernel_name}_k2p")
