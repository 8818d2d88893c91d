"""Validated kernel entry points: the standalone dequantize and the mixed-input GEMM (DESIGN.md s. 4).

Every function checks its arguments (see ``_checks``) before any device pointer reaches the extension,
allocates outputs and workspaces through PyTorch's allocator (so CUDA-graph capture works), and launches
on the current stream of the tensors' device.
"""

from __future__ import annotations

import dataclasses
from typing import Callable

import torch

from . import _checks, tuning
from ._checks import ACT_DTYPES, ALIGNMENT_BYTES
from ._runtime import current_stream, extension
from .config import GemmConfig
from .packing import PackedWeight, check_packed_weight, check_packed_tensors


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
    extension().awq_dequantize(
        qweight.data_ptr(), scales.data_ptr(), qzeros.data_ptr(), out.data_ptr(),
        K, N, K // scales.shape[0], scales.dtype == torch.bfloat16, current_stream(qweight.device),
    )
    return out


# ---------------------------------------------------------------------------------------------------
# GEMM
#
# An eager call must cost little more than its kernel launch (issue 9: it cost 157 us for a 10 us kernel).
# So everything whose answer cannot change between calls is worked out once and remembered:
#
# * the PackedWeight's tensors are validated once and the result kept on the object (_WeightState),
#   re-validated only when a field of it was replaced;
# * each device is checked (sm_80+, code compiled for it) and its name and SM count read once (_devices);
# * the config, workspace sizes and the entry point to launch are resolved once per (weight shape and
#   dtype, device, M, config argument) into a _Plan (_plans), which tuning.save_choice drops so that a
#   tune run in this process is seen by the next call.
#
# Per call there remain the checks on x and bias (one combined test; on failure the detailed checks run
# and name the broken rule), the output and workspace allocations and the launch.


class _WeightState:
    """What gemm proved about a PackedWeight: these exact tensors agree with these field values and live
    on ``device``. Kept on the PackedWeight (its ``_gemm_state``); :meth:`holds` says whether it still
    describes the object, so a weight whose fields were reassigned is validated again."""

    __slots__ = ("packed", "scales", "offsets", "perm", "n", "k", "group_size", "bits", "dtype", "device",
                 "bias_shape", "shape_key")

    def __init__(self, w: PackedWeight) -> None:
        # Strong references: an id() could be reused by a new tensor once the old one is freed.
        self.packed, self.scales, self.offsets, self.perm = w.packed, w.scales, w.offsets, w.perm
        self.n, self.k, self.group_size, self.bits, self.dtype = w.n, w.k, w.group_size, w.bits, w.act_dtype
        self.device = w.packed.device
        self.bias_shape = (w.n,)
        # Everything a plan depends on besides M and the config argument.
        self.shape_key = (self.n, self.k, self.group_size, self.bits, self.dtype, self.device)

    def holds(self, w: PackedWeight) -> bool:
        return (w.packed is self.packed and w.scales is self.scales and w.offsets is self.offsets
                and w.perm is self.perm and w.n == self.n and w.k == self.k and w.group_size == self.group_size
                and w.bits == self.bits and w.act_dtype is self.dtype)


@dataclasses.dataclass(frozen=True)
class _Plan:
    """How to run one (weight shape and dtype, device, M, config argument): resolved once, then reused.

    ``launch`` is the function that runs this plan's path (``_LAUNCHERS[config's path]``), so a new kernel
    path is one more launcher and one more entry in that table.
    """

    config: GemmConfig
    m: int
    n: int
    k: int
    group_size: int
    bits: int
    bf16: bool
    device: torch.device
    workspace_floats: int
    semaphore_count: int
    launch: Callable


# Serial split-K semaphores, per (device, stream): zero-initialised once; every kernel leaves them zero
# again, so the hot path needs no memset (and CUDA-graph replays stay valid). Per stream because two
# serial GEMMs running at once on different streams must not share tile counters.
_semaphores: dict[tuple[torch.device, int], torch.Tensor] = {}
_MIN_SEMAPHORES = 4096

# Per device: (name, SM count), present once the device passed check_device_supported.
_devices: dict[torch.device, tuple[str, int]] = {}
# (weight shape key, M, config argument) -> _Plan. Exact M, since the heuristic's split-K and the
# workspace depend on it; cleared when full, which only a long run of distinct prefill lengths reaches.
_plans: dict[tuple, _Plan] = {}
_MAX_PLANS = 4096


def clear_plans() -> None:
    """Forgets every resolved plan, so the next call of each shape resolves its config afresh.

    ``tuning.save_choice`` calls it; call it yourself after another process tuned, or after changing
    ``MIXGEMM_CACHE``, for this process to see the new cache file.
    """
    _plans.clear()


tuning.on_save.append(clear_plans)


def _semaphore_buffer(device: torch.device, stream: int, count: int) -> torch.Tensor:
    key = (device, stream)
    buffer = _semaphores.get(key)
    if buffer is None or buffer.numel() < count:
        buffer = torch.zeros(max(count, _MIN_SEMAPHORES), dtype=torch.int32, device=device)
        _semaphores[key] = buffer
    return buffer


def _device_facts(fn: str, device: torch.device) -> tuple[str, int]:
    """(GPU name, SM count) of a device that passed check_device_supported; queried once per device."""
    facts = _devices.get(device)
    if facts is None:
        _checks.check_device_supported(fn, device)
        props = torch.cuda.get_device_properties(device)
        facts = _devices[device] = (props.name, props.multi_processor_count)
    return facts


def _auto_config(compiled: list[GemmConfig], M: int, n: int, k: int, group_size: int, bits: int, act_dtype,
                 gpu_name: str, sm_count) -> GemmConfig:
    """``config="auto"``: the tuned choice if the cache holds a usable one, else the heuristic.
    ``sm_count`` is a number or a function returning it (so it is only queried when needed)."""
    # The tuner times int4 weights; int8 ones take the heuristic.
    tuned = tuning.lookup(gpu_name, M, n, k, group_size, act_dtype) if bits == 4 else None
    # A cache written by another build may name a tile this build lacks, or a split-K this K cannot
    # take: such an entry is stale, not an error, so the heuristic takes over.
    if tuned is not None and _fits(tuned, compiled, M, k):
        return tuned
    sms = sm_count() if callable(sm_count) else sm_count
    return tuning.heuristic_config(compiled, M, n, k, sms)


def _fits(config: GemmConfig, compiled: list[GemmConfig], M: int, K: int) -> bool:
    """Whether a (cached) config is compiled here and can take this M and K."""
    if (config.path, config.tile) not in {(c.path, c.tile) for c in compiled}:
        return False
    if config.path == "gemv":  # a split per 64-deep batch at most; rows up to the kernel's tile_m
        return M <= config.tile_m and config.split_k <= K // config.warp_k
    return config.split_k <= K // config.tile_k


def _check_rows(config: GemmConfig, M: int) -> None:
    """A decode-path config takes at most its tile_m rows of x (the sm80 path takes any M)."""
    if config.path == "gemv" and M > config.tile_m:
        raise ValueError(f"gemm: config {config.name} (decode path) takes at most {config.tile_m} rows of x, "
                         f"got M = {M}")


def resolve_config(x_rows: int, packed: PackedWeight, config) -> GemmConfig:
    """``config="auto"`` -> the tuned choice if cached, else the heuristic; a GemmConfig is checked.

    Queries the device and the cache file on every call (gemm keeps its answers in plans instead).
    """
    compiled = _check_config_arg(config, packed.act_dtype, packed.bits)
    if config == "auto":
        device = packed.packed.device
        name = torch.cuda.get_device_name(device) if packed.bits == 4 else ""
        return _auto_config(compiled, x_rows, packed.n, packed.k, packed.group_size, packed.bits, packed.act_dtype,
                            name, lambda: torch.cuda.get_device_properties(device).multi_processor_count)
    _check_rows(config, x_rows)
    return config


def _check_config_arg(config, act_dtype: torch.dtype, bits: int = 4) -> list[GemmConfig]:
    """``config`` must be "auto" or a GemmConfig compiled for ``act_dtype`` and ``bits``; returns the
    compiled list."""
    from .config import compiled_configs

    compiled = compiled_configs(act_dtype, bits, path=None)
    if isinstance(config, str):
        if config != "auto":
            raise ValueError(f"gemm: config must be 'auto' or a GemmConfig, got {config!r}")
    elif not isinstance(config, GemmConfig):
        raise ValueError(f"gemm: config must be 'auto' or a GemmConfig, got {type(config).__name__}")
    elif (config.path, config.tile) not in {(c.path, c.tile) for c in compiled}:
        names = ", ".join(c.name for c in compiled)
        raise ValueError(f"gemm: config {config.name} is not compiled into this build; compiled: {names}")
    return compiled


def _pointers(plan: _Plan, stream: int, x2: torch.Tensor, w: PackedWeight, bias, out: torch.Tensor) -> tuple:
    """The device addresses both paths' entry points take, in their order (x, packed, scales, offsets,
    bias, out, workspace, semaphores), allocating the plan's split-K workspace and semaphores."""
    workspace = out.new_empty(plan.workspace_floats, dtype=torch.float32) if plan.workspace_floats else None
    semaphores = _semaphore_buffer(plan.device, stream, plan.semaphore_count) if plan.semaphore_count else None
    return (
        x2.data_ptr(), w.packed.data_ptr(), w.scales.data_ptr(), w.offsets.data_ptr(),
        bias.data_ptr() if bias is not None else 0, out.data_ptr(),
        workspace.data_ptr() if workspace is not None else 0,
        semaphores.data_ptr() if semaphores is not None else 0,
    )


def _launch_sm80(plan: _Plan, x2: torch.Tensor, w: PackedWeight, bias, out: torch.Tensor) -> None:
    """The CUTLASS-2.x-style kernel (``_C.gemm``), with its split-K workspace and semaphores."""
    stream = current_stream(plan.device)
    cfg = plan.config
    extension().gemm(cfg.tile, *_pointers(plan, stream, x2, w, bias, out), plan.m, plan.n, plan.k,
                     plan.group_size, cfg.split_k, cfg.split_k_mode, plan.bf16, stream, plan.bits)


def _launch_gemv(plan: _Plan, x2: torch.Tensor, w: PackedWeight, bias, out: torch.Tensor) -> None:
    """The decode path (``_C.gemv``): split-K partials and per-strip semaphores when split_k > 1."""
    stream = current_stream(plan.device)
    cfg = plan.config
    extension().gemv(cfg.gemv_key, *_pointers(plan, stream, x2, w, bias, out), plan.m, plan.n, plan.k,
                     plan.group_size, cfg.split_k, plan.bf16, stream, plan.bits)


# GemmConfig.path -> the function that launches it.
_LAUNCHERS = {"sm80": _launch_sm80, "gemv": _launch_gemv}


def _make_plan(fn: str, state: _WeightState, M: int, config) -> _Plan:
    """Resolves what an (M, config) call on ``state``'s weight runs: the slow part of a first call."""
    name, sms = _device_facts(fn, state.device)  # device rules first, as before, then the config's
    compiled = _check_config_arg(config, state.dtype, state.bits)
    if isinstance(config, str):  # "auto": _check_config_arg refused every other string
        config = _auto_config(compiled, M, state.n, state.k, state.group_size, state.bits, state.dtype, name, sms)
    _check_rows(config, M)
    if config.path == "gemv":
        floats, semaphore_count = extension().gemv_workspace_size(M, state.n, config.split_k)
    else:
        floats, semaphore_count = extension().gemm_workspace_size(config.tile, M, state.n, config.split_k,
                                                                  config.split_k_mode)
    return _Plan(config, M, state.n, state.k, state.group_size, state.bits, state.dtype == torch.bfloat16,
                 state.device, floats, semaphore_count, _LAUNCHERS[config.path])


def _plan_for(fn: str, state: _WeightState, M: int, config) -> _Plan:
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
    """``y = x @ dequant(W) + bias`` with our CUTLASS-2.x-style mixed-input kernel.

    ``x``: contiguous CUDA ``[..., K]`` in ``packed.act_dtype``; ``bias``: ``[N]`` or None; ``config``:
    ``"auto"`` or a :class:`~mixgemm.config.GemmConfig`. Returns ``[..., N]``.
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
        x2 = x2.index_select(1, state.perm)  # act-order: x's columns in the permuted K order
    M = x2.shape[0]
    out = x2.new_empty((M, state.n))
    if M == 0:
        _check_config_arg(config, state.dtype, state.bits)  # nothing to launch; a bad config still errs
    else:
        plan = _plan_for(fn, state, M, config)
        plan.launch(plan, x2, packed, bias, out)
    return out if x.dim() == 2 else out.view(*x.shape[:-1], state.n)
