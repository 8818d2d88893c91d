"""``QuantLinear``: a drop-in ``torch.nn.Module`` for an AWQ/GPTQ quantized linear layer (int4, or int8 GPTQ),
run by mixgemm's GEMM.

It holds a prepacked weight (:func:`mixgemm.prepack`) as buffers and computes ``y = x @ W + bias`` through the
``mixgemm::gemm`` custom op (library.py) whenever it is traced, so a model built from it can be captured in a
CUDA graph or compiled with ``torch.compile(fullgraph=True)``; a plain eager call skips the op's dispatch and
calls the validated function directly (``library.eager_call``). Inference only: the op has no backward.
"""

from __future__ import annotations

import os
from typing import Optional

import torch

from . import _checks, library, ops, packing, paths

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
    """

    def __init__(
        self,
        packed_weight: packing.PackedWeight,
        bias: Optional[torch.Tensor] = None,
        *,
        config: library.ConfigArg = "auto",
    ) -> None:
        super().__init__()
        fn = "QuantLinear"
        if not isinstance(packed_weight, packing.PackedWeight):
            raise ValueError(f"{fn}: packed_weight must be a PackedWeight from mixgemm.prepack, "
                             f"got {type(packed_weight).__name__}")
        if packed_weight.bits not in (4, 8):
            raise ValueError(f"{fn}: weights must be 4- or 8-bit, got bits = {packed_weight.bits}")
        paths.to_name(config)  # a bad config is an error now, not at the first forward
        self.in_features = packed_weight.k
        self.out_features = packed_weight.n
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
        if bias is not None:
            if not isinstance(bias, torch.Tensor) or tuple(bias.shape) != (self.out_features,):
                got = tuple(bias.shape) if isinstance(bias, torch.Tensor) else type(bias).__name__
                raise ValueError(f"{fn}: bias must be a tensor of shape ({self.out_features},), got {got}")
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
    ) -> "QuantLinear":
        """From AWQ tensors on the GPU: ``qweight`` int32 ``[K, N/8]``, ``scales`` ``[K/G, N]``, ``qzeros``
        int32 ``[K/G, N/8]`` (None for symmetric weights). ``group_size`` defaults to ``K / (K/G)``.
        ``layout``: the kernel layout, as :func:`mixgemm.prepack` takes it ("auto": the GPU's own)."""
        extra = {} if layout == "auto" else {"layout": layout}
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
    ) -> "QuantLinear":
        """From GPTQ tensors on the GPU: ``qweight`` int32 ``[K/8, N]``, ``scales`` ``[K/G, N]``, ``qzeros``
        int32 ``[K/G, N/8]``, optional ``g_idx`` ``[K]`` (act-order: K is permuted once at prepack time).
        ``bits=8`` for 8-bit GPTQ (``qweight [K/4, N]``, ``qzeros [K/G, N/4]``).

        Zeros are read **v1** by default (stored ``zero - 1``: what AutoGPTQ and GPTQModel write, and what
        ``checkpoint_format: "gptq"`` or no checkpoint_format in the quantization config means).
        ``checkpoint_format="gptq_v2"`` reads them as stored. ``v1=True/False`` is the older explicit
        override of the ``"gptq"`` reading (see :func:`mixgemm.prepack`). ``layout`` as in :meth:`from_awq`.
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
        packed_weight = packing.prepack(qweight, scales, qzeros, format=checkpoint_format, **extra)
        return cls(packed_weight, bias, config=config)

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
    ) -> "QuantLinear":
        """One layer of a safetensors checkpoint: ``{prefix}.qweight``, ``{prefix}.qzeros``,
        ``{prefix}.scales`` and, if present, ``{prefix}.bias`` (and ``{prefix}.g_idx`` for GPTQ).

        ``format``: ``"awq"``, ``"gptq"`` (zeros read v1, stored ``z - 1``: AutoGPTQ/GPTQModel checkpoints,
        ``checkpoint_format: "gptq"`` or none) or ``"gptq_v2"`` (zeros as stored). Only that layer's tensors
        are read. ``v1``, ``bits`` and ``layout`` are :meth:`from_gptq`'s (AWQ is 4-bit). To load a checkpoint folder
        with its own quantization config (or a whole model), see :mod:`mixgemm.checkpoint`.

        A ``path`` that is None, a directory, absent or not a readable safetensors file (empty, truncated,
        corrupt) is a ValueError naming it.
        """
        from .checkpoint.files import open_safetensors

        fn = "QuantLinear.from_safetensors"
        if format == "awq" and bits != 4:
            raise ValueError(f"{fn}: AWQ checkpoints are 4-bit, got bits = {bits}")
        # Opening reads the header only; safetensors' own errors would name neither the file nor the rule.
        with open_safetensors(fn, path):
            pass
        tensors = read_checkpoint_tensors(path, prefix, format)  # a bad file or prefix is reported first
        target = _checks.check_load_device(fn, device)
        t = {name: None if value is None else value.to(target) for name, value in tensors.items()}
        if format == "awq":
            return cls.from_awq(t["qweight"], t["scales"], t["qzeros"], t["bias"], config=config, layout=layout)
        return cls.from_gptq(t["qweight"], t["scales"], t["qzeros"], t["g_idx"], t["bias"], v1=v1, bits=bits,
                             checkpoint_format=format, config=config, layout=layout)

    # -----------------------------------------------------------------------------------------------

    @property
    def dtype(self) -> torch.dtype:
        """The activation (and output) dtype: that of the scales."""
        return self.scales.dtype

    def packed_weight(self) -> packing.PackedWeight:
        """The buffers as a :class:`~mixgemm.packing.PackedWeight`, for :func:`mixgemm.gemm` and friends."""
        return packing.PackedWeight(
            packed=self.packed, scales=self.scales, offsets=self.offsets, group_size=self.group_size, bits=self.bits,
            act_dtype=self.scales.dtype, n=self.out_features, k=self.in_features, perm=self.perm,
            layout=self.layout, scale_only=self.scale_only,
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if library.eager_call(x):
            # Plain eager call: straight to the validated function, skipping the custom op's dispatch.
            weight, config = self._eager_weight()
            # nn.Linear takes any strides; the kernel needs contiguous rows (a no-op when they already are).
            return ops.gemm(x if x.is_contiguous() else x.contiguous(), weight, self._buffers["bias"], config)
        # Traced (torch.compile, export, fake tensors): through the custom op. The fields go in one by one
        # rather than as a PackedWeight so that torch.compile has no dataclass to construct while tracing.
        return library.gemm_tensors(
            x.contiguous(), self.packed, self.scales, self.offsets, self.bias,
            group_size=self.group_size, n=self.out_features, k=self.in_features, perm=self.perm,
            config=self.config, layout=self.layout, scale_only=self.scale_only,
        )

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
        if not (isinstance(self.config, str) and self.config == "auto"):
            text += f", config={paths.to_name(self.config)}"
        return text


def read_checkpoint_tensors(
    path: str | os.PathLike, prefix: str, format: str = "awq"
) -> dict[str, Optional[torch.Tensor]]:
    """Reads one quantized layer's tensors from a safetensors file onto the CPU, checking that they exist.

    Returns ``{"qweight", "qzeros", "scales", "bias", "g_idx"}`` (``bias`` None when the file has none;
    ``g_idx`` None for AWQ or when absent). A missing required tensor is a ValueError naming its key.
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
        tensors: dict[str, Optional[torch.Tensor]] = {"bias": None, "g_idx": None}
        for name in required + optional:
            key = f"{prefix}.{name}"
            if key in keys:
                tensors[name] = f.get_tensor(key)
    return tensors
