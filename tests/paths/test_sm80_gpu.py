"""The sm80 path (the mma.sync GEMM) on sm80-layout weights against float64 references, over every config
compiled for that layout and every split-K mode (the sm80 path on the sm90 layout: test_sm80_on_sm90_layout_gpu.py).

Two references per case:
  * the kernel model: W_k = (q * s + offset) rounded once to the activation dtype (what one hfma2 gives),
    times x in float64. Only fp32 accumulation and the final rounding differ, so the tolerance is tight
    (fp16: final rounding is 2^-11 relative, rms about 3e-4 -> 1e-3; bf16: 2^-8, rms about 2e-3 -> 8e-3).
    Any layout or indexing error is O(1) and fails it.
  * the mathematical weight (q - z) * s in float64: adds the rounding of W and of the folded offset
    (fp16 -> 3e-3, bf16 -> 2e-2).
Outputs are poisoned with NaN through the caching allocator before each call.
"""

from __future__ import annotations

import pytest
import torch

import mixgemm
from mixgemm import _C, formats, workspace
from mixgemm.kernel_key import KernelKey
from gpu_helpers import (DEVICE, kernel_model_weight, poison_allocator, random_activations, random_checkpoint,
                         reference_weight, relative_error)

pytestmark = pytest.mark.gpu

MODEL_TOL = {torch.float16: 1e-3, torch.bfloat16: 8e-3}
MATH_TOL = {torch.float16: 3e-3, torch.bfloat16: 2e-2}
M_VALUES = [1, 3, 16, 17, 64, 255, 1024]
# (K, N, G): N = 320 and 192 leave partial N tiles for tile_n 128 and 256; G = 32 puts two groups in
# one 64-deep k-tile.
SHAPES = [(256, 128, 64), (512, 320, 128), (1024, 256, 256), (256, 192, 32)]
# Every split count here is <= K / 64 for every shape above.
SPLITS = [(1, "none"), (2, "serial"), (3, "serial"), (2, "parallel"), (4, "parallel")]


def _configs(dtype):
    # Collection runs before any GPU check; compiled_configs only reads the extension's table. The sm80 path's
    # configs compiled for sm80-layout weights (the weights every test here packs).
    return mixgemm.compiled_configs(dtype, path="sm80", layout="sm80")


def run_case(M, K, N, G, dtype, config, bias=False):
    ckpt = random_checkpoint(K, N, G, dtype)
    packed = mixgemm.prepack(ckpt["qweight"], ckpt["scales"], ckpt["qzeros"], G, layout="sm80")
    x = random_activations(M, K, dtype)
    b = torch.randn(N, device=DEVICE).to(dtype) if bias else None
    poison_allocator(M * N * 2)
    out = mixgemm.gemm(x, packed, bias=b, config=config)
    torch.cuda.synchronize()
    assert out.shape == (M, N) and out.dtype == dtype
    assert torch.isfinite(out).all(), "unwritten (poisoned) or non-finite output elements"
    x64 = x.to(torch.float64)
    extra = b.to(torch.float64) if bias else 0.0
    model = x64 @ kernel_model_weight(packed) + extra
    math = x64 @ reference_weight(ckpt, G) + extra
    assert relative_error(out, model) < MODEL_TOL[dtype]
    assert relative_error(out, math) < MATH_TOL[dtype]
    return out


@pytest.mark.parametrize("split", SPLITS, ids=lambda s: f"{s[1]}{s[0]}")
@pytest.mark.parametrize("K,N,G", SHAPES)
@pytest.mark.parametrize("M", M_VALUES)
@pytest.mark.parametrize("config", _configs(torch.float16), ids=lambda c: c.name)
def test_gemm_fp16_grid(config, M, K, N, G, split):
    run_case(M, K, N, G, torch.float16, config.with_split_k(*split))


# Blocks of a stream-K grid, as a function of the units: one block (every tile whole), few blocks (several
# whole tiles each, cut tiles at both ends), a count sharing no common factor with the units per tile (cuts
# at every offset), and one block per unit (every tile cut into single k-tiles, as many arrivals as k-tiles).
STREAM_K_BLOCKS = {"one": lambda u: 1, "three": lambda u: min(3, u), "seven": lambda u: min(7, u),
                   "per_unit": lambda u: u}


@pytest.mark.parametrize("blocks", STREAM_K_BLOCKS)
@pytest.mark.parametrize("K,N,G", SHAPES)
@pytest.mark.parametrize("M", [1, 17, 64, 255])
@pytest.mark.parametrize("config", _configs(torch.float16), ids=lambda c: c.name)
def test_gemm_fp16_stream_k(config, M, K, N, G, blocks):
    split = STREAM_K_BLOCKS[blocks](config.stream_k_units(M, N, K))
    run_case(M, K, N, G, torch.float16, config.with_split_k(split, "streamk"), bias=blocks == "seven")


@pytest.mark.parametrize("config", _configs(torch.bfloat16), ids=lambda c: c.name)
def test_gemm_bf16_stream_k(config):
    M, K, N, G = 100, 1024, 320, 128
    run_case(M, K, N, G, torch.bfloat16, config.with_split_k(config.stream_k_units(M, N, K) // 3 + 1, "streamk"))


def test_stream_k_is_deterministic_and_leaves_semaphores_zero():
    """Cut tiles are summed in block order whichever block finishes last: repeated calls agree bit for bit,
    and every tile's counter is back to 0 after each call."""
    K, N, G, M = 4096, 512, 128, 40
    ckpt = random_checkpoint(K, N, G, torch.float16)
    packed = mixgemm.prepack(ckpt["qweight"], ckpt["scales"], ckpt["qzeros"], G, layout="sm80")
    x = random_activations(M, K, torch.float16)
    for config in _configs(torch.float16):
        config = config.with_split_k(2 * config.stream_k_units(M, N, K) // 64 + 5, "streamk")
        runs = [mixgemm.gemm(x, packed, config=config) for _ in range(4)]
        for r in runs[1:]:
            assert torch.equal(r.view(torch.int16), runs[0].view(torch.int16)), config.name
        torch.cuda.synchronize()
        assert all(int(buffer.abs().sum()) == 0 for buffer in workspace._semaphores.values()), config.name


def test_stream_k_rejects_more_blocks_than_units():
    K, N, G, M = 256, 128, 64, 3
    ckpt = random_checkpoint(K, N, G, torch.float16)
    packed = mixgemm.prepack(ckpt["qweight"], ckpt["scales"], ckpt["qzeros"], G, layout="sm80")
    config = _configs(torch.float16)[0]
    units = config.stream_k_units(M, N, K)
    too_many = config.with_split_k(units + 1, "streamk")
    # gemm refuses it before any launch (the path's fits check)...
    with pytest.raises(ValueError, match=rf"^gemm: config {too_many.name} cannot run M = {M}, N = {N}, K = {K}, "
                                         rf"group_size = {G}: stream-K over {units + 1} blocks needs at least one unit "
                                         rf"of work each, got {units}"):
        mixgemm.gemm(random_activations(M, K, torch.float16), packed, config=too_many)
    # ... and the extension's prepare, which every plan goes through, checks the same rule itself.
    key = KernelKey.of(torch.float16, 4, "sm80").as_tuple()
    with pytest.raises(ValueError, match=rf"^gemm \(sm80 path\): stream-K: split_k \(the blocks\) must be in "
                                         rf"\[1, the units of work = {units}\]"):
        _C.prepare("sm80", config.kernel_name, key, M, N, K, G, units + 1, "streamk")
    _C.prepare("sm80", config.kernel_name, key, M, N, K, G, units, "streamk")  # one block per unit: prepared


@pytest.mark.parametrize("split", [(1, "none"), (3, "serial"), (2, "parallel")], ids=lambda s: f"{s[1]}{s[0]}")
@pytest.mark.parametrize("M", [1, 17, 255])
@pytest.mark.parametrize("config", _configs(torch.bfloat16), ids=lambda c: c.name)
def test_gemm_bf16_grid(config, M, split):
    run_case(M, 512, 320, 128, torch.bfloat16, config.with_split_k(*split))


@pytest.mark.parametrize("M", [1, 7, 33, 200, 4096])
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_gemm_auto_config_with_bias(M, dtype):
    run_case(M, 1024, 512, 128, dtype, "auto", bias=True)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_gemm_converter_exhaustive(dtype):
    """x = I makes the GEMM return its own dequantized weight, exactly: every value 0..15 sits in every
    nibble position and column; with scale 1 and zero 0 the output must equal q bit for bit."""
    K, N, G = 256, 128, 64
    q = ((torch.arange(K)[:, None] + torch.arange(N)[None, :]) % 16).to(torch.uint8)
    qweight = formats.pack_awq(q).to(DEVICE)
    qzeros = formats.pack_awq(torch.zeros(K // G, N, dtype=torch.uint8)).to(DEVICE)
    scales = torch.ones(K // G, N, dtype=dtype, device=DEVICE)
    packed = mixgemm.prepack(qweight, scales, qzeros, G, layout="sm80")
    eye = torch.eye(K, dtype=dtype, device=DEVICE)
    for config in _configs(dtype):
        out = mixgemm.gemm(eye, packed, config=config)
        assert torch.equal(out, q.to(dtype).to(DEVICE)), config.name


@pytest.mark.parametrize("mode", ["serial", "parallel"])
def test_trailing_split_with_no_k_tiles(mode):
    """K = 384 is 6 k-tiles; 4 splits of ceil(6/4) = 2 leave the last split empty: it must still take its
    turn (serial) or write zero partials (parallel)."""
    config = _configs(torch.float16)[0].with_split_k(4, mode)
    run_case(17, 384, 128, 128, torch.float16, config)


def test_serial_split_k_is_deterministic_and_leaves_semaphores_zero():
    K, N, G, M = 2048, 512, 128, 5
    ckpt = random_checkpoint(K, N, G, torch.float16)
    packed = mixgemm.prepack(ckpt["qweight"], ckpt["scales"], ckpt["qzeros"], G, layout="sm80")
    x = random_activations(M, K, torch.float16)
    config = _configs(torch.float16)[0].with_split_k(8, "serial")
    runs = [mixgemm.gemm(x, packed, config=config) for _ in range(5)]
    for r in runs[1:]:
        assert torch.equal(r.view(torch.int16), runs[0].view(torch.int16))
    torch.cuda.synchronize()
    assert all(int(buffer.abs().sum()) == 0 for buffer in workspace._semaphores.values())


@pytest.mark.parametrize("layout", ["sm80", "sm90"])
def test_serial_and_parallel_split_k_sum_the_same_partials_in_the_same_order(layout):
    """Serial split-K sums its slots in batches of up to 16 float4 a thread (tile_output.cuh, sum_slots), the
    parallel split's reduction kernel in batches of 8 partials (splitk_reduce.cuh); the
    splits here cross every batch boundary of both (serial batches of 1, 2 and 4 slots; 2, 3, 5, 8, 9, 16
    splits). Both modes add the partials in split order from zero, with the bias last, so their outputs are
    equal value for value, and within the mathematical weight's tolerance of float64. K = 1024 is 16 k-tiles;
    M = 33 and N = 320 leave partial row and column tiles."""
    K, N, G, M = 1024, 320, 128, 33
    configs = mixgemm.compiled_configs(torch.float16, path="sm80", layout=layout)
    if not configs:
        pytest.skip(f"this build compiles no sm80 tile for the {layout} layout")
    ckpt = random_checkpoint(K, N, G, torch.float16)
    packed = mixgemm.prepack(ckpt["qweight"], ckpt["scales"], ckpt["qzeros"], G, layout=layout)
    x = random_activations(M, K, torch.float16)
    bias = torch.randn(N, device=DEVICE).to(torch.float16)
    ref = x.double() @ reference_weight(ckpt, G) + bias.double()
    for config in configs:
        for split in (2, 3, 5, 8, 9, 16):
            poison_allocator(M * N * 2)
            serial = mixgemm.gemm(x, packed, bias, config=config.with_split_k(split, "serial"))
            poison_allocator(M * N * 2)
            parallel = mixgemm.gemm(x, packed, bias, config=config.with_split_k(split, "parallel"))
            torch.cuda.synchronize()
            assert relative_error(serial, ref) < MATH_TOL[torch.float16], f"{config.name} split {split}"
            assert torch.equal(serial, parallel), f"{config.name} split {split}: serial and parallel sums differ"
    assert all(int(buffer.abs().sum()) == 0 for buffer in workspace._semaphores.values())


@pytest.mark.parametrize("split", [(1, "none"), (4, "serial"), (4, "parallel"), (5, "streamk")], ids=lambda s: s[1])
def test_cuda_graph_capture_and_replay(split):
    K, N, G, M = 1024, 256, 128, 9
    ckpt = random_checkpoint(K, N, G, torch.float16)
    packed = mixgemm.prepack(ckpt["qweight"], ckpt["scales"], ckpt["qzeros"], G, layout="sm80")
    config = _configs(torch.float16)[0].with_split_k(*split)
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
        eager = mixgemm.gemm(static_x, packed, config=config)
        assert torch.equal(static_out, eager)


def test_gemm_accepts_leading_dims():
    K, N, G = 512, 128, 128
    ckpt = random_checkpoint(K, N, G, torch.float16)
    packed = mixgemm.prepack(ckpt["qweight"], ckpt["scales"], ckpt["qzeros"], G, layout="sm80")
    x = random_activations(6, K, torch.float16).reshape(2, 3, K)
    out = mixgemm.gemm(x, packed)
    assert out.shape == (2, 3, N)
    assert torch.equal(out.reshape(6, N), mixgemm.gemm(x.reshape(6, K), packed))


def test_gptq_prepack_matches_awq():
    K, N, G, M = 512, 256, 128, 8
    ckpt = random_checkpoint(K, N, G, torch.float16)
    gq, gz = formats.awq_to_gptq(ckpt["qweight"], ckpt["qzeros"])
    x = random_activations(M, K, torch.float16)
    from_awq = mixgemm.gemm(x, mixgemm.prepack(ckpt["qweight"], ckpt["scales"], ckpt["qzeros"], G, layout="sm80"))
    from_gptq = mixgemm.gemm(x, mixgemm.prepack(gq, ckpt["scales"], gz, G, format="gptq", layout="sm80"))
    assert torch.equal(from_awq, from_gptq)
