"""Core ATen operators torchlib lacks or translates less well.

Each of these, when missing, forced torch to re-trace the whole program to decompose it (2 s
of a 4 s Llama export): translating them keeps the program as captured.

Runtime assertions that torch.export leaves in the graph have no ONNX meaning: the ONNX model
cannot raise, and the conditions were checked at export time for the example inputs and are
encoded in the range constraints recorded in the graph metadata.
"""

from __future__ import annotations

import math

from typing import Any

import numpy as np
import onnx_ir as ir
import torch
from onnx_ir.tensor_adapters import from_torch_dtype
from onnxscript import opset18 as op

from torch_onnx_fx.errors import TranslationError
from torch_onnx_fx.normalize.inplace import is_inert_in_place
from torch_onnx_fx.ops import _tensors as tx
from torch_onnx_fx.ops.strided import starts_its_storage_in_order, storage_gather
from torch_onnx_fx.translate.op_context import OpContext
from torch_onnx_fx.registry import arg_example, register, wants_context

__all__ = ["aten_assert_noop", "aten_to", "aten_min_other", "aten_max_other", "aten_diff", "aten_masked_select", "aten_nonzero_scalar", "aten_conj_physical", "aten_conj_physical_complex", "aten_unique_consecutive", "aten_squeeze_dims", "aten_flatten", "aten_inert_dropout_", "aten_mean_of_empty", "aten_resize_same_numel", "aten_resize_as_same_numel", "aten_one_hot", "aten_copy", "aten_mT", "aten_broadcast_to"]


@register(
    "aten::_assert_scalar",
    "aten::_assert_async",
    "aten::_assert_async.msg",
    "aten::_assert_tensor_metadata",
    "aten::sym_constrain_range",
    "aten::sym_constrain_range_for_size",
    "aten::_functional_sym_constrain_range",
    "aten::_functional_sym_constrain_range_for_size",
    "aten::_linalg_check_errors",
)
def aten_assert_noop(*args: Any, **kwargs: Any) -> None:
    """Runtime checks are dropped: ONNX has no way to raise."""
    return None


def _real_conversion(node: Any) -> bool:
    source = arg_example(node)
    result = node.meta.get("val")
    return (
        isinstance(source, torch.Tensor)
        and isinstance(result, torch.Tensor)
        and not source.is_complex()
        and not result.is_complex()
    )


@register("aten::to.dtype", "aten::to.device", "aten::to.dtype_layout", "aten::to.other", supports=_real_conversion)
@wants_context
def aten_to(self: ir.Value, *args: Any, ctx: OpContext, **kwargs: Any) -> ir.Value:
    """to.dtype / to.device / to.dtype_layout / to.other: a Cast to the result dtype, or a copy.

    The target dtype is read from the FX node's result rather than decoded from each overload's
    arguments; devices and layouts have no meaning in ONNX.
    """
    target = from_torch_dtype(ctx.result.dtype)
    if self.dtype == target:
        return op.Identity(self)
    return op.Cast(self, to=target)


def _bitwise(logical: Any, bitwise: Any) -> Any:
    def translation(self: ir.Value, other: ir.Value) -> ir.Value:
        return logical(self, other) if self.dtype == ir.DataType.BOOL else bitwise(self, other)

    return translation


register("aten::__and__.Tensor")(_bitwise(op.And, op.BitwiseAnd))
register("aten::__or__.Tensor")(_bitwise(op.Or, op.BitwiseOr))
register("aten::__xor__.Tensor")(_bitwise(op.Xor, op.BitwiseXor))


@register("aten::min.other")
def aten_min_other(self: ir.Value, other: ir.Value) -> ir.Value:
    """min.other(Tensor self, Tensor other) -> Tensor"""
    return op.Min(self, other)


@register("aten::max.other")
def aten_max_other(self: ir.Value, other: ir.Value) -> ir.Value:
    """max.other(Tensor self, Tensor other) -> Tensor"""
    return op.Max(self, other)


_END = 2**63 - 1


@register("aten::diff")
def aten_diff(
    self: ir.Value, n: int = 1, dim: int = -1, prepend: ir.Value | None = None, append: ir.Value | None = None
) -> ir.Value:
    """diff(Tensor self, int n=1, int dim=-1, Tensor? prepend=None, Tensor? append=None) -> Tensor"""
    pieces = [p for p in (prepend, self, append) if p is not None]
    result = op.Concat(*pieces, axis=dim) if len(pieces) > 1 else self
    axes = op.Constant(value_ints=[dim])
    for _ in range(n):
        later = op.Slice(result, op.Constant(value_ints=[1]), op.Constant(value_ints=[_END]), axes)
        earlier = op.Slice(result, op.Constant(value_ints=[0]), op.Constant(value_ints=[-1]), axes)
        # ATen's diff of booleans is "changed or not".
        result = op.Xor(later, earlier) if self.dtype == ir.DataType.BOOL else op.Sub(later, earlier)
    return result


def _same_size(a: Any, b: Any) -> bool:
    if isinstance(a, torch.SymInt) and isinstance(b, torch.SymInt):
        return a.node.expr == b.node.expr
    return type(a) is type(b) and a == b


@register("aten::broadcast_to")
def aten_broadcast_to(self: ir.Value, size: Any) -> ir.Value:
    """broadcast_to(Tensor(a) self, SymInt[] size) -> Tensor(a)

    A -1 keeps the input's size there. ONNX's Expand broadcasts each dim to the larger of the
    two, so the input's own size is kept by a 1 in the target shape (torchlib passes the -1 on,
    and ONNX Runtime rejects the graph). ATen allows -1 only for dims the input has.
    """
    return op.Expand(self, [1 if isinstance(s, int) and s == -1 else s for s in size])


def _keeps_shape(node: Any) -> bool:
    """A reshape whose result has exactly its input's (symbolic) shape."""
    source = arg_example(node)
    result = node.meta.get("val")
    if not isinstance(source, torch.Tensor) or not isinstance(result, torch.Tensor):
        return False
    return source.dim() == result.dim() and all(_same_size(a, b) for a, b in zip(source.shape, result.shape))


@register("aten::view", "aten::reshape", "aten::_unsafe_view", supports=_keeps_shape)
def aten_view_same_shape(self: ir.Value, size: Any) -> ir.Value:
    """view/reshape to the shape the tensor already has (``x.reshape(b, -1, s, d)`` after attention).

    Nothing to compute; other reshapes go to torchlib. Without this the Concat building the target
    shape survives optimization, since the optimizer cannot prove the symbolic shapes equal.
    """
    return op.Identity(self)


@register("aten::masked_select")
def aten_masked_select(self: ir.Value, mask: ir.Value) -> ir.Value:
    """masked_select(Tensor self, Tensor mask) -> Tensor"""
    # Broadcast both to a common shape, flatten, keep the selected elements (data-dependent size).
    shape = op.Shape(op.Where(mask, self, self))
    flat = op.Reshape(op.Expand(self, shape), op.Constant(value_ints=[-1]))
    keep = op.Reshape(op.Expand(mask, shape), op.Constant(value_ints=[-1]))
    return op.Compress(flat, keep, axis=0)


def _variance(self: ir.Value, dim: Any, correction: float | None, keepdim: bool, root: bool = False) -> tuple[ir.Value, ir.Value]:
    """Variance (its square root with ``root``) and mean. float32 is computed in float64, as
    ATen's CPU kernels accumulate it: squares of values past 1.8e19 overflow float32 (std of
    1e28-sized values was inf for a finite 8e28), and the sums keep eager's digits."""
    if self.dtype != ir.DataType.FLOAT:
        variance, mean = _variance_in_dtype(self, dim, correction, keepdim)
        return (op.Sqrt(variance) if root else variance), mean
    variance, mean = _variance_in_dtype(op.Cast(self, to=ir.DataType.DOUBLE), dim, correction, keepdim)
    variance = op.Sqrt(variance) if root else variance
    return op.Cast(variance, to=ir.DataType.FLOAT), op.Cast(mean, to=ir.DataType.FLOAT)


def _variance_in_dtype(self: ir.Value, dim: Any, correction: float | None, keepdim: bool) -> tuple[ir.Value, ir.Value]:
    rank = self.shape.rank() if self.shape is not None else None
    if rank is None:
        raise ValueError("var/std need an input of known rank")
    axes = list(range(rank)) if dim is None or (isinstance(dim, (list, tuple)) and not dim) else (
        [dim] if isinstance(dim, int) else list(dim)
    )
    axes = [a % max(rank, 1) for a in axes]
    axes_value = op.Constant(value_ints=axes)
    mean = op.ReduceMean(self, axes_value, keepdims=1)
    centered = op.Sub(self, mean)
    squares = op.ReduceSum(op.Mul(centered, centered), axes_value, keepdims=1 if keepdim else 0)
    count = op.ReduceProd(op.Gather(op.Shape(self), axes_value, axis=0), keepdims=0) if rank else op.Constant(value_int=1)
    # ATen divides by N - correction; with no degrees of freedom left that is 0/0 = NaN, as in eager.
    dof = op.Sub(op.CastLike(count, self), op.CastLike(1.0 if correction is None else float(correction), self))
    # Of no elements at all ATen's variance and mean are NaN; here 0 / -1 and ONNX Runtime's 0.
    empty = op.Equal(count, op.Constant(value_int=0))
    nan = op.CastLike(math.nan, self)
    variance = op.Where(empty, nan, op.Div(squares, dof))
    return variance, op.Where(empty, nan, mean if keepdim else op.ReduceMean(self, axes_value, keepdims=0))


@register("aten::var.correction")
def aten_var_correction(self: ir.Value, dim: Any = None, *, correction: float | None = None, keepdim: bool = False) -> ir.Value:
    """var.correction(Tensor self, int[1]? dim=None, *, Scalar? correction=None, bool keepdim=False) -> Tensor"""
    return _variance(self, dim, correction, keepdim)[0]


@register("aten::std.correction")
def aten_std_correction(self: ir.Value, dim: Any = None, *, correction: float | None = None, keepdim: bool = False) -> ir.Value:
    """std.correction(Tensor self, int[1]? dim=None, *, Scalar? correction=None, bool keepdim=False) -> Tensor"""
    return _variance(self, dim, correction, keepdim, root=True)[0]


@register("aten::var_mean.correction")
def aten_var_mean_correction(self: ir.Value, dim: Any = None, *, correction: float | None = None, keepdim: bool = False) -> Any:
    """var_mean.correction(Tensor self, int[1]? dim=None, *, Scalar? correction=None, bool keepdim=False) -> (Tensor, Tensor)"""
    variance, mean = _variance(self, dim, correction, keepdim)
    return variance, mean


@register("aten::std_mean.correction")
def aten_std_mean_correction(self: ir.Value, dim: Any = None, *, correction: float | None = None, keepdim: bool = False) -> Any:
    """std_mean.correction(Tensor self, int[1]? dim=None, *, Scalar? correction=None, bool keepdim=False) -> (Tensor, Tensor)"""
    return _variance(self, dim, correction, keepdim, root=True)


@register("aten::logit")
def aten_logit(self: ir.Value, eps: float | None = None) -> ir.Value:
    """logit(Tensor self, float? eps=None) -> Tensor"""
    # torchlib compares eps in Python after it became a tensor; eps is an attribute-like float.
    if eps is not None:
        self = op.Clip(self, op.CastLike(eps, self), op.CastLike(1.0 - eps, self))
    return op.Log(op.Div(self, op.Sub(op.CastLike(1.0, self), self)))


def _zero_dim_input(node: Any) -> bool:
    example = arg_example(node)
    return isinstance(example, torch.Tensor) and example.dim() == 0


@register("aten::nonzero", supports=_zero_dim_input)
def aten_nonzero_scalar(self: ir.Value) -> ir.Value:
    """nonzero(Tensor self) -> Tensor, for a 0-d self: shape [1, 0] if it is non-zero, else [0, 0]

    ONNX NonZero treats a scalar as having one dim and returns [1, n].
    """
    count = op.Cast(op.Not(op.Equal(self, op.CastLike(0, self))), to=ir.DataType.INT64)
    shape = op.Concat(op.Reshape(count, op.Constant(value_ints=[1])), op.Constant(value_ints=[0]), axis=0)
    return op.ConstantOfShape(shape, value=ir.tensor(np.array([0], dtype=np.int64)))


@register("aten::_conj_physical", "aten::conj_physical")
def aten_conj_physical(self: ir.Value) -> ir.Value:
    """_conj_physical(Tensor self) -> Tensor: the identity on real tensors"""
    return op.Identity(self)


@register("aten::_conj_physical", "aten::conj_physical", complex=True)
def aten_conj_physical_complex(self: ir.Value) -> ir.Value:
    """_conj_physical(Tensor self) -> Tensor on the real form [..., 2]: negate the imaginary part"""
    return op.Mul(self, op.CastLike(op.Constant(value_floats=[1.0, -1.0]), self))


@register("aten::unique_consecutive")
def aten_unique_consecutive(
    self: ir.Value, return_inverse: bool = False, return_counts: bool = False, dim: int | None = None
) -> tuple[ir.Value, ir.Value, ir.Value]:
    """unique_consecutive(Tensor self, bool return_inverse=False, bool return_counts=False, int? dim=None) -> (Tensor, Tensor, Tensor)

    Over the flattened tensor or, with ``dim``, over its slices along ``dim`` (torchlib's takes
    neither a dim nor other dtypes than integers): a run starts where an element (a slice)
    differs from its predecessor in any place, NaN always differing, as in eager.
    """
    rank = self.shape.rank() if self.shape is not None else None
    if dim is None or rank is None:
        data, axis = op.Reshape(self, op.Constant(value_ints=[-1])), 0
    else:
        data, axis = self, dim % max(rank, 1)
    size = op.Shape(data, start=axis, end=axis + 1)
    axes = op.Constant(value_ints=[axis])
    previous = op.Slice(data, op.Constant(value_ints=[0]), op.Constant(value_ints=[-1]), axes)
    following = op.Slice(data, op.Constant(value_ints=[1]), op.Constant(value_ints=[2**62]), axes)
    differs = op.Not(op.Equal(following, previous))
    others = [a for a in range(rank or 1) if a != axis] if dim is not None else []
    if any(self.shape is not None and self.shape[a] == 0 for a in others):
        # Eager raises ("there are 0 sized dimensions, and they aren't selected").
        raise TranslationError("unique_consecutive along a dim of a tensor with another dim of size 0, which eager refuses")
    if others:  # a slice differs where any of its elements does
        differs = op.Cast(op.ReduceMax(op.Cast(differs, to=ir.DataType.INT32), op.Constant(value_ints=others), keepdims=0), to=ir.DataType.BOOL)
    # The first element starts a run; sliced to the length, so that an empty input has no runs.
    starts_run = op.Slice(op.Concat(op.Constant(value=ir.tensor([True])), differs, axis=0), op.Constant(value_ints=[0]), size)
    values = op.Compress(data, starts_run, axis=axis)
    inverse = op.Sub(op.CumSum(op.Cast(starts_run, to=ir.DataType.INT64), op.Constant(value_int=0)), op.Constant(value_int=1))
    if dim is None:
        inverse = op.Reshape(inverse, op.Shape(self))
    starts = op.Reshape(op.NonZero(starts_run), op.Constant(value_ints=[-1]))
    ends = op.Concat(op.Slice(starts, op.Constant(value_ints=[1]), op.Constant(value_ints=[2**62])), size, axis=0)
    counts = op.Sub(ends, starts)
    # ATen returns empty tensors for the results not asked for.
    empty = op.Constant(value=ir.tensor(np.zeros([0], dtype=np.int64)))
    return values, inverse if return_inverse else empty, counts if return_counts else empty


@register("aten::squeeze.dims", "aten::squeeze.dim", complex=True)
@register("aten::squeeze.dims", "aten::squeeze.dim")
@wants_context
def aten_squeeze_dims(self: ir.Value, dim: list[int] | int, *, ctx: OpContext) -> ir.Value:
    """squeeze.dims(Tensor(a) self, int[] dim) -> Tensor(a); squeeze.dim(Tensor(a) self, int dim) -> Tensor(a)

    Squeezes only the listed dims of size 1 (others are left alone, and an empty list squeezes
    nothing); which ones those are is known from the FX example. torchlib has no translation of
    squeeze.dims, and its squeeze.dim squeezes the dim whatever its size: a Squeeze of a dim of
    16 (diffusers' PixArt) is an invalid graph, where ATen returns the tensor unchanged.
    """
    dim = [dim] if isinstance(dim, int) else dim
    shape = ctx.inputs[0].shape
    rank = len(shape)
    axes = sorted({d % rank for d in dim if rank and isinstance(shape[d % rank], int) and shape[d % rank] == 1})
    if not axes:
        return op.Identity(self)
    return op.Squeeze(self, op.Constant(value_ints=axes))


@register("aten::flatten.using_ints")
@wants_context
def aten_flatten(self: ir.Value, start_dim: int = 0, end_dim: int = -1, *, ctx: OpContext) -> ir.Value:
    """flatten.using_ints(Tensor(a) self, int start_dim=0, int end_dim=-1) -> Tensor(a)

    One Reshape whose target keeps the leading and trailing dims (constants where static,
    ``Shape`` with start/end otherwise) around a -1: a node fewer than torchlib's Shape + Slice.
    """
    shape = list(ctx.inputs[0].shape)
    rank = len(shape)
    if rank == 0:
        return op.Reshape(self, op.Constant(value_ints=[1]))
    start, end = start_dim % rank, end_dim % rank
    if start >= end:
        return op.Identity(self)

    def dims(begin: int, stop: int) -> list[ir.Value]:
        if begin >= stop:
            return []
        if all(isinstance(d, int) for d in shape[begin:stop]):
            return [op.Constant(value_ints=[int(d) for d in shape[begin:stop]])]
        return [op.Shape(self, start=begin, end=stop)]

    target = op.Concat(*dims(0, start), op.Constant(value_ints=[-1]), *dims(end + 1, rank), axis=0)
    return op.Reshape(self, target)


@register(
    "aten::dropout_", "aten::feature_dropout_", "aten::alpha_dropout_", "aten::feature_alpha_dropout_", "aten::detach_",
    supports=is_inert_in_place,
)
def aten_inert_dropout_(self: ir.Value, p: float = 0.5, train: bool = False) -> ir.Value:
    """dropout_(Tensor(a!) self, float p, bool train) -> Tensor(a!) with train=False or p=0, and
    detach_(Tensor(a!) self) -> Tensor(a!): the values are left as they were, so no
    functionalization (re-trace) is needed."""
    return op.Identity(self)


def _statically_empty(node: Any) -> bool:
    example = arg_example(node)
    return isinstance(example, torch.Tensor) and any(isinstance(d, int) and d == 0 for d in example.shape)


@register("aten::mean.dim", "aten::mean", supports=_statically_empty)
def aten_mean_of_empty(
    self: ir.Value, dim: list[int] | None = None, keepdim: bool = False, *, dtype: int | None = None
) -> ir.Value:
    """mean.dim(Tensor self, int[1]? dim, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor, of an empty tensor

    ONNX Runtime's ReduceMean returns an empty input unchanged; its ReduceSum does not, so the
    mean is a sum divided by the (static or runtime) count, NaN where the count is 0, as in eager.
    """
    x = op.Cast(self, to=dtype) if dtype is not None else self
    rank = self.shape.rank()
    axes = list(range(rank)) if not dim else [d % rank for d in dim]
    return tx.mean_by_count(x, axes, keepdim)


def _numel(example: Any) -> Any:
    return example.numel() if isinstance(example, torch.Tensor) else None


def _resize_keeps_numel(node: Any) -> bool:
    """Resizing to the same element count is a reshape; growing exposes uninitialized memory
    (no defined values to export), shrinking is rare enough to leave to a clear error."""
    before = _numel(node.args[0].meta.get("val"))
    after = _numel(node.meta.get("val"))
    return isinstance(before, int) and isinstance(after, int) and before == after


@register("aten::resize", supports=_resize_keeps_numel)
@wants_context
def aten_resize_same_numel(self: ir.Value, size: Any, *, memory_format: Any = None, ctx: OpContext) -> ir.Value:
    """resize(Tensor self, SymInt[] size, *, MemoryFormat? memory_format=None) -> Tensor, same element count"""
    return _resized(self, [int(d) for d in size], ctx)


@register("aten::resize_as", supports=_resize_keeps_numel)
@wants_context
def aten_resize_as_same_numel(self: ir.Value, the_template: ir.Value, *, memory_format: Any = None, ctx: OpContext) -> ir.Value:
    """resize_as(Tensor self, Tensor the_template, *, MemoryFormat? memory_format=None) -> Tensor, same element count"""
    return _resized(self, [int(d) for d in ctx.result.shape], ctx)


def _resized(self: ir.Value, size: list[int], ctx: OpContext) -> ir.Value:
    """ATen's resize keeps the storage and its offset and lays new sizes over it row-major (the
    same sizes it leaves as they are, strides included): a reshape for a tensor that is its
    storage in order, otherwise the values at those storage positions (a permuted input is read
    in storage order, as eager reads it; the graph reproduces eager for inputs laid out as the
    example was)."""
    example = ctx.inputs[0]
    if list(example.shape) == size:  # ATen leaves a tensor of the same sizes as it is
        return op.Identity(self)
    if starts_its_storage_in_order(example):
        return op.Reshape(self, op.Constant(value_ints=size))
    strides = [1] * len(size)
    for i in range(len(size) - 2, -1, -1):
        strides[i] = strides[i + 1] * max(size[i + 1], 1)
    indices = storage_gather(example, size, strides, example.storage_offset())
    if isinstance(indices, str):
        raise TranslationError(f"{ctx.target} of a tensor laid out in storage as the graph cannot reproduce: {indices}.")
    return op.Gather(op.Reshape(self, op.Constant(value_ints=[-1])), ctx.constant(indices.astype(np.int64)), axis=0)


@register("aten::one_hot", supports=lambda node: len(node.args) > 1 and isinstance(node.args[1], int) and node.args[1] > 0)
def aten_one_hot(self: ir.Value, num_classes: int = -1) -> ir.Value:
    """one_hot(Tensor self, int num_classes=-1) -> Tensor, with the class count given

    (-1 infers it from the data, which torch.export cannot size statically; that case is left to
    torch's decomposition.)
    """
    classes = op.Constant(value=ir.tensor(np.arange(num_classes, dtype=np.int64)))
    return op.Cast(op.Equal(op.Unsqueeze(op.Cast(self, to=ir.DataType.INT64), op.Constant(value_ints=[-1])), classes), to=ir.DataType.INT64)


@register("aten::copy")
def aten_copy(self: ir.Value, src: ir.Value, non_blocking: bool = False) -> ir.Value:
    """copy(Tensor self, Tensor src, bool non_blocking=False) -> Tensor

    ``src``'s values in ``self``'s dtype *and shape* (src broadcasts): torchlib's translation
    keeps src's shape, so ``zeros(3, 4).copy_(row)`` came out as one row.
    """
    return op.Expand(op.CastLike(src, self), op.Shape(self))


@register("aten::mT", "aten::mH", "aten::adjoint")
def aten_mT(self: ir.Value) -> ir.Value:
    """mT(Tensor(a) self) -> Tensor(a): the last two dims swapped (mH and adjoint are the same
    on real tensors; torchlib registers only their complex forms)"""
    if self.shape is None:
        raise ValueError("mT needs an input of known rank")
    rank = self.shape.rank()
    perm = [*range(rank - 2), rank - 1, rank - 2]
    return op.Transpose(self, perm=perm)


# Where atleast_Nd puts the new dims of a rank-r input (r < N), as ATen does: a vector becomes a
# row for 2-d and [1, n, 1] for 3-d; a matrix gains a trailing dim.
_ATLEAST_AXES = {
    (1, 0): [0],
    (2, 0): [0, 1], (2, 1): [0],
    (3, 0): [0, 1, 2], (3, 1): [0, 2], (3, 2): [2],
}


def _atleast(tensors: list[ir.Value], rank: int) -> list[ir.Value]:
    results = []
    for tensor in tensors:
        if tensor.shape is None:
            raise ValueError(f"atleast_{rank}d needs inputs of known rank")
        axes = _ATLEAST_AXES.get((rank, tensor.shape.rank()))
        results.append(op.Unsqueeze(tensor, op.Constant(value_ints=axes)) if axes else op.Identity(tensor))
    return results


@register("aten::atleast_1d.Sequence")
def aten_atleast_1d_sequence(tensors: list[ir.Value]) -> list[ir.Value]:
    """atleast_1d.Sequence(Tensor[] tensors) -> Tensor[]: one value per tensor (torchlib builds an
    ONNX sequence, whose element types exclude bfloat16 and which hstack's cat then unpacks)"""
    return _atleast(list(tensors), 1)


@register("aten::atleast_2d.Sequence")
def aten_atleast_2d_sequence(tensors: list[ir.Value]) -> list[ir.Value]:
    """atleast_2d.Sequence(Tensor[] tensors) -> Tensor[]"""
    return _atleast(list(tensors), 2)


@register("aten::atleast_3d.Sequence")
def aten_atleast_3d_sequence(tensors: list[ir.Value]) -> list[ir.Value]:
    """atleast_3d.Sequence(Tensor[] tensors) -> Tensor[]"""
    return _atleast(list(tensors), 3)


def _symbolic_split_size(node: Any) -> bool:
    size = node.args[1] if len(node.args) > 1 else node.kwargs.get("split_size")
    return isinstance(size, torch.fx.Node) and isinstance(node.meta.get("val"), (list, tuple))


@register("aten::split.Tensor", "aten::unsafe_split.Tensor", supports=_symbolic_split_size)
@wants_context
def aten_split_symbolic(self: ir.Value, split_size: ir.Value, dim: int = 0, *, ctx: OpContext) -> list[ir.Value]:
    """split.Tensor(Tensor(a -> *) self, SymInt split_size, int dim=0) -> Tensor(a)[] with a
    symbolic size: the chunk count is static (torch.export fixed it), so one ``Split`` with the
    sizes [s, ..., s, D - (n-1) s]. torchlib's ``SplitToSequence`` with a computed scalar size
    crashed onnxscript's constant folder (RAFT's ``chunk`` over a dynamic batch)."""
    count = len(ctx.result)
    size = op.Reshape(op.Cast(split_size, to=ir.DataType.INT64), op.Constant(value_ints=[1]))
    if count == 1:
        return [op.Identity(self)]
    length = op.Shape(self, start=dim, end=dim + 1 if dim != -1 else None)
    last = op.Sub(length, op.Mul(size, op.Constant(value_ints=[count - 1])))
    sizes = op.Concat(op.Expand(size, op.Constant(value_ints=[count - 1])), last, axis=0)
    return list(ctx.op("Split", [self, sizes], {"axis": dim}, num_outputs=count))


def _all_empty_concatenation(node: Any) -> bool:
    """A cat whose result has no elements and static sizes (torchlib's drops empty inputs first
    and then has nothing left: ``triu_indices`` of an empty matrix)."""
    result = node.meta.get("val")
    return isinstance(result, torch.Tensor) and all(isinstance(d, int) for d in result.shape) and result.numel() == 0


@register("aten::cat", supports=_all_empty_concatenation)
@wants_context
def aten_cat_of_nothing(tensors: Any, dim: int = 0, *, ctx: OpContext) -> ir.Value:
    """cat(Tensor[] tensors, int dim=0) -> Tensor, of no elements: the empty result, a constant"""
    dtype = from_torch_dtype(ctx.result.dtype)
    return ctx.constant(ir.tensor(np.zeros(tuple(ctx.result.shape), dtype=dtype.numpy()), dtype=dtype))


def _static_and_empty(node: Any) -> bool:
    example = arg_example(node)
    return _statically_empty(node) and all(isinstance(d, int) for d in example.shape)


@register("aten::pixel_shuffle", "aten::pixel_unshuffle", supports=_static_and_empty)
@wants_context
def aten_pixel_shuffle_of_empty(self: ir.Value, factor: int, *, ctx: OpContext) -> ir.Value:
    """pixel_shuffle(Tensor self, int upscale_factor) -> Tensor and pixel_unshuffle, of an empty
    tensor: an empty tensor of the shape torch.export gives it (torchlib's reshapes with a -1,
    or with a 0 for int32, made models ONNX Runtime refused to load).

    Eager's CPU pixel_unshuffle returns an empty input unchanged, against its own meta function's
    shape; the exported graph declares the meta shape, which this follows."""
    return op.Reshape(self, list(ctx.result.shape), allowzero=1)
