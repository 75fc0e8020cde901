"""Special functions (``torch_onnx_fx/ops/special/``), exported and compared with eager PyTorch.

The inputs reach into every region of each approximation and onto its edges: poles and zeros,
the switch points between series, quadrature and asymptotic expansions, infinities, NaN and
out-of-domain arguments, where the translations reproduce eager's values (NaN, inf and a few
quirks). float32 unless a case says otherwise; one case per family keeps the exports few.
"""

from __future__ import annotations

import pytest
import torch

import torch_onnx_fx
from helpers import assert_matches_eager

S = torch.special
INF, NAN = float("inf"), float("nan")

REAL_LINE = [
    -INF, -1e30, -100.5, -20.3, -8.478, -3.0, -2.5, -1.0, -0.5, -1e-30, -0.0, 0.0, 1e-30, 1e-5, 0.25, 0.5,
    1.0, 1.4616, 2.0, 2.5, 5.0, 7.9, 8.1, 11.9, 12.1, 20.0, 50.0, 100.0, 1e10, 1e30, INF, NAN,
]


def real_line(dtype: torch.dtype = torch.float32) -> torch.Tensor:
    return torch.tensor(REAL_LINE, dtype=dtype)


def dense(low: float, high: float, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    return torch.linspace(low, high, 401, dtype=dtype)


def gamma_family(x):
    return torch.lgamma(x), torch.digamma(x), torch.polygamma(1, x), torch.polygamma(2, x), torch.polygamma(4, x)


def inverse_normal(x, p):
    return torch.erfinv(x), S.ndtri(p)


def bessel(x):
    return (
        torch.i0(x), S.i0e(x), S.i1(x), S.i1e(x), S.modified_bessel_i0(x), S.modified_bessel_i1(x),
        S.modified_bessel_k0(x), S.modified_bessel_k1(x), S.scaled_modified_bessel_k0(x), S.scaled_modified_bessel_k1(x),
        S.bessel_j0(x), S.bessel_j1(x), S.bessel_y0(x), S.bessel_y1(x), S.spherical_bessel_j0(x), S.airy_ai(x),
    )


POLYNOMIALS = [
    S.chebyshev_polynomial_t, S.chebyshev_polynomial_u, S.chebyshev_polynomial_v, S.chebyshev_polynomial_w,
    S.shifted_chebyshev_polynomial_t, S.shifted_chebyshev_polynomial_u, S.shifted_chebyshev_polynomial_v,
    S.shifted_chebyshev_polynomial_w, S.hermite_polynomial_h, S.hermite_polynomial_he, S.laguerre_polynomial_l,
    S.legendre_polynomial_p,
]


def polynomials(x, n):
    return tuple(f(x, n) for f in POLYNOMIALS)


def polynomial_grid() -> tuple[torch.Tensor, torch.Tensor]:
    # n is truncated; negative, NaN and huge n give 0; |x| = 1 (x = 0, 1 when shifted) are special
    # cases. NaN x is left out: eager returns whatever the previous element left behind for some.
    x = torch.tensor([-2.0, -1.0, -0.5, 0.0, 0.3, 0.5, 0.9, 1.0, 1.5, 3.0, INF, -INF])[:, None]
    n = torch.tensor([-1.0, -0.5, 0.0, 0.7, 1.0, 2.0, 3.9, 6.0, 7.0, 9.0, 12.0, 30.0, NAN, INF, -INF, 1e20])
    return x, n


def incomplete_gamma_grid(dtype: torch.dtype = torch.float32) -> tuple[torch.Tensor, torch.Tensor]:
    edges_a = [-1.0, 0.0, 0.0, 0.0, 1.0, 1.0, 1.0, INF, INF, 2.0, 1e-30, NAN, 1.0, 0.5, 19.5, 20.5, 25.0, 1e-3, 1e3, 1e6]
    edges_x = [1.0, 0.0, 1.0, -1.0, 0.0, INF, 1e-30, 1.0, INF, 1e30, 1.0, 1.0, NAN, 1e-3, 21.0, 0.5, 100.0, 1.1, 1010.0, 1e6 + 10]
    a, x = torch.meshgrid(torch.logspace(-3, 3, 23), torch.cat([torch.logspace(-3, 3.3, 29), torch.tensor([1.1])]), indexing="ij")
    a = torch.cat([a.flatten(), torch.tensor(edges_a)]).to(dtype)
    x = torch.cat([x.flatten(), torch.tensor(edges_x)]).to(dtype)
    return a, x


def zeta_args(dtype: torch.dtype = torch.float32) -> tuple[torch.Tensor, torch.Tensor]:
    # Integer orders allow negative q (summed term by term up to q + m > 9, in a Loop).
    s = [1.0, 0.5, 2.0, 2.0, 2.0, 2.0, 3.0, 3.0, 2.5, 2.5, INF, 2.0, 2.0, NAN, 2.0, 1.5, -2.0, 3.0, 2.0, 4.0, 30.0]
    q = [1.0, 1.0, 0.0, -1.0, -1.5, 1e-30, -2.5, INF, -1.5, 0.5, 1.0, 1e30, -INF, 1.0, NAN, -0.0, -1.5, -20.5, 0.3, -100.25, 0.5]
    grid_s, grid_q = torch.meshgrid(torch.linspace(1.01, 10, 12), torch.linspace(-5.5, 20, 15), indexing="ij")
    return (
        torch.cat([torch.tensor(s), grid_s.flatten()]).to(dtype),
        torch.cat([torch.tensor(q), grid_q.flatten()]).to(dtype),
    )


def probabilities(dtype: torch.dtype = torch.float32) -> tuple[torch.Tensor, torch.Tensor]:
    x = torch.cat([torch.linspace(-1, 1, 201), torch.tensor([-1.1, 1.1, -0.0, 1e-30, 1 - 1e-7, -1 + 1e-7, NAN])])
    p = torch.cat([torch.linspace(0, 1, 201), torch.tensor([-0.1, 1.1, 1e-45, 1e-30, 1e-10, 1 - 1e-7, NAN])])
    if dtype == torch.float64:
        x = torch.cat([x.double(), torch.tensor([1 - 1e-15, -(1 - 2**-53)], dtype=dtype)])
        p = torch.cat([p.double(), torch.tensor([1e-300, 5e-324], dtype=dtype)])
    return x.to(dtype), p.to(dtype)


def nextafter_args(dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    finfo = torch.finfo(dtype)
    x = [0.0, -0.0, 1.0, 1.0, INF, -INF, NAN, 1.0, finfo.max, finfo.smallest_normal, finfo.smallest_normal, 2.0, -2.0, 0.0, 1.0, -1.5, 7.0]
    y = [1.0, -1.0, 2.0, 0.0, 0.0, 0.0, 1.0, 1.0, INF, 0.0, 1.0, 0.0, 0.0, -0.0, NAN, -3.0, 7.0]
    return torch.tensor(x, dtype=dtype), torch.tensor(y, dtype=dtype)


CASES = {
    "gamma_family": (gamma_family, lambda: (real_line(),)),
    "gamma_family_dense": (gamma_family, lambda: (dense(-30, 30),)),
    "mvlgamma": (lambda x: (torch.mvlgamma(x, 1), torch.mvlgamma(x, 3), S.multigammaln(x, 5)), lambda: (dense(2.01, 40),)),
    "polygamma_orders": (lambda x: tuple(torch.polygamma(n, x) for n in range(6)), lambda: (dense(-9.9, 9.9),)),
    "zeta": (lambda s, q: S.zeta(s, q), zeta_args),
    "inverse_normal": (inverse_normal, probabilities),
    "erfcx_log_ndtr": (lambda x: (S.erfcx(x), S.log_ndtr(x)), lambda: (torch.cat([dense(-30, 30), real_line()]),)),
    "incomplete_gamma": (lambda a, x: (torch.igamma(a, x), torch.igammac(a, x)), incomplete_gamma_grid),
    "bessel": (bessel, lambda: (real_line(),)),
    "bessel_dense": (bessel, lambda: (dense(-40, 40),)),
    "hypot": (lambda x, y: torch.hypot(x, y), lambda: (torch.tensor([INF, NAN, 3e30, 0.0, -3.0, -INF, 1e-30, 1e38]), torch.tensor([NAN, INF, 4e30, -0.0, 4.0, 1.0, 1e-30, 1e38]))),
    "polynomials": (polynomials, polynomial_grid),
    "polynomials_integer_n": (polynomials, lambda: (torch.linspace(-1.5, 1.5, 13), torch.arange(0, 13)[:, None])),
    "polynomials_scalar_n": (lambda x: tuple(f(x, 5) for f in POLYNOMIALS), lambda: (torch.linspace(-1.5, 1.5, 13),)),
    "polynomials_scalar_x": (lambda n: tuple(f(0.25, n) for f in POLYNOMIALS), lambda: (torch.arange(-2, 12),)),
    "empty_and_scalar": (
        lambda e, s: (
            S.i0e(e), S.bessel_y1(e), S.airy_ai(e), S.ndtri(e), S.chebyshev_polynomial_t(e, e),
            torch.digamma(s), torch.polygamma(2, s), torch.igamma(s, s), S.scaled_modified_bessel_k1(s),
        ),
        lambda: (torch.empty(1, 0, 3), torch.tensor(0.7)),
    ),
}

# float64 runs in float64 throughout, so most comparisons can be tight. Eager's own float64
# values bound the rest: its Bessel J/Y and Airy are accurate to ~1e-6 only in places (Airy near
# x = -2.1), and Temme's three-term expansion behind igamma for a > 20 to ~5e-7. The gamma grid
# avoids the poles, where eager's float64 trigamma returns rounding noise (1e31 or so).
FLOAT64_CASES = {
    "gamma_family": (gamma_family, lambda: (dense(-30, 30, torch.float64) + 0.0123,), 1e-9),
    "zeta": (lambda s, q: S.zeta(s, q), lambda: zeta_args(torch.float64), 1e-9),
    "inverse_normal": (inverse_normal, lambda: probabilities(torch.float64), 1e-9),
    "erfcx_log_ndtr": (lambda x: (S.erfcx(x), S.log_ndtr(x)), lambda: (dense(-30, 30, torch.float64),), 1e-9),
    "incomplete_gamma": (lambda a, x: (torch.igamma(a, x), torch.igammac(a, x)), lambda: incomplete_gamma_grid(torch.float64), 1e-6),
    "bessel": (bessel, lambda: (torch.cat([dense(-40, 40, torch.float64), real_line(torch.float64)]),), 1e-5),
    "polynomials": (polynomials, lambda: tuple(t.double() for t in polynomial_grid()), 1e-9),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_special_function_matches_eager(name):
    fn, make_args = CASES[name]
    assert_matches_eager(fn, make_args(), rtol=1e-3, atol=1e-5)


@pytest.mark.parametrize("name", sorted(FLOAT64_CASES))
def test_special_function_float64_matches_eager(name):
    fn, make_args, rtol = FLOAT64_CASES[name]
    assert_matches_eager(fn, make_args(), rtol=rtol, atol=rtol / 10)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_precision_computes_in_float32(dtype):
    x = dense(-10, 10).to(dtype)
    p = torch.linspace(-0.99, 0.99, 101, dtype=dtype)
    fn = lambda x, p: (torch.lgamma(x), torch.digamma(x), torch.i0(x), S.i1e(x), torch.polygamma(2, x), torch.erfinv(p))
    rtol, atol = (1e-2, 1e-3) if dtype == torch.float16 else (5e-2, 1e-2)
    assert_matches_eager(fn, (x, p), rtol=rtol, atol=atol)


@pytest.mark.parametrize("opset_version", [20, 26])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16])
def test_nextafter_is_exact(dtype, opset_version):
    # Opset 26 steps the bits through BitCast; older opsets add one unit in the last place.
    x, y = nextafter_args(dtype)
    assert_matches_eager(lambda x, y: torch.nextafter(x, y), (x, y), rtol=0, atol=0, opset_version=opset_version)


def test_integer_inputs_give_float32():
    x = torch.arange(-5, 6)
    fn = lambda x: (S.bessel_j0(x), S.airy_ai(x), S.erfcx(x), S.modified_bessel_k1(x), S.chebyshev_polynomial_t(x, x), S.zeta(x, 2))
    assert_matches_eager(fn, (x,), rtol=1e-3, atol=1e-5)


def test_dynamic_shapes():
    fn = lambda x, n: (S.bessel_y1(x), torch.polygamma(3, x), S.hermite_polynomial_he(x, n), torch.igammac(x, n.float()))
    assert_matches_eager(
        fn,
        (torch.rand(2, 3) * 20, torch.arange(3)),
        dynamic_shapes=({0: "rows", 1: "cols"}, {0: "cols"}),
        more_inputs=[((torch.rand(4, 5) * 20, torch.arange(5)), {}), ((torch.rand(0, 5), torch.arange(5)), {})],
        rtol=1e-3,
        atol=1e-5,
    )


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_lgamma_of_denormals_and_values_near_zero(dtype):
    # The reflection took log(pi / |sin(pi x)|): the quotient overflowed to inf for denormal x.
    tiny = [1e-40, 1e-45, 3e-39] if dtype == torch.float32 else [1e-310, 5e-324, 2e-308]
    x = torch.tensor([*tiny, *(-t for t in tiny), 1e-9, -1e-9, 2e-8, 0.0, -0.0, 0.3, -2.5], dtype=dtype)
    rtol = 4e-6 if dtype == torch.float32 else 1e-13
    assert_matches_eager(lambda x: (torch.lgamma(x), torch.mvlgamma(x.abs() + 1, 3)), (x,), rtol=rtol, atol=0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_bessel_y_of_denormals(dtype):
    # log(x / 2) was -inf for the smallest denormal, and its product with a zero series NaN.
    tiny = [1e-40, 1e-45, 3e-39, 1e-30] if dtype == torch.float32 else [1e-310, 5e-324, 1e-300, 2e-308]
    x = torch.tensor([*tiny, 0.5, 3.0], dtype=dtype)
    assert_matches_eager(lambda x: (torch.special.bessel_y0(x), torch.special.bessel_y1(x)), (x,), rtol=1e-6, atol=0)


def test_erfc_keeps_its_tail_in_every_type():
    # 1 - erf(x) in float32 cancels: erfc(4.6) (7.4e-11) came out 0, and log(erfc(x)) -inf. ATen's
    # float32 erfc keeps its relative precision down to the subnormals (it flushes to 0 a little
    # before the float64 value rounds to 0: one subnormal step, the atol).
    x = torch.cat([dense(-5, 11), real_line()])
    assert_matches_eager(lambda x: torch.erfc(x), (x,), rtol=3e-7, atol=1.5e-45)
    assert_matches_eager(lambda x: torch.erfc(x), (x.to(torch.float16),), rtol=1e-3, atol=0)
    assert_matches_eager(lambda n: torch.erfc(n), (torch.arange(-3, 12),), rtol=3e-7, atol=0)


def test_float64_erf_erfc_and_gelu_load_and_keep_float64_precision():
    # ONNX Runtime has no float64 Erf: a float64 model with erf, erfc, ndtr or exact GELU could
    # not be loaded. Tight tolerances: a float32 detour would be 1e-7 off; erfc keeps its relative
    # precision far into the tail (erfc(20) is 5e-176), where 1 - erf(x) would be 0.
    x = torch.cat([dense(-30, 30, torch.float64), torch.linspace(-3, 3, 97, dtype=torch.float64), real_line(torch.float64)])
    fn = lambda x: (torch.erf(x), torch.erfc(x))
    program = assert_matches_eager(fn, (x,), rtol=1e-13, atol=0)
    assert "Erf" not in {node.op_type for node in program.model.graph}
    # GELU is ATen's x / 2 (1 + erf(x / sqrt 2)), whose sum cancels for negative x: an ulp of erf
    # becomes ~1e-12 there, in eager's result as in ours. (ATen's ndtr, (1 + erf(x / sqrt 2)) / 2,
    # cancels too, to 0 from -8.3 on; ours does not: see the tails' test below.)
    cancelling = lambda x: (torch.nn.functional.gelu(x),)
    program = assert_matches_eager(cancelling, (x,), rtol=1e-11, atol=1e-300)
    assert "Erf" not in {node.op_type for node in program.model.graph}
    # An empty float64 tensor goes through the series' padding.
    assert_matches_eager(lambda x: (*fn(x), *cancelling(x)), (torch.empty(2, 0, dtype=torch.float64),))


class _Digamma(torch.nn.Module):
    def forward(self, x):
        return torch.digamma(x)


def test_float32_special_functions_keep_relative_precision_to_the_ends_of_the_range():
    # Found by tools/sweeps/tails.py. lgamma ran Lanczos' sum in float32, ~5e-7 off absolutely:
    # lgamma(1) was 4.8e-7 and values near its roots 100 ulps off; below -4e36 the reflection
    # was inf - inf. digamma was 100 ulps off near its root at -0.504. 2 pi x overflowed in the
    # asymptotic Bessel I from 5.4e37 (I NaN, I scaled 0) and x^2 in log_ndtr from 1.8e19.
    near_roots = [1.0, 2.0, 1 - 2**-23, 1 + 2**-22, 2 - 2**-22, 2 + 2**-21, 0.9999996, 1.0000006, 1.05, 1.9, 2.4, -2.7, -3.25]
    poles = [-1.0, -20.0, -3e36, -8.8e36, -3.4e38, -0.0]
    x = torch.tensor(near_roots + poles)
    assert_matches_eager(lambda x: (torch.lgamma(x), torch.mvlgamma(x.abs() + 1, 3)), (x,), rtol=4 * 2**-24, atol=0)
    # digamma near its roots: eager's float32 is itself up to 1.4 % off (at 1.4616); ours is
    # float64's value rounded once.
    roots = torch.tensor([-0.5, -0.504, -0.51, -1.5, 1.4616, 0.7])
    program = torch_onnx_fx.export(_Digamma(), (roots,), verbose=False)
    torch.testing.assert_close(program(roots)[0], torch.digamma(roots.double()).float(), rtol=0, atol=0)
    huge = torch.tensor([5.5e37, -1e38, 3.4e38, -3.4e38, 80.0, -12.5])
    assert_matches_eager(lambda x: (torch.i0(x), S.i0e(x), S.i1(x), S.i1e(x)), (huge,), rtol=1e-6, atol=0)
    assert_matches_eager(lambda x: S.log_ndtr(x), (torch.tensor([-2.2e19, -1.9e19, -1e19, -30.0]),), rtol=1e-6, atol=0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.float64])
def test_frexp_of_the_top_binade(dtype):
    # 2**exponent overflowed there (2**128 in float32, 2**16 in float16): mantissa 0, exponent one low.
    info = torch.finfo(dtype)
    x = torch.tensor([info.max, -info.max, info.max / 1.5, info.max / 2, info.smallest_normal * info.eps, 1.0, -3.0], dtype=dtype)
    assert_matches_eager(lambda x: torch.frexp(x), (x,), rtol=0, atol=0)


def test_float64_modified_bessel_i_keeps_float64_precision():
    # The asymptotic expansion from |x| = 12 on is good to 6e-12 only: 1.4e-9 off in float64 there.
    x = torch.cat([dense(-40, 40, torch.float64), torch.tensor([12.05, -12.05, 19.99, 20.01, 700.0, -1e300, 1e-300], dtype=torch.float64)])
    assert_matches_eager(lambda x: (torch.i0(x), S.i0e(x), S.i1(x), S.i1e(x)), (x,), rtol=1e-14, atol=0)


def test_float64_lgamma_keeps_its_relative_precision_near_its_roots():
    # Lanczos' sum is ~1e-15 off absolutely, all of lgamma's value next to 1 and 2: lgamma(1 + 2^-52)
    # was -1.8e-15 for 1.3e-16. Below 5/2 the Taylor series at 1 and 2 now give it.
    eps = 2.0**-52
    x = torch.tensor([1 + eps, 1 - eps / 2, 2 + 2 * eps, 2 - eps, 1 + 1e-9, 2 - 1e-7, 0.5, 0.75, 1.3, 1.49, 1.5, 1.9, 2.45, 2.5, 3.0, 0.1], dtype=torch.float64)
    assert_matches_eager(lambda x: torch.lgamma(x), (x,), rtol=8 * eps, atol=0)


def test_xlogy_and_incomplete_gamma_special_cases_in_atens_order():
    # torchlib's xlogy tested x = 0 before y's NaN: xlogy(0, nan) was 0, ATen's is NaN. igamma and
    # igammac put a NaN argument above every special case; ATen returns P(nan, 0) = 0,
    # P(nan, inf) = 1 and P(inf, nan) = 0 before it meets the NaN (and Q the complements).
    values = [NAN, INF, -INF, 0.0, -0.0, 1.0, -1.0, 2.5, 12.0]
    a = torch.tensor([u for u in values for _ in values])
    x = torch.tensor([v for _ in values for v in values])
    fn = lambda a, x: (torch.xlogy(a, x), torch.xlogy(a, 2.0), torch.xlogy(3.0, x), torch.igamma(a, x), torch.igammac(a, x))
    assert_matches_eager(fn, (a, x), rtol=1e-6, atol=0)
    assert_matches_eager(fn, (a.double(), x.double()), rtol=1e-12, atol=0)


def test_igammac_of_a_tiny_order_is_its_exact_value():
    # Q(a, x) = a E1(x) + O(a^2) for tiny a. Eager gives 7.97e-31 for Q(1e-30, 1), whose exact
    # value is 1e-30 E1(1) = 2.1938e-31 (mpmath agrees); ours is that value.
    e1_of_one = 0.21938393439552027368
    a, x = torch.tensor([1e-30, 1e-25], dtype=torch.float64), torch.tensor([1.0, 1.0], dtype=torch.float64)
    program = torch_onnx_fx.export(_Igammac(), (a, x), verbose=False)
    torch.testing.assert_close(program(a, x)[0], a * e1_of_one, rtol=1e-12, atol=0)


class _Igammac(torch.nn.Module):
    def forward(self, a, x):
        return torch.igammac(a, x)


def test_float64_erf_and_modified_bessel_k_keep_float64_precision():
    # erf's alternating series up to 2.5 lost 44 ulps near 2.45 (GELU 1e-11 relatively); K's
    # asymptotic expansion from 12 on is good to 6e-12 only (5.6e-11 off at 12.15).
    x = torch.cat([torch.linspace(1.4, 2.6, 241, dtype=torch.float64), torch.linspace(11.5, 26.0, 59, dtype=torch.float64)])
    fn = lambda x: (torch.erf(x), torch.erf(-x), S.modified_bessel_k0(x), S.modified_bessel_k1(x), S.scaled_modified_bessel_k0(x), S.scaled_modified_bessel_k1(x))
    assert_matches_eager(fn, (x,), rtol=2e-15, atol=0)


def test_float32_bessel_k0_of_the_smallest_subnormal():
    # log(x * 0.5) was -inf there (x / 2 rounds to 0): K0 came out inf for 103.4. (Eager's scaled
    # K0 is inf there itself; ours is 103.4 too.)
    x = torch.tensor([1.4e-45, 3e-45, 1e-40, 0.5])
    assert_matches_eager(lambda x: S.modified_bessel_k0(x), (x,), rtol=1e-6, atol=0)


class _Float64ErrorFunctions(torch.nn.Module):
    def forward(self, x):
        return torch.erfc(x), S.erfcx(x), S.ndtr(x), S.log_ndtr(x)


def test_float64_error_function_tails_are_within_ulps_of_their_exact_values():
    # exp(-x^2) of a rounded x^2 put erfc 18-412 ulps off from 6 on (erfc(25.7) is 3e-289), and
    # log_ndtr's upper tail with it; erfcx came from 1 - erf below 2.5 (768 ulps there), and ndtr
    # from 1 + erf (57 ulps at -2, 0 for 7.6e-24 at -10). Against mpmath: eager's erfc is within an
    # ulp, its erfcx up to 477 ulps off, its ndtr cancels as ours did, and its log_ndtr is as far
    # off as ours was (it rounds x / sqrt 2).
    mpmath = pytest.importorskip("mpmath")
    x = torch.cat([
        torch.linspace(6.0, 26.5, 83, dtype=torch.float64), torch.linspace(1.1, 3.1, 81, dtype=torch.float64),
        torch.linspace(-2.2, -1.0, 25, dtype=torch.float64), torch.linspace(-6.0, -0.6, 28, dtype=torch.float64),
        torch.tensor([0.0, 0.3, -0.4, 2.0 + 2**-51, 3.0 - 2**-51, 40.0, 700.0], dtype=torch.float64),
    ])
    exact = {
        "erfc": mpmath.erfc, "erfcx": lambda v: mpmath.exp(v * v) * mpmath.erfc(v), "ndtr": mpmath.ncdf,
        "log_ndtr": lambda v: mpmath.log1p(-mpmath.ncdf(-v)) if v > 0 else mpmath.log(mpmath.ncdf(v)),
    }
    program = torch_onnx_fx.export(_Float64ErrorFunctions(), (x,), verbose=False)
    with mpmath.workdps(40):
        for name, got in zip(exact, program(x)):
            expected = torch.tensor([float(exact[name](mpmath.mpf(float(v)))) for v in x], dtype=torch.float64)
            finite = torch.isfinite(expected) & (expected != 0)
            torch.testing.assert_close(got[finite], expected[finite], rtol=8 * 2.0**-52, atol=0, msg=name)
            torch.testing.assert_close(got[~finite], expected[~finite], rtol=0, atol=0, msg=name)


def test_float64_lgamma_between_five_halves_and_ten_keeps_float64_precision():
    # Lanczos' sum is ~1e-15 off absolutely: 34 ulps of lgamma(2.65), and through the reflection
    # 40 ulps of lgamma(-2.6) (lgamma(3.6) is 1.3, the result 0.12). From 5/2 to 10 the recurrence
    # down to the series at 2 now gives it (eager's, glibc's, is within an ulp).
    x = torch.cat([torch.linspace(2.5, 10.0, 301, dtype=torch.float64), -torch.tensor([2.2, 2.3, 2.9, 3.5, 4.5, 5.5, 6.5], dtype=torch.float64)])
    assert_matches_eager(lambda x: torch.lgamma(x), (x,), rtol=6 * 2.0**-52, atol=0)
    # Between the roots at -2.457 and -2.747 the reflection itself cancels (|lgamma| <= 0.12 from
    # two terms near 1.3): 14 and 18 ulps, where there were 40 and 85.
    near_roots = -torch.tensor([2.6, 2.65], dtype=torch.float64)
    assert_matches_eager(lambda x: torch.lgamma(x), (near_roots,), rtol=20 * 2.0**-52, atol=0)


class _Airy(torch.nn.Module):
    def forward(self, x):
        return S.airy_ai(x)


def test_float64_airy_ai_is_within_ulps_of_its_exact_value():
    # The Maclaurin series up to |x| = 5 cancels (its terms grow as e^zeta) and the asymptotic
    # expansions from 5 are good to e^(-2 zeta): Ai was 1e-9 off relatively at -5.65 and 5.5.
    # Against mpmath: eager's own float64 Ai is 1e-5 off between -2.6 and -2.09 (7e-5 at -2.35).
    mpmath = pytest.importorskip("mpmath")
    x = torch.tensor([-12.3, -10.5, -9.1, -8.4, -7.0, -6.3, -5.65, -4.05, -2.35, -2.25, -1.0, 0.0, 0.7, 2.0, 2.8, 3.45, 4.1, 4.85, 5.5, 6.2, 7.6, 9.0, 10.35, 11.95, 13.5, 20.0], dtype=torch.float64)
    program = torch_onnx_fx.export(_Airy(), (x,), verbose=False)
    with mpmath.workdps(40):
        expected = torch.tensor([float(mpmath.airyai(mpmath.mpf(float(v)))) for v in x], dtype=torch.float64)
    torch.testing.assert_close(program(x)[0], expected, rtol=64 * 2.0**-52, atol=0)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_trigamma_is_atens_series(dtype):
    # ATen cuts trigamma's asymptotic series after its 1/42 term (good to ~1e-9 at x = 6.5); a
    # longer series was nearer the true value and 4e6 float64 ulps (1.5e-9) from eager's.
    x = torch.cat([dense(0.05, 20, torch.float64), dense(-9.9, 0.45, torch.float64) + 0.0123]).to(dtype)
    rtol = 2e-15 if dtype == torch.float64 else 1e-6
    assert_matches_eager(lambda x: torch.polygamma(1, x), (x,), rtol=rtol, atol=0)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
def test_half_entr_and_xlog1py_round_the_logarithm_as_atens_kernels(dtype):
    # torch's decompositions compute in float32 and round once: 26 % of the results were an ulp
    # off ATen's kernels, which round log(x) and log1p(y) to the input's type before the product.
    torch.manual_seed(0)
    specials = torch.tensor([0.0, -0.0, -1.0, float("inf"), float("nan"), 1e-3, -0.5])
    x = torch.cat([(torch.randn(4096) * 4).abs(), specials]).to(dtype)
    y = torch.cat([torch.randn(4096) * 4, specials.flip(0)]).to(dtype)
    fn = lambda x, y: (
        torch.special.entr(x), torch.special.entr(y), torch.special.xlog1py(x, y.abs()), torch.special.xlog1py(y, y.abs()),
        torch.special.xlog1py(x, 2.5), torch.special.xlog1py(0.5, y.abs()),
    )
    assert_matches_eager(fn, (x, y), rtol=0, atol=0)
