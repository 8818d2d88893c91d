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
from ._runtime import current_stream, device_guard, extension, stream_capturing
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
    with device_guard(qweight.device):
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
# * each device is checked (sm_80+, code compiled for it) and its name, SM count and compute capability
#   read once (_devices);
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

    __slots__ = ("packed", "scales", "offsets", "perm", "n", "k", "group_size", "bits", "dtype", "layout",
                 "scale_only", "device", "bias_shape", "shape_key")

    def __init__(self, w: PackedWeight) -> None:
        # Strong references: an id() could be reused by a new tensor once the old one is freed.
        self.packed, self.scales, self.offsets, self.perm = w.packed, w.scales, w.offsets, w.perm
        self.n, self.k, self.group_size, self.bits, self.dtype = w.n, w.k, w.group_size, w.bits, w.act_dtype
        self.layout, self.scale_only = w.layout, bool(w.scale_only)
        self.device = w.packed.device
        self.bias_shape = (w.n,)
        # Everything a plan depends on besides M and the config argument.
        self.shape_key = (self.n, self.k, self.group_size, self.bits, self.dtype, self.layout, self.scale_only,
                          self.device)

    def holds(self, w: PackedWeight) -> bool:
        return (w.packed is self.packed and w.scales is self.scales and w.offsets is self.offsets
                and w.perm is self.perm and w.n == self.n and w.k == self.k and w.group_size == self.group_size
                and w.bits == self.bits and w.act_dtype is self.dtype and w.layout == self.layout
                and w.scale_only == self.scale_only)


@dataclasses.dataclass(frozen=True)
class _Plan:
    """How to run one (weight shape and dtype, device, M, config argument): resolved once, then reused.

    ``launch`` is the extension's PreparedLaunch for the path, config and sizes, so a call only hands it the
    addresses of its tensors and buffers and its stream: ``launch(x, packed, scales, offsets, bias, out,
    workspace, semaphores, stream)``, where ``semaphores`` is the address of the split counters (sm80 and
    decode paths) or stream-K flags (sm90 path). The dequant path's ``launch`` is :func:`_dequant_matmul`,
    which takes the tensors themselves (its GEMM is PyTorch's).
    """

    config: GemmConfig
    device: torch.device
    launch: Callable
    workspace_bytes: int = 0  # split-K's fp32 partials (sm80, decode) or stream-K's workspace (sm90)
    semaphore_count: int = 0  # serial split-K's tile counters (sm80, decode) or stream-K's flags (sm90)
    offsets: bool = True  # sm90 path: False runs the scale-only kernel


# Split semaphores (the sm80 and decode paths' tile counters, the sm90 path's stream-K flags), per
# (device, stream): zero-initialised once; every kernel leaves them zero again, so the hot path needs no
# memset (and CUDA-graph replays stay valid). Per stream because two split GEMMs running at once on
# different streams must not share counters.
_semaphores: dict[tuple[torch.device, int], torch.Tensor] = {}
_MIN_SEMAPHORES = 4096
# A buffer outgrown by a larger call is kept, never freed: a CUDA graph captured while it was current
# launches with its address on every replay, and memory handed back to the allocator could be reused and
# hold non-zero words. Each replacement is at least twice as large, so few are kept.
_outgrown_semaphores: list[torch.Tensor] = []

# Workspaces (split-K partials, stream-K's scratch), per (device, stream), reused by eager calls: allocating
# one per call cost the host as much as the launch (issue 9). Calls on one stream run in order and every
# kernel writes its workspace before reading it (the flags that say what is written live among the
# semaphores), so one buffer serves them all. Under CUDA-graph capture each call allocates its own, from
# the graph's pool, so a replay never shares memory with eager calls or with another graph; and a
# workspace above _MAX_CACHED_WORKSPACE_BYTES (split-K at large M, where the kernel dwarfs an allocation)
# is allocated per call as well, so no large buffer outlives its call.
_workspaces: dict[tuple[torch.device, int], torch.Tensor] = {}
_MAX_CACHED_WORKSPACE_BYTES = 64 << 20
_MIN_WORKSPACE_BYTES = 1 << 20

# Per device: (name, SM count, compute capability), present once the device passed check_device_supported.
_devices: dict[torch.device, tuple[str, int, tuple[int, int]]] = {}
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


def _stream_buffer(cache: dict, device: torch.device, stream: int, count: int, allocate) -> torch.Tensor:
    """``cache``'s buffer for (device, stream), first replaced by ``allocate(device)`` when it is missing or
    holds fewer than ``count`` elements (``allocate`` sizes it)."""
    key = (device, stream)
    buffer = cache.get(key)
    if buffer is None or buffer.numel() < count:
        buffer = cache[key] = allocate(device)
    return buffer


def _semaphore_buffer(device: torch.device, stream: int, count: int) -> torch.Tensor:
    outgrown = _semaphores.get((device, stream))
    buffer = _stream_buffer(_semaphores, device, stream, count,
                            lambda d: torch.zeros(max(count, _MIN_SEMAPHORES, 2 * _numel(outgrown)), dtype=torch.int32,
                                                  device=d))
    if outgrown is not None and buffer is not outgrown:
        _outgrown_semaphores.append(outgrown)
    return buffer


def _numel(tensor: torch.Tensor | None) -> int:
    return 0 if tensor is None else tensor.numel()


def _workspace(device: torch.device, stream: int, nbytes: int) -> torch.Tensor:
    """A buffer of at least ``nbytes`` bytes for one call on ``stream`` (see _workspaces)."""
    if nbytes > _MAX_CACHED_WORKSPACE_BYTES or stream_capturing():
        return torch.empty(nbytes, dtype=torch.uint8, device=device)
    return _stream_buffer(_workspaces, device, stream, nbytes,
                          lambda d: torch.empty(max(nbytes, _MIN_WORKSPACE_BYTES), dtype=torch.uint8, device=d))


def _device_facts(fn: str, device: torch.device) -> tuple[str, int, tuple[int, int]]:
    """(GPU name, SM count, compute capability) of a device that passed check_device_supported; queried
    once per device."""
    facts = _devices.get(device)
    if facts is None:
        _checks.check_device_supported(fn, device)
        props = torch.cuda.get_device_properties(device)
        facts = _devices[device] = (props.name, props.multi_processor_count, (props.major, props.minor))
    return facts


def _auto_config(compiled: list[GemmConfig], M: int, n: int, k: int, group_size: int, bits: int, act_dtype,
                 gpu_name: str, sm_count, layout: str = "sm80") -> GemmConfig:
    """``config="auto"``: the tuned choice if the cache holds a usable one, else the heuristic.
    ``compiled`` holds the configs that read ``layout``; ``sm_count`` is a number or a function returning
    it (so it is only queried when needed)."""
    if group_size % _DEQUANT_SLAB_K:  # the dequant path's expansion reads one scale row per 16-deep slab
        compiled = [c for c in compiled if c.path != "dequant"]
    # The tuner times int4 weights; int8 ones take the heuristic.
    tuned = tuning.lookup(gpu_name, M, n, k, group_size, act_dtype, layout=layout) if bits == 4 else None
    # A cache written by another build may name a tile this build lacks, or a split-K this K cannot
    # take: such an entry is stale, not an error, so the heuristic takes over.
    if tuned is not None and _fits(tuned, compiled, M, n, k):
        return tuned
    sms = sm_count() if callable(sm_count) else sm_count
    return tuning.heuristic_config(compiled, M, n, k, sms, layout=layout)


def _fits(config: GemmConfig, compiled: list[GemmConfig], M: int, N: int, K: int) -> bool:
    """Whether a (cached) config is compiled here for the weight's layout and can take this M, N and K."""
    if (config.path, config.tile) not in {(c.path, c.tile) for c in compiled}:
        return False
    if config.path == "gemv":  # a split per 64-deep batch at most; rows up to the kernel's tile_m
        return M <= config.tile_m and config.split_k <= K // config.warp_k
    if config.path == "sm90" and N % config.tile_n:
        return False
    if config.path == "dequant":
        return True
    if config.split_k_mode == "streamk":  # sm80 stream-K: one unit (a k-tile of a tile) per block at least
        return config.split_k <= config.stream_k_units(M, N, K)
    return config.split_k <= K // config.tile_k  # sm80 and sm90 (stream-K) splits: one k-tile each at least


def _check_fits(config: GemmConfig, M: int, N: int) -> None:
    """A decode-path config takes at most its tile_m rows of x; an sm90 config needs N in whole weight
    tiles (the sm80 path takes any M and every N of its layout)."""
    if config.path == "gemv" and M > config.tile_m:
        raise ValueError(f"gemm: config {config.name} (decode path) takes at most {config.tile_m} rows of x, "
                         f"got M = {M}")
    if config.path == "sm90" and N % config.tile_n:
        raise ValueError(f"gemm: config {config.name} needs N to be a multiple of its tile_n = {config.tile_n}, "
                         f"got N = {N}")


def resolve_config(x_rows: int, packed: PackedWeight, config) -> GemmConfig:
    """``config="auto"`` -> the tuned choice if cached, else the heuristic; a GemmConfig is checked.

    Queries the device and the cache file on every call (gemm keeps its answers in plans instead).
    """
    compiled = _check_config_arg(config, packed.act_dtype, packed.bits, packed.layout)
    if config == "auto":
        device = packed.packed.device
        name = torch.cuda.get_device_name(device) if packed.bits == 4 else ""
        return _auto_config(compiled, x_rows, packed.n, packed.k, packed.group_size, packed.bits, packed.act_dtype,
                            name, lambda: torch.cuda.get_device_properties(device).multi_processor_count,
                            packed.layout)
    _check_fits(config, x_rows, packed.n)
    return config


def _check_config_arg(config, act_dtype: torch.dtype, bits: int = 4, layout: str = "sm80") -> list[GemmConfig]:
    """``config`` must be "auto" or a GemmConfig compiled for ``act_dtype`` and ``bits`` whose path reads
    ``layout``; returns the compiled configs that read it."""
    from .config import compiled_configs

    every = compiled_configs(act_dtype, bits, path=None)
    compiled = compiled_configs(act_dtype, bits, path=None, layout=layout)
    if isinstance(config, str):
        if config != "auto":
            raise ValueError(f"gemm: config must be 'auto' or a GemmConfig, got {config!r}")
    elif not isinstance(config, GemmConfig):
        raise ValueError(f"gemm: config must be 'auto' or a GemmConfig, got {type(config).__name__}")
    elif (config.path, config.tile) not in {(c.path, c.tile) for c in every}:
        names = ", ".join(c.name for c in every)
        raise ValueError(f"gemm: config {config.name} is not compiled into this build; compiled: {names}")
    elif layout not in config.layouts:
        raise ValueError(f"gemm: config {config.name} ({config.path} path) cannot read a weight in the {layout!r} "
                         f"layout; its kernels read {' and '.join(config.layouts)} weights (prepack(..., "
                         f"layout=...) chooses the layout)")
    elif (config.path, config.tile) not in {(c.path, c.tile) for c in compiled}:
        names = ", ".join(c.name for c in compiled if c.path == config.path) or "none"
        raise ValueError(f"gemm: config {config.name} is not compiled for weights in the {layout!r} layout in this "
                         f"build; its {config.path} configs for that layout: {names}")
    return compiled


def _launch(plan: _Plan, x2: torch.Tensor, w: PackedWeight, bias, out: torch.Tensor) -> None:
    """Runs ``plan`` on this call's tensors, with its workspace and semaphores, on their device."""
    with device_guard(plan.device):
        _launch_on_current_device(plan, x2, w, bias, out)


def _launch_on_current_device(plan: _Plan, x2: torch.Tensor, w: PackedWeight, bias, out: torch.Tensor) -> None:
    stream = current_stream(plan.device)
    if plan.config.path == "dequant":
        plan.launch(x2, w, bias, out, stream)
        return
    # Kept referenced until the launch is queued (a per-call workspace goes back to the allocator after it,
    # in stream order).
    workspace = _workspace(plan.device, stream, plan.workspace_bytes) if plan.workspace_bytes else None
    semaphores = _semaphore_buffer(plan.device, stream, plan.semaphore_count) if plan.semaphore_count else None
    plan.launch(x2.data_ptr(), w.packed.data_ptr(), w.scales.data_ptr(), w.offsets.data_ptr() if plan.offsets else 0,
                bias.data_ptr() if bias is not None else 0, out.data_ptr(),
                workspace.data_ptr() if workspace is not None else 0,
                semaphores.data_ptr() if semaphores is not None else 0, stream)


# The dequant path's expansion kernel reads one scale row per 16-deep slab of the packed layouts.
_DEQUANT_SLAB_K = 16


def _check_dequant_group_size(fn: str, group_size: int) -> None:
    """The expansion's rule (dequantize_weight and gemm's dequant path): whole scale rows per slab."""
    if group_size % _DEQUANT_SLAB_K:
        raise ValueError(f"{fn}: the dequant path needs group_size to be a multiple of {_DEQUANT_SLAB_K} (its "
                         f"expansion reads one scale row per 16-deep slab), got {group_size}")


def _expand(w: PackedWeight, stream: int) -> torch.Tensor:
    """W^T ``[N, K]`` (row-major, the activation dtype) from ``w``'s packed tensors, by our kernel on
    ``stream``; every value is ``q * scale + offset`` rounded once, as the GEMM kernels multiply it."""
    dense = torch.empty((w.n, w.k), dtype=w.act_dtype, device=w.packed.device)
    extension().dequantize_packed(w.packed.data_ptr(), w.scales.data_ptr(), w.offsets.data_ptr(), dense.data_ptr(),
                                  w.n, w.k, w.group_size, w.bits, w.act_dtype == torch.bfloat16, w.layout == "sm90",
                                  stream)
    return dense


def _dequant_matmul(x2: torch.Tensor, w: PackedWeight, bias, out: torch.Tensor, stream: int) -> None:
    """The dequant path: expand the weight into a temporary (``N * K`` values of the activation dtype, freed
    when the call's GEMM is done with it), then one cuBLAS GEMM ``out = x2 . W (+ bias)`` on it. W^T is
    what ``torch.nn.Linear`` keeps too, so cuBLAS runs its usual "TN" GEMM."""
    dense = _expand(w, stream)
    if bias is None:
        torch.mm(x2, dense.t(), out=out)
    else:
        torch.addmm(bias, x2, dense.t(), out=out)


def dequantize_weight(packed: PackedWeight) -> torch.Tensor:
    """The dense weight ``W`` ``[K, N]`` (``y = x @ W``) of a prepacked weight, in its activation dtype:
    each value ``q * scale + offset`` rounded once, exactly what the GEMM kernels multiply (an act-order
    weight's rows come in its permuted K order, ``packed.perm``). Returned as the transpose of a contiguous
    ``[N, K]`` tensor, the layout ``torch.nn.Linear.weight`` has; ``N * K`` values are allocated."""
    fn = "dequantize_weight"
    check_packed_weight(fn, packed)
    check_packed_tensors(fn, packed)
    device = packed.packed.device
    _checks.check_device_supported(fn, device)
    _check_dequant_group_size(fn, packed.group_size)
    with device_guard(device):
        return _expand(packed, current_stream(device)).t()


def _make_plan_on_device(fn: str, state: _WeightState, M: int, config) -> _Plan:
    """_make_plan with the weight's GPU current: the extension sizes the sm90 path's stream-K workspace for
    the current device's SM count, which must be the count of the GPU the plan will launch on."""
    with device_guard(state.device):
        return _make_plan(fn, state, M, config)


def _make_plan(fn: str, state: _WeightState, M: int, config) -> _Plan:
    """Resolves what an (M, config) call on ``state``'s weight runs: the slow part of a first call."""
    from .config import sm90_modes

    name, sms, capability = _device_facts(fn, state.device)  # device rules first, then the config's
    compiled = _check_config_arg(config, state.dtype, state.bits, state.layout)
    if isinstance(config, str):  # "auto": _check_config_arg refused every other string
        config = _auto_config(compiled, M, state.n, state.k, state.group_size, state.bits, state.dtype, name, sms,
                              state.layout)
    _check_fits(config, M, state.n)
    if config.path == "dequant":
        _check_dequant_group_size(fn, state.group_size)
        return _Plan(config, state.device, _dequant_matmul)
    ext = extension()
    bf16 = state.dtype == torch.bfloat16
    sizes = (M, state.n, state.k, state.group_size)
    if config.path == "sm90":
        if capability != (9, 0):
            raise RuntimeError(f"{fn}: the sm90 path's kernels run on compute capability 9.0 (H100/H200) only; "
                               f"this weight is on {name}")
        # Symmetric weights run the scale-only kernel where it is compiled (their offsets are all zero),
        # else the zero-point kernel with those zero offsets: the same result.
        offsets = not (state.scale_only and "scale" in sm90_modes(bf16, state.bits)[config.tile])
        nbytes, semaphores = ext.gemm_sm90_workspace_size(config.tile, *sizes, bf16, state.bits, offsets,
                                                          config.split_k)
        launch = ext.prepare_gemm_sm90(config.tile, *sizes, bf16, state.bits, config.split_k, nbytes, semaphores)
        return _Plan(config, state.device, launch, nbytes, semaphores, offsets=offsets)
    if config.path == "gemv":
        floats, semaphores = ext.gemv_workspace_size(M, state.n, config.split_k)
        launch = ext.prepare_gemv(config.gemv_key, *sizes, config.split_k, bf16, state.bits, state.layout == "sm90")
        return _Plan(config, state.device, launch, 4 * floats, semaphores)
    floats, semaphores = ext.gemm_workspace_size(config.tile, M, state.n, config.split_k, config.split_k_mode)
    launch = ext.prepare_gemm(config.tile, *sizes, config.split_k, config.split_k_mode, bf16, state.bits,
                              state.layout == "sm90")
    return _Plan(config, state.device, launch, 4 * floats, semaphores)


def _plan_for(fn: str, state: _WeightState, M: int, config) -> _Plan:
    key = (state.shape_key, M, config)
    try:
        return _plans[key]
    except KeyError:
        pass
    except TypeError:  # an unhashable config argument: _make_plan reports it
        return _make_plan_on_device(fn, state, M, config)
    plan = _make_plan_on_device(fn, state, M, config)
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
    """``y = x @ dequant(W) + bias`` on the kernels that read the weight's layout.

    ``x``: contiguous CUDA ``[..., K]`` in ``packed.act_dtype``; ``bias``: ``[N]`` or None; ``config``:
    ``"auto"`` (the tuned choice, else the heuristic: the decode path for a few rows of x, the GEMM of the
    weight's layout otherwise: sm80 or sm90) or a :class:`~mixgemm.config.GemmConfig` whose path reads
    ``packed.layout``. Returns ``[..., N]``.
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
        _check_config_arg(config, state.dtype, state.bits, state.layout)  # nothing to launch; a bad config errs
    else:
        _launch(_plan_for(fn, state, M, config), x2, packed, bias, out)
    return out if x.dim() == 2 else out.view(*x.shape[:-1], state.n)
