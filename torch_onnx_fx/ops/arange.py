"""Aranges as ATen computes them, in every real dtype.

ATen converts the bounds and step to the result's accumulator type first: double for float32 and
float64, float for the half types, int64 for every integer type (so ``arange(-0.9, 2.1, 2.0,
dtype=torch.uint8)`` starts at 0 with a step of 2). It computes the length as ceil((end - start)
/ step) in double from the bounds as given, except for int64 results, whose length comes from the
converted bounds in integer arithmetic; and each value as start + step * i in the accumulator,
converted once (integers wrap: ``arange(2, -3, -1, dtype=torch.uint8)`` ends 255, 254). So does this.

torchlib's translation runs ONNX's ``Range`` in float32 and casts: ``arange(0.1, -7.9, -4.0)``
came out 3 long where eager's is 2 (the float32 difference -8.000000096 / -4 rounds up), every
float64 arange was float32-accurate (3.6e-8 off for a step of 0.1), uint8 aranges from floating
bounds took other values (``[0, 1]`` for eager's ``[0, 2]`` above), and a float step derived
from a dynamic size gave ``Range`` a zero delta at run time (now refused: such a float is float32
in the graph). ATen's vectorized floating path starts each block of 8 or 16 from a rounded base,
so some of its values are an ulp from the once-rounded ones: 220 of arange(0.1, 100.3, 0.1)'s
1,002 in float32. An int64 arange from integer bounds (symbolic ones included) is one ``Range``.
"""

from __future__ import annotations

from typing import Any

import onnx_ir as ir
import torch
from onnx_ir.tensor_adapters import TorchTensor
from onnxscript import opset18 as op

from torch_onnx_fx.dtypes import onnx_dtype
from torch_onnx_fx.ops import _tensors as tx
from torch_onnx_fx.registry import arg_value, register, wants_context
from torch_onnx_fx.translate.op_context import OpContext

__all__ = ["aten_arange", "aten_arange_start", "aten_arange_start_step"]


def _arange(*names: str) -> Any:
    """An arange of a real dtype from numbers or symbolic sizes."""

    def accepts(node: torch.fx.Node) -> bool:
        result = node.meta.get("val")
        if not isinstance(result, torch.Tensor) or result.dtype == torch.bool or result.is_complex():
            return False
        bounds = [arg_value(node, i, name, 1 if name == "step" else 0) for i, name in enumerate(names)]
        return all(isinstance(b, (int, float, torch.SymInt, torch.SymFloat)) and not isinstance(b, bool) for b in bounds)

    return accepts


@register("aten::arange", supports=_arange("end"))
@wants_context
def aten_arange(end: Any, *args: Any, ctx: OpContext, **kwargs: Any) -> ir.Value:
    """arange(Scalar end, *, ScalarType? dtype=None, Layout? layout=None, Device? device=None, bool? pin_memory=None) -> Tensor"""
    return _range(0, end, 1, ctx.result.dtype)


@register("aten::arange.start", supports=_arange("start", "end"))
@wants_context
def aten_arange_start(start: Any, end: Any, *args: Any, ctx: OpContext, **kwargs: Any) -> ir.Value:
    """arange.start(Scalar start, Scalar end, *, ScalarType? dtype=None, ...) -> Tensor"""
    return _range(start, end, 1, ctx.result.dtype)


@register("aten::arange.start_step", supports=_arange("start", "end", "step"))
@wants_context
def aten_arange_start_step(start: Any, end: Any, step: Any = 1, *args: Any, ctx: OpContext, **kwargs: Any) -> ir.Value:
    """arange.start_step(Scalar start, Scalar end, Scalar step=1, *, ScalarType? dtype=None, ...) -> Tensor"""
    return _range(start, end, step, ctx.result.dtype)


# ATen's CPU kernel computes start + step * i in acc_type and converts once.
_ACCUMULATOR = {
    ir.DataType.DOUBLE: ir.DataType.DOUBLE, ir.DataType.FLOAT: ir.DataType.DOUBLE,
    ir.DataType.FLOAT16: ir.DataType.FLOAT, ir.DataType.BFLOAT16: ir.DataType.FLOAT,
}


def _range(start: Any, end: Any, step: Any, dtype: torch.dtype) -> ir.Value:
    """The arange from ``start`` to ``end`` by ``step`` (numbers or symbolic sizes) in ``dtype``."""
    target = onnx_dtype(dtype)
    if target == ir.DataType.INT64 and all(_is_integer(b) for b in (start, end, step)):
        if all(isinstance(b, int) for b in (start, end, step)) and max(abs(start), abs(end), abs(step)) >= 2**53:
            # ONNX Runtime's Range is exact, but constant folding runs numpy's arange, which sizes
            # it in double: arange(0, 2**53 + 1, 2**53) lost its last element. torch's is exact.
            return op.Constant(value=TorchTensor(torch.arange(start, end, step)))
        return op.Range(_integer(start), _integer(end), _integer(step))
    if target in _ACCUMULATOR:
        # The length and each value in double, from the bounds as given.
        first, last, stride = tx.double(start), tx.double(end), tx.double(step)
    else:
        # The bounds truncated to int64 (ATen's integer accumulator), the length in double from
        # the bounds as given, but in integers from the truncated ones for int64 results.
        first, last, stride = _integer(start), _integer(end), _integer(step)
    if target == ir.DataType.INT64:
        length = op.Div(op.Sub(op.Add(op.Sub(last, first), stride), op.Sign(stride)), stride)
    else:
        zero = op.Constant(value=ir.tensor(0.0, dtype=ir.DataType.DOUBLE))
        span = op.Div(op.Sub(tx.double(end), tx.double(start)), tx.double(step))
        length = op.Cast(op.Max(op.Ceil(span), zero), to=ir.DataType.INT64)
    positions = op.Range(tx.int64(0), length, tx.int64(1))
    accumulator = _ACCUMULATOR.get(target, ir.DataType.INT64)
    values = op.Add(op.Cast(first, to=accumulator), op.Mul(op.Cast(stride, to=accumulator), op.Cast(positions, to=accumulator)))
    return values if target == accumulator else op.Cast(values, to=target)


def _is_integer(value: Any) -> bool:
    return isinstance(value, int) or (isinstance(value, ir.Value) and value.dtype == ir.DataType.INT64)


def _integer(value: Any) -> ir.Value:
    """``value`` as ATen's int64 accumulator holds it: a float truncated toward zero."""
    if isinstance(value, (int, float)):
        return tx.int64(int(value))
    return value if value.dtype == ir.DataType.INT64 else op.Cast(value, to=ir.DataType.INT64)
