"""Translations for complex tensors, on their real view.

A complex tensor of shape ``S`` travels as a real tensor of shape ``S + [2]`` (real, imaginary).
The registry gives a node with a complex input or result only to translations registered with
``complex=True``; these are they, for the element-wise functions, comparisons, conversions,
factories and layout operators torchlib has no complex form of. Each one computes the
textbook formula on the two parts (``exp(a+bi) = e^a (cos b + i sin b)``), so the result is what
ATen computes up to rounding; where the formula needs care (``atan2`` quadrants and signed zeros,
``sqrt`` cancellation) the helpers say how.

Operators whose dims count from the end (``unsqueeze(-1)``, ``select(-1)``) shift negative dims
past the trailing pair; those with a size list (``expand``, ``full``) append 2 to it.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np
import onnx_ir as ir
import torch
from onnxscript import opset18 as op

from torch_onnx_fx.dtypes import onnx_dtype
from torch_onnx_fx.errors import TranslationError
from torch_onnx_fx.translate.op_context import OpContext
from torch_onnx_fx.ops._tensors import int64, ints
from torch_onnx_fx.registry import register, wants_context

__all__ = [
    "aten_exp_complex", "aten_expm1_complex", "aten_exp2_complex", "aten_log_complex", "aten_log2_complex",
    "aten_log10_complex", "aten_log1p_complex", "aten_sqrt_complex", "aten_rsqrt_complex", "aten_sin_complex",
    "aten_cos_complex", "aten_tan_complex", "aten_sinh_complex", "aten_cosh_complex", "aten_tanh_complex",
    "aten_asin_complex", "aten_acos_complex", "aten_atan_complex", "aten_asinh_complex", "aten_acosh_complex",
    "aten_atanh_complex", "aten_sigmoid_complex", "aten_square_complex", "aten_sgn_complex", "aten_pow_complex",
    "aten_pow_scalar_complex", "aten_isnan_complex", "aten_isinf_complex", "aten_isfinite_complex",
    "aten_eq_complex", "aten_ne_complex", "aten_where_complex", "aten_identity_complex", "aten_convert_complex",
    "aten_full_complex", "aten_full_like_complex", "aten_unsqueeze_complex", "aten_select_complex",
    "aten_index_select_complex", "aten_expand_complex", "aten_squeeze_complex", "aten_split_complex",
    "aten_unbind_complex", "aten_copy_complex", "aten_repeat_complex", "aten_assert_noop_complex",
    "aten_sym_size_complex", "aten_sym_numel_complex", "aten_abs_complex", "aten_cumsum_complex",
    "aten_nonzero_complex", "aten_index_complex", "aten_index_put_complex", "aten_sum_complex",
    "aten_mm_complex", "aten_mean_complex", "aten_scalar_tensor_complex", "aten_var_complex",
]

_REAL_PART = {ir.DataType.COMPLEX64: ir.DataType.FLOAT, ir.DataType.COMPLEX128: ir.DataType.DOUBLE}


# -- the real view -------------------------------------------------------------------------------


def _re(z: ir.Value) -> ir.Value:
    return op.Gather(z, int64(0), axis=-1)


def _im(z: ir.Value) -> ir.Value:
    return op.Gather(z, int64(1), axis=-1)


def _join(re: ir.Value, im: ir.Value) -> ir.Value:
    return op.Concat(op.Unsqueeze(re, ints(-1)), op.Unsqueeze(im, ints(-1)), axis=-1)


def _real_to_complex(re: ir.Value) -> ir.Value:
    """A real tensor as the real view of a complex one (the imaginary part exactly 0, even
    where the real part is inf or NaN)."""
    return _join(re, op.Expand(op.CastLike(_double(0.0), re), op.Shape(re)))


def _double(values: float | list[float]) -> ir.Value:
    """A float64 constant: CastLike rounds it once to the operand's precision (a float32
    constant would round pi and 0.1 for complex128 too)."""
    return op.Constant(value=ir.tensor(np.array(values, dtype=np.float64)))


def _const(value: float, like: ir.Value) -> ir.Value:
    return op.CastLike(_double(value), like)


def _operand(value: Any, like: ir.Value) -> ir.Value:
    """A complex operand in real-view form: Python numbers become ``[re, im]`` constants."""
    if isinstance(value, ir.Value):
        return value
    number = complex(value)
    return op.CastLike(_double([number.real, number.imag]), like)


def _mul(x: ir.Value, y: ir.Value) -> ir.Value:
    a, b, c, d = _re(x), _im(x), _re(y), _im(y)
    return _join(op.Sub(op.Mul(a, c), op.Mul(b, d)), op.Add(op.Mul(a, d), op.Mul(b, c)))


def _div(x: ir.Value, y: ir.Value) -> ir.Value:
    a, b, c, d = _re(x), _im(x), _re(y), _im(y)
    norm = op.Add(op.Mul(c, c), op.Mul(d, d))
    return _join(
        op.Div(op.Add(op.Mul(a, c), op.Mul(b, d)), norm), op.Div(op.Sub(op.Mul(b, c), op.Mul(a, d)), norm)
    )


def _times_i(z: ir.Value) -> ir.Value:
    return _join(op.Neg(_im(z)), _re(z))


def _signbit(x: ir.Value) -> ir.Value:
    """True for negative numbers and -0.0 (whose reciprocal is -inf), as ATen's branch cuts need."""
    return op.Or(op.Less(x, _const(0.0, x)), op.Less(op.Reciprocal(x), _const(0.0, x)))


def _atan2(y: ir.Value, x: ir.Value) -> ir.Value:
    """``atan2`` with C's quadrant, signed-zero and infinity rules (ONNX has no Atan2)."""
    pi = _const(math.pi, x)
    neg_x, neg_y = _signbit(x), _signbit(y)
    half_turn = op.Where(neg_y, op.Neg(pi), pi)
    # Atan(y/x) is right in the right half plane; the left half plane adds ±pi (x = ±0 and y ≠ 0
    # give y/x = ±inf, whose Atan is ±pi/2, corrected the same way).
    general = op.Add(op.Atan(op.Div(y, x)), op.Where(neg_x, half_turn, _const(0.0, x)))
    zero = op.Where(neg_y, _const(-0.0, x), _const(0.0, x))
    both_zero = op.And(op.Equal(x, _const(0.0, x)), op.Equal(y, _const(0.0, x)))
    on_axis = op.Where(neg_x, half_turn, zero)
    quarter = op.Where(neg_x, _const(3 * math.pi / 4, x), _const(math.pi / 4, x))
    both_inf = op.And(op.IsInf(x), op.IsInf(y))
    corner = op.Where(neg_y, op.Neg(quarter), quarter)
    return op.Where(both_inf, corner, op.Where(both_zero, on_axis, general))


def _hypot(a: ir.Value, b: ir.Value) -> ir.Value:
    return op.Sqrt(op.Add(op.Mul(a, a), op.Mul(b, b)))


def _exp(z: ir.Value) -> ir.Value:
    a, b = _re(z), _im(z)
    scale = op.Exp(a)
    return _join(op.Mul(scale, op.Cos(b)), op.Mul(scale, op.Sin(b)))


def _log(z: ir.Value) -> ir.Value:
    a, b = _re(z), _im(z)
    return _join(op.Log(_hypot(a, b)), _atan2(b, a))


def _sqrt(z: ir.Value) -> ir.Value:
    """Principal root without cancellation: t = sqrt((|a| + |z|) / 2) is the larger part and
    b / 2t the smaller; which is real depends on the sign of a, the sign of the imaginary part
    follows b (-0.0 included)."""
    a, b = _re(z), _im(z)
    zero = _const(0.0, a)
    t = op.Sqrt(op.Div(op.Add(op.Abs(a), _hypot(a, b)), _const(2.0, a)))
    small = op.Where(op.Equal(t, zero), zero, op.Div(op.Abs(b), op.Mul(_const(2.0, a), t)))
    big_real = op.Not(_signbit(a))
    re = op.Where(big_real, t, small)
    im_magnitude = op.Where(big_real, small, t)
    im = op.Where(_signbit(b), op.Neg(im_magnitude), im_magnitude)
    return _join(re, im)


def _reciprocal(z: ir.Value) -> ir.Value:
    return _div(_operand(1.0, z), z)


def _nonzero(z: ir.Value) -> ir.Value:
    """Where either part is nonzero: a complex number's truth value."""
    zero = _const(0.0, z)
    return op.Or(op.Not(op.Equal(_re(z), zero)), op.Not(op.Equal(_im(z), zero)))


def _in_dtype(z: ir.Value, dtype: Any) -> ir.Value:
    """``z`` converted to the complex ``dtype`` argument of a reduction (None: as it is)."""
    return z if dtype is None else op.Cast(z, to=_REAL_PART[ir.DataType(dtype)])


def _complex_rank(z: ir.Value) -> int:
    if z.shape is None:
        raise TranslationError(f"complex tensor {z.name} needs a known rank")
    return z.shape.rank() - 1


def _dim(dim: int, rank: int) -> int:
    """A dim of the complex tensor as an axis of its real view (negative dims skip the pair)."""
    return dim % rank if rank else 0


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


# -- identity, conversions, factories ------------------------------------------------------------


@register(
    "aten::alias", "aten::detach", "aten::lift_fresh_copy", "aten::alias_copy", "aten::detach_copy",
    "aten::clone", "aten::contiguous", complex=True,
)
def aten_identity_complex(self: ir.Value, *args: Any, **kwargs: Any) -> ir.Value:
    """alias(Tensor(a) self) -> Tensor(a) and other copies: the real view is the value"""
    return op.Identity(self)


@register(
    "aten::_assert_tensor_metadata", "aten::_assert_scalar", "aten::_assert_async", "aten::_assert_async.msg",
    complex=True,
)
def aten_assert_noop_complex(*args: Any, **kwargs: Any) -> None:
    """Runtime checks are dropped, as for real tensors: ONNX has no way to raise."""
    return None


@register(
    "aten::_to_copy", "prims::convert_element_type", "aten::to.dtype", "aten::to.dtype_layout",
    "aten::_to_copy.default", complex=True,
)
@wants_context
def aten_convert_complex(self: ir.Value, *args: Any, ctx: OpContext, **kwargs: Any) -> ir.Value:
    """_to_copy(Tensor self, *, ScalarType? dtype=None, ...) -> Tensor, between any dtypes where
    one side is complex: complex → complex casts both parts, complex → real keeps the real part
    (ATen warns and drops the imaginary one), complex → bool is z != 0, real → complex adds a
    zero imaginary part."""
    source, result = ctx.inputs[0], ctx.result
    target = onnx_dtype(result.real.dtype if result.is_complex() else result.dtype)
    if source.is_complex() and result.is_complex():
        return op.Cast(self, to=target)
    if source.is_complex():
        if result.dtype == torch.bool:
            return _nonzero(self)
        return op.Cast(_re(self), to=target)
    return _real_to_complex(op.Cast(self, to=target))


def _size_tensor(size: Sequence[Any]) -> ir.Value:
    parts = [op.Reshape(s, ints(1)) if isinstance(s, ir.Value) else ints(int(s)) for s in size]
    if not parts:
        return op.Constant(value_ints=[])
    return parts[0] if len(parts) == 1 else op.Concat(*parts, axis=0)


def _filled(value: Any, shape: ir.Value, real_dtype: ir.DataType) -> ir.Value:
    if isinstance(value, ir.Value):
        fill = _real_to_complex(op.Cast(value, to=real_dtype))
    else:
        number = complex(value)
        fill = op.Cast(_double([number.real, number.imag]), to=real_dtype)
    return op.Expand(fill, op.Concat(shape, ints(2), axis=0))


@register("aten::full", "aten::zeros", "aten::ones", "aten::new_full", "aten::new_zeros", "aten::new_ones", complex=True)
@wants_context
def aten_full_complex(*args: Any, ctx: OpContext, **kwargs: Any) -> ir.Value:
    """full(SymInt[] size, Scalar fill_value, *, ScalarType? dtype=None, ...) -> Tensor (and
    zeros/ones/new_*) with a complex dtype"""
    name, result = ctx.target, ctx.result
    new = "new_" in name
    size = args[1] if new else args[0]
    if "full" in name:
        fill = args[2] if new else args[1]
    else:
        fill = 0.0 if "zeros" in name else 1.0
    return _filled(fill, _size_tensor(size), onnx_dtype(result.real.dtype))


@register("aten::scalar_tensor", complex=True)
@wants_context
def aten_scalar_tensor_complex(s: Any, *args: Any, ctx: OpContext, **kwargs: Any) -> ir.Value:
    """scalar_tensor(Scalar s, *, ScalarType? dtype=None, ...) -> Tensor with a complex dtype: a
    0-d complex tensor, whose real form is [real, imaginary] (torchlib's gave a bare 0-d real)."""
    return _filled(s, op.Constant(value_ints=[]), onnx_dtype(ctx.result.real.dtype))


@register("aten::full_like", "aten::zeros_like", "aten::ones_like", "aten::fill.Scalar", "aten::fill.Tensor", complex=True)
@wants_context
def aten_full_like_complex(self: ir.Value, *args: Any, ctx: OpContext, **kwargs: Any) -> ir.Value:
    """full_like(Tensor self, Scalar fill_value, *, ScalarType? dtype=None, ...) -> Tensor (and
    zeros_like/ones_like/fill) with a complex result"""
    name = ctx.target
    if "zeros" in name:
        fill: Any = 0.0
    elif "ones" in name:
        fill = 1.0
    else:
        fill = args[0] if args else kwargs.get("fill_value", kwargs.get("value"))
    source = ctx.inputs[0]
    shape = op.Shape(self, end=-1) if source.is_complex() else op.Shape(self)
    if isinstance(fill, ir.Value) and ctx.inputs[1].is_complex():
        return op.Expand(op.CastLike(fill, self) if source.is_complex() else fill, op.Concat(shape, ints(2), axis=0))
    return _filled(fill, shape, onnx_dtype(ctx.result.real.dtype))


# -- layout --------------------------------------------------------------------------------------


@register("aten::unsqueeze", complex=True)
def aten_unsqueeze_complex(self: ir.Value, dim: int) -> ir.Value:
    """unsqueeze(Tensor(a) self, int dim) -> Tensor(a)"""
    rank = _complex_rank(self) + 1
    return op.Unsqueeze(self, ints(dim % rank))


@register("aten::select.int", complex=True)
def aten_select_complex(self: ir.Value, dim: int, index: Any) -> ir.Value:
    """select.int(Tensor(a) self, int dim, SymInt index) -> Tensor(a)"""
    index = op.Cast(index, to=ir.DataType.INT64) if isinstance(index, ir.Value) else int64(index)
    return op.Gather(self, index, axis=_dim(dim, _complex_rank(self)))


@register("aten::index_select", complex=True)
def aten_index_select_complex(self: ir.Value, dim: int, index: ir.Value) -> ir.Value:
    """index_select(Tensor self, int dim, Tensor index) -> Tensor"""
    rank = _complex_rank(self)
    if not rank:
        # A 0-d tensor has one element, at index 0 (ATen checks it): it is its own selection.
        return op.Identity(self)
    return op.Gather(self, op.Cast(op.Reshape(index, ints(-1)), to=ir.DataType.INT64), axis=_dim(dim, rank))


@register("aten::expand", "aten::expand_copy", complex=True)
def aten_expand_complex(self: ir.Value, size: Sequence[Any], *, implicit: bool = False) -> ir.Value:
    """expand(Tensor(a) self, SymInt[] size, *, bool implicit=False) -> Tensor(a)

    -1 keeps a dim; ONNX's Expand broadcasts both ways, so 1 says the same."""
    size = [1 if isinstance(s, int) and s == -1 else s for s in size]
    return op.Expand(self, op.Concat(_size_tensor(size), ints(2), axis=0))


@register("aten::squeeze", "aten::squeeze.default", complex=True)
def aten_squeeze_complex(self: ir.Value) -> ir.Value:
    """squeeze(Tensor(a) self) -> Tensor(a): every dim of size 1 but the trailing pair"""
    if self.shape is None or any(not isinstance(d, int) for d in list(self.shape)[:-1]):
        raise TranslationError("squeeze of a complex tensor needs static dims")
    axes = [i for i, d in enumerate(list(self.shape)[:-1]) if d == 1]
    return op.Squeeze(self, ints(*axes)) if axes else op.Identity(self)


@register("aten::split.Tensor", "aten::split_with_sizes", "aten::split", complex=True)
def aten_split_complex(self: ir.Value, split_size: Any, dim: int = 0) -> list[ir.Value]:
    """split.Tensor(Tensor(a -> *) self, SymInt split_size, int dim=0) -> Tensor(a)[] (and
    split_with_sizes)"""
    rank = _complex_rank(self)
    axis = _dim(dim, rank)
    if self.shape is None or not isinstance(self.shape[axis], int):
        raise TranslationError("split of a complex tensor needs a static size along the dim")
    length = self.shape[axis]
    if isinstance(split_size, int):
        sizes = [min(split_size, length - start) for start in range(0, length, split_size)] or [0]
    else:
        sizes = [int(s) for s in split_size]
    pieces, start = [], 0
    for size in sizes:
        pieces.append(op.Slice(self, ints(start), ints(start + size), ints(axis)))
        start += size
    return pieces


@register("aten::unbind.int", complex=True)
def aten_unbind_complex(self: ir.Value, dim: int = 0) -> list[ir.Value]:
    """unbind.int(Tensor(a -> *) self, int dim=0) -> Tensor(a)[]"""
    rank = _complex_rank(self)
    axis = _dim(dim, rank)
    if self.shape is None or not isinstance(self.shape[axis], int):
        raise TranslationError("unbind of a complex tensor needs a static size along the dim")
    return [op.Gather(self, int64(i), axis=axis) for i in range(self.shape[axis])]


@register("aten::copy", complex=True)
@wants_context
def aten_copy_complex(self: ir.Value, src: ir.Value, non_blocking: bool = False, *, ctx: OpContext) -> ir.Value:
    """copy(Tensor self, Tensor src, bool non_blocking=False) -> Tensor: src (made complex by the
    normalize stage) in self's precision and shape"""
    destination = ctx.inputs[0]
    if not destination.is_complex():
        raise TranslationError(f"copying a complex tensor into a {destination.dtype} one is not supported")
    return op.Expand(op.Cast(src, to=onnx_dtype(destination.real.dtype)), op.Shape(self))


@register("aten::repeat", complex=True)
def aten_repeat_complex(self: ir.Value, repeats: Sequence[Any]) -> ir.Value:
    """repeat(Tensor self, SymInt[] repeats) -> Tensor: the pair is repeated once"""
    rank = _complex_rank(self)
    extra = len(repeats) - rank
    value = op.Unsqueeze(self, ints(*range(extra))) if extra > 0 else self
    return op.Tile(value, op.Concat(_size_tensor(repeats), ints(1), axis=0))


@register("aten::sym_size.int", complex=True)
def aten_sym_size_complex(self: ir.Value, dim: int) -> ir.Value:
    """sym_size.int(Tensor self, int dim) -> SymInt of a complex tensor (not of its pair)"""
    axis = _dim(dim, _complex_rank(self))
    return op.Squeeze(op.Shape(self, start=axis, end=axis + 1))


@register("aten::sym_numel", complex=True)
def aten_sym_numel_complex(self: ir.Value) -> ir.Value:
    """sym_numel(Tensor self) -> SymInt: half the real view's element count"""
    return op.Div(op.Size(self), int64(2))


# -- reductions and selections -------------------------------------------------------------------


@register("aten::abs", complex=True)
def aten_abs_complex(self: ir.Value) -> ir.Value:
    """abs(Tensor self) -> Tensor: hypot(a, b) scaled by the larger part, so that parts past the
    square root of the dtype's largest value do not overflow (torchlib's sqrt(a² + b²) does)"""
    a, b = op.Abs(_re(self)), op.Abs(_im(self))
    big = op.Max(a, b)
    small = op.Min(a, b)
    zero = _const(0.0, a)
    ratio = op.Where(op.Equal(big, zero), zero, op.Div(small, big))
    magnitude = op.Mul(big, op.Sqrt(op.Add(_const(1.0, a), op.Mul(ratio, ratio))))
    # inf beats NaN in hypot; the ratio inf/inf is NaN, so infinities are settled apart.
    return op.Where(op.Or(op.IsInf(a), op.IsInf(b)), _const(float("inf"), a), magnitude)


@register("aten::cumsum", complex=True)
def aten_cumsum_complex(self: ir.Value, dim: int, *, dtype: Any = None) -> ir.Value:
    """cumsum(Tensor self, int dim, *, ScalarType? dtype=None) -> Tensor: both parts add up"""
    self = _in_dtype(self, dtype)
    return op.CumSum(self, int64(_dim(dim, _complex_rank(self))))


@register("aten::nonzero", complex=True)
def aten_nonzero_complex(self: ir.Value) -> ir.Value:
    """nonzero(Tensor self) -> Tensor: where either part is nonzero"""
    present = _nonzero(self)
    if _complex_rank(self) == 0:
        present = op.Reshape(present, ints(1))
        return op.Transpose(op.Slice(op.NonZero(present), ints(0), ints(0), ints(0)), perm=[1, 0])
    return op.Transpose(op.NonZero(present), perm=[1, 0])


def _torchlib(name: str, *, complex: bool = False) -> Any:
    """torchlib's translation of ``name`` (its complex overload with ``complex``)."""
    from onnxscript.function_libs.torch_lib import registration

    entry = registration.default_registry[name]
    return (entry.complex if complex else entry.overloads)[0]


@register("aten::index.Tensor", "aten::_unsafe_index.Tensor", complex=True)
def aten_index_complex(self: ir.Value, indices: Sequence[Any]) -> ir.Value:
    """index.Tensor(Tensor self, Tensor?[] indices) -> Tensor

    The indices address leading dims only, so the trailing pair is carried along as any other
    trailing dim is: torchlib's real translation computes it unchanged."""
    return _torchlib("aten::index.Tensor")(self, indices)


@register("aten::index_put", "aten::_unsafe_index_put", complex=True)
def aten_index_put_complex(self: ir.Value, indices: Sequence[Any], values: ir.Value, accumulate: bool = False) -> ir.Value:
    """index_put(Tensor self, Tensor?[] indices, Tensor values, bool accumulate=False) -> Tensor

    As index.Tensor: the pair is one more trailing dim, for the values too (the normalize stage
    has made them complex)."""
    return _torchlib("aten::index_put")(self, indices, values, accumulate)


def _reduced_axes(dim: Any, rank: int) -> list[int]:
    """The real view's axes an ATen ``dim`` argument reduces (all for None or []), never the
    trailing pair: a reduction over "all axes" of the real view would combine the real and
    imaginary parts (torchlib's does, for 0-d complex tensors)."""
    if not rank:
        return []
    dims = list(range(rank)) if dim is None or (isinstance(dim, (list, tuple)) and not dim) else ([dim] if isinstance(dim, int) else list(dim))
    return sorted({_dim(d, rank) for d in dims})


def _complex_reduction(reduce: str, self: ir.Value, dim: Any, keepdim: bool, dtype: Any) -> ir.Value:
    rank = _complex_rank(self)
    self = _in_dtype(self, dtype)
    axes = _reduced_axes(dim, rank)
    if not axes:
        return op.Identity(self)
    return getattr(op, reduce)(self, ints(*axes), keepdims=int(keepdim))


@register("aten::mm", "aten::bmm", complex=True)
def aten_mm_complex(self: ir.Value, mat2: ir.Value) -> ir.Value:
    """mm(Tensor self, Tensor mat2) -> Tensor (and bmm) of complex matrices: four real products,
    (a + bi)(c + di) = (ac - bd) + (ad + bc)i, each summed over the inner dim by MatMul"""
    a, b, c, d = _re(self), _im(self), _re(mat2), _im(mat2)
    real = op.Sub(op.MatMul(a, c), op.MatMul(b, d))
    imag = op.Add(op.MatMul(a, d), op.MatMul(b, c))
    return _join(real, imag)


_SPREADS = (
    "aten::var", "aten::var.dim", "aten::var.correction", "aten::std", "aten::std.dim", "aten::std.correction",
    "aten::var_mean", "aten::var_mean.dim", "aten::var_mean.correction",
    "aten::std_mean", "aten::std_mean.dim", "aten::std_mean.correction",
)


@register(*_SPREADS, complex=True)
@wants_context
def aten_var_complex(self: ir.Value, *args: Any, ctx: OpContext, **kwargs: Any) -> Any:
    """var/std(Tensor self, int[1]? dim, *, Scalar? correction, bool keepdim) -> Tensor (and the
    unbiased= forms, and var_mean/std_mean) of complex tensors: the mean of |z - mean(z)|² over the
    dims, divided by max(N - correction, 0); a real result (the means of *_mean are complex)."""
    values = ctx.arguments((self, *args), kwargs)
    dim, keepdim = values.get("dim"), bool(values.get("keepdim", False))
    correction = values.get("correction")
    if correction is None:
        correction = 1 if values.get("unbiased", True) else 0
    axes = _reduced_axes(dim, _complex_rank(self))
    mean = op.ReduceMean(self, ints(*axes), keepdims=1) if axes else self
    spread = op.Sub(self, mean)
    squares = op.ReduceSum(op.Mul(spread, spread), ints(-1), keepdims=0)
    total = op.ReduceSum(squares, ints(*axes), keepdims=int(keepdim)) if axes else squares
    if axes:
        count = op.ReduceProd(op.Gather(op.Shape(squares), ints(*axes)), keepdims=0)
    else:
        count = op.Constant(value=ir.tensor(1, dtype=ir.DataType.INT64))
    divisor = op.Max(op.Sub(op.CastLike(count, total), _const(float(correction), total)), _const(0.0, total))
    result = op.Div(total, divisor)
    name = ctx.target
    if "std" in name:
        result = op.Sqrt(result)
    if name.split(".")[0].endswith("_mean"):
        return result, mean if keepdim or not axes else op.Squeeze(mean, ints(*axes))
    return result


@register("aten::sum", "aten::sum.dim_IntList", complex=True)
def aten_sum_complex(self: ir.Value, dim: Any = None, keepdim: bool = False, *, dtype: Any = None) -> ir.Value:
    """sum.dim_IntList(Tensor self, int[1]? dim, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor"""
    return _complex_reduction("ReduceSum", self, dim, keepdim, dtype)


@register("aten::mean", "aten::mean.dim", complex=True)
def aten_mean_complex(self: ir.Value, dim: Any = None, keepdim: bool = False, *, dtype: Any = None) -> ir.Value:
    """mean.dim(Tensor self, int[1]? dim, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor
    (a 0-d complex tensor is its own mean; torchlib averaged its real and imaginary parts)"""
    return _complex_reduction("ReduceMean", self, dim, keepdim, dtype)
