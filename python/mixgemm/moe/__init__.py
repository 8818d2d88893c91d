"""Mixture-of-experts on mixgemm's grouped mixed-input GEMM.

``prepack_experts`` packs one projection's experts (AWQ / GPTQ tensors per expert) into an :class:`ExpertWeights`;
``route`` sorts the router's choices by expert on the GPU; ``grouped_gemm`` runs every routed product of one
projection in one launch; ``fused_moe`` is the whole layer (gate/up, SiLU-and-multiply, down, the weighted sum
over the top-k), vLLM's ``fused_moe`` semantics, and ``fused_moe_op`` the same through the custom op
``mixgemm::fused_moe`` (torch.compile); ``reference_fused_moe`` its float32 reference. ``QuantMoE`` is the
``nn.Module`` that replaces a transformers MoE block (``TopKRouter`` / ``softmax_topk``: its routing);
``mixgemm.checkpoint.load_model`` builds it from AWQ / GPTQ / compressed-tensors expert tensors.
"""

from .custom_op import fused_moe_op
from .experts import ExpertWeights, prepack_experts
from .functional import fused_moe
from .grouped import grouped_gemm
from .layer import QuantMoE
from .reference import reference_fused_moe
from .routing import Routing, route
from .topk_router import TopKRouter, softmax_topk

__all__ = ["ExpertWeights", "QuantMoE", "Routing", "TopKRouter", "fused_moe", "fused_moe_op", "grouped_gemm",
           "prepack_experts", "reference_fused_moe", "route", "softmax_topk"]
