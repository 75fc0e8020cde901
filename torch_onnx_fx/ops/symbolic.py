"""Symbolic shape arithmetic: SymInt/SymFloat/SymBool operations become ONNX ops.

torch.export leaves size computations on dynamic dims in the graph as ``aten.sym_size.int`` plus
Python ``operator.*``/``torch.sym_*`` calls. A symbolic value is a 0-d tensor here (INT64 for
SymInt, DOUBLE for SymFloat, BOOL for SymBool): a SymFloat is a Python float, a double, and
computing it in float32 rounded ``n ** 0.5`` for a float64 model and ``n / 2`` past 2^24. When
every operand is a Python number the result is computed in Python, so static arithmetic never
reaches the graph.
"""

from __future__ import annotations

import math
import operator
from typing import Any

import onnx_ir as ir
import torch
from onnxscript import opset18 as op

from torch_onnx_fx.ops import _tensors as tx
from torch_onnx_fx.ops.stable import _remainder
from torch_onnx_fx.translate.op_context import OpContext
from torch_onnx_fx.registry import register, wants_context

__all__ = ["aten_sym_size_int", "aten_sym_numel", "aten_local_scalar_dense"]


def _is_static(*values: Any) -> bool:
    return all(not isinstance(v, ir.Value) for v in values)


def _float(value: Any) -> Any:
    if isinstance(value, ir.Value):
        return value if value.dtype == ir.DataType.DOUBLE else op.Cast(value, to=ir.DataType.DOUBLE)
    return float(value)


def _common(a: Any, b: Any) -> tuple[Any, Any]:
    """Bring two operands to one dtype: float wins over int, int over bool. Floats are DOUBLE
    values, numbers included: Pow's exponent and Where's branches take no type from a neighbour,
    and a float32 constant there made a float32 result where the graph declares a double."""
    da = a.dtype if isinstance(a, ir.Value) else None
    db = b.dtype if isinstance(b, ir.Value) else None
    floats = {ir.DataType.FLOAT, ir.DataType.DOUBLE}
    if da in floats or db in floats or isinstance(a, float) or isinstance(b, float):
        return tx.double(a), tx.double(b)
    if da == ir.DataType.BOOL and isinstance(a, ir.Value):
        a = op.Cast(a, to=ir.DataType.INT64)
    if db == ir.DataType.BOOL and isinstance(b, ir.Value):
        b = op.Cast(b, to=ir.DataType.INT64)
    return a, b


@register("aten::_local_scalar_dense")
def aten_local_scalar_dense(self: ir.Value) -> ir.Value:
    """_local_scalar_dense(Tensor self) -> Scalar

    ``tensor.item()``: the Python number, so a floating element widens to double, exactly
    (torchlib's float32 turned a float64 1e300 into inf and rounded every other)."""
    first = op.Gather(op.Reshape(self, op.Constant(value_ints=[-1])), op.Constant(value_int=0))
    if self.dtype == ir.DataType.BOOL:
        return first
    return op.Cast(first, to=ir.DataType.DOUBLE if self.dtype.is_floating_point() else ir.DataType.INT64)


@register("aten::sym_size.int")
def aten_sym_size_int(self: ir.Value, dim: int) -> ir.Value:
    """sym_size.int(Tensor self, int dim) -> SymInt"""
    rank = self.shape.rank() if self.shape is not None else None
    if dim < 0:
        if rank is None:
            raise ValueError("sym_size with a negative dim needs a tensor of known rank")
        dim += rank
    # Squeeze without axes (the [1] vector becomes a scalar): the form onnxscript's
    # SqueezeReshape1d rule recognises when the size is turned back into a vector.
    return op.Squeeze(op.Shape(self, start=dim, end=dim + 1))


@register("aten::sym_numel")
def aten_sym_numel(self: ir.Value) -> ir.Value:
    """sym_numel(Tensor self) -> SymInt"""
    return op.ReduceProd(op.Shape(self), keepdims=0)


def _binary(python_op: Any, onnx_op: Any) -> Any:
    def translation(a: Any, b: Any) -> Any:
        if _is_static(a, b):
            return python_op(a, b)
        a, b = _common(a, b)
        return onnx_op(a, b)

    translation.__name__ = f"sym_{python_op.__name__}"
    return translation


for _py, _onnx in [
    (operator.add, op.Add),
    (operator.sub, op.Sub),
    (operator.mul, op.Mul),
    (operator.pow, op.Pow),
    (operator.eq, op.Equal),
    (operator.lt, op.Less),
    (operator.le, op.LessOrEqual),
    (operator.gt, op.Greater),
    (operator.ge, op.GreaterOrEqual),
    (torch.sym_max, op.Max),
    (torch.sym_min, op.Min),
]:
    register(_py)(_binary(_py, _onnx))


@register(operator.ne)
def sym_ne(a: Any, b: Any) -> Any:
    if _is_static(a, b):
        return a != b
    a, b = _common(a, b)
    return op.Not(op.Equal(a, b))


def _logical(python_op: Any, logical: Any, bitwise: Any) -> Any:
    """``&``/``|`` on SymBools are logical, on SymInts bitwise."""

    def translation(a: Any, b: Any) -> Any:
        if _is_static(a, b):
            return python_op(a, b)
        if any(isinstance(v, ir.Value) and v.dtype == ir.DataType.BOOL for v in (a, b)):
            return logical(a, b)
        return bitwise(*_common(a, b))

    translation.__name__ = f"sym_{python_op.__name__}"
    return translation


register(operator.and_)(_logical(operator.and_, op.And, op.BitwiseAnd))
register(operator.or_)(_logical(operator.or_, op.Or, op.BitwiseOr))


@register(operator.truediv)
def sym_truediv(a: Any, b: Any) -> Any:
    if _is_static(a, b):
        return a / b
    return op.Div(_float(a), _float(b))


def _lower_bound(arg: Any) -> Any:
    """The smallest value the shape environment allows for an argument's example (None if unknown)."""
    example = arg.meta.get("val") if isinstance(arg, torch.fx.Node) else arg
    if isinstance(example, int):
        return example
    if not isinstance(example, torch.SymInt):
        return None
    try:
        node = example.node
        return node.shape_env.bound_sympy(node.expr).lower
    except Exception:  # noqa: BLE001 - no bound is a valid answer
        return None


def _non_negative(arg: Any) -> bool:
    lower = _lower_bound(arg)
    try:
        return lower is not None and bool(lower >= 0)
    except TypeError:
        return False


@register(operator.floordiv)
@wants_context
def sym_floordiv(a: Any, b: Any, *, ctx: OpContext) -> Any:
    """Python floors; ONNX integer Div truncates. ``(a - a mod b) / b`` is exact for both signs;
    for sizes (a >= 0, b > 0 by the shape environment's ranges) truncation is flooring already."""
    if _is_static(a, b):
        return a // b
    a, b = _common(a, b)
    if isinstance(a, ir.Value) and a.dtype == ir.DataType.DOUBLE or isinstance(b, ir.Value) and b.dtype == ir.DataType.DOUBLE:
        return op.Floor(op.Div(a, b))
    dividend, divisor = ctx.inputs
    lower = _lower_bound(divisor)
    if _non_negative(dividend) and lower is not None and bool(lower > 0):
        return op.Div(a, b)
    return op.Div(op.Sub(a, op.Mod(a, b, fmod=0)), b)


@register(operator.mod)
def sym_mod(a: Any, b: Any) -> Any:
    if _is_static(a, b):
        return a % b
    a, b = _common(a, b)
    if isinstance(a, ir.Value) and a.dtype == ir.DataType.DOUBLE:
        # Python's float % takes the divisor's sign (C's fmod, ONNX's fmod=1, the dividend's).
        return _remainder(a, b)
    return op.Mod(a, b, fmod=0)


@register(operator.neg)
def sym_neg(a: Any) -> Any:
    return -a if _is_static(a) else op.Neg(a)


@register(operator.not_, torch.sym_not)
def sym_not(a: Any) -> Any:
    return (not a) if _is_static(a) else op.Not(a)


@register(torch.sym_float)
def sym_float(a: Any) -> Any:
    return _float(a)


@register(torch.sym_int, math.trunc)
def sym_int(a: Any) -> Any:
    if _is_static(a):
        return int(a)
    return a if a.dtype == ir.DataType.INT64 else op.Cast(a, to=ir.DataType.INT64)


@register(torch._sym_sqrt)
def sym_sqrt(a: Any) -> Any:
    """A size's square root (NumPy's ``np.sqrt`` of a SymFloat, capture.symbolic_math): double,
    correctly rounded in ONNX Runtime as in Python."""
    return math.sqrt(a) if _is_static(a) else op.Sqrt(_float(a))


@register(math.ceil)
def sym_ceil(a: Any) -> Any:
    return math.ceil(a) if _is_static(a) else op.Cast(op.Ceil(_float(a)), to=ir.DataType.INT64)


@register(math.floor)
def sym_floor(a: Any) -> Any:
    return math.floor(a) if _is_static(a) else op.Cast(op.Floor(_float(a)), to=ir.DataType.INT64)


@register(torch.sym_ite)
def sym_ite(condition: Any, a: Any, b: Any) -> Any:
    if _is_static(condition):
        return a if condition else b
    return op.Where(condition, *_common(a, b))


@register(torch.sym_sum)
def sym_sum(args: list[Any]) -> Any:
    if _is_static(*args):
        return sum(args)
    total = args[0]
    for item in args[1:]:
        total = op.Add(*_common(total, item)) if isinstance(total, ir.Value) or isinstance(item, ir.Value) else total + item
    return total


@register(operator.abs)
def sym_abs(a: Any) -> Any:
    return abs(a) if _is_static(a) else op.Abs(a)
