"""Reductions, selections and products of complex tensors, on the real view.

A reduction never reduces the trailing pair (a sum over "all axes" of the real view would add
the real and imaginary parts); ``mm``/``bmm`` are four real products.
"""

from __future__ import annotations

from typing import Any, Sequence

import onnx_ir as ir
from onnxscript import opset18 as op
from onnxscript import opset20

from torch_onnx_fx.translate.op_context import OpContext
from torch_onnx_fx.ops._tensors import int64, ints, mean_by_count
from torch_onnx_fx.ops.complex.real_view import _complex_rank, _const, _dim, _im, _in_dtype, _join, _nonzero, _re, _torchlib
from torch_onnx_fx.registry import register, wants_context

__all__ = ['aten_abs_complex', 'aten_abs_complex_opset20', 'aten_cumsum_complex', 'aten_nonzero_complex', 'aten_index_complex', 'aten_index_put_complex', 'aten_sum_complex', 'aten_mm_complex', 'aten_mean_complex', 'aten_var_complex']


# -- reductions and selections -------------------------------------------------------------------


@register("aten::abs", complex=True, min_opset=20)
def aten_abs_complex_opset20(self: ir.Value) -> ir.Value:
    """abs(Tensor self) -> Tensor: as ``aten_abs_complex``; from opset 20 ReduceMax takes the
    bool flags themselves, two Casts fewer (registered first: preferred where usable)"""
    if self.dtype == ir.DataType.FLOAT:
        return _abs_complex64(self, bool_reduce=True)
    return _abs_scaled(self)


@register("aten::abs", complex=True)
def aten_abs_complex(self: ir.Value) -> ir.Value:
    """abs(Tensor self) -> Tensor: hypot of the two parts, without overflow past the square root
    of the dtype's largest value (torchlib's and torch.onnx's sqrt(a² + b²) overflows there)"""
    if self.dtype == ir.DataType.FLOAT:
        return _abs_complex64(self)
    return _abs_scaled(self)


def _abs_scaled(self: ir.Value) -> ir.Value:
    """hypot scaled by the larger part (complex128, whose squares could overflow float64)."""
    a, b = op.Abs(_re(self)), op.Abs(_im(self))
    big = op.Max(a, b)
    small = op.Min(a, b)
    zero = _const(0.0, a)
    ratio = op.Where(op.Equal(big, zero), zero, op.Div(small, big))
    magnitude = op.Mul(big, op.Sqrt(op.Add(_const(1.0, a), op.Mul(ratio, ratio))))
    # inf beats NaN in hypot; the ratio inf/inf is NaN, so infinities are settled apart.
    return op.Where(op.Or(op.IsInf(a), op.IsInf(b)), _const(float("inf"), a), magnitude)


def _abs_complex64(self: ir.Value, bool_reduce: bool = False) -> ir.Value:
    """The float32 parts' squares and their sum cannot overflow or lose bits in float64, so its
    root rounded to float32 is the correctly rounded hypot: bit for bit what ATen computes, in
    6-8 nodes where the scaled formula above needs 17 and is off by an ulp in a third of cases.
    Only inf beside NaN needs help (the sum is NaN, hypot is inf); ReduceMax over the bool flags
    (a uint8 copy below opset 20) says whether a part is infinite, since ORT's float ReduceMax
    need not propagate NaN."""
    axis = ints(-1)
    magnitude = op.Cast(
        op.ReduceL2(op.Cast(self, to=ir.DataType.DOUBLE), axis, keepdims=0), to=ir.DataType.FLOAT
    )
    if bool_reduce:
        infinite = opset20.ReduceMax(op.IsInf(self), axis, keepdims=0)
    else:
        infinite = op.Cast(op.ReduceMax(op.Cast(op.IsInf(self), to=ir.DataType.UINT8), axis, keepdims=0), to=ir.DataType.BOOL)
    return op.Where(infinite, _const(float("inf"), magnitude), magnitude)


@register("aten::cumsum", complex=True)
def aten_cumsum_complex(self: ir.Value, dim: int, *, dtype: Any = None) -> ir.Value:
    """cumsum(Tensor self, int dim, *, ScalarType? dtype=None) -> Tensor: both parts add up"""
    self = _in_dtype(self, dtype)
    rank = _complex_rank(self)
    if rank == 0:
        # A 0-d tensor's running sum is itself: its real view's axis 0 is the (re, im) pair,
        # which a CumSum there adds into the imaginary part.
        return op.Identity(self)
    return op.CumSum(self, int64(_dim(dim, rank)))


@register("aten::nonzero", complex=True)
def aten_nonzero_complex(self: ir.Value) -> ir.Value:
    """nonzero(Tensor self) -> Tensor: where either part is nonzero"""
    present = _nonzero(self)
    if _complex_rank(self) == 0:
        present = op.Reshape(present, ints(1))
        return op.Transpose(op.Slice(op.NonZero(present), ints(0), ints(0), ints(0)), perm=[1, 0])
    return op.Transpose(op.NonZero(present), perm=[1, 0])


@register("aten::index.Tensor", "aten::_unsafe_index.Tensor", complex=True)
def aten_index_complex(self: ir.Value, indices: Sequence[Any]) -> ir.Value:
    """index.Tensor(Tensor self, Tensor?[] indices) -> Tensor

    The indices address leading dims only, so the trailing pair is carried along as any other
    trailing dim is: torchlib's real translation computes it unchanged."""
    return _torchlib("aten::index.Tensor")(self, indices)


@register("aten::index_put", "aten::_unsafe_index_put", complex=True)
def aten_index_put_complex(self: ir.Value, indices: Sequence[Any], values: ir.Value, accumulate: bool = False) -> ir.Value:
    """index_put(Tensor self, Tensor?[] indices, Tensor values, bool accumulate=False) -> Tensor

    As index.Tensor: the pair is one more trailing dim, for the values too (the normalize stage
    has made them complex)."""
    return _torchlib("aten::index_put")(self, indices, values, accumulate)


def _reduced_axes(dim: Any, rank: int) -> list[int]:
    """The real view's axes an ATen ``dim`` argument reduces (all for None or []), never the
    trailing pair: a reduction over "all axes" of the real view would combine the real and
    imaginary parts (torchlib's does, for 0-d complex tensors)."""
    if not rank:
        return []
    dims = list(range(rank)) if dim is None or (isinstance(dim, (list, tuple)) and not dim) else ([dim] if isinstance(dim, int) else list(dim))
    return sorted({_dim(d, rank) for d in dims})


def _complex_reduction(reduce: str, self: ir.Value, dim: Any, keepdim: bool, dtype: Any) -> ir.Value:
    rank = _complex_rank(self)
    self = _in_dtype(self, dtype)
    axes = _reduced_axes(dim, rank)
    if not axes:
        return op.Identity(self)
    return getattr(op, reduce)(self, ints(*axes), keepdims=int(keepdim))


@register("aten::mm", "aten::bmm", complex=True)
def aten_mm_complex(self: ir.Value, mat2: ir.Value) -> ir.Value:
    """mm(Tensor self, Tensor mat2) -> Tensor (and bmm) of complex matrices: four real products,
    (a + bi)(c + di) = (ac - bd) + (ad + bc)i, each summed over the inner dim by MatMul"""
    a, b, c, d = _re(self), _im(self), _re(mat2), _im(mat2)
    real = op.Sub(op.MatMul(a, c), op.MatMul(b, d))
    imag = op.Add(op.MatMul(a, d), op.MatMul(b, c))
    return _join(real, imag)


_SPREADS = (
    "aten::var", "aten::var.dim", "aten::var.correction", "aten::std", "aten::std.dim", "aten::std.correction",
    "aten::var_mean", "aten::var_mean.dim", "aten::var_mean.correction",
    "aten::std_mean", "aten::std_mean.dim", "aten::std_mean.correction",
)


@register(*_SPREADS, complex=True)
@wants_context
def aten_var_complex(self: ir.Value, *args: Any, ctx: OpContext, **kwargs: Any) -> Any:
    """var/std(Tensor self, int[1]? dim, *, Scalar? correction, bool keepdim) -> Tensor (and the
    unbiased= forms, and var_mean/std_mean) of complex tensors: the mean of |z - mean(z)|² over the
    dims, divided by max(N - correction, 0); a real result (the means of *_mean are complex)."""
    values = ctx.arguments((self, *args), kwargs)
    dim, keepdim = values.get("dim"), bool(values.get("keepdim", False))
    correction = values.get("correction")
    if correction is None:
        correction = 1 if values.get("unbiased", True) else 0
    axes = _reduced_axes(dim, _complex_rank(self))
    mean = mean_by_count(self, axes, keepdims=True) if axes else self
    spread = op.Sub(self, mean)
    squares = op.ReduceSum(op.Mul(spread, spread), ints(-1), keepdims=0)
    total = op.ReduceSum(squares, ints(*axes), keepdims=int(keepdim)) if axes else squares
    if axes:
        count = op.ReduceProd(op.Gather(op.Shape(squares), ints(*axes)), keepdims=0)
    else:
        count = op.Constant(value=ir.tensor(1, dtype=ir.DataType.INT64))
    divisor = op.Max(op.Sub(op.CastLike(count, total), _const(float(correction), total)), _const(0.0, total))
    result = op.Div(total, divisor)
    name = ctx.target
    if "std" in name:
        result = op.Sqrt(result)
    if name.split(".")[0].endswith("_mean"):
        return result, mean if keepdim or not axes else op.Squeeze(mean, ints(*axes))
    return result


@register("aten::sum", "aten::sum.dim_IntList", complex=True)
def aten_sum_complex(self: ir.Value, dim: Any = None, keepdim: bool = False, *, dtype: Any = None) -> ir.Value:
    """sum.dim_IntList(Tensor self, int[1]? dim, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor"""
    return _complex_reduction("ReduceSum", self, dim, keepdim, dtype)


@register("aten::mean", "aten::mean.dim", complex=True)
def aten_mean_complex(self: ir.Value, dim: Any = None, keepdim: bool = False, *, dtype: Any = None) -> ir.Value:
    """mean.dim(Tensor self, int[1]? dim, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor
    (a 0-d complex tensor is its own mean; torchlib averaged its real and imaginary parts)"""
    self = _in_dtype(self, dtype)
    axes = _reduced_axes(dim, _complex_rank(self))
    return mean_by_count(self, axes, keepdim) if axes else op.Identity(self)
