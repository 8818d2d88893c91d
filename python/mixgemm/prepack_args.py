"""The arguments of :func:`mixgemm.prepack` for one quantized layer, as a checkpoint reader hands them over: the
whole layer's (mixgemm.checkpoint) or one rank's shard of it (mixgemm.tensor_parallel's ShardedCheckpoint extends
it). Its own module so that both can import it: the checkpoint loaders import tensor_parallel."""

from __future__ import annotations

import dataclasses
from typing import Optional

import torch


@dataclasses.dataclass
class PrepackArgs:
    """What :func:`mixgemm.prepack` takes for one layer: ``format`` ``"awq"``, ``"gptq"`` (v1 zeros) or
    ``"gptq_v2"``; ``qzeros`` None for symmetric weights; ``scales`` already in the activation dtype."""

    qweight: torch.Tensor
    scales: torch.Tensor
    qzeros: Optional[torch.Tensor]
    g_idx: Optional[torch.Tensor]
    bias: Optional[torch.Tensor]
    format: str
    bits: int

    def to(self, device) -> "PrepackArgs":
        move = (lambda t: None if t is None else t.to(device))
        return dataclasses.replace(self, qweight=move(self.qweight), scales=move(self.scales),
                                   qzeros=move(self.qzeros), g_idx=move(self.g_idx), bias=move(self.bias))

    @property
    def k(self) -> int:
        return self.qweight.shape[0] * (1 if self.format == "awq" else 32 // self.bits)

    @property
    def n(self) -> int:
        return self.scales.shape[1]
