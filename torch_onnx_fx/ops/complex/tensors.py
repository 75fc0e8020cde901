"""Complex tensors through strides, indices, masks and products, on their real view.

The real view of a complex tensor ``S`` is ``S + [2]``, stored as ATen stores complex numbers: the
real and imaginary part of an element side by side. So a strided view of the complex storage is a
strided view of the real one with doubled strides and one more dim of stride 1, an index along a
complex dim addresses both parts of an element (the index gets the trailing pair, expanded), and a
mask selects pairs. Products are the exception: they mix the parts, so they are computed
element by element in complex arithmetic (an ONNX ``ReduceProd``/``Mul`` of the parts would not
be a complex product), and scatters that multiply are declined.
"""

from __future__ import annotations

from typing import Any, Sequence

import onnx_ir as ir
import torch
from onnxscript import opset18 as op

from torch_onnx_fx.dtypes import onnx_dtype
from torch_onnx_fx.errors import TranslationError
from torch_onnx_fx.translate.op_context import OpContext
from torch_onnx_fx.ops._tensors import int64, ints
from torch_onnx_fx.ops.complex.real_view import (
    _complex_rank, _dim, _filled, _in_dtype, _join, _mul, _nonzero, _operand, _re, _size_tensor, _torchlib,
)
from torch_onnx_fx.ops.complex.reductions import aten_mm_complex
from torch_onnx_fx.ops.indexing import aten_nonzero_static
from torch_onnx_fx.ops.linalg import _matrix as mx
from torch_onnx_fx.ops.strided import scattered_positions, starts_its_storage_in_order, storage_gather
from torch_onnx_fx.ops.view_scatter import aten_diagonal_scatter
from torch_onnx_fx.registry import register, wants_context

__all__ = [
    "aten_as_strided_complex", "aten_mul_prims_complex", "aten_prod_complex", "aten_cumprod_complex",
    "aten_gather_complex", "aten_scatter_complex", "aten_masked_select_complex", "aten_masked_scatter_complex",
    "aten_put_complex", "aten_logical_complex", "aten_empty_complex", "aten_as_strided_scatter_complex",
    "aten_diagonal_scatter_complex", "aten_nonzero_static_complex", "aten_addbmm_complex", "aten_cat_complex", "aten_take_complex",
]


def _with_pair(index: ir.Value) -> ir.Value:
    """An index over complex dims as an index over the real view: each entry for both parts."""
    return op.Expand(op.Unsqueeze(index, ints(-1)), op.Concat(op.Shape(index), ints(2), axis=0))


def _scaled(value: Any, factor: int) -> Any:
    return value * factor if isinstance(value, int) else op.Mul(value, int64(factor))


@register("aten::as_strided", "aten::as_strided_copy", complex=True)
@wants_context
def aten_as_strided_complex(
    self: ir.Value, size: Sequence[Any], stride: Sequence[Any], storage_offset: Any = None, *, ctx: OpContext
) -> ir.Value:
    """as_strided(Tensor(a) self, SymInt[] size, SymInt[] stride, SymInt? storage_offset=None) -> Tensor(a)

    In real units each complex stride and the offset double and the pair is one more dim of
    stride 1, which is the real storage torchlib's translation reads (the input in row-major order,
    as for real tensors). An input laid out otherwise (see ``ops/strided.py``) has its complex
    elements looked up by storage position, and each one's pair gathered."""
    example = ctx.inputs[0]
    if isinstance(example, torch.Tensor) and not starts_its_storage_in_order(example):
        indices = storage_gather(example, size, stride, storage_offset)
        if isinstance(indices, str):
            raise TranslationError(
                f"{ctx.target} reads the storage of a complex tensor laid out with strides {list(example.stride())} "
                f"and storage offset {example.storage_offset()}, which the graph cannot reproduce: {indices}."
            )
        return op.Gather(op.Reshape(self, ints(-1, 2)), ctx.constant(indices.astype("int64")), axis=0)
    offset = _scaled(storage_offset if storage_offset is not None else 0, 2)
    return _torchlib("aten::as_strided")(self, [*size, 2], [*(_scaled(s, 2) for s in stride), 1], offset)


@register("prims::mul", complex=True)
def aten_mul_prims_complex(self: Any, other: Any) -> ir.Value:
    """mul(Tensor self, Tensor other) -> Tensor: (a + bi)(c + di) = (ac - bd) + (ad + bc)i"""
    like = self if isinstance(self, ir.Value) else other
    return _mul(_operand(self, like), _operand(other, like))


def _product_axis(self: ir.Value, dim: Any) -> tuple[ir.Value, int]:
    """The tensor and complex axis a product runs along (all elements, flattened, for ``dim=None``)."""
    rank = _complex_rank(self)
    if dim is None or (isinstance(dim, (list, tuple)) and len(dim) != 1):
        if dim not in (None, []) and sorted(_dim(d, rank) for d in dim) != list(range(rank)):
            raise TranslationError("A product of a complex tensor over several (not all) dims is not supported.")
        return op.Reshape(self, ints(-1, 2)), 0
    axis = dim[0] if isinstance(dim, (list, tuple)) else dim
    if rank == 0:
        return op.Reshape(self, ints(1, 2)), 0
    return self, _dim(axis, rank)


def _running_products(ctx: OpContext, x: ir.Value, axis: int, *, keep_all: bool) -> ir.Value:
    """Products along ``axis`` in ATen's order, one complex multiplication per element: the
    final product (axis kept, size 1) or, with ``keep_all``, every prefix's (``cumprod``)."""
    length = op.Squeeze(op.Shape(x, start=axis, end=axis + 1))
    part = op.Concat(op.Shape(x, end=axis), ints(1), op.Shape(x, start=axis + 1, end=-1), axis=0)
    unit = _join(op.Expand(op.CastLike(1.0, x), part), op.Expand(op.CastLike(0.0, x), part))
    if x.shape is not None:
        unit.shape = ir.Shape([*list(x.shape)[:axis], 1, *list(x.shape)[axis + 1 :]])
    positions = op.Reshape(op.Range(int64(0), length, int64(1)), ints(-1, *([1] * (mx.rank(x) - axis - 1))))
    states = [unit, op.Identity(x)] if keep_all else [unit]

    def step(i: ir.Value, product: ir.Value, *rest: ir.Value) -> list[ir.Value]:
        product = _mul(product, op.Gather(x, mx.at(i), axis=axis))
        if not keep_all:
            return [product]
        (out,) = rest
        return [product, op.Where(op.Equal(positions, i), product, out)]

    if keep_all:
        states[1].shape = x.shape
    results = mx.loop(ctx, length, states, step)
    # An empty axis runs no iteration: the product of nothing is 1 (and cumprod's output is empty).
    return results[-1] if keep_all else results[0]


@register("aten::prod", "aten::prod.dim_int", "prims::prod", complex=True)
@wants_context
def aten_prod_complex(self: ir.Value, *args: Any, ctx: OpContext, **kwargs: Any) -> ir.Value:
    """prod.dim_int(Tensor self, int dim, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor
    (and prod(self), prims.prod(inp, dims)): complex products in sequence"""
    values = ctx.arguments((self, *args), kwargs)
    dim = values.get("dim", values.get("dims"))
    keepdim = bool(values.get("keepdim", False))
    self = _in_dtype(self, values.get("dtype", values.get("output_dtype")))
    rank = _complex_rank(self)
    x, axis = _product_axis(self, dim)
    product = _running_products(ctx, x, axis, keep_all=False)
    if x is not self:  # every element: a 0-d result, or all dims kept as 1
        return op.Reshape(product, ints(*([1] * rank), 2) if keepdim else ints(2))
    return product if keepdim else op.Squeeze(product, ints(axis))


@register("aten::cumprod", complex=True)
@wants_context
def aten_cumprod_complex(self: ir.Value, dim: int, *, dtype: Any = None, ctx: OpContext) -> ir.Value:
    """cumprod(Tensor self, int dim, *, ScalarType? dtype=None) -> Tensor: every prefix's complex
    product, in sequence"""
    self = _in_dtype(self, dtype)
    rank = _complex_rank(self)
    if rank == 0:
        return op.Identity(self)
    return _running_products(ctx, self, _dim(dim, rank), keep_all=True)


@register("aten::gather", complex=True)
def aten_gather_complex(self: ir.Value, dim: int, index: ir.Value, *, sparse_grad: bool = False) -> ir.Value:
    """gather(Tensor self, int dim, Tensor index, *, bool sparse_grad=False) -> Tensor"""
    rank = _complex_rank(self)
    if rank == 0:  # the only valid index is 0: the element itself
        return op.Identity(self)
    return op.GatherElements(self, _with_pair(index), axis=_dim(dim, rank))


_SCATTER_REDUCTIONS = {None: "none", "add": "add", "sum": "add"}


@register(
    "aten::scatter.src", "aten::scatter.value", "aten::scatter.reduce", "aten::scatter.value_reduce",
    "aten::scatter_add", complex=True,
)
@wants_context
def aten_scatter_complex(
    self: ir.Value, dim: int, index: ir.Value, src: Any, reduce: str | None = None, *, ctx: OpContext
) -> ir.Value:
    """scatter.src(Tensor self, int dim, Tensor index, Tensor src) -> Tensor (and .value, .reduce,
    scatter_add): the pair rides along each index. A multiplying scatter is declined: ONNX would
    multiply the parts separately, which is not a complex product."""
    if ctx.target == "aten::scatter_add":
        reduce = "add"
    if reduce not in _SCATTER_REDUCTIONS:
        raise TranslationError(
            f"scatter with reduce={reduce!r} on a complex tensor is not supported (ONNX would multiply "
            "the real and imaginary parts separately)."
        )
    rank = _complex_rank(self)
    if rank == 0:
        self, index = op.Reshape(self, ints(1, 2)), op.Reshape(index, ints(1))
    pair_index = _with_pair(index)
    if isinstance(src, ir.Value):
        # src may be larger than index: only its leading block, of index's shape, is read.
        updates = op.Slice(src, ints(*([0] * max(rank, 1))), op.Shape(index), ints(*range(max(rank, 1))))
        if rank == 0:
            updates = op.Reshape(src, ints(1, 2))
    else:
        updates = op.Expand(_operand(src, self), op.Shape(pair_index))
    out = op.ScatterElements(self, pair_index, updates, axis=_dim(dim, max(rank, 1)), reduction=_SCATTER_REDUCTIONS[reduce])
    return op.Reshape(out, ints(2)) if rank == 0 else out


def _broadcast_shape(self: ir.Value, mask: ir.Value) -> ir.Value:
    """The complex shape ``self`` and ``mask`` broadcast to."""
    return op.Shape(op.Where(mask, _re(self), _re(self)))


@register("aten::masked_select", complex=True)
def aten_masked_select_complex(self: ir.Value, mask: ir.Value) -> ir.Value:
    """masked_select(Tensor self, Tensor mask) -> Tensor: the selected pairs, in row-major order"""
    shape = _broadcast_shape(self, mask)
    pairs = op.Reshape(op.Expand(self, op.Concat(shape, ints(2), axis=0)), ints(-1, 2))
    return op.Compress(pairs, op.Reshape(op.Expand(mask, shape), ints(-1)), axis=0)


@register("aten::masked_scatter", complex=True)
def aten_masked_scatter_complex(self: ir.Value, mask: ir.Value, source: ir.Value) -> ir.Value:
    """masked_scatter(Tensor self, Tensor mask, Tensor source) -> Tensor: the k-th selected
    element (row-major) takes source's k-th element"""
    # The result has the broadcast shape of self and mask (Expand broadcasts both ways).
    shape = op.Shape(op.Expand(_re(self), op.Shape(mask)))
    pairs = op.Concat(shape, ints(2), axis=0)
    flat_mask = op.Reshape(op.Expand(mask, shape), ints(-1))
    taken = op.Sub(op.CumSum(op.Cast(flat_mask, to=ir.DataType.INT64), int64(0)), int64(1))
    values = op.Gather(op.Reshape(source, ints(-1, 2)), op.Max(taken, int64(0)), axis=0)
    flat = op.Where(op.Unsqueeze(flat_mask, ints(-1)), values, op.Reshape(op.Expand(self, pairs), ints(-1, 2)))
    return op.Reshape(flat, pairs)


@register("aten::take", complex=True)
def aten_take_complex(self: ir.Value, index: ir.Value) -> ir.Value:
    """take(Tensor self, Tensor index) -> Tensor: the pairs of the flattened tensor at ``index``"""
    return op.Gather(op.Reshape(self, ints(-1, 2)), index, axis=0)


@register("aten::put", complex=True)
def aten_put_complex(self: ir.Value, index: ir.Value, source: ir.Value, accumulate: bool = False) -> ir.Value:
    """put(Tensor self, Tensor index, Tensor source, bool accumulate=False) -> Tensor: ``self``
    as a flat list of pairs, with negative indices counted from its end"""
    flat = op.Reshape(self, ints(-1, 2))
    count = op.Shape(flat, start=0, end=1)
    positions = op.Reshape(index, ints(-1))
    positions = op.Where(op.Less(positions, int64(0)), op.Add(positions, count), positions)
    updates = op.Reshape(source, ints(-1, 2))
    out = op.ScatterND(flat, op.Unsqueeze(positions, ints(-1)), updates, reduction="add" if accumulate else "none")
    return op.Reshape(out, op.Shape(self))


def _truth(value: Any) -> ir.Value:
    if not isinstance(value, ir.Value):
        return op.Constant(value=ir.tensor(bool(value)))
    return value if value.dtype == ir.DataType.BOOL else op.Not(op.Equal(value, op.CastLike(0, value)))


_LOGICAL = {"aten::logical_and": "And", "aten::logical_or": "Or", "aten::logical_xor": "Xor"}


@register(*_LOGICAL, "aten::logical_not", complex=True)
@wants_context
def aten_logical_complex(self: ir.Value, other: Any = None, *, ctx: OpContext) -> ir.Value:
    """logical_or(Tensor self, Tensor other) -> Tensor (and _and, _xor, _not): a complex number
    is true when either part is nonzero"""

    def truth(example: Any, value: Any) -> ir.Value:
        if isinstance(example, torch.Tensor) and example.is_complex():
            return _nonzero(value)
        return _truth(value)

    left = truth(ctx.inputs[0], self)
    name = ctx.target
    if name == "aten::logical_not":
        return op.Not(left)
    return getattr(op, _LOGICAL[name])(left, truth(ctx.inputs[1], other))


@register("aten::empty.memory_format", "aten::new_empty", "aten::empty_like", complex=True)
@wants_context
def aten_empty_complex(*args: Any, ctx: OpContext, **kwargs: Any) -> ir.Value:
    """empty.memory_format(SymInt[] size, *, ScalarType? dtype=None, ...) -> Tensor (and
    new_empty, empty_like): zeros — any value is right for uninitialised memory, and zeros keep
    the graph deterministic"""
    name = ctx.target
    real = onnx_dtype(ctx.result.real.dtype)
    if name == "aten::empty_like":
        source = ctx.inputs[0]
        return _filled(0.0, op.Shape(args[0], end=-1) if source.is_complex() else op.Shape(args[0]), real)
    return _filled(0.0, _size_tensor(args[1] if name == "aten::new_empty" else args[0]), real)


@register("aten::as_strided_scatter", "prims::as_strided_scatter", complex=True)
@wants_context
def aten_as_strided_scatter_complex(
    self: ir.Value, src: ir.Value, size: Sequence[Any], stride: Sequence[Any], storage_offset: Any = None, *, ctx: OpContext
) -> ir.Value:
    """as_strided_scatter(Tensor self, Tensor src, SymInt[] size, SymInt[] stride, SymInt? storage_offset=None) -> Tensor

    ``src``'s pairs written at the positions the real translation finds (a contiguous ``self``:
    another layout, which the numbering of its values would misplace, is refused)."""
    flat = op.Reshape(self, ints(-1, 2))
    out = op.ScatterND(flat, scattered_positions(ctx, size, stride, storage_offset), op.CastLike(op.Reshape(src, ints(-1, 2)), self))
    return op.Reshape(out, op.Shape(self))


@register("aten::diagonal_scatter", complex=True)
def aten_diagonal_scatter_complex(self: ir.Value, src: ir.Value, offset: int = 0, dim1: int = 0, dim2: int = 1) -> ir.Value:
    """diagonal_scatter(Tensor self, Tensor src, int offset=0, int dim1=0, int dim2=1) -> Tensor

    The real translation moves the two dims last and reads the diagonal from ``src``'s last dim;
    on the real view the pair becomes one more batch dim, so ``src``'s pair goes before its
    diagonal."""
    rank = _complex_rank(self)
    src_rank = _complex_rank(src)
    pair_first = op.Transpose(src, perm=[*range(src_rank - 1), src_rank, src_rank - 1])
    return aten_diagonal_scatter(self, pair_first, offset, _dim(dim1, rank), _dim(dim2, rank))


@register("aten::nonzero_static", complex=True)
def aten_nonzero_static_complex(self: ir.Value, *, size: Any, fill_value: int = -1) -> ir.Value:
    """nonzero_static(Tensor self, *, SymInt size, int fill_value=-1) -> Tensor: the real
    translation on where either part is nonzero"""
    return aten_nonzero_static(_nonzero(self), size=size, fill_value=fill_value)


@register("aten::addbmm", complex=True)
def aten_addbmm_complex(self: ir.Value, batch1: ir.Value, batch2: ir.Value, *, beta: Any = 1, alpha: Any = 1) -> ir.Value:
    """addbmm(Tensor self, Tensor batch1, Tensor batch2, *, Scalar beta=1, Scalar alpha=1) -> Tensor:
    beta * self + alpha * (the sum of the batch's complex matrix products); beta = 0 ignores
    ``self`` (NaN included), as ATen does"""
    total = op.ReduceSum(aten_mm_complex(batch1, batch2), ints(0), keepdims=0)
    if complex(alpha) != 1:
        total = _mul(_operand(alpha, total), total)
    if complex(beta) == 0:
        return total
    scaled = self if complex(beta) == 1 else _mul(_operand(beta, self), self)
    return op.Add(scaled, total)


@register("aten::cat", complex=True)
@wants_context
def aten_cat_complex(tensors: Sequence[ir.Value], dim: int = 0, *, ctx: OpContext) -> ir.Value:
    """cat(Tensor[] tensors, int dim=0) -> Tensor: a Concat of the real views, without ATen's
    legacy empty inputs (1-D of size 0, skipped beside tensors of any rank), whose real view
    [0, 2] has another rank than the others' (an invalid model before)."""
    rank = ctx.result.dim()
    kept = [
        tensor for tensor, example in zip(tensors, ctx.inputs[0])
        if not (example.dim() == 1 and isinstance(example.shape[0], int) and example.shape[0] == 0)
    ]
    if not kept:  # every input empty: so is the result
        return op.Identity(tensors[0])
    return op.Concat(*kept, axis=_dim(dim, rank)) if len(kept) > 1 else op.Identity(kept[0])
