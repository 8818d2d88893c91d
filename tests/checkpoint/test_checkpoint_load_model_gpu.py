"""GPU test of whole-model loading's memory (issue 32): loading a transformers model through load_model peaks
at about its checkpoint's tensors (quantized layers + dense tensors) on the GPU, plus what prepacking one
layer needs while it runs, never at its fp16 weights; and the loaded model computes what the materialised
path (fp16 model on the GPU, then the swap) computes. Needs transformers (skipped without it)."""

from __future__ import annotations

import pytest
import torch

from mixgemm.checkpoint import (checkpoint_tensor_bytes, cuda_peak_memory, load_layer, load_model,
                                replace_quantized_linears)

from checkpoint_helpers import random_llama, tiny_llama_config, write_llama_checkpoint

pytestmark = pytest.mark.gpu
MiB = 1 << 20
LARGEST_LAYER = "model.layers.0.mlp.down_proj"  # 2816 x 1024, as large as gate_proj and up_proj


def prepack_work_bytes(folder) -> int:
    """What loading the largest layer needs beyond the layer it leaves: its checkpoint tensors on their way to
    prepack and prepack's own work space. Loading a model holds this for one layer at a time at most."""
    with cuda_peak_memory() as memory:
        layer = load_layer(folder, LARGEST_LAYER)
    del layer
    return memory.peak - memory.after


def test_load_model_peak_memory_is_the_checkpoint_not_the_fp16_model(tmp_path):
    pytest.importorskip("transformers")
    config = tiny_llama_config(hidden_size=1024, intermediate_size=2816, num_hidden_layers=4, num_attention_heads=16,
                               num_key_value_heads=4, vocab_size=8192)
    source = random_llama(config, seed=int(torch.randint(0, 1000, (1,))))  # on the CPU
    fp16_bytes = sum(p.numel() * p.element_size() for p in source.parameters())
    write_llama_checkpoint(tmp_path, source, "gptq", group_size=128, symmetric=True, max_shard_bytes=8 << 20)
    checkpoint = checkpoint_tensor_bytes(tmp_path)
    del source
    one_layer_work = prepack_work_bytes(tmp_path)
    torch.cuda.empty_cache()

    with cuda_peak_memory() as memory:
        model, report = load_model(tmp_path, device="cuda")
    held = memory.after - memory.before
    print(f"load_model peak {memory.peak_increase / MiB:.1f} MiB, held after {held / MiB:.1f} MiB; checkpoint"
          f" {checkpoint.quantized / MiB:.1f} MiB quantized + {checkpoint.dense / MiB:.1f} MiB dense; "
          f"one layer's prepack work {one_layer_work / MiB:.1f} MiB; the fp16 model {fp16_bytes / MiB:.1f} MiB")
    assert len(report.replaced) == 28 and report.missing == []
    assert held <= 1.1 * checkpoint.total
    assert memory.peak_increase <= 1.1 * checkpoint.total + one_layer_work + 2 * MiB
    assert all(t.device.type == "cuda" for t in list(model.parameters()) + list(model.buffers()))

    # The same numbers as the README's materialised path.
    materialised = random_llama(config, seed=1).cuda()
    replace_quantized_linears(materialised, tmp_path)
    ids = torch.randint(0, config.vocab_size, (2, 16), device="cuda")
    with torch.no_grad():
        ours, theirs = model(input_ids=ids).logits, materialised(input_ids=ids).logits
    assert torch.isfinite(ours).all()
    assert (torch.linalg.vector_norm((ours - theirs).double()) / torch.linalg.vector_norm(theirs.double())) < 1e-3
