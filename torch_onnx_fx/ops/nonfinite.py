"""Elementwise operators at NaN, infinities and signed zeros, as ATen computes them.

ONNX's ``Sign`` of NaN is NaN; ATen's CPU kernel computes ``(0 < x) - (x < 0)``, so 0. torchlib's ``atan2`` maps every NaN to 0 (it means to fix 0/0, which is atan2(0, 0) = 0) and
returns 0 for two infinities (atan2(inf, inf) is pi/4); its ``heaviside`` gives 1 for a NaN input
(ATen's rule is ``x == 0 ? values : x > 0``, so 0). Found by the differential fuzzer's nonfinite
variant; torch.onnx computes both the same way.
"""

from __future__ import annotations

import math

import onnx_ir as ir
from onnxscript import opset18 as op

from torch_onnx_fx.ops._tensors import constant
from torch_onnx_fx.ops.prims import prims_signbit
from torch_onnx_fx.registry import floating_result, register

__all__ = ["aten_atan2", "aten_heaviside", "atan2"]


def _copysign(magnitude: ir.Value, sign_of: ir.Value) -> ir.Value:
    return op.Where(prims_signbit(sign_of), op.Neg(magnitude), magnitude)


@register("aten::atan2", supports=floating_result)
def aten_atan2(self: ir.Value, other: ir.Value) -> ir.Value:
    """atan2(Tensor self, Tensor other) -> Tensor"""
    return atan2(self, other)


def atan2(y: ir.Value, x: ir.Value) -> ir.Value:
    """C's atan2 (ONNX has none; the complex translations' angle uses it too).

    atan(y / x) moved by pi toward y's sign when x is negative (or -0); then the cases y / x
    cannot express: both zero (±0 or ±pi by the signs), both infinite (±pi/4 or ±3pi/4). A NaN
    in either stays NaN."""
    zero, one = constant(0.0, y), constant(1.0, y)
    negative_x = prims_signbit(x)
    # Both zero: y / 1 instead of 0 / 0, so atan gives y's signed zero, moved to ±pi below when x
    # is -0. A -0 result is kept in Where's second branch throughout: ONNX Runtime's Where turns
    # a -0 picked from its first branch into +0 (and its optimizer swaps the branches of a
    # Where(Not(c), ...)), so no Where here chooses a zero from the first.
    both_zero = op.And(op.Equal(x, zero), op.Equal(y, zero))
    angle = op.Atan(op.Div(y, op.Where(both_zero, one, x)))
    turned = op.Where(negative_x, op.Add(angle, _copysign(constant(math.pi, y), y)), angle)
    both_infinite = op.And(op.IsInf(x), op.IsInf(y))
    at_infinity = _copysign(op.Where(negative_x, constant(3 * math.pi / 4, y), constant(math.pi / 4, y)), y)
    return op.Where(both_infinite, at_infinity, turned)


@register("aten::heaviside", supports=floating_result)
def aten_heaviside(self: ir.Value, values: ir.Value) -> ir.Value:
    """heaviside(Tensor self, Tensor values) -> Tensor: ``values`` at 0, else whether self > 0
    (so 0 for NaN)."""
    zero = op.CastLike(0, self)
    step = op.CastLike(op.Greater(self, zero), self)
    return op.Where(op.Equal(self, zero), op.CastLike(values, self), step)


@register("aten::sign", "aten::sgn", supports=floating_result)
def aten_sign(self: ir.Value) -> ir.Value:
    """sign(Tensor self) -> Tensor, and sgn of real tensors: 0 for NaN, as ATen's CPU kernel."""
    return op.Where(op.IsNaN(self), op.CastLike(0, self), op.Sign(self))


@register("aten::angle", supports=floating_result)
def aten_angle(self: ir.Value) -> ir.Value:
    """angle(Tensor self) -> Tensor of real floats: pi for negative values, 0 for the others
    (-0 included), NaN for NaN (torchlib's gave 0 for NaN)."""
    negative = constant(math.pi, self)
    return op.Where(op.IsNaN(self), self, op.Where(op.Less(self, constant(0.0, self)), negative, constant(0.0, self)))
