"""Element-wise complex functions, predicates and comparisons, on the real view.

Each computes the textbook formula on the two parts (see ``real_view``), so the result is what
ATen computes up to rounding. Predicates and comparisons have real (bool) results.
"""

from __future__ import annotations

import math
from typing import Any

import onnx_ir as ir
from onnxscript import opset18 as op

from torch_onnx_fx.ops._tensors import int64, ints
from torch_onnx_fx.ops.complex.real_view import _const, _exp, _hypot, _im, _join, _log, _mul, _operand, _re, _reciprocal, _signbit, _sqrt, _times_i
from torch_onnx_fx.registry import register

__all__ = ['aten_exp_complex', 'aten_expm1_complex', 'aten_exp2_complex', 'aten_log_complex', 'aten_log2_complex', 'aten_log10_complex', 'aten_log1p_complex', 'aten_sqrt_complex', 'aten_rsqrt_complex', 'aten_sin_complex', 'aten_cos_complex', 'aten_tan_complex', 'aten_sinh_complex', 'aten_cosh_complex', 'aten_tanh_complex', 'aten_asin_complex', 'aten_acos_complex', 'aten_atan_complex', 'aten_asinh_complex', 'aten_acosh_complex', 'aten_atanh_complex', 'aten_sigmoid_complex', 'aten_square_complex', 'aten_sgn_complex', 'aten_pow_complex', 'aten_pow_scalar_complex', 'aten_isnan_complex', 'aten_isinf_complex', 'aten_isfinite_complex', 'aten_eq_complex', 'aten_ne_complex', 'aten_where_complex']


# -- element-wise functions ----------------------------------------------------------------------


@register("aten::exp", "prims::exp", complex=True)
def aten_exp_complex(self: ir.Value) -> ir.Value:
    """exp(Tensor self) -> Tensor: e^a (cos b + i sin b)"""
    return _exp(self)


@register("aten::expm1", complex=True)
def aten_expm1_complex(self: ir.Value) -> ir.Value:
    """expm1(Tensor self) -> Tensor: e^a cos b - 1 written as (e^a - 1) cos b - 2 sin²(b/2),
    which keeps its precision for small arguments"""
    a, b = _re(self), _im(self)
    half = op.Sin(op.Div(b, _const(2.0, b)))
    re = op.Sub(op.Mul(op.Sub(op.Exp(a), _const(1.0, a)), op.Cos(b)), op.Mul(_const(2.0, b), op.Mul(half, half)))
    return _join(re, op.Mul(op.Exp(a), op.Sin(b)))


@register("aten::exp2", complex=True)
def aten_exp2_complex(self: ir.Value) -> ir.Value:
    """exp2(Tensor self) -> Tensor: exp(z ln 2)"""
    return _exp(op.Mul(self, _const(math.log(2.0), self)))


@register("aten::log", "prims::log", complex=True)
def aten_log_complex(self: ir.Value) -> ir.Value:
    """log(Tensor self) -> Tensor: log|z| + i atan2(b, a)"""
    return _log(self)


@register("aten::log2", complex=True)
def aten_log2_complex(self: ir.Value) -> ir.Value:
    """log2(Tensor self) -> Tensor"""
    return op.Div(_log(self), _const(math.log(2.0), self))


@register("aten::log10", complex=True)
def aten_log10_complex(self: ir.Value) -> ir.Value:
    """log10(Tensor self) -> Tensor"""
    return op.Div(_log(self), _const(math.log(10.0), self))


@register("aten::log1p", complex=True)
def aten_log1p_complex(self: ir.Value) -> ir.Value:
    """log1p(Tensor self) -> Tensor: log(1 + z)"""
    return _log(op.Add(self, _operand(1.0, self)))


@register("aten::sqrt", "prims::sqrt", complex=True)
def aten_sqrt_complex(self: ir.Value) -> ir.Value:
    """sqrt(Tensor self) -> Tensor: the principal root"""
    return _sqrt(self)


@register("aten::rsqrt", complex=True)
def aten_rsqrt_complex(self: ir.Value) -> ir.Value:
    """rsqrt(Tensor self) -> Tensor: 1 / sqrt(z)"""
    return _reciprocal(_sqrt(self))


def _sin(z: ir.Value) -> ir.Value:
    a, b = _re(z), _im(z)
    return _join(op.Mul(op.Sin(a), op.Cosh(b)), op.Mul(op.Cos(a), op.Sinh(b)))


def _cos(z: ir.Value) -> ir.Value:
    a, b = _re(z), _im(z)
    return _join(op.Mul(op.Cos(a), op.Cosh(b)), op.Neg(op.Mul(op.Sin(a), op.Sinh(b))))


def _tanh(z: ir.Value) -> ir.Value:
    """(sinh 2a + i sin 2b) / (cosh 2a + cos 2b); for |a| > 20 that is ±1 to float64 precision,
    where the formula itself would overflow to inf / inf."""
    a, b = _re(z), _im(z)
    two_a, two_b = op.Add(a, a), op.Add(b, b)
    denominator = op.Add(op.Cosh(two_a), op.Cos(two_b))
    re = op.Div(op.Sinh(two_a), denominator)
    im = op.Div(op.Sin(two_b), denominator)
    large = op.Greater(op.Abs(a), _const(20.0, a))
    one = _const(1.0, a)
    sign = op.Where(_signbit(a), op.Neg(one), one)
    return _join(op.Where(large, sign, re), op.Where(large, op.Mul(im, _const(0.0, a)), im))


@register("aten::sin", complex=True)
def aten_sin_complex(self: ir.Value) -> ir.Value:
    """sin(Tensor self) -> Tensor: sin a cosh b + i cos a sinh b"""
    return _sin(self)


@register("aten::cos", complex=True)
def aten_cos_complex(self: ir.Value) -> ir.Value:
    """cos(Tensor self) -> Tensor: cos a cosh b - i sin a sinh b"""
    return _cos(self)


@register("aten::tan", complex=True)
def aten_tan_complex(self: ir.Value) -> ir.Value:
    """tan(Tensor self) -> Tensor: -i tanh(iz)"""
    t = _tanh(_times_i(self))
    return _join(_im(t), op.Neg(_re(t)))


@register("aten::sinh", complex=True)
def aten_sinh_complex(self: ir.Value) -> ir.Value:
    """sinh(Tensor self) -> Tensor: sinh a cos b + i cosh a sin b"""
    a, b = _re(self), _im(self)
    return _join(op.Mul(op.Sinh(a), op.Cos(b)), op.Mul(op.Cosh(a), op.Sin(b)))


@register("aten::cosh", complex=True)
def aten_cosh_complex(self: ir.Value) -> ir.Value:
    """cosh(Tensor self) -> Tensor: cosh a cos b + i sinh a sin b"""
    a, b = _re(self), _im(self)
    return _join(op.Mul(op.Cosh(a), op.Cos(b)), op.Mul(op.Sinh(a), op.Sin(b)))


@register("aten::tanh", complex=True)
def aten_tanh_complex(self: ir.Value) -> ir.Value:
    """tanh(Tensor self) -> Tensor"""
    return _tanh(self)


def _one_minus_square_root(z: ir.Value) -> ir.Value:
    return _sqrt(op.Sub(_operand(1.0, z), _mul(z, z)))


@register("aten::asin", complex=True)
def aten_asin_complex(self: ir.Value) -> ir.Value:
    """asin(Tensor self) -> Tensor: -i log(iz + sqrt(1 - z²))"""
    w = _log(op.Add(_times_i(self), _one_minus_square_root(self)))
    return _join(_im(w), op.Neg(_re(w)))


@register("aten::acos", complex=True)
def aten_acos_complex(self: ir.Value) -> ir.Value:
    """acos(Tensor self) -> Tensor: -i log(z + i sqrt(1 - z²))"""
    w = _log(op.Add(self, _times_i(_one_minus_square_root(self))))
    return _join(_im(w), op.Neg(_re(w)))


@register("aten::atan", complex=True)
def aten_atan_complex(self: ir.Value) -> ir.Value:
    """atan(Tensor self) -> Tensor: (i/2) (log(1 - iz) - log(1 + iz))"""
    iz = _times_i(self)
    one = _operand(1.0, self)
    difference = op.Sub(_log(op.Sub(one, iz)), _log(op.Add(one, iz)))
    return op.Mul(_times_i(difference), _const(0.5, self))


@register("aten::asinh", complex=True)
def aten_asinh_complex(self: ir.Value) -> ir.Value:
    """asinh(Tensor self) -> Tensor: -i asin(iz), which keeps asin's branch cuts"""
    iz = _times_i(self)
    w = _log(op.Add(_times_i(iz), _one_minus_square_root(iz)))
    asin_iz = _join(_im(w), op.Neg(_re(w)))
    return _join(_im(asin_iz), op.Neg(_re(asin_iz)))


@register("aten::acosh", complex=True)
def aten_acosh_complex(self: ir.Value) -> ir.Value:
    """acosh(Tensor self) -> Tensor: log(z + sqrt(z + 1) sqrt(z - 1))"""
    one = _operand(1.0, self)
    return _log(op.Add(self, _mul(_sqrt(op.Add(self, one)), _sqrt(op.Sub(self, one)))))


@register("aten::atanh", complex=True)
def aten_atanh_complex(self: ir.Value) -> ir.Value:
    """atanh(Tensor self) -> Tensor: (log(1 + z) - log(1 - z)) / 2"""
    one = _operand(1.0, self)
    return op.Mul(op.Sub(_log(op.Add(one, self)), _log(op.Sub(one, self))), _const(0.5, self))


@register("aten::sigmoid", complex=True)
def aten_sigmoid_complex(self: ir.Value) -> ir.Value:
    """sigmoid(Tensor self) -> Tensor: 1 / (1 + e^-z)"""
    return _reciprocal(op.Add(_operand(1.0, self), _exp(op.Neg(self))))


@register("aten::square", complex=True)
def aten_square_complex(self: ir.Value) -> ir.Value:
    """square(Tensor self) -> Tensor: z z"""
    return _mul(self, self)


@register("aten::sgn", complex=True)
def aten_sgn_complex(self: ir.Value) -> ir.Value:
    """sgn(Tensor self) -> Tensor: z / |z|, and 0 at 0"""
    magnitude = op.Unsqueeze(_hypot(_re(self), _im(self)), ints(-1))
    zero = _const(0.0, self)
    return op.Where(op.Equal(magnitude, zero), op.Mul(self, zero), op.Div(self, magnitude))


def _pow(base: ir.Value, exponent: ir.Value) -> ir.Value:
    """exp(w log z); ATen's 0^w is 1 for w = 0 and 0 for other w with a positive real part."""
    result = _exp(_mul(exponent, _log(base)))
    zero = _const(0.0, base)
    base_zero = op.Unsqueeze(op.And(op.Equal(_re(base), zero), op.Equal(_im(base), zero)), ints(-1))
    exponent_zero = op.Unsqueeze(op.And(op.Equal(_re(exponent), zero), op.Equal(_im(exponent), zero)), ints(-1))
    positive = op.Unsqueeze(op.Greater(_re(exponent), zero), ints(-1))
    at_zero = op.Where(exponent_zero, _operand(1.0, base), op.Where(positive, op.Mul(result, zero), result))
    return op.Where(base_zero, at_zero, result)


@register("aten::pow.Tensor_Tensor", "aten::pow.Tensor_Scalar", complex=True)
def aten_pow_complex(self: ir.Value, exponent: Any) -> ir.Value:
    """pow.Tensor_Tensor(Tensor self, Tensor exponent) -> Tensor (and pow.Tensor_Scalar)

    Small integer powers multiply, as ATen does, so z² is exact rounding for rounding."""
    if not isinstance(exponent, ir.Value) and complex(exponent) in (1, 2, 3):
        power = int(complex(exponent).real)
        result = self
        for _ in range(power - 1):
            result = _mul(result, self)
        return op.Identity(result)
    return _pow(self, _operand(exponent, self))


@register("aten::pow.Scalar", complex=True)
def aten_pow_scalar_complex(self: Any, exponent: ir.Value) -> ir.Value:
    """pow.Scalar(Scalar self, Tensor exponent) -> Tensor"""
    return _pow(_operand(self, exponent), exponent)


# -- predicates and comparisons (real results) ---------------------------------------------------


@register("aten::isnan", complex=True)
def aten_isnan_complex(self: ir.Value) -> ir.Value:
    """isnan(Tensor self) -> Tensor: either part NaN"""
    return op.Or(op.IsNaN(_re(self)), op.IsNaN(_im(self)))


@register("aten::isinf", complex=True)
def aten_isinf_complex(self: ir.Value) -> ir.Value:
    """isinf(Tensor self) -> Tensor: either part infinite"""
    return op.Or(op.IsInf(_re(self)), op.IsInf(_im(self)))


@register("aten::isfinite", complex=True)
def aten_isfinite_complex(self: ir.Value) -> ir.Value:
    """isfinite(Tensor self) -> Tensor: both parts finite"""
    bad = op.Or(op.IsNaN(self), op.IsInf(self))
    return op.Not(op.Or(op.Gather(bad, int64(0), axis=-1), op.Gather(bad, int64(1), axis=-1)))


def _equal(x: ir.Value, y: Any) -> ir.Value:
    y = _operand(y, x)
    return op.And(op.Equal(_re(x), _re(y)), op.Equal(_im(x), _im(y)))


@register("aten::eq.Tensor", "aten::eq.Scalar", complex=True)
def aten_eq_complex(self: ir.Value, other: Any) -> ir.Value:
    """eq.Tensor(Tensor self, Tensor other) -> Tensor: both parts equal"""
    return _equal(self, other)


@register("aten::ne.Tensor", "aten::ne.Scalar", complex=True)
def aten_ne_complex(self: ir.Value, other: Any) -> ir.Value:
    """ne.Tensor(Tensor self, Tensor other) -> Tensor"""
    return op.Not(_equal(self, other))


@register("aten::where.self", "aten::where.ScalarSelf", "aten::where.ScalarOther", "prims::where", complex=True)
def aten_where_complex(condition: ir.Value, self: Any, other: Any) -> ir.Value:
    """where.self(Tensor condition, Tensor self, Tensor other) -> Tensor: the condition gains the
    trailing pair's axis to broadcast over it"""
    like = self if isinstance(self, ir.Value) else other
    return op.Where(op.Unsqueeze(condition, ints(-1)), _operand(self, like), _operand(other, like))
