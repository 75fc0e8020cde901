"""Element-wise arithmetic, comparisons and the float functions every model uses.

These are the nodes of nearly every graph (a Llama's adds, products, rsqrt and silu; a BERT's
comparisons and tanh). torchlib translates them too, but loading torchlib costs a process ~0.4 s
(``ops/deferred_torchlib.py``): with these, a transformer's graph needs none of its functions.
Each computes what ATen computes for the nodes its ``supports=`` accepts, and leaves the others
(other dtypes, forms ATen promotes differently) to the later translations of the same target.

Type promotion is done before translation (``normalize/promotion.py``): the tensors of a node
arrive in its computation dtype, and a Python number beside them is made a constant of that
dtype by the tracer, as ONNX's type constraints bind it to the tensor's.
"""

from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np
import onnx_ir as ir
import torch
from onnxscript import opset18 as op

from torch_onnx_fx.dtypes import FLOAT_TYPES
from torch_onnx_fx.registry import arg_example, arg_value, register

__all__ = [
    "aten_add", "aten_sub", "aten_number_sub_scaled_float32", "aten_mul", "aten_neg", "aten_silu", "aten_pow_float_scalar", "aten_eq", "aten_ne",
    "aten_relu", "aten_abs", "aten_log", "aten_div", "aten_where", "aten_bitwise_not", "aten_clamp", "aten_clamp_min",
    "aten_clamp_max", "aten_hardtanh", "aten_softplus", "aten_addcmul", "aten_addcdiv",
]

# Neg has no unsigned kernels in ONNX: uint8 negation (which wraps in ATen) is left to the others.
_SIGNED_TYPES = (*FLOAT_TYPES, torch.int8, torch.int16, torch.int32, torch.int64)


def _self_dtype_in(*dtypes: torch.dtype) -> Any:
    """A ``supports=`` predicate: ``self`` is a real tensor of one of ``dtypes``, and so is
    ``other`` when it is a tensor (promotion made them one dtype)."""

    def accepts(node: torch.fx.Node) -> bool:
        example = arg_example(node)
        if not isinstance(example, torch.Tensor) or example.dtype not in dtypes:
            return False
        other = arg_example(node, 1)
        return not isinstance(other, torch.Tensor) or other.dtype == example.dtype

    return accepts


def _same_dtype_in_and_out(*dtypes: torch.dtype) -> Any:
    """``self`` of one of ``dtypes``, ``other`` (if a tensor) and the result of the same dtype."""
    operands = _self_dtype_in(*dtypes)

    def accepts(node: torch.fx.Node) -> bool:
        result = node.meta.get("val")
        return operands(node) and isinstance(result, torch.Tensor) and result.dtype == arg_example(node).dtype

    return accepts


# A float input with a result of its own dtype (integers are promoted to a float result).
_FLOAT_TO_FLOAT = _same_dtype_in_and_out(*FLOAT_TYPES)


def _scaled(other: Any, alpha: Any, like: ir.Value) -> Any:
    if alpha == 1:
        return other
    number = isinstance(alpha, (int, float)) and not isinstance(alpha, bool)
    if isinstance(other, (int, float)) and not isinstance(other, bool):
        if number and isinstance(other, int) and isinstance(alpha, int) and like.dtype is not None and not like.dtype.is_floating_point():
            # Integers: the product wraps into the tensor's type as ATen's conversions and
            # product do (3 * -1 for uint8 is 253; a constant of -1 could not be made).
            product = (other * alpha + 2**63) % 2**64 - 2**63
            return op.Constant(value=ir.tensor(np.array(product, dtype=np.int64).astype(like.dtype.numpy())))
        # A Python number as other: ATen takes both numbers to the tensor's computation type and
        # multiplies them there (two float32 constants made an invalid Add for a float64 or int32
        # tensor: add(x, 0.3, alpha=2)).
        return op.Mul(op.CastLike(other, like), alpha if number else op.CastLike(alpha, like))
    if number and isinstance(other, ir.Value) and other.dtype is not None and other.dtype.is_floating_point():
        # The tracer makes the number a constant of other's dtype from the Python number itself;
        # CastLike of a number cast a float32 constant: a float64 tensor scaled by 0.10000000149.
        return op.Mul(other, alpha)
    # An integer alpha is cast to the tensor's type, wrapping as ATen's conversion does (-3 is 253
    # for uint8); so is a size (an int64 or double value in the graph).
    return op.Mul(other, op.CastLike(alpha, other))


def _fused_float32(self: ir.Value, other: Any, alpha: Any) -> bool:
    """float32 ``self + alpha * other`` with a number alpha (not 1) and a float32 or number other."""
    if self.dtype != ir.DataType.FLOAT or alpha == 1 or not isinstance(alpha, (int, float)) or isinstance(alpha, bool):
        return False
    if isinstance(other, ir.Value):
        return other.dtype == ir.DataType.FLOAT
    return isinstance(other, (int, float)) and not isinstance(other, bool)


def _fused_in_double(first: Any, other: Any, factor: float) -> ir.Value:
    """float32 ``first + factor * other`` rounded once, as ATen's fused multiply-add: in float64
    the product of two float32 numbers is exact and the sum rounds once more before float32
    (two float32 roundings put 771 of 3,000 results of add(x, y, alpha=0.3) an ulp or more
    off). Either operand may be a Python number, taken as ATen takes it, as a float32."""

    def wide(value: Any) -> Any:
        return op.Cast(value, to=ir.DataType.DOUBLE) if isinstance(value, ir.Value) else float(np.float32(value))

    term = op.Mul(wide(other), factor) if isinstance(other, ir.Value) else wide(other) * factor
    return op.Cast(op.Add(wide(first), term), to=ir.DataType.FLOAT)


def _sum_scaled(self: ir.Value, other: Any, alpha: Any, sign: int) -> ir.Value:
    """``self + sign * alpha * other`` as ATen's kernels compute it."""
    if _fused_float32(self, other, alpha):
        return _fused_in_double(self, other, float(np.float32(alpha)) * sign)
    scaled = _scaled(other, alpha, self)
    return op.Add(self, scaled) if sign > 0 else op.Sub(self, scaled)


_ARITHMETIC = _self_dtype_in(*_SIGNED_TYPES, torch.uint8, torch.bool)


@register("aten::add.Tensor", supports=_ARITHMETIC)
def aten_add(self: ir.Value, other: Any, alpha: Any = 1) -> ir.Value:
    """add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor

    Booleans add as a logical or (ATen's bool sum saturates at True); ``alpha`` scales
    ``other`` first, and a zero ``alpha`` leaves ``self``."""
    if self.dtype == ir.DataType.BOOL:
        return op.Identity(self) if not alpha else op.Or(self, other)
    return _sum_scaled(self, other, alpha, 1)


@register("aten::sub.Tensor", supports=_self_dtype_in(*_SIGNED_TYPES, torch.uint8))
def aten_sub(self: ir.Value, other: Any, alpha: Any = 1) -> ir.Value:
    """sub.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor"""
    return _sum_scaled(self, other, alpha, -1)


def _number_minus_scaled_float32(node: torch.fx.Node) -> bool:
    """``number - alpha * tensor`` (rsub with an alpha, as normalize leaves it) of float32."""
    number, other, alpha = node.args[0], arg_example(node, 1), node.kwargs.get("alpha", 1)
    return (
        isinstance(number, (int, float)) and not isinstance(number, bool) and isinstance(other, torch.Tensor)
        and other.dtype == torch.float32 and isinstance(alpha, (int, float)) and not isinstance(alpha, bool) and alpha != 1
    )


@register("aten::sub.Tensor", supports=_number_minus_scaled_float32)
def aten_number_sub_scaled_float32(self: Any, other: ir.Value, alpha: Any = 1) -> ir.Value:
    """sub.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor with a number ``self``:
    ATen's fused number - alpha * other, rounded once (torchlib's two roundings put 876 of 3,000
    results of rsub(x, 0.3, alpha=0.7) an ulp or more off)."""
    return _fused_in_double(self, other, -float(np.float32(alpha)))


@register("aten::mul.Tensor", "aten::multiply.Tensor", supports=_ARITHMETIC)
def aten_mul(self: ir.Value, other: Any) -> ir.Value:
    """mul.Tensor(Tensor self, Tensor other) -> Tensor; booleans multiply as a logical and."""
    if self.dtype == ir.DataType.BOOL:
        return op.And(self, other)
    return op.Mul(self, other)


@register("aten::neg", supports=_self_dtype_in(*_SIGNED_TYPES))
def aten_neg(self: ir.Value) -> ir.Value:
    """neg(Tensor self) -> Tensor"""
    return op.Neg(self)


_FLOAT_FUNCTIONS = {
    "aten::cos": lambda x: op.Cos(x),
    "aten::sin": lambda x: op.Sin(x),
    "aten::tanh": lambda x: op.Tanh(x),
    "aten::sigmoid": lambda x: _sigmoid(x),
    # ATen's rsqrt is 1 / sqrt(x) in the input's dtype: Reciprocal(Sqrt) rounds as it does.
    "aten::rsqrt": lambda x: op.Reciprocal(op.Sqrt(x)),
    # Their constants are the tracer's constants of x's dtype made from Python's doubles: torchlib
    # made them float32 and cast them, which cost float64 results seven digits (deg2rad 2.7e-9
    # off, log2(0.5) -0.99999999725, sinc(1) -2.8e-8 for 3.9e-17).
    "aten::log2": lambda x: op.Div(op.Log(x), math.log(2.0)),
    "aten::log10": lambda x: op.Div(op.Log(x), math.log(10.0)),
    "aten::deg2rad": lambda x: op.Mul(x, math.pi / 180.0),
    "aten::rad2deg": lambda x: op.Mul(x, 180.0 / math.pi),
    "aten::sinc": lambda x: _sinc(x),
    # One ONNX operator each, as torchlib writes them: here so that graphs with them load no
    # torchlib. float64 erf comes earlier (ops/special/error.py: ONNX Runtime has no kernel).
    "aten::exp": lambda x: op.Exp(x),
    "aten::sqrt": lambda x: op.Sqrt(x),
    "aten::reciprocal": lambda x: op.Reciprocal(x),
    "aten::erf": lambda x: op.Erf(x),
}


def _one_plus_exp_of_minus(x: ir.Value) -> ir.Value:
    """1 + exp(-x): the denominator of ATen's sigmoid and silu."""
    return op.Add(op.Exp(op.Neg(x)), 1.0)


def _sigmoid(x: ir.Value) -> ir.Value:
    """ATen's own 1 / (1 + exp(-x)). ONNX Runtime's Sigmoid is accurate to about 3e-8 absolutely,
    not relatively: float32 sigmoid(-16) came out 5.96e-8 for 1.13e-7 and everything below -19 as 0
    (eager: 2.1e-9 at -20, 9.4e-14 at -30), so log(sigmoid(x)) went to -inf; float64 was 3.6e-8
    off relatively at -20. Half precision computes in float32 and rounds once (the
    half-precision pass), as ATen does."""
    return op.Reciprocal(_one_plus_exp_of_minus(x))


def _sinc(x: ir.Value) -> ir.Value:
    """ATen's normalized sinc: 1 at 0, else sin(pi x) / (pi x) with pi of x's dtype."""
    product = op.Mul(x, math.pi)
    return op.Where(op.Equal(x, 0.0), 1.0, op.Div(op.Sin(product), product))


def _float_function(name: str) -> Any:
    function = _FLOAT_FUNCTIONS[name]

    def translation(self: ir.Value) -> ir.Value:
        return function(self)

    translation.__name__ = f"aten_{name.removeprefix('aten::')}"
    translation.__doc__ = f"{name.removeprefix('aten::')}(Tensor self) -> Tensor of floats"
    return translation


for _name in _FLOAT_FUNCTIONS:
    register(_name, supports=_FLOAT_TO_FLOAT)(_float_function(_name))


@register("aten::silu", supports=_FLOAT_TO_FLOAT)
def aten_silu(self: ir.Value) -> ir.Value:
    """silu(Tensor self) -> Tensor; ATen's x / (1 + exp(-x)): x * Sigmoid(x) inherits Sigmoid's
    absolute error (silu(-17.8) came out -1.06e-6 for -3.3e-7; see ``_sigmoid``). Measured on a
    56 M-parameter Llama's prefill: 0.4 % slower at one thread, 1.2 % at two."""
    return op.Div(self, _one_plus_exp_of_minus(self))


def _float_power(node: torch.fx.Node) -> bool:
    exponent = arg_value(node, 1, "exponent")
    return _FLOAT_TO_FLOAT(node) and isinstance(exponent, (int, float)) and not isinstance(exponent, bool)


# ATen's CPU kernel computes these exponents with other functions than pow (float32, float64 and,
# for the first three, bfloat16): C's pow(-inf, 0.5) is inf where sqrt gives NaN, and 1 / (x * x)
# rounds twice where pow(x, -2) rounds once.
_ROOTS = {0.5: lambda x: op.Sqrt(x), -0.5: lambda x: op.Reciprocal(op.Sqrt(x)), -1.0: lambda x: op.Reciprocal(x)}
# (x ** 2 and x ** 3 stay Pow: ONNX Runtime computes them as x * x and x * x * x already, and the
# fusion rules of RMS norms look for Pow.)
_PRODUCTS = {-2.0: lambda x: op.Reciprocal(op.Mul(x, x))}


def _softplus_fits(node: Any) -> bool:
    """float32 and float64 (half precision is computed wider by ATen: left to the others), with
    numbers for beta and threshold."""
    beta, threshold = arg_value(node, 1, "beta", 1.0), arg_value(node, 2, "threshold", 20.0)
    numbers = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (beta, threshold))
    return _same_dtype_in_and_out(torch.float32, torch.float64)(node) and numbers and beta != 0


@register("aten::softplus", supports=_softplus_fits)
def aten_softplus(self: ir.Value, beta: float = 1.0, threshold: float = 20.0) -> ir.Value:
    """softplus(Tensor self, Scalar beta=1, Scalar threshold=20) -> Tensor: x where beta x passes
    the threshold, else log(1 + exp(beta x)) / beta (ONNX Runtime's Softplus is as close to it as
    ATen's log1p form, measured from -100 to 30); a beta of 1 multiplies and divides by nothing."""
    scaled = self if beta == 1 else op.Mul(self, float(beta))
    smooth = op.Softplus(scaled) if beta == 1 else op.Div(op.Softplus(scaled), float(beta))
    return op.Where(op.Greater(scaled, float(threshold)), self, smooth)


@register("aten::pow.Tensor_Scalar", supports=_float_power)
def aten_pow_float_scalar(self: ir.Value, exponent: float) -> ir.Value:
    """pow.Tensor_Scalar(Tensor self, Scalar exponent) -> Tensor of floats: the exponent in the
    input's dtype, as ATen casts it, and ATen's own forms of the exponents it special-cases."""
    if exponent in _ROOTS and (self.dtype in (ir.DataType.FLOAT, ir.DataType.DOUBLE) or (self.dtype == ir.DataType.BFLOAT16 and exponent != -0.5)):
        # (bfloat16's 1 / sqrt is rounded once by ATen; as two bfloat16 nodes it would round twice.)
        return _ROOTS[exponent](self)
    if self.dtype in (ir.DataType.FLOAT, ir.DataType.DOUBLE) and exponent in _PRODUCTS:
        return _PRODUCTS[exponent](self)
    return op.Pow(self, ir.tensor(exponent, dtype=self.dtype))


def _comparable(allow_bool: bool) -> Any:
    """Comparison nodes whose operands are one real dtype: two tensors (promoted alike), or a
    tensor and a number ATen compares in the tensor's dtype (an integral number, or any number
    beside floats: a float beside an integer tensor compares in float, left to the others)."""

    def accepts(node: torch.fx.Node) -> bool:
        example, other = arg_example(node), arg_value(node, 1, "other")
        allowed = (*_SIGNED_TYPES, torch.uint8) + ((torch.bool,) if allow_bool else ())
        if not isinstance(example, torch.Tensor) or example.dtype not in allowed:
            return False
        if isinstance(other, torch.Tensor):
            return other.dtype == example.dtype
        if isinstance(other, bool):
            return example.dtype == torch.bool
        if isinstance(other, int):
            return example.dtype != torch.bool
        return isinstance(other, float) and example.dtype in FLOAT_TYPES

    return accepts


@register("aten::eq.Tensor", "aten::eq.Scalar", supports=_comparable(allow_bool=True))
def aten_eq(self: ir.Value, other: Any) -> ir.Value:
    """eq.Tensor(Tensor self, Tensor other) -> Tensor"""
    return op.Equal(self, other)


@register("aten::ne.Tensor", "aten::ne.Scalar", supports=_comparable(allow_bool=True))
def aten_ne(self: ir.Value, other: Any) -> ir.Value:
    """ne.Tensor(Tensor self, Tensor other) -> Tensor"""
    return op.Not(op.Equal(self, other))


_ORDERINGS = {"le": op.LessOrEqual, "ge": op.GreaterOrEqual, "lt": op.Less, "gt": op.Greater}


def _ordering(kind: str) -> Any:
    compare = _ORDERINGS[kind]

    def translation(self: ir.Value, other: Any) -> ir.Value:
        return compare(self, other)

    translation.__name__ = f"aten_{kind}"
    translation.__doc__ = f"{kind}.Tensor(Tensor self, Tensor other) -> Tensor of numbers (not bools)"
    return translation


for _kind in _ORDERINGS:
    register(f"aten::{_kind}.Tensor", f"aten::{_kind}.Scalar", supports=_comparable(allow_bool=False))(_ordering(_kind))


@register("aten::relu", supports=_FLOAT_TO_FLOAT)
def aten_relu(self: ir.Value) -> ir.Value:
    """relu(Tensor self) -> Tensor of floats"""
    return op.Relu(self)


@register("aten::abs", supports=_same_dtype_in_and_out(*_SIGNED_TYPES))
def aten_abs(self: ir.Value) -> ir.Value:
    """abs(Tensor self) -> Tensor (the most negative integer stays itself, as in ATen)"""
    return op.Abs(self)


@register("aten::log", supports=_FLOAT_TO_FLOAT)
def aten_log(self: ir.Value) -> ir.Value:
    """log(Tensor self) -> Tensor of floats"""
    return op.Log(self)


@register("aten::div.Tensor", supports=_FLOAT_TO_FLOAT)
def aten_div(self: ir.Value, other: Any) -> ir.Value:
    """div.Tensor(Tensor self, Tensor other) -> Tensor of floats (integers divide in a promoted
    float dtype, or with a rounding mode: ops/arithmetic.py)"""
    return op.Div(self, other)


def _where_of_one_dtype(node: torch.fx.Node) -> bool:
    """A selection between values of the result's real dtype (tensors promoted alike, or numbers
    the result's dtype holds as ATen converts them)."""
    result = node.meta.get("val")
    if not isinstance(result, torch.Tensor) or result.is_complex():
        return False
    # Two numbers would make constants of Python's own types before the result's cast.
    if not any(isinstance(arg_value(node, i, n), torch.Tensor) for i, n in ((1, "self"), (2, "other"))):
        return False
    for index, name in ((1, "self"), (2, "other")):
        value = arg_value(node, index, name)
        if isinstance(value, torch.Tensor):
            if value.dtype != result.dtype:
                return False
        elif isinstance(value, bool) or not isinstance(value, (int, float)):
            return False
        elif isinstance(value, float) and not result.dtype.is_floating_point:
            return False
    return True


@register("aten::where.self", "aten::where.ScalarOther", "aten::where.ScalarSelf", "aten::where.Scalar", supports=_where_of_one_dtype)
def aten_where(condition: ir.Value, self: Any, other: Any) -> ir.Value:
    """where.self(Tensor condition, Tensor self, Tensor other) -> Tensor (and its Scalar forms)"""
    return op.Where(condition, self, other)


def _pointwise_of_floats(node: torch.fx.Node) -> bool:
    """addcmul/addcdiv of float32 or float64 tensors (half ones compute in float32 by then) with a
    number as ``value``."""
    result = node.meta.get("val")
    if not isinstance(result, torch.Tensor) or result.dtype not in (torch.float32, torch.float64):
        return False
    examples = [arg_example(node, i) for i in range(3)]
    value = arg_value(node, 3, "value", 1)
    return all(isinstance(e, torch.Tensor) and e.dtype == result.dtype for e in examples) and (
        isinstance(value, (int, float)) and not isinstance(value, bool)
    )


# torchlib's translations take ``value`` as a float attribute (a float64 tensor was scaled by
# 0.10000000149 for 0.1) and addcdiv divides before scaling; these follow ATen's CPU kernels.
@register("aten::addcmul", supports=_pointwise_of_floats)
def aten_addcmul(self: ir.Value, tensor1: ir.Value, tensor2: ir.Value, value: float = 1.0) -> ir.Value:
    """addcmul(Tensor self, Tensor tensor1, Tensor tensor2, *, Scalar value=1) -> Tensor

    ATen rounds value * tensor1, then multiplies by tensor2 and adds self in one fused
    multiply-add (rounded once: 874 of 3,000 float32 results differed from two roundings). ONNX
    has no fused multiply-add: a float32 one is computed in float64, where the product of two
    float32 numbers is exact; float64 keeps the two roundings (an ulp in some results)."""
    scaled = op.Mul(tensor1, value)
    if self.dtype != ir.DataType.FLOAT:
        return op.Add(op.Mul(scaled, tensor2), self)
    wide = op.Add(op.Mul(op.Cast(scaled, to=ir.DataType.DOUBLE), op.Cast(tensor2, to=ir.DataType.DOUBLE)), op.Cast(self, to=ir.DataType.DOUBLE))
    return op.Cast(wide, to=ir.DataType.FLOAT)


@register("aten::addcdiv", supports=_pointwise_of_floats)
def aten_addcdiv(self: ir.Value, tensor1: ir.Value, tensor2: ir.Value, value: float = 1.0) -> ir.Value:
    """addcdiv(Tensor self, Tensor tensor1, Tensor tensor2, *, Scalar value=1) -> Tensor"""
    return op.Add(self, op.Div(op.Mul(tensor1, value), tensor2))


@register("aten::bitwise_not", supports=_same_dtype_in_and_out(*_SIGNED_TYPES[4:], torch.uint8, torch.bool))
def aten_bitwise_not(self: ir.Value) -> ir.Value:
    """bitwise_not(Tensor self) -> Tensor of integers or bools (a logical not)"""
    if self.dtype == ir.DataType.BOOL:
        return op.Not(self)
    return op.BitwiseNot(self)


def _clamped_in_own_dtype(*bounds: tuple[int, str, Any], floating_only: bool = False) -> Callable[[torch.fx.Node], bool]:
    """A clamp of a real tensor in its own dtype between numbers, the bounds read at these
    (position, name, default) places: an integer tensor's bounds are integers in its range (ATen
    refuses others), and no bound is NaN."""

    def accepts(node: torch.fx.Node) -> bool:
        example, result = arg_example(node), node.meta.get("val")
        if not isinstance(example, torch.Tensor) or example.dtype not in (*_SIGNED_TYPES, torch.uint8):
            return False
        if not isinstance(result, torch.Tensor) or result.dtype != example.dtype:
            return False
        values = [v for v in (arg_value(node, i, name, default) for i, name, default in bounds) if v is not None]
        if not values or any(isinstance(b, bool) or not isinstance(b, (int, float)) or math.isnan(b) for b in values):
            return False
        if example.dtype.is_floating_point:
            return True
        if floating_only:
            return False
        limits = torch.iinfo(example.dtype)
        return all(isinstance(b, int) and limits.min <= b <= limits.max for b in values)

    return accepts


@register("aten::clamp", supports=_clamped_in_own_dtype((1, "min", None), (2, "max", None)))
def aten_clamp(self: ir.Value, min: Any = None, max: Any = None) -> ir.Value:
    """clamp(Tensor self, Scalar? min=None, Scalar? max=None) -> Tensor

    Clip is ``min(max(self, min), max)``, ATen's order: ``min > max`` gives ``max`` everywhere.
    A bound rounded to ``self``'s dtype clamps as the exact one does, since rounding is monotone
    and ``self``'s values are of that dtype (the tracer makes each number a constant of it,
    from the Python number itself). A one-sided float Clip becomes Max or Min later
    (``runtime/one_sided_clip``), which keeps infinities."""
    return op.Clip(self, min, max)


# torchlib's clamp_min, clamp_max and hardtanh take their bounds as float attributes: a float64
# tensor was clamped at 0.10000000149 for 0.1.
@register("aten::clamp_min", supports=_clamped_in_own_dtype((1, "min", None)))
def aten_clamp_min(self: ir.Value, min: Any) -> ir.Value:
    """clamp_min(Tensor self, Scalar min) -> Tensor"""
    return op.Clip(self, min, None)


@register("aten::clamp_max", supports=_clamped_in_own_dtype((1, "max", None)))
def aten_clamp_max(self: ir.Value, max: Any) -> ir.Value:
    """clamp_max(Tensor self, Scalar max) -> Tensor"""
    return op.Clip(self, None, max)


@register("aten::hardtanh", supports=_clamped_in_own_dtype((1, "min_val", -1.0), (2, "max_val", 1.0), floating_only=True))
def aten_hardtanh(self: ir.Value, min_val: float = -1.0, max_val: float = 1.0) -> ir.Value:
    """hardtanh(Tensor self, Scalar min_val=-1, Scalar max_val=1) -> Tensor"""
    return op.Clip(self, min_val, max_val)
