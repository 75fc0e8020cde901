"""Special functions: gamma family, error-function inverses, Bessel and Airy functions, the
incomplete gamma function, Hurwitz zeta, orthogonal polynomials, hypot and nextafter.

ONNX has none of them except ``Erf``, torchlib lacks them, and PyTorch's decompositions bottom out
in ``prims`` (or stay ``aten::special_*``) for them. Each translation evaluates classical
approximations with elementwise ONNX ops: power series (each one weighted sum of powers),
asymptotic expansions, trapezoidal quadrature, and continued fractions and recurrences unrolled
to a fixed length. ``Loop`` is used only where the number of steps depends on the data: the
polynomial recurrences (up to the largest degree ``n``) and the Hurwitz zeta sum for negative
``q``.

Precision: float16/bfloat16 inputs are computed in float32 and float64 in float64. float32 stays
float32 except where PyTorch itself accumulates in double (zeta and polygamma of order >= 2) and
where a series cancels too much for single precision (incomplete gamma, the small-argument
series of the Bessel J/Y and Airy functions); those run in float64 and are cast back.

Edge values follow eager PyTorch (poles, infinities, NaN, out-of-domain arguments), including a
few of its quirks, each noted where it is reproduced. Three properties of the toolchain shape the
code: onnxscript's optimizer drops ``x + c`` for |c| < 1e-8 and ``x * c`` for c within 1e-5 of 1,
so coefficients live in vector constants; ONNX Runtime's MatMul and ReduceSum fail on empty
tensors, so inputs are padded (``_elementwise``); and its MatMul-times-constant fusion keeps the
constant in float32, so float64 series fold their constants into the coefficients.
"""

from __future__ import annotations

import dataclasses
import math
from fractions import Fraction
from typing import Any, Callable, Sequence

import numpy as np
import onnx_ir as ir
import torch
from onnx_ir.tensor_adapters import from_torch_dtype
from onnxscript import opset18 as op
from onnxscript.onnx_opset import opset26

from torch_onnx_fx.registry import register, wants_context

__all__ = [
    "prims_lgamma",
    "prims_digamma",
    "aten_polygamma",
    "prims_zeta",
    "prims_erf_inv",
    "prims_ndtri",
    "aten_special_erfcx",
    "aten_special_log_ndtr",
    "prims_igamma",
    "prims_igammac",
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
    "prims_hypot",
    "prims_nextafter_bitcast",
    "prims_nextafter",
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

_FLOAT = ir.DataType.FLOAT
_DOUBLE = ir.DataType.DOUBLE
_EULER_GAMMA = 0.57721566490153286061
_INF = math.inf
_NAN = math.nan


# -- precision and small building blocks ----------------------------------------------------------


def _working(x: ir.Value, wide: bool = False) -> ir.Value:
    """``x`` in the dtype the computation runs in: float64 for float64 (or when ``wide``), else float32."""
    dtype = _DOUBLE if wide or x.dtype == _DOUBLE else _FLOAT
    return x if x.dtype == dtype else op.Cast(x, to=dtype)


def _restore(result: ir.Value, like: ir.Value) -> ir.Value:
    """``result`` in the dtype of the floating input ``like`` (float32 for integer inputs, as ATen)."""
    dtype = like.dtype if like.dtype is not None and like.dtype.is_floating_point() else _FLOAT
    return result if result.dtype == dtype else op.Cast(result, to=dtype)


def _elementwise(compute: Callable[..., ir.Value], *inputs: ir.Value, wide: bool = False) -> ir.Value:
    """``compute`` applied to ``inputs`` in the working precision, broadcast and flattened with
    one padding element appended, and the result shaped back.

    The padding keeps tensors non-empty: ONNX Runtime's MatMul and ReduceSum, which evaluate
    the series here, fail or mis-shape on tensors with a zero-sized dimension.
    """
    values = [_working(value, wide) for value in inputs]
    shape = op.Shape(values[0] if len(values) == 1 else op.Add(*values))
    flat = [
        op.Concat(op.Reshape(op.Expand(value, shape), op.Constant(value_ints=[-1])), _constant([1.0], value), axis=0)
        for value in values
    ]
    result = op.Slice(compute(*flat), op.Constant(value_ints=[0]), op.Constant(value_ints=[-1]))
    return _restore(op.Reshape(result, shape, allowzero=1), inputs[0])


def _tensors(first: Any, second: Any) -> tuple[ir.Value, ir.Value]:
    """Both arguments as tensors: a Python number becomes a constant of the other's dtype."""
    if not isinstance(first, ir.Value):
        first = _constant(first, second)
    if not isinstance(second, ir.Value):
        second = _constant(second, first)
    return first, second


def _constant(value: Any, like: ir.Value) -> ir.Value:
    """A constant (scalar or vector) of ``like``'s dtype."""
    return op.Constant(value=np.asarray(value, dtype=like.dtype.numpy()))


def _sum_of_powers(t: ir.Value, coefficients: Sequence[float]) -> ir.Value:
    """``sum(c[k] * t**k)`` with ``coefficients`` from degree 0 up.

    Evaluated as one weighted sum of powers rather than by Horner's rule: besides being four
    nodes, it keeps the coefficients out of scalar Add/Mul nodes, which onnxscript's optimizer
    would drop as no-ops when a coefficient is within 1e-8 of 0 (or 1e-5 of 1).
    """
    powers = op.Pow(op.Unsqueeze(t, op.Constant(value_ints=[-1])), _constant(np.arange(len(coefficients)), t))
    return op.MatMul(powers, _constant(coefficients, t))


def _polyval(x: ir.Value, coefficients: Sequence[float]) -> ir.Value:
    """The polynomial with ``coefficients`` from the highest degree down."""
    return _sum_of_powers(x, list(reversed(coefficients)))


def _log1p(u: ir.Value) -> ir.Value:
    """log(1 + u) accurate for small u (Goldberg's correction); for u >= -1 and finite."""
    w = op.Add(u, 1.0)
    rounded = op.Sub(w, 1.0)
    exact = op.Equal(rounded, 0.0)
    corrected = op.Mul(op.Log(w), op.Div(u, op.Where(exact, 1.0, rounded)))
    return op.Where(exact, u, corrected)


def _expm1(u: ir.Value) -> ir.Value:
    """exp(u) - 1 accurate for small u (Kahan's correction)."""
    e = op.Exp(u)
    e_minus_one = op.Sub(e, 1.0)
    log_e = op.Log(e)
    near = op.And(op.Less(op.Abs(u), 0.5), op.Not(op.Equal(e, 1.0)))
    corrected = op.Mul(e_minus_one, op.Div(u, op.Where(near, log_e, 1.0)))
    return op.Where(op.Equal(e, 1.0), u, op.Where(near, corrected, e_minus_one))


def _is_integer(x: ir.Value) -> ir.Value:
    return op.Equal(x, op.Floor(x))


def _abs_sin_pi(x: ir.Value) -> ir.Value:
    """|sin(pi x)|, with x reduced to [-1/2, 1/2] first so that it is exactly 0 at integers."""
    return op.Abs(op.Sin(op.Mul(op.Sub(x, op.Round(x)), math.pi)))


def _false_like(x: ir.Value) -> ir.Value:
    return op.ConstantOfShape(op.Shape(x), value=ir.tensor(np.array([False])))


def _loop(
    ctx: Any,
    trip_count: ir.Value,
    state: Sequence[ir.Value],
    body: Callable[[ir.Value, list[ir.Value]], Sequence[ir.Value]],
) -> list[ir.Value]:
    """``state = body(iteration, state)`` repeated ``trip_count`` times, as an ONNX ``Loop``."""
    sub = ctx.new_subgraph("loop_body")
    iteration = sub.make_input(torch.tensor(0), "iteration")
    condition = sub.make_input(torch.tensor(True), "condition")
    carried = []
    for value in state:
        inner = sub.make_input(None, "carried")
        inner.type = value.type
        carried.append(inner)
    with sub.tracer.active():
        updated = list(body(iteration, carried))
    graph = sub.finish([condition, *updated], [torch.tensor(True), *([None] * len(updated))])
    outputs = ctx.tracer.op(
        "Loop", [trip_count, None, *state], {"body": ir.AttrGraph("body", graph)}, num_outputs=len(state), infer=False
    )
    outputs = list(outputs) if isinstance(outputs, tuple) else [outputs]
    for outer, initial in zip(outputs, state):
        outer.type, outer.shape = initial.type, initial.shape
    return outputs


def _trip_count(steps: ir.Value, limit: int) -> ir.Value:
    """The largest entry of ``steps`` (0 when empty), capped at ``limit``, as a Loop trip count."""
    flat = op.Concat(op.Reshape(steps, op.Constant(value_ints=[-1])), _constant([0.0], steps), axis=0)
    largest = op.Min(op.ReduceMax(flat, keepdims=0), _constant(float(limit), steps))
    return op.Cast(largest, to=ir.DataType.INT64)


# -- coefficients, computed from their definitions -----------------------------------------------


def _bernoulli(count: int) -> list[Fraction]:
    """Bernoulli numbers B_0 .. B_count (B_1 = -1/2)."""
    numbers = [Fraction(1)]
    for m in range(1, count + 1):
        numbers.append(-sum(math.comb(m + 1, k) * numbers[k] for k in range(m)) / (m + 1))
    return numbers


_B = _bernoulli(30)


def _zeta_of_integer(k: int) -> float:
    """Riemann zeta(k) for an integer k >= 2: a direct sum plus its Euler-Maclaurin tail."""
    n = 1000
    head = math.fsum(j**-k for j in range(1, n))
    return head + n ** (1 - k) / (k - 1) + 0.5 * n**-k + k / 12 * n ** (-k - 1)


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
    return -_EULER_GAMMA + _harmonic(k - 1)


def _log_series_coefficient(k: int, order: int) -> float:
    """(psi(k + 1) + psi(k + 1 + order)) / (k! (k + order)!), of the logarithmic series of K and Y."""
    psi = _digamma_of_integer(k + 1) + _digamma_of_integer(k + 1 + order)
    return psi / (math.factorial(k) * math.factorial(k + order))


# -- gamma family ----------------------------------------------------------------------------------

# Lanczos approximation, g = 7 with 9 terms (the coefficient set published by Godfrey).
_LANCZOS_G = 7.0
_LANCZOS = (
    0.99999999999980993, 676.5203681218851, -1259.1392167224028, 771.32342877765313, -176.61502916214059,
    12.507343278686905, -0.13857109526572012, 9.9843695780195716e-6, 1.5056327351493116e-7,
)


def _lgamma_positive(y: ir.Value) -> ir.Value:
    """log Gamma(y) for y >= 1/2 (Lanczos)."""
    z = op.Sub(y, 1.0)
    series = _constant(_LANCZOS[0], y)
    for k, coefficient in enumerate(_LANCZOS[1:], start=1):
        series = op.Add(series, op.Div(_constant(coefficient, y), op.Add(z, float(k))))
    t = op.Add(z, _LANCZOS_G + 0.5)
    head = op.Sub(op.Mul(op.Add(z, 0.5), op.Log(t)), t)
    return op.Add(op.Add(head, 0.5 * math.log(2 * math.pi)), op.Log(series))


def _lgamma(x: ir.Value) -> ir.Value:
    """log |Gamma(x)|, by reflection below 1/2: lgamma(x) = log(pi / |sin(pi x)|) - lgamma(1 - x)."""
    reflect = op.Less(x, 0.5)
    value = _lgamma_positive(op.Where(reflect, op.Sub(1.0, x), x))
    reflected = op.Sub(op.Log(op.Div(math.pi, _abs_sin_pi(x))), value)
    # Both infinities give +inf in eager (the reflection would give NaN at -inf).
    return op.Where(op.IsInf(x), _INF, op.Where(reflect, reflected, value))


def _digamma_positive(y: ir.Value) -> ir.Value:
    """psi(y) for y > 0: shifted to y + 10 by the recurrence, then the asymptotic series."""
    shift = op.Less(y, 10.0)
    z = op.Where(shift, op.Add(y, 10.0), y)
    correction = op.Reciprocal(y)
    for k in range(1, 10):
        correction = op.Add(correction, op.Reciprocal(op.Add(y, float(k))))
    u = op.Reciprocal(op.Mul(z, z))
    # psi(z) ~ log z - 1/(2z) - sum_k B_2k / (2k z^2k)
    tail = op.Mul(u, _sum_of_powers(u, [float(_B[2 * k] / (2 * k)) for k in range(1, 8)]))
    asymptotic = op.Sub(op.Sub(op.Log(z), op.Div(0.5, z)), tail)
    return op.Where(shift, op.Sub(asymptotic, correction), asymptotic)


def _digamma(x: ir.Value) -> ir.Value:
    """psi(x), by reflection for x < 0: psi(x) = psi(1 - x) - pi / tan(pi x)."""
    negative = op.Less(x, 0.0)
    value = _digamma_positive(op.Where(negative, op.Sub(1.0, x), x))
    angle = op.Mul(op.Sub(x, op.Round(x)), math.pi)
    reflected = op.Sub(value, op.Div(op.Mul(op.Cos(angle), math.pi), op.Sin(angle)))
    result = op.Where(negative, reflected, value)
    result = op.Where(op.And(negative, _is_integer(x)), _NAN, result)
    # At zero eager returns copysign(inf, -x): -inf at +0.0, +inf at -0.0.
    return op.Where(op.Equal(x, 0.0), op.Div(-1.0, x), result)


def _trigamma(x: ir.Value) -> ir.Value:
    """psi'(x): recurrence to x + 6, asymptotic series, reflection below 1/2.

    The reflection term pi^2 / sin^2(pi x) uses sin of the rounded product pi * x, as eager does,
    so non-positive integers give eager's huge finite values rather than inf.
    """
    reflect = op.Less(x, 0.5)
    y = op.Where(reflect, op.Sub(1.0, x), x)
    correction = op.Reciprocal(op.Mul(y, y))
    for k in range(1, 6):
        shifted = op.Add(y, float(k))
        correction = op.Add(correction, op.Reciprocal(op.Mul(shifted, shifted)))
    z = op.Add(y, 6.0)
    u = op.Reciprocal(op.Mul(z, z))
    # psi'(z) ~ 1/z + 1/(2 z^2) + sum_k B_2k / z^(2k+1)
    series = _sum_of_powers(u, [1.0, *[float(_B[2 * k]) for k in range(1, 8)]])
    value = op.Add(op.Add(correction, op.Div(series, z)), op.Mul(u, 0.5))
    sine = op.Sin(op.Mul(x, math.pi))
    reflected = op.Sub(op.Div(math.pi**2, op.Mul(sine, sine)), value)
    return op.Where(reflect, reflected, value)


# Euler-Maclaurin coefficients (2k)! / B_2k of the zeta tail, k = 1..12.
_ZETA_TAIL = [float(math.factorial(2 * k) / _B[2 * k]) for k in range(1, 13)]
# The direct-sum stopping test of Cephes' zeta, which eager reproduces: a term below this
# fraction of the sum ends the computation (also in float32, which eager accumulates in double).
_ZETA_EPSILON = 1.11022302462515654042e-16
# Negative q needs about -q extra terms; beyond this many the sum is cut short.
_ZETA_MAX_TERMS = 1 << 20


def _zeta(ctx: Any, x: ir.Value, q: ir.Value) -> ir.Value:
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

    def extra_term(iteration: ir.Value, state: list[ir.Value]) -> list[ir.Value]:
        k = op.Add(op.Cast(iteration, to=_DOUBLE), 10.0)
        return list(add_term(state[0], state[1], op.Pow(op.Add(q, k), minus_x), op.LessOrEqual(k, terms)))

    total, done = _loop(ctx, _trip_count(op.Sub(terms, 9.0), _ZETA_MAX_TERMS), [total, done], extra_term)
    # Euler-Maclaurin tail at w = q + m, whose term is already in the sum.
    w = op.Add(q, terms)
    b = op.Pow(w, minus_x)
    total, done = add_term(total, done, op.Sub(op.Div(op.Mul(b, w), op.Sub(x, 1.0)), op.Mul(b, 0.5)))
    factor = _constant(1.0, x)
    for i, coefficient in enumerate(_ZETA_TAIL):
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
    result = op.Where(op.And(non_positive_q, op.Not(_is_integer(x))), _NAN, total)
    result = op.Where(op.And(non_positive_q, _is_integer(q)), _INF, result)
    result = op.Where(op.Less(x, 1.0), _NAN, result)
    return op.Where(op.Equal(x, 1.0), _INF, result)


@register("prims::lgamma")
def prims_lgamma(self: ir.Value) -> ir.Value:
    """lgamma(Tensor self) -> Tensor"""
    return _elementwise(_lgamma, self)


@register("prims::digamma")
def prims_digamma(self: ir.Value) -> ir.Value:
    """digamma(Tensor self) -> Tensor"""
    return _elementwise(_digamma, self)


@register("aten::polygamma")
@wants_context
def aten_polygamma(n: int, self: ir.Value, *, ctx: Any, node: Any) -> ir.Value:
    """polygamma(int n, Tensor self) -> Tensor

    n = 0 is digamma and n = 1 trigamma; higher orders are (-1)^(n+1) n! zeta(n + 1, x), the
    zeta summed in float64 as eager does.
    """
    if n == 0:
        return _elementwise(_digamma, self)
    if n == 1:
        return _elementwise(_trigamma, self)
    x = _working(self, wide=True)
    value = _zeta(ctx, _constant(float(n + 1), x), x)
    return _restore(op.Mul(value, float((-1) ** (n + 1) * math.factorial(n))), self)


@register("prims::zeta")
@wants_context
def prims_zeta(self: Any, other: Any, *, ctx: Any, node: Any) -> ir.Value:
    """zeta(Tensor self, Tensor other) -> Tensor: the Hurwitz zeta function zeta(self, other).

    Either argument may arrive as a Python number (from special.zeta's scalar overloads).
    """
    self, other = _tensors(self, other)
    return _restore(_zeta(ctx, _working(self, wide=True), _working(other, wide=True)), self)


# -- error function family ---------------------------------------------------------------------------

_SQRT_PI = math.sqrt(math.pi)


def _erf(x: ir.Value) -> ir.Value:
    """erf(x). ONNX Runtime has no float64 Erf: there a Maclaurin series (|x| < 2.5) and 1 - erfc."""
    if x.dtype != _DOUBLE:
        return op.Erf(x)
    small = op.Less(op.Abs(x), 2.5)
    xs = op.Where(small, x, 0.0)
    # erf(x) = 2/sqrt(pi) sum_n (-1)^n x^(2n+1) / (n! (2n + 1))
    coefficients = [(-1) ** n / (math.factorial(n) * (2 * n + 1)) for n in range(45)]
    series = op.Mul(op.Mul(xs, 2.0 / _SQRT_PI), _sum_of_powers(op.Mul(xs, xs), coefficients))
    ax = op.Where(small, 2.5, op.Abs(x))
    complement = op.Mul(_erfcx_continued_fraction(ax, 40), op.Exp(op.Neg(op.Mul(ax, ax))))
    return op.Where(small, series, op.Mul(op.Sign(x), op.Sub(1.0, complement)))


def _erfcx_continued_fraction(x: ir.Value, depth: int) -> ir.Value:
    """exp(x^2) erfc(x) for x > 0 by Laplace's continued fraction
    1/sqrt(pi) / (x + (1/2)/(x + 1/(x + (3/2)/(x + ...)))), evaluated from the bottom up."""
    t = x
    for k in range(depth, 0, -1):
        t = op.Add(x, op.Div(0.5 * k, t))
    return op.Div(1.0 / _SQRT_PI, t)


def _erfcx(x: ir.Value) -> ir.Value:
    """exp(x^2) erfc(x). Direct below the threshold where the continued fraction converges
    quickly; erfcx(-x) = 2 exp(x^2) - erfcx(x) for negative x."""
    threshold, depth = (2.5, 40) if x.dtype == _DOUBLE else (1.5, 26)
    ax = op.Abs(x)
    small = op.Less(ax, threshold)
    xs = op.Where(small, ax, 0.0)
    direct = op.Mul(op.Exp(op.Mul(xs, xs)), op.Sub(1.0, _erf(xs)))
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
    double = x.dtype == _DOUBLE
    target = op.Log(complement) if double else op.Log(safe)
    for _ in range(4 if double else 3):
        # f(y) = log erfcx(y) - y^2 - log(complement), f'(y) = -2 / (sqrt(pi) erfcx(y)).
        scaled = _erfcx(y)
        f = op.Sub(op.Sub(op.Log(scaled), op.Mul(y, y)), target)
        upper = op.Add(y, op.Mul(f, op.Mul(scaled, _SQRT_PI / 2)))
        if not double:
            y = op.Where(far, upper, y)
            continue
        # Near 0, log(complement) has lost the digits of |x|: Newton on erf(y) = |x| instead.
        lower = op.Sub(y, op.Mul(op.Sub(_erf(y), magnitude), op.Mul(op.Exp(op.Mul(y, y)), _SQRT_PI / 2)))
        y = op.Where(op.Less(magnitude, 0.5), lower, upper)
    return op.Mul(op.Sign(x), y)


def _erfinv(x: ir.Value) -> ir.Value:
    w = op.Neg(op.Log(op.Mul(op.Sub(1.0, x), op.Add(1.0, x))))
    y = _inverse_erf(x, w, op.Sub(1.0, op.Abs(x)))
    y = op.Where(op.Equal(x, 0.0), x, y)
    y = op.Where(op.Equal(op.Abs(x), 1.0), op.Mul(x, _INF), y)
    return op.Where(op.Greater(op.Abs(x), 1.0), _NAN, y)


@register("prims::erf_inv")
def prims_erf_inv(self: ir.Value) -> ir.Value:
    """erf_inv(Tensor self) -> Tensor"""
    return _elementwise(_erfinv, self)


def _ndtri(p: ir.Value) -> ir.Value:
    """The inverse of the standard normal CDF: sqrt(2) erfinv(2p - 1)."""
    x = op.Sub(op.Mul(p, 2.0), 1.0)
    # (1 - x)(1 + x) = 4 p (1 - p), accurate for p near 0 where 2p - 1 is not.
    w = op.Neg(op.Log(op.Mul(op.Mul(p, 4.0), op.Sub(1.0, p))))
    complement = op.Mul(op.Min(p, op.Sub(1.0, p)), 2.0)
    y = op.Mul(_inverse_erf(x, w, complement), math.sqrt(2.0))
    y = op.Where(op.Equal(p, 0.5), 0.0, y)
    y = op.Where(op.Equal(p, 0.0), -_INF, op.Where(op.Equal(p, 1.0), _INF, y))
    outside = op.Or(op.Less(p, 0.0), op.Greater(p, 1.0))
    return op.Where(outside, _NAN, y)


@register("prims::ndtri")
def prims_ndtri(self: ir.Value) -> ir.Value:
    """ndtri(Tensor self) -> Tensor"""
    return _elementwise(_ndtri, self)


@register("aten::special_erfcx")
def aten_special_erfcx(self: ir.Value) -> ir.Value:
    """special_erfcx(Tensor self) -> Tensor"""
    return _elementwise(_erfcx, self)


def _log_ndtr(x: ir.Value) -> ir.Value:
    """log Phi(x) = log(erfcx(-x / sqrt 2) / 2) - x^2 / 2 for x <= 0, which stays finite far into the
    lower tail; log1p(-erfc(x / sqrt 2) / 2) above.
    """
    half_square = op.Mul(op.Mul(x, x), 0.5)
    lower = op.Sub(op.Log(op.Mul(_erfcx(op.Mul(x, -math.sqrt(0.5))), 0.5)), half_square)
    upper_tail = op.Mul(op.Mul(_erfcx(op.Mul(x, math.sqrt(0.5))), 0.5), op.Exp(op.Neg(half_square)))
    upper = _log1p(op.Neg(op.Where(op.Greater(x, 0.0), upper_tail, 0.0)))
    return op.Where(op.Greater(x, 0.0), upper, lower)


@register("aten::special_log_ndtr")
def aten_special_log_ndtr(self: ir.Value) -> ir.Value:
    """special_log_ndtr(Tensor self) -> Tensor"""
    return _elementwise(_log_ndtr, self)


# -- regularized incomplete gamma ----------------------------------------------------------------------

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
# lgamma(1 + a) = -gamma a + sum_k (-1)^k zeta(k) a^k / k, for small a where Lanczos at 1 + a loses a.
_LGAMMA1P = [0.0, -_EULER_GAMMA, *[(-1) ** k * _zeta_of_integer(k) / k for k in range(2, 26)]]


def _lgamma1p(a: ir.Value) -> ir.Value:
    small = op.Less(op.Abs(a), 0.2)
    series = _sum_of_powers(op.Where(small, a, 0.0), _LGAMMA1P)
    return op.Where(small, series, _lgamma_positive(op.Add(a, 1.0)))


def _gamma_temme(a: ir.Value, x: ir.Value) -> tuple[ir.Value, ir.Value]:
    """(P, Q) for a > 20 by Temme's expansion; each of P and Q is accurate where it is small."""
    m = op.Sub(op.Div(x, a), 1.0)
    phi = op.Sub(m, _log1p(m))
    eta = op.Mul(op.Sign(m), op.Sqrt(op.Mul(phi, 2.0)))
    near = op.Less(op.Abs(eta), 0.5)
    e = op.Where(near, 1.0, eta)
    mm = op.Where(near, 1.0, m)
    c0 = op.Sub(op.Reciprocal(mm), op.Reciprocal(e))
    m2, m3 = op.Mul(mm, mm), op.Mul(op.Mul(mm, mm), mm)
    e3 = op.Mul(op.Mul(e, e), e)
    c1 = op.Sub(op.Reciprocal(e3), op.Add(op.Add(op.Reciprocal(m3), op.Reciprocal(m2)), op.Div(1.0 / 12, mm)))
    c2 = op.Sub(
        _sum_of_powers(op.Reciprocal(mm), [0.0, 1.0 / 288, 1.0 / 12, 25.0 / 12, 5.0, 3.0]),
        op.Div(3.0, op.Mul(e3, op.Mul(e, e))),
    )
    c0 = op.Where(near, _sum_of_powers(eta, _TEMME_C0), c0)
    c1 = op.Where(near, _sum_of_powers(eta, _TEMME_C1), c1)
    c2 = op.Where(near, _sum_of_powers(eta, _TEMME_C2), c2)
    inverse_a = op.Reciprocal(a)
    series = op.Add(c0, op.Mul(inverse_a, op.Add(c1, op.Mul(inverse_a, c2))))
    series = op.Div(series, op.Sqrt(op.Mul(a, 2 * math.pi)))
    half = op.Mul(_erfcx(op.Mul(op.Abs(eta), op.Sqrt(op.Mul(a, 0.5)))), 0.5)
    weight = op.Exp(op.Neg(op.Mul(a, phi)))
    above = op.GreaterOrEqual(eta, 0.0)
    small_side = op.Mul(weight, op.Where(above, op.Add(half, series), op.Sub(half, series)))
    other_side = op.Sub(1.0, small_side)
    return op.Where(above, other_side, small_side), op.Where(above, small_side, other_side)


def _gamma_series(a: ir.Value, x: ir.Value) -> tuple[ir.Value, ir.Value]:
    """(P, Q) for 0 < a <= 20: the power series of P, Legendre's continued fraction of Q for
    x > max(a, 1.1), and for x <= 1.1 the series of Q that keeps it accurate for tiny a."""
    log_x = op.Log(x)
    log_scale = op.Sub(op.Sub(op.Mul(a, log_x), x), _lgamma_positive(op.Add(a, 1.0)))
    scale = op.Exp(log_scale)  # x^a e^-x / Gamma(a + 1)
    # P = scale * sum_n x^n / ((a + 1) ... (a + n))
    term, total = _constant(1.0, x), _constant(1.0, x)
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
    term, total = _constant(1.0, x), _constant(0.0, x)
    for n in range(1, 21):
        term = op.Mul(term, op.Div(op.Neg(x), float(n)))
        total = op.Add(total, op.Div(term, op.Add(a, float(n))))
    head = op.Neg(_expm1(op.Sub(op.Mul(a, log_x), _lgamma1p(a))))
    q_small = op.Sub(head, op.Mul(op.Exp(op.Sub(op.Mul(a, log_x), _lgamma1p(a))), op.Mul(a, total)))
    near_zero = op.LessOrEqual(x, 1.1)
    use_fraction = op.And(op.Not(near_zero), op.GreaterOrEqual(x, a))
    p = op.Where(use_fraction, op.Sub(1.0, q_fraction), p_series)
    q = op.Where(near_zero, q_small, op.Where(use_fraction, q_fraction, op.Sub(1.0, p_series)))
    return p, q


def _regularized_gamma(a: ir.Value, x: ir.Value, upper: bool) -> ir.Value:
    """P(a, x) (or Q when ``upper``) for same-shaped a and x, with eager's values at the edges."""
    large = op.Greater(a, _TEMME_MIN_A)
    valid = op.And(op.Greater(x, 0.0), op.Less(x, _INF))
    p_large, q_large = _gamma_temme(op.Where(large, a, 30.0), op.Where(op.And(large, valid), x, 30.0))
    small_a = op.Where(op.And(op.Greater(a, 0.0), op.Not(large)), a, 1.0)
    p_small, q_small = _gamma_series(small_a, op.Where(valid, x, 1.0))
    result = op.Where(large, q_large, q_small) if upper else op.Where(large, p_large, p_small)
    zero, one, nan = _constant(0.0, x), _constant(1.0, x), _constant(_NAN, x)
    # Q at x = 0, P at x = inf, Q at a = inf (and the complements).
    at_x_zero, at_x_inf, at_a_inf = (one, zero, one) if upper else (zero, one, zero)
    result = op.Where(op.Equal(x, _INF), at_x_inf, result)
    result = op.Where(op.Equal(a, _INF), op.Where(op.Equal(x, _INF), nan, at_a_inf), result)
    result = op.Where(op.Equal(x, 0.0), at_x_zero, result)
    result = op.Where(op.Equal(a, 0.0), op.Where(op.Greater(x, 0.0), at_x_inf, nan), result)
    result = op.Where(op.Or(op.Less(x, 0.0), op.Less(a, 0.0)), _NAN, result)
    return op.Where(op.Or(op.IsNaN(a), op.IsNaN(x)), _NAN, result)


@register("prims::igamma")
def prims_igamma(self: Any, other: Any) -> ir.Value:
    """igamma(Tensor self, Tensor other) -> Tensor: the regularized lower incomplete gamma P(self, other)."""
    self, other = _tensors(self, other)
    return _elementwise(lambda a, x: _regularized_gamma(a, x, upper=False), self, other, wide=True)


@register("prims::igammac")
def prims_igammac(self: Any, other: Any) -> ir.Value:
    """igammac(Tensor self, Tensor other) -> Tensor: the regularized upper incomplete gamma Q(self, other)."""
    self, other = _tensors(self, other)
    return _elementwise(lambda a, x: _regularized_gamma(a, x, upper=True), self, other, wide=True)


# -- modified Bessel functions I and K ----------------------------------------------------------------

# I_nu: Maclaurin series up to |x| = 12, then I_nu(x) ~ e^x / sqrt(2 pi x) sum_k (-1)^k a_k(nu) / x^k.
_I_SERIES_LIMIT = 12.0
_I_SERIES = {
    0: [1.0 / math.factorial(k) ** 2 for k in range(21)],
    1: [1.0 / (math.factorial(k) * math.factorial(k + 1)) for k in range(20)],
}
_I_ASYMPTOTIC = {order: [(-1) ** k * a for k, a in enumerate(_hankel_coefficients(order, 11))] for order in (0, 1)}


def _bessel_i_series(x: ir.Value, order: int) -> ir.Value:
    """I_0 or I_1 by their Maclaurin series (x^2/4)^k / (k! (k + order)!)."""
    series = _sum_of_powers(op.Mul(op.Mul(x, x), 0.25), _I_SERIES[order])
    return series if order == 0 else op.Mul(series, op.Mul(x, 0.5))


def _bessel_i(x: ir.Value, order: int, scaled: bool) -> ir.Value:
    """I_0 / I_1, or exp(-|x|) times them. I_1 is odd; eager gives NaN at +-inf unscaled."""
    ax = op.Abs(x)
    small = op.LessOrEqual(ax, _I_SERIES_LIMIT)
    xs = op.Where(small, ax, 0.0)
    series = _bessel_i_series(xs, order)
    if scaled:
        series = op.Mul(series, op.Exp(op.Neg(xs)))
    xl = op.Where(small, _I_SERIES_LIMIT, ax)
    asymptotic = op.Div(_sum_of_powers(op.Reciprocal(xl), _I_ASYMPTOTIC[order]), op.Sqrt(op.Mul(xl, 2 * math.pi)))
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
# exp(x) K_nu(x) ~ sqrt(pi / (2x)) sum_k a_k(nu) / x^k beyond.
_K_SERIES_LIMIT = 2.0
_K_QUADRATURE_LIMIT = 12.0
_K_SERIES = {
    0: [_log_series_coefficient(k, 0) / 2 for k in range(14)],
    1: [_log_series_coefficient(k, 1) for k in range(14)],
}
_K_STEP = 0.2
_K_NODES = [_K_STEP * j for j in range(20)]
_K_ASYMPTOTIC = {order: _hankel_coefficients(order, 15) for order in (0, 1)}


def _bessel_k_scaled(x: ir.Value, order: int) -> ir.Value:
    """exp(x) K_0(x) or exp(x) K_1(x) for x > 2."""
    middle = op.LessOrEqual(x, _K_QUADRATURE_LIMIT)
    xm = op.Unsqueeze(op.Where(middle, x, _K_QUADRATURE_LIMIT), op.Constant(value_ints=[-1]))
    weights = [_K_STEP * math.cosh(order * s) * (0.5 if j == 0 else 1.0) for j, s in enumerate(_K_NODES)]
    exponents = _constant([math.cosh(s) - 1.0 for s in _K_NODES], x)
    quadrature = op.MatMul(op.Exp(op.Neg(op.Mul(xm, exponents))), _constant(weights, x))
    xl = op.Where(middle, _K_QUADRATURE_LIMIT, x)
    asymptotic = op.Mul(_sum_of_powers(op.Reciprocal(xl), _K_ASYMPTOTIC[order]), op.Sqrt(op.Div(math.pi / 2, xl)))
    return op.Where(middle, quadrature, asymptotic)


def _bessel_k(x: ir.Value, order: int, scaled: bool) -> ir.Value:
    small = op.LessOrEqual(x, _K_SERIES_LIMIT)
    xs = op.Where(op.And(small, op.Greater(x, 0.0)), x, 1.0)
    log_half = op.Log(op.Mul(xs, 0.5))
    t = op.Mul(op.Mul(xs, xs), 0.25)
    if order == 0:
        series = op.Sub(_sum_of_powers(t, _K_SERIES[0]), op.Mul(log_half, _bessel_i_series(xs, 0)))
    else:
        tail = op.Mul(_sum_of_powers(t, _K_SERIES[1]), op.Mul(xs, 0.25))
        series = op.Sub(op.Add(op.Reciprocal(xs), op.Mul(log_half, _bessel_i_series(xs, 1))), tail)
    large = _bessel_k_scaled(op.Where(small, 3.0, x), order)
    if scaled:
        series = op.Mul(series, op.Exp(xs))
    else:
        large = op.Mul(large, op.Exp(op.Neg(x)))
    result = op.Where(small, series, large)
    result = op.Where(op.Equal(x, 0.0), _INF, result)
    return op.Where(op.Less(x, 0.0), _NAN, result)


@register("prims::bessel_i0", "aten::special_modified_bessel_i0")
def prims_bessel_i0(self: ir.Value) -> ir.Value:
    """bessel_i0(Tensor self) -> Tensor"""
    return _elementwise(lambda x: _bessel_i(x, 0, scaled=False), self)


@register("prims::bessel_i0e")
def prims_bessel_i0e(self: ir.Value) -> ir.Value:
    """bessel_i0e(Tensor self) -> Tensor"""
    return _elementwise(lambda x: _bessel_i(x, 0, scaled=True), self)


@register("prims::bessel_i1", "aten::special_modified_bessel_i1")
def prims_bessel_i1(self: ir.Value) -> ir.Value:
    """bessel_i1(Tensor self) -> Tensor"""
    return _elementwise(lambda x: _bessel_i(x, 1, scaled=False), self)


@register("prims::bessel_i1e")
def prims_bessel_i1e(self: ir.Value) -> ir.Value:
    """bessel_i1e(Tensor self) -> Tensor"""
    return _elementwise(lambda x: _bessel_i(x, 1, scaled=True), self)


@register("aten::special_modified_bessel_k0")
def aten_special_modified_bessel_k0(self: ir.Value) -> ir.Value:
    """special_modified_bessel_k0(Tensor self) -> Tensor"""
    return _elementwise(lambda x: _bessel_k(x, 0, scaled=False), self)


@register("aten::special_modified_bessel_k1")
def aten_special_modified_bessel_k1(self: ir.Value) -> ir.Value:
    """special_modified_bessel_k1(Tensor self) -> Tensor"""
    return _elementwise(lambda x: _bessel_k(x, 1, scaled=False), self)


@register("aten::special_scaled_modified_bessel_k0")
def aten_special_scaled_modified_bessel_k0(self: ir.Value) -> ir.Value:
    """special_scaled_modified_bessel_k0(Tensor x) -> Tensor"""
    return _elementwise(lambda x: _bessel_k(x, 0, scaled=True), self)


@register("aten::special_scaled_modified_bessel_k1")
def aten_special_scaled_modified_bessel_k1(self: ir.Value) -> ir.Value:
    """special_scaled_modified_bessel_k1(Tensor x) -> Tensor"""
    return _elementwise(lambda x: _bessel_k(x, 1, scaled=True), self)


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
    xs = _working(op.Where(op.And(small, op.Greater(ax, 0.0)), ax, 1.0), wide=True)
    t = op.Mul(op.Mul(xs, xs), 0.25)
    j = _sum_of_powers(t, _J_SERIES[order])
    if order == 1:
        j = op.Mul(j, op.Mul(xs, 0.5))
    if kind == "j":
        series = j
    else:
        log_half = op.Log(op.Mul(xs, 0.5))
        if order == 0:
            series = op.Mul(op.Sub(op.Mul(log_half, j), _sum_of_powers(t, _Y_SERIES[0])), 2 / math.pi)
        else:
            tail = op.Mul(_sum_of_powers(t, _Y_SERIES[1]), op.Div(xs, 2 * math.pi))
            series = op.Sub(op.Sub(op.Mul(op.Mul(log_half, j), 2 / math.pi), op.Div(2 / math.pi, xs)), tail)
    series = op.CastLike(series, x)
    xl = op.Where(small, _JY_SERIES_LIMIT, ax)
    u = op.Reciprocal(op.Mul(xl, xl))
    coefficients = _HANKEL[order]
    p = _sum_of_powers(u, [(-1) ** k * coefficients[2 * k] for k in range(8)])
    q = op.Div(_sum_of_powers(u, [(-1) ** k * coefficients[2 * k + 1] for k in range(8)]), xl)
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
    result = op.Where(op.Equal(x, 0.0), -_INF, result)
    return op.Where(op.Less(x, 0.0), _NAN, result)


@register("prims::bessel_j0", "aten::special_bessel_j0")
def prims_bessel_j0(self: ir.Value) -> ir.Value:
    """bessel_j0(Tensor self) -> Tensor"""
    return _elementwise(lambda x: _bessel_jy(x, 0, "j"), self)


@register("prims::bessel_j1", "aten::special_bessel_j1")
def prims_bessel_j1(self: ir.Value) -> ir.Value:
    """bessel_j1(Tensor self) -> Tensor"""
    return _elementwise(lambda x: _bessel_jy(x, 1, "j"), self)


@register("aten::special_bessel_y0")
def aten_special_bessel_y0(self: ir.Value) -> ir.Value:
    """special_bessel_y0(Tensor self) -> Tensor"""
    return _elementwise(lambda x: _bessel_jy(x, 0, "y"), self)


@register("aten::special_bessel_y1")
def aten_special_bessel_y1(self: ir.Value) -> ir.Value:
    """special_bessel_y1(Tensor self) -> Tensor"""
    return _elementwise(lambda x: _bessel_jy(x, 1, "y"), self)


def _spherical_bessel_j0(x: ir.Value) -> ir.Value:
    """sin(x) / x, by its Taylor series near 0."""
    small = op.Less(op.Abs(x), 0.5)
    taylor = _sum_of_powers(op.Mul(x, x), [(-1) ** k / math.factorial(2 * k + 1) for k in range(8)])
    safe = op.Where(small, 1.0, x)
    result = op.Where(small, taylor, op.Div(op.Sin(safe), safe))
    return op.Where(op.IsInf(x), 0.0, result)


@register("prims::spherical_bessel_j0")
def prims_spherical_bessel_j0(self: ir.Value) -> ir.Value:
    """spherical_bessel_j0(Tensor self) -> Tensor"""
    return _elementwise(_spherical_bessel_j0, self)


# Airy Ai: Maclaurin series Ai = c1 f - c2 g (DLMF 9.4.1) in float64 for |x| <= 5; beyond,
# Ai(x) ~ exp(-zeta) / (2 sqrt(pi) x^1/4) sum (-1)^k u_k / zeta^k and
# Ai(-x) ~ (sin(zeta + pi/4) sum (-1)^k u_2k / zeta^2k - cos(zeta + pi/4) sum (-1)^k u_2k+1 / zeta^2k+1)
# / (sqrt(pi) x^1/4), zeta = 2/3 x^3/2 (DLMF 9.7.5, 9.7.9).
_AIRY_SERIES_LIMIT = 5.0
_AIRY_C1 = 0.355028053887817239260
_AIRY_C2 = 0.258819403792806798405


def _airy_u(count: int) -> list[float]:
    """u_k = (2k+1)(2k+3)...(6k-1) / (216^k k!)."""
    u = [1.0]
    for k in range(1, count):
        u.append(u[-1] * (6 * k - 5) * (6 * k - 3) * (6 * k - 1) / ((2 * k - 1) * 216 * k))
    return u


_AIRY_U = _airy_u(12)


def _airy_series_coefficients(offset: int) -> list[float]:
    """Coefficients of f (offset 0) or g / x (offset 1) as a series in x^3."""
    coefficients, value = [], 1.0
    for k in range(20):
        coefficients.append(value)
        value /= (3 * k + 2 + offset) * (3 * k + 3 + offset)
    return coefficients


def _airy_ai(x: ir.Value) -> ir.Value:
    small = op.LessOrEqual(op.Abs(x), _AIRY_SERIES_LIMIT)
    xs = _working(op.Where(small, x, 0.0), wide=True)
    cube = op.Mul(op.Mul(xs, xs), xs)
    # The constants go into the coefficients: ONNX Runtime fuses MatMul times a constant into a
    # FusedMatMul whose float32 alpha would cost this cancelling difference its float64 digits.
    f = _sum_of_powers(cube, [_AIRY_C1 * c for c in _airy_series_coefficients(0)])
    g = op.Mul(_sum_of_powers(cube, [_AIRY_C2 * c for c in _airy_series_coefficients(1)]), xs)
    series = op.CastLike(op.Sub(f, g), x)
    z = op.Where(small, _AIRY_SERIES_LIMIT, op.Abs(x))
    root = op.Sqrt(z)
    zeta = op.Div(op.Mul(op.Mul(z, root), 2.0), 3.0)
    inverse = op.Reciprocal(zeta)
    quarter = op.Sqrt(root)
    decaying = op.Div(
        op.Mul(op.Exp(op.Neg(zeta)), _sum_of_powers(inverse, [(-1) ** k * u for k, u in enumerate(_AIRY_U)])),
        op.Mul(quarter, 2 * _SQRT_PI),
    )
    inverse2 = op.Mul(inverse, inverse)
    even = _sum_of_powers(inverse2, [(-1) ** k * _AIRY_U[2 * k] for k in range(6)])
    odd = op.Mul(_sum_of_powers(inverse2, [(-1) ** k * _AIRY_U[2 * k + 1] for k in range(6)]), inverse)
    theta = op.Add(zeta, math.pi / 4)
    oscillating = op.Div(op.Sub(op.Mul(op.Sin(theta), even), op.Mul(op.Cos(theta), odd)), op.Mul(quarter, _SQRT_PI))
    result = op.Where(small, series, op.Where(op.Greater(x, 0.0), decaying, oscillating))
    return op.Where(op.IsInf(x), _NAN, result)


@register("aten::special_airy_ai")
def aten_special_airy_ai(self: ir.Value) -> ir.Value:
    """special_airy_ai(Tensor x) -> Tensor"""
    return _elementwise(_airy_ai, self)


# -- hypot and nextafter ----------------------------------------------------------------------------


@register("prims::hypot")
def prims_hypot(self: Any, other: Any) -> ir.Value:
    """hypot(Tensor self, Tensor other) -> Tensor: sqrt(self^2 + other^2) without overflow."""
    self, other = _tensors(self, other)
    x, y = op.Abs(_working(self)), op.Abs(_working(other))
    large, small = op.Max(x, y), op.Min(x, y)
    ratio = op.Div(small, op.Where(op.Equal(large, 0.0), 1.0, large))
    result = op.Mul(large, op.Sqrt(op.Add(op.Mul(ratio, ratio), 1.0)))
    result = op.Where(op.Or(op.IsNaN(x), op.IsNaN(y)), _NAN, result)
    # As C's hypot: an infinite argument wins over a NaN.
    return _restore(op.Where(op.Or(op.IsInf(x), op.IsInf(y)), _INF, result), self)


@dataclasses.dataclass(frozen=True)
class _FloatFormat:
    precision: int  # significand bits, the implicit one included
    min_exponent: int  # of the smallest normal number
    max_finite: float
    bits: ir.DataType


_FORMATS = {
    ir.DataType.FLOAT: _FloatFormat(24, -126, float(np.finfo(np.float32).max), ir.DataType.INT32),
    ir.DataType.DOUBLE: _FloatFormat(53, -1022, float(np.finfo(np.float64).max), ir.DataType.INT64),
    ir.DataType.FLOAT16: _FloatFormat(11, -14, 65504.0, ir.DataType.INT16),
    ir.DataType.BFLOAT16: _FloatFormat(8, -126, 3.3895313892515355e38, ir.DataType.INT16),
}


@register("prims::nextafter", min_opset=26)
def prims_nextafter_bitcast(self: Any, other: Any) -> ir.Value:
    """nextafter(Tensor self, Tensor other) -> Tensor

    Steps the bit pattern: read as an integer, a float's magnitude grows with its bits, so moving
    away from zero adds one and towards zero subtracts one (from +-inf too, to +-max). All the
    selecting happens on the bits, so half-precision types need no arithmetic of their own.
    """
    self, other = _tensors(self, other)
    fmt = _FORMATS[self.dtype]
    x, y = (self, other) if self.dtype in (_FLOAT, _DOUBLE) else (op.Cast(self, to=_FLOAT), op.Cast(other, to=_FLOAT))
    bits = op.Cast(opset26.BitCast(self, to=fmt.bits), to=ir.DataType.INT64)
    other_bits = op.Cast(opset26.BitCast(other, to=fmt.bits), to=ir.DataType.INT64)
    up = op.Greater(y, x)
    away = op.Equal(up, op.Greater(x, 0.0))
    one = op.Constant(value_int=1)
    result = op.Add(bits, op.Where(away, one, op.Neg(one)))
    # From zero: the smallest subnormal, +-; its negative has the sign bit and the lowest bit set.
    negative_smallest = op.Constant(value_int=1 - 2 ** (int(fmt.bits.itemsize) * 8 - 1))
    result = op.Where(op.Equal(x, 0.0), op.Where(up, one, negative_smallest), result)
    result = op.Where(op.Equal(x, y), other_bits, result)
    result = op.Where(op.IsNaN(y), other_bits, result)
    result = op.Where(op.IsNaN(x), bits, result)
    return opset26.BitCast(op.Cast(result, to=fmt.bits), to=self.dtype)


@register("prims::nextafter")
def prims_nextafter(self: Any, other: Any) -> ir.Value:
    """nextafter(Tensor self, Tensor other) -> Tensor

    Without BitCast (opset < 26): x plus or minus one unit in the last place of x's format,
    computed in a wider type where that sum is exact. The unit is 2^(e - p + 1) for
    2^e <= |x| < 2^(e+1) (e no lower than the format's minimum exponent), halved when stepping
    down from an exact power of two.
    """
    self, other = _tensors(self, other)
    fmt = _FORMATS[self.dtype]
    wide = _DOUBLE if self.dtype in (_FLOAT, _DOUBLE) else _FLOAT
    x, y = op.Cast(self, to=wide), op.Cast(other, to=wide)
    magnitude = op.Abs(x)
    safe = op.Where(op.Or(op.Equal(magnitude, 0.0), op.IsInf(magnitude)), 1.0, magnitude)
    exponent = op.Floor(op.Div(op.Log(safe), math.log(2.0)))
    # log2 may round across a power of two: one correction each way.
    two = _constant(2.0, x)
    exponent = op.Where(op.Greater(op.Pow(two, exponent), safe), op.Sub(exponent, 1.0), exponent)
    exponent = op.Where(op.LessOrEqual(op.Pow(two, op.Add(exponent, 1.0)), safe), op.Add(exponent, 1.0), exponent)
    unit = op.Pow(two, op.Sub(op.Max(exponent, float(fmt.min_exponent)), float(fmt.precision - 1)))
    power_of_two = op.And(op.Equal(op.Pow(two, exponent), safe), op.Greater(exponent, float(fmt.min_exponent)))
    up = op.Greater(y, x)
    away = op.Equal(up, op.Greater(x, 0.0))
    step = op.Where(op.Or(away, op.Not(power_of_two)), unit, op.Mul(unit, 0.5))
    result = op.Add(x, op.Where(up, step, op.Neg(step)))
    smallest = 2.0 ** (fmt.min_exponent - fmt.precision + 1)
    result = op.Where(op.Equal(x, 0.0), op.Where(up, _constant(smallest, x), _constant(-smallest, x)), result)
    result = op.Where(op.IsInf(x), op.Mul(op.Sign(x), fmt.max_finite), result)
    result = op.Where(op.Equal(x, y), y, result)
    result = op.Where(op.Or(op.IsNaN(x), op.IsNaN(y)), op.Add(x, y), result)
    return op.Cast(result, to=self.dtype)


# -- orthogonal polynomials ---------------------------------------------------------------------------


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
    return op.Equal(op.Mod(n, _constant(2.0, n), fmod=1), 1.0)


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
    return op.Expand(_constant(1.0, n), op.Shape(n))


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


def _orthogonal_polynomial(ctx: Any, node: Any, x: Any, n: Any, recurrence: _Recurrence) -> ir.Value:
    """P_n(x) elementwise for tensors x and n: a Loop over k = 2 .. max(n) carries the
    recurrence for every element and keeps each element's value at k = n.

    n is truncated to an integer as eager does; negative n (and NaN, and values beyond int64,
    which eager's conversion turns negative) give 0.
    """
    dtype = from_torch_dtype(node.meta["val"].dtype)
    work = _DOUBLE if dtype == _DOUBLE else _FLOAT
    x = op.Cast(x, to=work) if isinstance(x, ir.Value) else op.Constant(value=np.asarray(x, dtype=work.numpy()))
    n = op.Cast(n, to=work) if isinstance(n, ir.Value) else op.Constant(value=np.asarray(n, dtype=work.numpy()))
    n = op.Where(op.Less(n, 0.0), op.Ceil(n), op.Floor(n))
    n = op.Where(op.Or(op.IsNaN(n), op.GreaterOrEqual(n, 2.0**63)), -1.0, n)
    shape = op.Shape(op.Add(x, n))
    x, n = op.Expand(x, shape), op.Expand(n, shape)
    argument = op.Sub(op.Add(x, x), 1.0) if recurrence.shifted else x
    first = recurrence.first(argument)
    value = op.Where(op.Equal(n, 0.0), 1.0, op.Where(op.Equal(n, 1.0), first, 0.0))

    def step(iteration: ir.Value, state: list[ir.Value]) -> list[ir.Value]:
        p, q, value = state
        k = op.Add(op.Cast(iteration, to=work), 2.0)
        r = recurrence.step(k, argument, p, q)
        return [op.Identity(q), r, op.Where(op.Equal(n, k), r, value)]

    trip_count = _trip_count(op.Sub(op.Min(n, float(_MAX_DEGREE)), 1.0), _MAX_DEGREE)
    _, _, value = _loop(ctx, trip_count, [_one(x), first, value], step)
    if recurrence.special is not None:
        value = recurrence.special(x, n, value)
    value = op.Where(op.Less(n, 0.0), 0.0, value)
    return op.Cast(value, to=dtype)


def _polynomial_translation(name: str) -> Callable[..., ir.Value]:
    recurrence = _RECURRENCES[name]

    @wants_context
    def translation(x: Any, n: Any, *, ctx: Any, node: Any) -> ir.Value:
        return _orthogonal_polynomial(ctx, node, x, n, recurrence)

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
