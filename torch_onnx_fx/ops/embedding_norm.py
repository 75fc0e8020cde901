"""``nn.Embedding(max_norm=...)``: the looked-up rows renormalized as ATen's ``embedding_renorm_``.

ATen takes each distinct looked-up row's norm in the weight's dtype, reads it as a double, and
scales a row whose norm exceeds ``max_norm`` by ``max_norm / (norm + 1e-7)`` computed in double.
torchlib's translation compares and divides with float32 constants: a float64 embedding was
8.5e-9 relatively off (torch.onnx the same).
"""

from __future__ import annotations

import math

import onnx_ir as ir
import torch
from onnxscript import opset18 as op

from torch_onnx_fx.ops import _tensors as tx
from torch_onnx_fx.registry import arg_example, arg_value, register

__all__ = ["aten_embedding_renorm"]

_HALF = (ir.DataType.FLOAT16, ir.DataType.BFLOAT16)


def _renormable(node: torch.fx.Node) -> bool:
    """A float weight, a norm type ATen's row norm computes as a power sum (p > 0) or a maximum."""
    weight, norm_type = arg_example(node), arg_value(node, 3, "norm_type", 2.0)
    return (
        isinstance(weight, torch.Tensor) and weight.dtype.is_floating_point and weight.dim() == 2
        and isinstance(norm_type, (int, float)) and not isinstance(norm_type, bool) and norm_type > 0
    )


def _row_norms(rows: ir.Value, norm_type: float) -> ir.Value:
    axis = tx.ints(1)
    if norm_type == math.inf:
        return op.ReduceMax(op.Abs(rows), axis, keepdims=1)
    if norm_type == 1:
        return op.ReduceL1(rows, axis, keepdims=1)
    if norm_type == 2:
        return op.ReduceL2(rows, axis, keepdims=1)
    powered = op.ReduceSum(op.Pow(op.Abs(rows), op.CastLike(norm_type, rows)), axis, keepdims=1)
    return op.Pow(powered, op.CastLike(1.0 / norm_type, rows))


@register("aten::embedding_renorm", supports=_renormable)
def aten_embedding_renorm(self: ir.Value, indices: ir.Value, max_norm: float, norm_type: float) -> ir.Value:
    """embedding_renorm(Tensor self, Tensor indices, float max_norm, float norm_type) -> Tensor"""
    # int64 for ScatterND, which takes no int32 indices (an int32 lookup did not load).
    unique = op.Unique(op.Cast(op.Reshape(indices, tx.ints(-1)), to=ir.DataType.INT64), sorted=1)[0]
    rows = op.Gather(self, unique, axis=0)
    # Half rows: ATen's norm computes in float32 and rounds to the half type; its scale is
    # rounded to the half type too, and the product computed in float32 and rounded once (a
    # half Mul, or float32 with its Cast where ONNX Runtime has no half kernel).
    wide = op.Cast(rows, to=ir.DataType.FLOAT) if self.dtype in _HALF else rows
    norms = _row_norms(wide, float(norm_type))
    norms = op.Cast(op.CastLike(norms, rows), to=ir.DataType.DOUBLE)
    limit = tx.double(float(max_norm))
    scale = op.CastLike(op.Div(limit, op.Add(norms, tx.double(1e-7))), rows)
    chosen = op.Where(op.Greater(norms, limit), op.Mul(rows, scale), rows)
    return op.ScatterND(self, op.Unsqueeze(unique, tx.ints(1)), chosen)
