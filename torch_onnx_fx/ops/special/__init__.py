"""Special functions: gamma family, error-function inverses, Bessel and Airy functions, the
incomplete gamma function, Hurwitz zeta, orthogonal polynomials, hypot and nextafter.

ONNX has none of them except ``Erf``, torchlib lacks them, and PyTorch's decompositions bottom out
in ``prims`` (or stay ``aten::special_*``) for them. Each translation evaluates classical
approximations with elementwise ONNX ops: power series (each one weighted sum of powers),
asymptotic expansions, trapezoidal quadrature, and continued fractions and recurrences unrolled
to a fixed length. ``Loop`` is used only where the number of steps depends on the data: the
polynomial recurrences (up to the largest degree ``n``) and the Hurwitz zeta sum for negative
``q``.

* :mod:`.gamma` - ``lgamma``, ``digamma``, ``polygamma`` and the Hurwitz zeta function.
* :mod:`.error` - ``erfinv``, ``ndtri``, ``erfcx`` and ``log_ndtr``.
* :mod:`.incomplete_gamma` - the regularized incomplete gamma functions ``igamma`` and ``igammac``.
* :mod:`.bessel` - modified Bessel I and K (and their scaled forms), Bessel J and Y, the
  spherical Bessel j0 and Airy Ai.
* :mod:`.elementary` - ``hypot`` and ``nextafter``.
* :mod:`.polynomials` - Chebyshev (plain and shifted), Hermite, Laguerre and Legendre polynomials.
* :mod:`._series` - the shared pieces: working precision, the padded elementwise wrapper, sums
  of powers, accurate ``log1p``/``expm1`` and the ``Loop`` builder.

Precision: float16/bfloat16 inputs are computed in float32 and float64 in float64. float32 stays
float32 except where PyTorch itself accumulates in double (zeta and polygamma of order >= 2) and
where a series cancels too much for single precision (incomplete gamma, the small-argument
series of the Bessel J/Y and Airy functions); those run in float64 and are cast back.

Edge values follow eager PyTorch (poles, infinities, NaN, out-of-domain arguments), including a
few of its quirks, each noted where it is reproduced. Three properties of the toolchain shape the
code: onnxscript's optimizer drops ``x + c`` for |c| < 1e-8 and ``x * c`` for c within 1e-5 of 1,
so coefficients live in vector constants; ONNX Runtime's MatMul and ReduceSum fail on empty
tensors, so inputs are padded (``_series.elementwise``); and its MatMul-times-constant fusion
keeps the constant in float32, so float64 series fold their constants into the coefficients.
"""

# In the order of the overview, which is also the order the translations register in.
from torch_onnx_fx.ops.special import (  # noqa: F401
    gamma,
    error,
    incomplete_gamma,
    bessel,
    elementary,
    polynomials,
)

__all__: list[str] = []
