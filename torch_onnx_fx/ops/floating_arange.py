"""Aranges with a floating result, as ATen computes them.

torchlib's translation runs ONNX's ``Range`` in float32 and casts: ``arange(0.1, -7.9, -4.0)``
came out 3 long where eager's is 2 (the float32 difference -8.000000096 / -4 rounds up), every
float64 arange was float32-accurate (3.6e-8 off for a step of 0.1), and a float step derived
from a dynamic size gave ``Range`` a zero delta at run time (now refused: such a float is float32
in the graph). ATen computes the length as
ceil((end - start) / step) in double and each value as start + step * i in its accumulator type
(double for float32 and float64, float for the half types), rounded once; so does this. (ATen's
vectorized path starts each block of 8 or 16 from a rounded base, so some of its values are an ulp
from the once-rounded ones: 220 of arange(0.1, 100.3, 0.1)'s 1,002 in float32.) Integer aranges
are ``ops/layout.py``'s.
"""

from __future__ import annotations

from typing import Any

import onnx_ir as ir
import torch
from onnxscript import opset18 as op

from torch_onnx_fx.errors import TranslationError
from torch_onnx_fx.ops import _tensors as tx
from torch_onnx_fx.registry import arg_value, register

__all__ = ["aten_arange_floating", "aten_arange_start_floating", "aten_arange_start_step_floating"]


def _floating_arange(*names: str) -> Any:
    """An arange with a floating result, from numbers or symbolic sizes."""

    def accepts(node: torch.fx.Node) -> bool:
        result = node.meta.get("val")
        if not isinstance(result, torch.Tensor) or result.dtype not in (torch.float64, torch.float32, torch.float16, torch.bfloat16):
            return False
        bounds = [arg_value(node, i, name, 1 if name == "step" else 0) for i, name in enumerate(names)]
        return all(isinstance(b, (int, float, torch.SymInt, torch.SymFloat)) and not isinstance(b, bool) for b in bounds)

    return accepts


# ATen's CPU kernel computes start + step * i in acc_type (double for float32) and rounds once.
_ACCUMULATOR = {
    ir.DataType.DOUBLE: ir.DataType.DOUBLE, ir.DataType.FLOAT: ir.DataType.DOUBLE,
    ir.DataType.FLOAT16: ir.DataType.FLOAT, ir.DataType.BFLOAT16: ir.DataType.FLOAT,
}


def _floating_range(start: Any, end: Any, step: Any, dtype: Any) -> ir.Value:
    """The arange from ``start`` to ``end`` by ``step`` (numbers or symbolic sizes); ``dtype`` is
    the ONNX type the walk hands over, None for the default (float32)."""

    def wide(value: Any) -> ir.Value:
        if isinstance(value, (int, float)):
            return op.Constant(value=ir.tensor(float(value), dtype=ir.DataType.DOUBLE))
        if value.dtype != ir.DataType.INT64:
            # A SymFloat reaches the graph as float32 (ops/symbolic.py): a step of 1 / n rounded
            # there made the length one too long for 19 of n = 2..100. Refused, not approximated.
            raise TranslationError(
                "arange with a bound or step computed from a dynamic size in floating point: the graph holds that "
                "number in float32, and the length ceil((end - start) / step) may come out one off. Compute the "
                "values from integers instead, e.g. torch.arange(n) * (1.0 / n) for torch.arange(0, 1, 1 / n)."
            )
        return op.Cast(value, to=ir.DataType.DOUBLE)

    target = ir.DataType(int(dtype)) if dtype is not None else ir.DataType.FLOAT
    first, last, stride = wide(start), wide(end), wide(step)
    zero = op.Constant(value=ir.tensor(0.0, dtype=ir.DataType.DOUBLE))
    length = op.Cast(op.Max(op.Ceil(op.Div(op.Sub(last, first), stride)), zero), to=ir.DataType.INT64)
    positions = op.Range(tx.int64(0), length, tx.int64(1))
    accumulator = _ACCUMULATOR[target]
    values = op.Add(op.Cast(first, to=accumulator), op.Mul(op.Cast(stride, to=accumulator), op.Cast(positions, to=accumulator)))
    return values if target == accumulator else op.Cast(values, to=target)


@register("aten::arange", supports=_floating_arange("end"))
def aten_arange_floating(end: Any, dtype: Any = None, *args: Any, **kwargs: Any) -> ir.Value:
    """arange(Scalar end, *, ScalarType? dtype=None, Layout? layout=None, Device? device=None, bool? pin_memory=None) -> Tensor"""
    return _floating_range(0, end, 1, dtype)


@register("aten::arange.start", supports=_floating_arange("start", "end"))
def aten_arange_start_floating(start: Any, end: Any, dtype: Any = None, *args: Any, **kwargs: Any) -> ir.Value:
    """arange.start(Scalar start, Scalar end, *, ScalarType? dtype=None, ...) -> Tensor"""
    return _floating_range(start, end, 1, dtype)


@register("aten::arange.start_step", supports=_floating_arange("start", "end", "step"))
def aten_arange_start_step_floating(start: Any, end: Any, step: Any = 1, dtype: Any = None, *args: Any, **kwargs: Any) -> ir.Value:
    """arange.start_step(Scalar start, Scalar end, Scalar step=1, *, ScalarType? dtype=None, ...) -> Tensor"""
    return _floating_range(start, end, step, dtype)
