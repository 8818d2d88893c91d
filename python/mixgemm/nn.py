"""``QuantLinear``: a drop-in ``torch.nn.Module`` for an AWQ/GPTQ quantized linear layer (int4, or int8 GPTQ),
run by mixgemm's GEMM.

It holds a prepacked weight (:func:`mixgemm.prepack`) as buffers and computes ``y = x @ W + bias`` through the
``mixgemm::gemm`` custom op (library.py) whenever it is traced, so a model built from it can be captured in a
CUDA graph or compiled with ``torch.compile(fullgraph=True)``; a plain eager call skips the op's dispatch and
calls the validated function directly (``library.eager_call``). Inference only: the op has no backward.

Tensor parallel: the constructors take ``tp=`` (a ``(rank, world_size)`` pair, a torch.distributed process
group, or a :class:`mixgemm.tensor_parallel.ShardSpec`) and ``style=`` ("column": split N; "row": split K,
outputs all-reduced), and keep only this rank's shard of the checkpoint's tensors (mixgemm.tensor_parallel).
"""

from __future__ import annotations

import os
from typing import Optional

import torch

from . import _checks, library, ops, packing, paths
from . import tensor_parallel as tp_

FORMATS = ("awq", "gptq", "gptq_v2")


class QuantLinear(torch.nn.Module):
    """``y = x @ W + bias`` for ``x [..., in_features]`` in the weight's activation dtype (fp16 or bf16).

    Build it with :meth:`from_awq`, :meth:`from_gptq` or :meth:`from_safetensors`, or directly from a
    :class:`~mixgemm.packing.PackedWeight`. Buffers (moved by ``.to(device)`` and saved in ``state_dict``):
    ``packed``, ``scales``, ``offsets``, ``perm`` (GPTQ act-order only, else None) and ``bias`` (or None).
    The activation dtype is the scales' dtype; casting the module to fp32 (``.float()``) makes it unusable,
    since the kernel takes fp16/bf16 only.

    ``config`` selects the kernel: ``"auto"`` (tuned cache, else the heuristic), a
    :class:`~mixgemm.GemmConfig` or its name. It may be reassigned at any time.

    ``shard`` (what the constructors' ``tp=`` gives): the layer is one rank's shard of a tensor-parallel
    layer. ``in_features`` / ``out_features`` are then the shard's input and output widths; the packed weight
    (``weight_k`` x ``weight_n``) may be larger by zero padding (mixgemm.tensor_parallel.geometry), in which
    case the input is gathered through the ``input_index`` buffer and the output narrowed; a row-parallel
    layer all-reduces its output over ``tp.group``. ``tp`` is the :class:`~mixgemm.tensor_parallel.ShardSpec`,
    None for a whole layer.
    """

    def __init__(
        self,
        packed_weight: packing.PackedWeight,
        bias: Optional[torch.Tensor] = None,
        *,
        config: library.ConfigArg = "auto",
        shard: Optional[tp_.LayerShard] = None,
    ) -> None:
        super().__init__()
        fn = "QuantLinear"
        if not isinstance(packed_weight, packing.PackedWeight):
            raise ValueError(f"{fn}: packed_weight must be a PackedWeight from mixgemm.prepack, "
                             f"got {type(packed_weight).__name__}")
        if packed_weight.bits not in (4, 8):
            raise ValueError(f"{fn}: weights must be 4- or 8-bit, got bits = {packed_weight.bits}")
        paths.to_name(config)  # a bad config is an error now, not at the first forward
        # The packed weight's K and N: the layer's input and output widths, unless a shard padded them.
        self.weight_k = packed_weight.k
        self.weight_n = packed_weight.n
        self.in_features = packed_weight.k
        self.out_features = packed_weight.n
        self.tp = None
        input_index = None
        if shard is not None:
            input_index = _check_shard(fn, shard, packed_weight)
            self.tp = shard.spec
            self.in_features, self.out_features = shard.in_features, shard.out_features
        self.group_size = packed_weight.group_size
        self.bits = packed_weight.bits
        # The weight layout (prepack's choice for the GPU) and whether it had zero points: plain attributes,
        # since a layout is a property of the packed buffer, not a tensor of its own.
        self.layout = packed_weight.layout
        self.scale_only = bool(packed_weight.scale_only)
        self.config = config
        self.register_buffer("packed", packed_weight.packed)
        self.register_buffer("scales", packed_weight.scales)
        self.register_buffer("offsets", packed_weight.offsets)
        self.register_buffer("perm", getattr(packed_weight, "perm", None))
        self.register_buffer("input_index", input_index)
        if bias is not None:
            if not isinstance(bias, torch.Tensor) or tuple(bias.shape) != (self.weight_n,):
                got = tuple(bias.shape) if isinstance(bias, torch.Tensor) else type(bias).__name__
                raise ValueError(f"{fn}: bias must be a tensor of shape ({self.weight_n},), got {got}")
            # Checkpoints often keep the bias in another float dtype or on the CPU; the kernel wants it in
            # the activation dtype beside the weight, so convert once here rather than on every call.
            bias = bias.to(device=self.packed.device, dtype=self.scales.dtype).contiguous()
        self.register_buffer("bias", bias)

    # -----------------------------------------------------------------------------------------------
    # Constructors from checkpoint tensors

    @classmethod
    def from_awq(
        cls,
        qweight: torch.Tensor,
        scales: torch.Tensor,
        qzeros: Optional[torch.Tensor],
        bias: Optional[torch.Tensor] = None,
        group_size: Optional[int] = None,
        *,
        config: library.ConfigArg = "auto",
        layout: str = "auto",
        tp: object = None,
        style: Optional[str] = None,
    ) -> "QuantLinear":
        """From AWQ tensors on the GPU: ``qweight`` int32 ``[K, N/8]``, ``scales`` ``[K/G, N]``, ``qzeros``
        int32 ``[K/G, N/8]`` (None for symmetric weights). ``group_size`` defaults to ``K / (K/G)``.
        ``layout``: the kernel layout, as :func:`mixgemm.prepack` takes it ("auto": the GPU's own).
        ``tp`` / ``style``: keep only this rank's shard of the full layer's tensors (see the class)."""
        extra = {} if layout == "auto" else {"layout": layout}
        spec = tp_.shard_spec("QuantLinear.from_awq", tp, style)
        if spec is not None:
            return cls._from_shard(tp_.shard_checkpoint("QuantLinear.from_awq", spec, "awq", 4, qweight, scales,
                                                        qzeros, None, bias, group_size), config, extra)
        return cls(packing.prepack(qweight, scales, qzeros, group_size, **extra), bias, config=config)

    @classmethod
    def from_gptq(
        cls,
        qweight: torch.Tensor,
        scales: torch.Tensor,
        qzeros: Optional[torch.Tensor],
        g_idx: Optional[torch.Tensor] = None,
        bias: Optional[torch.Tensor] = None,
        v1: Optional[bool] = None,
        *,
        bits: int = 4,
        checkpoint_format: str = "gptq",
        config: library.ConfigArg = "auto",
        layout: str = "auto",
        tp: object = None,
        style: Optional[str] = None,
    ) -> "QuantLinear":
        """From GPTQ tensors on the GPU: ``qweight`` int32 ``[K/8, N]``, ``scales`` ``[K/G, N]``, ``qzeros``
        int32 ``[K/G, N/8]``, optional ``g_idx`` ``[K]`` (act-order: K is permuted once at prepack time).
        ``bits=8`` for 8-bit GPTQ (``qweight [K/4, N]``, ``qzeros [K/G, N/4]``).

        Zeros are read **v1** by default (stored ``zero - 1``: what AutoGPTQ and GPTQModel write, and what
        ``checkpoint_format: "gptq"`` or no checkpoint_format in the quantization config means).
        ``checkpoint_format="gptq_v2"`` reads them as stored. ``v1=True/False`` is the older explicit
        override of the ``"gptq"`` reading (see :func:`mixgemm.prepack`). ``layout``, ``tp`` and ``style`` as
        in :meth:`from_awq`.
        """
        # g_idx, bits, v1 and layout only when they say something, so this also works with a prepack that
        # predates act-order, 8-bit or layout support.
        extra = {} if g_idx is None else {"g_idx": g_idx}
        if bits != 4:
            extra["bits"] = bits
        if v1 is not None:
            extra["gptq_v1"] = v1
        if layout != "auto":
            extra["layout"] = layout
        spec = tp_.shard_spec("QuantLinear.from_gptq", tp, style)
        if spec is not None:
            if checkpoint_format not in packing.GPTQ_FORMATS:
                raise ValueError(f"QuantLinear.from_gptq: checkpoint_format must be 'gptq' (v1 zeros) or 'gptq_v2', "
                                 f"got {checkpoint_format!r}")
            v1_zeros = packing.gptq_reads_v1("QuantLinear.from_gptq", checkpoint_format, v1)
            fmt = "gptq" if v1_zeros else "gptq_v2"
            sharded = tp_.shard_checkpoint("QuantLinear.from_gptq", spec, fmt, bits, qweight, scales, qzeros, g_idx,
                                           bias)
            return cls._from_shard(sharded, config, {"layout": layout} if layout != "auto" else {})
        packed_weight = packing.prepack(qweight, scales, qzeros, format=checkpoint_format, **extra)
        return cls(packed_weight, bias, config=config)

    @classmethod
    def _from_shard(cls, sharded: "tp_.ShardedCheckpoint", config: library.ConfigArg, extra: dict) -> "QuantLinear":
        """prepack of a shard (mixgemm.tensor_parallel.shard_checkpoint) and the layer that holds it."""
        tp_.spec.check_process_group("QuantLinear", sharded.geometry.spec)
        packed_weight = packing.prepack(sharded.qweight, sharded.scales, sharded.qzeros, **sharded.prepack_kwargs(),
                                        **extra)
        return cls(packed_weight, sharded.bias, config=config, shard=sharded.layer_shard())

    @classmethod
    def from_safetensors(
        cls,
        path: str | os.PathLike,
        prefix: str,
        format: str = "awq",
        device: str | torch.device = "cuda",
        *,
        v1: Optional[bool] = None,
        bits: int = 4,
        config: library.ConfigArg = "auto",
        layout: str = "auto",
        tp: object = None,
        style: Optional[str] = None,
    ) -> "QuantLinear":
        """One layer of a safetensors checkpoint: ``{prefix}.qweight``, ``{prefix}.qzeros``,
        ``{prefix}.scales`` and, if present, ``{prefix}.bias`` (and ``{prefix}.g_idx`` for GPTQ).

        ``format``: ``"awq"``, ``"gptq"`` (zeros read v1, stored ``z - 1``: AutoGPTQ/GPTQModel checkpoints,
        ``checkpoint_format: "gptq"`` or none) or ``"gptq_v2"`` (zeros as stored). Only that layer's tensors
        are read. ``v1``, ``bits`` and ``layout`` are :meth:`from_gptq`'s (AWQ is 4-bit). To load a checkpoint folder
        with its own quantization config (or a whole model), see :mod:`mixgemm.checkpoint`.

        A ``path`` that is None, a directory, absent or not a readable safetensors file (empty, truncated,
        corrupt) is a ValueError naming it.

        ``tp`` / ``style`` (see the class): only this rank's slices of the tensors are read from the file.
        """
        from .checkpoint.files import open_safetensors

        fn = "QuantLinear.from_safetensors"
        if format == "awq" and bits != 4:
            raise ValueError(f"{fn}: AWQ checkpoints are 4-bit, got bits = {bits}")
        # Opening reads the header only; safetensors' own errors would name neither the file nor the rule.
        with open_safetensors(fn, path):
            pass
        spec = tp_.shard_spec(fn, tp, style)
        if spec is not None:
            return cls._shard_from_safetensors(path, prefix, format, device, spec, v1, bits, config, layout)
        tensors = read_checkpoint_tensors(path, prefix, format)  # a bad file or prefix is reported first
        target = _checks.check_load_device(fn, device)
        t = {name: None if value is None else value.to(target) for name, value in tensors.items()}
        if format == "awq":
            return cls.from_awq(t["qweight"], t["scales"], t["qzeros"], t["bias"], config=config, layout=layout)
        return cls.from_gptq(t["qweight"], t["scales"], t["qzeros"], t["g_idx"], t["bias"], v1=v1, bits=bits,
                             checkpoint_format=format, config=config, layout=layout)

    @classmethod
    def _shard_from_safetensors(cls, path, prefix: str, format: str, device, spec: "tp_.ShardSpec",
                                v1: Optional[bool], bits: int, config: library.ConfigArg,
                                layout: str) -> "QuantLinear":
        """from_safetensors for one rank: the layer's tensors opened lazily, only the shard's slices read."""
        from safetensors import safe_open

        fn = "QuantLinear.from_safetensors"
        read_checkpoint_tensors(path, prefix, format, lazy=True)  # the same checks of file, prefix and keys
        target = _checks.check_load_device(fn, device)
        prefix = prefix.rstrip(".")
        fmt = "awq" if format == "awq" else ("gptq" if packing.gptq_reads_v1(fn, format, v1) else "gptq_v2")
        with safe_open(os.fspath(path), framework="pt", device="cpu") as f:
            keys = set(f.keys())
            source = {name: tp_.sources.SafetensorsSlice(f, f"{prefix}.{name}") if f"{prefix}.{name}" in keys else None
                      for name in ("qweight", "qzeros", "scales", "bias", "g_idx")}
            g_idx = None if format == "awq" else source["g_idx"]
            sharded = tp_.shard_checkpoint(f"{fn}: {prefix}", spec, fmt, bits, source["qweight"], source["scales"],
                                           source["qzeros"], g_idx, source["bias"])
        sharded = sharded.to(target)
        return cls._from_shard(sharded, config, {} if layout == "auto" else {"layout": layout})

    # -----------------------------------------------------------------------------------------------

    @property
    def dtype(self) -> torch.dtype:
        """The activation (and output) dtype: that of the scales."""
        return self.scales.dtype

    def packed_weight(self) -> packing.PackedWeight:
        """The buffers as a :class:`~mixgemm.packing.PackedWeight`, for :func:`mixgemm.gemm` and friends."""
        return packing.PackedWeight(
            packed=self.packed, scales=self.scales, offsets=self.offsets, group_size=self.group_size, bits=self.bits,
            act_dtype=self.scales.dtype, n=self.weight_n, k=self.weight_k, perm=self.perm,
            layout=self.layout, scale_only=self.scale_only,
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.tp is not None:
            return self._shard_forward(x)
        return self._gemm(x)

    def _gemm(self, x: torch.Tensor) -> torch.Tensor:
        if library.eager_call(x):
            # Plain eager call: straight to the validated function, skipping the custom op's dispatch.
            weight, config = self._eager_weight()
            # nn.Linear takes any strides; the kernel needs contiguous rows (a no-op when they already are).
            return ops.gemm(x if x.is_contiguous() else x.contiguous(), weight, self._buffers["bias"], config)
        # Traced (torch.compile, export, fake tensors): through the custom op. The fields go in one by one
        # rather than as a PackedWeight so that torch.compile has no dataclass to construct while tracing.
        return library.gemm_tensors(
            x.contiguous(), self.packed, self.scales, self.offsets, self.bias,
            group_size=self.group_size, n=self.weight_n, k=self.weight_k, perm=self.perm,
            config=self.config, layout=self.layout, scale_only=self.scale_only,
        )

    def _shard_forward(self, x: torch.Tensor) -> torch.Tensor:
        """A tensor-parallel shard: the input gathered to a padded or regrouped weight's rows, the GEMM, the
        output narrowed to ``out_features`` and, row-parallel, summed over the ranks."""
        if not isinstance(x, torch.Tensor) or x.dim() < 1 or x.shape[-1] != self.in_features:
            got = tuple(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__
            raise ValueError(f"QuantLinear ({self.tp.describe()}): x must be a tensor [..., {self.in_features}] "
                             f"(this rank's input features), got {got}")
        index = self._buffers["input_index"]
        if index is not None:
            x = x.index_select(-1, index)
        return tp_.reduce.finish_output(self._gemm(x), self.out_features, self.tp)

    def _eager_weight(self) -> tuple[packing.PackedWeight, library.ConfigArg]:
        """The buffers as a PackedWeight and the parsed config, kept between eager calls so that gemm's
        validation of the weight (remembered on the PackedWeight) and its plans are reused.

        Rebuilt whenever something changed since: an attribute assigned through the module (a new ``config``,
        ``group_size``, a buffer set as ``layer.packed = t``) drops the cache in ``__setattr__``; ``.to()``,
        ``.half()`` and ``register_buffer`` write ``_buffers`` directly, so the buffers' identities are compared
        here (the cached PackedWeight keeps the old tensors alive, so an identity cannot be reused).
        """
        b = self._buffers
        cached = self.__dict__.get("_mixgemm_eager")
        if cached is not None:
            w, config = cached
            if (w.packed is b["packed"] and w.scales is b["scales"] and w.offsets is b["offsets"]
                    and w.perm is b["perm"]):
                return w, config
        w, config = self.packed_weight(), library.parse_config(self.config)
        self.__dict__["_mixgemm_eager"] = (w, config)
        return w, config

    def __setattr__(self, name: str, value) -> None:
        self.__dict__.pop("_mixgemm_eager", None)  # see _eager_weight
        super().__setattr__(name, value)

    def extra_repr(self) -> str:
        text = (f"in_features={self.in_features}, out_features={self.out_features}, group_size={self.group_size}, "
                f"dtype={self.dtype}, bias={self.bias is not None}")
        if self.bits != 4:
            text += f", bits={self.bits}"
        if self.perm is not None:
            text += ", act_order=True"
        if self.layout != "sm80":
            text += f", layout={self.layout}"
        if self.tp is not None:
            text += f", tp=({self.tp.describe()})"
            if (self.weight_k, self.weight_n) != (self.in_features, self.out_features):
                text += f", padded_to=({self.weight_k}, {self.weight_n})"
        if not (isinstance(self.config, str) and self.config == "auto"):
            text += f", config={paths.to_name(self.config)}"
        return text


def read_checkpoint_tensors(
    path: str | os.PathLike, prefix: str, format: str = "awq", *, lazy: bool = False
) -> dict[str, Optional[torch.Tensor]]:
    """Reads one quantized layer's tensors from a safetensors file onto the CPU, checking that they exist.

    Returns ``{"qweight", "qzeros", "scales", "bias", "g_idx"}`` (``bias`` None when the file has none;
    ``g_idx`` None for AWQ or when absent). A missing required tensor is a ValueError naming its key.
    ``lazy=True`` checks the keys and returns an empty dict, reading no tensor (a tensor-parallel load reads
    only its slices).
    """
    from safetensors import safe_open

    fn = "QuantLinear.from_safetensors"
    if format not in FORMATS:
        raise ValueError(f"{fn}: format must be 'awq', 'gptq' (v1 zeros) or 'gptq_v2', got {format!r}")
    if not isinstance(prefix, str) or not prefix.strip("."):
        raise ValueError(f"{fn}: prefix must name a layer, such as 'model.layers.0.mlp.down_proj', got {prefix!r}")
    prefix = prefix.rstrip(".")  # "layer." and "layer" name the same layer
    required = ("qweight", "qzeros", "scales")
    optional = ("bias", "g_idx") if format != "awq" else ("bias",)

    # safe_open reads the header only; each get_tensor then reads one tensor, so a layer of a large
    # multi-layer file costs only its own bytes.
    with safe_open(os.fspath(path), framework="pt", device="cpu") as f:
        keys = set(f.keys())
        missing = [f"{prefix}.{name}" for name in required if f"{prefix}.{name}" not in keys]
        if missing:
            nearby = sorted(k for k in keys if k.startswith(prefix + "."))
            hint = f"tensors under '{prefix}.': {nearby}" if nearby else f"no tensor starts with '{prefix}.'"
            raise ValueError(
                f"{fn}: {os.fspath(path)} has no tensor {', '.join(repr(m) for m in missing)} "
                f"(a {format} layer needs {', '.join(required)}); {hint}"
            )
        if lazy:
            return {}
        tensors: dict[str, Optional[torch.Tensor]] = {"bias": None, "g_idx": None}
        for name in required + optional:
            key = f"{prefix}.{name}"
            if key in keys:
                tensors[name] = f.get_tensor(key)
    return tensors


def _check_shard(fn: str, shard: "tp_.LayerShard", packed_weight: packing.PackedWeight) -> Optional[torch.Tensor]:
    """A shard's widths fit its packed weight, and a padded K comes with the input gather; returns that."""
    if not isinstance(shard, tp_.LayerShard):
        raise ValueError(f"{fn}: shard must be a mixgemm.tensor_parallel.LayerShard, got {type(shard).__name__}")
    k, n = packed_weight.k, packed_weight.n
    if not (0 < shard.in_features <= k and 0 < shard.out_features <= n):
        raise ValueError(f"{fn}: the shard's in_features = {shard.in_features}, out_features = {shard.out_features} "
                         f"must be positive and at most the packed weight's K = {k}, N = {n}")
    index = shard.input_index
    if index is None:
        if shard.in_features != k:
            raise ValueError(f"{fn}: the shard's in_features = {shard.in_features} differs from the packed K = {k} "
                             "but it has no input_index to gather its input with")
        return None
    if not isinstance(index, torch.Tensor) or index.dtype != torch.int64 or tuple(index.shape) != (k,):
        raise ValueError(f"{fn}: shard.input_index must be an int64 tensor of shape ({k},)")
    if index.numel() and (int(index.min()) < 0 or int(index.max()) >= shard.in_features):
        raise ValueError(f"{fn}: shard.input_index must index the input's {shard.in_features} columns")
    return index.to(packed_weight.packed.device)
