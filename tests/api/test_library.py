"""CPU tests of the torch.library custom ops (mixgemm.library), QuantLinear (mixgemm.nn) and config names.

Without a GPU the real kernels cannot run, so three things are checked separately:

* registration and schemas, and the fake implementations under FakeTensorMode with *CUDA* fake tensors
  (FakeTensorMode fakes a CUDA device without one) and on the meta device;
* that an eager call with CPU tensors reaches the validated entry points through the dispatcher and raises
  their ValueError unchanged;
* the plumbing around the kernel (argument unpacking, act-order gather, QuantLinear buffers, safetensors
  reading, torch.compile tracing without graph breaks) end to end, with the kernel entry points that the ops
  call (``ops.gemm``, ``packing.prepack``) replaced by their pure-PyTorch references from mixgemm.layouts.sm80.
"""

from __future__ import annotations

import pytest
import torch
from safetensors.torch import save_file
from torch._subclasses.fake_tensor import FakeTensorMode

import mixgemm
from mixgemm import formats, library, ops, packing, paths
from mixgemm.bench import cli
from mixgemm.layouts.sm80 import dequantize_packed_reference, prepack_awq_reference
from mixgemm.nn import QuantLinear, read_checkpoint_tensors
from mixgemm.paths import DecodeConfig, DequantConfig, GemmConfig, Sm80Config, Sm90Config

F16, BF16, I32 = torch.float16, torch.bfloat16, torch.int32
K, N, G = 256, 128, 64
A_CONFIG = Sm80Config(16, 128, 64, 16, 32, 64, 4, 4, "serial")


def awq_shapes(k=K, n=N, g=G, dtype=F16, device="cpu"):
    """Zero AWQ tensors of the right shapes (values do not matter where nothing is computed)."""
    return (torch.zeros(k, n // 8, dtype=I32, device=device), torch.zeros(k // g, n, dtype=dtype, device=device),
            torch.zeros(k // g, n // 8, dtype=I32, device=device))


def packed_shapes(k=K, n=N, g=G, dtype=F16, device="cpu"):
    """(packed, scales, offsets) of our layout, zero-filled."""
    return (torch.zeros(n // 64, k // 16, 32, 4, dtype=I32, device=device),
            torch.zeros(k // g, n, dtype=dtype, device=device), torch.zeros(k // g, n, dtype=dtype, device=device))


# ---------------------------------------------------------------------------------------------------
# Registration and schemas


def test_ops_are_registered_with_the_documented_schemas():
    schemas = {name: str(getattr(torch.ops.mixgemm, name).default._schema)
               for name in ("awq_dequantize", "awq_gemm_baseline", "gemm")}
    assert schemas == {
        "awq_dequantize": "mixgemm::awq_dequantize(Tensor qweight, Tensor scales, Tensor qzeros) -> Tensor",
        "awq_gemm_baseline": "mixgemm::awq_gemm_baseline(Tensor x, Tensor qweight, Tensor scales, Tensor qzeros, "
                             "int split_k_iters) -> Tensor",
        "gemm": "mixgemm::gemm(Tensor x, Tensor packed, Tensor scales, Tensor offsets, Tensor? bias, "
                'int group_size, int n, int k, str config, str layout="sm80", bool scale_only=False) -> Tensor',
    }
    for name in schemas:  # functional: nothing mutated, nothing aliased
        schema = getattr(torch.ops.mixgemm, name).default._schema
        assert not schema.is_mutable
        assert all(arg.alias_info is None for arg in schema.arguments)


def test_gemm_schema_defaults_read_an_sm80_weight_with_zero_points():
    schema = torch.ops.mixgemm.gemm.default._schema
    args = {a.name: a for a in schema.arguments}
    assert [a.name for a in schema.arguments][-2:] == ["layout", "scale_only"]
    assert (args["layout"].default_value, args["scale_only"].default_value) == ("sm80", False)
    # Calls written before layouts existed (nine arguments) still mean an sm80 weight.
    out = torch.ops.mixgemm.gemm(torch.empty(2, K, dtype=F16, device="meta"), *packed_shapes(device="meta"), None,
                                 G, N, K, "auto")
    assert tuple(out.shape) == (2, N)


def test_package_exports():
    assert mixgemm.library is library and mixgemm.nn.QuantLinear is QuantLinear
    assert {"library", "nn"} <= set(mixgemm.__all__)


# ---------------------------------------------------------------------------------------------------
# Fake implementations: the shapes torch.compile sees


def test_fake_tensor_mode_fakes_cuda_without_a_gpu():
    # The premise of the tests below (should a torch release stop allowing it, this test says so first;
    # test_fakes_also_serve_the_meta_device checks the same fakes without it).
    with FakeTensorMode():
        assert torch.empty(2, device="cuda").device.type == "cuda"


@pytest.mark.parametrize("dtype", [F16, BF16])
def test_fake_awq_dequantize(dtype):
    with FakeTensorMode():
        out = library.awq_dequantize(*awq_shapes(512, 192, 128, dtype, device="cuda"))
    assert (tuple(out.shape), out.dtype, out.device.type) == ((512, 192), dtype, "cuda")


def test_fake_awq_gemm_baseline():
    with FakeTensorMode():
        x = torch.empty(7, K, dtype=F16, device="cuda")
        out = library.awq_gemm_baseline(x, *awq_shapes(device="cuda"), split_k_iters=4)
    assert (tuple(out.shape), out.dtype, out.device.type) == ((7, N), F16, "cuda")


@pytest.mark.parametrize("lead", [(), (5,), (2, 3)])
@pytest.mark.parametrize("dtype", [F16, BF16])
@pytest.mark.parametrize("with_bias", [False, True])
def test_fake_gemm(lead, dtype, with_bias):
    with FakeTensorMode():
        weight = packing.PackedWeight(*packed_shapes(dtype=dtype, device="cuda"), G, 4, dtype, N, K)
        x = torch.empty(*lead, K, dtype=dtype, device="cuda")
        bias = torch.empty(N, dtype=dtype, device="cuda") if with_bias else None
        out = library.gemm(x, weight, bias, config=A_CONFIG)
    assert (tuple(out.shape), out.dtype, out.device.type) == ((*lead, N), dtype, "cuda")


def test_fake_gemm_with_act_order_gathers_x():
    with FakeTensorMode():
        perm = torch.empty(K, dtype=torch.int64, device="cuda")
        weight = packing.PackedWeight(*packed_shapes(device="cuda"), G, 4, F16, N, K, perm)
        out = library.gemm(torch.empty(3, K, dtype=F16, device="cuda"), weight)
    assert tuple(out.shape) == (3, N) and out.device.type == "cuda"


def test_fakes_also_serve_the_meta_device():
    x = torch.empty(4, K, dtype=F16, device="meta")
    out = torch.ops.mixgemm.gemm(x, *packed_shapes(device="meta"), None, G, N, K, "auto")
    assert (tuple(out.shape), out.device.type) == ((4, N), "meta")
    assert tuple(torch.ops.mixgemm.awq_dequantize(*awq_shapes(device="meta")).shape) == (K, N)
    assert tuple(torch.ops.mixgemm.awq_gemm_baseline(x, *awq_shapes(device="meta"), 8).shape) == (4, N)


def test_fake_gemm_rejects_a_bad_config_name_at_trace_time():
    with FakeTensorMode(), pytest.raises(ValueError, match="invalid config '16x128'"):
        torch.ops.mixgemm.gemm(torch.empty(1, K, dtype=F16, device="cuda"),
                               *packed_shapes(device="cuda"), None, G, N, K, "16x128")


# ---------------------------------------------------------------------------------------------------
# Eager calls through the dispatcher keep the entry points' ValueErrors


def test_eager_awq_dequantize_error_names_the_argument():
    with pytest.raises(ValueError, match=r"^awq_dequantize: qweight must be on a CUDA device"):
        library.awq_dequantize(*awq_shapes())
    qweight, scales, qzeros = awq_shapes()
    with pytest.raises(ValueError, match=r"^awq_dequantize: qweight must have dtype int32"):
        torch.ops.mixgemm.awq_dequantize(qweight.float(), scales, qzeros)


def test_eager_awq_gemm_baseline_error_names_the_argument():
    with pytest.raises(ValueError, match=r"^baseline.awq_gemm: x must be on a CUDA device"):
        library.awq_gemm_baseline(torch.zeros(3, K, dtype=F16), *awq_shapes())


def test_eager_gemm_errors_name_the_argument():
    weight = packing.PackedWeight(*packed_shapes(), G, 4, F16, N, K)
    with pytest.raises(ValueError, match=r"^gemm: x must be on a CUDA device"):
        library.gemm(torch.zeros(2, K, dtype=F16), weight)
    with pytest.raises(ValueError, match=r"^gemm: x.shape\[-1\] must equal the weight's K = 256"):
        library.gemm(torch.zeros(2, K + 16, dtype=F16), weight)
    with pytest.raises(ValueError, match="invalid config 'fastest'"):
        library.gemm(torch.zeros(2, K, dtype=F16), weight, config="fastest")


def test_eager_errors_past_the_device_rule(cpu_as_cuda):
    x = torch.zeros(3, K, dtype=F16)
    with pytest.raises(ValueError, match=r"^baseline.awq_gemm: split_k_iters must be a positive int, got 0"):
        library.awq_gemm_baseline(x, *awq_shapes(), split_k_iters=0)
    with pytest.raises(ValueError, match=r"^gemm: bias must have shape \(128,\)"):
        torch.ops.mixgemm.gemm(x, *packed_shapes(), torch.zeros(N + 1, dtype=F16), G, N, K, "auto")
    with pytest.raises(ValueError, match=r"^gemm: packed.scales must have shape \(8, 128\) .*, got \(4, 128\)"):
        torch.ops.mixgemm.gemm(x, *packed_shapes(), None, G // 2, N, K, "auto")
    # Valid calls: the device-level RuntimeError comes through the dispatcher unchanged too.
    with pytest.raises(RuntimeError, match="no CUDA GPU"):
        library.gemm(x, packing.PackedWeight(*packed_shapes(), G, 4, F16, N, K), config=A_CONFIG)
    with pytest.raises(RuntimeError, match="no CUDA GPU"):
        library.awq_dequantize(*awq_shapes())


def test_gemm_wrapper_argument_errors():
    weight = packing.PackedWeight(*packed_shapes(), G, 4, F16, N, K)
    x = torch.zeros(2, K, dtype=F16)
    with pytest.raises(ValueError, match=r"^gemm: packed must be a PackedWeight"):
        library.gemm(x, packed_shapes()[0])
    with pytest.raises(ValueError, match=r"^gemm: config must be 'auto', a path name, a GemmConfig or a config "
                                         r"name, got int"):
        library.gemm(x, weight, config=3)
    with pytest.raises(ValueError, match=r"^gemm: packed disagrees with its tensors: .* act_dtype = torch.bfloat16"):
        library.gemm(x, packing.PackedWeight(*packed_shapes(), G, 4, BF16, N, K))
    with pytest.raises(ValueError, match=r"^gemm: packed disagrees with its tensors: bits = 8 with packed shape"):
        library.gemm(x, packing.PackedWeight(*packed_shapes(), G, 8, F16, N, K))
    act_order = packing.PackedWeight(*packed_shapes(), G, 4, F16, N, K, torch.arange(K))
    with pytest.raises(ValueError, match=r"^gemm: x must be a tensor \[\.\.\., K\] with K = 256"):
        library.gemm(torch.zeros(2, K - 16, dtype=F16), act_order)


# ---------------------------------------------------------------------------------------------------
# Config names (mixgemm.paths.from_name / to_name: what the op's string config and the profiler's flag use)


def test_config_names_round_trip():
    tiles = [Sm80Config(16, 256, 64, 16, 64, 64, 3), Sm80Config(128, 256, 64, 64, 64, 64, 5),
             Sm80Config(32, 128, 128, 32, 32, 128, 2)]
    configs = [c.with_split_k(k, mode) for c in tiles
               for k, mode in [(1, "none"), (2, "serial"), (16, "parallel"), (264, "streamk")]]
    # One config of every other path too: each path's name, split included, parses back to it.
    configs += [DecodeConfig(8, 4), DecodeConfig(16, 8, 4), Sm90Config(128, 128, 1, 1, "coop", "persistent"),
                Sm90Config(64, 128, 2, 1, "pingpong", "streamk", 2, "serial"),
                Sm90Config(128, 128, 1, 1, "coop", "streamk", 4, "reduce_scatter"), DequantConfig()]
    for config in configs:
        assert paths.from_name(config.name) == config
        assert paths.to_name(config) == config.name == paths.to_name(config.name)
        assert cli.parse_config(config.name) == config  # the profiler's flag uses the same parser
        assert library.parse_config(config.name) == config  # and so does the custom op's string config
    assert paths.from_name("auto") == "auto" == paths.to_name("auto")
    for path in ("sm80", "decode", "sm90", "dequant"):  # a path's name: its heuristic's choice, kept as the name
        assert paths.from_name(path) == path == paths.to_name(path) == library.parse_config(path)
    assert paths.from_name(" 16x128x64_w16x32x64_s4_k4p ") == Sm80Config(16, 128, 64, 16, 32, 64, 4, 4, "parallel")


@pytest.mark.parametrize("name, message", [
    ("16x128", "invalid config '16x128'"),
    ("16x128x64_w16x32x64_s4_k4x", "invalid config"),
    ("AUTO", "invalid config"),
    ("SM80", "invalid config"),
    ("16x128x64_w16x32x64_s4_k1s", "split_k == 1 needs split_k_mode 'none'"),
    ("gemv_8x64x256_w8x64x64_s2", "invalid config 'gemv_8x64x256_w8x64x64_s2'"),  # the old decode names are gone
    ("decode_m8_w4_k4p", "the decode path splits K serially only"),
])
def test_bad_config_names(name, message):
    with pytest.raises(ValueError, match=message):
        paths.from_name(name)


def test_to_name_rejects_other_types():
    with pytest.raises(ValueError, match="got int"):
        paths.to_name(7)


# ---------------------------------------------------------------------------------------------------
# The plumbing end to end on the CPU, with the kernels' pure-PyTorch references standing in


def reference_gemm(x, packed, bias=None, config="auto"):
    """ops.gemm's math on the CPU. The op must hand it the weight in kernel K order and a parsed config."""
    assert packed.perm is None, "the library wrapper gathers x itself; the op's weight carries no perm"
    assert config == "auto" or isinstance(config, GemmConfig)
    w = dequantize_packed_reference(packed.packed, packed.scales, packed.offsets, packed.group_size, torch.float32)
    y = x.float() @ w
    return (y if bias is None else y + bias.float()).to(packed.act_dtype)


def reference_prepack(qweight, scales, qzeros=None, group_size=None, *, format="awq", gptq_v1=None, g_idx=None,
                      bits=4):
    """packing.prepack's result on the CPU (AWQ and plain GPTQ; act-order is the GPU tests' business)."""
    assert g_idx is None and bits == 4
    if format in ("gptq", "gptq_v2"):
        v1 = packing.gptq_reads_v1("prepack", format, gptq_v1)
        qweight, qzeros = formats.gptq_to_awq(qweight, qzeros, v1=v1)
    group_size = group_size or qweight.shape[0] // scales.shape[0]
    packed, s, o = prepack_awq_reference(qweight, scales, qzeros, group_size)
    return packing.PackedWeight(packed, s, o, group_size, 4, scales.dtype, scales.shape[1], qweight.shape[0])


@pytest.fixture
def cpu_kernels(monkeypatch):
    monkeypatch.setattr(ops, "gemm", reference_gemm)
    monkeypatch.setattr(packing, "prepack", reference_prepack)


def random_layer(dtype=F16, k=K, n=N, g=G, seed=0):
    gen = torch.Generator().manual_seed(seed)
    ckpt = formats.random_awq_weight(k, n, g, dtype=dtype, generator=gen)
    ckpt["bias"] = torch.randn(n, generator=gen).to(dtype)
    return ckpt


def math_reference(x, ckpt, g=G):
    """x @ ((q - z) * s) + bias in float64."""
    w = formats.dequantize(formats.unpack_awq(ckpt["qweight"]), ckpt["scales"], formats.unpack_awq(ckpt["qzeros"]),
                           group_size=g)
    return x.double() @ w + ckpt["bias"].double()


def rel_err(out, ref):
    return (torch.linalg.vector_norm(out.double() - ref) / torch.linalg.vector_norm(ref)).item()


def test_library_gemm_act_order_gathers_x_before_the_op(cpu_kernels):
    ckpt = random_layer()
    weight = reference_prepack(ckpt["qweight"], ckpt["scales"], ckpt["qzeros"])
    perm = torch.randperm(K, generator=torch.Generator().manual_seed(1))
    x = torch.randn(3, K).to(F16)
    permuted = packing.PackedWeight(weight.packed, weight.scales, weight.offsets, G, 4, F16, N, K, perm)
    assert torch.equal(library.gemm(x, permuted), library.gemm(x[:, perm], weight))


def test_op_takes_the_bit_width_from_the_packed_shape(monkeypatch):
    seen = []
    monkeypatch.setattr(ops, "gemm", lambda x, packed, bias, config: seen.append(packed.bits) or x.new_zeros(1, N))
    int8_packed = torch.zeros(N // 64, K // 16, 32, 8, dtype=I32)  # 8 words per lane: int8
    x = torch.zeros(1, K, dtype=F16)
    library.gemm(x, packing.PackedWeight(*packed_shapes(), G, 4, F16, N, K))
    library.gemm(x, packing.PackedWeight(int8_packed, *packed_shapes()[1:], G, 8, F16, N, K))
    assert seen == [4, 8]


def sm90_shapes(bits=4, dtype=F16, device="cpu"):
    """(packed, scales, offsets) of the sm90 layout, zero-filled: packed [K/16, N/16, 32, bits/4]."""
    return (torch.zeros(K // 16, N // 16, 32, bits // 4, dtype=I32, device=device),
            torch.zeros(K // G, N, dtype=dtype, device=device), torch.zeros(K // G, N, dtype=dtype, device=device))


def test_bits_of_each_layout():
    # Words per lane: per 16 x 64 block in the sm80 layout (4 / 8), per 16 x 16 block in the sm90 one (1 / 2).
    assert library._bits_of(packed_shapes()[0]) == library._bits_of(packed_shapes()[0], "sm80") == 4
    assert library._bits_of(torch.zeros(2, 16, 32, 8, dtype=I32), "sm80") == 8
    assert library._bits_of(sm90_shapes(4)[0], "sm90") == 4
    assert library._bits_of(sm90_shapes(8)[0], "sm90") == 8
    # Malformed: 4, so that gemm's shape check names the problem.
    assert library._bits_of(sm90_shapes(8)[0], "sm80") == 4
    assert library._bits_of(torch.zeros(2, 16, 32, 8, dtype=I32), "sm90") == 4
    assert library._bits_of(sm90_shapes(4)[0], "sm91") == 4
    assert library._bits_of(torch.zeros(8, dtype=I32), "sm90") == 4


@pytest.mark.parametrize("bits", [4, 8])
@pytest.mark.parametrize("scale_only", [False, True])
def test_the_op_carries_the_layout_and_scale_only(monkeypatch, bits, scale_only):
    seen = []

    def recording_gemm(x, packed, bias, config):
        seen.append((packed.layout, packed.scale_only, packed.bits, packed.perm, config))
        return x.new_zeros(*x.shape[:-1], N)

    monkeypatch.setattr(ops, "gemm", recording_gemm)
    x = torch.zeros(3, K, dtype=F16)
    weight = packing.PackedWeight(*sm90_shapes(bits), G, bits, F16, N, K, layout="sm90", scale_only=scale_only)
    library.gemm(x, weight)  # eager: straight to ops.gemm with the caller's weight
    assert seen[-1] == ("sm90", scale_only, bits, None, "auto")
    # Through the dispatcher: the op rebuilds the weight from its arguments.
    torch.ops.mixgemm.gemm(x, *sm90_shapes(bits), None, G, N, K, A_CONFIG.name, "sm90", scale_only)
    assert seen[-1] == ("sm90", scale_only, bits, None, A_CONFIG)
    torch.ops.mixgemm.gemm(x, *sm90_shapes(bits), None, G, N, K, "auto", layout="sm90", scale_only=scale_only)
    assert seen[-1][:3] == ("sm90", scale_only, bits)
    torch.ops.mixgemm.gemm(x, *packed_shapes(), None, G, N, K, "auto")  # the defaults
    assert seen[-1][:3] == ("sm80", False, 4)
    # gemm_tensors (what QuantLinear calls) and an act-order weight (the wrapper gathers x, then the op).
    library.gemm_tensors(x, *sm90_shapes(bits), None, group_size=G, n=N, k=K, layout="sm90", scale_only=scale_only)
    assert seen[-1][:3] == ("sm90", scale_only, bits)
    act_order = packing.PackedWeight(*sm90_shapes(bits), G, bits, F16, N, K, torch.arange(K).flip(0), layout="sm90",
                                     scale_only=scale_only)
    library.gemm(x, act_order, config=A_CONFIG)
    assert seen[-1] == ("sm90", scale_only, bits, None, A_CONFIG)
    assert len(seen) == 6


def test_a_path_name_reaches_ops_gemm_as_given(monkeypatch):
    # config="decode" (a path's name: that path's heuristic choice) crosses every wrapper and the op's string
    # argument unchanged; ops.gemm resolves it.
    seen = []
    monkeypatch.setattr(ops, "gemm", lambda x, packed, bias, config: seen.append(config) or x.new_zeros(1, N))
    x = torch.zeros(1, K, dtype=F16)
    weight = packing.PackedWeight(*packed_shapes(), G, 4, F16, N, K)
    library.gemm(x, weight, config="decode")
    torch.ops.mixgemm.gemm(x, *packed_shapes(), None, G, N, K, "dequant")
    library.gemm_tensors(x, *packed_shapes(), None, group_size=G, n=N, k=K, config="sm80")
    library.gemm(x, packing.PackedWeight(*packed_shapes(), G, 4, F16, N, K, torch.arange(K)), config="sm90")
    assert seen == ["decode", "dequant", "sm80", "sm90"]
    with FakeTensorMode():  # and the fake accepts it at trace time
        out = torch.ops.mixgemm.gemm(torch.empty(1, K, dtype=F16, device="cuda"), *packed_shapes(device="cuda"),
                                     None, G, N, K, "decode")
    assert tuple(out.shape) == (1, N)


def test_fake_gemm_of_an_sm90_weight():
    with FakeTensorMode():
        weight = packing.PackedWeight(*sm90_shapes(device="cuda"), G, 4, F16, N, K, layout="sm90", scale_only=True)
        out = library.gemm(torch.empty(2, 5, K, dtype=F16, device="cuda"), weight, config=A_CONFIG)
    assert (tuple(out.shape), out.dtype, out.device.type) == ((2, 5, N), F16, "cuda")


def test_gemm_wrapper_checks_bits_against_the_sm90_packed_shape():
    x = torch.zeros(2, K, dtype=F16)
    with pytest.raises(ValueError, match=r"^gemm: packed disagrees with its tensors: bits = 8 with packed shape "
                                         r"\(16, 8, 32, 1\)"):
        library.gemm(x, packing.PackedWeight(*sm90_shapes(4), G, 8, F16, N, K, layout="sm90"))
    with pytest.raises(ValueError, match=r"^gemm: packed disagrees with its tensors: bits = 4 with packed shape "
                                         r"\(16, 8, 32, 2\)"):
        library.gemm(x, packing.PackedWeight(*sm90_shapes(8), G, 4, F16, N, K, layout="sm90"))


@pytest.mark.parametrize("dtype", [F16, BF16])
def test_quant_linear_from_safetensors_matches_dense(cpu_kernels, tmp_path, dtype):
    ckpt = random_layer(dtype)
    path = tmp_path / "layer.safetensors"
    save_file({f"model.proj.{name}": t for name, t in ckpt.items()}, str(path))
    layer = QuantLinear.from_safetensors(path, "model.proj", device="cpu")
    assert (layer.in_features, layer.out_features, layer.group_size, layer.dtype) == (K, N, G, dtype)
    x = torch.randn(2, 3, K).to(dtype)
    out = layer(x)
    assert out.shape == (2, 3, N) and out.dtype == dtype
    assert rel_err(out, math_reference(x, ckpt)) < {F16: 3e-3, BF16: 2e-2}[dtype]


# (how the file stores its zeros, the from_safetensors arguments that read it)
GPTQ_READINGS = [
    (True, {"format": "gptq"}),  # the default: v1, as AutoGPTQ / GPTQModel write it
    (False, {"format": "gptq_v2"}),
    (True, {"format": "gptq", "v1": True}),  # the older explicit keyword still works
    (False, {"format": "gptq", "v1": False}),
]


@pytest.mark.parametrize("stored_v1,kwargs", GPTQ_READINGS)
def test_quant_linear_from_gptq_matches_from_awq(cpu_kernels, tmp_path, stored_v1, kwargs):
    ckpt = random_layer()
    gq, gz = formats.awq_to_gptq(ckpt["qweight"], ckpt["qzeros"], v1=stored_v1)
    path = tmp_path / "gptq.safetensors"
    save_file({"l.qweight": gq, "l.qzeros": gz, "l.scales": ckpt["scales"], "l.bias": ckpt["bias"]}, str(path))
    x = torch.randn(5, K).to(F16)
    from_awq = QuantLinear.from_awq(ckpt["qweight"], ckpt["scales"], ckpt["qzeros"], ckpt["bias"])
    from_file = QuantLinear.from_safetensors(path, "l", device="cpu", **kwargs)
    assert torch.equal(from_file(x), from_awq(x))


def test_gptq_v1_file_read_with_defaults_is_right_and_v2_reading_is_not(cpu_kernels, tmp_path):
    """The issue's case: a v1 file (zeros stored z - 1) loaded with every default must match the math."""
    ckpt = random_layer()
    gq, gz = formats.awq_to_gptq(ckpt["qweight"], ckpt["qzeros"], v1=True)
    path = tmp_path / "v1.safetensors"
    save_file({"l.qweight": gq, "l.qzeros": gz, "l.scales": ckpt["scales"], "l.bias": ckpt["bias"]}, str(path))
    x = torch.randn(4, K).to(F16)
    ref = math_reference(x, ckpt)
    assert rel_err(QuantLinear.from_safetensors(path, "l", format="gptq", device="cpu")(x), ref) < 3e-3
    assert rel_err(QuantLinear.from_gptq(gq, ckpt["scales"], gz, bias=ckpt["bias"])(x), ref) < 3e-3
    # Read as gptq_v2 every weight is off by one scale step: far from the reference.
    assert rel_err(QuantLinear.from_safetensors(path, "l", format="gptq_v2", device="cpu")(x), ref) > 0.05


def test_from_safetensors_names_the_device_without_cuda(tmp_path, monkeypatch):
    path = tmp_path / "layer.safetensors"
    save_file({f"l.{name}": t for name, t in random_layer().items()}, str(path))
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(ValueError, match=r"^QuantLinear.from_safetensors: device='cuda' asks for a CUDA device, but"):
        QuantLinear.from_safetensors(path, "l")
    with pytest.raises(ValueError, match=r"^QuantLinear.from_safetensors: device must be a torch.device"):
        QuantLinear.from_safetensors(path, "l", device="gpu0")


def test_quant_linear_buffers_repr_and_state_dict(cpu_kernels):
    ckpt = random_layer()
    layer = QuantLinear.from_awq(ckpt["qweight"], ckpt["scales"], ckpt["qzeros"], ckpt["bias"].float())
    assert layer.bias.dtype == F16  # converted to the activation dtype once, at construction
    assert set(layer.state_dict()) == {"packed", "scales", "offsets", "bias"}  # perm None: not saved
    assert repr(layer) == ("QuantLinear(in_features=256, out_features=128, group_size=64, dtype=torch.float16, "
                           "bias=True)")
    layer.config = A_CONFIG
    assert "config=16x128x64_w16x32x64_s4_k4s" in repr(layer)
    weight = layer.packed_weight()
    assert weight.packed is layer.packed and (weight.n, weight.k, weight.perm) == (N, K, None)

    perm = torch.arange(K).flip(0)
    act_order = QuantLinear(packing.PackedWeight(*packed_shapes(), G, 4, F16, N, K, perm))
    assert act_order.perm is perm and "perm" in act_order.state_dict()
    assert repr(act_order).endswith("bias=False, act_order=True)")


@pytest.fixture
def prepack_calls(monkeypatch):
    """packing.prepack replaced by one that records its keyword arguments (returned list) and returns a
    fixed PackedWeight."""
    calls = []

    def recording_prepack(*args, **kwargs):
        calls.append(kwargs)
        return packing.PackedWeight(*packed_shapes(), G, 4, F16, N, K)

    monkeypatch.setattr(packing, "prepack", recording_prepack)
    return calls


def test_from_gptq_passes_act_order_and_bits_to_prepack(prepack_calls, tmp_path):
    calls = prepack_calls
    QuantLinear.from_gptq(*awq_shapes())
    QuantLinear.from_gptq(*awq_shapes(), g_idx=torch.zeros(K, dtype=I32), v1=True, bits=8)
    # Only what differs from the defaults is passed, so older prepack signatures keep working.
    assert calls[0] == {"format": "gptq"}  # v1 zeros: prepack's own default for format="gptq"
    assert set(calls[1]) == {"format", "gptq_v1", "g_idx", "bits"} and calls[1]["bits"] == 8 and calls[1]["gptq_v1"]
    with pytest.raises(ValueError, match="AWQ checkpoints are 4-bit, got bits = 8"):
        QuantLinear.from_safetensors(tmp_path / "unread.safetensors", "layer", bits=8)


@pytest.mark.parametrize("layout", ["sm80", "sm90"])
def test_constructors_pass_a_layout_to_prepack_only_when_chosen(prepack_calls, tmp_path, layout):
    calls = prepack_calls
    QuantLinear.from_awq(*awq_shapes())
    QuantLinear.from_gptq(*awq_shapes())
    QuantLinear.from_awq(*awq_shapes(), layout=layout)
    QuantLinear.from_gptq(*awq_shapes(), layout=layout, bits=8)
    path = tmp_path / "layer.safetensors"
    save_file({f"l.{name}": t for name, t in random_layer().items()}, str(path))
    QuantLinear.from_safetensors(path, "l", device="cpu")
    QuantLinear.from_safetensors(path, "l", device="cpu", layout=layout)
    QuantLinear.from_safetensors(path, "l", format="gptq", device="cpu", layout=layout)
    # "auto" (the default) leaves prepack's own default in charge: no keyword at all.
    assert ["layout" in c for c in calls] == [False, False, True, True, False, True, True]
    assert all(c["layout"] == layout for c in calls if "layout" in c)
    assert calls[3] == {"format": "gptq", "bits": 8, "layout": layout}


def test_quant_linear_keeps_the_weights_layout_and_scale_only(cpu_kernels):
    weight = packing.PackedWeight(*sm90_shapes(), G, 4, F16, N, K, layout="sm90", scale_only=True)
    layer = QuantLinear(weight, torch.zeros(N))
    assert (layer.layout, layer.scale_only) == ("sm90", True)
    assert repr(layer) == ("QuantLinear(in_features=256, out_features=128, group_size=64, dtype=torch.float16, "
                           "bias=True, layout=sm90)")
    back = layer.packed_weight()
    assert (back.layout, back.scale_only, back.bits) == ("sm90", True, 4) and back.packed is layer.packed
    # Not buffers: the state dict is the sm80 layer's, and a layout is a property of the packed buffer.
    assert set(layer.state_dict()) == {"packed", "scales", "offsets", "bias"}
    plain = QuantLinear(packing.PackedWeight(*packed_shapes(), G, 4, F16, N, K))
    assert (plain.layout, plain.scale_only) == ("sm80", False) and "layout" not in repr(plain)


def test_quant_linear_eager_weight_follows_its_layout_attributes(monkeypatch):
    seen = []
    monkeypatch.setattr(ops, "gemm", lambda x, packed, bias, config: seen.append(packed) or x.new_zeros(1, N))
    layer = QuantLinear(packing.PackedWeight(*sm90_shapes(), G, 4, F16, N, K, layout="sm90", scale_only=True))
    x = torch.zeros(1, K, dtype=F16)
    layer(x)
    layer(x)
    assert seen[0] is seen[1] and (seen[0].layout, seen[0].scale_only) == ("sm90", True)  # kept between calls
    layer.scale_only = False  # a changed attribute rebuilds the weight gemm sees
    layer(x)
    assert seen[2] is not seen[1] and (seen[2].layout, seen[2].scale_only) == ("sm90", False)
    layer(x)
    assert seen[3] is seen[2]
    layer._apply(torch.clone)  # what .to()/.cuda() do: new buffers written into _buffers, no __setattr__
    layer(x)
    assert seen[4] is not seen[3] and seen[4].packed is layer.packed and seen[4].scales is layer.scales


def test_quant_linear_argument_errors():
    weight = packing.PackedWeight(*packed_shapes(), G, 4, F16, N, K)
    with pytest.raises(ValueError, match=r"^QuantLinear: bias must be a tensor of shape \(128,\), got \(64,\)"):
        QuantLinear(weight, torch.zeros(64))
    with pytest.raises(ValueError, match="invalid config 'fast'"):
        QuantLinear(weight, config="fast")
    with pytest.raises(ValueError, match=r"^QuantLinear: packed_weight must be a PackedWeight"):
        QuantLinear(packed_shapes()[0])


def test_quant_linear_takes_non_contiguous_input(cpu_kernels):
    ckpt = random_layer()
    layer = QuantLinear.from_awq(ckpt["qweight"], ckpt["scales"], ckpt["qzeros"])
    x = torch.randn(K, 4).to(F16).t()  # a transposed view, as nn.Linear accepts
    assert torch.equal(layer(x), layer(x.contiguous()))


# ---------------------------------------------------------------------------------------------------
# torch.compile traces the wrappers in one graph (the stand-in kernels run the compiled graph on the CPU)


def test_compile_fullgraph_library_gemm(cpu_kernels):
    ckpt = random_layer()
    weight = reference_prepack(ckpt["qweight"], ckpt["scales"], ckpt["qzeros"])
    perm = torch.randperm(K, generator=torch.Generator().manual_seed(2))
    act_order = packing.PackedWeight(weight.packed, weight.scales, weight.offsets, G, 4, F16, N, K, perm)
    bias = ckpt["bias"]

    def f(x):
        return library.gemm(x, weight, bias, config=A_CONFIG) + library.gemm(x, act_order, config=A_CONFIG.name)

    torch._dynamo.reset()
    try:
        compiled = torch.compile(f, fullgraph=True, backend="aot_eager")
        for m in (1, 6, 9):  # a second and third M: recompiled with a dynamic M through the fakes
            x = torch.randn(m, K).to(F16)
            assert torch.equal(compiled(x), f(x))
    finally:
        torch._dynamo.reset()


def test_compile_fullgraph_quant_linear_model(cpu_kernels):
    first, second = random_layer(seed=3), random_layer(k=N, n=K, seed=4)
    model = torch.nn.Sequential(
        QuantLinear.from_awq(first["qweight"], first["scales"], first["qzeros"], first["bias"]),
        torch.nn.SiLU(),
        QuantLinear.from_awq(second["qweight"], second["scales"], second["qzeros"], second["bias"],
                             config=A_CONFIG),
    )
    torch._dynamo.reset()
    try:
        compiled = torch.compile(model, fullgraph=True, backend="aot_eager")
        x = torch.randn(2, 5, K).to(F16)
        assert torch.equal(compiled(x), model(x))
    finally:
        torch._dynamo.reset()


# ---------------------------------------------------------------------------------------------------
# Reading a layer from a safetensors file


def write_layer(tmp_path, names, prefix="model.layers.0.mlp.down_proj", extra=()):
    tensors = {f"{prefix}.{name}": torch.zeros(2, 2, dtype=I32) for name in names}
    tensors.update({key: torch.zeros(1) for key in extra})
    path = tmp_path / "ckpt.safetensors"
    save_file(tensors, str(path))
    return path


@pytest.mark.parametrize("missing", ["qweight", "qzeros", "scales"])
@pytest.mark.parametrize("format", ["awq", "gptq"])
def test_missing_tensor_is_a_value_error_naming_the_key(tmp_path, missing, format):
    present = [n for n in ("qweight", "qzeros", "scales", "bias") if n != missing]
    path = write_layer(tmp_path, present)
    key = f"model.layers.0.mlp.down_proj.{missing}"
    with pytest.raises(ValueError, match=rf"^QuantLinear.from_safetensors: .*ckpt.safetensors has no tensor '{key}'"):
        read_checkpoint_tensors(path, "model.layers.0.mlp.down_proj", format)
    # The constructor reports it before it needs a GPU.
    with pytest.raises(ValueError, match=f"has no tensor '{key}'"):
        QuantLinear.from_safetensors(path, "model.layers.0.mlp.down_proj", format=format)


def test_wrong_prefix_lists_every_missing_key(tmp_path):
    path = write_layer(tmp_path, ["qweight", "qzeros", "scales"], extra=["lm_head.weight"])
    with pytest.raises(ValueError) as info:
        read_checkpoint_tensors(path, "model.layers.1.mlp.down_proj")
    message = str(info.value)
    for name in ("qweight", "qzeros", "scales"):
        assert f"'model.layers.1.mlp.down_proj.{name}'" in message
    assert "no tensor starts with 'model.layers.1.mlp.down_proj.'" in message


def test_reads_optional_tensors_when_present(tmp_path):
    prefix = "model.layers.0.mlp.down_proj"
    path = write_layer(tmp_path, ["qweight", "qzeros", "scales", "bias", "g_idx"])
    awq = read_checkpoint_tensors(path, prefix, "awq")
    assert set(awq) == {"qweight", "qzeros", "scales", "bias", "g_idx"}
    assert awq["bias"] is not None and awq["g_idx"] is None  # g_idx means nothing to an AWQ layer
    gptq = read_checkpoint_tensors(path, prefix + ".", "gptq")  # a trailing dot names the same layer
    assert gptq["g_idx"] is not None and gptq["qweight"].dtype == I32
    bare = read_checkpoint_tensors(write_layer(tmp_path, ["qweight", "qzeros", "scales"]), prefix, "gptq")
    assert bare["bias"] is None and bare["g_idx"] is None


def test_read_checkpoint_argument_errors(tmp_path):
    path = write_layer(tmp_path, ["qweight", "qzeros", "scales"])
    with pytest.raises(ValueError, match=r"format must be 'awq', 'gptq' \(v1 zeros\) or 'gptq_v2', got 'exl2'"):
        read_checkpoint_tensors(path, "model.layers.0.mlp.down_proj", "exl2")
    with pytest.raises(ValueError, match="prefix must name a layer"):
        read_checkpoint_tensors(path, "")
    with pytest.raises(FileNotFoundError):
        read_checkpoint_tensors(tmp_path / "absent.safetensors", "x")
