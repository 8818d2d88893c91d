"""The sm80 path (mma.sync) on sm90-layout weights, against float64 references.

Hopper packs weights in the sm90 layout; the sm80 path's small-M tiles are compiled for it too (its B-tile
loader reads the layout's 16 x 16 blocks with ldmatrix), so ``auto`` can run them there. Every sm80 config
compiled for the sm90 layout runs here over M, dtypes, widths, zero points and split-K modes, on shapes whose N leaves the last tile
partly outside the weight (N = 320 on 256-column tiles, 192 on 128-column ones).

Tolerances (gpu_helpers.MODEL_TOL, MATH_TOL): the kernel model (signed codes * scale + offset in one fma,
rounded once to the activation dtype, times x in float64) within 1e-3 (fp16) / 8e-3 (bf16); the
mathematical weight (q - z) * s within 3e-3 / 2e-2. Outputs are poisoned with NaN first. The kernels are
mma.sync and prepack to the sm90 layout runs on any GPU, so these tests run on any GPU of compute capability
8.0 or later.
"""

from __future__ import annotations

import pytest
import torch

import mixgemm
from mixgemm import _C, ops
from mixgemm.kernel_key import KernelKey
from mixgemm.layouts import sm90 as sm90_layout
from gpu_helpers import (DEVICE, MODEL_TOL, check_model_and_math, check_rows_and_bias, poison_allocator,
                         random_activations, random_int_checkpoint, relative_error, sm90_layout_terms)

pytestmark = pytest.mark.gpu

DTYPES = [torch.float16, torch.bfloat16]
M_VALUES = [1, 9, 16, 33, 64, 100]
# (K, N, G): N = 320 and 192 end inside a tile; G = K (per-channel) in the last.
SHAPES = [(512, 320, 64), (1024, 192, 128), (384, 256, 384)]


def _configs(dtype, bits):
    return mixgemm.compiled_configs(dtype, bits, path="sm80", layout="sm90")


def _weight(K, N, G, dtype, bits, zeros):
    """A random checkpoint (AWQ int4, GPTQ int8) prepacked to the sm90 layout, and the two references."""
    args, keywords, math_w = random_int_checkpoint(K, N, G, dtype, bits, zeros)
    packed = mixgemm.prepack(*args, **keywords, layout="sm90")
    assert packed.layout == "sm90"
    # The warp level's one fma per pair: signed code * scale + offset, rounded once to the activation dtype.
    signed, s, o = sm90_layout_terms(packed)
    return packed, (signed * s + o).to(dtype).double(), math_w


def _require_configs(dtype, bits):
    if not torch.cuda.is_available():
        pytest.skip("no CUDA GPU")
    configs = _configs(dtype, bits)
    if not configs:
        pytest.skip("this build compiles no sm80 tile for the sm90 layout")
    return configs


@pytest.mark.parametrize("bits", [4, 8])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("zeros", [True, False], ids=["zeros", "scale_only"])
@pytest.mark.parametrize("K,N,G", SHAPES)
def test_every_sm90_layout_tile_against_float64(K, N, G, zeros, dtype, bits):
    configs = _require_configs(dtype, bits)
    torch.manual_seed(K + N + G + bits)
    packed, model_w, math_w = _weight(K, N, G, dtype, bits, zeros)
    bias = torch.randn(N, device=DEVICE).to(dtype)
    for config in configs:
        for split_k, mode in ((1, "none"), (3, "serial"), (2, "parallel"), (5, "streamk")):
            cfg = config.with_split_k(split_k, mode)
            check_rows_and_bias(lambda x, b: mixgemm.gemm(x, packed, b, config=cfg), M_VALUES, K, N, bias, model_w,
                                math_w, dtype, cfg.name)


def test_group_boundaries_inside_k_tiles():
    # G = 64 on K = 1024 with a split of 5 (k-tiles 4, 4, 4, 4, 0: an empty trailing split): each split's
    # first scale row and the empty split's semaphore arrival.
    configs = _require_configs(torch.float16, 4)
    packed, model_w, math_w = _weight(1024, 256, 64, torch.float16, 4, True)
    x = random_activations(40, 1024, torch.float16)
    for config in configs:
        for mode in ("serial", "parallel"):
            cfg = config.with_split_k(5, mode)
            poison_allocator(40 * 256 * 2)
            check_model_and_math(mixgemm.gemm(x, packed, config=cfg), x, None, model_w, math_w, torch.float16, cfg.name)


def test_n_in_16_column_blocks_through_the_raw_binding():
    # The sm80 path's rule for the sm90 layout is N % 16 (the block width); the layout asks for 64 (prepack), so a
    # weight of N = 208 (13 blocks: a 256-column tile whose 3 blocks past N re-read an in-weight block) is built
    # here from the layout's packer and run through the extension's prepared launch directly.
    configs = _require_configs(torch.float16, 4)
    K, N, G = 256, 208, 64
    torch.manual_seed(5)
    q = torch.randint(0, 16, (K, N), device=DEVICE, dtype=torch.int32)
    packed_words = sm90_layout.pack_sm90(q, 4)
    scales = (torch.rand(K // G, N, device=DEVICE) * 0.02 + 0.005).to(torch.float16)
    offsets = (torch.randn(K // G, N, device=DEVICE) * 0.01).to(torch.float16)
    model_w = ((q.double() - 8) * scales.double().repeat_interleave(G, 0)
               + offsets.double().repeat_interleave(G, 0)).to(torch.float16).double()
    key = KernelKey.of(torch.float16, 4, "sm90").as_tuple()
    for config in configs:
        for M in (5, 16, 64):
            x = random_activations(M, K, torch.float16)
            out = torch.full((M, N), float("nan"), device=DEVICE, dtype=torch.float16)
            launch = _C.prepare("sm80", config.kernel_name, key, M, N, K, G, 1, "none")
            assert launch.workspace_bytes == 0 and launch.semaphores == 0  # no split: no scratch
            launch(x.data_ptr(), packed_words.data_ptr(), scales.data_ptr(), offsets.data_ptr(), 0, out.data_ptr(),
                   0, 0, torch.cuda.current_stream().cuda_stream)
            torch.cuda.synchronize()
            assert torch.isfinite(out).all()
            err = relative_error(out, x.double() @ model_w)
            assert err < MODEL_TOL[torch.float16], f"{config.name} M={M}: {err:.2e}"
    with pytest.raises(ValueError, match=r"^gemm \(sm80 path\): N must be a positive multiple of 16 \(the sm90 "
                                         r"layout's 16-column block\), got 200"):
        _C.prepare("sm80", configs[0].kernel_name, key, 4, 200, K, G, 1, "none")


def test_a_tile_not_compiled_for_the_sm90_layout_is_refused():
    _require_configs(torch.float16, 4)
    sm90_tiles = {c.kernel_name for c in _configs(torch.float16, 4)}
    others = [c for c in mixgemm.compiled_configs(torch.float16, 4, path="sm80", layout="sm80")
              if c.kernel_name not in sm90_tiles]
    if not others:
        pytest.skip("every sm80 tile of this build reads the sm90 layout")
    packed, _, _ = _weight(256, 256, 64, torch.float16, 4, True)
    assert packed.key == KernelKey.of(torch.float16, 4, "sm90")
    names = ", ".join(c.kernel_name for c in _configs(torch.float16, 4))
    with pytest.raises(ValueError) as refused:
        mixgemm.gemm(random_activations(32, 256, torch.float16), packed, config=others[0])
    assert str(refused.value) == (f"gemm: config {others[0].name} is not compiled into this build for "
                                  f"fp16-int4-sm90-scale_offset weights; its sm80 configs for them: {names}")
    # The extension refuses it too, naming the key.
    with pytest.raises(ValueError, match=rf"^gemm \(sm80 path\): config {others[0].kernel_name} is not compiled into "
                                         r"this build for fp16-int4-sm90-scale_offset"):
        _C.prepare("sm80", others[0].kernel_name, packed.key.as_tuple(), 32, 256, 256, 64, 1, "none")


def test_auto_runs_the_sm80_path_for_small_m_and_under_a_cuda_graph(tmp_path, monkeypatch):
    monkeypatch.setenv("MIXGEMM_CACHE", str(tmp_path / "tuned.json"))  # the heuristic, not a tuned choice
    ops.clear_plans()
    _require_configs(torch.float16, 4)
    K, N, G = 1024, 512, 128
    packed, model_w, math_w = _weight(K, N, G, torch.float16, 4, True)
    x = random_activations(16, K, torch.float16)  # the sm80 tiles take up to 16 rows of an sm90-layout weight
    config = ops.resolve_config(16, packed, "auto")
    assert config.path == "sm80", config.name
    eager = mixgemm.gemm(x, packed)
    check_model_and_math(eager, x, None, model_w, math_w, torch.float16, f"auto ({config.name})")
    graph = torch.cuda.CUDAGraph()
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        mixgemm.gemm(x, packed)  # warm-up outside the capture: plans and workspaces
        with torch.cuda.graph(graph, stream=stream):
            captured = mixgemm.gemm(x, packed)
    torch.cuda.current_stream().wait_stream(stream)
    for _ in range(3):
        graph.replay()
    torch.cuda.synchronize()
    assert torch.equal(captured, eager), "graph replay differs from the eager call"


def _auto_at_16_rows_is_exact(K, N, split_k, tmp_path, monkeypatch):
    """`auto` on K x N at M = 9 and 16 runs the sm80 path's 16-row tiles split ``split_k`` ways (the tile's last split
    summing in-kernel where split), against float64 and bit-equal under a CUDA graph's replays (the sum runs in
    split order). The expected splits are those of a 132-SM H100 or H200; elsewhere the split follows the GPU's SM
    count and bandwidth, and the test skips."""
    if torch.cuda.get_device_properties(0).multi_processor_count != 132:
        pytest.skip("the expected splits are those of a 132-SM GPU (H100 SXM, H200)")
    monkeypatch.setenv("MIXGEMM_CACHE", str(tmp_path / "tuned.json"))  # the heuristic, not a tuned choice
    ops.clear_plans()
    _require_configs(torch.float16, 4)
    torch.manual_seed(K + N)
    packed, model_w, math_w = _weight(K, N, 128, torch.float16, 4, True)
    for M in (9, 16):
        config = ops.resolve_config(M, packed, "auto")
        mode = "serial" if split_k > 1 else "none"
        assert (config.path, config.tile_m, config.tile_n, config.split_k, config.split_k_mode) == (
            "sm80", 16, 128, split_k, mode), config.name
        x = random_activations(M, K, torch.float16)
        poison_allocator(M * N * 2)
        eager = mixgemm.gemm(x, packed)
        check_model_and_math(eager, x, None, model_w, math_w, torch.float16, f"auto ({config.name}) M={M}")
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            captured = mixgemm.gemm(x, packed)
        for _ in range(3):
            graph.replay()
        torch.cuda.synchronize()
        assert torch.equal(captured, eager), f"M={M}: graph replay differs from the eager call"


@pytest.mark.parametrize("K, N, split_k", [(2048, 8192, 4), (4096, 4096, 8)])
def test_auto_splits_small_weights_serially_at_16_rows(K, N, split_k, tmp_path, monkeypatch):
    # Below 32 Mi elements, with the 32 tiles the in-kernel sum needs: 4 splits of 8 k-tiles on 2048 x 8192, 8 of 8
    # on 4096 x 4096.
    _auto_at_16_rows_is_exact(K, N, split_k, tmp_path, monkeypatch)


@pytest.mark.parametrize("K, N, split_k", [(1024, 4096, 4), (1024, 8192, 2), (1024, 14336, 1), (1024, 28672, 1)])
def test_auto_splits_short_k_within_one_wave_at_16_rows(K, N, split_k, tmp_path, monkeypatch):
    # Short K (16 k-tiles): the most serial splits that keep the grid within one wave of 132 SMs (32 tiles x 4,
    # 64 x 2), unsplit 16 x 128 tiles where 2 splits would pass it (112, 224 tiles; the widest weight too).
    _auto_at_16_rows_is_exact(K, N, split_k, tmp_path, monkeypatch)
