"""``prims`` operators that PyTorch's decompositions produce and torchlib lacks.

When an ATen operator is decomposed (it had no translation), its ``torch._refs`` implementation
often bottoms out in primitives; translating these keeps such decompositions exportable.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import onnx_ir as ir
from onnxscript import opset18 as op

from torch_onnx_fx.dtypes import onnx_dtype
from torch_onnx_fx.ops import _tensors as tx
from torch_onnx_fx.registry import floating_result, register, wants_context
from torch_onnx_fx.translate.op_context import OpContext

__all__ = ["prims_signbit", "prims_fmax", "prims_fmin", "prims_prod", "prims_frexp", "prims_scalar_tensor", "aten_copysign"]


@register("prims::signbit", "aten::signbit")
def prims_signbit(self: ir.Value) -> ir.Value:
    """signbit(Tensor self) -> Tensor

    Also replaces torchlib's aten::signbit, which is ``x < 0`` and misses -0.0.
    """
    if self.dtype is not None and not self.dtype.is_floating_point():
        return op.Less(self, op.CastLike(0, self))
    zero = op.CastLike(0.0, self)
    # -0.0 has its sign bit set although it equals 0: 1 / -0.0 is -inf.
    negative_zero = op.And(op.Equal(self, zero), op.Less(op.Div(op.CastLike(1.0, self), self), zero))
    return op.Or(op.Less(self, zero), negative_zero)


def _nan_ignoring(pick: object) -> object:
    def translation(self: ir.Value, other: ir.Value) -> ir.Value:
        if self.dtype is not None and not self.dtype.is_floating_point():
            return pick(self, other)  # type: ignore[operator]
        return op.Where(op.IsNaN(self), other, op.Where(op.IsNaN(other), self, pick(self, other)))  # type: ignore[operator]

    return translation


prims_fmax = register("prims::fmax")(_nan_ignoring(op.Max))
prims_fmin = register("prims::fmin")(_nan_ignoring(op.Min))


@register("prims::prod")
def prims_prod(inp: ir.Value, dims: Sequence[int] | None, *, output_dtype: int | None = None) -> ir.Value:
    """prod(Tensor inp, int[]? dims, *, ScalarType? output_dtype=None) -> Tensor"""
    if dims is None or not len(dims):
        result = op.ReduceProd(inp, keepdims=0)
    else:
        result = op.ReduceProd(inp, op.Constant(value_ints=list(dims)), keepdims=0)
    return op.Cast(result, to=output_dtype) if output_dtype is not None else result


@register("prims::frexp")
def prims_frexp(self: ir.Value) -> tuple[ir.Value, ir.Value]:
    """frexp(Tensor self) -> (Tensor mantissa, Tensor exponent): self = mantissa * 2**exponent, 0.5 <= |mantissa| < 1"""
    magnitude = op.Abs(self)
    is_zero = op.Equal(magnitude, op.CastLike(0.0, self))
    safe = op.Where(is_zero, op.CastLike(1.0, self), magnitude)
    exponent = op.Add(op.Floor(op.Div(op.Log(safe), op.CastLike(0.6931471805599453, self))), op.CastLike(1.0, self))
    # Two halves of the power: 2**exponent itself overflows at the top binade (2**128 in float32,
    # 2**16 in float16), which made the mantissa 0 there.
    two = op.CastLike(2.0, self)
    first = op.Floor(op.Mul(exponent, op.CastLike(0.5, self)))
    mantissa = op.Div(op.Div(self, op.Pow(two, first)), op.Pow(two, op.Sub(exponent, first)))
    # log2 can round across a power of two; one correction step in each direction fixes it.
    too_big = op.GreaterOrEqual(op.Abs(mantissa), op.CastLike(1.0, self))
    exponent = op.Where(too_big, op.Add(exponent, op.CastLike(1.0, self)), exponent)
    mantissa = op.Where(too_big, op.Div(mantissa, op.CastLike(2.0, self)), mantissa)
    too_small = op.And(op.Less(op.Abs(mantissa), op.CastLike(0.5, self)), op.Not(is_zero))
    exponent = op.Where(too_small, op.Sub(exponent, op.CastLike(1.0, self)), exponent)
    mantissa = op.Where(too_small, op.Mul(mantissa, op.CastLike(2.0, self)), mantissa)
    # Zero, infinities and NaN: the value itself with exponent 0, as in C's frexp.
    special = op.Or(is_zero, op.Or(op.IsNaN(self), op.IsInf(self)))
    exponent = op.Where(special, op.CastLike(0.0, self), exponent)
    mantissa = op.Where(special, self, mantissa)
    return mantissa, op.Cast(exponent, to=ir.DataType.INT32)


# aten::scalar_tensor too: torchlib's casts a float32 constant, so the float64 scalars torch's
# decompositions make with it (index_fill's value) were float32 numbers (1.5e-9 off for 0.1).
@register("prims::scalar_tensor", "aten::scalar_tensor")
@wants_context
def prims_scalar_tensor(s: Any, *args: Any, ctx: OpContext, **kwargs: Any) -> ir.Value:
    """scalar_tensor(Scalar s, *, ScalarType? dtype=None, Device? device=None) -> Tensor

    A 0-d constant of the result's dtype, converted by torch as ATen converts it (``copysign(x,
    -3.14)`` decomposes into one). A symbolic size is cast to it."""
    if isinstance(s, ir.Value):
        return ctx.cast(s, onnx_dtype(ctx.result.dtype))
    return tx.scalar_of(s, ctx.result.dtype)


@register("aten::copysign.Tensor", "aten::copysign.Scalar", supports=floating_result)
@wants_context
def aten_copysign(self: ir.Value, other: Any, *, ctx: OpContext) -> ir.Value:
    """copysign.Tensor(Tensor self, Tensor other) -> Tensor (and .Scalar)

    |self| with the sign bit of ``other``, -0.0's included (torchlib's ``other < 0`` misses it
    and gave 0.0 where ATen gives -0.0). A Python number's sign is read at export, a NaN's too;
    a NaN tensor element's sign bit the graph cannot read (ONNX has no bit cast before opset
    26): it counts as positive, where ATen's is that NaN's sign (x86's 0/0 is -nan)."""
    magnitude = op.Abs(ctx.cast(self, onnx_dtype(ctx.result.dtype)))
    if not isinstance(other, ir.Value):
        return op.Neg(magnitude) if math.copysign(1.0, float(other)) < 0 else magnitude
    # ±1 times the magnitude: ONNX Runtime's Where returns +0.0 for a chosen -0.0
    # (microsoft/onnxruntime#32191, open).
    sign = op.Sub(op.CastLike(1.0, magnitude), op.Mul(op.CastLike(2.0, magnitude), op.CastLike(prims_signbit(other), magnitude)))
    return op.Mul(magnitude, sign)
