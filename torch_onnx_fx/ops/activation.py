"""Activations that newer opsets express as a single operator.

Registered with ``min_opset``: below it, dispatch falls through to torchlib's translation, which
spells the same function out of elementary ops.
"""

from __future__ import annotations

import onnx_ir as ir
from onnxscript import opset20

from torch_onnx_fx.registry import register

__all__ = ["aten_gelu_opset20"]


@register("aten::gelu", min_opset=20)
def aten_gelu_opset20(self: ir.Value, approximate: str = "none") -> ir.Value:
    """gelu(Tensor self, *, str approximate="none") -> Tensor"""
    return opset20.Gelu(self, approximate=approximate)
