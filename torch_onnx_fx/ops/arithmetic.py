"""Exact arithmetic: division with a rounding mode, and integer powers.

torchlib divides integers with a rounding mode through float32 (``Floor(Div(Cast(a), Cast(b)))``),
which is wrong above 2^24 (16777217 // 1 = 16777216). ONNX's integer ``Div`` truncates toward
zero, as C does, so truncation is one ``Div`` and flooring corrects it by one where the remainder
is nonzero and the signs differ: exact over the whole range of every integer type.

Floats are floor-divided by torchlib as ``Floor(Div(a, b))``, which rounds the quotient first:
``0.7 // 0.1`` was 7 in float32 where ATen gives 6, ``inf // 2`` inf where ATen gives NaN (2 to
68 of 2,011 random values wrong by one, float32 to float16). ATen divides ``a - fmod(a, b)``, whose
quotient is an integer up to rounding, and corrects it; each step here is the same IEEE operation.
"""

from __future__ import annotations

from typing import Any

import onnx_ir as ir
import torch
from onnxscript import opset18 as op

from torch_onnx_fx.dtypes import FLOAT_TYPES, onnx_dtype
from torch_onnx_fx.registry import arg_example, floating_input, half_result, integral_input, limit_torchlib, register, wants_context
from torch_onnx_fx.translate.op_context import OpContext

__all__ = ["aten_div_mode_integer", "aten_floor_divide_integer", "aten_floor_divide_float", "aten_div_trunc_half_by_number", "aten_isnan_exact", "aten_isfinite_exact", "aten_any", "aten_all", "aten_any_complex", "aten_all_complex", "aten_round_integer", "aten_pow_integer", "aten_isinf_float"]


def _integer_result(node: torch.fx.Node) -> bool:
    result = node.meta.get("val")
    return isinstance(result, torch.Tensor) and not result.dtype.is_floating_point and not result.is_complex() and result.dtype != torch.bool


def _integer_rounding_division(node: torch.fx.Node) -> bool:
    return _integer_result(node) and node.kwargs.get("rounding_mode") in ("trunc", "floor")


@register(
    "aten::div.Tensor_mode", "aten::div.Scalar_mode", "aten::divide.Tensor_mode", "aten::divide.Scalar_mode",
    supports=_integer_rounding_division,
)
def aten_div_mode_integer(self: ir.Value, other: Any, *, rounding_mode: str) -> ir.Value:
    """div.Tensor_mode(Tensor self, Tensor other, *, str? rounding_mode) -> Tensor, integers"""
    divisor = other if isinstance(other, ir.Value) else op.CastLike(op.Constant(value_int=int(other)), self)
    quotient = op.Div(self, divisor)
    if rounding_mode == "trunc" or (self.dtype is not None and not _signed(self.dtype)):
        return quotient
    zero = op.CastLike(op.Constant(value_int=0), self)
    # Truncation rounded up where the remainder is nonzero and its sign (the dividend's) is not
    # the divisor's. A divisor known at export has one sign, which leaves one comparison.
    remainder = op.Sub(self, op.Mul(quotient, divisor))
    if not isinstance(other, ir.Value):
        rounded_up = op.Less(remainder, zero) if int(other) > 0 else op.Greater(remainder, zero)
    else:
        rounded_up = op.And(op.Not(op.Equal(remainder, zero)), op.Xor(op.Less(remainder, zero), op.Less(divisor, zero)))
    return op.Sub(quotient, op.CastLike(rounded_up, self))


@register("aten::floor_divide", supports=_integer_result)
def aten_floor_divide_integer(self: ir.Value, other: Any) -> ir.Value:
    """floor_divide(Tensor self, Tensor other) -> Tensor of integers"""
    return aten_div_mode_integer(self, other, rounding_mode="floor")


def _float_floor_division(node: torch.fx.Node) -> bool:
    result = node.meta.get("val")
    mode = "floor" if node.target is torch.ops.aten.floor_divide.default else node.kwargs.get("rounding_mode")
    other = node.args[1] if len(node.args) > 1 else None
    return (
        isinstance(result, torch.Tensor) and result.dtype in FLOAT_TYPES and mode == "floor"
        and (isinstance(other, torch.fx.Node) or (isinstance(other, (int, float)) and not isinstance(other, bool)))
    )


@register(
    "aten::floor_divide", "aten::div.Tensor_mode", "aten::div.Scalar_mode", "aten::divide.Tensor_mode",
    "aten::divide.Scalar_mode", supports=_float_floor_division,
)
@wants_context
def aten_floor_divide_float(self: Any, other: Any, *, rounding_mode: str = "floor", ctx: OpContext) -> ir.Value:
    """floor_divide(Tensor self, Tensor other) -> Tensor of floats (and div with
    ``rounding_mode="floor"``): ATen's floor division, step by step.

    A half-precision tensor divided by a Python number is computed by ATen in float32 with the
    number as a float32 and rounded once; divided by a tensor, each step rounds to the half
    type, as each node of the graph does (``runtime/kernel_gaps``)."""
    half = ctx.result.dtype in (torch.float16, torch.bfloat16)
    if not isinstance(self, ir.Value):
        # A number divided by a tensor: ATen converts it to the tensor's type.
        self = op.Constant(value=ir.tensor(float(self), dtype=onnx_dtype(ctx.result.dtype)))
    if not isinstance(other, ir.Value):
        computed = ir.DataType.FLOAT if half else onnx_dtype(ctx.result.dtype)
        a = op.Cast(self, to=computed) if half else self
        floor = _floor_division(a, op.Constant(value=ir.tensor(float(other), dtype=computed)))
        return op.Cast(floor, to=onnx_dtype(ctx.result.dtype)) if half else floor
    return _floor_division(self, other)


def _half_truncation_by_number(node: torch.fx.Node) -> bool:
    other = node.args[1] if len(node.args) > 1 else None
    return (
        half_result(node) and node.kwargs.get("rounding_mode") == "trunc"
        and isinstance(other, (int, float)) and not isinstance(other, bool)
    )


@register(
    "aten::div.Tensor_mode", "aten::div.Scalar_mode", "aten::divide.Tensor_mode", "aten::divide.Scalar_mode",
    supports=_half_truncation_by_number,
)
@wants_context
def aten_div_trunc_half_by_number(self: ir.Value, other: float, *, rounding_mode: str, ctx: OpContext) -> ir.Value:
    """div.Tensor_mode(Tensor self, Scalar other, *, rounding_mode="trunc") -> Tensor of float16/bfloat16

    ATen divides in float32 by the number as a float32 and truncates before it rounds: the
    quotient rounded to bfloat16 first truncated 80 of 4,096 ``div(x, 0.7, rounding_mode="trunc")``
    to the wrong integer."""
    quotient = op.Div(op.Cast(self, to=ir.DataType.FLOAT), op.Constant(value_float=float(other)))
    # Toward zero (ONNX has no Trunc), the sign a product's: ONNX Runtime's Where returns +0 for
    # a -0 it picks, and -1 / 3 truncates to -0.0 in eager. 1 / q finds a negative zero quotient.
    negative = op.Or(op.Less(quotient, 0.0), op.Less(op.Reciprocal(quotient), 0.0))
    truncated = op.Mul(op.Floor(op.Abs(quotient)), op.Where(negative, -1.0, 1.0))
    return op.Cast(truncated, to=onnx_dtype(ctx.result.dtype))


def _floor_division(a: ir.Value, b: ir.Value) -> ir.Value:
    """ATen's ``div_floor_floating`` (its vectorized form, which also keeps ``a`` where ``a / b``
    overflows and ``a`` does not)."""
    zero, one = op.CastLike(0.0, a), op.CastLike(1.0, a)
    quotient = op.Div(a, b)
    mod = op.Mod(a, b, fmod=1)
    infinity = op.CastLike(float("inf"), a)
    overflowed = op.And(op.Equal(op.Abs(quotient), infinity), op.Not(op.Equal(op.Abs(a), infinity)))
    div = op.Div(op.Where(overflowed, a, op.Sub(a, mod)), b)
    wrong_side = op.And(op.Not(op.Equal(mod, zero)), op.Xor(op.Less(b, zero), op.Less(mod, zero)))
    div = op.Where(wrong_side, op.Sub(div, one), div)
    floor = op.Floor(div)
    floor = op.Where(op.Greater(op.Sub(div, floor), op.CastLike(0.5, a)), op.Add(floor, one), floor)
    # A zero quotient keeps the sign of a / b (|a / b| < 1 there, so the product is a signed 0);
    # a zero divisor gives a / b itself, IEEE's infinity or NaN.
    floor = op.Where(op.Equal(div, zero), op.Mul(quotient, zero), floor)
    return op.Where(op.Equal(b, zero), quotient, floor)


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


@register("aten::isinf", "aten::isposinf", "aten::isneginf", supports=floating_input)
@wants_context
def aten_isinf_float(self: ir.Value, *, ctx: OpContext) -> ir.Value:
    """isinf(Tensor self) -> Tensor (and isposinf, isneginf) of floats, in their own dtype.

    torchlib casts to float32 first, which turns every float64 beyond 3.4e38 into an infinity:
    isinf(1e300) was True and nan_to_num replaced such values by the dtype's maximum."""
    name = ctx.target.removeprefix("aten::")
    return op.IsInf(self, detect_positive=int(name != "isneginf"), detect_negative=int(name != "isposinf"))


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


def _integral_result(node: torch.fx.Node) -> bool:
    result = node.meta.get("val")
    return isinstance(result, torch.Tensor) and not result.dtype.is_floating_point and not result.is_complex() and result.dtype != torch.bool


# Bits of an exponent of each integer type: squaring that many times reaches every exponent.
_EXPONENT_BITS = {torch.int8: 7, torch.uint8: 8, torch.int16: 15, torch.int32: 31, torch.int64: 63}


def _power_by_squaring(base: ir.Value, exponent: ir.Value, bits: int, ctx: OpContext) -> ir.Value:
    """base ** exponent in the integer type, wrapping around as ATen's does: one Loop of ``bits``
    steps squaring the base and multiplying it in where the exponent has a bit. A negative
    exponent gives 0, but 1 for a base of 1 and ±1 for a base of -1 (ATen's rule)."""
    zero = op.CastLike(op.Constant(value_int=0), base)
    one = op.CastLike(op.Constant(value_int=1), base)
    two = op.CastLike(op.Constant(value_int=2), base)
    # Both in the broadcast shape, so the loop carries values of one shape (x * 0 is exact).
    base, exponent = op.Add(base, op.Mul(exponent, zero)), op.Add(exponent, op.Mul(base, zero))
    negative = op.Less(exponent, zero)
    remaining = op.Where(negative, zero, exponent)
    powered = op.Mul(op.Mul(base, zero), zero)
    powered = op.Add(powered, one)

    def step(_: ir.Value, result: ir.Value, square: ir.Value, left: ir.Value) -> list[ir.Value]:
        taken = op.Equal(op.Mod(left, two), one)
        return [op.Where(taken, op.Mul(result, square), result), op.Mul(square, square), op.Div(left, two)]

    result = ctx.loop(bits, [powered, base, remaining], step)[0]
    odd = op.Equal(op.Mod(op.Abs(exponent), two), one)
    minus_one = op.Where(odd, op.Neg(one), one) if _signed(base.dtype) else one
    inverse = op.Where(op.Equal(base, one), one, op.Where(op.Equal(base, op.Neg(one)), minus_one, zero)) if _signed(base.dtype) else op.Where(op.Equal(base, one), one, zero)
    return op.Where(negative, inverse, result)


@register("aten::pow.Tensor_Tensor", "aten::pow.Scalar", "aten::pow.Tensor_Scalar", supports=_integral_result)
@wants_context
def aten_pow_integer(self: Any, exponent: Any, *, ctx: OpContext) -> ir.Value:
    """pow.Tensor_Tensor(Tensor self, Tensor exponent) -> Tensor (and the Scalar forms), integers

    Exactly, wrapping around on overflow as ATen's integer power does. ONNX Runtime's integer
    ``Pow`` computes in double precision and saturates: ``2 ** 40`` in int32 gave 2147483647
    where ATen gives 0, and int64 powers past 2**53 lost their low bits. A static exponent is
    unrolled (``x ** 3`` is two ``Mul``); a tensor exponent takes a loop over its bits.
    """
    dtype = ctx.result.dtype
    onnx_type = onnx_dtype(dtype)
    if isinstance(exponent, int) and not isinstance(exponent, bool) and exponent >= 0 and isinstance(self, ir.Value):
        base = op.Cast(self, to=onnx_type)
        result, square, left = None, base, exponent
        while left:
            if left & 1:
                result = square if result is None else op.Mul(result, square)
            left >>= 1
            if left:
                square = op.Mul(square, square)
        if result is None:  # x ** 0: ones of x's shape
            result = op.Add(op.Mul(base, op.CastLike(op.Constant(value_int=0), base)), op.CastLike(op.Constant(value_int=1), base))
        return result
    base = op.Cast(self, to=onnx_type) if isinstance(self, ir.Value) else op.Cast(op.Constant(value_int=int(self)), to=onnx_type)
    power = op.Cast(exponent, to=onnx_type) if isinstance(exponent, ir.Value) else op.Cast(op.Constant(value_int=int(exponent)), to=onnx_type)
    return _power_by_squaring(base, power, _EXPONENT_BITS[dtype], ctx)


def _ellipses_onnx_runtime_takes(node: torch.fx.Node) -> bool:
    """Whether ONNX Runtime's Einsum runs the equation's ellipses: it needs every input's ellipsis
    to cover as many dims (no broadcasting of ranks, '...ij,...jk' of [2, 3, 4, 5] and [5, 6]
    fails to load) and, when the inputs have one, the output to keep it (summing over an
    ellipsis, '...ik,...j->ij', fails when run)."""
    equation = node.args[0] if node.args else None
    operands = node.args[1] if len(node.args) > 1 else ()
    if not isinstance(equation, str) or "..." not in equation:
        return True
    inputs, arrow, output = equation.replace(" ", "").partition("->")
    if arrow and "..." not in output:
        return False
    ranks = set()
    for subscript, operand in zip(inputs.split(","), operands):
        example = operand.meta.get("val") if isinstance(operand, torch.fx.Node) else None
        if "..." in subscript:
            if not isinstance(example, torch.Tensor):
                return False
            ranks.add(example.dim() - len(subscript.replace("...", "")))
    return len(ranks) <= 1


def _einsum_onnx_runtime_computes(node: torch.fx.Node) -> bool:
    return not _integral_result(node) and _ellipses_onnx_runtime_takes(node)


# ONNX Runtime's integer Einsum reduces through double precision and saturates (an int64 sum past
# 2**53 loses bits; 'i->' of int8 [120, 100, -128] is not -140 wrapped as ATen's sum gives), and
# some ellipses it does not run: those einsums are left to torch's decomposition, into products
# and sums that are exact here.
limit_torchlib("aten::einsum", _einsum_onnx_runtime_computes)


# Euclid's steps for the worst pair of each type (consecutive Fibonacci numbers), and a margin.
_EUCLID_STEPS = {torch.int8: 12, torch.uint8: 14, torch.int16: 24, torch.int32: 48, torch.int64: 96}


@register("prims::gcd", "aten::gcd")
@wants_context
def aten_gcd(self: ir.Value, other: ir.Value, *, ctx: OpContext) -> ir.Value:
    """gcd(Tensor self, Tensor other) -> Tensor

    ATen's Euclid on the magnitudes, for every element at once: one Loop of ``b, a = a, b % a``
    while any ``a`` is non-zero, with C's remainder (``fmod=1``) and the type's own wrapping
    ``abs`` (the lowest value stays negative), so every bit is ATen's."""
    zero = op.CastLike(op.Constant(value_int=0), self)
    one = op.CastLike(op.Constant(value_int=1), self)
    # Both in the broadcast shape, so the loop carries values of one shape (x * 0 is exact).
    a, b = op.Add(op.Abs(self), op.Mul(other, zero)), op.Add(op.Abs(other), op.Mul(self, zero))

    def step(_: ir.Value, a: ir.Value, b: ir.Value) -> list[ir.Value]:
        done = op.Equal(a, zero)
        remainder = op.Mod(b, op.Where(done, one, a), fmod=1)
        return [op.Where(done, a, remainder), op.Where(done, b, a)]

    def finished(a: ir.Value, b: ir.Value) -> ir.Value:
        return op.Not(op.Cast(op.ReduceMax(op.Cast(op.Not(op.Equal(a, zero)), to=ir.DataType.INT32), keepdims=0), to=ir.DataType.BOOL))

    steps = _EUCLID_STEPS.get(ctx.inputs[0].dtype, 96)
    return ctx.loop(steps, [a, b], step, until=finished)[1]
