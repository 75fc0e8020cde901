"""The error function family: ``erfinv``, ``ndtri``, ``erfcx`` and ``log_ndtr``; ``erf`` and ``erfc``
of float64.

erfcx is Laplace's continued fraction above a threshold and exp(x^2) erfc(x) below it; the
inverses start from Giles' approximation and are refined by Newton steps, which also carry them
into the tails the approximation was not fitted for. ONNX Runtime has no float64 ``Erf``, so
float64 uses a series of its own (:func:`erf`). A float64 model's ``erf`` and ``erfc`` (and
``special.ndtr`` through them) take it too: with ONNX's ``Erf`` the session could not be created.
``erfc`` of every type runs in float64, where its tail keeps its relative precision.
"""

from __future__ import annotations

import math
from typing import Sequence

import onnx_ir as ir
from onnxscript import opset18 as op

from torch_onnx_fx.ops.special._series import DOUBLE, INF, NAN, SQRT_PI, elementwise, log1p, sum_of_powers
from torch_onnx_fx.registry import float64_input, floating_result, register

__all__ = [
    "erf", "erfcx", "prims_erf_inv", "prims_ndtri", "aten_erf_float64", "aten_erfc", "aten_special_erfcx",
    "aten_special_log_ndtr",
]


def _polyval(x: ir.Value, coefficients: Sequence[float]) -> ir.Value:
    """The polynomial with ``coefficients`` from the highest degree down."""
    return sum_of_powers(x, list(reversed(coefficients)))


def erf(x: ir.Value) -> ir.Value:
    """erf(x). ONNX Runtime has no float64 Erf: there a Maclaurin series (|x| < 1.5) and 1 - erfc.

    The series alternates with terms up to e^(x^2): at 2.45 it lost 44 ulps (and GELU, which adds
    1 + erf(x) there, 1e-11 relatively); from 1.5 on erfc's 80-level fraction (1.2e-15 of erfc)
    gives erf to an ulp."""
    if x.dtype != DOUBLE:
        return op.Erf(x)
    small = op.Less(op.Abs(x), 1.5)
    xs = op.Where(small, x, 0.0)
    # erf(x) = 2/sqrt(pi) sum_n (-1)^n x^(2n+1) / (n! (2n + 1))
    coefficients = [(-1) ** n / (math.factorial(n) * (2 * n + 1)) for n in range(45)]
    series = op.Mul(op.Mul(xs, 2.0 / SQRT_PI), sum_of_powers(op.Mul(xs, xs), coefficients))
    ax = op.Where(small, 1.5, op.Abs(x))
    complement = op.Mul(_erfcx_continued_fraction(ax, 80), op.Exp(op.Neg(op.Mul(ax, ax))))
    return op.Where(small, series, op.Mul(op.Sign(x), op.Sub(1.0, complement)))


def _erfc(x: ir.Value) -> ir.Value:
    """erfc(x) of float64: the continued fraction times exp(-x^2) from 1.5 up, where 1 - erf(x)
    would cancel (erfc(2.4) is 7e-4 and lost 11 bits that way; erfc(6) is 2e-17); 1 - erf(x)
    below, where it lies in (0.03, 2). 80 levels keep the fraction within 1.2e-15 of erfc at
    1.5 (40 were 7e-11 off there)."""
    large = op.Greater(x, 1.5)
    xl = op.Where(large, x, 1.5)
    tail = op.Mul(_erfcx_continued_fraction(xl, 80), op.Exp(op.Neg(op.Mul(xl, xl))))
    return op.Where(large, tail, op.Sub(1.0, erf(op.Where(large, 0.0, x))))


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
    """exp(x^2) erfc(x). Direct below the threshold where the continued fraction converges
    quickly; erfcx(-x) = 2 exp(x^2) - erfcx(x) for negative x."""
    threshold, depth = (2.5, 40) if x.dtype == DOUBLE else (1.5, 26)
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
    lower tail; log1p(-erfc(x / sqrt 2) / 2) above.
    """
    half_square = op.Mul(op.Mul(x, 0.5), x)  # x^2 overflows from 1.8e19 in float32, x^2 / 2 later
    lower = op.Sub(op.Log(op.Mul(erfcx(op.Mul(x, -math.sqrt(0.5))), 0.5)), half_square)
    upper_tail = op.Mul(op.Mul(erfcx(op.Mul(x, math.sqrt(0.5))), 0.5), op.Exp(op.Neg(half_square)))
    upper = log1p(op.Neg(op.Where(op.Greater(x, 0.0), upper_tail, 0.0)))
    return op.Where(op.Greater(x, 0.0), upper, lower)


@register("aten::special_log_ndtr")
def aten_special_log_ndtr(self: ir.Value) -> ir.Value:
    """special_log_ndtr(Tensor self) -> Tensor"""
    return elementwise(_log_ndtr, self)
