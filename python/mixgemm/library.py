"""``torch.library`` custom ops over mixgemm's kernels, so they work under ``torch.compile`` and CUDA graphs.

Registered in the ``mixgemm`` namespace when this module is imported (``import mixgemm`` does it)::

    mixgemm::awq_dequantize(Tensor qweight, Tensor scales, Tensor qzeros) -> Tensor
    mixgemm::awq_gemm_baseline(Tensor x, Tensor qweight, Tensor scales, Tensor qzeros, int split_k_iters) -> Tensor
    mixgemm::gemm(Tensor x, Tensor packed, Tensor scales, Tensor offsets, Tensor? bias, int group_size,
                  int n, int k, str config, str layout="sm80", bool scale_only=False) -> Tensor

Why custom ops: ``torch.compile`` cannot trace into calls to ``mixgemm._C``: they take raw ``data_ptr()``
integers, which the fake tensors used for tracing do not have. Behind a custom op the
compiler sees one opaque node whose output shape comes from a *fake* implementation, and calls the real one
at run time. The real implementations are the validated functions of ``ops.py`` / ``baseline.py``, so an
eager call with a bad argument still raises their ValueError (the dispatcher re-raises a Python kernel's
exception unchanged). They allocate through PyTorch's caching allocator and launch on the current stream,
which is what CUDA-graph capture needs.

A :class:`~mixgemm.packing.PackedWeight` is a Python dataclass, which an operator schema cannot carry, so
``mixgemm::gemm`` takes its tensors and sizes one by one and a config travels as its name (see
``mixgemm.paths.from_name``). The Python wrappers at the bottom (:func:`gemm`, :func:`awq_dequantize`,
:func:`awq_gemm_baseline`) do that unpacking; use them rather than ``torch.ops.mixgemm.*`` directly.
"""

# No ``from __future__ import annotations`` here: torch.library reads the annotations of the op functions,
# and the schemas below are spelled out anyway so that they are exactly the documented ones.

import functools
from typing import Optional, Union

import torch

from . import baseline, layouts, ops, packing, paths
from .paths import GemmConfig

_NAMESPACE = "mixgemm"
_LIBRARY = torch.library.Library(_NAMESPACE, "DEF")


# ---------------------------------------------------------------------------------------------------
# Custom ops: real implementations (the validated Python entry points) and fake ones (shape and dtype
# only, used by FakeTensor tracing in torch.compile / torch.export and for meta tensors).
#
# All are functional: each returns a freshly allocated tensor and leaves its inputs alone. That is what lets
# the compiler reorder them, and CUDA-graph trees treat them like any other op.
#
# Registered with torch.library.Library (define + impl under CompositeExplicitAutograd, every backend) rather
# than the @torch.library.custom_op decorator: the decorator wraps each call in Python autograd and aliasing
# checks that cost ~45 us per call (5x the ~10 us of a plain Library op; measured with an empty op, torch 2.13),
# which torch.compile without CUDA graphs pays on every layer. These ops have no backward (inference only).


def _define(name: str, schema: str, real, fake) -> None:
    _LIBRARY.define(f"{name}{schema}")
    _LIBRARY.impl(name, real, "CompositeExplicitAutograd")
    torch.library.register_fake(f"{_NAMESPACE}::{name}", fake, lib=_LIBRARY)


def _awq_dequantize_op(qweight: torch.Tensor, scales: torch.Tensor, qzeros: torch.Tensor) -> torch.Tensor:
    # Looked up at call time (not bound at import) so a test can stand a CPU reference in for the kernel.
    return ops.awq_dequantize(qweight, scales, qzeros)


def _awq_dequantize_fake(qweight, scales, qzeros):
    # [K, N] in the scales' dtype: K = qweight rows, N = scales columns (as ops.awq_dequantize allocates).
    return scales.new_empty((qweight.shape[0], scales.shape[1]))


def _awq_gemm_baseline_op(x: torch.Tensor, qweight: torch.Tensor, scales: torch.Tensor, qzeros: torch.Tensor,
                          split_k_iters: int) -> torch.Tensor:
    return baseline.awq_gemm(x, qweight, scales, qzeros, split_k_iters)


def _awq_gemm_baseline_fake(x, qweight, scales, qzeros, split_k_iters):
    # The vLLM-style kernel is fp16 only and returns [M, N].
    return x.new_empty((x.shape[0], scales.shape[1]), dtype=torch.float16)


def _bits_of(packed: torch.Tensor, layout: str = "sm80") -> int:
    # The schema carries no bit width: the packed tensor's words per lane say it (the layout's packed_shape).
    # Anything else is malformed; 4 lets ops.gemm's shape check report it in its usual words.
    if layout not in layouts.LAYOUTS:
        return 4  # ops.gemm names the bad layout
    return layouts.bits_of_packed(layout, packed) or 4


def _weight_of(packed, scales, offsets, group_size: int, n: int, k: int, layout: str = "sm80",
               scale_only: bool = False) -> packing.PackedWeight:
    """The PackedWeight of the op's tensors and fields. The op gets the same tensors on every call (a module's
    buffers), but a new PackedWeight each time: so what ops.gemm proved about them (its _WeightState, which
    refers to them weakly) is kept on the packed tensor and handed to the new object, which then takes gemm's
    fast path instead of being validated again (25 us per call). Without ``perm``: the wrapper has already
    gathered x's columns (where the compiler can see and fuse it), so the weight here is always in the kernel's
    own K order. Keywords, not positions, so a field added to PackedWeight later cannot shift these into the
    wrong slots."""
    weight = packing.PackedWeight(
        packed=packed, scales=scales, offsets=offsets, group_size=group_size, bits=_bits_of(packed, layout),
        act_dtype=scales.dtype, n=n, k=k, layout=layout, scale_only=scale_only,
    )
    weight._gemm_state = getattr(packed, "_mixgemm_state", None)  # gemm checks that it holds for this object
    return weight


def _remember_state(weight: packing.PackedWeight) -> None:
    """Keeps gemm's proof about ``weight``'s tensors on its packed tensor, for the next call's _weight_of."""
    state = weight._gemm_state
    if state is not None and getattr(weight.packed, "_mixgemm_state", None) is not state:
        try:
            weight.packed._mixgemm_state = state
        except (AttributeError, RuntimeError):  # a tensor subclass that takes no attributes: validate each call
            pass


# Config names parsed once each (a regex per call otherwise); a bad name raises every time, uncached.
_parse_name = functools.lru_cache(maxsize=256)(paths.from_name)


def _gemm_op(x: torch.Tensor, packed: torch.Tensor, scales: torch.Tensor, offsets: torch.Tensor,
             bias: Optional[torch.Tensor], group_size: int, n: int, k: int, config: str, layout: str = "sm80",
             scale_only: bool = False) -> torch.Tensor:
    weight = _weight_of(packed, scales, offsets, group_size, n, k, layout, scale_only)
    out = ops.gemm(x, weight, bias, _parse_name(config))
    _remember_state(weight)
    return out


def _gemm_fake(x, packed, scales, offsets, bias, group_size, n, k, config, layout="sm80", scale_only=False):
    # A bad config name fails here, at trace time, rather than on the first real call.
    paths.from_name(config)
    return x.new_empty((*x.shape[:-1], n))


_define("awq_dequantize", "(Tensor qweight, Tensor scales, Tensor qzeros) -> Tensor", _awq_dequantize_op,
        _awq_dequantize_fake)
_define("awq_gemm_baseline", "(Tensor x, Tensor qweight, Tensor scales, Tensor qzeros, int split_k_iters) -> Tensor",
        _awq_gemm_baseline_op, _awq_gemm_baseline_fake)
_define("gemm", "(Tensor x, Tensor packed, Tensor scales, Tensor offsets, Tensor? bias, int group_size, int n, int k, "
        'str config, str layout="sm80", bool scale_only=False) -> Tensor', _gemm_op, _gemm_fake)


# ---------------------------------------------------------------------------------------------------
# Python wrappers: what callers use. They only unpack arguments (code torch.compile traces without graph
# breaks) and call torch.ops.mixgemm.*; gemm's wrappers call ops.gemm directly in plain eager calls.


_dispatch_modes = getattr(torch._C, "_len_torch_dispatch_stack", None)


def eager_call(x) -> bool:
    """Whether a GEMM on ``x`` may call :func:`mixgemm.ops.gemm` directly instead of the custom op.

    The op's Python dispatch costs tens of microseconds per eager call, for nothing but tracing: so a plain
    tensor with storage, outside torch.compile/export and outside any dispatch mode (FakeTensorMode,
    make_fx, a profiler mode), goes straight to the validated function the op would call anyway. Anything
    traced keeps the op, so graphs still record one opaque ``mixgemm::gemm`` node.
    """
    # is_compiling first: under torch.compile it is a constant True and the rest is never traced.
    return (not torch.compiler.is_compiling() and type(x) is torch.Tensor and not x.is_meta
            and (_dispatch_modes is None or _dispatch_modes() == 0))


def awq_dequantize(qweight: torch.Tensor, scales: torch.Tensor, qzeros: torch.Tensor) -> torch.Tensor:
    """:func:`mixgemm.awq_dequantize` as the custom op ``mixgemm::awq_dequantize``."""
    return torch.ops.mixgemm.awq_dequantize(qweight, scales, qzeros)


def awq_gemm_baseline(
    x: torch.Tensor, qweight: torch.Tensor, scales: torch.Tensor, qzeros: torch.Tensor, split_k_iters: int = 8
) -> torch.Tensor:
    """:func:`mixgemm.baseline.awq_gemm` as the custom op ``mixgemm::awq_gemm_baseline``."""
    return torch.ops.mixgemm.awq_gemm_baseline(x, qweight, scales, qzeros, split_k_iters)


ConfigArg = Union[GemmConfig, str]


def parse_config(config: ConfigArg) -> Union[GemmConfig, str]:
    """``"auto"``, a path name, a GemmConfig or a config name -> what :func:`mixgemm.ops.gemm` takes (names are
    parsed once and remembered); anything else is the ValueError the op path raises."""
    if isinstance(config, str):
        return _parse_name(config)
    _config_name(config)  # raises for other types
    return config


def _config_name(config: ConfigArg) -> str:
    # No parsing here: under torch.compile this runs as traced code, and a regex would break the graph.
    # A name string is checked by the op's fake (at trace time) and real (eager) implementations instead.
    if isinstance(config, GemmConfig):
        return config.name
    if isinstance(config, str):
        return config
    raise ValueError(f"gemm: config must be 'auto', a path name, a GemmConfig or a config name, got "
                     f"{type(config).__name__}")


def gemm_tensors(
    x: torch.Tensor,
    packed: torch.Tensor,
    scales: torch.Tensor,
    offsets: torch.Tensor,
    bias: Optional[torch.Tensor],
    *,
    group_size: int,
    n: int,
    k: int,
    perm: Optional[torch.Tensor] = None,
    config: ConfigArg = "auto",
    layout: str = "sm80",
    scale_only: bool = False,
) -> torch.Tensor:
    """:func:`gemm` on a packed weight given field by field (what :class:`mixgemm.nn.QuantLinear` holds).

    ``perm`` is the GPTQ act-order permutation of K: x's columns are gathered with it first. ``layout`` and
    ``scale_only`` are the PackedWeight's fields of those names.
    """
    if perm is not None:
        # Checked here because a wrong K would otherwise surface as index_select's out-of-range error
        # instead of gemm's ValueError about x.
        if not isinstance(x, torch.Tensor) or x.dim() < 1 or x.shape[-1] != k:
            got = tuple(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__
            raise ValueError(f"gemm: x must be a tensor [..., K] with K = {k} (the weight's K), got {got}")
        # A gather makes a new contiguous tensor; keeping it outside the op lets the compiler fuse it with
        # whatever produced x.
        x = x.index_select(-1, perm)
    if eager_call(x) and isinstance(packed, torch.Tensor) and isinstance(scales, torch.Tensor):
        # What the op's real implementation does, without the dispatch.
        weight = _weight_of(packed, scales, offsets, group_size, n, k, layout, scale_only)
        out = ops.gemm(x, weight, bias, parse_config(config))
        _remember_state(weight)
        return out
    return torch.ops.mixgemm.gemm(x, packed, scales, offsets, bias, group_size, n, k, _config_name(config), layout,
                                  scale_only)


def gemm(
    x: torch.Tensor, packed_weight: packing.PackedWeight, bias: Optional[torch.Tensor] = None, config: ConfigArg = "auto"
) -> torch.Tensor:
    """:func:`mixgemm.gemm` through the custom op ``mixgemm::gemm``: same arguments, same result.

    ``config`` is ``"auto"``, a :class:`~mixgemm.GemmConfig` or its name. Works in eager mode, under
    CUDA-graph capture and inside ``torch.compile(fullgraph=True)``. A plain eager call (see
    :func:`eager_call`) on a weight without act-order goes to :func:`mixgemm.ops.gemm` directly.
    """
    if not isinstance(packed_weight, packing.PackedWeight):
        raise ValueError(
            f"gemm: packed must be a PackedWeight from mixgemm.prepack, got {type(packed_weight).__name__}"
        )
    # The op rebuilds the PackedWeight from its tensors (bits from the packed shape, act_dtype from the
    # scales), so a PackedWeight whose fields say otherwise is refused here, as ops.gemm would refuse it.
    if not isinstance(packed_weight.packed, torch.Tensor) or not isinstance(packed_weight.scales, torch.Tensor):
        raise ValueError("gemm: packed.packed and packed.scales must be tensors (use mixgemm.prepack)")
    if (packed_weight.bits != _bits_of(packed_weight.packed, packed_weight.layout)
            or packed_weight.act_dtype != packed_weight.scales.dtype):
        raise ValueError(
            f"gemm: packed disagrees with its tensors: bits = {packed_weight.bits} with packed shape "
            f"{tuple(packed_weight.packed.shape)}, act_dtype = {packed_weight.act_dtype} with scales of "
            f"{packed_weight.scales.dtype}"
        )
    # getattr: PackedWeight objects from before act-order support have no `perm` at all.
    perm = getattr(packed_weight, "perm", None)
    if perm is None and eager_call(x):
        # The caller's own PackedWeight, so that ops.gemm's validation and plans are reused across calls.
        return ops.gemm(x, packed_weight, bias, parse_config(config))
    return gemm_tensors(
        x, packed_weight.packed, packed_weight.scales, packed_weight.offsets, bias,
        group_size=packed_weight.group_size, n=packed_weight.n, k=packed_weight.k,
        perm=perm, config=config, layout=packed_weight.layout, scale_only=packed_weight.scale_only,
    )
