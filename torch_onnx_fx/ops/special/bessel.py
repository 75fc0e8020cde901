"""Bessel and Airy functions: modified Bessel I and K (plain and exponentially scaled),
Bessel J and Y, the spherical Bessel function j0 and Airy Ai.

Each is a Maclaurin series (with a logarithmic part for K and Y) for small arguments and an
asymptotic expansion for large ones; K has trapezoidal quadrature of an integral representation
in between, and Ai a Taylor polynomial per short interval instead of the series. The series of J
and Y cancel, so they run in float64, as Ai's polynomials do.
"""

from __future__ import annotations

import dataclasses
import functools
import math

import numpy as np
import onnx_ir as ir
from onnxscript import opset18 as op

from torch_onnx_fx.ops.special._series import (
    DOUBLE,
    EULER_GAMMA,
    INF,
    NAN,
    SQRT_PI,
    constant,
    elementwise,
    piecewise_taylor,
    sum_of_powers,
    taylor_table,
    working,
)
from torch_onnx_fx.registry import register

__all__ = [
    "prims_bessel_i0",
    "prims_bessel_i0e",
    "prims_bessel_i1",
    "prims_bessel_i1e",
    "aten_special_modified_bessel_k0",
    "aten_special_modified_bessel_k1",
    "aten_special_scaled_modified_bessel_k0",
    "aten_special_scaled_modified_bessel_k1",
    "prims_bessel_j0",
    "prims_bessel_j1",
    "aten_special_bessel_y0",
    "aten_special_bessel_y1",
    "prims_spherical_bessel_j0",
    "aten_special_airy_ai",
]


# -- coefficients, computed from their definitions -----------------------------------------------


def _hankel_coefficients(order: int, count: int) -> list[float]:
    """a_k(nu) = prod_{j<=k} (4 nu^2 - (2j - 1)^2) / (k! 8^k) of the large-argument Bessel expansions."""
    coefficients = [1.0]
    for k in range(1, count):
        coefficients.append(coefficients[-1] * (4 * order * order - (2 * k - 1) ** 2) / (8 * k))
    return coefficients


def _harmonic(k: int) -> float:
    return math.fsum(1.0 / j for j in range(1, k + 1))


def _digamma_of_integer(k: int) -> float:
    """psi(k) for k >= 1."""
    return -EULER_GAMMA + _harmonic(k - 1)


def _log_series_coefficient(k: int, order: int) -> float:
    """(psi(k + 1) + psi(k + 1 + order)) / (k! (k + order)!), of the logarithmic series of K and Y."""
    psi = _digamma_of_integer(k + 1) + _digamma_of_integer(k + 1 + order)
    return psi / (math.factorial(k) * math.factorial(k + order))


# -- modified Bessel functions I and K ----------------------------------------------------------------

# I_nu: Maclaurin series up to |x| = 12, then I_nu(x) ~ e^x / sqrt(2 pi x) sum_k (-1)^k a_k(nu) / x^k.
# The expansion's smallest term at 12 is 6e-12, enough for float32 only: float64 switches at 20
# (smallest term 5e-19; 28 terms reach 1e-17, and the series 45).
@dataclasses.dataclass(frozen=True)
class _IExpansion:
    limit: float
    series_terms: int
    asymptotic_terms: int


_I_EXPANSION = {ir.DataType.FLOAT: _IExpansion(12.0, 21, 11), DOUBLE: _IExpansion(20.0, 45, 28)}


def _bessel_i_series(x: ir.Value, order: int) -> ir.Value:
    """I_0 or I_1 by their Maclaurin series (x^2/4)^k / (k! (k + order)!)."""
    coefficients = [1.0 / (math.factorial(k) * math.factorial(k + order)) for k in range(_I_EXPANSION[x.dtype].series_terms)]
    series = sum_of_powers(op.Mul(op.Mul(x, x), 0.25), coefficients)
    return series if order == 0 else op.Mul(series, op.Mul(x, 0.5))


def _bessel_i(x: ir.Value, order: int, scaled: bool) -> ir.Value:
    """I_0 / I_1, or exp(-|x|) times them. I_1 is odd; eager gives NaN at +-inf unscaled."""
    expansion = _I_EXPANSION[x.dtype]
    limit = expansion.limit
    ax = op.Abs(x)
    small = op.LessOrEqual(ax, limit)
    xs = op.Where(small, ax, 0.0)
    series = _bessel_i_series(xs, order)
    if scaled:
        series = op.Mul(series, op.Exp(op.Neg(xs)))
    xl = op.Where(small, limit, ax)
    # sqrt(x) sqrt(2 pi), not sqrt(2 pi x): 2 pi x overflows float32 from 5.4e37 and made I NaN
    # and I scaled 0 there.
    root = op.Mul(op.Sqrt(xl), math.sqrt(2 * math.pi))
    alternating = [(-1) ** k * a for k, a in enumerate(_hankel_coefficients(order, expansion.asymptotic_terms))]
    asymptotic = op.Div(sum_of_powers(op.Reciprocal(xl), alternating), root)
    if not scaled:
        # exp(inf) * 0 is eager's NaN at infinity.
        asymptotic = op.Mul(op.Exp(xl), asymptotic)
    result = op.Where(small, series, asymptotic)
    if order == 1:
        result = op.Where(op.Less(x, 0.0), op.Neg(result), result)
    return result


# K_nu: the series K_0 = -log(x/2) I_0 + sum psi(k+1) t^k/k!^2 and
# K_1 = 1/x + log(x/2) I_1 - x/4 sum (psi(k+1) + psi(k+2)) t^k/(k!(k+1)!) (t = x^2/4) up to x = 2;
# the trapezoidal rule on exp(x) K_nu(x) = int_0^inf exp(-x (cosh s - 1)) cosh(nu s) ds, which
# converges geometrically for this analytic integrand, up to x = 12; the asymptotic series
# exp(x) K_nu(x) ~ sqrt(pi / (2x)) sum_k a_k(nu) / x^k beyond. The expansion's smallest term at 12
# is 6e-12, enough for float32 only: float64 integrates up to 25 with half the step (the
# integrand narrows as 1 / sqrt(x); the rule's error is exp(-2 pi^2 / (x h^2))) and switches there.
_K_SERIES_LIMIT = 2.0
_K_SERIES = {
    0: [_log_series_coefficient(k, 0) / 2 for k in range(14)],
    1: [_log_series_coefficient(k, 1) for k in range(14)],
}


@dataclasses.dataclass(frozen=True)
class _KQuadrature:
    limit: float
    step: float
    nodes: int
    asymptotic_terms: int


_K_QUADRATURE = {ir.DataType.FLOAT: _KQuadrature(12.0, 0.2, 20, 15), DOUBLE: _KQuadrature(25.0, 0.1, 40, 24)}


def _bessel_k_scaled(x: ir.Value, order: int) -> ir.Value:
    """exp(x) K_0(x) or exp(x) K_1(x) for x > 2."""
    rule = _K_QUADRATURE[x.dtype]
    nodes = [rule.step * j for j in range(rule.nodes)]
    middle = op.LessOrEqual(x, rule.limit)
    xm = op.Unsqueeze(op.Where(middle, x, rule.limit), op.Constant(value_ints=[-1]))
    weights = [rule.step * math.cosh(order * s) * (0.5 if j == 0 else 1.0) for j, s in enumerate(nodes)]
    exponents = constant([math.cosh(s) - 1.0 for s in nodes], x)
    quadrature = op.MatMul(op.Exp(op.Neg(op.Mul(xm, exponents))), constant(weights, x))
    xl = op.Where(middle, rule.limit, x)
    asymptotic = op.Mul(sum_of_powers(op.Reciprocal(xl), _hankel_coefficients(order, rule.asymptotic_terms)), op.Sqrt(op.Div(math.pi / 2, xl)))
    return op.Where(middle, quadrature, asymptotic)


def _bessel_k(x: ir.Value, order: int, scaled: bool) -> ir.Value:
    small = op.LessOrEqual(x, _K_SERIES_LIMIT)
    xs = op.Where(op.And(small, op.Greater(x, 0.0)), x, 1.0)
    log_half = op.Sub(op.Log(xs), math.log(2.0))  # log(x / 2): x / 2 is 0 for the smallest subnormal
    t = op.Mul(op.Mul(xs, xs), 0.25)
    if order == 0:
        series = op.Sub(sum_of_powers(t, _K_SERIES[0]), op.Mul(log_half, _bessel_i_series(xs, 0)))
    else:
        tail = op.Mul(sum_of_powers(t, _K_SERIES[1]), op.Mul(xs, 0.25))
        series = op.Sub(op.Add(op.Reciprocal(xs), op.Mul(log_half, _bessel_i_series(xs, 1))), tail)
    large = _bessel_k_scaled(op.Where(small, 3.0, x), order)
    if scaled:
        series = op.Mul(series, op.Exp(xs))
    else:
        large = op.Mul(large, op.Exp(op.Neg(x)))
    result = op.Where(small, series, large)
    result = op.Where(op.Equal(x, 0.0), INF, result)
    return op.Where(op.Less(x, 0.0), NAN, result)


@register("prims::bessel_i0", "aten::special_modified_bessel_i0")
def prims_bessel_i0(self: ir.Value) -> ir.Value:
    """bessel_i0(Tensor self) -> Tensor"""
    return elementwise(lambda x: _bessel_i(x, 0, scaled=False), self)


@register("prims::bessel_i0e")
def prims_bessel_i0e(self: ir.Value) -> ir.Value:
    """bessel_i0e(Tensor self) -> Tensor"""
    return elementwise(lambda x: _bessel_i(x, 0, scaled=True), self)


@register("prims::bessel_i1", "aten::special_modified_bessel_i1")
def prims_bessel_i1(self: ir.Value) -> ir.Value:
    """bessel_i1(Tensor self) -> Tensor"""
    return elementwise(lambda x: _bessel_i(x, 1, scaled=False), self)


@register("prims::bessel_i1e")
def prims_bessel_i1e(self: ir.Value) -> ir.Value:
    """bessel_i1e(Tensor self) -> Tensor"""
    return elementwise(lambda x: _bessel_i(x, 1, scaled=True), self)


@register("aten::special_modified_bessel_k0")
def aten_special_modified_bessel_k0(self: ir.Value) -> ir.Value:
    """special_modified_bessel_k0(Tensor self) -> Tensor"""
    return elementwise(lambda x: _bessel_k(x, 0, scaled=False), self)


@register("aten::special_modified_bessel_k1")
def aten_special_modified_bessel_k1(self: ir.Value) -> ir.Value:
    """special_modified_bessel_k1(Tensor self) -> Tensor"""
    return elementwise(lambda x: _bessel_k(x, 1, scaled=False), self)


@register("aten::special_scaled_modified_bessel_k0")
def aten_special_scaled_modified_bessel_k0(self: ir.Value) -> ir.Value:
    """special_scaled_modified_bessel_k0(Tensor x) -> Tensor"""
    return elementwise(lambda x: _bessel_k(x, 0, scaled=True), self)


@register("aten::special_scaled_modified_bessel_k1")
def aten_special_scaled_modified_bessel_k1(self: ir.Value) -> ir.Value:
    """special_scaled_modified_bessel_k1(Tensor x) -> Tensor"""
    return elementwise(lambda x: _bessel_k(x, 1, scaled=True), self)


# -- Bessel functions J and Y, Airy Ai -------------------------------------------------------------

# Up to |x| = 8 the Maclaurin series (DLMF 10.2.2, 10.8.1), in float64 because they cancel;
# beyond, Hankel's expansion J/Y = sqrt(2 / (pi x)) (P cos/sin chi -+ Q sin/cos chi),
# chi = x - (nu/2 + 1/4) pi, P = sum (-1)^k a_2k / x^2k, Q = sum (-1)^k a_2k+1 / x^2k+1.
_JY_SERIES_LIMIT = 8.0
_J_SERIES = {
    0: [(-1) ** k / math.factorial(k) ** 2 for k in range(32)],
    1: [(-1) ** k / (math.factorial(k) * math.factorial(k + 1)) for k in range(32)],
}
_Y_SERIES = {
    0: [(-1) ** k * _log_series_coefficient(k, 0) / 2 for k in range(32)],
    1: [(-1) ** k * _log_series_coefficient(k, 1) for k in range(32)],
}
_HANKEL = {order: _hankel_coefficients(order, 16) for order in (0, 1)}


def _bessel_jy(x: ir.Value, order: int, kind: str) -> ir.Value:
    """J_order (``kind`` "j") or Y_order ("y") of x."""
    ax = op.Abs(x)
    small = op.LessOrEqual(ax, _JY_SERIES_LIMIT)
    xs = working(op.Where(op.And(small, op.Greater(ax, 0.0)), ax, 1.0), wide=True)
    t = op.Mul(op.Mul(xs, xs), 0.25)
    j = sum_of_powers(t, _J_SERIES[order])
    if order == 1:
        j = op.Mul(j, op.Mul(xs, 0.5))
    if kind == "j":
        series = j
    else:
        # log x - log 2, not log(x / 2): half the smallest denormal is 0.
        log_half = op.Sub(op.Log(xs), math.log(2.0))
        if order == 0:
            series = op.Mul(op.Sub(op.Mul(log_half, j), sum_of_powers(t, _Y_SERIES[0])), 2 / math.pi)
        else:
            tail = op.Mul(sum_of_powers(t, _Y_SERIES[1]), op.Div(xs, 2 * math.pi))
            # (2 / pi) * (1 / x) as ATen: below 5.6e-309 its 1 / x is inf, and so is eager's Y1.
            series = op.Sub(op.Sub(op.Mul(op.Mul(log_half, j), 2 / math.pi), op.Mul(op.Reciprocal(xs), 2 / math.pi)), tail)
    series = op.CastLike(series, x)
    xl = op.Where(small, _JY_SERIES_LIMIT, ax)
    u = op.Reciprocal(op.Mul(xl, xl))
    coefficients = _HANKEL[order]
    p = sum_of_powers(u, [(-1) ** k * coefficients[2 * k] for k in range(8)])
    q = op.Div(sum_of_powers(u, [(-1) ** k * coefficients[2 * k + 1] for k in range(8)]), xl)
    chi = op.Sub(xl, (order / 2 + 0.25) * math.pi)
    cos, sin = op.Cos(chi), op.Sin(chi)
    if kind == "j":
        wave = op.Sub(op.Mul(p, cos), op.Mul(q, sin))
    else:
        wave = op.Add(op.Mul(p, sin), op.Mul(q, cos))
    asymptotic = op.Mul(op.Sqrt(op.Div(2 / math.pi, xl)), wave)
    result = op.Where(small, series, asymptotic)
    if kind == "j":
        if order == 0:
            return op.Where(op.Equal(x, 0.0), 1.0, result)
        return op.Where(op.Equal(x, 0.0), x, op.Where(op.Less(x, 0.0), op.Neg(result), result))
    result = op.Where(op.Equal(x, 0.0), -INF, result)
    return op.Where(op.Less(x, 0.0), NAN, result)


@register("prims::bessel_j0", "aten::special_bessel_j0")
def prims_bessel_j0(self: ir.Value) -> ir.Value:
    """bessel_j0(Tensor self) -> Tensor"""
    return elementwise(lambda x: _bessel_jy(x, 0, "j"), self)


@register("prims::bessel_j1", "aten::special_bessel_j1")
def prims_bessel_j1(self: ir.Value) -> ir.Value:
    """bessel_j1(Tensor self) -> Tensor"""
    return elementwise(lambda x: _bessel_jy(x, 1, "j"), self)


@register("aten::special_bessel_y0")
def aten_special_bessel_y0(self: ir.Value) -> ir.Value:
    """special_bessel_y0(Tensor self) -> Tensor"""
    return elementwise(lambda x: _bessel_jy(x, 0, "y"), self)


@register("aten::special_bessel_y1")
def aten_special_bessel_y1(self: ir.Value) -> ir.Value:
    """special_bessel_y1(Tensor self) -> Tensor"""
    return elementwise(lambda x: _bessel_jy(x, 1, "y"), self)


def _spherical_bessel_j0(x: ir.Value) -> ir.Value:
    """sin(x) / x, by its Taylor series near 0."""
    small = op.Less(op.Abs(x), 0.5)
    taylor = sum_of_powers(op.Mul(x, x), [(-1) ** k / math.factorial(2 * k + 1) for k in range(8)])
    safe = op.Where(small, 1.0, x)
    result = op.Where(small, taylor, op.Div(op.Sin(safe), safe))
    return op.Where(op.IsInf(x), 0.0, result)


@register("prims::spherical_bessel_j0")
def prims_spherical_bessel_j0(self: ir.Value) -> ir.Value:
    """spherical_bessel_j0(Tensor self) -> Tensor"""
    return elementwise(_spherical_bessel_j0, self)


# Airy Ai: a Taylor polynomial per interval of 1/2 for |x| < 13 (in float64); beyond,
# Ai(x) ~ exp(-zeta) / (2 sqrt(pi) x^1/4) sum (-1)^k u_k / zeta^k and
# Ai(-x) ~ (sin(zeta + pi/4) sum (-1)^k u_2k / zeta^2k - cos(zeta + pi/4) sum (-1)^k u_2k+1 / zeta^2k+1)
# / (sqrt(pi) x^1/4), zeta = 2/3 x^3/2 (DLMF 9.7.5, 9.7.9). The Maclaurin series about 0 that the
# polynomials replace cancelled (its terms grow as e^zeta): 3e7 ulps at 5.5 where the asymptotic
# expansions took over, and a float64 Ai 1e-9 off relatively at -5.6.
_AIRY_TAYLOR_LIMIT = 13.0
_AIRY_TAYLOR_WIDTH = 0.5
_AIRY_TAYLOR_TERMS = 24


def _airy_u(count: int) -> list[float]:
    """u_k = (2k+1)(2k+3)...(6k-1) / (216^k k!)."""
    u = [1.0]
    for k in range(1, count):
        u.append(u[-1] * (6 * k - 5) * (6 * k - 3) * (6 * k - 1) / ((2 * k - 1) * 216 * k))
    return u


_AIRY_U = _airy_u(12)


@functools.cache
def _airy_taylor_table() -> np.ndarray:
    """Taylor coefficients of Ai about the middle c of each interval, a row per interval.

    Ai'' = x Ai gives a[2] = c a[0] / 2 and a[n+2] = (c a[n] + a[n-1]) / ((n + 2)(n + 1)) from
    a[0] = Ai(c), a[1] = Ai'(c)."""

    def at(c, mpmath):
        a = [mpmath.airyai(c), mpmath.airyai(c, derivative=1)]
        a.append(c * a[0] / 2)
        for n in range(1, _AIRY_TAYLOR_TERMS - 2):
            a.append((c * a[n] + a[n - 1]) / ((n + 2) * (n + 1)))
        return a

    return taylor_table(at, -_AIRY_TAYLOR_LIMIT, _AIRY_TAYLOR_WIDTH, int(2 * _AIRY_TAYLOR_LIMIT / _AIRY_TAYLOR_WIDTH))


def _airy_ai(x: ir.Value) -> ir.Value:
    small = op.Less(op.Abs(x), _AIRY_TAYLOR_LIMIT)
    taylor = piecewise_taylor(op.Where(small, x, 0.0), _airy_taylor_table(), -_AIRY_TAYLOR_LIMIT, _AIRY_TAYLOR_WIDTH)
    z = op.Where(small, _AIRY_TAYLOR_LIMIT, op.Abs(x))
    root = op.Sqrt(z)
    zeta = op.Div(op.Mul(op.Mul(z, root), 2.0), 3.0)
    inverse = op.Reciprocal(zeta)
    quarter = op.Sqrt(root)
    decaying = op.Div(
        op.Mul(op.Exp(op.Neg(zeta)), sum_of_powers(inverse, [(-1) ** k * u for k, u in enumerate(_AIRY_U)])),
        op.Mul(quarter, 2 * SQRT_PI),
    )
    inverse2 = op.Mul(inverse, inverse)
    even = sum_of_powers(inverse2, [(-1) ** k * _AIRY_U[2 * k] for k in range(6)])
    odd = op.Mul(sum_of_powers(inverse2, [(-1) ** k * _AIRY_U[2 * k + 1] for k in range(6)]), inverse)
    theta = op.Add(zeta, math.pi / 4)
    oscillating = op.Div(op.Sub(op.Mul(op.Sin(theta), even), op.Mul(op.Cos(theta), odd)), op.Mul(quarter, SQRT_PI))
    result = op.Where(small, taylor, op.Where(op.Greater(x, 0.0), decaying, oscillating))
    return op.Where(op.IsInf(x), NAN, result)


@register("aten::special_airy_ai")
def aten_special_airy_ai(self: ir.Value) -> ir.Value:
    """special_airy_ai(Tensor x) -> Tensor

    In float64 for every input type: float32's asymptotic expansion, exp(-zeta) of a rounded zeta,
    was 28 ulps off at 11.55."""
    result = elementwise(_airy_ai, self, wide=True)
    if self.dtype != ir.DataType.FLOAT:
        return result
    # Eager's float32 Ai(-x) takes its phase 2 x^3/2 / 3 in float32: NaN from 3.07e25 on, where
    # 2 x^3/2 overflows (no float32 argument there determines the phase to a turn). NaN here too.
    magnitude = op.Abs(self)
    overflows = op.IsInf(op.Mul(op.Mul(magnitude, op.Sqrt(magnitude)), 2.0))
    return op.Where(op.And(op.Less(self, 0.0), overflows), NAN, result)
