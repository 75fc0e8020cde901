"""The matrix exponential: scaling and squaring of a Taylor polynomial, in float64.

Each matrix of a batch is scaled by its own power of two, so its squarings are its own too: the
loop runs for the largest count and leaves a matrix alone once it has had its share.
"""

from __future__ import annotations

import math
import onnx_ir as ir
from onnxscript import opset18 as op

from torch_onnx_fx.translate.op_context import OpContext
from torch_onnx_fx.ops.linalg import _matrix as mx
from torch_onnx_fx.registry import register, wants_context

__all__ = [
    "aten_linalg_matrix_exp",
]


# exp(X) = sum X^k / k! to this order, for ||X||_1 <= 1 after scaling: the remainder is below 1e-17.
_TAYLOR_ORDER = 18
# Squarings are capped: beyond 2^60 times a norm of 1 every entry overflows anyway.
_MAX_SQUARINGS = 60


@register("aten::linalg_matrix_exp", supports=mx.real_inputs)
@wants_context
def aten_linalg_matrix_exp(self: ir.Value, *, ctx: OpContext) -> ir.Value:
    """linalg_matrix_exp(Tensor self) -> Tensor"""
    a = mx.double(self)
    n = mx.size(a, -1)
    eye = mx.eye(n, n)
    norm = mx.reduce("ReduceMax", mx.reduce("ReduceSum", op.Abs(a), -2, keepdims=True), -1, keepdims=True)
    # Scaling and squaring: exp(A) = exp(A / 2^s)^(2^s) with ||A / 2^s||_1 <= 1.
    halvings = op.Ceil(op.Div(op.Log(norm), math.log(2.0)))
    halvings = op.Where(op.IsNaN(halvings), 0.0, op.Clip(halvings, op.CastLike(0.0, a), op.CastLike(float(_MAX_SQUARINGS), a)))
    x = op.Div(a, op.Pow(op.CastLike(2.0, a), halvings))
    power = eye
    for k in range(_TAYLOR_ORDER, 0, -1):
        power = op.Add(eye, op.Div(op.MatMul(x, power), float(k)))
    halvings = op.Cast(halvings, to=mx.INT64)
    flat = mx.shaped(op.Reshape(halvings, [-1]), [None])
    squarings = op.Cast(mx.reduce("ReduceMax", op.Cast(flat, to=mx.DOUBLE)), to=mx.INT64)

    def square(i: ir.Value, y: ir.Value) -> list[ir.Value]:
        return [op.Where(op.Less(i, halvings), op.MatMul(y, y), y)]

    (result,) = mx.loop(ctx, squarings, [mx.shaped(op.Expand(power, op.Shape(a)), mx.dims(a))], square)
    return mx.like(result, self)
