"""Shared pieces of the special-function translations: working precision, the padded elementwise
wrapper, sums of powers, accurate ``log1p``/``expm1`` and the ``Loop`` builder.

Every translation evaluates its approximation inside :func:`elementwise`, which picks the working
precision (float32, or float64 for float64 inputs and for series that cancel too much) and keeps
tensors non-empty for ONNX Runtime. Series go through :func:`sum_of_powers`, which keeps their
coefficients in vector constants where onnxscript's optimizer cannot drop them.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Sequence

import numpy as np
import onnx_ir as ir
from onnxscript import opset18 as op

__all__ = [
    "FLOAT", "DOUBLE", "EULER_GAMMA", "SQRT_PI", "INF", "NAN", "working", "restore", "elementwise", "tensors",
    "constant", "sum_of_powers", "taylor_table", "piecewise_taylor", "log1p", "expm1", "trip_count",
]

FLOAT = ir.DataType.FLOAT
DOUBLE = ir.DataType.DOUBLE
EULER_GAMMA = 0.57721566490153286061
INF = math.inf
NAN = math.nan
SQRT_PI = math.sqrt(math.pi)


# -- precision ------------------------------------------------------------------------------------


def working(x: ir.Value, wide: bool = False) -> ir.Value:
    """``x`` in the dtype the computation runs in: float64 for float64 (or when ``wide``), else float32."""
    dtype = DOUBLE if wide or x.dtype == DOUBLE else FLOAT
    return x if x.dtype == dtype else op.Cast(x, to=dtype)


def restore(result: ir.Value, like: ir.Value) -> ir.Value:
    """``result`` in the dtype of the floating input ``like`` (float32 for integer inputs, as ATen)."""
    dtype = like.dtype if like.dtype is not None and like.dtype.is_floating_point() else FLOAT
    return result if result.dtype == dtype else op.Cast(result, to=dtype)


def elementwise(compute: Callable[..., ir.Value], *inputs: ir.Value, wide: bool = False) -> ir.Value:
    """``compute`` applied to ``inputs`` in the working precision, broadcast and flattened with
    one padding element appended, and the result shaped back.

    The padding keeps tensors non-empty: ONNX Runtime's MatMul and ReduceSum, which evaluate
    the series here, fail or mis-shape on tensors with a zero-sized dimension.
    """
    values = [working(value, wide) for value in inputs]
    shape = op.Shape(values[0] if len(values) == 1 else op.Add(*values))
    flat = [
        op.Concat(op.Reshape(op.Expand(value, shape), op.Constant(value_ints=[-1])), constant([1.0], value), axis=0)
        for value in values
    ]
    result = op.Slice(compute(*flat), op.Constant(value_ints=[0]), op.Constant(value_ints=[-1]))
    return restore(op.Reshape(result, shape, allowzero=1), inputs[0])


def tensors(first: Any, second: Any) -> tuple[ir.Value, ir.Value]:
    """Both arguments as tensors: a Python number becomes a constant of the other's dtype."""
    if not isinstance(first, ir.Value):
        first = constant(first, second)
    if not isinstance(second, ir.Value):
        second = constant(second, first)
    return first, second


def constant(value: Any, like: ir.Value) -> ir.Value:
    """A constant (scalar or vector) of ``like``'s dtype."""
    return op.Constant(value=np.asarray(value, dtype=like.dtype.numpy()))


# -- series and accurate elementary functions ------------------------------------------------------


def sum_of_powers(t: ir.Value, coefficients: Sequence[float]) -> ir.Value:
    """``sum(c[k] * t**k)`` with ``coefficients`` from degree 0 up.

    Evaluated as one weighted sum of powers rather than by Horner's rule: besides being four
    nodes, it keeps the coefficients out of scalar Add/Mul nodes, which onnxscript's optimizer
    would drop as no-ops when a coefficient is within 1e-8 of 0 (or 1e-5 of 1).
    """
    powers = op.Pow(op.Unsqueeze(t, op.Constant(value_ints=[-1])), constant(np.arange(len(coefficients)), t))
    return op.MatMul(powers, constant(coefficients, t))


def taylor_table(coefficients_at: Callable[[Any, Any], Sequence[Any]], start: float, width: float, pieces: int) -> np.ndarray:
    """The table :func:`piecewise_taylor` reads: row k the Taylor coefficients (degree 0 up) that
    ``coefficients_at(c, mpmath)`` gives about c, the middle of [start + k width, start + (k + 1)
    width). Computed in mpmath (torch's sympy brings it) at 50 digits: the coefficients come from
    recurrences of the functions' differential equations, which grow their dominant solutions."""
    import mpmath

    with mpmath.workdps(50):
        middles = [mpmath.mpf(start) + mpmath.mpf(width) * (k + mpmath.mpf(0.5)) for k in range(pieces)]
        return np.array([[float(a) for a in coefficients_at(c, mpmath)] for c in middles], dtype=np.float64)


def piecewise_taylor(x: ir.Value, table: np.ndarray, start: float, width: float) -> ir.Value:
    """A Taylor polynomial per interval: row k of ``table`` holds the coefficients (degree 0 up)
    about the middle of [start + k width, start + (k + 1) width). ``x`` outside the intervals
    takes the nearest one's polynomial (finite noise for the caller to drop).

    One polynomial per short interval keeps |x - middle| small, so few terms of a fast-converging
    series are exact where a single series about 0 would need many that cancel."""
    pieces, terms = table.shape
    piece = op.Clip(op.Floor(op.Div(op.Sub(x, start), width)), constant(0.0, x), constant(float(pieces - 1), x))
    h = op.Sub(x, op.Add(op.Mul(op.Add(piece, 0.5), width), start))
    coefficients = op.Gather(op.Constant(value=ir.tensor(table.astype(x.dtype.numpy()))), op.Cast(piece, to=ir.DataType.INT64), axis=0)
    powers = op.Pow(op.Unsqueeze(h, op.Constant(value_ints=[-1])), constant(np.arange(terms), h))
    return op.ReduceSum(op.Mul(coefficients, powers), op.Constant(value_ints=[-1]), keepdims=0)


def log1p(u: ir.Value) -> ir.Value:
    """log(1 + u) accurate for small u (Goldberg's correction); for u >= -1 and finite."""
    w = op.Add(u, 1.0)
    rounded = op.Sub(w, 1.0)
    exact = op.Equal(rounded, 0.0)
    corrected = op.Mul(op.Log(w), op.Div(u, op.Where(exact, 1.0, rounded)))
    return op.Where(exact, u, corrected)


def expm1(u: ir.Value) -> ir.Value:
    """exp(u) - 1 accurate for small u (Kahan's correction)."""
    e = op.Exp(u)
    e_minus_one = op.Sub(e, 1.0)
    log_e = op.Log(e)
    near = op.And(op.Less(op.Abs(u), 0.5), op.Not(op.Equal(e, 1.0)))
    corrected = op.Mul(e_minus_one, op.Div(u, op.Where(near, log_e, 1.0)))
    return op.Where(op.Equal(e, 1.0), u, op.Where(near, corrected, e_minus_one))


def trip_count(steps: ir.Value, limit: int) -> ir.Value:
    """The largest entry of ``steps`` (0 when empty), capped at ``limit``, as a Loop trip count."""
    flat = op.Concat(op.Reshape(steps, op.Constant(value_ints=[-1])), constant([0.0], steps), axis=0)
    largest = op.Min(op.ReduceMax(flat, keepdims=0), constant(float(limit), steps))
    return op.Cast(largest, to=ir.DataType.INT64)
