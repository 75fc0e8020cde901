"""Order statistics and searching: kthvalue, median, nanmedian, mode, searchsorted, cummax/cummin;
argmax, argmin and topk.

torchlib has none of them but the last three, and PyTorch has no decomposition for them either, so
without these the export fails (these three are here so that a graph needing them loads no
torchlib, ``ops/deferred_torchlib.py``). All work on dynamic sizes: ``TopK`` takes its ``k`` as a tensor.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx_ir as ir
import torch
from onnx_ir.tensor_adapters import TorchTensor
from onnxscript import opset18 as op

from torch_onnx_fx.dtypes import onnx_dtype
from torch_onnx_fx.registry import arg_example, arg_value, register, wants_context
from torch_onnx_fx.translate.op_context import OpContext

__all__ = [
    "aten_kthvalue",
    "aten_median_dim",
    "aten_median",
    "aten_nanmedian_dim",
    "aten_nanmedian",
    "aten_mode",
    "aten_searchsorted",
    "aten_bucketize",
    "aten_cummax",
    "aten_cummin",
    "aten_sort",
    "aten_sort_stable",
    "aten_argmax",
    "aten_argmin",
    "aten_topk",
]


def _kth_smallest(self: ir.Value, k: Any, dim: int, keepdim: bool) -> tuple[ir.Value, ir.Value]:
    """Values and indices of the k-th smallest entries (1-based ``k``) along ``dim``."""
    rank = self.shape.rank() if self.shape is not None else None
    if rank is None:
        raise ValueError("kthvalue/median need an input of known rank")
    if rank == 0:
        return op.Identity(self), op.Constant(value=ir.tensor(0, dtype=ir.DataType.INT64))
    dim %= rank
    k_vector = op.Reshape(op.Cast(k, to=ir.DataType.INT64) if isinstance(k, ir.Value) else op.Constant(value_ints=[int(k)]), op.Constant(value_ints=[1]))
    values, indices = op.TopK(self, k_vector, axis=dim, largest=0, sorted=1)
    last = op.Sub(k_vector, op.Constant(value_ints=[1]))
    values = op.Gather(values, last, axis=dim)
    indices = op.Gather(indices, last, axis=dim)
    if not keepdim:
        axis = op.Constant(value_ints=[dim])
        values, indices = op.Squeeze(values, axis), op.Squeeze(indices, axis)
    return values, indices


@register("aten::kthvalue")
def aten_kthvalue(self: ir.Value, k: Any, dim: int = -1, keepdim: bool = False) -> Any:
    """kthvalue(Tensor self, SymInt k, int dim=-1, bool keepdim=False) -> (Tensor values, Tensor indices)"""
    return _kth_smallest(self, k, dim, keepdim)


def _lower_median_rank(size: ir.Value) -> ir.Value:
    """ATen's median is the lower one: the ((n - 1) // 2 + 1)-th smallest."""
    one = op.Constant(value_int=1)
    return op.Add(op.Div(op.Sub(size, one), op.Constant(value_int=2)), one)


def _nan_first(self: ir.Value, dim: int, keepdim: bool, values: ir.Value, indices: ir.Value) -> tuple[ir.Value, ir.Value]:
    """ATen's median of a slice holding a NaN is NaN, at the first NaN's index."""
    if self.dtype is None or not self.dtype.is_floating_point():
        return values, indices
    missing = op.Cast(op.IsNaN(self), to=ir.DataType.INT32)
    seen = op.Cast(op.ReduceMax(missing, op.Constant(value_ints=[dim]), keepdims=int(keepdim)), to=ir.DataType.BOOL)
    first = op.ArgMax(missing, axis=dim, keepdims=int(keepdim))
    return op.Where(seen, op.CastLike(float("nan"), self), values), op.Where(seen, first, indices)


@register("aten::median.dim")
def aten_median_dim(self: ir.Value, dim: int, keepdim: bool = False) -> Any:
    """median.dim(Tensor self, int dim, bool keepdim=False) -> (Tensor values, Tensor indices)"""
    rank = self.shape.rank() if self.shape is not None else 0
    if rank == 0:
        return op.Identity(self), op.Constant(value=ir.tensor(0, dtype=ir.DataType.INT64))
    dim %= rank
    size = op.Squeeze(op.Shape(self, start=dim, end=dim + 1))
    return _nan_first(self, dim, keepdim, *_kth_smallest(self, _lower_median_rank(size), dim, keepdim))


@register("aten::median")
def aten_median(self: ir.Value) -> ir.Value:
    """median(Tensor self) -> Tensor

    Of a tensor known to be empty, eager fills NaN: NaN for floating types, and on x86 the integer
    its conversion gives (the lowest int32/int64, 0 for the narrower types). TopK would fail in
    ONNX Runtime's shape inference there (no smallest element to take)."""
    integral = {ir.DataType.INT64: np.iinfo(np.int64).min, ir.DataType.INT32: np.iinfo(np.int32).min}
    filler = np.array(np.nan if self.dtype.is_floating_point() else integral.get(self.dtype, 0), dtype=self.dtype.numpy())
    if self.shape is not None and any(isinstance(d, int) and d == 0 for d in self.shape):
        return op.Constant(value=ir.tensor(filler))
    flat = op.Reshape(self, op.Constant(value_ints=[-1]))
    size = op.Squeeze(op.Shape(flat))
    may_be_empty = self.shape is None or not all(isinstance(d, int) for d in self.shape)
    if may_be_empty:
        # A dynamic dim may be 0 at run time, where TopK has no element to take: one element
        # past every value (never the lower median of a non-empty tensor) keeps it valid, and
        # the empty case is eager's filler.
        flat = op.Concat(flat, op.Constant(value=ir.tensor(np.array([_largest(self.dtype)], dtype=self.dtype.numpy()))), axis=0)
    values, indices = _kth_smallest(flat, _lower_median_rank(size), 0, False)
    median = _nan_first(flat, 0, False, values, indices)[0]
    return op.Where(op.Equal(size, op.Constant(value_int=0)), op.Constant(value=ir.tensor(filler)), median) if may_be_empty else median


def _largest(dtype: ir.DataType) -> Any:
    if dtype.is_floating_point():
        return np.inf
    return True if dtype == ir.DataType.BOOL else np.iinfo(dtype.numpy()).max


def _nan_skipping_median(self: ir.Value, dim: int, keepdim: bool) -> tuple[ir.Value, ir.Value]:
    """Lower median of the non-NaN values along ``dim`` and its index; NaN and index 0 where
    a slice has nothing but NaN, as ATen returns."""
    dim %= self.shape.rank()
    axis = op.Constant(value_ints=[dim])
    missing = op.IsNaN(self)
    present = op.ReduceSum(op.Cast(op.Not(missing), to=ir.DataType.INT64), axis, keepdims=1)
    # NaN sorts last as +inf; the rank wanted never reaches it because it counts present values.
    filled = op.Where(missing, op.CastLike(float("inf"), self), self)
    ordered, order = op.TopK(filled, op.Shape(self, start=dim, end=dim + 1), axis=dim, largest=0, sorted=1)
    rank = op.Max(op.Div(op.Sub(present, op.Constant(value_int=1)), op.Constant(value_int=2)), op.Constant(value_int=0))
    none_present = op.Equal(present, op.Constant(value_int=0))
    values = op.Where(none_present, op.CastLike(float("nan"), self), op.GatherElements(ordered, rank, axis=dim))
    indices = op.Where(none_present, op.Constant(value_int=0), op.GatherElements(order, rank, axis=dim))
    if not keepdim:
        values, indices = op.Squeeze(values, axis), op.Squeeze(indices, axis)
    return values, indices


@register("aten::nanmedian.dim")
def aten_nanmedian_dim(self: ir.Value, dim: int, keepdim: bool = False) -> Any:
    """nanmedian.dim(Tensor self, int dim, bool keepdim=False) -> (Tensor values, Tensor indices)"""
    if self.dtype is not None and not self.dtype.is_floating_point():
        return aten_median_dim(self, dim, keepdim)
    return _nan_skipping_median(self, dim, keepdim)


@register("aten::nanmedian")
def aten_nanmedian(self: ir.Value) -> ir.Value:
    """nanmedian(Tensor self) -> Tensor"""
    if self.dtype is not None and not self.dtype.is_floating_point():
        return aten_median(self)
    # One extra NaN gives an empty input a value to return (NaN) and changes nothing else.
    nan = op.CastLike(op.Constant(value_floats=[float("nan")]), self)
    flat = op.Concat(op.Reshape(self, op.Constant(value_ints=[-1])), nan, axis=0)
    values, _ = _nan_skipping_median(flat, 0, False)
    return values


@register("aten::mode")
def aten_mode(self: ir.Value, dim: int = -1, keepdim: bool = False) -> tuple[ir.Value, ir.Value]:
    """mode(Tensor self, int dim=-1, bool keepdim=False) -> (Tensor values, Tensor indices)

    The most frequent value, the smallest of equally frequent ones, and the index of its last
    occurrence. ATen finds the last occurrence in an unstable sort, which only keeps the input
    order for at most 16 values along ``dim``; for longer ties its choice is arbitrary. ATen's
    answer for a row holding NaN is arbitrary as well: its sort does not order NaN consistently
    and can split a run of equal values ([3, nan, inf, 0, 3] gives 0, [4, 4, 4, 4, nan] gives 4).
    For a row of distinct numbers and one NaN it gives NaN (index 0) when the row starts with the
    NaN and the smallest number otherwise (500 random rows of up to 16 values, all so). Here each
    NaN counts once; it is the smallest value when the row starts with one and the largest
    otherwise, so a NaN mode is the row's first element, as ATen gives.
    """
    rank = self.shape.rank()
    dim %= rank
    original = self.dtype
    if original == ir.DataType.BOOL or not (original.is_floating_point() or original in (ir.DataType.INT32, ir.DataType.INT64)):
        # Comparisons and reductions in a type ONNX Runtime has them for; exact for every input.
        self = op.Cast(self, to=ir.DataType.INT64)
    elif original.itemsize < 4:
        self = op.Cast(self, to=ir.DataType.FLOAT)
    axis = op.Constant(value_ints=[dim])
    # [..., n, n, ...]: every value along dim against every other, counted per value.
    same = op.Equal(op.Unsqueeze(self, op.Constant(value_ints=[dim + 1])), op.Unsqueeze(self, axis))
    counts = op.ReduceSum(op.Cast(same, to=ir.DataType.INT32), op.Constant(value_ints=[dim + 1]), keepdims=0)
    floating = self.dtype.is_floating_point()
    if floating:
        # ATen counts each NaN once (it equals nothing, itself included) and mostly sorts it last.
        nan = op.IsNaN(self)
        counts = op.Add(counts, op.Cast(nan, to=ir.DataType.INT32))
    most = op.Equal(counts, op.ReduceMax(counts, axis, keepdims=1))
    positions = op.Range(op.Constant(value_int=0), op.Squeeze(op.Shape(self, start=dim, end=dim + 1)), op.Constant(value_int=1))
    positions = op.Reshape(positions, op.Constant(value_ints=[-1] + [1] * (rank - dim - 1)))
    if floating:
        # The smallest of the most frequent numbers (+inf stands in for the rest: never below
        # one). NaN is the mode where one is among the most frequent and the row starts with a
        # NaN, or where no number is (a row of NaN only), at the first NaN.
        numbers = op.And(most, op.Not(nan))
        values = op.ReduceMin(op.Where(numbers, self, op.CastLike(float("inf"), self)), axis, keepdims=1)

        def any_of(flags: ir.Value) -> ir.Value:
            return op.Cast(op.ReduceMax(op.Cast(flags, to=ir.DataType.INT32), axis, keepdims=1), to=ir.DataType.BOOL)

        starts_with_nan = op.Gather(nan, op.Constant(value_ints=[0]), axis=dim)
        nan_mode = op.Or(op.And(starts_with_nan, any_of(op.And(most, nan))), op.Not(any_of(numbers)))
        values = op.Where(nan_mode, op.CastLike(float("nan"), self), values)
        first_nan = op.ArgMax(op.Cast(nan, to=ir.DataType.INT32), axis=dim, keepdims=1)
    else:
        # The smallest of the most frequent values; the largest value stands in for the others.
        values = op.ReduceMin(op.Where(most, self, op.ReduceMax(self, axis, keepdims=1)), axis, keepdims=1)
    hits = op.Equal(self, values)
    indices = op.ReduceMax(op.Where(hits, positions, op.Constant(value_int=-1)), axis, keepdims=1)
    if floating:
        indices = op.Where(nan_mode, first_nan, indices)
    if original != self.dtype:
        values = op.Cast(values, to=original)
    if not keepdim:
        values, indices = op.Squeeze(values, axis), op.Squeeze(indices, axis)
    return values, indices


@register("aten::searchsorted.Tensor", "aten::searchsorted.Scalar")
@wants_context
def aten_searchsorted(
    sorted_sequence: ir.Value,
    self: Any,
    *,
    out_int32: bool = False,
    right: bool = False,
    side: str | None = None,
    sorter: ir.Value | None = None,
    ctx: OpContext,
) -> ir.Value:
    """searchsorted.Tensor(Tensor sorted_sequence, Tensor self, *, bool out_int32=False, bool right=False, str? side=None, Tensor? sorter=None) -> Tensor"""
    result = _binary_search(sorted_sequence, self, ctx.inputs[0], ctx.inputs[1], right or side == "right", sorter, ctx)
    return op.Cast(result, to=ir.DataType.INT32) if out_int32 else result


@register("aten::bucketize.Tensor", "aten::bucketize.Scalar")
@wants_context
def aten_bucketize(self: Any, boundaries: ir.Value, *, out_int32: bool = False, right: bool = False, ctx: OpContext) -> ir.Value:
    """bucketize.Tensor(Tensor self, Tensor boundaries, *, bool out_int32=False, bool right=False) -> Tensor

    searchsorted with the arguments swapped (boundaries are 1-D); torch's decomposition of it
    guards on data-dependent sizes and cannot be exported.
    """
    result = _binary_search(boundaries, self, ctx.inputs[1], ctx.inputs[0], right, None, ctx)
    return op.Cast(result, to=ir.DataType.INT32) if out_int32 else result


def _binary_search(
    boundaries: ir.Value, values: Any, boundaries_example: torch.Tensor, values_example: Any, right: bool, sorter: ir.Value | None, ctx: OpContext
) -> ir.Value:
    """ATen's binary search, step by step: ``start`` moves past the middle boundary unless
    ``boundary >= value`` (``>`` on the right side), both in their promoted type.

    Counting the boundaries below each value agrees only while every comparison is ordered:
    ``torch.sort`` puts NaNs last, and past them ATen's search moves right (a NaN boundary is
    never ``>=``), landing elsewhere than a count (``[-1, 0.5, 2, 3, nan]`` puts 0.5 at 1, a
    count at 2). The search also keeps the memory to the values' size, where a count compares
    every value with every boundary.
    """
    # ATen's result-type rules: a 0-d value (or a number) does not widen boundaries of its own
    # category, and converts to their type (300 into uint8 boundaries wraps to 44).
    promoted = torch.result_type(boundaries_example, values_example)
    common = onnx_dtype(promoted)
    if isinstance(values, ir.Value):
        values = ctx.cast(values, common)
    else:
        values = op.Constant(value=TorchTensor(torch.tensor(values).to(promoted)))
    boundaries = ctx.cast(boundaries, common)
    if sorter is not None:
        boundaries = op.GatherElements(boundaries, sorter, axis=-1)
    length = boundaries_example.shape[-1]
    count = op.Squeeze(op.Shape(boundaries, start=-1))
    last = op.Sub(count, op.Constant(value_int=1))
    start = op.ConstantOfShape(op.Shape(values), value=ir.tensor(np.array([0], dtype=np.int64)))
    end = op.Add(start, count)
    one_row = boundaries_example.dim() == 1
    stops = op.Greater if right else op.GreaterOrEqual

    def step(_: ir.Value, start: ir.Value, end: ir.Value) -> list[ir.Value]:
        # ATen's start + ((end - start) >> 1), both non-negative.
        middle = op.Div(op.Add(start, end), op.Constant(value_int=2))
        # A finished search's middle can be the length; any boundary stands in for it there.
        index = op.Min(middle, last)
        boundary = op.Gather(boundaries, index) if one_row else op.GatherElements(boundaries, index, axis=-1)
        # A finished search (start == end == middle) takes the left branch, which keeps it.
        left = op.Or(stops(boundary, values), op.GreaterOrEqual(start, end))
        return [op.Where(left, start, op.Add(middle, op.Constant(value_int=1))), op.Where(left, middle, end)]

    if isinstance(length, int):
        # A range of n halves to at most n // 2 each step: n.bit_length() steps end every search.
        return ctx.loop(length.bit_length(), [start, end], step)[0] if length else start

    def finished(start: ir.Value, end: ir.Value) -> ir.Value:
        # A leading 0 keeps the maximum defined for no values at all.
        searching = op.Reshape(op.Cast(op.Less(start, end), to=ir.DataType.INT64), op.Constant(value_ints=[-1]))
        return op.Equal(op.ReduceMax(op.Concat(op.Constant(value_ints=[0]), searching, axis=0), keepdims=0), op.Constant(value_int=0))

    # At most as many steps as boundaries (none for none), each ending when every search has.
    return ctx.loop(op.Min(count, op.Constant(value_int=64)), [start, end], step, until=finished)[0]


def _identity(x: ir.Value, pick_max: bool) -> ir.Value:
    """The identity of a running max (min) in ``x``'s own type: int64's extremes would wrap in
    int8; for bool they are False and True."""
    if x.dtype.is_floating_point():
        return op.CastLike(float("-inf") if pick_max else float("inf"), x)
    if x.dtype == ir.DataType.BOOL:
        return op.Constant(value=ir.tensor(not pick_max))
    limits = np.iinfo(x.dtype.numpy())
    return op.Constant(value=ir.tensor(np.array(limits.min if pick_max else limits.max, dtype=x.dtype.numpy())))


def _cumulative_extreme(self: ir.Value, dim: int, pick_max: bool) -> tuple[ir.Value, ir.Value]:
    """Running max/min and the index of its latest occurrence, via a lower-triangular mask.

    O(n^2) in the scanned dim, so only used for static sizes up to _CUMULATIVE_LIMIT.
    """
    rank = self.shape.rank()
    n = int(self.shape[dim])
    x = op.Transpose(self, perm=[*[d for d in range(rank) if d != dim], dim]) if dim != rank - 1 else self
    lower = op.Constant(value=ir.tensor(np.tril(np.ones((n, n), dtype=bool))))
    rows = op.Unsqueeze(x, op.Constant(value_ints=[-2]))  # [..., 1, n]: row i sees x[:i+1]
    fill = _identity(x, pick_max)
    candidates = op.Where(lower, rows, fill)
    last = op.Constant(value_ints=[-1])
    values = op.ReduceMax(candidates, last, keepdims=0) if pick_max else op.ReduceMin(candidates, last, keepdims=0)
    hits = op.And(lower, op.Equal(rows, op.Unsqueeze(values, last)))
    positions = op.Constant(value=ir.tensor(np.arange(n, dtype=np.int64)))
    none = op.Constant(value=ir.tensor(np.int64(-1)))
    indices = op.ReduceMax(op.Where(hits, positions, none), last, keepdims=0)
    if self.dtype.is_floating_point():
        # A NaN wins from where it appears (the reductions above propagate it), and ATen's index
        # is then the latest NaN's: NaN equals nothing, so the hits above found none.
        nan_seen = op.And(lower, op.IsNaN(rows))
        latest_nan = op.ReduceMax(op.Where(nan_seen, positions, none), last, keepdims=0)
        indices = op.Where(op.Equal(latest_nan, none), indices, latest_nan)
    if dim != rank - 1:
        back = list(range(rank - 1))
        back.insert(dim, rank - 1)
        values, indices = op.Transpose(values, perm=back), op.Transpose(indices, perm=back)
    return values, indices


_CUMULATIVE_LIMIT = 2048


def _scanned_extreme(self: ir.Value, dim: int, pick_max: bool, ctx: OpContext) -> tuple[ir.Value, ir.Value]:
    """Running max/min and the index of its latest occurrence, one step per element of ``dim``.

    For the lengths the mask of :func:`_cumulative_extreme` cannot take (dynamic, or past
    _CUMULATIVE_LIMIT): an ONNX ``Loop`` carrying the running value and index, memory of one row.
    A step takes an element that ties or beats the running value, or that is NaN, as ATen's
    kernel does: ties move the index forward, and a NaN, once taken, is beaten by nothing but a
    later NaN (every comparison with it is false).
    """
    rank = self.shape.rank()
    x = op.Transpose(self, perm=[dim, *[d for d in range(rank) if d != dim]]) if dim != 0 else self
    # Bools compare as 0 and 1 (ONNX has no order on bool).
    compared = op.Cast(x, to=ir.DataType.UINT8) if self.dtype == ir.DataType.BOOL else x
    row_shape = op.Shape(x, start=1)
    # The first element always ties or beats the start: the identity of the reduction.
    best = op.Expand(_identity(compared, pick_max), row_shape)
    best_index = op.Expand(op.Constant(value_int=0), row_shape)
    row_dims = list(self.shape)[:dim] + list(self.shape)[dim + 1:]
    best.shape, best_index.shape = ir.Shape(row_dims), ir.Shape(row_dims)
    best.type = ir.TensorType(compared.dtype)
    best_index.type = ir.TensorType(ir.DataType.INT64)
    at_least = op.GreaterOrEqual if pick_max else op.LessOrEqual

    def step(i: ir.Value, best: ir.Value, best_index: ir.Value) -> list[ir.Value]:
        element = op.Gather(compared, i, axis=0)
        take = at_least(element, best)
        if compared.dtype.is_floating_point():
            take = op.Or(take, op.IsNaN(element))
        best = op.Where(take, element, best)
        best_index = op.Where(take, i, best_index)
        return [best, best_index, best, best_index]

    length = op.Shape(x, start=0, end=1)
    _, _, values, indices = ctx.loop(op.Squeeze(length), [best, best_index], step, scanned=2)
    # A loop that ran no step leaves its rows without their shape ([0] in ONNX Runtime).
    rows = op.Concat(length, row_shape, axis=0)
    values, indices = op.Reshape(values, rows, allowzero=1), op.Reshape(indices, rows, allowzero=1)
    if self.dtype == ir.DataType.BOOL:
        values = op.Cast(values, to=ir.DataType.BOOL)
    if dim != 0:
        back = list(range(1, rank))
        back.insert(dim, 0)
        values, indices = op.Transpose(values, perm=back), op.Transpose(indices, perm=back)
    return values, indices


def _cumulative(self: ir.Value, dim: int, pick_max: bool, ctx: OpContext) -> tuple[ir.Value, ir.Value]:
    if self.shape is None:
        raise ValueError("cummax/cummin need an input of known rank")
    rank = self.shape.rank()
    if rank == 0:
        return op.Identity(self), op.Constant(value=ir.tensor(0, dtype=ir.DataType.INT64))
    dim %= rank
    length = self.shape[dim]
    if isinstance(length, int) and length <= _CUMULATIVE_LIMIT:
        return _cumulative_extreme(self, dim, pick_max)
    return _scanned_extreme(self, dim, pick_max, ctx)


@register("aten::cummax")
@wants_context
def aten_cummax(self: ir.Value, dim: int, *, ctx: OpContext) -> tuple[ir.Value, ir.Value]:
    """cummax(Tensor self, int dim) -> (Tensor values, Tensor indices)"""
    return _cumulative(self, dim, True, ctx)


@register("aten::cummin")
@wants_context
def aten_cummin(self: ir.Value, dim: int, *, ctx: OpContext) -> tuple[ir.Value, ir.Value]:
    """cummin(Tensor self, int dim) -> (Tensor values, Tensor indices)"""
    return _cumulative(self, dim, False, ctx)


@register("aten::sort")
def aten_sort(self: ir.Value, dim: int = -1, descending: bool = False) -> tuple[ir.Value, ir.Value]:
    """sort(Tensor self, int dim=-1, bool descending=False) -> (Tensor values, Tensor indices)

    The stable sort below: ATen leaves the order of ties open here, and NaN still sorts last
    (torchlib's single TopK leaves NaN anywhere and takes no bools)."""
    return aten_sort_stable(self, dim=dim, descending=descending)


@register("aten::sort.stable")
def aten_sort_stable(
    self: ir.Value, *, stable: bool | None = None, dim: int = -1, descending: bool = False
) -> tuple[ir.Value, ir.Value]:
    """sort.stable(Tensor self, *, bool? stable, int dim=-1, bool descending=False) -> (Tensor values, Tensor indices)

    ONNX's TopK breaks ties by the lower index, so a full-length TopK is a stable sort. ATen's CPU
    sort with ``stable=False`` is stable up to 16 elements only (measured); past that, its ties
    come out in an order of its own, which this does not reproduce (the values are the same). ATen sorts NaN above everything; TopK's order of NaN is
    unspecified, so floating inputs take a second stable pass on "is NaN" (least significant key
    first, as in a radix sort): NaNs last ascending, first descending, in their original order.
    """
    if self.shape is None:
        raise ValueError("sort needs an input of known rank")
    rank = self.shape.rank()
    if rank == 0:
        return op.Identity(self), op.Constant(value=ir.tensor(0, dtype=ir.DataType.INT64))
    axis = dim % rank
    length = op.Shape(self, start=axis, end=axis + 1)
    largest = int(descending)
    if self.dtype is None or not self.dtype.is_floating_point():
        key = op.Cast(self, to=ir.DataType.INT32) if self.dtype == ir.DataType.BOOL else self
        _, order = op.TopK(key, length, axis=axis, largest=largest, sorted=1)
        return op.GatherElements(self, order, axis=axis), order
    missing = op.IsNaN(self)
    key = op.Where(missing, op.CastLike(0.0, self), self)
    _, by_value = op.TopK(key, length, axis=axis, largest=largest, sorted=1)
    flag = op.Cast(op.GatherElements(missing, by_value, axis=axis), to=ir.DataType.INT32)
    _, by_flag = op.TopK(flag, length, axis=axis, largest=largest, sorted=1)
    order = op.GatherElements(by_value, by_flag, axis=axis)
    return op.GatherElements(self, order, axis=axis), order


def _index_reduction_of_numbers(node: torch.fx.Node) -> bool:
    """A real, non-bool input (ATen has no argmax of bools) and an int64 result."""
    example, result = arg_example(node), node.meta.get("val")
    return (
        isinstance(example, torch.Tensor) and not example.is_complex() and example.dtype != torch.bool
        and isinstance(result, torch.Tensor) and result.dtype == torch.int64
    )


def _index_reduction(reduce: Any, self: ir.Value, dim: int | None, keepdim: bool, result: torch.Tensor, rank: int) -> ir.Value:
    """The first index of the extreme along ``dim``, or of the flattened tensor without one (its
    kept dims all 1). NaN counts as the extreme in ATen: ``runtime/nan_propagation`` makes ONNX
    Runtime's ArgMax/ArgMin say so, whatever wrote them."""
    if dim is not None and rank > 0:
        return reduce(self, axis=dim, keepdims=int(keepdim), select_last_index=0)
    flat = reduce(op.Reshape(self, op.Constant(value_ints=[-1])), axis=0, keepdims=0, select_last_index=0)
    return flat if result.dim() == 0 else op.Reshape(flat, op.Constant(value_ints=[1] * result.dim()))


@register("aten::argmax", supports=_index_reduction_of_numbers)
@wants_context
def aten_argmax(self: ir.Value, dim: int | None = None, keepdim: bool = False, *, ctx: OpContext) -> ir.Value:
    """argmax(Tensor self, int? dim=None, bool keepdim=False) -> Tensor"""
    return _index_reduction(op.ArgMax, self, dim, keepdim, ctx.result, ctx.inputs[0].dim())


@register("aten::argmin", supports=_index_reduction_of_numbers)
@wants_context
def aten_argmin(self: ir.Value, dim: int | None = None, keepdim: bool = False, *, ctx: OpContext) -> ir.Value:
    """argmin(Tensor self, int? dim=None, bool keepdim=False) -> Tensor"""
    return _index_reduction(op.ArgMin, self, dim, keepdim, ctx.result, ctx.inputs[0].dim())


def _topk_of_numbers(node: torch.fx.Node) -> bool:
    example, k = arg_example(node), arg_value(node, 1, "k")
    return (
        isinstance(example, torch.Tensor) and not example.is_complex() and example.dtype != torch.bool
        and example.dim() > 0 and isinstance(k, int) and not isinstance(k, bool)
    )


@register("aten::topk", supports=_topk_of_numbers)
def aten_topk(self: ir.Value, k: int, dim: int = -1, largest: bool = True, sorted: bool = True) -> tuple[ir.Value, ir.Value]:
    """topk(Tensor self, SymInt k, int dim=-1, bool largest=True, bool sorted=True) -> (Tensor values, Tensor indices)

    A ``k`` known at export (a symbolic one is left to the others)."""
    values, indices = op.TopK(self, op.Constant(value_ints=[k]), axis=dim, largest=int(largest), sorted=int(sorted))
    return values, indices
