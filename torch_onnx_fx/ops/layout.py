"""Views, reshapes, slices, concatenation, conversions and lookups: the data movement of every
model.

Like ``ops/elementwise.py``, these keep a transformer's graph free of torchlib's functions (whose
import costs a process ~0.4 s); each takes the nodes its ``supports=`` accepts and leaves the
rest (legacy empty concatenation, floating aranges, 0-d gathers) to the later translations.
Sizes arrive as Python lists of ints and symbolic sizes (0-d INT64 values); the tracer makes such
a list one INT64 vector where an ONNX input takes one.
"""

from __future__ import annotations

from typing import Any, Sequence

import onnx_ir as ir
import torch
from onnxscript import opset18 as op

from torch_onnx_fx.ops import _tensors as tx
from torch_onnx_fx.registry import arg_example, arg_value, limit_torchlib, register, wants_context
from torch_onnx_fx.translate.op_context import OpContext

__all__ = [
    "aten_alias", "aten_view", "aten_reshape", "aten_expand", "aten_unsqueeze", "aten_transpose",
    "aten_slice", "aten_select", "aten_cat", "aten_new_ones", "prims_convert_element_type",
    "aten_gather", "aten_take", "aten_embedding",
    "aten_contiguous", "aten_type_as", "aten_permute", "aten_split_static", "aten_zeros", "aten_zeros_like",
    "aten_unbind", "aten_repeat_interleave_self_int", "aten_index_tensor",
    "aten_full_like", "aten_full", "aten_new_full", "aten_clone", "aten_new_zeros", "aten_masked_fill", "aten_detach", "aten_to_copy",
    "aten_expand_as", "aten_index_select", "aten_stack", "aten_ones", "aten_trilu", "aten_repeat", "aten_tile",
    "aten_roll",
]

_INT64_MAX = 2**63 - 1


def _real_tensor(node: torch.fx.Node) -> bool:
    """The node's first argument and its result are real tensors (complex ones have their own
    translations, on their real view)."""
    example, result = arg_example(node), node.meta.get("val")
    return (
        isinstance(example, torch.Tensor) and not example.is_complex()
        and isinstance(result, torch.Tensor) and not result.is_complex()
    )


@register("aten::alias", supports=_real_tensor)
def aten_alias(self: ir.Value) -> ir.Value:
    """alias(Tensor(a) self) -> Tensor(a)"""
    return op.Identity(self)


def _has_literal_zero(size: Sequence[Any]) -> bool:
    return any(isinstance(s, int) and s == 0 for s in size)


@register("aten::view", "aten::_unsafe_view", supports=_real_tensor)
def aten_view(self: ir.Value, size: Sequence[Any]) -> ir.Value:
    """view(Tensor(a) self, SymInt[] size) -> Tensor(a)

    ``allowzero``: a size of 0 is an empty dim, as in ATen, not ONNX's "copy the input's dim"."""
    return op.Reshape(self, list(size), allowzero=1)


@register("aten::reshape", supports=_real_tensor)
def aten_reshape(self: ir.Value, shape: Sequence[Any]) -> ir.Value:
    """reshape(Tensor(a) self, SymInt[] shape) -> Tensor(a)"""
    if _has_literal_zero(shape):
        return op.Reshape(self, list(shape), allowzero=1)
    return op.Reshape(self, list(shape))


@register("aten::expand", supports=_real_tensor)
def aten_expand(self: ir.Value, size: Sequence[Any], implicit: bool = False) -> ir.Value:
    """expand(Tensor(a) self, SymInt[] size, *, bool implicit=False) -> Tensor(a)

    ATen's -1 keeps the input's size; ONNX's Expand keeps it for a 1 (the larger of the two)."""
    return op.Expand(self, [1 if isinstance(s, int) and s == -1 else s for s in size])


@register("aten::unsqueeze", supports=_real_tensor)
def aten_unsqueeze(self: ir.Value, dim: int) -> ir.Value:
    """unsqueeze(Tensor(a) self, int dim) -> Tensor(a)"""
    return op.Unsqueeze(self, [dim])


@register("aten::transpose.int", supports=_real_tensor)
@wants_context
def aten_transpose(self: ir.Value, dim0: int, dim1: int, *, ctx: OpContext) -> ir.Value:
    """transpose.int(Tensor(a) self, int dim0, int dim1) -> Tensor(a)"""
    rank = ctx.inputs[0].dim()
    if rank == 0:
        return op.Identity(self)
    perm = list(range(rank))
    perm[dim0], perm[dim1] = perm[dim1], perm[dim0]
    return op.Transpose(self, perm=perm)


def _forward_slice(node: torch.fx.Node) -> bool:
    step = arg_value(node, 4, "step", 1)
    return _real_tensor(node) and arg_example(node).dim() > 0 and not (isinstance(step, int) and step <= 0)


@register("aten::slice.Tensor", supports=_forward_slice)
def aten_slice(self: ir.Value, dim: int = 0, start: Any = None, end: Any = None, step: Any = 1) -> ir.Value:
    """slice.Tensor(Tensor(a) self, int dim=0, SymInt? start=None, SymInt? end=None, SymInt step=1) -> Tensor(a)

    ONNX's Slice clamps the bounds to the dim as ATen does, negative ones counted from its end."""
    return op.Slice(
        self, [0 if start is None else start], [_INT64_MAX if end is None else end], [dim], [1 if step is None else step],
    )


def _select_of_tensor(node: torch.fx.Node) -> bool:
    return _real_tensor(node) and arg_example(node).dim() > 0


@register("aten::select.int", supports=_select_of_tensor)
def aten_select(self: ir.Value, dim: int, index: Any) -> ir.Value:
    """select.int(Tensor(a) self, int dim, SymInt index) -> Tensor(a): a 0-d index drops the dim."""
    return op.Gather(self, index, axis=dim)


def _concatenation(node: torch.fx.Node) -> bool:
    """Every input of the result's rank and dtype: ATen's legacy 1-D empty inputs, which it skips
    beside tensors of any rank, and mixed dtypes are left to the others."""
    tensors, result = node.args[0], node.meta.get("val")
    if not isinstance(result, torch.Tensor) or result.is_complex() or not isinstance(tensors, (list, tuple)) or not tensors:
        return False
    examples = [t.meta.get("val") if isinstance(t, torch.fx.Node) else None for t in tensors]
    return all(
        isinstance(e, torch.Tensor) and e.dim() == result.dim() and e.dtype == result.dtype for e in examples
    ) and result.dim() > 0


@register("aten::cat", supports=_concatenation)
def aten_cat(tensors: Sequence[ir.Value], dim: int = 0) -> ir.Value:
    """cat(Tensor[] tensors, int dim=0) -> Tensor"""
    if len(tensors) == 1:
        return op.Identity(tensors[0])
    return op.Concat(*tensors, axis=dim)


def _real_result(node: torch.fx.Node) -> bool:
    result = node.meta.get("val")
    return isinstance(result, torch.Tensor) and not result.is_complex()


def _fill(ctx: OpContext, value: Any, shape: Any) -> ir.Value:
    return op.Expand(tx.scalar_of(value, ctx.result.dtype), shape)


@register("aten::new_ones", supports=_real_result)
@wants_context
def aten_new_ones(self: ir.Value, size: Sequence[Any], *args: Any, ctx: OpContext, **kwargs: Any) -> ir.Value:
    """new_ones(Tensor self, SymInt[] size, *, ScalarType? dtype=None, Layout? layout=None, Device? device=None, bool? pin_memory=None) -> Tensor"""
    return _fill(ctx, 1, list(size))


def _real_conversion(node: torch.fx.Node) -> bool:
    return _real_tensor(node) and isinstance(arg_value(node, 1, "dtype"), torch.dtype)


@register("prims::convert_element_type", supports=_real_conversion)
def prims_convert_element_type(a: ir.Value, dtype: int) -> ir.Value:
    """convert_element_type(Tensor a, ScalarType dtype) -> Tensor (the walk gives dtypes as ONNX's)"""
    return op.Cast(a, to=dtype)


def _gather_of_tensors(node: torch.fx.Node) -> bool:
    index = arg_example(node, 2)
    return _real_tensor(node) and arg_example(node).dim() > 0 and isinstance(index, torch.Tensor) and index.dim() > 0


@register("aten::gather", supports=_gather_of_tensors)
def aten_gather(self: ir.Value, dim: int, index: ir.Value, sparse_grad: bool = False) -> ir.Value:
    """gather(Tensor self, int dim, Tensor index, *, bool sparse_grad=False) -> Tensor (the index
    int64, normalize.index_dtype)"""
    return op.GatherElements(self, index, axis=dim)


@register("aten::take", supports=_real_tensor)
def aten_take(self: ir.Value, index: ir.Value) -> ir.Value:
    """take(Tensor self, Tensor index) -> Tensor: the flattened tensor's elements at ``index``
    (negative ones counted from the end, as Gather does). torch's decomposition guards on a
    data-dependent size for a 0-d index and could not be exported."""
    return op.Gather(op.Reshape(self, [-1]), index, axis=0)


@register("aten::embedding", supports=_real_tensor)
def aten_embedding(weight: ir.Value, indices: ir.Value, *args: Any, **kwargs: Any) -> ir.Value:
    """embedding(Tensor weight, Tensor indices, SymInt padding_idx=-1, bool scale_grad_by_freq=False, bool sparse=False) -> Tensor

    ``padding_idx`` and ``scale_grad_by_freq`` change the gradient only."""
    return op.Gather(weight, indices)


@register("aten::contiguous", supports=_real_tensor)
def aten_contiguous(self: ir.Value, *args: Any, **kwargs: Any) -> ir.Value:
    """contiguous(Tensor(a) self, *, MemoryFormat memory_format=contiguous_format) -> Tensor(a):
    values have no layout in ONNX."""
    return op.Identity(self)


def _real_type_as(node: torch.fx.Node) -> bool:
    other = arg_example(node, 1)
    return _real_tensor(node) and isinstance(other, torch.Tensor) and not other.is_complex()


@register("aten::type_as", supports=_real_type_as)
def aten_type_as(self: ir.Value, other: ir.Value) -> ir.Value:
    """type_as(Tensor self, Tensor other) -> Tensor"""
    return op.CastLike(self, other)


@register("aten::permute", supports=_real_tensor)
@wants_context
def aten_permute(self: ir.Value, dims: Sequence[int], *, ctx: OpContext) -> ir.Value:
    """permute(Tensor(a) self, int[] dims) -> Tensor(a); ONNX's perm counts dims from the front."""
    rank = ctx.inputs[0].dim()
    if rank == 0:
        return op.Identity(self)
    return op.Transpose(self, perm=[d % rank for d in dims])


def _static_pieces(node: torch.fx.Node) -> bool:
    """A split into pieces whose sizes along the dim are known at export."""
    pieces, dim = node.meta.get("val"), arg_value(node, 2, "dim", 0)
    return (
        _real_tensor_input(node) and isinstance(pieces, (list, tuple)) and len(pieces) > 0
        and all(isinstance(p, torch.Tensor) and isinstance(p.shape[dim], int) for p in pieces)
    )


def _real_tensor_input(node: torch.fx.Node) -> bool:
    example = arg_example(node)
    return isinstance(example, torch.Tensor) and not example.is_complex() and example.dim() > 0


# torchlib's unsafe_chunk is a SplitToSequence with a computed size, which crashes onnxscript's
# constant folder when the dim is dynamic; ATen's own composition (unsafe_split with a symbolic
# size) goes to the split translations, as chunk's does.
limit_torchlib("aten::unsafe_chunk", lambda node: False)


@register("aten::split.Tensor", "aten::chunk", "aten::split_with_sizes", "aten::unsafe_chunk", "aten::unsafe_split.Tensor",
          "aten::unsafe_split_with_sizes", supports=_static_pieces)
@wants_context
def aten_split_static(self: ir.Value, size: Any, dim: int = 0, *, ctx: OpContext) -> tuple[ir.Value, ...]:
    """split.Tensor(Tensor(a -> *) self, SymInt split_size, int dim=0) -> Tensor(a)[] (and chunk,
    split_with_sizes): one Split into the pieces' sizes, which the FX example gives."""
    sizes = [int(piece.shape[dim]) for piece in ctx.result]
    if len(sizes) == 1:
        return (op.Identity(self),)
    return tuple(op.Split(self, op.Constant(value_ints=sizes), axis=dim))


def _fill_fits(node: torch.fx.Node, fill: Any) -> bool:
    """A fill value of the result's kind (a bool for bools, an int for integers, a number for
    floats): converting across kinds (2.7 into an integer tensor) is left to the others."""
    result = node.meta.get("val")
    if not isinstance(result, torch.Tensor) or result.is_complex():
        return False
    if result.dtype == torch.bool:
        return isinstance(fill, bool)
    if isinstance(fill, bool) or not isinstance(fill, (int, float)):
        return False
    return result.dtype.is_floating_point or isinstance(fill, int)


def _zero_fits(node: torch.fx.Node) -> bool:
    """A zero (or one) fill of a real result: 0 for numbers, False for bools."""
    return _fill_fits(node, 0) or _fill_fits(node, False)


@register("aten::zeros", supports=_zero_fits)
@wants_context
def aten_zeros(size: Sequence[Any], *args: Any, ctx: OpContext, **kwargs: Any) -> ir.Value:
    """zeros(SymInt[] size, *, ScalarType? dtype=None, Layout? layout=None, Device? device=None, bool? pin_memory=None) -> Tensor"""
    return _fill(ctx, 0, list(size))


@register("aten::ones", supports=lambda node: _fill_fits(node, 1) or _fill_fits(node, True))
@wants_context
def aten_ones(size: Sequence[Any], *args: Any, ctx: OpContext, **kwargs: Any) -> ir.Value:
    """ones(SymInt[] size, *, ScalarType? dtype=None, Layout? layout=None, Device? device=None, bool? pin_memory=None) -> Tensor"""
    return _fill(ctx, 1, list(size))


@register("aten::zeros_like", "aten::ones_like", "aten::empty_like", supports=_zero_fits)
@wants_context
def aten_zeros_like(self: ir.Value, *args: Any, ctx: OpContext, **kwargs: Any) -> ir.Value:
    """zeros_like(Tensor self, *, ScalarType? dtype=None, ...) -> Tensor (and ones_like;
    empty_like, whose values ATen leaves unset, is zeros)"""
    return _fill(ctx, int(ctx.target == "aten::ones_like"), op.Shape(self))


@register("aten::full_like", "aten::fill.Scalar", supports=lambda node: _fill_fits(node, arg_value(node, 1, "fill_value")))
@wants_context
def aten_full_like(self: ir.Value, fill_value: Any, *args: Any, ctx: OpContext, **kwargs: Any) -> ir.Value:
    """full_like(Tensor self, Scalar fill_value, *, ScalarType? dtype=None, ...) -> Tensor (and
    fill.Scalar(Tensor self, Scalar value) -> Tensor)"""
    return _fill(ctx, fill_value, op.Shape(self))


# torchlib's full makes the fill value a float32 constant and casts it: a float64
# torch.full((4,), 0.1) held 0.10000000149.
@register("aten::full", supports=lambda node: _fill_fits(node, arg_value(node, 1, "fill_value")))
@wants_context
def aten_full(size: Sequence[Any], fill_value: Any, *args: Any, ctx: OpContext, **kwargs: Any) -> ir.Value:
    """full(SymInt[] size, Scalar fill_value, *, ScalarType? dtype=None, ...) -> Tensor"""
    return _fill(ctx, fill_value, list(size))


@register("aten::new_full", supports=lambda node: _fill_fits(node, arg_value(node, 2, "fill_value")))
@wants_context
def aten_new_full(self: ir.Value, size: Sequence[Any], fill_value: Any, *args: Any, ctx: OpContext, **kwargs: Any) -> ir.Value:
    """new_full(Tensor self, SymInt[] size, Scalar fill_value, *, ScalarType? dtype=None, ...) -> Tensor"""
    return _fill(ctx, fill_value, list(size))


@register("aten::clone", "aten::lift_fresh_copy", supports=_real_tensor)
def aten_clone(self: ir.Value, *args: Any, **kwargs: Any) -> ir.Value:
    """clone(Tensor self, *, MemoryFormat? memory_format=None) -> Tensor"""
    return op.Identity(self)


@register("aten::new_zeros", supports=_zero_fits)
@wants_context
def aten_new_zeros(self: ir.Value, size: Sequence[Any], *args: Any, ctx: OpContext, **kwargs: Any) -> ir.Value:
    """new_zeros(Tensor self, SymInt[] size, *, ScalarType? dtype=None, ...) -> Tensor"""
    return _fill(ctx, 0, list(size))


def _masked_fill_fits(node: torch.fx.Node) -> bool:
    mask = arg_example(node, 1)
    return (
        _real_tensor(node) and isinstance(mask, torch.Tensor) and mask.dtype == torch.bool
        and _fill_fits(node, arg_value(node, 2, "value"))
    )


@register("aten::masked_fill.Scalar", supports=_masked_fill_fits)
@wants_context
def aten_masked_fill(self: ir.Value, mask: ir.Value, value: Any, *, ctx: OpContext) -> ir.Value:
    """masked_fill.Scalar(Tensor self, Tensor mask, Scalar value) -> Tensor"""
    return op.Where(mask, tx.scalar_of(value, ctx.result.dtype), self)


@register("aten::detach", supports=_real_tensor)
def aten_detach(self: ir.Value) -> ir.Value:
    """detach(Tensor(a) self) -> Tensor(a)"""
    return op.Identity(self)


def _real_copy(node: torch.fx.Node) -> bool:
    dtype = node.kwargs.get("dtype")
    return _real_tensor(node) and (dtype is None or isinstance(dtype, torch.dtype))


@register("aten::_to_copy", supports=_real_copy)
def aten_to_copy(self: ir.Value, *args: Any, dtype: int | None = None, **kwargs: Any) -> ir.Value:
    """_to_copy(Tensor self, *, ScalarType? dtype=None, Layout? layout=None, Device? device=None, bool? pin_memory=None, bool non_blocking=False, MemoryFormat? memory_format=None) -> Tensor

    Only the dtype changes anything in ONNX (the walk gives it as ONNX's)."""
    return op.Identity(self) if dtype is None else op.Cast(self, to=dtype)


@register("aten::expand_as", supports=_real_tensor)
def aten_expand_as(self: ir.Value, other: ir.Value) -> ir.Value:
    """expand_as(Tensor(a) self, Tensor other) -> Tensor(a)"""
    return op.Expand(self, op.Shape(other))


def _index_select_of_tensor(node: torch.fx.Node) -> bool:
    index = arg_example(node, 2)
    return _select_of_tensor(node) and isinstance(index, torch.Tensor) and index.dim() <= 1


@register("aten::index_select", supports=_index_select_of_tensor)
def aten_index_select(self: ir.Value, dim: int, index: ir.Value) -> ir.Value:
    """index_select(Tensor self, int dim, Tensor index) -> Tensor: a 0-d index selects as a 1-D one
    (the dim is kept)."""
    if index.dtype not in (ir.DataType.INT64, ir.DataType.INT32):
        index = op.Cast(index, to=ir.DataType.INT64)
    return op.Gather(self, op.Reshape(index, op.Constant(value_ints=[-1])), axis=dim)


def _stack_of_one_dtype(node: torch.fx.Node) -> bool:
    tensors, result = node.args[0], node.meta.get("val")
    if not isinstance(result, torch.Tensor) or result.is_complex() or not isinstance(tensors, (list, tuple)) or not tensors:
        return False
    examples = [t.meta.get("val") if isinstance(t, torch.fx.Node) else None for t in tensors]
    return all(isinstance(e, torch.Tensor) and e.dtype == result.dtype for e in examples)


@register("aten::stack", supports=_stack_of_one_dtype)
def aten_stack(tensors: Sequence[ir.Value], dim: int = 0) -> ir.Value:
    """stack(Tensor[] tensors, int dim=0) -> Tensor: a negative dim counts in the result's rank,
    as Unsqueeze's and Concat's axes do."""
    pieces = [op.Unsqueeze(t, [dim]) for t in tensors]
    return op.Identity(pieces[0]) if len(pieces) == 1 else op.Concat(*pieces, axis=dim)


def _static_unbind(node: torch.fx.Node) -> bool:
    pieces = node.meta.get("val")
    return _real_tensor_input(node) and isinstance(pieces, (list, tuple)) and len(pieces) > 0


@register("aten::unbind.int", supports=_static_unbind)
@wants_context
def aten_unbind(self: ir.Value, dim: int = 0, *, ctx: OpContext) -> tuple[ir.Value, ...]:
    """unbind.int(Tensor(a -> *) self, int dim=0) -> Tensor(a)[]: pieces of size 1, the dim
    dropped. Their count is the FX example's (torch.export fixes it)."""
    axes = op.Constant(value_ints=[dim])
    pieces = (self,) if len(ctx.result) == 1 else op.Split(self, op.Constant(value_ints=[1] * len(ctx.result)), axis=dim)
    return tuple(op.Squeeze(piece, axes) for piece in pieces)


def _repeated_by_a_number(node: torch.fx.Node) -> bool:
    repeats, dim = arg_value(node, 1, "repeats"), arg_value(node, 2, "dim")
    example = arg_example(node)
    return (
        _real_tensor(node) and isinstance(repeats, int) and not isinstance(repeats, bool) and repeats >= 0
        and (dim is None or (isinstance(dim, int) and example.dim() > 0))
    )


@register("aten::repeat_interleave.self_int", supports=_repeated_by_a_number)
@wants_context
def aten_repeat_interleave_self_int(
    self: ir.Value, repeats: int, dim: int | None = None, output_size: Any = None, *, ctx: OpContext
) -> ir.Value:
    """repeat_interleave.self_int(Tensor self, SymInt repeats, int? dim=None, *, SymInt? output_size=None) -> Tensor

    Each element repeated in place: a new axis after ``dim`` tiled ``repeats`` times, merged
    into ``dim``. No dimension is left to Reshape's -1, which an empty tensor would make
    ambiguous. Without ``dim`` the tensor is flattened first."""
    rank = ctx.inputs[0].dim()
    if dim is None:
        self, dim, rank = op.Reshape(self, op.Constant(value_ints=[-1])), 0, 1
    dim %= rank
    tiles = [1] * (rank + 1)
    tiles[dim + 1] = repeats
    tiled = op.Tile(op.Unsqueeze(self, op.Constant(value_ints=[dim + 1])), op.Constant(value_ints=tiles))
    shape = op.Shape(self)
    pieces = [op.Mul(op.Slice(shape, op.Constant(value_ints=[dim]), op.Constant(value_ints=[dim + 1])), op.Constant(value_ints=[repeats]))]
    if dim > 0:
        pieces.insert(0, op.Slice(shape, op.Constant(value_ints=[0]), op.Constant(value_ints=[dim])))
    if dim + 1 < rank:
        pieces.append(op.Slice(shape, op.Constant(value_ints=[dim + 1]), op.Constant(value_ints=[rank])))
    return op.Reshape(tiled, op.Concat(*pieces, axis=0) if len(pieces) > 1 else pieces[0])


def _advanced_indices(node: torch.fx.Node) -> list[int] | None:
    """The positions of ``index.Tensor``'s index tensors when this translation takes them: integer
    tensors, one of them anywhere or several from the first dim on, side by side (ATen then
    keeps the indexed result where the indexed dims were)."""
    if not _real_tensor(node) or not isinstance(node.args[1], (list, tuple)):
        return None
    positions = []
    for position, index in enumerate(node.args[1]):
        if index is None:
            continue
        example = index.meta.get("val") if isinstance(index, torch.fx.Node) else None
        if not isinstance(example, torch.Tensor) or example.dtype not in (torch.int64, torch.int32):
            return None
        positions.append(position)
    if not positions or (len(positions) > 1 and positions != list(range(len(positions)))):
        return None
    return positions


@register("aten::index.Tensor", supports=lambda node: _advanced_indices(node) is not None)
def aten_index_tensor(self: ir.Value, indices: Sequence[ir.Value | None]) -> ir.Value:
    """index.Tensor(Tensor self, Tensor?[] indices) -> Tensor

    One index tensor is a Gather along its dim. Several from the first dim on are broadcast
    together and stacked into the coordinates of a GatherND. Negative indices count from the
    end in ATen, in Gather and in GatherND alike."""
    present = [(position, index) for position, index in enumerate(indices) if index is not None]
    if len(present) == 1:
        position, index = present[0]
        return op.Gather(self, index, axis=position)
    coordinates, _ = tx.index_coordinates([index for _, index in present])
    return op.GatherND(self, coordinates)


# ONNX Runtime's Trilu kernels; the other dtypes are left to torchlib (which casts around them).
_TRILU_TYPES = (torch.float32, torch.float64, torch.float16, torch.int64, torch.int32, torch.bool)


def _trilu_fits(node: torch.fx.Node) -> bool:
    example = arg_example(node)
    return (
        isinstance(example, torch.Tensor) and example.dtype in _TRILU_TYPES and example.dim() >= 2
        and isinstance(arg_value(node, 1, "diagonal", 0), int)
    )


@register("aten::tril", "aten::triu", supports=_trilu_fits)
@wants_context
def aten_trilu(self: ir.Value, diagonal: int = 0, *, ctx: OpContext) -> ir.Value:
    """tril(Tensor self, int diagonal=0) -> Tensor (and triu): one Trilu over the last two dims."""
    return op.Trilu(self, op.Constant(value_int=diagonal), upper=int(ctx.target == "aten::triu"))


def _repeated_by_numbers(node: torch.fx.Node) -> bool:
    repeats = arg_value(node, 1, "repeats")
    return (
        _real_tensor(node) and isinstance(repeats, (list, tuple)) and len(repeats) > 0
        and all(isinstance(r, int) and not isinstance(r, bool) and r >= 0 for r in repeats)
    )


def _tiled(self: ir.Value, repeats: Sequence[int], rank: int) -> ir.Value:
    """``self`` tiled ``repeats`` times per dim, ``rank`` its rank; repeats longer than the rank
    repeat new leading dims of size 1, as ATen does."""
    extra = len(repeats) - rank
    if extra > 0:
        self = op.Unsqueeze(self, op.Constant(value_ints=list(range(extra))))
    return op.Tile(self, op.Constant(value_ints=list(repeats)))


@register("aten::repeat", supports=lambda node: _repeated_by_numbers(node) and len(arg_value(node, 1, "repeats")) >= arg_example(node).dim())
def aten_repeat(self: ir.Value, repeats: Sequence[int]) -> ir.Value:
    """repeat(Tensor self, SymInt[] repeats) -> Tensor"""
    return _tiled(self, repeats, self.shape.rank())


@register("aten::tile", supports=_repeated_by_numbers)
def aten_tile(self: ir.Value, dims: Sequence[int]) -> ir.Value:
    """tile(Tensor self, SymInt[] dims) -> Tensor: repeat, with too few dims counting from the last.
    The rank is the graph's: the walk gives a 0-d tensor as one element (``dims`` is a dim
    argument to it) and restores the result's shape."""
    rank = self.shape.rank()
    return _tiled(self, [1] * (rank - len(dims)) + list(dims), rank)


@register("aten::roll", supports=_real_tensor)
def aten_roll(self: ir.Value, shifts: Sequence[Any], dims: Sequence[int] = ()) -> ir.Value:
    """roll(Tensor self, SymInt[1] shifts, int[1] dims=[]) -> Tensor

    torchlib's takes the shift modulo the dim's length read at run time: a dynamic dim that is 0
    there (an empty batch, which eager rolls to itself) failed in ONNX Runtime with an integer
    modulo by zero. Without dims the flattened tensor rolls."""
    rank = tx.rank(self)
    if rank == 0 or any(isinstance(d, int) and d == 0 for d in self.shape):
        return op.Identity(self)
    shifts = [shifts] if not isinstance(shifts, (list, tuple)) else list(shifts)
    dims = [dims] if isinstance(dims, int) else list(dims)
    if not dims:
        flat = op.Reshape(self, tx.ints(-1))
        return op.Reshape(tx.rolled(flat, shifts[0], 0), op.Shape(self), allowzero=1)
    result = self
    for shift, dim in zip(shifts, dims, strict=True):
        result = tx.rolled(result, shift, dim % rank)
    return result
