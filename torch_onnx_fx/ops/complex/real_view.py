"""The real view of a complex tensor, and the complex arithmetic the translations share.

A complex tensor of shape ``S`` travels as a real tensor of shape ``S + [2]`` (real, imaginary).
The helpers here take it apart and join it again, and compute the textbook formulas on the two
parts (``exp(a+bi) = e^a (cos b + i sin b)``); where a formula needs care (``atan2`` quadrants and
signed zeros, ``sqrt`` cancellation) they say how. Dims counted from the end skip the trailing
pair (``_dim``).
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import onnx_ir as ir
from onnxscript import opset18 as op

from torch_onnx_fx.errors import TranslationError
from torch_onnx_fx.ops._tensors import constant as _const
from torch_onnx_fx.ops.deferred_torchlib import torchlib_function
from torch_onnx_fx.ops._tensors import int64, ints
from torch_onnx_fx.ops.nonfinite import atan2 as _atan2


_REAL_PART = {ir.DataType.COMPLEX64: ir.DataType.FLOAT, ir.DataType.COMPLEX128: ir.DataType.DOUBLE}


# -- the real view -------------------------------------------------------------------------------


def _re(z: ir.Value) -> ir.Value:
    return op.Gather(z, int64(0), axis=-1)


def _im(z: ir.Value) -> ir.Value:
    return op.Gather(z, int64(1), axis=-1)


def _join(re: ir.Value, im: ir.Value) -> ir.Value:
    return op.Concat(op.Unsqueeze(re, ints(-1)), op.Unsqueeze(im, ints(-1)), axis=-1)


def _real_to_complex(re: ir.Value) -> ir.Value:
    """A real tensor as the real view of a complex one (the imaginary part exactly 0, even
    where the real part is inf or NaN)."""
    return _join(re, op.Expand(op.CastLike(_double(0.0), re), op.Shape(re)))


def _double(values: float | list[float]) -> ir.Value:
    """A float64 constant: CastLike rounds it once to the operand's precision (a float32
    constant would round pi and 0.1 for complex128 too)."""
    return op.Constant(value=ir.tensor(np.array(values, dtype=np.float64)))


def _operand(value: Any, like: ir.Value) -> ir.Value:
    """A complex operand in real-view form: Python numbers become ``[re, im]`` constants."""
    if isinstance(value, ir.Value):
        return value
    number = complex(value)
    return op.CastLike(_double([number.real, number.imag]), like)


def _mul(x: ir.Value, y: ir.Value) -> ir.Value:
    a, b, c, d = _re(x), _im(x), _re(y), _im(y)
    return _join(op.Sub(op.Mul(a, c), op.Mul(b, d)), op.Add(op.Mul(a, d), op.Mul(b, c)))


def _div(x: ir.Value, y: ir.Value) -> ir.Value:
    a, b, c, d = _re(x), _im(x), _re(y), _im(y)
    norm = op.Add(op.Mul(c, c), op.Mul(d, d))
    return _join(
        op.Div(op.Add(op.Mul(a, c), op.Mul(b, d)), norm), op.Div(op.Sub(op.Mul(b, c), op.Mul(a, d)), norm)
    )


def _times_i(z: ir.Value) -> ir.Value:
    return _join(op.Neg(_im(z)), _re(z))


def _signbit(x: ir.Value) -> ir.Value:
    """True for negative numbers and -0.0 (whose reciprocal is -inf), as ATen's branch cuts need."""
    return op.Or(op.Less(x, _const(0.0, x)), op.Less(op.Reciprocal(x), _const(0.0, x)))


def _hypot(a: ir.Value, b: ir.Value) -> ir.Value:
    return op.Sqrt(op.Add(op.Mul(a, a), op.Mul(b, b)))


def _exp(z: ir.Value) -> ir.Value:
    a, b = _re(z), _im(z)
    scale = op.Exp(a)
    return _join(op.Mul(scale, op.Cos(b)), op.Mul(scale, op.Sin(b)))


def _log(z: ir.Value) -> ir.Value:
    a, b = _re(z), _im(z)
    return _join(op.Log(_hypot(a, b)), _atan2(b, a))


def _sqrt(z: ir.Value) -> ir.Value:
    """Principal root without cancellation: t = sqrt((|a| + |z|) / 2) is the larger part and
    b / 2t the smaller; which is real depends on the sign of a, the sign of the imaginary part
    follows b (-0.0 included)."""
    a, b = _re(z), _im(z)
    zero = _const(0.0, a)
    t = op.Sqrt(op.Div(op.Add(op.Abs(a), _hypot(a, b)), _const(2.0, a)))
    small = op.Where(op.Equal(t, zero), zero, op.Div(op.Abs(b), op.Mul(_const(2.0, a), t)))
    big_real = op.Not(_signbit(a))
    re = op.Where(big_real, t, small)
    im_magnitude = op.Where(big_real, small, t)
    im = op.Where(_signbit(b), op.Neg(im_magnitude), im_magnitude)
    return _join(re, im)


def _reciprocal(z: ir.Value) -> ir.Value:
    return _div(_operand(1.0, z), z)


def _nonzero(z: ir.Value) -> ir.Value:
    """Where either part is nonzero: a complex number's truth value."""
    zero = _const(0.0, z)
    return op.Or(op.Not(op.Equal(_re(z), zero)), op.Not(op.Equal(_im(z), zero)))


def _in_dtype(z: ir.Value, dtype: Any) -> ir.Value:
    """``z`` converted to the complex ``dtype`` argument of a reduction (None: as it is)."""
    return z if dtype is None else op.Cast(z, to=_REAL_PART[ir.DataType(dtype)])


def _complex_rank(z: ir.Value) -> int:
    if z.shape is None:
        raise TranslationError(f"complex tensor {z.name} needs a known rank")
    return z.shape.rank() - 1


def _dim(dim: int, rank: int) -> int:
    """A dim of the complex tensor as an axis of its real view (negative dims skip the pair)."""
    return dim % rank if rank else 0


def _size_tensor(size: Sequence[Any]) -> ir.Value:
    parts = [op.Reshape(s, ints(1)) if isinstance(s, ir.Value) else ints(int(s)) for s in size]
    if not parts:
        return op.Constant(value_ints=[])
    return parts[0] if len(parts) == 1 else op.Concat(*parts, axis=0)


def _filled(value: Any, shape: ir.Value, real_dtype: ir.DataType) -> ir.Value:
    if isinstance(value, ir.Value):
        fill = _real_to_complex(op.Cast(value, to=real_dtype))
    else:
        number = complex(value)
        fill = op.Cast(_double([number.real, number.imag]), to=real_dtype)
    return op.Expand(fill, op.Concat(shape, ints(2), axis=0))


def _torchlib(name: str, *, complex: bool = False) -> Any:
    """torchlib's translation of ``name`` (its complex overload with ``complex``), loading
    torchlib's translations if no node has yet: its registry is empty until then, and reading
    it directly failed every complex diagonal, FFT and index of a process whose cached torchlib
    index spared it the import."""
    return torchlib_function(name, 0, complex)()
