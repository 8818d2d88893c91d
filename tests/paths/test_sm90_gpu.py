"""The sm90 path (wgmma + TMA, CUTLASS 3.x) against float64 references, over every compiled sm90 kernel,
forced with ``mixgemm.gemm(..., config=<an Sm90Config>)`` or ``config="sm90"`` (the path's heuristic choice; never
the decode path or the sm80 path's small tiles, which also read the sm90 layout).

Skipped, with the reason, on GPUs other than sm_90 and on builds without 90a. Tolerances (gpu_helpers.MODEL_TOL,
MATH_TOL): the kernel model (codes * scale + offset, rounded once to the activation dtype, times x
in float64; only fp32 accumulation and the output rounding differ) within 1e-3 (fp16) / 8e-3 (bf16), and
the mathematical weight (q - z) * s within 3e-3 / 2e-2. Outputs are poisoned with NaN first.
"""

from __future__ import annotations

import pytest
import torch

import mixgemm
from mixgemm import _C, Sm90Config, formats, ops, workspace
from mixgemm.kernel_key import KernelKey
from mixgemm.paths import PATHS
from gpu_helpers import (DEVICE, check_model_and_math, check_rows_and_bias, poison_allocator, random_activations,
                         random_int_checkpoint, sm90_layout_terms)

pytestmark = pytest.mark.gpu

M_VALUES = [1, 7, 64, 128, 300, 1024]
# (K, N, G): G = K (per-channel) in the last; N = 384 is 3 x 128 (cooperative) and 6 x 64 (ping-pong).
SHAPES = [(256, 128, 64), (512, 384, 128), (1024, 256, 128), (384, 256, 384)]
DTYPES = [torch.float16, torch.bfloat16]


def _require_sm90():
    if not torch.cuda.is_available():
        pytest.skip("no CUDA GPU")
    if torch.cuda.get_device_capability() != (9, 0):
        pytest.skip(f"the sm90 path needs compute capability 9.0, this GPU is {torch.cuda.get_device_capability()}")
    if not _C.sm90_available():
        pytest.skip("this build has no sm90 kernels (MIXGEMM_CUDA_ARCHS without 90a)")


def _sm90_configs(dtype, bits=4):
    """The sm90 configs compiled for sm90-layout weights with zero points (the scale+offset kernels)."""
    return mixgemm.compiled_configs(dtype, bits, path="sm90", layout="sm90")


def _kernels_for(packed):
    """Every sm90 kernel that runs this weight: for a scale-only weight its scale-only kernels, then the
    scale+offset ones (its offsets are zero), once per config (KernelPath.compiled)."""
    return PATHS["sm90"].compiled(packed.key)


def _gemm_sm90(x, packed, bias=None, config=None):
    """The sm90 path forced: ``config`` an Sm90Config, or None for the path's heuristic choice (``"sm90"``)."""
    return mixgemm.gemm(x, packed, bias, config="sm90" if config is None else config)


def _awq(K, N, G, dtype=torch.float16):
    ckpt = {k: v.to(DEVICE) for k, v in formats.random_awq_weight(K, N, G, dtype=dtype).items()}
    return ckpt["qweight"], ckpt["scales"], ckpt["qzeros"], G


def _weight(K, N, G, dtype, bits, zeros):
    """A random checkpoint (AWQ for int4, GPTQ for int8), its sm90 PackedWeight, and the two references."""
    args, keywords, math_w = random_int_checkpoint(K, N, G, dtype, bits, zeros)
    packed = mixgemm.prepack(*args, **keywords, layout="sm90")
    assert packed.layout == "sm90" and packed.scale_only == (not zeros)
    return packed, _model_weight(packed, dtype, zeros), math_w


def _model_weight(packed, dtype, zeros):
    """The kernels' model of an sm90-layout weight: the collective converts, multiplies by the scale and adds
    the offset in the activation dtype."""
    signed, s, o = sm90_layout_terms(packed)
    model_w = (signed * s).to(dtype).double()
    if zeros:
        model_w = (model_w + o).to(dtype).double()
    return model_w


@pytest.mark.parametrize("bits", [4, 8])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("zeros", [True, False], ids=["zeros", "scale_only"])
@pytest.mark.parametrize("K,N,G", SHAPES)
def test_every_kernel_against_float64(K, N, G, zeros, dtype, bits):
    _require_sm90()
    torch.manual_seed(K + N + G + bits)
    packed, model_w, math_w = _weight(K, N, G, dtype, bits, zeros)
    bias = torch.randn(N, device=DEVICE).to(dtype)
    configs = _kernels_for(packed)
    assert configs, f"no sm90 kernel for {packed.key.name}"
    for config in configs:
        if N % config.tile_n:
            continue
        check_rows_and_bias(lambda x, b: _gemm_sm90(x, packed, b, config=config), M_VALUES, K, N, bias, model_w,
                            math_w, dtype, config.name)


@pytest.mark.parametrize("dtype", DTYPES)
def test_default_config_and_batched_input(dtype):
    _require_sm90()
    packed, model_w, math_w = _weight(512, 256, 128, dtype, 4, True)
    x = random_activations(2 * 33, 512, dtype)
    assert ops.resolve_config(2 * 33, packed, "sm90").path == "sm90"
    out = _gemm_sm90(x.reshape(2, 33, 512), packed)
    assert out.shape == (2, 33, 256)
    check_model_and_math(out.reshape(-1, 256), x, None, model_w, math_w, dtype, "default config")


def test_cuda_graph_capture():
    _require_sm90()
    dtype = torch.float16
    packed, model_w, math_w = _weight(512, 256, 128, dtype, 4, True)
    bias = torch.randn(256, device=DEVICE).to(dtype)
    for config in _sm90_configs(dtype, 4):
        x = random_activations(100, 512, dtype)
        _gemm_sm90(x, packed, bias, config=config)  # warm-up outside the capture
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            out = _gemm_sm90(x, packed, bias, config=config)
        x.copy_(random_activations(100, 512, dtype))
        out.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        check_model_and_math(out, x, bias, model_w, math_w, dtype, f"graph {config.name}")


def _stream_k_configs(dtype, bits):
    configs = [c for c in _sm90_configs(dtype, bits) if c.scheduler == "streamk"]
    if not configs:
        pytest.skip("this build compiles no stream-K sm90 config (MIXGEMM_KERNELS=full does)")
    return configs


@pytest.mark.parametrize("bits", [4, 8])
@pytest.mark.parametrize("dtype", DTYPES)
def test_split_k_against_float64_and_repeatable_bit_for_bit(dtype, bits):
    """Split-K on every stream-K kernel, by both reductions: even (2, 4) and uneven (3: 6 + 5 + 5 k-tiles)
    splits, one k-tile per split (16), splits that start inside a scale group (G = 128 is two k-tiles), with and
    without bias. Each reduction adds the partials in an order fixed per element, so a second launch gives the same
    bits. The reduce-scatter runs where every split of every tile fits one wave of the SMs, and is refused
    elsewhere."""
    _require_sm90()
    K, N, G = 1024, 256, 128  # 16 k-tiles of 64; two weight tiles of 128 columns
    torch.manual_seed(bits)
    packed, model_w, math_w = _weight(K, N, G, dtype, bits, True)
    bias = torch.randn(N, device=DEVICE).to(dtype)
    sms = torch.cuda.get_device_properties(DEVICE).multi_processor_count
    for config in _stream_k_configs(dtype, bits):
        for split, mode in [(s, m) for s in (2, 3, 4, 16) for m in ("serial", "reduce_scatter")]:
            cfg = config.with_split_k(split, mode)
            for M in (1, 64, 300):
                tiles = -(-M // cfg.tile_m) * (N // cfg.tile_n)
                if mode == "reduce_scatter" and tiles * split > sms:
                    with pytest.raises(ValueError, match=r"^gemm \(sm90 path\): split_k_mode 'reduce_scatter' needs "
                                                         r"every split of every tile resident at once"):
                        _gemm_sm90(random_activations(M, K, dtype), packed, config=cfg)
                    continue
                x = random_activations(M, K, dtype)
                for b in (None, bias):
                    poison_allocator(M * N * 2)
                    out = _gemm_sm90(x, packed, b, config=cfg)
                    check_model_and_math(out, x, b, model_w, math_w, dtype, f"{cfg.name} M={M} bias={b is not None}")
                    assert torch.equal(_gemm_sm90(x, packed, b, config=cfg), out), f"{cfg.name} M={M}"


@pytest.mark.parametrize("dtype", DTYPES)
def test_token_rows_past_m_never_reach_the_output(dtype):
    """A token tile with 64 or more rows past M loads x only up to M (sm90/x_rows_past_m_skipped.cuh): the rows
    it skips hold whatever shared memory held. For every compiled config of 128 and 256 tokens and M with 63, 64,
    65 and tile - 1 rows past a tile's edge (the full box and the row blocks), the output matches the float64
    references and equals, bit for bit, the first M rows of the same config run just before on x padded to whole
    tiles with NaN rows (so stale stages hold NaN; a token's output reads only its own row of x)."""
    _require_sm90()
    K, N, G = 512, 256, 128
    torch.manual_seed(35)
    packed, model_w, math_w = _weight(K, N, G, dtype, 4, True)
    configs = [c for c in _sm90_configs(dtype) if c.tile_m in (128, 256)]
    assert configs, "no sm90 config of 128 or 256 tokens compiled"
    for config in configs:
        t = config.tile_m
        for M in sorted({t - 63, t - 64, t - 65, 1, 2 * t - 63, 2 * t - 64}):
            x = random_activations(M, K, dtype)
            padded = torch.full((-(-M // t) * t, K), float("nan"), dtype=dtype, device=DEVICE)
            padded[:M] = x
            poison_allocator(padded.shape[0] * N * 2)
            full = _gemm_sm90(padded, packed, config=config)
            poison_allocator(M * N * 2)
            out = _gemm_sm90(x, packed, config=config)
            what = f"{config.name} M={M} (padded to {padded.shape[0]})"
            check_model_and_math(out, x, None, model_w, math_w, dtype, what)
            assert torch.equal(out, full[:M]), what


def test_stream_k_flags_are_zero_after_every_call():
    """Stream-K kernels keep their split flags in the per-stream semaphore buffer (mixgemm.workspace) instead of
    clearing them with a memset per launch: the unit finishing a tile resets its flag. Calls of different
    shapes, splits and decompositions on one stream share the flags, so a flag left non-zero would make the
    next call read partials too early or wait forever. Checked here: every call against float64, and the
    whole buffer zero after each. Shapes: split-K (2, 3, 16 splits of 16 k-tiles); split_k = 1 on 50 and 150
    output tiles, where CUTLASS's heuristic (a last wave under half the H100's 132 SMs) runs stream-K units
    that cross tiles, alone or after a data-parallel wave; and a few tiles of M = 64, whatever it picks."""
    _require_sm90()
    dtype = torch.float16
    key = KernelKey.of(dtype, 4, "sm90").as_tuple()
    for config in _stream_k_configs(dtype, 4):
        cases = [(1024, 256, split, M) for split in (2, 3, 16) for M in (1, 130)]
        cases += [(1024, 256, -split, 1) for split in (3, 4, 6)]  # negative: the reduce-scatter (one wave)
        cases += [(1024, 25 * config.tile_n, 1, 2 * config.tile_m), (1024, 75 * config.tile_n, 1, 2 * config.tile_m),
                  (1024, 256, 1, 64)]
        weights = {}
        for K, N, split, M in cases:
            if (K, N) not in weights:
                torch.manual_seed(N)
                weights[K, N] = _weight(K, N, 128, dtype, 4, True)
            packed, model_w, math_w = weights[K, N]
            cfg = config.with_split_k(abs(split), "reduce_scatter" if split < 0 else None)
            launch = _C.prepare("sm90", cfg.kernel_name, key, M, N, K, 128, cfg.split_k, cfg.split_k_mode)
            nbytes, flags = launch.workspace_bytes, launch.semaphores
            if split != 1 or N > 256:  # the cases that split tiles (on 132 SMs): they need partials and flags
                assert nbytes > 0 and flags > 0, (cfg.name, M, N)
            x = random_activations(M, K, dtype)
            poison_allocator(M * N * 2)
            out = _gemm_sm90(x, packed, config=cfg)
            what = f"{cfg.name} M={M} N={N}"
            check_model_and_math(out, x, None, model_w, math_w, dtype, what)
            torch.cuda.synchronize()
            buffers = [b for (device, _), b in workspace._semaphores.items() if device == x.device]
            assert buffers, what
            assert all(int(b.count_nonzero()) == 0 for b in buffers), f"flags left set after {what}"


def test_split_k_under_cuda_graph_replay():
    _require_sm90()
    dtype = torch.float16
    K, N = 1024, 256
    packed, model_w, math_w = _weight(K, N, 128, dtype, 4, True)
    bias = torch.randn(N, device=DEVICE).to(dtype)
    for cfg in [c.with_split_k(3, mode) for c in _stream_k_configs(dtype, 4) for mode in ("serial", "reduce_scatter")]:
        x = random_activations(100, K, dtype)  # at most 7 x 2 tiles: 3 splits of each fit one wave
        _gemm_sm90(x, packed, bias, config=cfg)  # warm-up outside the capture
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            out = _gemm_sm90(x, packed, bias, config=cfg)
        for _ in range(2):  # each replay finds the split-K locks as the last one left them
            x.copy_(random_activations(100, K, dtype))
            out.fill_(float("nan"))
            graph.replay()
            torch.cuda.synchronize()
            check_model_and_math(out, x, bias, model_w, math_w, dtype, f"graph {cfg.name}")


def test_split_k_errors():
    _require_sm90()
    packed, _, _ = _weight(256, 128, 64, torch.float16, 4, True)  # K = 256: four k-tiles
    x = random_activations(4, 256, torch.float16)
    config = _stream_k_configs(torch.float16, 4)[0]
    too_many = config.with_split_k(8)
    with pytest.raises(ValueError, match=rf"^gemm: config {too_many.name} cannot run M = 4, N = 128, K = 256, "
                                         r"group_size = 64: split_k = 8 is more than K / 64 = 4 k-tiles"):
        _gemm_sm90(x, packed, config=too_many)
    # The extension's prepare checks the same rule.
    key = packed.key.as_tuple()
    with pytest.raises(ValueError, match=r"^gemm \(sm90 path\): split_k must be between 1 and K / 64 \(whole k-tiles "
                                         r"per split\), got 8"):
        _C.prepare("sm90", config.kernel_name, key, 4, 128, 256, 64, 8, "serial")
    assert torch.isfinite(_gemm_sm90(x, packed, config=config.with_split_k(4))).all()
    # A persistent config does not split K: the config type refuses it, and so does prepare.
    persistent = next((c for c in _sm90_configs(torch.float16, 4) if c.scheduler == "persistent"), None)
    if persistent is not None:
        with pytest.raises(ValueError, match=r"^Sm90Config: an sm90 config splits K only through its stream-K "
                                             r"scheduler"):
            persistent.with_split_k(2)
        with pytest.raises(ValueError, match=r"^gemm \(sm90 path\): split_k > 1 needs a stream-K config"):
            _C.prepare("sm90", persistent.kernel_name, key, 4, 128, 256, 64, 2, "serial")
        with pytest.raises(ValueError, match=r"^gemm \(sm90 path\): split_k > 1 needs a stream-K config"):
            _C.prepare("sm90", persistent.kernel_name, key, 4, 128, 256, 64, 2, "reduce_scatter")
    # The reduce-scatter only where the splits all run at once: 40 tiles split 4 ways need 160 CTAs.
    sms = torch.cuda.get_device_properties(DEVICE).multi_processor_count
    tiles = sms // 4 + 1
    with pytest.raises(ValueError, match=rf"^gemm \(sm90 path\): split_k_mode 'reduce_scatter' needs every split of "
                                         rf"every tile resident at once: 4 splits of the output tiles of "
                                         rf"{config.kernel_name} exceed one wave of this GPU's {sms} SMs"):
        _C.prepare("sm90", config.kernel_name, key, config.tile_m, tiles * config.tile_n, 256, 64, 4, "reduce_scatter")
    _C.prepare("sm90", config.kernel_name, key, config.tile_m, (sms // 4) * config.tile_n, 256, 64, 4,
               "reduce_scatter")  # 4 x (sms // 4) CTAs fit


def test_clear_errors_on_the_gpu():
    _require_sm90()
    packed, _, _ = _weight(256, 128, 64, torch.float16, 4, True)
    x = random_activations(4, 256, torch.float16)
    with pytest.raises(ValueError, match="dtype"):
        _gemm_sm90(x.bfloat16(), packed)
    with pytest.raises(ValueError, match="K = 256"):
        _gemm_sm90(x[:, :128].contiguous(), packed)
    with pytest.raises(ValueError, match="bias"):
        _gemm_sm90(x, packed, torch.zeros(64, dtype=torch.float16, device=DEVICE))
    bad = Sm90Config(8, 128)
    with pytest.raises(ValueError, match=r"^gemm: config sm90_8x128x64_c1x1_coop_persistent is not compiled into this "
                                         r"build for fp16-int4-sm90-scale_offset weights; its sm90 configs for them: "):
        _gemm_sm90(x, packed, config=bad)
    # The sm80 path reads the sm90 layout only with the (small-M) tiles compiled for it.
    sm90_layout_tiles = {c.kernel_name for c in mixgemm.compiled_configs(torch.float16, path="sm80", layout="sm90")}
    sm80_config = next((c for c in mixgemm.compiled_configs(torch.float16, path="sm80", layout="sm80")
                        if c.kernel_name not in sm90_layout_tiles), None)
    if sm80_config is not None:
        with pytest.raises(ValueError, match=rf"^gemm: config {sm80_config.name} is not compiled into this build for "
                                             r"fp16-int4-sm90-scale_offset weights; its sm80 configs for them: "):
            mixgemm.gemm(x, packed, config=sm80_config)
    sm80_weight = mixgemm.prepack(*_awq(256, 128, 64), layout="sm80")
    with pytest.raises(ValueError, match=r"^gemm: the sm90 path does not read weights in the 'sm80' layout"):
        _gemm_sm90(x, sm80_weight)
    with pytest.raises(ValueError, match=r"\(sm90 path\) cannot read a weight in the 'sm80' layout"):
        mixgemm.gemm(x, sm80_weight, config=_sm90_configs(torch.float16)[0])
