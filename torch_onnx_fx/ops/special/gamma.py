"""The gamma family: ``lgamma``, ``digamma``, ``polygamma`` and the Hurwitz zeta function.

lgamma is Lanczos' approximation, digamma and trigamma the asymptotic series after a shift by
their recurrence, each with its reflection formula for small and negative arguments. Higher
orders of polygamma are the Hurwitz zeta function, summed in float64 as eager does.
"""

from __future__ import annotations

import functools
import math
from fractions import Fraction
from typing import Any

import numpy as np
import onnx_ir as ir
from onnxscript import opset18 as op

from torch_onnx_fx.translate.op_context import OpContext
from torch_onnx_fx.ops.special._series import (
    DOUBLE,
    FLOAT,
    EULER_GAMMA,
    INF,
    NAN,
    constant,
    elementwise,
    restore,
    sum_of_powers,
    tensors,
    trip_count,
    working,
)
from torch_onnx_fx.registry import register, wants_context

__all__ = ["lgamma_near_one", "zeta_minus_one", "lgamma_positive", "prims_lgamma", "prims_digamma", "aten_polygamma", "prims_zeta"]


def _is_integer(x: ir.Value) -> ir.Value:
    return op.Equal(x, op.Floor(x))


def _abs_sin_pi(x: ir.Value) -> ir.Value:
    """|sin(pi x)|, with x reduced to [-1/2, 1/2] first so that it is exactly 0 at integers."""
    return op.Abs(op.Sin(op.Mul(op.Sub(x, op.Round(x)), math.pi)))


def _false_like(x: ir.Value) -> ir.Value:
    return op.ConstantOfShape(op.Shape(x), value=ir.tensor(np.array([False])))


@functools.cache
def _bernoulli(count: int) -> list[Fraction]:
    """Bernoulli numbers B_0 .. B_count (B_1 = -1/2)."""
    numbers = [Fraction(1)]
    for m in range(1, count + 1):
        numbers.append(-sum(math.comb(m + 1, k) * numbers[k] for k in range(m)) / (m + 1))
    return numbers


# Lanczos approximation, g = 7 with 9 terms (the coefficient set published by Godfrey).
_LANCZOS_G = 7.0
_LANCZOS = (
    0.99999999999980993, 676.5203681218851, -1259.1392167224028, 771.32342877765313, -176.61502916214059,
    12.507343278686905, -0.13857109526572012, 9.9843695780195716e-6, 1.5056327351493116e-7,
)


def zeta_minus_one(k: int) -> float:
    """Riemann zeta(k) - 1 for an integer k >= 2: a direct sum plus its Euler-Maclaurin tail
    (to ~1e-17; summed from 2, so that it keeps its relative precision for large k)."""
    n = 1000
    head = math.fsum(j**-k for j in range(2, n))
    return head + n ** (1 - k) / (k - 1) + 0.5 * n**-k + k / 12 * n ** (-k - 1)


# Taylor series at the roots of lgamma, lowest degree first (DLMF 5.7.3 and the recurrence):
# lgamma(1 + z) = -gamma z + sum_k (-1)^k zeta(k) z^k / k and
# lgamma(2 + z) = (1 - gamma) z + sum_k (-1)^k (zeta(k) - 1) z^k / k, both to 1e-17 for |z| <= 1/2.
# Lanczos' sum is ~1e-15 off absolutely: near the roots, where lgamma itself is small, that was
# all of its value (lgamma(1 + 2^-52) came out -1.8e-15 for 1.3e-16).
# Computed when a translation first needs them, not at import: the 84 sums of 1,000 powers took
# 7 ms, a fifth of the whole package's import and part of every first export.
@functools.cache
def lgamma_near_one() -> tuple[float, ...]:
    return (0.0, -EULER_GAMMA, *[(-1) ** k * (1.0 + zeta_minus_one(k)) / k for k in range(2, 58)])


@functools.cache
def _lgamma_near_two() -> tuple[float, ...]:
    return (0.0, 1.0 - EULER_GAMMA, *[(-1) ** k * zeta_minus_one(k) / k for k in range(2, 30)])


# Up to here lgamma recurs down to the series at 2: Lanczos' absolute error (~1e-15) is still
# several ulps of lgamma below it (34 at 2.65), and above it under one.
_LGAMMA_RECURRENCE_END = 10.0


def lgamma_positive(y: ir.Value) -> ir.Value:
    """log Gamma(y) for y >= 1/2: the series at 1 and 2 below 5/2, the one at 2 through the
    recurrence lgamma(y) = lgamma(y - k) + log((y - 1) ... (y - k)) up to 10, Lanczos above."""
    z = op.Sub(y, 1.0)
    series = constant(_LANCZOS[0], y)
    for k, coefficient in enumerate(_LANCZOS[1:], start=1):
        series = op.Add(series, op.Div(constant(coefficient, y), op.Add(z, float(k))))
    t = op.Add(z, _LANCZOS_G + 0.5)
    head = op.Sub(op.Mul(op.Add(z, 0.5), op.Log(t)), t)
    lanczos = op.Add(op.Add(head, 0.5 * math.log(2 * math.pi)), op.Log(series))
    direct = op.Less(y, 2.5)
    recurring = op.And(op.Not(direct), op.Less(y, _LGAMMA_RECURRENCE_END))
    # k steps down to base in [3/2, 5/2); y - k and every factor base + j are exact, and the
    # product of at most 8 of them rounds 7 times.
    yr = op.Where(recurring, y, 2.5)
    steps = op.Floor(op.Sub(yr, 1.5))
    base = op.Sub(yr, steps)
    product = base
    for j in range(1, int(_LGAMMA_RECURRENCE_END) - 2):
        product = op.Mul(product, op.Where(op.Greater(steps, float(j)), op.Add(base, float(j)), 1.0))
    # y - 1 and y - 2 are exact in these windows (Sterbenz).
    below = op.Less(y, 1.5)
    offset = op.Where(below, z, op.Sub(y, 2.0))
    offset = op.Where(direct, offset, op.Where(recurring, op.Sub(base, 2.0), 0.0))
    near_one = sum_of_powers(offset, lgamma_near_one())
    near_two = sum_of_powers(offset, _lgamma_near_two())
    above = op.Where(recurring, op.Add(near_two, op.Log(product)), lanczos)
    return op.Where(direct, op.Where(below, near_one, near_two), above)


def _lgamma(x: ir.Value) -> ir.Value:
    """log |Gamma(x)|, by reflection below 1/2: lgamma(x) = log(pi / |sin(pi x)|) - lgamma(1 - x)."""
    reflect = op.Less(x, 0.5)
    value = lgamma_positive(op.Where(reflect, op.Sub(1.0, x), x))
    # log pi - log|sin|, not log(pi / |sin|): for denormal x the quotient overflows to inf.
    reflected = op.Sub(op.Sub(math.log(math.pi), op.Log(_abs_sin_pi(x))), value)
    # Near 0, lgamma(x) = -log|x| - gamma x + O(x^2): exact where pi x would lose a denormal's bits.
    near_zero = op.Sub(op.Neg(op.Log(op.Abs(x))), op.Mul(x, EULER_GAMMA))
    result = op.Where(op.Less(op.Abs(x), 1e-8), near_zero, op.Where(reflect, reflected, value))
    # Eager's exact zeros at 1 and 2 (Lanczos' sum leaves 1e-15), and +inf at both infinities and
    # every pole, the non-positive integers: beyond 1e300 the reflection's lgamma(1 - x)
    # overflows float64 and the difference of infinities was NaN.
    result = op.Where(op.Or(op.Equal(x, 1.0), op.Equal(x, 2.0)), constant(0.0, x), result)
    pole = op.Or(op.IsInf(x), op.And(op.LessOrEqual(x, 0.0), _is_integer(x)))
    return op.Where(pole, INF, result)


def _digamma_positive(y: ir.Value) -> ir.Value:
    """psi(y) for y > 0: shifted to y + 10 by the recurrence, then the asymptotic series."""
    shift = op.Less(y, 10.0)
    z = op.Where(shift, op.Add(y, 10.0), y)
    correction = op.Reciprocal(y)
    for k in range(1, 10):
        correction = op.Add(correction, op.Reciprocal(op.Add(y, float(k))))
    u = op.Reciprocal(op.Mul(z, z))
    # psi(z) ~ log z - 1/(2z) - sum_k B_2k / (2k z^2k)
    tail = op.Mul(u, sum_of_powers(u, [float(_bernoulli(30)[2 * k] / (2 * k)) for k in range(1, 8)]))
    asymptotic = op.Sub(op.Sub(op.Log(z), op.Div(0.5, z)), tail)
    return op.Where(shift, op.Sub(asymptotic, correction), asymptotic)


def _digamma(x: ir.Value) -> ir.Value:
    """psi(x), by reflection for x < 0: psi(x) = psi(1 - x) - pi / tan(pi x)."""
    negative = op.Less(x, 0.0)
    value = _digamma_positive(op.Where(negative, op.Sub(1.0, x), x))
    angle = op.Mul(op.Sub(x, op.Round(x)), math.pi)
    reflected = op.Sub(value, op.Div(op.Mul(op.Cos(angle), math.pi), op.Sin(angle)))
    result = op.Where(negative, reflected, value)
    result = op.Where(op.And(negative, _is_integer(x)), NAN, result)
    # At zero eager returns copysign(inf, -x): -inf at +0.0, +inf at -0.0.
    return op.Where(op.Equal(x, 0.0), op.Div(-1.0, x), result)


def _trigamma(x: ir.Value) -> ir.Value:
    """psi'(x) in ATen's arithmetic (``calc_trigamma``), operation for operation in the input's
    dtype: six steps of the recurrence, then a series cut after its 1/42 term, and the
    reflection below 1/2 subtracted first. That series is only good to ~1e-9 at x = 6.5; a longer
    one (ours before) was closer to the true value and 4e6 float64 ulps from eager's.
    """
    single = x.dtype == FLOAT
    pi = float(np.float32(math.pi)) if single else math.pi
    pi_squared = float(np.float32(pi) * np.float32(pi)) if single else math.pi * math.pi
    reflect = op.Less(x, 0.5)
    sine = op.Sin(op.Mul(x, pi))
    result = op.Where(reflect, op.Neg(op.Div(pi_squared, op.Mul(sine, sine))), 0.0)
    y = op.Where(reflect, op.Sub(1.0, x), x)
    for _ in range(6):
        result = op.Add(result, op.Div(1.0, op.Mul(y, y)))
        y = op.Add(y, 1.0)
    ixx = op.Div(1.0, op.Mul(y, y))
    tail = op.Mul(ixx, op.Sub(1.0 / 6, op.Mul(ixx, op.Sub(1.0 / 30, op.Mul(ixx, 1.0 / 42)))))
    series = op.Add(op.Add(1.0, op.Div(1.0, op.Mul(y, 2.0))), tail)
    result = op.Add(result, op.Div(series, y))
    return op.Where(reflect, op.Neg(result), result)


@functools.cache
def _zeta_tail() -> tuple[float, ...]:
    """Euler-Maclaurin coefficients (2k)! / B_2k of the zeta tail, k = 1..12."""
    return tuple(float(math.factorial(2 * k) / _bernoulli(30)[2 * k]) for k in range(1, 13))
# The direct-sum stopping test of Cephes' zeta, which eager reproduces: a term below this
# fraction of the sum ends the computation (also in float32, which eager accumulates in double).
_ZETA_EPSILON = 1.11022302462515654042e-16
# Negative q needs about -q extra terms; beyond this many the sum is cut short.
_ZETA_MAX_TERMS = 1 << 20


def _zeta(ctx: OpContext, x: ir.Value, q: ir.Value) -> ir.Value:
    """Hurwitz zeta(x, q) = sum_k (q + k)^-x, in float64.

    Follows the scheme eager uses: sum the terms up to q + m > 9 (m >= 9), stopping early once a
    term is negligible, then add an Euler-Maclaurin tail at q + m.
    """
    x, q = op.Expand(x, op.Shape(op.Add(x, q))), op.Expand(q, op.Shape(op.Add(x, q)))
    minus_x = op.Neg(x)
    total = op.Pow(q, minus_x)
    done = _false_like(total)

    def add_term(
        total: ir.Value, done: ir.Value, term: ir.Value, active: ir.Value | None = None
    ) -> tuple[ir.Value, ir.Value]:
        use = op.Not(done) if active is None else op.And(active, op.Not(done))
        total = op.Where(use, op.Add(total, term), total)
        bound = op.Mul(total, _ZETA_EPSILON)
        negligible = op.And(op.Less(op.Neg(bound), term), op.Less(term, bound))
        return total, op.Or(done, op.And(use, negligible))

    for k in range(1, 10):
        total, done = add_term(total, done, op.Pow(op.Add(q, float(k)), minus_x))
    # Negative q: the direct sum goes on until q + m > 9 (integer q are poles, needing no terms).
    negative = op.And(op.Less(q, 0.0), op.Not(_is_integer(q)))
    safe_q = op.Where(negative, q, 0.0)
    terms = op.Where(negative, op.Add(op.Floor(op.Sub(9.0, safe_q)), 1.0), 9.0)
    terms = op.Min(terms, float(_ZETA_MAX_TERMS))

    def extra_term(iteration: ir.Value, total: ir.Value, done: ir.Value) -> list[ir.Value]:
        k = op.Add(op.Cast(iteration, to=DOUBLE), 10.0)
        return list(add_term(total, done, op.Pow(op.Add(q, k), minus_x), op.LessOrEqual(k, terms)))

    total, done = ctx.loop(trip_count(op.Sub(terms, 9.0), _ZETA_MAX_TERMS), [total, done], extra_term)
    # Euler-Maclaurin tail at w = q + m, whose term is already in the sum.
    w = op.Add(q, terms)
    b = op.Pow(w, minus_x)
    total, done = add_term(total, done, op.Sub(op.Div(op.Mul(b, w), op.Sub(x, 1.0)), op.Mul(b, 0.5)))
    factor = constant(1.0, x)
    for i, coefficient in enumerate(_zeta_tail()):
        factor = op.Mul(factor, op.Add(x, float(2 * i)))
        b = op.Div(b, w)
        term = op.Div(op.Mul(factor, b), coefficient)
        use = op.Not(done)
        total = op.Where(use, op.Add(total, term), total)
        done = op.Or(done, op.Less(op.Abs(op.Div(term, total)), _ZETA_EPSILON))
        factor = op.Mul(factor, op.Add(x, float(2 * i + 1)))
        b = op.Div(b, w)
    # Poles and domain, in eager's order of precedence.
    non_positive_q = op.LessOrEqual(q, 0.0)
    result = op.Where(op.And(non_positive_q, op.Not(_is_integer(x))), NAN, total)
    result = op.Where(op.And(non_positive_q, _is_integer(q)), INF, result)
    result = op.Where(op.Less(x, 1.0), NAN, result)
    return op.Where(op.Equal(x, 1.0), INF, result)


@register("prims::lgamma")
def prims_lgamma(self: ir.Value) -> ir.Value:
    """lgamma(Tensor self) -> Tensor

    In float64 for every input type: Lanczos' sum in float32 is ~5e-7 off absolutely, which is
    lgamma(1) = 4.8e-7 and up to 1e8 ulps next to its roots at 1 and 2 (eager: 1.6 at most), and
    (1 - x) log(1 - x) overflows float32 for x below -4e36, where the reflection gave NaN for inf.
    """
    return elementwise(_lgamma, self, wide=True)


@register("prims::digamma")
def prims_digamma(self: ir.Value) -> ir.Value:
    """digamma(Tensor self) -> Tensor

    In float64 for every input type, as lgamma: near its negative roots (-0.504…) float32 left
    100 ulps where eager has 16.
    """
    return elementwise(_digamma, self, wide=True)


@register("aten::polygamma")
@wants_context
def aten_polygamma(n: int, self: ir.Value, *, ctx: OpContext) -> ir.Value:
    """polygamma(int n, Tensor self) -> Tensor

    n = 0 is digamma and n = 1 trigamma; higher orders are (-1)^(n+1) n! zeta(n + 1, x), the
    zeta summed in float64 as eager does.
    """
    if n == 0:
        return elementwise(_digamma, self, wide=True)
    if n == 1:
        return elementwise(_trigamma, self)
    x = working(self, wide=True)
    value = _zeta(ctx, constant(float(n + 1), x), x)
    return restore(op.Mul(value, float((-1) ** (n + 1) * math.factorial(n))), self)


@register("prims::zeta")
@wants_context
def prims_zeta(self: Any, other: Any, *, ctx: OpContext) -> ir.Value:
    """zeta(Tensor self, Tensor other) -> Tensor: the Hurwitz zeta function zeta(self, other).

    Either argument may arrive as a Python number (from special.zeta's scalar overloads).
    """
    self, other = tensors(self, other)
    return restore(_zeta(ctx, working(self, wide=True), working(other, wide=True)), self)
