"""float64 operators ONNX Runtime's CPU provider lacks, written in float64 operators it has.

ONNX Runtime implements ``Atan``, ``Elu``, ``Softplus``, ``InstanceNormalization``… for float32
only. Computing them in float32 would narrow a float64 model, which :mod:`runtime_kernels` never
does; each entry here is instead the operator's definition in float64 ``Exp``/``Log``/``Sqrt``/
``Where``/reductions, accurate to float64 rounding (``log1p``/``expm1`` are built with Goldberg's
and Kahan's corrections, so small arguments keep their relative precision too). ``Atan`` (and ``Asin``/``Acos`` through it) takes a
float32 first guess and one Newton step in float64, which restores full float64 precision.

``Sin`` and ``Cos`` (``INEXACT``) have float64 kernels, but inexact ones next to their zeros: they
are rewritten too, reduced by pi/2 exactly before the kernels see the argument.

``REWRITES`` maps an op type to a function of the tape and the node returning the result value.
"""

from __future__ import annotations

import functools
import math
from typing import Callable

import onnx_ir as ir

from torch_onnx_fx.optimize.runtime import float64_windows

__all__ = ["KEPT", "INEXACT", "REWRITES"]

Rewrite = Callable[[ir.tape.Tape, ir.Node], ir.Value]


def _attribute(node: ir.Node, name: str, default: float) -> float:
    attribute = node.attributes.get(name)
    return float(attribute.value) if attribute is not None else default


def _atan_of(tape: ir.tape.Tape, x: ir.Value) -> ir.Value:
    """Newton on sin θ - x cos θ = 0 from a float32 guess (good to 1e-7; one step squares the
    error); ±inf give ±pi/2 directly."""
    guess = tape.op("Cast", [tape.op("Atan", [tape.op("Cast", [x], {"to": ir.DataType.FLOAT})])], {"to": ir.DataType.DOUBLE})
    sin, cos = _kept(tape, "Sin", guess), _kept(tape, "Cos", guess)
    residual = tape.op("Sub", [sin, tape.op("Mul", [x, cos])])
    slope = tape.op("Add", [cos, tape.op("Mul", [x, sin])])
    refined = tape.op("Sub", [guess, tape.op("Div", [residual, slope])])
    half_pi = tape.op("Mul", [tape.op("Sign", [x]), float64_windows.double(tape, math.pi / 2)])
    return tape.op("Where", [tape.op("IsInf", [x]), half_pi, refined])


def _asin_of(tape: ir.tape.Tape, x: ir.Value) -> ir.Value:
    # x / sqrt(1 - x²) is ±inf at ±1 (atan gives ±pi/2) and NaN outside [-1, 1], as asin is.
    one = float64_windows.double(tape, 1.0)
    root = tape.op("Sqrt", [tape.op("Mul", [tape.op("Sub", [one, x]), tape.op("Add", [one, x])])])
    return _atan_of(tape, tape.op("Div", [x, root]))


def _exp_pair(tape: ir.tape.Tape, x: ir.Value) -> tuple[ir.Value, ir.Value]:
    return tape.op("Exp", [x]), tape.op("Exp", [tape.op("Neg", [x])])


def _atan(tape: ir.tape.Tape, node: ir.Node) -> ir.Value:
    return _atan_of(tape, node.inputs[0])


def _asin(tape: ir.tape.Tape, node: ir.Node) -> ir.Value:
    return _asin_of(tape, node.inputs[0])


def _acos(tape: ir.tape.Tape, node: ir.Node) -> ir.Value:
    # 2 atan(sqrt((1 - x) / (1 + x))): pi/2 - asin(x) cancelled near 1 (acos(1 - 2^-53) was
    # 5e-9 off relatively). pi at -1, NaN beyond [-1, 1] (the root of a negative).
    x = node.inputs[0]
    one = float64_windows.double(tape, 1.0)
    ratio = tape.op("Div", [tape.op("Sub", [one, x]), tape.op("Add", [one, x])])
    return tape.op("Mul", [_atan_of(tape, tape.op("Sqrt", [ratio])), float64_windows.double(tape, 2.0)])


# Marks the Sin/Cos these rewrites write themselves, which the pass must not rewrite again: on a
# reduced argument or atan's guess (within [-pi/2, pi/2], where ONNX Runtime's kernels are exact),
# or past the reducible range, where they were measured exact too.
KEPT = "torch_onnx_fx.kept_kernel"
# Cody and Waite's reduction by pi/2 is exact while the quadrant count has at most 20 bits.
_REDUCIBLE = 2.0**20 * math.pi / 2


@functools.cache
def _half_pi_parts() -> tuple[float, float, float]:
    """pi/2 as c1 + c2 + c3, c1 and c2 with 33 significant bits (so q c1 and q c2 are exact for
    |q| < 2^20), c3 the rest rounded."""
    import mpmath

    with mpmath.workdps(60):
        rest, parts = mpmath.pi / 2, []
        for _ in range(2):
            exponent = int(mpmath.floor(mpmath.log(abs(rest), 2)))
            part = mpmath.nint(rest * mpmath.mpf(2) ** (32 - exponent)) * mpmath.mpf(2) ** (exponent - 32)
            parts.append(float(part))
            rest -= part
        return parts[0], parts[1], float(rest)


def _kept(tape: ir.tape.Tape, op_type: str, x: ir.Value) -> ir.Value:
    value = tape.op(op_type, [x])
    value.producer().meta[KEPT] = True
    return value


def _quadrant_and_rest(tape: ir.tape.Tape, x: ir.Value) -> tuple[ir.Value, ir.Value, ir.Value]:
    """(q mod 4, r, reducible) with x = q pi/2 + r, |r| <= pi/4, r to float64 precision."""
    c1, c2, c3 = _half_pi_parts()
    q = tape.op("Round", [tape.op("Mul", [x, float64_windows.double(tape, 2 / math.pi)])])
    r = x
    for part in (c1, c2, c3):
        r = tape.op("Sub", [r, tape.op("Mul", [q, float64_windows.double(tape, part)])])
    four = float64_windows.double(tape, 4.0)
    quadrant = tape.op("Sub", [q, tape.op("Mul", [tape.op("Floor", [tape.op("Div", [q, four])]), four])])
    reducible = tape.op("Less", [tape.op("Abs", [x]), float64_windows.double(tape, _REDUCIBLE)])
    return quadrant, r, reducible


def _sines(tape: ir.tape.Tape, x: ir.Value, shifts: tuple[int, ...]) -> list[ir.Value]:
    """sin(x + shift pi/2) for each shift (0: sine, 1: cosine), from one reduction of x.

    ONNX Runtime's float64 Sin and Cos reduce the argument by a two-part pi: 100-800 ulps next to
    their zeros (sin(12.55) 142 ulps; sin(pi) 2.4e-16 for 1.2e-16), where glibc (ATen) is exact.
    Beyond 2^20 pi/2 (and for infinities and NaN) their own value, which was measured exact there.
    """
    quadrant, r, reducible = _quadrant_and_rest(tape, x)
    sin, cos = _kept(tape, "Sin", r), _kept(tape, "Cos", r)
    two, four = float64_windows.double(tape, 2.0), float64_windows.double(tape, 4.0)
    results = []
    for shift in shifts:
        turn = tape.op("Add", [quadrant, float64_windows.double(tape, float(shift))]) if shift else quadrant
        half = tape.op("Floor", [tape.op("Div", [turn, two])])
        odd = tape.op("Equal", [tape.op("Sub", [turn, tape.op("Mul", [half, two])]), float64_windows.double(tape, 1.0)])
        magnitude = tape.op("Where", [odd, cos, sin])
        # Turns 2 and 3 negate; 4 (the cosine's shifted 3) is 0 again.
        negative = tape.op("And", [tape.op("GreaterOrEqual", [turn, two]), tape.op("Less", [turn, four])])
        value = tape.op("Where", [negative, tape.op("Neg", [magnitude]), magnitude])
        results.append(tape.op("Where", [reducible, value, _kept(tape, "Cos" if shift else "Sin", x)]))
    return results


def _sin(tape: ir.tape.Tape, node: ir.Node) -> ir.Value | None:
    return None if node.meta.get(KEPT) else _sines(tape, node.inputs[0], (0,))[0]


def _cos(tape: ir.tape.Tape, node: ir.Node) -> ir.Value | None:
    return None if node.meta.get(KEPT) else _sines(tape, node.inputs[0], (1,))[0]


def _tan(tape: ir.tape.Tape, node: ir.Node) -> ir.Value:
    sin, cos = _sines(tape, node.inputs[0], (0, 1))
    return tape.op("Div", [sin, cos])


def _beyond_twenty(tape: ir.tape.Tape, magnitude: ir.Value, small: ir.Value) -> ir.Value:
    """``small`` up to |x| = 20; beyond, e^|x| / 2 as h (h / 2) with h = e^(|x| / 2), finite up
    to |x| = 710.47 as sinh and cosh are (e^|x| itself overflows from 709.78), and e^-|x| is
    below the last bit."""
    half = float64_windows.double(tape, 0.5)
    h = tape.op("Exp", [tape.op("Mul", [magnitude, half])])
    large = tape.op("Mul", [h, tape.op("Mul", [h, half])])
    return tape.op("Where", [tape.op("Greater", [magnitude, float64_windows.double(tape, 20.0)]), large, small])


def _sinh(tape: ir.tape.Tape, node: ir.Node) -> ir.Value:
    # sign(x) (e + e / (e + 1)) / 2 with e = expm1(|x|): e^|x| - e^-|x| without the cancellation
    # that made (exp(x) - exp(-x)) / 2 zero below 1e-16 and 1e5 ulps off at 1e-5.
    x = node.inputs[0]
    magnitude = tape.op("Abs", [x])
    e = _expm1(tape, magnitude)
    twice = tape.op("Add", [e, tape.op("Div", [e, tape.op("Add", [e, float64_windows.double(tape, 1.0)])])])
    small = tape.op("Mul", [twice, float64_windows.double(tape, 0.5)])
    return tape.op("Mul", [tape.op("Sign", [x]), _beyond_twenty(tape, magnitude, small)])


def _cosh(tape: ir.tape.Tape, node: ir.Node) -> ir.Value:
    x = node.inputs[0]
    up, down = _exp_pair(tape, x)
    small = tape.op("Mul", [tape.op("Add", [up, down]), float64_windows.double(tape, 0.5)])
    return _beyond_twenty(tape, tape.op("Abs", [x]), small)


def _log1p(tape: ir.tape.Tape, u: ir.Value) -> ir.Value:
    """log(1 + u) to full relative precision for small u (Goldberg: the rounding of 1 + u is
    divided back out); u itself where 1 + u rounds to 1."""
    one = float64_windows.double(tape, 1.0)
    w = tape.op("Add", [one, u])
    spread = tape.op("Sub", [w, one])
    corrected = tape.op("Div", [tape.op("Mul", [tape.op("Log", [w]), u]), spread])
    return tape.op("Where", [tape.op("Equal", [spread, float64_windows.double(tape, 0.0)]), u, corrected])


def _expm1(tape: ir.tape.Tape, x: ir.Value) -> ir.Value:
    """exp(x) - 1 to full relative precision for small x (Kahan: (u - 1) x / log u); x where
    exp(x) rounds to 1, -1 where it rounds to 0, inf where it overflows."""
    one = float64_windows.double(tape, 1.0)
    u = tape.op("Exp", [x])
    spread = tape.op("Sub", [u, one])
    corrected = tape.op("Div", [tape.op("Mul", [spread, x]), tape.op("Log", [u])])
    result = tape.op("Where", [tape.op("Equal", [spread, float64_windows.double(tape, 0.0)]), x, corrected])
    result = tape.op("Where", [tape.op("Equal", [spread, float64_windows.double(tape, -1.0)]), spread, result])
    return tape.op("Where", [tape.op("IsInf", [u]), u, result])


def _asinh(tape: ir.tape.Tape, node: ir.Node) -> ir.Value:
    # sign(x) log1p(|x| + x² / (1 + sqrt(1 + x²))): odd, no cancellation on either side of 0.
    x = node.inputs[0]
    magnitude = tape.op("Abs", [x])
    square = tape.op("Mul", [magnitude, magnitude])
    one = float64_windows.double(tape, 1.0)
    step = tape.op("Add", [magnitude, tape.op("Div", [square, tape.op("Add", [one, tape.op("Sqrt", [tape.op("Add", [one, square])])])])])
    # For |x| beyond 1e150 the square overflows; there asinh(x) = log|x| + log 2 (2|x| overflows).
    large = tape.op("Add", [tape.op("Log", [magnitude]), float64_windows.double(tape, math.log(2.0))])
    value = tape.op("Where", [tape.op("Greater", [magnitude, float64_windows.double(tape, 1e150)]), large, _log1p(tape, step)])
    return tape.op("Mul", [tape.op("Sign", [x]), value])


def _acosh(tape: ir.tape.Tape, node: ir.Node) -> ir.Value:
    # log1p((x - 1) + sqrt((x - 1)(x + 1))): precise near 1; log x + log 2 where the product
    # overflows; NaN below 1 (for x below -1.3e154 the product overflowed to +inf and gave 0).
    x = node.inputs[0]
    one = float64_windows.double(tape, 1.0)
    below = tape.op("Sub", [x, one])
    step = tape.op("Add", [below, tape.op("Sqrt", [tape.op("Mul", [below, tape.op("Add", [x, one])])])])
    large = tape.op("Add", [tape.op("Log", [x]), float64_windows.double(tape, math.log(2.0))])
    value = tape.op("Where", [tape.op("Greater", [x, float64_windows.double(tape, 1e150)]), large, _log1p(tape, step)])
    return tape.op("Where", [tape.op("Less", [x, one]), float64_windows.double(tape, math.nan), value])


def _atanh(tape: ir.tape.Tape, node: ir.Node) -> ir.Value:
    # (log1p(x) - log1p(-x)) / 2: precise near 0 and near ±1 (1 ± x is exact there), ±inf at ±1,
    # NaN beyond. 0.5 log1p(2x / (1 - x)) rounded 2x / (1 - x) near -1 (1e14 ulps off) and was
    # NaN at 1 (log1p(inf)).
    x = node.inputs[0]
    difference = tape.op("Sub", [_log1p(tape, x), _log1p(tape, tape.op("Neg", [x]))])
    return tape.op("Mul", [difference, float64_windows.double(tape, 0.5)])


def _negative_part(tape: ir.tape.Tape, x: ir.Value, negative: ir.Value) -> ir.Value:
    """``x`` where x > 0, ``negative`` elsewhere (NaN stays NaN through ``negative``)."""
    return tape.op("Where", [tape.op("Greater", [x, float64_windows.double(tape, 0.0)]), x, negative])


def _elu(tape: ir.tape.Tape, node: ir.Node) -> ir.Value:
    x = node.inputs[0]
    alpha = float64_windows.double(tape, _attribute(node, "alpha", 1.0))
    return _negative_part(tape, x, tape.op("Mul", [alpha, _expm1(tape, x)]))


def _selu(tape: ir.tape.Tape, node: ir.Node) -> ir.Value:
    x = node.inputs[0]
    # Without attributes, SELU's constants to double precision (ATen's), not ONNX's float32 defaults.
    alpha = float64_windows.double(tape, _attribute(node, "alpha", 1.6732632423543772848170429916717))
    gamma = float64_windows.double(tape, _attribute(node, "gamma", 1.0507009873554804934193349852946))
    negative = tape.op("Mul", [alpha, _expm1(tape, x)])
    return tape.op("Mul", [gamma, _negative_part(tape, x, negative)])


def _leaky_relu(tape: ir.tape.Tape, node: ir.Node) -> ir.Value:
    x = node.inputs[0]
    return _negative_part(tape, x, tape.op("Mul", [x, float64_windows.double(tape, _attribute(node, "alpha", 0.01))]))


def _prelu(tape: ir.tape.Tape, node: ir.Node) -> ir.Value:
    x, slope = node.inputs[0], node.inputs[1]
    return _negative_part(tape, x, tape.op("Mul", [x, slope]))


def _hard_sigmoid(tape: ir.tape.Tape, node: ir.Node) -> ir.Value:
    x = node.inputs[0]
    line = tape.op("Add", [tape.op("Mul", [x, float64_windows.double(tape, _attribute(node, "alpha", 0.2))]), float64_windows.double(tape, _attribute(node, "beta", 0.5))])
    return tape.op("Clip", [line, float64_windows.double(tape, 0.0), float64_windows.double(tape, 1.0)])


def _softplus(tape: ir.tape.Tape, node: ir.Node) -> ir.Value:
    # max(x, 0) + log(1 + exp(-|x|)): no overflow for large x, and log(exp(x) + 1) otherwise.
    x = node.inputs[0]
    tail = _log1p(tape, tape.op("Exp", [tape.op("Neg", [tape.op("Abs", [x])])]))
    return tape.op("Add", [tape.op("Max", [x, float64_windows.double(tape, 0.0)]), tail])


def _mish(tape: ir.tape.Tape, node: ir.Node) -> ir.Value:
    x = node.inputs[0]
    return tape.op("Mul", [x, tape.op("Tanh", [_softplus(tape, node)])])


def _hard_swish(tape: ir.tape.Tape, node: ir.Node) -> ir.Value:
    x = node.inputs[0]
    line = tape.op("Add", [tape.op("Div", [x, float64_windows.double(tape, 6.0)]), float64_windows.double(tape, 0.5)])
    return tape.op("Mul", [x, tape.op("Clip", [line, float64_windows.double(tape, 0.0), float64_windows.double(tape, 1.0)])])


def _softsign(tape: ir.tape.Tape, node: ir.Node) -> ir.Value:
    x = node.inputs[0]
    return tape.op("Div", [x, tape.op("Add", [float64_windows.double(tape, 1.0), tape.op("Abs", [x])])])


def _nonzero(tape: ir.tape.Tape, node: ir.Node) -> ir.Value:
    # Positions of the non-zero values, NaN included (NaN != 0), as a bool mask has them.
    x = node.inputs[0]
    return tape.op("NonZero", [tape.op("Not", [tape.op("Equal", [x, float64_windows.double(tape, 0.0)])])])


def _instance_normalization(tape: ir.tape.Tape, node: ir.Node) -> ir.Value:
    """(x - mean) / sqrt(var + epsilon) * scale + bias over the spatial axes of [N, C, ...]."""
    x, scale, bias = node.inputs[0], node.inputs[1], node.inputs[2]
    rank = x.shape.rank() if x.shape is not None else None
    axes = tape.op("Constant", [], {"value": ir.tensor(list(range(2, rank)), dtype=ir.DataType.INT64)})
    mean = tape.op("ReduceMean", [x, axes], {"keepdims": 1})
    centered = tape.op("Sub", [x, mean])
    variance = tape.op("ReduceMean", [tape.op("Mul", [centered, centered]), axes], {"keepdims": 1})
    scaled = tape.op("Div", [centered, tape.op("Sqrt", [tape.op("Add", [variance, float64_windows.double(tape, _attribute(node, "epsilon", 1e-5))])])])
    per_channel = tape.op("Constant", [], {"value": ir.tensor([-1] + [1] * (rank - 2), dtype=ir.DataType.INT64)})
    return tape.op("Add", [tape.op("Mul", [scaled, tape.op("Reshape", [scale, per_channel])]), tape.op("Reshape", [bias, per_channel])])


def _global_average_pool(tape: ir.tape.Tape, node: ir.Node) -> ir.Value:
    """The mean over the spatial axes of [N, C, ...], kept as size 1."""
    rank = node.inputs[0].shape.rank()
    axes = tape.op("Constant", [], {"value": ir.tensor(list(range(2, rank)), dtype=ir.DataType.INT64)})
    return tape.op("ReduceMean", [node.inputs[0], axes], {"keepdims": 1})


def _has_rank(rewrite: Rewrite) -> Rewrite:
    def guarded(tape: ir.tape.Tape, node: ir.Node) -> ir.Value | None:  # type: ignore[return]
        if node.inputs[0].shape is None:
            return None
        return rewrite(tape, node)

    return guarded  # type: ignore[return-value]


# Operators ONNX Runtime has float64 kernels for, but inexact ones: rewritten all the same.
INEXACT = frozenset({"Sin", "Cos"})

REWRITES: dict[str, Rewrite] = {
    "Atan": _atan, "Asin": _asin, "Acos": _acos, "Sin": _sin, "Cos": _cos, "Tan": _tan, "Sinh": _sinh, "Cosh": _cosh,
    "Asinh": _asinh, "Acosh": _acosh, "Atanh": _atanh, "Elu": _elu, "Selu": _selu, "LeakyRelu": _leaky_relu,
    "PRelu": _prelu, "HardSigmoid": _hard_sigmoid, "Softplus": _softplus, "Softsign": _softsign,
    "Mish": _mish, "HardSwish": _hard_swish,
    "NonZero": _nonzero, "InstanceNormalization": _has_rank(_instance_normalization),
    "GlobalAveragePool": _has_rank(_global_average_pool),
    **float64_windows.REWRITES,
}
