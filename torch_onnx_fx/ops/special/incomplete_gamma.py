"""The regularized incomplete gamma functions: ``igamma`` (P) and ``igammac`` (Q).

Computed in float64 as a pair (P, Q), each accurate where it is small: Temme's uniform asymptotic
expansion for a > 20, and below it the power series of P, Legendre's continued fraction of Q, or
for x <= 1.1 a series of Q that stays accurate for tiny a.
"""

from __future__ import annotations

import math
from typing import Any

import onnx_ir as ir
from onnxscript import opset18 as op

from torch_onnx_fx.ops.special._series import (
    INF,
    NAN,
    constant,
    elementwise,
    expm1,
    log1p,
    sum_of_powers,
    tensors,
)
from torch_onnx_fx.ops.special.error import erfcx
from torch_onnx_fx.ops.special.gamma import lgamma_near_one, lgamma_positive
from torch_onnx_fx.registry import register

__all__ = ["prims_igamma", "prims_igammac"]


# Temme's uniform asymptotic expansion (DLMF 8.12): with lambda = x / a and
# eta = sign(lambda - 1) sqrt(2 (lambda - 1 - log lambda)),
#   Q(a, x) = erfc(eta sqrt(a / 2)) / 2 + exp(-a eta^2 / 2) / sqrt(2 pi a) sum_k c_k(eta) a^-k.
# c_0..c_2 in closed form; near eta = 0, where those cancel, their Taylor series (coefficients
# computed from the closed forms by a Cauchy integral in high precision), lowest degree first.
_TEMME_C0 = (
    -0.33333333333333333, 0.083333333333333333, -0.014814814814814815, 0.0011574074074074074,
    0.0003527336860670194, -0.00017875514403292181, 3.9192631785224378e-5, -2.1854485106799922e-6,
    -1.85406221071516e-6, 8.296711340953086e-7, -1.7665952736826079e-7, 6.7078535434014986e-9,
)
_TEMME_C1 = (
    -0.0018518518518518519, -0.0034722222222222222, 0.0026455026455026455, -0.00099022633744855967,
    0.00020576131687242798, -4.0187757201646091e-7, -1.8098550334489978e-5, 7.6491609160811101e-6,
    -1.6120900894563446e-6, 4.6471278028074343e-9,
)
_TEMME_C2 = (
    0.0041335978835978836, -0.0026813271604938272, 0.00077160493827160494, 2.0093878600823045e-6,
    -0.00010736653226365161, 5.2923448829120125e-5, -1.2760635188618728e-5, 3.4235787340961381e-8,
)
# Above this a, Temme's expansion (three terms) is accurate to ~5e-7 (relative) for every x.
_TEMME_MIN_A = 20.0
_SERIES_TERMS = 40
_FRACTION_DEPTH = 30


def _lgamma1p(a: ir.Value) -> ir.Value:
    """lgamma(1 + a), by its series in a for small a, where forming 1 + a would round a."""
    small = op.Less(op.Abs(a), 0.2)
    series = sum_of_powers(op.Where(small, a, 0.0), lgamma_near_one()[:26])
    return op.Where(small, series, lgamma_positive(op.Add(a, 1.0)))


def _gamma_temme(a: ir.Value, x: ir.Value) -> tuple[ir.Value, ir.Value]:
    """(P, Q) for a > 20 by Temme's expansion; each of P and Q is accurate where it is small."""
    m = op.Sub(op.Div(x, a), 1.0)
    phi = op.Sub(m, log1p(m))
    eta = op.Mul(op.Sign(m), op.Sqrt(op.Mul(phi, 2.0)))
    near = op.Less(op.Abs(eta), 0.5)
    e = op.Where(near, 1.0, eta)
    mm = op.Where(near, 1.0, m)
    c0 = op.Sub(op.Reciprocal(mm), op.Reciprocal(e))
    m2, m3 = op.Mul(mm, mm), op.Mul(op.Mul(mm, mm), mm)
    e3 = op.Mul(op.Mul(e, e), e)
    c1 = op.Sub(op.Reciprocal(e3), op.Add(op.Add(op.Reciprocal(m3), op.Reciprocal(m2)), op.Div(1.0 / 12, mm)))
    c2 = op.Sub(
        sum_of_powers(op.Reciprocal(mm), [0.0, 1.0 / 288, 1.0 / 12, 25.0 / 12, 5.0, 3.0]),
        op.Div(3.0, op.Mul(e3, op.Mul(e, e))),
    )
    c0 = op.Where(near, sum_of_powers(eta, _TEMME_C0), c0)
    c1 = op.Where(near, sum_of_powers(eta, _TEMME_C1), c1)
    c2 = op.Where(near, sum_of_powers(eta, _TEMME_C2), c2)
    inverse_a = op.Reciprocal(a)
    series = op.Add(c0, op.Mul(inverse_a, op.Add(c1, op.Mul(inverse_a, c2))))
    series = op.Div(series, op.Sqrt(op.Mul(a, 2 * math.pi)))
    half = op.Mul(erfcx(op.Mul(op.Abs(eta), op.Sqrt(op.Mul(a, 0.5)))), 0.5)
    weight = op.Exp(op.Neg(op.Mul(a, phi)))
    above = op.GreaterOrEqual(eta, 0.0)
    small_side = op.Mul(weight, op.Where(above, op.Add(half, series), op.Sub(half, series)))
    other_side = op.Sub(1.0, small_side)
    return op.Where(above, other_side, small_side), op.Where(above, small_side, other_side)


def _gamma_series(a: ir.Value, x: ir.Value) -> tuple[ir.Value, ir.Value]:
    """(P, Q) for 0 < a <= 20: the power series of P, Legendre's continued fraction of Q for
    x > max(a, 1.1), and for x <= 1.1 the series of Q that keeps it accurate for tiny a."""
    log_x = op.Log(x)
    log_scale = op.Sub(op.Sub(op.Mul(a, log_x), x), lgamma_positive(op.Add(a, 1.0)))
    scale = op.Exp(log_scale)  # x^a e^-x / Gamma(a + 1)
    # P = scale * sum_n x^n / ((a + 1) ... (a + n))
    term, total = constant(1.0, x), constant(1.0, x)
    for n in range(1, _SERIES_TERMS + 1):
        term = op.Mul(term, op.Div(x, op.Add(a, float(n))))
        total = op.Add(total, term)
    p_series = op.Mul(scale, total)
    # Q = x^a e^-x / Gamma(a) / (x + 1 - a - 1 (1 - a) / (x + 3 - a - 2 (2 - a) / (x + 5 - a - ...)))
    t = op.Sub(op.Add(x, float(2 * _FRACTION_DEPTH + 1)), a)
    for k in range(_FRACTION_DEPTH, 0, -1):
        t = op.Sub(op.Sub(op.Add(x, float(2 * k - 1)), a), op.Div(op.Mul(op.Sub(float(k), a), float(k)), t))
    q_fraction = op.Div(op.Mul(scale, a), t)
    # Q = -expm1(a log x - lgamma(1 + a)) - x^a / Gamma(a) sum_{n>=1} (-x)^n / (n! (a + n))
    term, total = constant(1.0, x), constant(0.0, x)
    for n in range(1, 21):
        term = op.Mul(term, op.Div(op.Neg(x), float(n)))
        total = op.Add(total, op.Div(term, op.Add(a, float(n))))
    head = op.Neg(expm1(op.Sub(op.Mul(a, log_x), _lgamma1p(a))))
    q_small = op.Sub(head, op.Mul(op.Exp(op.Sub(op.Mul(a, log_x), _lgamma1p(a))), op.Mul(a, total)))
    near_zero = op.LessOrEqual(x, 1.1)
    use_fraction = op.And(op.Not(near_zero), op.GreaterOrEqual(x, a))
    p = op.Where(use_fraction, op.Sub(1.0, q_fraction), p_series)
    q = op.Where(near_zero, q_small, op.Where(use_fraction, q_fraction, op.Sub(1.0, p_series)))
    return p, q


def _regularized_gamma(a: ir.Value, x: ir.Value, upper: bool) -> ir.Value:
    """P(a, x) (or Q when ``upper``) for same-shaped a and x, with eager's values at the edges."""
    large = op.Greater(a, _TEMME_MIN_A)
    valid = op.And(op.Greater(x, 0.0), op.Less(x, INF))
    p_large, q_large = _gamma_temme(op.Where(large, a, 30.0), op.Where(op.And(large, valid), x, 30.0))
    small_a = op.Where(op.And(op.Greater(a, 0.0), op.Not(large)), a, 1.0)
    p_small, q_small = _gamma_series(small_a, op.Where(valid, x, 1.0))
    result = op.Where(large, q_large, q_small) if upper else op.Where(large, p_large, p_small)
    zero, one, nan = constant(0.0, x), constant(1.0, x), constant(NAN, x)
    # Q at x = 0, P at x = inf, Q at a = inf (and the complements). The cases apply in ATen's
    # order of precedence, the last here first there; a NaN argument only where none of them
    # does (ATen returns P(nan, 0) = 0 and P(inf, nan) = 0 before it meets the NaN).
    at_x_zero, at_x_inf, at_a_inf = (one, zero, one) if upper else (zero, one, zero)
    result = op.Where(op.Or(op.IsNaN(a), op.IsNaN(x)), NAN, result)
    result = op.Where(op.Equal(x, INF), at_x_inf, result)
    result = op.Where(op.Equal(a, INF), op.Where(op.Equal(x, INF), nan, at_a_inf), result)
    result = op.Where(op.Equal(x, 0.0), at_x_zero, result)
    result = op.Where(op.Equal(a, 0.0), op.Where(op.Greater(x, 0.0), at_x_inf, nan), result)
    return op.Where(op.Or(op.Less(x, 0.0), op.Less(a, 0.0)), NAN, result)


@register("prims::igamma")
def prims_igamma(self: Any, other: Any) -> ir.Value:
    """igamma(Tensor self, Tensor other) -> Tensor: the regularized lower incomplete gamma P(self, other)."""
    self, other = tensors(self, other)
    return elementwise(lambda a, x: _regularized_gamma(a, x, upper=False), self, other, wide=True)


@register("prims::igammac")
def prims_igammac(self: Any, other: Any) -> ir.Value:
    """igammac(Tensor self, Tensor other) -> Tensor: the regularized upper incomplete gamma Q(self, other)."""
    self, other = tensors(self, other)
    return elementwise(lambda a, x: _regularized_gamma(a, x, upper=True), self, other, wide=True)
