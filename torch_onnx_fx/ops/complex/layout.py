"""Identity, conversions, factories and layout operators of complex tensors, on the real view.

Operators whose dims count from the end (``unsqueeze(-1)``, ``select(-1)``) shift negative dims
past the trailing pair; those with a size list (``expand``, ``full``) append 2 to it.
"""

from __future__ import annotations

from typing import Any, Sequence

import onnx_ir as ir
import torch
from onnxscript import opset18 as op

from torch_onnx_fx.dtypes import onnx_dtype
from torch_onnx_fx.errors import TranslationError
from torch_onnx_fx.translate.op_context import OpContext
from torch_onnx_fx.ops import _tensors as tx
from torch_onnx_fx.ops._tensors import int64, ints
from torch_onnx_fx.ops.complex.real_view import _complex_rank, _dim, _filled, _nonzero, _re, _real_to_complex, _size_tensor
from torch_onnx_fx.registry import register, wants_context

__all__ = ['aten_identity_complex', 'aten_convert_complex', 'aten_full_complex', 'aten_full_like_complex', 'aten_unsqueeze_complex', 'aten_select_complex', 'aten_index_select_complex', 'aten_expand_complex', 'aten_squeeze_complex', 'aten_split_complex', 'aten_unbind_complex', 'aten_copy_complex', 'aten_repeat_complex', 'aten_assert_noop_complex', 'aten_sym_size_complex', 'aten_sym_numel_complex', 'aten_scalar_tensor_complex', 'aten_flip_complex', 'aten_roll_complex']


# -- identity, conversions, factories ------------------------------------------------------------


@register(
    "aten::alias", "aten::detach", "aten::lift_fresh_copy", "aten::alias_copy", "aten::detach_copy",
    "aten::clone", "aten::contiguous", complex=True,
)
def aten_identity_complex(self: ir.Value, *args: Any, **kwargs: Any) -> ir.Value:
    """alias(Tensor(a) self) -> Tensor(a) and other copies: the real view is the value"""
    return op.Identity(self)


@register(
    "aten::_assert_tensor_metadata", "aten::_assert_scalar", "aten::_assert_async", "aten::_assert_async.msg",
    complex=True,
)
def aten_assert_noop_complex(*args: Any, **kwargs: Any) -> None:
    """Runtime checks are dropped, as for real tensors: ONNX has no way to raise."""
    return None


@register(
    "aten::_to_copy", "prims::convert_element_type", "aten::to.dtype", "aten::to.dtype_layout",
    "aten::_to_copy.default", complex=True,
)
@wants_context
def aten_convert_complex(self: ir.Value, *args: Any, ctx: OpContext, **kwargs: Any) -> ir.Value:
    """_to_copy(Tensor self, *, ScalarType? dtype=None, ...) -> Tensor, between any dtypes where
    one side is complex: complex → complex casts both parts, complex → real keeps the real part
    (ATen warns and drops the imaginary one), complex → bool is z != 0, real → complex adds a
    zero imaginary part."""
    source, result = ctx.inputs[0], ctx.result
    target = onnx_dtype(result.real.dtype if result.is_complex() else result.dtype)
    if source.is_complex() and result.is_complex():
        return op.Cast(self, to=target)
    if source.is_complex():
        if result.dtype == torch.bool:
            return _nonzero(self)
        return op.Cast(_re(self), to=target)
    return _real_to_complex(op.Cast(self, to=target))


@register("aten::full", "aten::zeros", "aten::ones", "aten::new_full", "aten::new_zeros", "aten::new_ones", complex=True)
@wants_context
def aten_full_complex(*args: Any, ctx: OpContext, **kwargs: Any) -> ir.Value:
    """full(SymInt[] size, Scalar fill_value, *, ScalarType? dtype=None, ...) -> Tensor (and
    zeros/ones/new_*) with a complex dtype"""
    name, result = ctx.target, ctx.result
    new = "new_" in name
    size = args[1] if new else args[0]
    if "full" in name:
        fill = args[2] if new else args[1]
    else:
        fill = 0.0 if "zeros" in name else 1.0
    return _result_filled(fill, _size_tensor(size), result)


@register("aten::scalar_tensor", complex=True)
@wants_context
def aten_scalar_tensor_complex(s: Any, *args: Any, ctx: OpContext, **kwargs: Any) -> ir.Value:
    """scalar_tensor(Scalar s, *, ScalarType? dtype=None, ...) -> Tensor with a complex dtype: a
    0-d complex tensor, whose real form is [real, imaginary] (torchlib's gave a bare 0-d real)."""
    return _filled(s, op.Constant(value_ints=[]), onnx_dtype(ctx.result.real.dtype))


@register("aten::full_like", "aten::zeros_like", "aten::ones_like", "aten::fill.Scalar", "aten::fill.Tensor", complex=True)
@wants_context
def aten_full_like_complex(self: ir.Value, *args: Any, ctx: OpContext, **kwargs: Any) -> ir.Value:
    """full_like(Tensor self, Scalar fill_value, *, ScalarType? dtype=None, ...) -> Tensor (and
    zeros_like/ones_like/fill) with a complex result"""
    name = ctx.target
    if "zeros" in name:
        fill: Any = 0.0
    elif "ones" in name:
        fill = 1.0
    else:
        fill = args[0] if args else kwargs.get("fill_value", kwargs.get("value"))
    source = ctx.inputs[0]
    shape = op.Shape(self, end=-1) if source.is_complex() else op.Shape(self)
    if isinstance(fill, ir.Value) and isinstance(ctx.inputs[1], torch.Tensor) and ctx.inputs[1].is_complex():
        return op.Expand(op.CastLike(fill, self) if source.is_complex() else fill, op.Concat(shape, ints(2), axis=0))
    return _result_filled(fill, shape, ctx.result)


def _result_filled(fill: Any, shape: ir.Value, result: torch.Tensor) -> ir.Value:
    """``fill`` over ``shape`` as the result's type: its real view when complex, a plain real
    tensor when a complex input asked for a real one (``zeros_like(z, dtype=torch.float64)``,
    which came out as a real view [..., 2])."""
    if result.is_complex():
        return _filled(fill, shape, onnx_dtype(result.real.dtype))
    dtype = onnx_dtype(result.dtype)
    if isinstance(fill, ir.Value):
        value = op.Cast(fill, to=dtype)
    elif result.dtype.is_floating_point:
        # Held in double, rounded once to the result's type.
        value = op.Cast(op.Constant(value=ir.tensor(float(fill), dtype=ir.DataType.DOUBLE)), to=dtype)
    else:
        # Integers in their own type: 2**53 + 1 has no double.
        value = op.Constant(value=ir.tensor(torch.tensor(fill, dtype=result.dtype).numpy(), dtype=dtype))
    return op.Expand(value, shape)


# -- layout --------------------------------------------------------------------------------------


@register("aten::unsqueeze", complex=True)
def aten_unsqueeze_complex(self: ir.Value, dim: int) -> ir.Value:
    """unsqueeze(Tensor(a) self, int dim) -> Tensor(a)"""
    rank = _complex_rank(self) + 1
    return op.Unsqueeze(self, ints(dim % rank))


@register("aten::select.int", complex=True)
def aten_select_complex(self: ir.Value, dim: int, index: Any) -> ir.Value:
    """select.int(Tensor(a) self, int dim, SymInt index) -> Tensor(a)"""
    index = op.Cast(index, to=ir.DataType.INT64) if isinstance(index, ir.Value) else int64(index)
    return op.Gather(self, index, axis=_dim(dim, _complex_rank(self)))


@register("aten::index_select", complex=True)
def aten_index_select_complex(self: ir.Value, dim: int, index: ir.Value) -> ir.Value:
    """index_select(Tensor self, int dim, Tensor index) -> Tensor"""
    rank = _complex_rank(self)
    if not rank:
        # A 0-d tensor has one element, at index 0 (ATen checks it): it is its own selection.
        return op.Identity(self)
    return op.Gather(self, op.Cast(op.Reshape(index, ints(-1)), to=ir.DataType.INT64), axis=_dim(dim, rank))


@register("aten::expand", "aten::expand_copy", complex=True)
def aten_expand_complex(self: ir.Value, size: Sequence[Any], *, implicit: bool = False) -> ir.Value:
    """expand(Tensor(a) self, SymInt[] size, *, bool implicit=False) -> Tensor(a)

    -1 keeps a dim; ONNX's Expand broadcasts both ways, so 1 says the same."""
    size = [1 if isinstance(s, int) and s == -1 else s for s in size]
    return op.Expand(self, op.Concat(_size_tensor(size), ints(2), axis=0))


@register("aten::squeeze", "aten::squeeze.default", complex=True)
def aten_squeeze_complex(self: ir.Value) -> ir.Value:
    """squeeze(Tensor(a) self) -> Tensor(a): every dim of size 1 but the trailing pair"""
    if self.shape is None or any(not isinstance(d, int) for d in list(self.shape)[:-1]):
        raise TranslationError("squeeze of a complex tensor needs static dims")
    axes = [i for i, d in enumerate(list(self.shape)[:-1]) if d == 1]
    return op.Squeeze(self, ints(*axes)) if axes else op.Identity(self)


@register("aten::split.Tensor", "aten::split_with_sizes", "aten::split", complex=True)
def aten_split_complex(self: ir.Value, split_size: Any, dim: int = 0) -> list[ir.Value]:
    """split.Tensor(Tensor(a -> *) self, SymInt split_size, int dim=0) -> Tensor(a)[] (and
    split_with_sizes)"""
    rank = _complex_rank(self)
    axis = _dim(dim, rank)
    if self.shape is None or not isinstance(self.shape[axis], int):
        raise TranslationError("split of a complex tensor needs a static size along the dim")
    length = self.shape[axis]
    if isinstance(split_size, int):
        sizes = [min(split_size, length - start) for start in range(0, length, split_size)] or [0]
    else:
        sizes = [int(s) for s in split_size]
    pieces, start = [], 0
    for size in sizes:
        pieces.append(op.Slice(self, ints(start), ints(start + size), ints(axis)))
        start += size
    return pieces


@register("aten::unbind.int", complex=True)
def aten_unbind_complex(self: ir.Value, dim: int = 0) -> list[ir.Value]:
    """unbind.int(Tensor(a -> *) self, int dim=0) -> Tensor(a)[]"""
    rank = _complex_rank(self)
    axis = _dim(dim, rank)
    if self.shape is None or not isinstance(self.shape[axis], int):
        raise TranslationError("unbind of a complex tensor needs a static size along the dim")
    return [op.Gather(self, int64(i), axis=axis) for i in range(self.shape[axis])]


@register("aten::copy", complex=True)
@wants_context
def aten_copy_complex(self: ir.Value, src: ir.Value, non_blocking: bool = False, *, ctx: OpContext) -> ir.Value:
    """copy(Tensor self, Tensor src, bool non_blocking=False) -> Tensor: src (made complex by the
    normalize stage) in self's precision and shape"""
    destination = ctx.inputs[0]
    if not destination.is_complex():
        raise TranslationError(f"copying a complex tensor into a {destination.dtype} one is not supported")
    return op.Expand(op.Cast(src, to=onnx_dtype(destination.real.dtype)), op.Shape(self))


@register("aten::repeat", complex=True)
def aten_repeat_complex(self: ir.Value, repeats: Sequence[Any]) -> ir.Value:
    """repeat(Tensor self, SymInt[] repeats) -> Tensor: the pair is repeated once"""
    rank = _complex_rank(self)
    extra = len(repeats) - rank
    value = op.Unsqueeze(self, ints(*range(extra))) if extra > 0 else self
    return op.Tile(value, op.Concat(_size_tensor(repeats), ints(1), axis=0))


@register("aten::sym_size.int", complex=True)
def aten_sym_size_complex(self: ir.Value, dim: int) -> ir.Value:
    """sym_size.int(Tensor self, int dim) -> SymInt of a complex tensor (not of its pair)"""
    axis = _dim(dim, _complex_rank(self))
    return op.Squeeze(op.Shape(self, start=axis, end=axis + 1))


@register("aten::sym_numel", complex=True)
def aten_sym_numel_complex(self: ir.Value) -> ir.Value:
    """sym_numel(Tensor self) -> SymInt: half the real view's element count"""
    return op.Div(op.Size(self), int64(2))


@register("aten::flip", complex=True)
def aten_flip_complex(self: ir.Value, dims: Sequence[int]) -> ir.Value:
    """flip(Tensor self, int[] dims) -> Tensor: the complex axes reversed, never the (re, im) pair.
    A 0-d tensor's dim 0 is itself (torchlib reversed its real view's pair: re and im swapped)."""
    rank = _complex_rank(self)
    axes = sorted({_dim(d, rank) for d in dims}) if rank else []
    if not axes:
        return op.Identity(self)
    # From the last element back past the first: INT64_MIN as the end of a reversed slice.
    return op.Slice(self, ints(*[-1] * len(axes)), ints(*[-(2**63)] * len(axes)), ints(*axes), ints(*[-1] * len(axes)))


@register("aten::roll", complex=True)
def aten_roll_complex(self: ir.Value, shifts: Sequence[Any], dims: Sequence[int] = ()) -> ir.Value:
    """roll(Tensor self, SymInt[1] shifts, int[1] dims=[]) -> Tensor: the complex axes rolled on
    the real view, (re, im) pairs moving together (torchlib rolls the two parts apart and joins
    them: 15 nodes for an fftshift of two dims where this takes 6). Without dims the flattened
    tensor rolls."""
    rank = _complex_rank(self)
    if self.shape is not None and any(isinstance(d, int) and d == 0 for d in self.shape):
        # Nothing to move; and the flattened form's reshape back needs allowzero (opset 14).
        return op.Identity(self)
    if not dims:
        flat = op.Reshape(self, ints(-1, 2))
        return op.Reshape(tx.rolled(flat, shifts[0], 0), op.Shape(self), allowzero=1)
    result = self
    for shift, dim in zip(shifts, dims, strict=True):
        result = tx.rolled(result, shift, _dim(dim, rank))
    return result
