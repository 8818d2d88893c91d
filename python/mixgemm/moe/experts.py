"""All experts of one projection of a mixture-of-experts layer, prepacked as one object for the grouped GEMM.

Each expert is prepacked exactly as :func:`mixgemm.prepack` packs a dense weight, in the sm80 or the sm90 layout,
and the experts are stacked along a new first dimension, so expert ``e``'s words, scales and offsets start at a
fixed stride the kernels add per expert. Both layouts run the decode GEMV and the sm80 kernel's tiles
(cpp/mixgemm/moe/); the sm90 layout also runs the sm90 form (cpp/mixgemm/moe/sm90/: CUTLASS 3.x wgmma, for
experts that get many tokens), so ``layout="auto"`` packs it on a Hopper GPU whose build has that form.

A gated projection (``gated=True``: the gate and up projections of a SwiGLU expert, concatenated ``[gate | up]``
along N as vLLM's ``w13``) has its columns interleaved in runs of 8 before prepack: run ``2i`` is gate's columns
``8i .. 8i + 7`` and run ``2i + 1`` up's same columns. An mma lane then holds a column's gate and up values in two
neighbouring accumulator tiles, and the kernel writes ``SiLU(gate) * up`` (``n / 2`` columns) straight from them
(sm80/kernel/grouped.cuh). Runs of 8 columns are whole int32 words of AWQ packing and of GPTQ's zero points
(two words at 8 bits), so the permutation moves words, never unpacks codes.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import torch

from ..kernel_key import KernelKey
from ..packing import FORMATS, auto_layout, prepack
from .heuristic import SM90_TILE_N

LAYOUTS = ("auto", "sm80", "sm90")

# Columns per run of the gated interleave: one n8 mma tile (sm80/kernel/grouped.cuh pairs tiles 2i, 2i + 1).
GATED_RUN = 8


@dataclasses.dataclass
class ExpertWeights:
    """``num_experts`` prepacked weights ``[k, n]`` of one projection, stacked: ``packed`` int32
    ``[E, *packed shape of the layout]``, ``scales`` and ``offsets`` ``[E, k / group_size, n]`` in ``act_dtype``
    (``W = q * scale + offset`` on the layout's codes). ``gated``: columns interleaved gate/up (module
    docstring); the grouped GEMM then returns ``n / 2`` columns, ``SiLU(x @ gate) * (x @ up)``. ``layout``:
    ``"sm80"`` or ``"sm90"``."""

    packed: torch.Tensor
    scales: torch.Tensor
    offsets: torch.Tensor
    group_size: int
    bits: int
    act_dtype: torch.dtype
    num_experts: int
    n: int
    k: int
    gated: bool = False
    scale_only: bool = False
    layout: str = "sm80"

    @property
    def key(self) -> KernelKey:
        """Every grouped kernel adds the offsets (zero for symmetric weights): the scale_offset key of the layout."""
        return KernelKey.of(self.act_dtype, self.bits, self.layout, "scale_offset")

    @property
    def expert_bytes(self) -> int:
        """Bytes from one expert's packed weight to the next."""
        return self.packed.stride(0) * self.packed.element_size()

    @property
    def out_features(self) -> int:
        return self.n // 2 if self.gated else self.n

    @property
    def device(self) -> torch.device:
        return self.packed.device


def gated_run_order(n: int) -> torch.Tensor:
    """The source run (of GATED_RUN columns) of each run of a gated weight's interleaved order: for N = 2 I,
    runs alternate gate run i and up run I / 8 + i."""
    runs = n // GATED_RUN
    half = runs // 2
    order = torch.empty(runs, dtype=torch.long)
    order[0::2] = torch.arange(half)
    order[1::2] = torch.arange(half) + half
    return order


def interleave_runs(t: torch.Tensor, n: int) -> torch.Tensor:
    """``t`` (last dimension ``n / values_per_column_word`` words or values covering N columns) with its runs of
    GATED_RUN columns put in :func:`gated_run_order`."""
    per_run = t.shape[-1] * GATED_RUN // n  # words (or values) per run of 8 columns
    runs = t.reshape(*t.shape[:-1], n // GATED_RUN, per_run)
    order = gated_run_order(n).to(t.device)
    return runs.index_select(-2, order).reshape(t.shape).contiguous()


def _checkpoint_n(fn: str, e: int, scales: torch.Tensor) -> int:
    if not isinstance(scales, torch.Tensor) or scales.dim() != 2:
        got = tuple(scales.shape) if isinstance(scales, torch.Tensor) else type(scales).__name__
        raise ValueError(f"{fn}: scales[{e}] must be a 2-D tensor [K/G, N], got {got}")
    return scales.shape[1]


def _check_interleavable(fn: str, e: int, name: str, t: torch.Tensor, n: int) -> None:
    """``t`` must cover the N columns in whole runs of GATED_RUN (what interleave_runs moves), so that a badly
    shaped tensor is refused here, naming it, and not deep in a reshape."""
    if not isinstance(t, torch.Tensor) or t.dim() != 2 or (t.shape[-1] * GATED_RUN) % n or t.shape[-1] * GATED_RUN < n:
        got = tuple(t.shape) if isinstance(t, torch.Tensor) else type(t).__name__
        raise ValueError(f"{fn}: expert {e}: {name} must be a 2-D tensor whose last dimension packs N = {n} columns "
                         f"(scales: N; AWQ qweight and zeros: N / 8; GPTQ qweight: N), got {got}")


def prepack_experts(
    qweights: Sequence[torch.Tensor],
    scales: Sequence[torch.Tensor],
    qzeros: Sequence[torch.Tensor] | None = None,
    group_size: int | None = None,
    *,
    format: str = "awq",
    bits: int = 4,
    gptq_v1: bool | None = None,
    gated: bool = False,
    layout: str = "auto",
) -> ExpertWeights:
    """Prepacks one projection's experts (one checkpoint tensor per expert in each sequence, each what
    :func:`mixgemm.prepack` takes for a dense weight in ``format``) into one :class:`ExpertWeights` on their GPU.

    ``qzeros=None``: symmetric (scale-only) experts. ``gated=True``: each expert's N is ``2 x intermediate``,
    columns ``[gate | up]``; the grouped GEMM applies ``SiLU(gate) * up``. Act-order (``g_idx``) experts are
    not taken: each expert would need its own permutation of x. Every expert must have the same shape, group
    size and dtype; a mismatch names the expert.

    ``layout``: ``"auto"`` packs the sm90 layout on a Hopper GPU whose build has the grouped GEMM's sm90 form
    for the dtype and width and where the shape fits it (N a multiple of 128), else the sm80 layout; ``"sm80"``
    or ``"sm90"`` force one.
    """
    fn = "prepack_experts"
    if format not in FORMATS:
        raise ValueError(f"{fn}: format must be one of {FORMATS}, got {format!r}")
    if layout not in LAYOUTS:
        raise ValueError(f"{fn}: layout must be one of {LAYOUTS}, got {layout!r}")
    qweights, scales = list(qweights), list(scales)
    E = len(qweights)
    if E == 0:
        raise ValueError(f"{fn}: qweights must hold at least one expert")
    if len(scales) != E:
        raise ValueError(f"{fn}: scales holds {len(scales)} experts, qweights {E}")
    zeros = [None] * E if qzeros is None else list(qzeros)
    if len(zeros) != E:
        raise ValueError(f"{fn}: qzeros holds {len(zeros)} experts, qweights {E}")
    if any(z is None for z in zeros) and not all(z is None for z in zeros):
        raise ValueError(f"{fn}: either every expert has zero points or none has")
    if layout == "auto":
        layout = _auto_layout(qweights[0], scales[0], format, bits)
    packed = []
    for e in range(E):
        q, s, z = qweights[e], scales[e], zeros[e]
        n = _checkpoint_n(fn, e, s)
        if gated:
            if n % (2 * GATED_RUN) != 0:
                raise ValueError(f"{fn}: gated experts need N = 2 x intermediate with intermediate a multiple of "
                                 f"{GATED_RUN}; expert {e} has N = {n}")
            for name, t in (("qweight", q), ("qzeros", z)):
                if t is not None:
                    _check_interleavable(fn, e, name, t, n)
            s = interleave_runs(s, n)
            z = interleave_runs(z, n) if z is not None else None
            # AWQ packs N (8 columns per word); GPTQ packs K, so its qweight's columns are plain values.
            q = interleave_runs(q, n)
        try:
            w = prepack(q, s, z, group_size, format=format, bits=bits, gptq_v1=gptq_v1, layout=layout)
        except ValueError as exc:
            raise ValueError(f"{fn}: expert {e}: {exc}") from None
        if packed and (w.n, w.k, w.group_size, w.bits, w.act_dtype) != (
                packed[0].n, packed[0].k, packed[0].group_size, packed[0].bits, packed[0].act_dtype):
            p0 = packed[0]
            raise ValueError(f"{fn}: expert {e} is [K={w.k}, N={w.n}] group {w.group_size} {w.bits}-bit {w.act_dtype}"
                             f", expert 0 [K={p0.k}, N={p0.n}] group {p0.group_size} {p0.bits}-bit {p0.act_dtype}: "
                             "every expert of a projection must match")
        packed.append(w)
    p0 = packed[0]
    return ExpertWeights(torch.stack([w.packed for w in packed]), torch.stack([w.scales for w in packed]),
                         torch.stack([w.offsets for w in packed]), p0.group_size, p0.bits, p0.act_dtype, E, p0.n,
                         p0.k, gated=gated, scale_only=qzeros is None, layout=layout)


def _auto_layout(qweight: torch.Tensor, scales: torch.Tensor, format: str, bits: int) -> str:
    """"sm90" where the dense sm90 path would take expert 0 on its GPU (a Hopper GPU, a shape its kernels fit)
    and this build has the grouped GEMM's sm90 form for the key, with N in its 128-column tiles; else "sm80"."""
    from .. import _C

    if auto_layout(qweight, scales, format, bits) != "sm90" or scales.shape[1] % SM90_TILE_N:
        return "sm80"
    key = KernelKey.of(scales.dtype, bits, "sm90", "scale_offset")
    return "sm90" if _C.moe.sm90_compiled_configs(key.as_tuple()) else "sm80"
