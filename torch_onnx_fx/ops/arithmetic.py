"""Exact integer arithmetic.

torchlib divides integers with a rounding mode through float32 (``Floor(Div(Cast(a), Cast(b)))``),
which is wrong above 2^24 (16777217 // 1 = 16777216). ONNX's integer ``Div`` truncates toward
zero, as C does, so truncation is one ``Div`` and flooring corrects it by one where the remainder
is nonzero and the signs differ: exact over the whole range of every integer type.
"""

from __future__ import annotations

from typing import Any

import onnx_ir as ir
import torch
from onnxscript import opset18 as op

from torch_onnx_fx.registry import arg_example, integral_input, register

__all__ = ["aten_div_mode_integer", "aten_isnan_exact", "aten_isfinite_exact", "aten_any", "aten_all", "aten_any_complex", "aten_all_complex", "aten_round_integer"]


def _integer_rounding_division(node: torch.fx.Node) -> bool:
    result = node.meta.get("val")
    mode = node.kwargs.get("rounding_mode")
    return (
        isinstance(result, torch.Tensor)
        and not result.dtype.is_floating_point
        and not result.is_complex()
        and result.dtype != torch.bool
        and mode in ("trunc", "floor")
    )


@register(
    "aten::div.Tensor_mode", "aten::div.Scalar_mode", "aten::divide.Tensor_mode", "aten::divide.Scalar_mode",
    supports=_integer_rounding_division,
)
def aten_div_mode_integer(self: ir.Value, other: Any, *, rounding_mode: str) -> ir.Value:
    """div.Tensor_mode(Tensor self, Tensor other, *, str? rounding_mode) -> Tensor, integers"""
    if not isinstance(other, ir.Value):
        other = op.CastLike(op.Constant(value_int=int(other)), self)
    quotient = op.Div(self, other)
    if rounding_mode == "trunc" or (self.dtype is not None and not _signed(self.dtype)):
        return quotient
    zero = op.CastLike(op.Constant(value_int=0), self)
    inexact = op.Not(op.Equal(op.Sub(self, op.Mul(quotient, other)), zero))
    signs_differ = op.Xor(op.Less(self, zero), op.Less(other, zero))
    return op.Sub(quotient, op.CastLike(op.And(inexact, signs_differ), self))


def _signed(dtype: ir.DataType) -> bool:
    return dtype not in (ir.DataType.UINT8, ir.DataType.UINT16, ir.DataType.UINT32, ir.DataType.UINT64)


@register("aten::isnan", "aten::isinf", "aten::isposinf", "aten::isneginf", supports=integral_input)
def aten_isnan_exact(self: ir.Value) -> ir.Value:
    """isnan(Tensor self) -> Tensor on integers and bools: never (IsNaN/IsInf take floats only)"""
    return op.Expand(op.Constant(value=ir.tensor(False)), op.Shape(self))


@register("aten::isfinite", supports=integral_input)
def aten_isfinite_exact(self: ir.Value) -> ir.Value:
    """isfinite(Tensor self) -> Tensor on integers and bools: always"""
    return op.Expand(op.Constant(value=ir.tensor(True)), op.Shape(self))


def _bool_input(node: torch.fx.Node) -> bool:
    example = arg_example(node)
    return isinstance(example, torch.Tensor) and example.dtype == torch.bool


@register("aten::isclose", supports=_bool_input)
def aten_isclose_bool(
    self: ir.Value, other: ir.Value, rtol: float = 1e-05, atol: float = 1e-08, equal_nan: bool = False
) -> ir.Value:
    """isclose(Tensor self, Tensor other, float rtol=1e-05, float atol=1e-08, bool equal_nan=False)
    -> Tensor on bools, as ATen computes it on 0/1: equal values are close, different ones when
    1 <= atol + rtol * other (torchlib subtracts the bools: invalid ONNX)"""
    equal = op.Equal(self, other)
    when_other_false, when_other_true = atol >= 1, atol + rtol >= 1
    if not when_other_false and not when_other_true:
        return equal
    tolerated = op.Where(other, op.Constant(value=ir.tensor(when_other_true)), op.Constant(value=ir.tensor(when_other_false)))
    return op.Or(equal, tolerated)


@register("aten::addr", supports=_bool_input)
def aten_addr_bool(self: ir.Value, vec1: ir.Value, vec2: ir.Value, *, beta: Any = 1, alpha: Any = 1) -> ir.Value:
    """addr(Tensor self, Tensor vec1, Tensor vec2, *, Scalar beta=1, Scalar alpha=1) -> Tensor on
    bools: (beta and self) or (alpha and vec1 ⊗ vec2), the logical form ATen computes (torchlib
    multiplies bools: invalid ONNX)"""
    outer = op.And(op.Unsqueeze(vec1, op.Constant(value_ints=[1])), op.Unsqueeze(vec2, op.Constant(value_ints=[0])))
    terms = []
    if beta:
        terms.append(op.Expand(self, op.Shape(outer)))
    if alpha:
        terms.append(outer)
    if not terms:
        return op.Expand(op.Constant(value=ir.tensor(False)), op.Shape(outer))
    return terms[0] if len(terms) == 1 else op.Or(terms[0], terms[1])


def _count_reduced(flags: ir.Value, dim: Any, keepdim: bool) -> ir.Value:
    """How many ``flags`` are set along ``dim`` (all dims when None): a ReduceSum, whose value on
    an empty input is 0 — ReduceMax, which torchlib uses, has no neutral value for it."""
    counts = op.Cast(flags, to=ir.DataType.INT64)
    if dim is None:
        return op.ReduceSum(counts, keepdims=int(keepdim))
    dims = [dim] if isinstance(dim, int) else list(dim)
    if not dims:
        return op.ReduceSum(counts, keepdims=int(keepdim))
    return op.ReduceSum(counts, op.Constant(value_ints=dims), keepdims=int(keepdim))


def _nonzero(self: ir.Value) -> ir.Value:
    return op.Not(op.Equal(self, op.CastLike(op.Constant(value_int=0), self)))


def _rank_of(value: ir.Value) -> int | None:
    return value.shape.rank() if value.shape is not None else None


def _any_of(flags: ir.Value, rank: int | None, dim: Any, keepdim: bool) -> ir.Value:
    # A 0-d tensor: ATen reduces it over dim 0 or -1 to itself (ONNX has no such axis).
    if rank == 0:
        return flags
    return op.Greater(_count_reduced(flags, dim, keepdim), op.Constant(value_int=0))


def _all_of(flags: ir.Value, rank: int | None, dim: Any, keepdim: bool) -> ir.Value:
    if rank == 0:
        return flags
    return op.Equal(_count_reduced(op.Not(flags), dim, keepdim), op.Constant(value_int=0))


@register("aten::any", "aten::any.dim", "aten::any.dims")
def aten_any(self: ir.Value, dim: Any = None, keepdim: bool = False) -> ir.Value:
    """any.dims(Tensor self, int[]? dim=None, bool keepdim=False) -> Tensor: False when empty"""
    return _any_of(_nonzero(self), _rank_of(self), dim, keepdim)


@register("aten::all", "aten::all.dim", "aten::all.dims", "aten::_is_all_true")
def aten_all(self: ir.Value, dim: Any = None, keepdim: bool = False) -> ir.Value:
    """all.dims(Tensor self, int[]? dim=None, bool keepdim=False) -> Tensor: True when empty;
    _is_all_true(Tensor self) -> Tensor (of a bool tensor, transformers' VITS) is its full form"""
    return _all_of(_nonzero(self), _rank_of(self), dim, keepdim)


def _complex_nonzero(self: ir.Value) -> ir.Value:
    """Per complex element of a real view: either part nonzero."""
    flags = op.Cast(_nonzero(self), to=ir.DataType.INT64)
    return op.Greater(op.ReduceSum(flags, op.Constant(value_ints=[-1]), keepdims=0), op.Constant(value_int=0))


@register("aten::any", "aten::any.dim", "aten::any.dims", complex=True)
def aten_any_complex(self: ir.Value, dim: Any = None, keepdim: bool = False) -> ir.Value:
    """any.dims(Tensor self, int[]? dim=None, bool keepdim=False) -> Tensor of a complex tensor"""
    view_rank = _rank_of(self)
    return _any_of(_complex_nonzero(self), None if view_rank is None else view_rank - 1, dim, keepdim)


@register("aten::all", "aten::all.dim", "aten::all.dims", complex=True)
def aten_all_complex(self: ir.Value, dim: Any = None, keepdim: bool = False) -> ir.Value:
    """all.dims(Tensor self, int[]? dim=None, bool keepdim=False) -> Tensor of a complex tensor"""
    view_rank = _rank_of(self)
    return _all_of(_complex_nonzero(self), None if view_rank is None else view_rank - 1, dim, keepdim)


@register("aten::floor", "aten::ceil", "aten::round", "aten::trunc", "aten::fix", supports=integral_input)
def aten_round_integer(self: ir.Value) -> ir.Value:
    """floor(Tensor self) -> Tensor (and ceil, round, trunc) of integers: the integers themselves,
    as ATen returns them (ONNX's Floor/Ceil/Round take floats only)"""
    return op.Identity(self)
