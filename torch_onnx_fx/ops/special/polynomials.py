"""Orthogonal polynomials: Chebyshev (T, U, V, W), shifted Chebyshev, Hermite (H, He), Laguerre
and Legendre, each of a tensor degree ``n``.

Every family is its three-term recurrence, run by one ``Loop`` up to the largest degree in ``n``
for all elements at once, plus the values eager returns without recurring (at the ends of the
interval and the like).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

import numpy as np
import onnx_ir as ir
from onnx_ir.tensor_adapters import from_torch_dtype
from onnxscript import opset18 as op

from torch_onnx_fx.translate.op_context import OpContext
from torch_onnx_fx.ops.special._series import DOUBLE, FLOAT, constant, trip_count
from torch_onnx_fx.registry import register, wants_context

__all__ = [
    "aten_special_chebyshev_polynomial_t",
    "aten_special_chebyshev_polynomial_u",
    "aten_special_chebyshev_polynomial_v",
    "aten_special_chebyshev_polynomial_w",
    "aten_special_shifted_chebyshev_polynomial_t",
    "aten_special_shifted_chebyshev_polynomial_u",
    "aten_special_shifted_chebyshev_polynomial_v",
    "aten_special_shifted_chebyshev_polynomial_w",
    "aten_special_hermite_polynomial_h",
    "aten_special_hermite_polynomial_he",
    "aten_special_laguerre_polynomial_l",
    "aten_special_legendre_polynomial_p",
]


@dataclasses.dataclass(frozen=True)
class _Recurrence:
    """A three-term recurrence as eager evaluates it, with its special cases.

    ``first(x)`` is P_1; ``step(k, x, p, q)`` gives P_k from p = P_k-2 and q = P_k-1; ``special(x,
    n, value)`` puts in the values eager returns without recurring (at |x| = 1 and the like).
    The shifted polynomials recur in 2x - 1, while their special cases test x itself.
    """

    first: Callable[[ir.Value], ir.Value]
    step: Callable[[ir.Value, ir.Value, ir.Value, ir.Value], ir.Value]
    special: Callable[[ir.Value, ir.Value, ir.Value], ir.Value] | None = None
    shifted: bool = False


def _odd(n: ir.Value) -> ir.Value:
    return op.Equal(op.Mod(n, constant(2.0, n), fmod=1), 1.0)


def _at_ends(
    upper: Callable[[ir.Value], ir.Value], lower: Callable[[ir.Value], ir.Value], ends: tuple[float, float] = (1.0, -1.0)
) -> Callable[[ir.Value, ir.Value, ir.Value], ir.Value]:
    """The values ``upper(n)`` and ``lower(n)`` at the ends of the interval: x = 1 and x = -1, or
    x = 1 and x = 0 for the shifted polynomials."""

    def special(x: ir.Value, n: ir.Value, value: ir.Value) -> ir.Value:
        value = op.Where(op.Equal(x, ends[0]), upper(n), value)
        return op.Where(op.Equal(x, ends[1]), lower(n), value)

    return special


def _one(n: ir.Value) -> ir.Value:
    return op.Expand(constant(1.0, n), op.Shape(n))


def _alternating(magnitude: Callable[[ir.Value], ir.Value]) -> Callable[[ir.Value], ir.Value]:
    return lambda n: op.Where(_odd(n), op.Neg(magnitude(n)), magnitude(n))


def _n_plus_one(n: ir.Value) -> ir.Value:
    return op.Add(n, 1.0)


def _two_n_plus_one(n: ir.Value) -> ir.Value:
    return op.Add(op.Add(n, n), 1.0)


def _chebyshev_step(k: ir.Value, x: ir.Value, p: ir.Value, q: ir.Value) -> ir.Value:
    return op.Sub(op.Mul(op.Add(x, x), q), p)


# The four kinds: P_1, and the values at the upper and lower end of the interval.
_CHEBYSHEV = {
    "t": (lambda x: x, _one, _alternating(_one)),
    "u": (lambda x: op.Add(x, x), _n_plus_one, _alternating(_n_plus_one)),
    "v": (lambda x: op.Sub(op.Add(x, x), 1.0), _one, _alternating(_two_n_plus_one)),
    "w": (lambda x: op.Add(op.Add(x, x), 1.0), _two_n_plus_one, _alternating(_one)),
}

_RECURRENCES = {
    **{
        f"chebyshev_polynomial_{kind}": _Recurrence(first, _chebyshev_step, _at_ends(upper, lower))
        for kind, (first, upper, lower) in _CHEBYSHEV.items()
    },
    **{
        f"shifted_chebyshev_polynomial_{kind}": _Recurrence(
            first, _chebyshev_step, _at_ends(upper, lower, (1.0, 0.0)), shifted=True
        )
        for kind, (first, upper, lower) in _CHEBYSHEV.items()
    },
    "hermite_polynomial_h": _Recurrence(
        lambda x: op.Add(x, x),
        lambda k, x, p, q: op.Sub(op.Mul(op.Add(x, x), q), op.Mul(op.Mul(op.Sub(k, 1.0), 2.0), p)),
    ),
    "hermite_polynomial_he": _Recurrence(
        lambda x: x,
        lambda k, x, p, q: op.Sub(op.Mul(x, q), op.Mul(op.Sub(k, 1.0), p)),
    ),
    "laguerre_polynomial_l": _Recurrence(
        lambda x: op.Sub(1.0, x),
        lambda k, x, p, q: op.Div(
            op.Sub(op.Mul(op.Sub(op.Sub(op.Add(k, k), 1.0), x), q), op.Mul(op.Sub(k, 1.0), p)), k
        ),
        lambda x, n, value: op.Where(op.Equal(x, 0.0), 1.0, value),
    ),
    "legendre_polynomial_p": _Recurrence(
        lambda x: x,
        lambda k, x, p, q: op.Div(
            op.Sub(op.Mul(op.Mul(op.Sub(op.Add(k, k), 1.0), x), q), op.Mul(op.Sub(k, 1.0), p)), k
        ),
        _at_ends(_one, _alternating(_one)),
    ),
}

# Degrees beyond this are cut short (eager would recur that many times per element).
_MAX_DEGREE = 1 << 24


def _orthogonal_polynomial(ctx: OpContext, x: Any, n: Any, recurrence: _Recurrence) -> ir.Value:
    """P_n(x) elementwise for tensors x and n: a Loop over k = 2 .. max(n) carries the
    recurrence for every element and keeps each element's value at k = n.

    n is truncated to an integer as eager does; negative n (and NaN, and values beyond int64,
    which eager's conversion turns negative) give 0.
    """
    dtype = from_torch_dtype(ctx.result.dtype)
    work = DOUBLE if dtype == DOUBLE else FLOAT
    x = op.Cast(x, to=work) if isinstance(x, ir.Value) else op.Constant(value=np.asarray(x, dtype=work.numpy()))
    n = op.Cast(n, to=work) if isinstance(n, ir.Value) else op.Constant(value=np.asarray(n, dtype=work.numpy()))
    n = op.Where(op.Less(n, 0.0), op.Ceil(n), op.Floor(n))
    n = op.Where(op.Or(op.IsNaN(n), op.GreaterOrEqual(n, 2.0**63)), -1.0, n)
    shape = op.Shape(op.Add(x, n))
    x, n = op.Expand(x, shape), op.Expand(n, shape)
    argument = op.Sub(op.Add(x, x), 1.0) if recurrence.shifted else x
    first = recurrence.first(argument)
    value = op.Where(op.Equal(n, 0.0), 1.0, op.Where(op.Equal(n, 1.0), first, 0.0))

    def step(iteration: ir.Value, p: ir.Value, q: ir.Value, value: ir.Value) -> list[ir.Value]:
        k = op.Add(op.Cast(iteration, to=work), 2.0)
        r = recurrence.step(k, argument, p, q)
        return [op.Identity(q), r, op.Where(op.Equal(n, k), r, value)]

    count = trip_count(op.Sub(op.Min(n, float(_MAX_DEGREE)), 1.0), _MAX_DEGREE)
    _, _, value = ctx.loop(count, [_one(x), first, value], step)
    if recurrence.special is not None:
        value = recurrence.special(x, n, value)
    value = op.Where(op.Less(n, 0.0), 0.0, value)
    return op.Cast(value, to=dtype)


def _polynomial_translation(name: str) -> Callable[..., ir.Value]:
    recurrence = _RECURRENCES[name]

    @wants_context
    def translation(x: Any, n: Any, *, ctx: OpContext) -> ir.Value:
        return _orthogonal_polynomial(ctx, x, n, recurrence)

    translation.__name__ = translation.__qualname__ = f"aten_special_{name}"
    translation.__doc__ = f"special_{name}(Tensor x, Tensor n) -> Tensor (and the .x_scalar, .n_scalar overloads)"
    return register(*(f"aten::special_{name}{overload}" for overload in ("", ".x_scalar", ".n_scalar")))(translation)


aten_special_chebyshev_polynomial_t = _polynomial_translation("chebyshev_polynomial_t")
aten_special_chebyshev_polynomial_u = _polynomial_translation("chebyshev_polynomial_u")
aten_special_chebyshev_polynomial_v = _polynomial_translation("chebyshev_polynomial_v")
aten_special_chebyshev_polynomial_w = _polynomial_translation("chebyshev_polynomial_w")
aten_special_shifted_chebyshev_polynomial_t = _polynomial_translation("shifted_chebyshev_polynomial_t")
aten_special_shifted_chebyshev_polynomial_u = _polynomial_translation("shifted_chebyshev_polynomial_u")
aten_special_shifted_chebyshev_polynomial_v = _polynomial_translation("shifted_chebyshev_polynomial_v")
aten_special_shifted_chebyshev_polynomial_w = _polynomial_translation("shifted_chebyshev_polynomial_w")
aten_special_hermite_polynomial_h = _polynomial_translation("hermite_polynomial_h")
aten_special_hermite_polynomial_he = _polynomial_translation("hermite_polynomial_he")
aten_special_laguerre_polynomial_l = _polynomial_translation("laguerre_polynomial_l")
aten_special_legendre_polynomial_p = _polynomial_translation("legendre_polynomial_p")
