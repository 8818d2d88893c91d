"""One prepack, one gemm: the weight layout prepack picks for this GPU (layout="auto") and the paths
config="auto" then takes at every M, checked against float64 references.

On a Hopper GPU with sm90 kernels the auto layout is the sm90 one, read by the decode path for a few rows,
the sm80 path's small tiles up to 16 rows and the sm90 GEMM above; elsewhere it is the sm80 layout (decode
path, then the sm80 GEMM); from mixgemm.dispatch.DEQUANT_MIN_M rows of the layout, the dequant path. A weight
whose K or group size only the dequant path takes runs there at every M. A path's name as the config runs that
path. Every result is checked against the mathematical weight (q - z) * s in float64 within the tolerances of
test_sm80_gpu.py (fp16 3e-3, bf16 2e-2), on outputs poisoned with NaN first.
"""

from __future__ import annotations

import pytest
import torch

import mixgemm
from mixgemm import device, dispatch, formats, library, ops
from mixgemm.kernel_key import KernelKey
from mixgemm.nn import QuantLinear
from mixgemm.paths import PATHS, GemmProblem
from gpu_helpers import (DEVICE, gptq_act_order_checkpoint, poison_allocator, random_activations, random_checkpoint,
                         reference_weight, relative_error)
from hand_registry import kernel_sets

pytestmark = pytest.mark.gpu

MATH_TOL = {torch.float16: 3e-3, torch.bfloat16: 2e-2}
M_VALUES = [1, 5, 8, 9, 16, 17, 33, 64, 128, 300, 1024]


def _sm90_runs_here() -> bool:
    """A Hopper GPU and a build with sm90 kernels (for fp16 int4 weights)."""
    return torch.cuda.get_device_capability() == (9, 0) and bool(mixgemm.compiled_configs(torch.float16, path="sm90"))


def _own_layout() -> str:
    return "sm90" if _sm90_runs_here() else "sm80"


def _gemm_path(layout: str) -> str:
    return "sm90" if layout == "sm90" else "sm80"


@pytest.fixture(autouse=True)
def heuristic_only(tmp_path, monkeypatch):
    # config="auto" reads the tuning cache first: an empty private one leaves the heuristic to choose, and the
    # plans resolved before (against another cache) are dropped.
    monkeypatch.setenv("MIXGEMM_CACHE", str(tmp_path / "tuned.json"))
    ops.clear_plans()
    yield
    ops.clear_plans()


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
    sm_count = torch.cuda.get_device_properties(DEVICE).multi_processor_count
    paths = set()
    for M in M_VALUES:
        config = ops.resolve_config(M, packed, "auto")
        assert packed.layout in PATHS[config.path].layouts, (M, config.name)
        paths.add(config.path)
        if M <= dispatch.DECODE_MAX_M:  # a few rows: the batched GEMV
            assert config.path == "decode", (M, config.name)
        elif packed.layout == "sm80" or dispatch.sm80_first_on_sm90_layout(GemmProblem(M, N, K, G), sm_count):
            # the sm80 layout's own path; on the sm90 layout its small tiles (16 rows; 32 up to 64 Mi elements; 64
            # where the sm90 GEMM's tiles would be too few to fill the GPU or give each SM few k-tiles)
            assert config.path == "sm80", (M, config.name)
        elif M >= dispatch.DEQUANT_MIN_M[packed.layout]:  # cuBLAS on the expanded weight
            assert config.path == "dequant", (M, config.name)
        else:  # above the sm80 tiles' rows, the layout's own GEMM
            assert config.path == _gemm_path(packed.layout), (M, config.name)
        x = random_activations(M, K, dtype)
        poison_allocator(M * N * 2)
        out = mixgemm.gemm(x, packed, bias)
        torch.cuda.synchronize()
        assert torch.isfinite(out).all(), M
        assert relative_error(out, x.double() @ w + bias.double()) < MATH_TOL[dtype], (M, config.name)
    dequant = {"dequant"} if max(M_VALUES) >= dispatch.DEQUANT_MIN_M[packed.layout] else set()
    assert paths == {"decode", "sm80", _gemm_path(packed.layout)} | dequant


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
    # 128 rows: the sm90 GEMM's own bucket on this small weight (at 17..64 rows the sm80 path's tiles come
    # first on a weight this small: dispatch.sm80_first_on_sm90_layout).
    x = random_activations(128, K, torch.float16)
    if _own_layout() == "sm90":
        assert ops.resolve_config(128, packed, "auto").path == "sm90"
        assert relative_error(mixgemm.gemm(x, packed), x.double() @ w) < 3e-3
    elif torch.cuda.get_device_capability() != (9, 0) and mixgemm.compiled_configs(torch.float16, path="sm90"):
        with pytest.raises((RuntimeError, ValueError), match="sm90|9.0"):
            mixgemm.gemm(x, packed)
    key = KernelKey.of(torch.float16, 4, "sm90")
    assert PATHS["sm90"].takes_weight(packed.packed.device, key, K, N, G) == (_own_layout() == "sm90")


# ---------------------------------------------------------------------------------------------------
# Weights only the dequant path runs, configs named by path, and scales prepack refuses

# (K, N, G, layout, the sm80 path's broken rule): K not a multiple of the 64-deep k-tile, or groups of 16 rows
# (the sm80 and decode paths read one scale row per 32 rows): the dequant path (K in 16-deep slabs, groups of 16)
# is the only one that runs these.
DEQUANT_ONLY = [
    (80, 128, 16, "sm80", r"K must be a positive multiple of 64 \(the main loop's 64-deep k-tile\), got 80"),
    (96, 192, 32, "sm80", r"K must be a positive multiple of 64 \(the main loop's 64-deep k-tile\), got 96"),
    (96, 256, 96, "sm80", r"K must be a positive multiple of 64 \(the main loop's 64-deep k-tile\), got 96"),
    (1024, 256, 16, "sm80", r"group_size must be a multiple of 32 that divides K \(one row of scales per 32-row "
                            r"half of a k-tile\), got 16"),
    (80, 128, 16, "sm90", r"K must be a positive multiple of 64 \(the main loop's 64-deep k-tile\), got 80"),
    (512, 128, 16, "sm90", r"group_size must be a multiple of 32 that divides K \(one row of scales per 32-row "
                           r"half of a k-tile\), got 16"),
]


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("K, N, G, layout, sm80_rule", DEQUANT_ONLY)
def test_a_weight_only_the_dequant_path_runs(K, N, G, layout, sm80_rule, dtype):
    ckpt = random_checkpoint(K, N, G, dtype)
    packed = mixgemm.prepack(ckpt["qweight"], ckpt["scales"], ckpt["qzeros"], G, layout=layout)
    assert (packed.layout, packed.k, packed.n, packed.group_size) == (layout, K, N, G)
    w = reference_weight(ckpt, G)
    bias = torch.randn(N, device=DEVICE).to(dtype)
    for M in (1, 16, 300):
        assert ops.resolve_config(M, packed, "auto").path == "dequant", M
        x = random_activations(M, K, dtype)
        for b in (None, bias):
            poison_allocator(M * N * 2)
            out = mixgemm.gemm(x, packed, b)
            torch.cuda.synchronize()
            assert out.shape == (M, N) and out.dtype == dtype
            assert torch.isfinite(out).all(), f"M={M}: unwritten (poisoned) output elements"
            expected = x.double() @ w + (b.double() if b is not None else 0.0)
            assert relative_error(out, expected) < MATH_TOL[dtype], (M, b is not None)
        # The sm80 path, by name or by one of its configs, names the rule the weight breaks.
        with pytest.raises(ValueError, match=rf"^gemm: config='sm80': .*sm80: {sm80_rule}"):
            mixgemm.gemm(x, packed, config="sm80")
        config = mixgemm.compiled_configs(dtype, 4, path="sm80", layout=layout)[0]
        with pytest.raises(ValueError, match=rf"^gemm: config {config.name} cannot run M = {M}, N = {N}, K = {K}, "
                                             rf"group_size = {G}: {sm80_rule}"):
            mixgemm.gemm(x, packed, config=config)
    # The decode path (K in 64-deep batches, groups of 32) does not take it either.
    with pytest.raises(ValueError, match=r"^gemm: config='decode': .*decode: (K|group_size) must be"):
        mixgemm.gemm(random_activations(1, K, dtype), packed, config="decode")


def _named_path_cases():
    """(layout, path name, M): every path that reads the layout, at rows it takes."""
    cases = [("sm80", "decode", 1), ("sm80", "decode", 8), ("sm80", "sm80", 8), ("sm80", "sm80", 200),
             ("sm80", "dequant", 8), ("sm80", "dequant", 200),
             ("sm90", "decode", 5), ("sm90", "sm80", 5), ("sm90", "sm80", 64), ("sm90", "dequant", 64)]
    return cases + [("sm90", "sm90", 5), ("sm90", "sm90", 200)]


@pytest.mark.parametrize("layout, path, M", _named_path_cases())
def test_a_path_name_runs_that_path(layout, path, M):
    if path == "sm90" and not _sm90_runs_here():
        pytest.skip("the sm90 path runs on a Hopper GPU with sm90 kernels compiled")
    K, N, G = 1024, 512, 128
    dtype = torch.float16
    ckpt = random_checkpoint(K, N, G, dtype)
    packed = mixgemm.prepack(ckpt["qweight"], ckpt["scales"], ckpt["qzeros"], G, layout=layout)
    w = reference_weight(ckpt, G)
    bias = torch.randn(N, device=DEVICE).to(dtype)
    chosen = ops.resolve_config(M, packed, path)
    assert chosen.path == path, chosen.name
    # The path's own heuristic choice for the problem.
    problem = GemmProblem(M, N, K, G)
    gpu = device.facts("test", packed.packed.device)
    assert chosen == dispatch.heuristic(dispatch.compiled(packed.key), problem, packed.key, gpu, order=(path,))
    x = random_activations(M, K, dtype)
    poison_allocator(M * N * 2)
    out = mixgemm.gemm(x, packed, bias, config=path)
    torch.cuda.synchronize()
    # The plan gemm ran is that path's.
    assert ops._plans[(packed._gemm_state.shape_key, M, path)].config.path == path
    assert torch.isfinite(out).all(), "unwritten (poisoned) output elements"
    assert relative_error(out, x.double() @ w + bias.double()) < MATH_TOL[dtype], chosen.name
    # The same run as the config it resolves to, and through the custom op by the same name.
    assert torch.equal(mixgemm.gemm(x, packed, bias, config=chosen), out)
    assert torch.equal(library.gemm(x, packed, bias, config=path), out)


def test_a_path_name_that_cannot_run_the_call_is_refused():
    K, N, G = 1024, 512, 128
    ckpt = random_checkpoint(K, N, G, torch.float16)
    sm80 = mixgemm.prepack(ckpt["qweight"], ckpt["scales"], ckpt["qzeros"], G, layout="sm80")
    x = random_activations(300, K, torch.float16)
    with pytest.raises(ValueError, match=r"^gemm: the sm90 path does not read weights in the 'sm80' layout"):
        mixgemm.gemm(x, sm80, config="sm90")
    # The decode path takes a few rows of x only: by name it has no kernel for 300 rows; its widest compiled
    # kernel, given as the config, names its limit.
    with pytest.raises(ValueError, match=r"^gemm: config='decode': mixgemm: no kernel path runs M = 300, N = 512, "
                                         r"K = 1024, group_size = 128 for fp16-int4-sm80-scale_offset \(decode: "):
        mixgemm.gemm(x, sm80, config="decode")
    widest = max(mixgemm.compiled_configs(torch.float16, 4, path="decode", layout="sm80"), key=lambda c: c.rows)
    with pytest.raises(ValueError, match=rf"^gemm: config {widest.name} cannot run M = 300, N = 512, K = 1024, "
                                         rf"group_size = 128: {widest.name} takes at most {widest.rows} rows of x, "
                                         r"got M = 300"):
        mixgemm.gemm(x, sm80, config=widest)
    with pytest.raises(ValueError, match=r"^gemm: config must be 'auto', a path name \(sm80, decode, sm90, dequant\) "
                                         r"or a GemmConfig, got 'gemv'"):
        mixgemm.gemm(x, sm80, config="gemv")


@pytest.mark.parametrize("layout", ["sm80", "sm90"])
@pytest.mark.parametrize("bad", [float("nan"), float("inf"), float("-inf")])
def test_prepack_refuses_non_finite_scales(layout, bad):
    K, N, G = 512, 256, 128
    ckpt = random_checkpoint(K, N, G, torch.float16)
    scales = ckpt["scales"].clone()
    scales[1, 7] = bad
    scales[3, 200] = bad
    with pytest.raises(ValueError, match=r"^prepack: scales holds 2 NaN or infinite value\(s\); a quantized "
                                         r"weight's scales must be finite"):
        mixgemm.prepack(ckpt["qweight"], scales, ckpt["qzeros"], G, layout=layout)
    with pytest.raises(ValueError, match=r"^prepack: scales holds 2 NaN"):
        mixgemm.prepack(ckpt["qweight"], scales, None, G, layout=layout)  # symmetric too
    with pytest.raises(ValueError, match=r"^prepack: scales holds 2 NaN"):
        QuantLinear.from_awq(ckpt["qweight"], scales, ckpt["qzeros"], layout=layout)
    # The same checkpoint with finite scales packs.
    assert mixgemm.prepack(ckpt["qweight"], ckpt["scales"], ckpt["qzeros"], G, layout=layout).layout == layout


@pytest.mark.parametrize("layout", ["sm80", "sm90"])
def test_prepack_refuses_offsets_that_overflow_the_dtype(layout):
    # Zero point 15 and one scale of 60000: the folded offset, -15 * 60000 (sm80 layout) or (8 - 15) * 60000
    # (sm90 layout), overflows fp16 (max 65504) to -inf.
    K, N, G = 512, 256, 128
    ckpt = random_checkpoint(K, N, G, torch.float16)
    scales = ckpt["scales"].clone()
    scales[2, 100] = 60000.0
    qzeros = formats.pack_awq(torch.full((K // G, N), 15, dtype=torch.uint8)).to(DEVICE)
    with pytest.raises(ValueError, match=r"^prepack: offsets \(the folded zero points in the activation dtype\) "
                                         r"holds 1 NaN or infinite value\(s\)"):
        mixgemm.prepack(ckpt["qweight"], scales, qzeros, G, layout=layout)


@pytest.mark.parametrize("N, M", [(1280, 9), (1280, 16), (1280, 17), (1280, 32), (1280, 48), (1280, 64), (2560, 16),
                                  (2560, 32)])
def test_a_narrow_sm90_layout_weight_runs_the_sm80_tiles_split_deep(N, M):
    # 8192 x 1280 and 8192 x 2560 (10 and 20 column tiles on 132 SMs): up to 64 rows the sm80 tiles, split K 16 ways of
    # 8 k-tiles (paths/sm80.py's narrow-weight rule: one row of tiles split 16 ways stays within 2.5 blocks per SM),
    # each split's partial summed by the second kernel; the 16-row tiles too, whose grids are too few tiles for the
    # serial sum. The GEMM and its reduction kernel launch as programmatic dependents.
    if not _sm90_runs_here():
        pytest.skip("needs the sm90 layout on this GPU")
    K, G = 8192, 128
    ckpt = random_checkpoint(K, N, G, torch.float16)
    packed = mixgemm.prepack(ckpt["qweight"], ckpt["scales"], ckpt["qzeros"], G, layout="sm90")
    config = ops.resolve_config(M, packed, "auto")
    # The rule's pick is a tile of the full set (a reduced build falls back to what it has: the run below only), on a
    # GPU of 132 SMs (the H100 and H200 the rule was measured on; both keep 16 splits of 20 tiles within their bounds).
    tiles = {(c.tile_m, c.tile_n) for c in mixgemm.compiled_configs(torch.float16, 4, path="sm80", layout="sm90")}
    full_set = {(t[0], t[1]) for t in kernel_sets().SM80_ON_SM90_LAYOUT_FULL} <= tiles
    if full_set and torch.cuda.get_device_properties(DEVICE).multi_processor_count == 132:
        assert (config.path, config.split_k, config.split_k_mode) == ("sm80", 16, "parallel"), config.name
        assert config.name.startswith("16x128" if M <= 16 else "32x128"), config.name
    x = random_activations(M, K, torch.float16)
    poison_allocator(M * N * 4 * 16)
    out = mixgemm.gemm(x, packed)
    torch.cuda.synchronize()
    assert torch.isfinite(out).all()
    assert relative_error(out, x.double() @ reference_weight(ckpt, G)) < MATH_TOL[torch.float16], config.name
