"""``hypot``, ``xlogy`` (and half-precision ``entr`` and ``xlog1py``) and ``nextafter``: elementary
functions that need care with the floating-point format or with their special cases.

hypot scales by the larger magnitude so that the squares cannot overflow. nextafter steps the bit
pattern where ONNX has ``BitCast`` (opset 26), and below that adds one unit in the last place,
computed in a wider type.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np
import onnx_ir as ir
from onnxscript import opset18 as op
from onnxscript.onnx_opset import opset26

from torch_onnx_fx.ops import stable
from torch_onnx_fx.ops.special._series import DOUBLE, FLOAT, INF, NAN, constant, restore, tensors, working
from torch_onnx_fx.registry import half_result, register

__all__ = ["prims_hypot", "aten_xlogy", "aten_special_entr_half", "aten_special_xlog1py_half", "prims_nextafter_bitcast", "prims_nextafter"]


@register("prims::hypot")
def prims_hypot(self: Any, other: Any) -> ir.Value:
    """hypot(Tensor self, Tensor other) -> Tensor: sqrt(self^2 + other^2) without overflow."""
    self, other = tensors(self, other)
    x, y = op.Abs(working(self)), op.Abs(working(other))
    large, small = op.Max(x, y), op.Min(x, y)
    ratio = op.Div(small, op.Where(op.Equal(large, 0.0), 1.0, large))
    result = op.Mul(large, op.Sqrt(op.Add(op.Mul(ratio, ratio), 1.0)))
    result = op.Where(op.Or(op.IsNaN(x), op.IsNaN(y)), NAN, result)
    # As C's hypot: an infinite argument wins over a NaN.
    return restore(op.Where(op.Or(op.IsInf(x), op.IsInf(y)), INF, result), self)


@register("aten::xlogy.Tensor", "aten::xlogy.Scalar_Self", "aten::xlogy.Scalar_Other")
def aten_xlogy(self: Any, other: Any) -> ir.Value:
    """xlogy(Tensor self, Tensor other) -> Tensor: ATen's order of cases, NaN ``other`` first, then
    0 where ``self`` is 0, else self * log(other). torchlib tested self = 0 first, so
    xlogy(0, nan) came out 0 (found by tools/sweeps/tails.py; torch.onnx has the same)."""
    # In the inputs' dtype: ATen's float16 kernel rounds log(y) before the product, and the
    # kernel-gap pass keeps that rounding.
    x, y = tensors(self, other)
    return _times_logarithm(x, y, op.Log(y))


def _times_logarithm(x: ir.Value, y: ir.Value, logarithm: ir.Value) -> ir.Value:
    """``x * logarithm`` (a logarithm of ``y``) in ATen's order of cases: NaN where ``y`` is NaN,
    then 0 where ``x`` is 0."""
    product = op.Where(op.Equal(x, constant(0.0, x)), constant(0.0, x), op.Mul(x, logarithm))
    return op.Where(op.IsNaN(y), constant(NAN, x), product)


# torch's decompositions of these two compute a half-precision input in float32 and round once;
# ATen's kernels round the logarithm to the input's type before the product, as in xlogy (26 % of
# float16 entr and xlog1py results an ulp off).
@register("aten::special_entr", supports=half_result)
def aten_special_entr_half(self: ir.Value) -> ir.Value:
    """special_entr(Tensor self) -> Tensor of float16/bfloat16: -x * log(x) for x > 0, 0 at 0,
    -inf below, NaN kept, each step rounded to the input's type."""
    zero = constant(0.0, self)
    below = op.Where(op.Equal(self, zero), zero, constant(-INF, self))
    entropy = op.Where(op.Greater(self, zero), op.Mul(op.Neg(self), op.Log(self)), below)
    return op.Where(op.IsNaN(self), self, entropy)


@register("aten::special_xlog1py", "aten::special_xlog1py.self_scalar", "aten::special_xlog1py.other_scalar", supports=half_result)
def aten_special_xlog1py_half(self: Any, other: Any) -> ir.Value:
    """special_xlog1py(Tensor self, Tensor other) -> Tensor of float16/bfloat16: ATen's cases as
    xlogy's, log1p(other) rounded to the input's type before the product."""
    x, y = tensors(self, other)
    return _times_logarithm(x, y, op.Cast(stable.log1p(op.Cast(y, to=FLOAT)), to=y.dtype))


@dataclasses.dataclass(frozen=True)
class _FloatFormat:
    precision: int  # significand bits, the implicit one included
    min_exponent: int  # of the smallest normal number
    max_finite: float
    bits: ir.DataType


_FORMATS = {
    ir.DataType.FLOAT: _FloatFormat(24, -126, float(np.finfo(np.float32).max), ir.DataType.INT32),
    ir.DataType.DOUBLE: _FloatFormat(53, -1022, float(np.finfo(np.float64).max), ir.DataType.INT64),
    ir.DataType.FLOAT16: _FloatFormat(11, -14, 65504.0, ir.DataType.INT16),
    ir.DataType.BFLOAT16: _FloatFormat(8, -126, 3.3895313892515355e38, ir.DataType.INT16),
}


@register("prims::nextafter", min_opset=26)
def prims_nextafter_bitcast(self: Any, other: Any) -> ir.Value:
    """nextafter(Tensor self, Tensor other) -> Tensor

    Steps the bit pattern: read as an integer, a float's magnitude grows with its bits, so moving
    away from zero adds one and towards zero subtracts one (from +-inf too, to +-max). All the
    selecting happens on the bits, so half-precision types need no arithmetic of their own.
    """
    self, other = tensors(self, other)
    fmt = _FORMATS[self.dtype]
    x, y = (self, other) if self.dtype in (FLOAT, DOUBLE) else (op.Cast(self, to=FLOAT), op.Cast(other, to=FLOAT))
    bits = op.Cast(opset26.BitCast(self, to=fmt.bits), to=ir.DataType.INT64)
    other_bits = op.Cast(opset26.BitCast(other, to=fmt.bits), to=ir.DataType.INT64)
    up = op.Greater(y, x)
    away = op.Equal(up, op.Greater(x, 0.0))
    one = op.Constant(value_int=1)
    result = op.Add(bits, op.Where(away, one, op.Neg(one)))
    # From zero: the smallest subnormal, +-; its negative has the sign bit and the lowest bit set.
    negative_smallest = op.Constant(value_int=1 - 2 ** (int(fmt.bits.itemsize) * 8 - 1))
    result = op.Where(op.Equal(x, 0.0), op.Where(up, one, negative_smallest), result)
    result = op.Where(op.Equal(x, y), other_bits, result)
    result = op.Where(op.IsNaN(y), other_bits, result)
    result = op.Where(op.IsNaN(x), bits, result)
    return opset26.BitCast(op.Cast(result, to=fmt.bits), to=self.dtype)


@register("prims::nextafter")
def prims_nextafter(self: Any, other: Any) -> ir.Value:
    """nextafter(Tensor self, Tensor other) -> Tensor

    Without BitCast (opset < 26): x plus or minus one unit in the last place of x's format,
    computed in a wider type where that sum is exact. The unit is 2^(e - p + 1) for
    2^e <= |x| < 2^(e+1) (e no lower than the format's minimum exponent), halved when stepping
    down from an exact power of two.
    """
    self, other = tensors(self, other)
    fmt = _FORMATS[self.dtype]
    wide = DOUBLE if self.dtype in (FLOAT, DOUBLE) else FLOAT
    x, y = op.Cast(self, to=wide), op.Cast(other, to=wide)
    magnitude = op.Abs(x)
    safe = op.Where(op.Or(op.Equal(magnitude, 0.0), op.IsInf(magnitude)), 1.0, magnitude)
    exponent = op.Floor(op.Div(op.Log(safe), math.log(2.0)))
    # log2 may round across a power of two: one correction each way.
    two = constant(2.0, x)
    exponent = op.Where(op.Greater(op.Pow(two, exponent), safe), op.Sub(exponent, 1.0), exponent)
    exponent = op.Where(op.LessOrEqual(op.Pow(two, op.Add(exponent, 1.0)), safe), op.Add(exponent, 1.0), exponent)
    unit = op.Pow(two, op.Sub(op.Max(exponent, float(fmt.min_exponent)), float(fmt.precision - 1)))
    power_of_two = op.And(op.Equal(op.Pow(two, exponent), safe), op.Greater(exponent, float(fmt.min_exponent)))
    up = op.Greater(y, x)
    away = op.Equal(up, op.Greater(x, 0.0))
    step = op.Where(op.Or(away, op.Not(power_of_two)), unit, op.Mul(unit, 0.5))
    result = op.Add(x, op.Where(up, step, op.Neg(step)))
    smallest = 2.0 ** (fmt.min_exponent - fmt.precision + 1)
    result = op.Where(op.Equal(x, 0.0), op.Where(up, constant(smallest, x), constant(-smallest, x)), result)
    result = op.Where(op.IsInf(x), op.Mul(op.Sign(x), fmt.max_finite), result)
    result = op.Where(op.Equal(x, y), y, result)
    result = op.Where(op.Or(op.IsNaN(x), op.IsNaN(y)), op.Add(x, y), result)
    return op.Cast(result, to=self.dtype)
