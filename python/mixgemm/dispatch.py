"""Which path and config a call runs: the tuned choice where the cache holds one that fits, else the heuristic
across paths, whose order is this module's rule and whose choice within a path is the path's
(mixgemm/paths/*.py).

The order, per problem (docs/perf-notes/ has the measurements):
  * up to :data:`DECODE_MAX_M` rows, the decode path (a batched GEMV: M rides in the mma's 8-wide dimension);
  * from :data:`DEQUANT_MIN_M` rows on a layout, the dequant path (cuBLAS outruns the mixed-input GEMMs there by
    more than the expansion costs);
  * else the layout's GEMM: on the sm80 layout the sm80 path; on the sm90 layout the sm80 path's small tiles up to
    :data:`SM80_ON_SM90_LAYOUT_MAX_M` rows, up to :data:`SM80_ON_SM90_LAYOUT_SMALL_WEIGHT_MAX_M` on small and
    mid-size weights, and up to :data:`SM80_ON_SM90_LAYOUT_FEW_TILES_MAX_M` where the sm90 GEMM's tiles are too few
    to fill the GPU or give each SM few k-tiles (its fixed cost per launch outweighs its faster main loop there, in
    a model's order of kernels), then the sm90 path;
  * every path that cannot run the problem (its shape rules, its rows) is passed over, and the dequant path, which
    runs the widest shapes, comes last.
"""

from __future__ import annotations

from .kernel_key import KernelKey
from .paths import AUTO, PATHS, GemmConfig, GemmProblem, Gpu, sm90

# A batched GEMV for this many rows or fewer: the m8 kernel wastes nothing at M = 8, and from M = 9 the sm80
# path's 16-row tiles were faster on both layouts (docs/perf-notes/2026-11-23-sm80-tiles-on-sm90-layout.md).
DECODE_MAX_M = 8

# The dequant path from this many rows (docs/perf-notes/2026-11-23-dequant-path-interleaved-rounds.md). The
# expansion streams 2.5 bytes per int4 weight at ~2.4 TB/s, so against cuBLAS's ~750 TFLOP/s it adds about
# 2.5 * 750e12 / (2 M * 2.4e12) ~ 390 / M of the GEMM's time: 19% at M = 2048, 5% at 8192. It wins where cuBLAS
# outruns the layout's own GEMM by more than that:
#   * sm90 layout: the sm90 GEMM is within 0.95x-1.09x of cuBLAS up to M = 4096; at 8192 the dequant path took
#     0.93x-1.01x its time;
#   * sm80 layout: the mma.sync GEMM runs at about half of cuBLAS's wgmma speed from M = 256; the dequant path
#     took 0.58x-0.97x its time at M = 512. On an A100, where cuBLAS also runs mma.sync, the same arithmetic puts
#     the break-even near M = 1024, hence 1024 (`python -m mixgemm tune` finds each GPU's own crossover).
DEQUANT_MIN_M = {"sm90": 8192, "sm80": 1024}

# On the sm90 layout the sm80 path's mma.sync tiles (compiled for it for small M) take up to this many rows: at
# M = 16 they won on all six DESIGN shapes by 2-23% over the sm90 GEMM's best split config
# (docs/perf-notes/2026-11-23-sm80-tiles-on-sm90-layout.md), and in the H100 sweep of 2026-11-26 (after the sm90
# GEMM became a programmatic dependent) still on 14 of the 17 DESIGN and TP shapes; the sm90 GEMM led by under 1%
# on 2048x8192 and 4096x4096, the m16 decode kernel by 4% on 1024x8192
# (docs/perf-notes/2026-11-26-m17-64-sm90-after-dependent-launch.md) ...
SM80_ON_SM90_LAYOUT_MAX_M = 16
# ... up to 32 rows on weights of up to 64 Mi elements (K x N) ...
SM80_ON_SM90_LAYOUT_SMALL_WEIGHT_MAX_M = 32
SM80_ON_SM90_LAYOUT_SMALL_WEIGHT = 64 << 20
# ... and up to 64 rows where the sm90 GEMM's 128-column tiles are too few to fill the GPU even split (fewer than one
# for every SM_SHARE = 8 SMs: at the split cap of 4 the sm90 stream-K had when this was measured (6 since, up to
# 128 rows; unmeasured here), under sm_count / (2 x 4) tiles left more than half the SMs idle; an N that 128 columns do
# not divide counts as none) or give each SM fewer than this many 64-deep k-tiles: the sm80 tiles won at 7.8 (1024x8192)
# and 9.7 (8192x1280), the sm90 GEMM at 15.5 (4096x4096, 2048x8192), the two tied at 19.4 (8192x2560); 12 lies between.
SM80_ON_SM90_LAYOUT_FEW_TILES_MAX_M = 64
SM80_ON_SM90_LAYOUT_FEW_TILES_SM_SHARE = 8
SM80_ON_SM90_LAYOUT_FEW_K_TILES_PER_SM = 12
# Why, where the sm90 GEMM's wgmma main loop is the faster one: its fixed cost per launch (prologue, pipeline
# fill, stream-K fixup; 2-3 us more than the mma.sync tiles') is paid in full wherever the kernel before it is not
# one of ours. The sm90 GEMM launches as a programmatic dependent, so back to back (the peers harness, the sweep)
# it hides that cost under the previous GEMM's tail; in a model the kernel before a projection is a norm, an
# activation or attention, and it does not. Timed after an elementwise kernel that writes its input
# (tools/model_order_bench.py, H100, docs/perf-notes/2026-11-26-model-order.md), the sm80 tiles took 0.77x-1.01x
# the sm90 GEMM's time at M = 32 on every weight up to 64 Mi elements of the DESIGN and TP shapes (0.97x on
# 14336x8192, 1.01x on 28672x8192, 1.37x on 8192x28672 above), and at M = 64 0.78x on 1024x8192, 1.00x on
# 8192x2560 (19.4 k-tiles per SM), 1.03x-2.2x on the rest; back to back the sm90 GEMM had won all of these. The
# sm80 tiles were launched ordinarily then; since 2026-11-28 the 16- and 32-row ones are dependents too (the
# parallel split's two kernels both), which costs them 0-0.7 us after such a kernel and gains back to back
# (docs/perf-notes/2026-11-28-sm80-small-tiles-as-dependents.md, docs/perf-notes/2026-11-28-m32-pair-as-dependent.md).
# With the dependent pair at M = 32, back to back the sm80 tiles are the fastest config or within 3% on every H100
# cell swept (8192x5120: the sm90 GEMM's split 1.021x faster), while on the H200 the sm90 GEMM's split was the
# fastest config on six of the seven weights of 40 to 64 Mi elements swept at M = 32, by 1.03x-1.06x on four; the
# model's order has not been timed for the sm90 GEMM since, so the bound stands.


def sm80_first_on_sm90_layout(problem: GemmProblem, sm_count: int) -> bool:
    """Whether an sm90-layout weight's problem tries the sm80 path's tiles before the sm90 GEMM on a GPU of
    ``sm_count`` SMs (see above)."""
    M, N, K = problem.M, problem.N, problem.K
    if M <= SM80_ON_SM90_LAYOUT_MAX_M:
        return True
    if M <= SM80_ON_SM90_LAYOUT_SMALL_WEIGHT_MAX_M and K * N <= SM80_ON_SM90_LAYOUT_SMALL_WEIGHT:
        return True
    if M > SM80_ON_SM90_LAYOUT_FEW_TILES_MAX_M:
        return False
    tiles = sm90.narrow_tiles(M, N)
    return (SM80_ON_SM90_LAYOUT_FEW_TILES_SM_SHARE * tiles < sm_count
            or tiles * (K // sm90.TILE_K) < SM80_ON_SM90_LAYOUT_FEW_K_TILES_PER_SM * sm_count)


def path_order(problem: GemmProblem, layout: str, sm_count: int) -> tuple[str, ...]:
    """The paths the heuristic tries for ``problem`` on ``layout`` on a GPU of ``sm_count`` SMs, best first (see the
    module docstring)."""
    if layout == "sm90":
        gemm = ("sm80", "sm90") if sm80_first_on_sm90_layout(problem, sm_count) else ("sm90", "sm80")
    else:
        gemm = ("sm80",)
    if problem.M <= DECODE_MAX_M:
        return ("decode",) + gemm + ("dequant",)
    if problem.M >= DEQUANT_MIN_M[layout]:
        return ("dequant",) + gemm
    return gemm + ("dequant",)


def compiled(key: KernelKey) -> dict[str, list[GemmConfig]]:
    """Per path, the configs compiled for a weight of ``key``."""
    return {name: path.compiled(key) for name, path in PATHS.items()}


def heuristic(candidates: dict[str, list[GemmConfig]], problem: GemmProblem, key: KernelKey, gpu: Gpu,
              order: tuple[str, ...] | None = None) -> GemmConfig:
    """The first path of ``order`` (default :func:`path_order`) whose heuristic picks a config among its
    ``candidates`` that runs ``problem``. RuntimeError when none does."""
    reasons = []
    for name in order or path_order(problem, key.layout, gpu.sm_count):
        path = PATHS[name]
        configs = candidates.get(name, [])
        config = path.choose(configs, problem, key, gpu)
        if config is None:
            compiled_names = ", ".join(c.kernel_name for c in configs)
            reasons.append(f"{name}: none of its configs compiled for {key.name} takes this problem"
                           + (f" ({compiled_names})" if compiled_names else " (none compiled)"))
            continue
        reason = path.fits(config, problem, key)
        if reason is None:
            return config
        reasons.append(f"{name}: {reason}")
    raise RuntimeError(f"mixgemm: no kernel path runs M = {problem.M}, N = {problem.N}, K = {problem.K}, "
                       f"group_size = {problem.group_size} for {key.name} ({'; '.join(reasons)})")


def choose(config_arg, problem: GemmProblem, key: KernelKey, gpu: Gpu, tuned=None) -> GemmConfig:
    """What ``gemm(..., config=config_arg)`` runs: for ``"auto"`` the tuned choice ``tuned`` where it is compiled
    for the key and fits the problem, else the heuristic; for a path's name that path's heuristic choice; a config
    is checked (compiled for the key, fits the problem). ValueError names what is wrong."""
    candidates = compiled(key)
    check_config(config_arg, key, candidates)
    if config_arg == AUTO:
        if tuned is not None and _usable(tuned, candidates, problem, key):
            return tuned
        return heuristic(candidates, problem, key, gpu)
    if isinstance(config_arg, str):
        try:
            return heuristic(candidates, problem, key, gpu, order=(config_arg,))
        except RuntimeError as error:
            raise ValueError(f"gemm: config={config_arg!r}: {error}") from None
    reason = PATHS[config_arg.path].fits(config_arg, problem, key)
    if reason is not None:
        raise ValueError(f"gemm: config {config_arg.name} cannot run M = {problem.M}, N = {problem.N}, "
                         f"K = {problem.K}, group_size = {problem.group_size}: {reason}")
    return config_arg


def check_config(config_arg, key: KernelKey, candidates: dict[str, list[GemmConfig]] | None = None) -> None:
    """The rules of a config argument that hold whatever the rows: ``"auto"``; a path's name, of a path that reads
    the key's layout; or a GemmConfig compiled for the key (``candidates``: :func:`compiled`'s, when the caller
    has them). ValueError names the broken one."""
    if isinstance(config_arg, str):
        if config_arg == AUTO:
            return
        if config_arg not in PATHS:
            raise ValueError(f"gemm: config must be 'auto', a path name ({', '.join(PATHS)}) or a GemmConfig, got "
                             f"{config_arg!r}")
        if key.layout not in PATHS[config_arg].layouts:
            raise ValueError(f"gemm: the {config_arg} path does not read weights in the {key.layout!r} layout")
        return
    check_compiled(config_arg, compiled(key) if candidates is None else candidates, key)


def check_compiled(config, candidates: dict[str, list[GemmConfig]], key: KernelKey) -> None:
    """``config`` must be a GemmConfig compiled for a weight of ``key``; ValueError naming what is compiled."""
    if not isinstance(config, GemmConfig):
        raise ValueError(f"gemm: config must be 'auto', a path name or a GemmConfig, got {type(config).__name__}")
    path = PATHS[config.path]
    if key.layout not in path.layouts:
        raise ValueError(f"gemm: config {config.name} ({config.path} path) cannot read a weight in the "
                         f"{key.layout!r} layout; its kernels read {' and '.join(path.layouts)} weights "
                         f"(prepack(..., layout=...) chooses the layout)")
    compiled_names = [c.kernel_name for c in candidates.get(config.path, [])]
    if config.kernel_name not in compiled_names:
        names = ", ".join(compiled_names) or "none"
        raise ValueError(f"gemm: config {config.name} is not compiled into this build for {key.name} weights; its "
                         f"{config.path} configs for them: {names}")


def _usable(config: GemmConfig, candidates: dict[str, list[GemmConfig]], problem: GemmProblem,
            key: KernelKey) -> bool:
    """Whether a tuned config is compiled here for the key and runs the problem: a cache written by another build
    may name a kernel this build lacks, or a split this K cannot take; such an entry is stale, not an error."""
    compiled_names = {c.kernel_name for c in candidates.get(config.path, [])}
    return config.kernel_name in compiled_names and PATHS[config.path].fits(config, problem, key) is None
