"""One MoE block's experts read from a checkpoint folder -> the arguments of :func:`mixgemm.moe.prepack_experts`,
on the CPU.

Each expert projection is read exactly as a dense quantized Linear is (:func:`.convert.read_layer`: the same
checks, compressed-tensors converted to GPTQ terms, scales in the activation dtype). Then each expert's gate
and up projections are concatenated along N, ``[gate | up]``, in the checkpoint's own packing: AWQ packs N
(``qweight [K, N/8]``) and GPTQ packs K (``qweight [K/8, N]``), but in both every tensor has N, or whole words
of N, along dim 1, so one ``torch.cat(dim=1)`` per tensor concatenates the columns without unpacking a code.
"""

from __future__ import annotations

import dataclasses
from typing import Optional

import torch

from .config import QuantConfig, QuantScheme
from .convert import PrepackArgs, has_quantized_tensors, read_layer
from .files import CheckpointFiles
from .moe_blocks import MoeBlock


@dataclasses.dataclass(frozen=True)
class ExpertNames:
    """Where a block's experts live in the checkpoint: ``<prefix>.experts.<e>.<gate|up|down>``."""

    prefix: str
    gate: str
    up: str
    down: str

    def module(self, expert: int, projection: str) -> str:
        return f"{self.prefix}.experts.{expert}.{projection}"

    def modules(self, num_experts: int) -> list:
        return [self.module(e, p) for e in range(num_experts) for p in (self.gate, self.up, self.down)]


@dataclasses.dataclass
class ExpertTensors:
    """A block's experts as prepack_experts takes them: per expert, ``w13`` (gate and up concatenated along
    N) and ``w2`` (down) as :class:`.convert.PrepackArgs` (no g_idx, no bias)."""

    names: ExpertNames
    w13: list
    w2: list

    def to(self, device) -> "ExpertTensors":
        return ExpertTensors(self.names, [a.to(device) for a in self.w13], [a.to(device) for a in self.w2])


def quantized_marker(method: str) -> str:
    """The suffix of the tensor that says a module is stored quantized."""
    return "weight_packed" if method == "compressed-tensors" else "qweight"


def locate_experts(files: CheckpointFiles, block: MoeBlock, method: str) -> Optional[ExpertNames]:
    """Where the checkpoint holds ``block``'s experts quantized (found by expert 0's gate projection), or None
    if it holds none of them quantized under any name the family uses."""
    for prefix in block.checkpoint_prefixes():
        for gate, up, down in block.family.projections:
            if has_quantized_tensors(files, f"{prefix}.experts.0.{gate}", method):
                return ExpertNames(prefix, gate, up, down)
    return None


def holds_quantized_experts(files: CheckpointFiles, prefixes, method: str) -> bool:
    """Whether any quantized tensor lies under ``<prefix>.experts.`` for one of ``prefixes``."""
    marker = "." + quantized_marker(method)
    starts = tuple(f"{p}.experts." for p in prefixes)
    return any(key.startswith(starts) and key.endswith(marker) for key in files.keys())


def read_block_experts(files: CheckpointFiles, block: MoeBlock, names: ExpertNames, quant_config: QuantConfig,
                       dtype: torch.dtype) -> ExpertTensors:
    """Every expert of ``block`` from the checkpoint, checked against the model's shapes and each other, gate
    and up concatenated; a ValueError naming the block, the expert's module or the missing key otherwise."""
    method = quant_config.method
    _check_expert_count(files, block, names, method)
    w13, w2 = [], []
    for e in range(block.num_experts):
        gate, up, down = (_read_projection(files, block, names.module(e, p), quant_config, dtype)
                          for p in (names.gate, names.up, names.down))
        _check_shape(block, names.module(e, names.gate), gate, block.hidden_size, block.intermediate_size)
        _check_shape(block, names.module(e, names.up), up, block.hidden_size, block.intermediate_size)
        _check_shape(block, names.module(e, names.down), down, block.intermediate_size, block.hidden_size)
        w13.append(concat_columns(names.module(e, names.gate), gate, up))
        w2.append(down)
    _check_alike(block, [names.module(e, names.gate) for e in range(block.num_experts)], w13)
    _check_alike(block, [names.module(e, names.down) for e in range(block.num_experts)], w2)
    return ExpertTensors(names, w13, w2)


def concat_columns(where: str, gate: PrepackArgs, up: PrepackArgs) -> PrepackArgs:
    """``[gate | up]`` along N in the projections' own packing (module docstring); both must be stored alike."""
    if (gate.format, gate.bits, gate.qzeros is None, tuple(gate.scales.shape)) != (
            up.format, up.bits, up.qzeros is None, tuple(up.scales.shape)):
        raise ValueError(f"{where}: the gate and up projections of an expert must be quantized alike (format, bits, "
                         f"zero points, group size) to run as one gated GEMM; gate is {_describe(gate)}, up "
                         f"{_describe(up)}")
    cat = (lambda a, b: None if a is None else torch.cat([a, b], dim=1))
    return PrepackArgs(cat(gate.qweight, up.qweight), cat(gate.scales, up.scales), cat(gate.qzeros, up.qzeros),
                       None, None, gate.format, gate.bits)


def _read_projection(files: CheckpointFiles, block: MoeBlock, module: str, quant_config: QuantConfig,
                     dtype: torch.dtype) -> PrepackArgs:
    scheme = quant_config.scheme_for(module)
    method = quant_config.method
    if scheme is None:
        raise ValueError(f"{block.name}: {quant_config.source} keeps {module} dense (ignore / modules_to_not_convert) "
                         "while other experts of the block are quantized; mixgemm loads a block's experts all "
                         "quantized")
    if not has_quantized_tensors(files, module, method):
        raise ValueError(f"{block.name}: the checkpoint has no {module}.{quantized_marker(method)} "
                         f"({files.folder}); every expert of the block ({block.num_experts} in the model) needs its "
                         "gate, up and down projections quantized")
    args = read_layer(files, module, scheme, dtype)
    if args.bias is not None:
        raise ValueError(f"{module}: the checkpoint holds a bias for this expert projection; mixgemm's fused "
                         "MoE runs experts without bias")
    _refuse_act_order(module, args, scheme)
    args.g_idx = None
    return args


def _refuse_act_order(module: str, args: PrepackArgs, scheme: QuantScheme) -> None:
    """GPTQ writes ``g_idx = k // G`` even without act-order: that is the plain order, dropped by the caller. Any
    other order is act-order, which the grouped GEMM cannot run (each expert would permute x differently)."""
    if args.g_idx is None:
        return
    K = args.k
    plain = torch.arange(K, dtype=torch.long) // (scheme.group_size or K)
    if not torch.equal(args.g_idx.long().cpu(), plain):
        raise ValueError(f"{module}: the expert is quantized with act-order (its g_idx is not k // group_size); "
                         "mixgemm's fused MoE does not run act-order experts (desc_act / actorder): quantize the "
                         "experts without it")


def _check_expert_count(files: CheckpointFiles, block: MoeBlock, names: ExpertNames, method: str) -> None:
    extra = names.module(block.num_experts, names.gate)
    if has_quantized_tensors(files, extra, method):
        raise ValueError(f"{block.name}: the checkpoint holds {extra} but the model's block has "
                         f"{block.num_experts} experts (0 .. {block.num_experts - 1}); the checkpoint does not match "
                         "the model's config (num_local_experts / num_experts)")


def _check_shape(block: MoeBlock, module: str, args: PrepackArgs, k: int, n: int) -> None:
    if (args.k, args.n) != (k, n):
        raise ValueError(f"{module}: the checkpoint holds a [{args.k} -> {args.n}] projection but the model's "
                         f"{block.name} ({type(block.module).__name__}) needs [{k} -> {n}] (hidden_size "
                         f"{block.hidden_size}, intermediate size {block.intermediate_size})")


def _check_alike(block: MoeBlock, modules: list, args: list) -> None:
    """Every expert of a projection stored alike (``modules[e]`` names expert e's), so prepack_experts can
    stack them; its own check would name only an expert index."""
    first = _describe(args[0])
    for module, a in zip(modules[1:], args[1:]):
        if _describe(a) != first:
            raise ValueError(f"{block.name}: {module} is {_describe(a)} but {modules[0]} is {first}; every expert "
                             "of a block must be quantized alike")


def _describe(a: PrepackArgs) -> str:
    zeros = "symmetric" if a.qzeros is None else "with zero points"
    return (f"{a.format} {a.bits}-bit [{a.k} -> {a.n}], {a.scales.shape[0]} groups, {zeros}, scales "
            f"{a.scales.dtype}")
