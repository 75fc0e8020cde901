"""Logarithms and exponentials of sums, and remainders, computed where they cannot overflow or cancel.

torchlib spells these out as their textbook formulas: ``logaddexp(a, b) = log(exp(a) + exp(b))``
is ``inf`` as soon as ``exp(a)`` overflows (a = 89 in float32, 12 in float16) where the result is
``a`` plus a small term; ``log_sigmoid(x) = log(sigmoid(x))`` is ``-inf`` below x = -104 where the
result is ``x``, and a multilabel soft-margin loss of such logits ``nan``; ``log1p(x) = log(1 + x)``
and ``expm1(x) = exp(x) - 1`` lose every digit of a small ``x`` that ``1 + x`` rounds away
(log1p(1e-8) gave 0 in float32). ATen computes each the stable way, and so do these:

* ``log1p`` and ``expm1`` with Kahan's correction: ``u = 1 + x`` rounds, but
  ``log(u) * x / (u - 1)`` divides that rounding back out (and ``(u - 1) * x / log(u)`` for
  ``u = exp(x)``), to a few units in the last place;
* ``logaddexp(a, b) = max + log1p(exp(-|a - b|))`` (base 2 alike), ``a`` where both are the
  same infinity;
* ``log_sigmoid(x) = min(x, 0) - log1p(exp(-|x|))``;
* vector norms of the values divided by their largest magnitude, scaled back after;
* ``logcumsumexp`` as a prefix scan of that logaddexp;
* ``remainder(a, b)`` of floats as ATen's: the exact ``fmod`` moved to ``b``'s sign, where
  ``a - floor(a / b) * b`` is 0 once ``a / b`` has more digits than the dtype keeps.

Found by the differential fuzzer's large-offset variant (tools/sweeps/differential.py); torch.onnx
computes the same textbook formulas.
"""

from __future__ import annotations

import math
from typing import Any, Callable
import onnx_ir as ir
import torch
from onnxscript import opset18 as op

from torch_onnx_fx.dtypes import onnx_dtype
from torch_onnx_fx.ops._tensors import constant
from torch_onnx_fx.registry import floating_input, floating_result, register, wants_context
from torch_onnx_fx.translate.op_context import OpContext

__all__ = ["aten_log1p", "aten_expm1", "aten_logaddexp", "aten_logaddexp2", "aten_log_sigmoid", "aten_remainder", "aten_linalg_vector_norm", "aten_logcumsumexp"]


def _as_result(x: ir.Value, ctx: OpContext) -> ir.Value:
    """Integer inputs of a float-valued function compute in the result's dtype, as ATen's do."""
    target = onnx_dtype(ctx.result.dtype)
    return x if x.dtype == target else op.Cast(x, to=target)


_HALF = (ir.DataType.FLOAT16, ir.DataType.BFLOAT16)


def _in_float32(compute: Callable[..., ir.Value], *xs: ir.Value) -> ir.Value:
    """float16/bfloat16 computed in float32 and rounded once, as ATen's CPU kernels do (and
    as ONNX Runtime has few half kernels of these ops)."""
    half = xs[0].dtype
    if half not in _HALF:
        return compute(*xs)
    return op.Cast(compute(*(op.Cast(x, to=ir.DataType.FLOAT) for x in xs)), to=half)


# Below this magnitude 1 + x and exp(x) are near 1 and the Kahan corrections are needed; above it
# the plain forms lose nothing (and the corrections would divide by logarithms of denormals).
_SMALL = 0.5


def log1p(x: ir.Value) -> ir.Value:
    """log(1 + x) to a few units in the last place, also where ``1 + x`` rounds to 1."""
    one, zero = constant(1.0, x), constant(0.0, x)
    u = op.Add(one, x)
    d = op.Sub(u, one)
    rounded_away = op.Equal(d, zero)
    corrected = op.Where(rounded_away, x, op.Div(op.Mul(op.Log(u), x), op.Where(rounded_away, one, d)))
    return op.Where(op.Less(op.Abs(x), constant(_SMALL, x)), corrected, op.Log(u))


def expm1(x: ir.Value) -> ir.Value:
    """exp(x) - 1 to a few units in the last place, also for small ``x``."""
    one = constant(1.0, x)
    u = op.Exp(x)
    d = op.Sub(u, one)
    rounded_away = op.Equal(u, one)
    corrected = op.Where(rounded_away, x, op.Div(op.Mul(d, x), op.Where(rounded_away, one, op.Log(u))))
    return op.Where(op.Less(op.Abs(x), constant(_SMALL, x)), corrected, d)


@register("aten::log1p", supports=floating_result)
@wants_context
def aten_log1p(self: ir.Value, *, ctx: OpContext) -> ir.Value:
    """log1p(Tensor self) -> Tensor"""
    return _in_float32(log1p, _as_result(self, ctx))


@register("aten::expm1", supports=floating_result)
@wants_context
def aten_expm1(self: ir.Value, *, ctx: OpContext) -> ir.Value:
    """expm1(Tensor self) -> Tensor"""
    return _in_float32(expm1, _as_result(self, ctx))


def _log_add(a: ir.Value, b: ir.Value, base_two: bool) -> ir.Value:
    larger = op.Max(a, b)
    gap = op.Neg(op.Abs(op.Sub(a, b)))
    if base_two:
        tail = op.Div(log1p(op.Pow(constant(2.0, a), gap)), constant(math.log(2.0), a))
    else:
        tail = log1p(op.Exp(gap))
    # a - b is nan for equal infinities (and for a nan, which the sum then carries on).
    same_infinity = op.And(op.IsInf(a), op.Equal(a, b))
    return op.Where(same_infinity, a, op.Add(larger, tail))


@register("aten::logaddexp", supports=floating_result)
@wants_context
def aten_logaddexp(self: ir.Value, other: ir.Value, *, ctx: OpContext) -> ir.Value:
    """logaddexp(Tensor self, Tensor other) -> Tensor"""
    return _in_float32(lambda a, b: _log_add(a, b, base_two=False), _as_result(self, ctx), _as_result(other, ctx))


@register("aten::logaddexp2", supports=floating_result)
@wants_context
def aten_logaddexp2(self: ir.Value, other: ir.Value, *, ctx: OpContext) -> ir.Value:
    """logaddexp2(Tensor self, Tensor other) -> Tensor"""
    return _in_float32(lambda a, b: _log_add(a, b, base_two=True), _as_result(self, ctx), _as_result(other, ctx))


def _log_sigmoid(x: ir.Value) -> ir.Value:
    zero = constant(0.0, x)
    return op.Sub(op.Min(x, zero), log1p(op.Exp(op.Neg(op.Abs(x)))))


@register("aten::log_sigmoid", supports=floating_result)
def aten_log_sigmoid(self: ir.Value) -> ir.Value:
    """log_sigmoid(Tensor self) -> Tensor"""
    return _in_float32(_log_sigmoid, self)


def _remainder(a: ir.Value, b: ir.Value) -> ir.Value:
    zero = constant(0.0, a)
    # fmod is exact (ONNX Runtime's Mod with fmod=1 is C's fmod); a - floor(a / b) * b is not once
    # a / b has more digits than the dtype keeps (remainder(1e28, 3.7) gave 0).
    mod = op.Mod(a, b, fmod=1)
    wrong_sign = op.And(op.Not(op.Equal(mod, zero)), op.Xor(op.Less(b, zero), op.Less(mod, zero)))
    return op.Where(wrong_sign, op.Add(mod, b), mod)


@register("aten::remainder.Tensor", "aten::remainder.Scalar", "aten::remainder.Scalar_Tensor", supports=floating_result)
@wants_context
def aten_remainder(self: Any, other: Any, *, ctx: OpContext) -> ir.Value:
    """remainder.Tensor(Tensor self, Tensor other) -> Tensor (and the Scalar forms) of floats:
    ATen's, an exact fmod moved to the divisor's sign."""
    target = onnx_dtype(ctx.result.dtype)
    a, b = (
        _as_result(x, ctx) if isinstance(x, ir.Value) else op.Constant(value=ir.tensor(float(x), dtype=target))
        for x in (self, other)
    )
    return _in_float32(_remainder, a, b)


@register("aten::linalg_vector_norm", supports=floating_input)
def aten_linalg_vector_norm(
    self: ir.Value, ord: float = 2.0, dim: Any = None, keepdim: bool = False, *, dtype: Any = None,
) -> ir.Value:
    """linalg_vector_norm(Tensor self, Scalar ord=2, int[1]? dim=None, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor

    ReduceL2 of float32 squared values past 1.8e19 into infinity and squares below 1e-19 into 0
    (ONNX Runtime flushes denormals), where eager's norm is finite for denormal squares and for a
    single element. Eager overflows for two or more float32 elements past 1.8e19: here the finite
    norm is returned, which float64 says is right."""
    if dtype is not None and dtype != -1:
        # The walk hands ScalarType arguments over as ONNX type numbers, as torchlib expects them.
        self = op.Cast(self, to=onnx_dtype(dtype) if isinstance(dtype, torch.dtype) else int(dtype))
    rank = self.shape.rank() if self.shape is not None else None
    if dim is None or (isinstance(dim, (list, tuple)) and not dim):
        if keepdim:
            if rank is None:
                raise ValueError("linalg_vector_norm over all dims with keepdim needs an input of known rank")
            # Every dim kept as 1: the norm of the flattened input, shaped back.
            norm = aten_linalg_vector_norm(self, ord, None, False)
            return op.Reshape(norm, op.Constant(value_ints=[1] * rank))
        self, axes, keepdim = op.Reshape(self, op.Constant(value_ints=[-1])), [0], False
    else:
        axes = [dim] if isinstance(dim, int) else list(dim)
        axes = [a % rank for a in axes] if rank else axes
    axes_value = op.Constant(value_ints=axes)
    keep = int(keepdim)
    magnitude = op.Abs(self)
    if math.isinf(ord):
        return (op.ReduceMax if ord > 0 else op.ReduceMin)(magnitude, axes_value, keepdims=keep)
    if ord == 0:
        return op.ReduceSum(op.CastLike(op.Not(op.Equal(self, constant(0.0, self))), self), axes_value, keepdims=keep)
    if ord == 1:
        return op.ReduceSum(magnitude, axes_value, keepdims=keep)
    # float32 squares summed in float64: none overflows or becomes a denormal (which ONNX
    # Runtime flushes to 0 in float32); half precision in float32, as ATen accumulates it.
    # float64 as eager computes it, overflow included.
    shape = self.shape
    if shape is not None and all(isinstance(shape[a], int) and shape[a] == 1 for a in axes):
        # One element: its magnitude, as eager's shortcut returns it (no square to overflow).
        return magnitude if keepdim else op.Squeeze(magnitude, axes_value)
    wider = {ir.DataType.FLOAT: ir.DataType.DOUBLE, ir.DataType.FLOAT16: ir.DataType.FLOAT, ir.DataType.BFLOAT16: ir.DataType.FLOAT}.get(self.dtype)
    # ReduceL2 squares its input, so the 2-norm needs no magnitudes (one Abs fewer per norm).
    squared_anyway = self if ord == 2 else magnitude
    wide = op.Cast(squared_anyway, to=wider) if wider is not None else squared_anyway
    if ord == 2:
        norm = op.ReduceL2(wide, axes_value, keepdims=keep)
    else:
        power = constant(float(ord), wide)
        norm = op.Pow(op.ReduceSum(op.Pow(wide, power), axes_value, keepdims=keep), op.Div(op.CastLike(1.0, power), power))
    return op.Cast(norm, to=self.dtype) if wider is not None else norm


@register("aten::logcumsumexp", supports=floating_input)
@wants_context
def aten_logcumsumexp(self: ir.Value, dim: int, *, ctx: OpContext) -> ir.Value:
    """logcumsumexp(Tensor self, int dim) -> Tensor

    A prefix scan of the stable logaddexp (Hillis and Steele: step k combines each element with
    the one 2**k before it, ceil(log2 n) steps in a Loop), as ATen accumulates it element by
    element. torchlib subtracts the slice's overall maximum before a CumSum of exponentials:
    prefixes far below that maximum underflowed to -inf (and the maximum itself overflowed
    float32 sums), where eager has their finite values."""
    rank = self.shape.rank() if self.shape is not None else None
    if rank == 0:
        return op.Identity(self)
    return _in_float32(lambda x: _log_prefix_scan(x, dim % rank, rank, ctx), self)


def _log_prefix_scan(x: ir.Value, axis: int, rank: int, ctx: OpContext) -> ir.Value:
    zero = op.Constant(value_ints=[0])
    length = op.Shape(x, start=axis, end=axis + 1)
    # ceil(log2(n)) steps; a step whose offset reaches past the end changes nothing, so a count
    # one too high (log rounding) is harmless.
    as_double = op.Cast(op.Max(length, op.Constant(value_ints=[1])), to=ir.DataType.DOUBLE)
    steps = op.Cast(op.Ceil(op.Div(op.Log(as_double), op.Constant(value=ir.tensor(math.log(2.0), dtype=ir.DataType.DOUBLE)))), to=ir.DataType.INT64)
    steps = op.Squeeze(op.Max(steps, zero), [0])
    axes = op.Constant(value_ints=[axis])
    empty = constant(-math.inf, x)

    def step(_: ir.Value, y: ir.Value, offset: ir.Value) -> list[ir.Value]:
        kept = op.Max(op.Sub(length, offset), zero)
        earlier = op.Slice(y, zero, kept, axes)
        before = op.Concat(*([zero] * axis), op.Min(offset, length), *([zero] * (rank - axis - 1)), *([zero] * rank), axis=0)
        shifted = op.Pad(earlier, before, empty)
        return [_log_add(y, shifted, base_two=False), op.Mul(offset, op.Constant(value_ints=[2]))]

    result, _ = ctx.loop(steps, [x, op.Constant(value_ints=[1])], step)
    return result
