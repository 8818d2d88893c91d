"""Validated kernel entry points: the standalone dequantize and the mixed-input GEMM (DESIGN.md s. 4).

Every function checks its arguments (see ``_checks``) before any device pointer reaches the extension,
allocates outputs through PyTorch's allocator (so CUDA-graph capture works), and launches on the current stream
of the tensors' device. Which path and config a GEMM runs is mixgemm.dispatch's to say, how it runs is the
path's plan (mixgemm.paths): this module validates, keeps the plans, and runs them.
"""

from __future__ import annotations

import weakref

import torch

from . import _checks, device, dispatch, shape_rules, tuning_cache
from ._checks import ACT_DTYPES, ALIGNMENT_BYTES
from ._runtime import current_stream, device_guard, extension
from .kernel_key import ACT_TYPES
from .packing import PackedWeight, check_packed_tensors, check_packed_weight
from .paths import GemmConfig, GemmProblem, Plan, path_of
from .paths.dequant import expand


def awq_dequantize(qweight: torch.Tensor, scales: torch.Tensor, qzeros: torch.Tensor) -> torch.Tensor:
    """Dequantizes AWQ int4 weights to a dense ``[K, N]`` matrix of the scales' dtype (fp16 or bf16).

    Args keep vLLM's signature: ``qweight`` int32 ``[K, N/8]``, ``scales`` fp16/bf16 ``[K/G, N]``,
    ``qzeros`` int32 ``[K/G, N/8]``, all contiguous CUDA tensors. ``W = (q - z) * s``, bit-exact with the
    float64 value rounded once to the output dtype.
    """
    fn = "awq_dequantize"
    _checks.check_tensor(fn, "qweight", qweight, (torch.int32,), 2)
    _checks.check_tensor(fn, "scales", scales, ACT_DTYPES, 2)
    _checks.check_tensor(fn, "qzeros", qzeros, (torch.int32,), 2)
    _checks.check_same_device(fn, qweight=qweight, scales=scales, qzeros=qzeros)
    K, N = qweight.shape[0], scales.shape[1]
    _checks.check_shape(fn, "qweight", qweight, (K, N // 8), "[K, N/8] with N = scales.shape[1]")
    if N % 8 != 0 or N == 0:
        raise ValueError(f"{fn}: scales.shape[1] = N must be a positive multiple of 8, got {N}")
    if K == 0:
        raise ValueError(f"{fn}: qweight must have at least one row (K >= 1)")
    _checks.group_size_of(fn, K, scales.shape[0])
    _checks.check_shape(fn, "qzeros", qzeros, (scales.shape[0], N // 8), "[K/G, N/8], one row per scale row")
    _checks.check_device_supported(fn, qweight.device)

    out = torch.empty((K, N), dtype=scales.dtype, device=qweight.device)
    with device_guard(qweight.device):
        extension().awq_dequantize(
            qweight.data_ptr(), scales.data_ptr(), qzeros.data_ptr(), out.data_ptr(),
            K, N, K // scales.shape[0], ACT_TYPES[scales.dtype], current_stream(qweight.device),
        )
    return out


def dequantize_weight(packed: PackedWeight) -> torch.Tensor:
    """The dense weight ``W`` ``[K, N]`` (``y = x @ W``) of a prepacked weight, in its activation dtype:
    each value ``q * scale + offset`` rounded once, exactly what the GEMM kernels multiply (an act-order
    weight's rows come in its permuted K order, ``packed.perm``). Returned as the transpose of a contiguous
    ``[N, K]`` tensor, the layout ``torch.nn.Linear.weight`` has; ``N * K`` values are allocated. The dequant
    path's expansion: its shape rules are the widest of every path, so every weight prepack makes has one."""
    fn = "dequantize_weight"
    check_packed_weight(fn, packed)
    check_packed_tensors(fn, packed)
    reason = shape_rules.violation("dequant", packed.layout, packed.n, packed.k, packed.group_size)
    if reason is not None:
        raise ValueError(f"{fn}: {reason}")
    dev = packed.packed.device
    _checks.check_device_supported(fn, dev)
    with device_guard(dev):
        return expand(packed, current_stream(dev)).t()


# ---------------------------------------------------------------------------------------------------
# GEMM
#
# An eager call must cost little more than its kernel launch (issue 9). So everything whose answer cannot change
# between calls is worked out once and remembered:
#
# * the PackedWeight's tensors are validated once and the result kept on the object (_WeightState),
#   re-validated only when a field of it was replaced;
# * each device is checked (sm_80+, code compiled for it) and its facts read once (mixgemm.device);
# * the config, the kernel and its scratch are resolved once per (weight shape and key, device, M, config
#   argument) into a plan (_plans), which tuning_cache.save_choice drops so that a tune run in this process is
#   seen by the next call.
#
# Per call there remain the checks on x and bias (one combined test; on failure the detailed checks run
# and name the broken rule), the output allocation and the plan's launch.


class _WeightState:
    """What gemm proved about a PackedWeight: these exact tensors agree with these field values and live
    on ``device``. Kept on the PackedWeight (its ``_gemm_state``); :meth:`holds` says whether it still
    describes the object, so a weight whose fields were reassigned is validated again.

    It refers to the tensors weakly: the custom op (library.py) keeps a state on the packed tensor itself, for
    the PackedWeight it rebuilds from the same tensors on every call, and a strong reference there would keep a
    freed model's weights alive. A weak reference also cannot be fooled by a new tensor at a reused id()."""

    __slots__ = ("packed", "scales", "offsets", "perm", "n", "k", "group_size", "bits", "dtype", "layout",
                 "scale_only", "key", "device", "bias_shape", "shape_key")

    def __init__(self, w: PackedWeight) -> None:
        self.packed, self.scales, self.offsets = weakref.ref(w.packed), weakref.ref(w.scales), weakref.ref(w.offsets)
        self.perm = None if w.perm is None else weakref.ref(w.perm)
        self.n, self.k, self.group_size, self.bits, self.dtype = w.n, w.k, w.group_size, w.bits, w.act_dtype
        self.layout, self.scale_only = w.layout, bool(w.scale_only)
        self.key = w.key
        self.device = w.packed.device
        self.bias_shape = (w.n,)
        # Everything a plan depends on besides M and the config argument, as strings and ints: their hashes are
        # cached or trivial, where a KernelKey or a torch.device computes its hash on every plan lookup.
        self.shape_key = (self.n, self.k, self.group_size, self.key.name, str(self.device))

    def holds(self, w: PackedWeight) -> bool:
        return (self.packed() is w.packed and self.scales() is w.scales and self.offsets() is w.offsets
                and (w.perm is None if self.perm is None else self.perm() is w.perm)
                and w.n == self.n and w.k == self.k and w.group_size == self.group_size
                and w.bits == self.bits and w.act_dtype is self.dtype and w.layout == self.layout
                and w.scale_only == self.scale_only)

    @property
    def gather(self) -> torch.Tensor | None:
        """The act-order permutation of K (x's columns are gathered with it), or None."""
        return None if self.perm is None else self.perm()

    def problem(self, M: int) -> GemmProblem:
        return GemmProblem(M, self.n, self.k, self.group_size)


# (weight shape key, M, config argument) -> Plan. Exact M, since the heuristic's split-K and the scratch depend on
# it; cleared when full, which only a long run of distinct prefill lengths reaches.
_plans: dict[tuple, Plan] = {}
_MAX_PLANS = 4096


def clear_plans() -> None:
    """Forgets every resolved plan, so the next call of each shape resolves its config afresh.

    ``tuning_cache.save_choice`` calls it; call it yourself after another process tuned, or after changing
    ``MIXGEMM_CACHE``, for this process to see the new cache file.
    """
    _plans.clear()


tuning_cache.on_save.append(clear_plans)


def _choose(fn: str, state: _WeightState, M: int, config) -> GemmConfig:
    """The config an (M, config) call on ``state``'s weight runs (mixgemm.dispatch)."""
    gpu = device.facts(fn, state.device)  # device rules first, then the config's (dispatch.choose)
    problem = state.problem(M)
    tuned = None
    if isinstance(config, str) and config == "auto":
        # Tuned under the weight's own key, else under a key of the kernels that also run it (tune times
        # weights with zero points: its winners serve symmetric sm90-layout weights too).
        for kernel_key in state.key.kernel_keys():
            tuned = tuning_cache.lookup(gpu.name, M, state.n, state.k, state.group_size, kernel_key)
            if tuned is not None:
                break
    return dispatch.choose(config, problem, state.key, gpu, tuned)


def _make_plan(fn: str, state: _WeightState, M: int, config) -> Plan:
    """Resolves what an (M, config) call on ``state``'s weight runs, with the weight's GPU current (the sm90 path
    sizes its scratch for the current device's SM count): the slow part of a first call."""
    with device_guard(state.device):
        chosen = _choose(fn, state, M, config)
        gpu = device.facts(fn, state.device)
        return path_of(chosen).plan(chosen, state.problem(M), state.key, gpu, state.device)


def _plan_for(fn: str, state: _WeightState, M: int, config) -> Plan:
    key = (state.shape_key, M, config)
    try:
        return _plans[key]
    except KeyError:
        pass
    except TypeError:  # an unhashable config argument: _make_plan reports it
        return _make_plan(fn, state, M, config)
    plan = _make_plan(fn, state, M, config)
    if len(_plans) >= _MAX_PLANS:
        _plans.clear()
    _plans[key] = plan
    return plan


def resolve_config(x_rows: int, packed: PackedWeight, config="auto") -> GemmConfig:
    """What :func:`gemm` runs for ``x_rows`` rows of x on ``packed`` with ``config``: the tuned choice or the
    heuristic for ``"auto"``, a path's heuristic choice for its name, a GemmConfig checked. Reads the device and
    the tuning cache on every call (gemm keeps its answers in plans instead)."""
    check_packed_weight("gemm", packed)
    return _choose("gemm", _WeightState(packed), x_rows, config)


def _validate(fn: str, x, packed, bias) -> tuple[_WeightState, torch.Tensor]:
    """Every rule, in the order that picks which one an error names (weight fields, x, the weight's
    tensors, bias); remembers a valid weight on the object. Returns its state and x as ``[M, K]``."""
    check_packed_weight(fn, packed)
    if not isinstance(x, torch.Tensor) or x.dim() < 1:
        raise ValueError(f"{fn}: x must be a torch.Tensor with at least one dimension")
    if x.shape[-1] != packed.k:
        raise ValueError(f"{fn}: x.shape[-1] must equal the weight's K = {packed.k}, got {x.shape[-1]}")
    if not x.is_contiguous():
        # Report the first broken rule in the usual order (dtype, device, then contiguity).
        _checks.check_tensor(fn, "x", x, (packed.act_dtype,), x.dim())
    x2 = x.reshape(-1, packed.k)
    _checks.check_tensor(fn, "x", x2, (packed.act_dtype,), 2)
    state = packed._gemm_state
    if state is None or not state.holds(packed):
        check_packed_tensors(fn, packed)
        state = _WeightState(packed)
    _checks.check_same_device(fn, x=x, packed=packed.packed)
    if bias is not None:
        _checks.check_tensor(fn, "bias", bias, (packed.act_dtype,), 1)
        _checks.check_shape(fn, "bias", bias, (packed.n,), "one value per output column")
        _checks.check_same_device(fn, x=x, bias=bias)
    packed._gemm_state = state  # only once every rule passed: x's device is now proven too
    return state, x2


def gemm(x: torch.Tensor, packed: PackedWeight, bias: torch.Tensor | None = None, config="auto") -> torch.Tensor:
    """``y = x @ dequant(W) + bias`` on the kernels that read the weight's layout.

    ``x``: contiguous CUDA ``[..., K]`` in ``packed.act_dtype``; ``bias``: ``[N]`` or None; ``config``:
    ``"auto"`` (the tuned choice, else the heuristic: mixgemm.dispatch), a path's name (``"sm80"``,
    ``"decode"``, ``"sm90"``, ``"dequant"``: that path's heuristic choice) or a config of a path that reads
    ``packed.layout`` (``mixgemm.compiled_configs``). Returns ``[..., N]``.
    """
    fn = "gemm"
    # Fast path: a weight validated before, unchanged since, and an x and bias that pass every per-call
    # rule of _validate at once (same dtype and device as the weight, so CUDA; contiguous; aligned; K).
    state = getattr(packed, "_gemm_state", None)
    if (state is not None and isinstance(x, torch.Tensor) and state.holds(packed) and x.dtype is state.dtype
            and x.device == state.device and x.dim() >= 1 and x.shape[-1] == state.k and x.is_contiguous()
            and x.data_ptr() % ALIGNMENT_BYTES == 0
            and (bias is None or (isinstance(bias, torch.Tensor) and bias.dtype is state.dtype
                                  and bias.device == state.device and bias.shape == state.bias_shape
                                  and bias.is_contiguous() and bias.data_ptr() % ALIGNMENT_BYTES == 0))):
        x2 = x if x.dim() == 2 else x.view(-1, state.k)
    else:
        state, x2 = _validate(fn, x, packed, bias)
    if state.perm is not None:
        x2 = x2.index_select(1, state.gather)  # act-order: x's columns in the permuted K order
    M = x2.shape[0]
    out = x2.new_empty((M, state.n))
    if M == 0:
        dispatch.check_config(config, state.key)  # nothing to launch; a bad config errs
    else:
        plan = _plan_for(fn, state, M, config)
        with device_guard(plan.device):
            plan.run(x2, packed, bias, out, current_stream(plan.device))
    return out if x.dim() == 2 else out.view(*x.shape[:-1], state.n)
