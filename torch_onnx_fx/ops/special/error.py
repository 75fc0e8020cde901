"""The error function family: ``erfinv``, ``ndtri``, ``erfcx`` and ``log_ndtr``; ``erf`` and ``erfc``
of float64.

erfcx is Laplace's continued fraction above a threshold; below it float32 computes
exp(x^2) erfc(x) and float64 a Taylor polynomial per interval. The inverses start from Giles'
approximation and are refined by Newton steps, which also carry them into the tails the
approximation was not fitted for. ONNX Runtime has no float64 ``Erf``, so float64 builds erf and
erfc from erfcx (:func:`erf`, :func:`_erfc`), and ``special.ndtr`` too: with ONNX's ``Erf`` the
session could not be created. ``erfc`` and ``log_ndtr`` of every type run in float64, where their
tails keep their relative precision.
"""

from __future__ import annotations

import functools
import math
from typing import Sequence

import numpy as np
import onnx_ir as ir
from onnxscript import opset18 as op

from torch_onnx_fx.ops.special._series import DOUBLE, INF, NAN, SQRT_PI, elementwise, log1p, piecewise_taylor, sum_of_powers, taylor_table
from torch_onnx_fx.registry import float64_input, floating_result, register

__all__ = [
    "erf", "erfcx", "prims_erf_inv", "prims_ndtri", "aten_erf_float64", "aten_erfc", "aten_special_erfcx",
    "aten_special_log_ndtr", "aten_special_ndtr_float64",
]


def _polyval(x: ir.Value, coefficients: Sequence[float]) -> ir.Value:
    """The polynomial with ``coefficients`` from the highest degree down."""
    return sum_of_powers(x, list(reversed(coefficients)))


def erf(x: ir.Value) -> ir.Value:
    """erf(x). ONNX Runtime has no float64 Erf: there its Maclaurin series below 1/2 and
    1 - erfc(|x|) above, where erfc (:func:`_erfc_of_magnitude`) is exact to an ulp or two and
    erf lies in (0.52, 1): 2 ulps. The series alone up to 2.5 lost 44 ulps near 2.45 (its terms
    grow to e^(x^2)), and 1 + erf(x) in GELU 1e-11 relatively."""
    if x.dtype != DOUBLE:
        return op.Erf(x)
    small = op.Less(op.Abs(x), 0.5)
    complement = _erfc_of_magnitude(op.Where(small, 0.5, op.Abs(x)))
    return op.Where(small, _erf_series(op.Where(small, x, 0.0)), op.Mul(op.Sign(x), op.Sub(1.0, complement)))


def _erf_series(x: ir.Value) -> ir.Value:
    """erf(x) of float64 for |x| < 1/2: 2/sqrt(pi) sum_n (-1)^n x^(2n+1) / (n! (2n + 1)), whose
    16th term is 1e-23 there. The callers that only need this branch call it, not :func:`erf`,
    whose other branch would be built (a continued fraction) and never selected."""
    coefficients = [(-1) ** n / (math.factorial(n) * (2 * n + 1)) for n in range(16)]
    return op.Mul(op.Mul(x, 2.0 / SQRT_PI), sum_of_powers(op.Mul(x, x), coefficients))


def _exp_of_square(x: ir.Value, factor: float) -> ir.Value:
    """exp(factor x^2) of float64 for factor +-1 or +-1/2, without the error of a rounded x^2.

    exp(-x^2) of a rounded x^2 is off by x^2 ulps relatively (erfc(25.7) 312 ulps). x^2 splits
    exactly into head^2 + (x - head)(x + head) with head x on a grid of 2^-20: below 64 head has
    at most 26 significant bits, so head^2 is exact, and the small rest is rounded once. Beyond
    64 the result under- or overflows whatever x is, so x is clamped there (which also keeps
    the split finite). Every caller runs in float64 (log_ndtr widens float32)."""
    x = op.Where(op.Greater(op.Abs(x), 64.0), 64.0, op.Abs(x))
    head = op.Div(op.Round(op.Mul(x, 2.0**20)), 2.0**20)
    rest = op.Mul(op.Sub(x, head), op.Add(x, head))
    return op.Mul(op.Exp(op.Mul(op.Mul(head, head), factor)), op.Exp(op.Mul(rest, factor)))


# float64 erfcx on [0, 3): a Taylor polynomial per interval of a quarter, about its middle
# (|h| <= 1/8, 15 terms: within an ulp of mpmath); Laplace's continued fraction from 3 on, where
# 32 levels are within an ulp. The continued fraction alone needed 80 levels at 1.5 for 1e-15,
# and below it erfcx came from 1 - erf, which cancels (768 ulps at 2.5).
_TAYLOR_WIDTH = 0.25
_TAYLOR_PIECES = 12
_TAYLOR_TERMS = 15
_FRACTION_FROM = _TAYLOR_WIDTH * _TAYLOR_PIECES
_FRACTION_DEPTH = 32


@functools.cache
def _erfcx_taylor_table() -> np.ndarray:
    """Taylor coefficients of erfcx about the middle c of each interval, row per interval.

    From y = erfcx, y' = 2 x y - 2 / sqrt(pi) and, differentiating, y^(n+1) = 2 x y^(n) +
    2 n y^(n-1): a[n+1] = (2 c a[n] + 2 a[n-1]) / (n + 1)."""

    def at(c, mpmath):
        a = [mpmath.erfc(c) * mpmath.exp(c * c)]
        a.append(2 * c * a[0] - 2 / mpmath.sqrt(mpmath.pi))
        for n in range(1, _TAYLOR_TERMS - 1):
            a.append((2 * c * a[n] + 2 * a[n - 1]) / (n + 1))
        return a

    return taylor_table(at, 0.0, _TAYLOR_WIDTH, _TAYLOR_PIECES)


def _erfcx_taylor(x: ir.Value) -> ir.Value:
    """erfcx(x) of float64 for 0 <= x < 3."""
    return piecewise_taylor(x, _erfcx_taylor_table(), 0.0, _TAYLOR_WIDTH)


def _erfcx_of_magnitude(x: ir.Value) -> ir.Value:
    """erfcx(x) of float64 for x >= 0 (and NaN)."""
    taylor = op.Less(x, _FRACTION_FROM)
    fraction = _erfcx_continued_fraction(op.Where(taylor, _FRACTION_FROM, x), _FRACTION_DEPTH)
    return op.Where(taylor, _erfcx_taylor(op.Where(taylor, x, 0.0)), fraction)


def _erfc_of_magnitude(x: ir.Value) -> ir.Value:
    """erfc(x) of float64 for x >= 1/2: erfcx(x) exp(-x^2), each within about an ulp."""
    return op.Mul(_erfcx_of_magnitude(x), _exp_of_square(x, -1.0))


def _erfc(x: ir.Value) -> ir.Value:
    """erfc(x) of float64: erfcx(|x|) exp(-x^2) from 1/2 on (2 - that for negative x), where
    1 - erf(x) would cancel (erfc(2.4) is 7e-4 and lost 11 bits that way; erfc(6) is 2e-17);
    1 - erf(x) below, where it lies in (0.47, 1.53). Within 3 ulps of mpmath; ATen's (glibc's)
    is within 1."""
    small = op.Less(op.Abs(x), 0.5)
    tail = _erfc_of_magnitude(op.Where(small, 0.5, op.Abs(x)))
    large = op.Where(op.Less(x, 0.0), op.Sub(2.0, tail), tail)
    return op.Where(small, op.Sub(1.0, _erf_series(op.Where(small, x, 0.0))), large)


@register("aten::erf", supports=float64_input)
def aten_erf_float64(self: ir.Value) -> ir.Value:
    """erf(Tensor self) -> Tensor"""
    return elementwise(erf, self)


@register("aten::erfc", supports=floating_result)
def aten_erfc(self: ir.Value) -> ir.Value:
    """erfc(Tensor self) -> Tensor

    In float64 for every input type. ``1 - Erf(x)`` in float32 (torchlib's) cancels: erfc(4)
    (1.5e-8) came out 60 % off and erfc(4.6) (7.4e-11) as 0 where ATen's float32 keeps its
    relative precision down to the smallest subnormal (erfc(10.05)), so ``log(erfc(x))`` went to
    -inf. Rounded once to the result's type from float64."""
    return elementwise(_erfc, self, wide=True)


def _erfcx_continued_fraction(x: ir.Value, depth: int) -> ir.Value:
    """exp(x^2) erfc(x) for x > 0 by Laplace's continued fraction
    1/sqrt(pi) / (x + (1/2)/(x + 1/(x + (3/2)/(x + ...)))), evaluated from the bottom up."""
    t = x
    for k in range(depth, 0, -1):
        t = op.Add(x, op.Div(0.5 * k, t))
    return op.Div(1.0 / SQRT_PI, t)


def erfcx(x: ir.Value) -> ir.Value:
    """exp(x^2) erfc(x); erfcx(-x) = 2 exp(x^2) - erfcx(x) for negative x. float32: direct below
    1.5, where the continued fraction would need many levels, and the fraction above."""
    if x.dtype == DOUBLE:
        positive = _erfcx_of_magnitude(op.Abs(x))
        negative = op.Sub(op.Mul(_exp_of_square(x, 1.0), 2.0), positive)
        return op.Where(op.Less(x, 0.0), negative, positive)
    threshold, depth = 1.5, 26
    ax = op.Abs(x)
    small = op.Less(ax, threshold)
    xs = op.Where(small, ax, 0.0)
    direct = op.Mul(op.Exp(op.Mul(xs, xs)), op.Sub(1.0, erf(xs)))
    positive = op.Where(small, direct, _erfcx_continued_fraction(op.Where(small, threshold, ax), depth))
    negative = op.Sub(op.Mul(op.Exp(op.Mul(x, x)), 2.0), positive)
    return op.Where(op.Less(x, 0.0), negative, positive)


# Giles, "Approximating the erfinv function" (GPU Computing Gems, 2011), single-precision
# version: erfinv(x) = x p(w), w = -log((1 - x)(1 + x)), p a polynomial in w - 2.5 (w < 5) or
# in sqrt(w) - 3.
_GILES_CENTRAL = (
    2.81022636e-08, 3.43273939e-07, -3.5233877e-06, -4.39150654e-06, 0.00021858087, -0.00125372503,
    -0.00417768164, 0.246640727, 1.50140941,
)
_GILES_TAIL = (
    -0.000200214257, 0.000100950558, 0.00134934322, -0.00367342844, 0.00573950773, -0.0076224613,
    0.00943887047, 1.00167406, 2.83297682,
)
# Giles' polynomials are fitted for w up to ~16 (float32 arguments); beyond, an asymptotic
# guess refined by Newton steps.
_GILES_RANGE = 16.0


def _inverse_erf(x: ir.Value, w: ir.Value, complement: ir.Value) -> ir.Value:
    """y with erf(y) = x, given w = -log((1 - x)(1 + x)) and complement = 1 - |x| computed
    accurately by the caller.

    Giles' approximation (relative error ~4e-7). Past its range (only reachable from ndtri in
    float32, and in float64) the start is the asymptotic tail y^2 ~ L - log(pi L) / 2,
    L = -log(complement), refined by Newton steps on log erfc(y) = log(complement), which stay
    accurate far into the tail. float64 is refined everywhere, near 0 by Newton steps on erf.
    """
    central = _polyval(op.Sub(w, 2.5), _GILES_CENTRAL)
    tail = _polyval(op.Sub(op.Sqrt(w), 3.0), _GILES_TAIL)
    magnitude = op.Abs(x)
    giles = op.Mul(op.Where(op.Less(w, 5.0), central, tail), magnitude)
    far = op.GreaterOrEqual(w, _GILES_RANGE)
    safe = op.Where(far, complement, 0.5)
    minus_log = op.Neg(op.Log(safe))
    guess = op.Sqrt(op.Sub(minus_log, op.Mul(op.Log(op.Mul(minus_log, math.pi)), 0.5)))
    y = op.Where(far, guess, giles)
    double = x.dtype == DOUBLE
    target = op.Log(complement) if double else op.Log(safe)
    for _ in range(4 if double else 3):
        # f(y) = log erfcx(y) - y^2 - log(complement), f'(y) = -2 / (sqrt(pi) erfcx(y)).
        scaled = erfcx(y)
        f = op.Sub(op.Sub(op.Log(scaled), op.Mul(y, y)), target)
        upper = op.Add(y, op.Mul(f, op.Mul(scaled, SQRT_PI / 2)))
        if not double:
            y = op.Where(far, upper, y)
            continue
        # Near 0, log(complement) has lost the digits of |x|: Newton on erf(y) = |x| instead.
        lower = op.Sub(y, op.Mul(op.Sub(erf(y), magnitude), op.Mul(op.Exp(op.Mul(y, y)), SQRT_PI / 2)))
        y = op.Where(op.Less(magnitude, 0.5), lower, upper)
    return op.Mul(op.Sign(x), y)


def _erfinv(x: ir.Value) -> ir.Value:
    w = op.Neg(op.Log(op.Mul(op.Sub(1.0, x), op.Add(1.0, x))))
    y = _inverse_erf(x, w, op.Sub(1.0, op.Abs(x)))
    y = op.Where(op.Equal(x, 0.0), x, y)
    y = op.Where(op.Equal(op.Abs(x), 1.0), op.Mul(x, INF), y)
    return op.Where(op.Greater(op.Abs(x), 1.0), NAN, y)


@register("prims::erf_inv")
def prims_erf_inv(self: ir.Value) -> ir.Value:
    """erf_inv(Tensor self) -> Tensor"""
    return elementwise(_erfinv, self)


def _ndtri(p: ir.Value) -> ir.Value:
    """The inverse of the standard normal CDF: sqrt(2) erfinv(2p - 1)."""
    x = op.Sub(op.Mul(p, 2.0), 1.0)
    # (1 - x)(1 + x) = 4 p (1 - p), accurate for p near 0 where 2p - 1 is not.
    w = op.Neg(op.Log(op.Mul(op.Mul(p, 4.0), op.Sub(1.0, p))))
    complement = op.Mul(op.Min(p, op.Sub(1.0, p)), 2.0)
    y = op.Mul(_inverse_erf(x, w, complement), math.sqrt(2.0))
    y = op.Where(op.Equal(p, 0.5), 0.0, y)
    y = op.Where(op.Equal(p, 0.0), -INF, op.Where(op.Equal(p, 1.0), INF, y))
    outside = op.Or(op.Less(p, 0.0), op.Greater(p, 1.0))
    return op.Where(outside, NAN, y)


@register("prims::ndtri")
def prims_ndtri(self: ir.Value) -> ir.Value:
    """ndtri(Tensor self) -> Tensor"""
    return elementwise(_ndtri, self)


@register("aten::special_erfcx")
def aten_special_erfcx(self: ir.Value) -> ir.Value:
    """special_erfcx(Tensor self) -> Tensor"""
    return elementwise(erfcx, self)


def _log_ndtr(x: ir.Value) -> ir.Value:
    """log Phi(x) = log(erfcx(-x / sqrt 2) / 2) - x^2 / 2 for x <= 0, which stays finite far into the
    lower tail; log1p(-erfc(x / sqrt 2) / 2) above, erfc as erfcx(x / sqrt 2) exp(-x^2 / 2) of the
    exact x (erfc of a rounded x / sqrt 2 is off by x^2 ulps relatively, as ATen's is).
    """
    half_square = op.Mul(op.Mul(x, 0.5), x)  # (x / 2) x: x^2 would overflow first
    lower = op.Sub(op.Log(op.Mul(erfcx(op.Mul(x, -math.sqrt(0.5))), 0.5)), half_square)
    positive = op.Greater(x, 0.0)
    xp = op.Where(positive, x, 0.0)
    upper_tail = op.Mul(op.Mul(erfcx(op.Mul(xp, math.sqrt(0.5))), 0.5), _exp_of_square(xp, -0.5))
    upper = log1p(op.Neg(upper_tail))
    return op.Where(positive, upper, lower)


@register("aten::special_log_ndtr")
def aten_special_log_ndtr(self: ir.Value) -> ir.Value:
    """special_log_ndtr(Tensor self) -> Tensor

    In float64 for every input type: float32's exp(-x^2 / 2) of a rounded x^2 was 18 ulps off in
    the upper tail (8.05), where ATen's float32 is within one."""
    return elementwise(_log_ndtr, self, wide=True)


def _ndtr(x: ir.Value) -> ir.Value:
    """Phi(x) of float64: (1 + erf(x / sqrt 2)) / 2 near 0, and from |x| / sqrt 2 = 1/2 on the tail
    erfc(|x| / sqrt 2) / 2 as erfcx(|x| / sqrt 2) exp(-x^2 / 2) / 2 (1 - that for positive x).
    The decomposition's 1 + erf, which is ATen's own formula, cancels for negative x: 57 ulps at
    -2, and 0 for 7.6e-24 at -10."""
    z = op.Mul(op.Abs(x), math.sqrt(0.5))
    near = op.Less(z, 0.5)
    xs = op.Where(near, x, 0.0)
    central = op.Mul(op.Add(_erf_series(op.Mul(xs, math.sqrt(0.5))), 1.0), 0.5)
    xt = op.Where(near, 1.0, x)
    tail = op.Mul(op.Mul(_erfcx_of_magnitude(op.Where(near, 1.0, z)), _exp_of_square(xt, -0.5)), 0.5)
    return op.Where(near, central, op.Where(op.Less(x, 0.0), tail, op.Sub(1.0, tail)))


@register("aten::special_ndtr", supports=float64_input)
def aten_special_ndtr_float64(self: ir.Value) -> ir.Value:
    """special_ndtr(Tensor self) -> Tensor"""
    return elementwise(_ndtr, self)
