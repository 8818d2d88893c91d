"""QuantLinear's tp= / style= on the CPU (the kernels' references in place of prepack and gemm): the shard computes
its slice of the whole layer's output, loads from a safetensors file by slices, keeps QuantLinear's behaviour
(eager cache, repr, state_dict), and every bad argument is a ValueError naming it."""

from __future__ import annotations

import pytest
import torch

from mixgemm import ops, packing
from mixgemm.checkpoint import load_layer
from mixgemm.checkpoint.writer import layer_tensors, quantization_config, write_checkpoint
from mixgemm.nn import QuantLinear
from mixgemm.tensor_parallel import ShardSpec

from cpu_references import cpu_gemm, cpu_prepack
from tp_checkpoints import make_layer

F16 = torch.float16


@pytest.fixture(autouse=True)
def cpu_kernels(monkeypatch):
    def gemm(x, packed, bias=None, config="auto"):
        if packed.perm is not None:
            x = x.index_select(-1, packed.perm)
        return cpu_gemm(x, packed, bias, config)

    monkeypatch.setattr(ops, "gemm", gemm)
    monkeypatch.setattr(packing, "prepack", cpu_prepack)


def relative_error(out, ref) -> float:
    return (torch.linalg.vector_norm(out.double() - ref) / torch.linalg.vector_norm(ref)).item()


@pytest.mark.parametrize("N", [256, 144])  # 144: 72 columns per rank, padded to 128 and narrowed back
def test_column_shard_computes_its_columns(N):
    layer = make_layer("awq", 256, N, 64)
    t = layer.tensors
    x = torch.randn(5, 256).to(F16)
    expected = x.double() @ layer.dense() + layer.bias.double()
    for rank in range(2):
        part = QuantLinear.from_awq(t["qweight"], t["scales"], t["qzeros"], t["bias"], tp=(rank, 2), style="column")
        assert (part.in_features, part.out_features) == (256, N // 2)
        y = part(x)
        assert y.shape == (5, N // 2) and y.is_contiguous()
        assert relative_error(y, expected[:, rank * N // 2: (rank + 1) * N // 2]) < 3e-3
        part.config = "sm80"  # __setattr__ drops the eager cache; the shard still runs
        assert torch.equal(part(x), y)


def test_row_shard_of_world_one_is_the_whole_layer():
    layer = make_layer("gptq_act_order", 256, 128, 64)
    t = layer.tensors
    x = torch.randn(3, 256).to(F16)
    part = QuantLinear.from_gptq(t["qweight"], t["scales"], t["qzeros"], t["g_idx"], t["bias"],
                                 tp=ShardSpec(0, 1, "row"))
    assert relative_error(part(x), x.double() @ layer.dense() + layer.bias.double()) < 3e-3


def test_padded_k_gathers_the_input_and_keeps_the_gather_in_the_state_dict():
    # K = 160 is not a multiple of 64: each shard's weight gets 32 zero rows, and its input a gather to 192.
    layer = make_layer("awq", 160, 256, 32)
    t = layer.tensors
    x = torch.randn(3, 160).to(F16)
    part = QuantLinear.from_awq(t["qweight"], t["scales"], t["qzeros"], None, tp=(1, 2), style="column")
    assert (part.in_features, part.weight_k, part.out_features) == (160, 192, 128)
    assert torch.equal(part.state_dict()["input_index"][:160], torch.arange(160))
    assert "tp=(rank 1 of 2, column-parallel), padded_to=(192, 128)" in repr(part)
    assert relative_error(part(x), (x.double() @ layer.dense())[:, 128:]) < 3e-3
    with pytest.raises(ValueError, match=r"x must be a tensor \[..., 160\]"):
        part(torch.randn(3, 192).to(F16))


def test_from_safetensors_reads_its_shard(tmp_path):
    layer = make_layer("gptq_v1", 256, 256, 64)
    path = tmp_path / "layer.safetensors"
    from safetensors.torch import save_file

    save_file({f"l.{k}": v.contiguous() for k, v in layer.tensors.items() if v is not None}, str(path))
    x = torch.randn(4, 256).to(F16)
    expected = x.double() @ layer.dense() + layer.bias.double()
    part = QuantLinear.from_safetensors(path, "l", "gptq", device="cpu", tp=(1, 2), style="column")
    assert relative_error(part(x), expected[:, 128:]) < 3e-3


def test_load_layer_reads_its_shard(tmp_path):
    layer = make_layer("gptq_v1", 256, 256, 64)
    tensors = layer_tensors("compressed-tensors", layer.q, layer.scales, layer.zeros)
    write_checkpoint(tmp_path, {"model_type": "test"}, quantization_config("compressed-tensors", 4, 64, False),
                     {f"l.{k}": v for k, v in tensors.items()})
    x = torch.randn(4, 256).to(F16)
    part = load_layer(tmp_path, "l", device="cpu", tp=(0, 2), style="column")
    assert relative_error(part(x), (x.double() @ layer.dense())[:, :128]) < 3e-3


@pytest.mark.parametrize("kwargs, message", [
    (dict(style="column"), "style='column' given without tp="),
    (dict(tp=(0, 2)), "tp= needs style='column'"),
    (dict(tp=(2, 2), style="column"), "rank must lie in 0..1"),
    (dict(tp=(0, 2), style="diagonal"), "style must be 'column'"),
    (dict(tp="two", style="column"), "tp must be None, a (rank, world_size) pair"),
    (dict(tp=ShardSpec(0, 2, "row"), style="column"), "contradicts tp.style='row'"),
    (dict(tp=(0, 2), style="row"), "torch.distributed is not initialized"),
])
def test_bad_tensor_parallel_arguments(kwargs, message):
    t = make_layer("awq", 256, 256, 64).tensors
    with pytest.raises(ValueError) as error:
        QuantLinear.from_awq(t["qweight"], t["scales"], t["qzeros"], **kwargs)
    assert message in str(error.value)
