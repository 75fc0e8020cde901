"""Scatter-style, binning and sampling operators: index_reduce, put, scatter with reduce=,
segment_reduce, histogram/histogramdd, nonzero_static, pdist and grid_sampler_3d.

Also cross entropy where torchlib's SoftmaxCrossEntropyLoss cannot express it (one unbatched
sample, weighted class probabilities), the chunked ops behind ``linear_cross_entropy(options=)``
and ``hash_tensor`` of integers.

torchlib lacks all of them and torch has no decomposition either, so without these the export
fails. The reductions are ``ScatterElements`` with the matching ``reduction`` (ONNX has add, mul,
max and min); means divide a sum by a count scattered the same way. Sizes are read with
``Shape``, so the translations work on dynamic sizes (hash_tensor's reduced dims excepted).
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np
import onnx_ir as ir
import torch
from onnxscript import opset18 as op
from onnxscript import opset20

from torch_onnx_fx.ops.nn import aten_cdist_forward
from torch_onnx_fx.registry import register

__all__ = [
    "aten_index_reduce",
    "aten_put",
    "aten_scatter_reduce",
    "aten_scatter_value_reduce",
    "aten_segment_reduce",
    "aten_histogram_bin_ct",
    "aten_histogram_bins_tensor",
    "aten_histogramdd_bin_edges",
    "aten_histogramdd_from_bin_cts",
    "aten_histogramdd_from_bin_tensors",
    "aten_nonzero_static",
    "aten_pdist_forward",
    "aten_grid_sampler_3d_opset20",
    "aten_grid_sampler_3d",
    "aten_cross_entropy_loss_unbatched",
    "aten_cross_entropy_loss_weighted_probabilities",
    "torch_nn_linear_cross_entropy_batch_chunked",
    "torch_nn_linear_cross_entropy_batch_chunked_no_reduction",
    "aten_hash_tensor",
]

_INT64 = ir.DataType.INT64


def _ints(*values: int) -> ir.Value:
    return op.Constant(value_ints=list(values))


def _int64(value: int) -> ir.Value:
    return op.Constant(value=ir.tensor(np.int64(value)))


def _rank(value: ir.Value) -> int:
    if value.shape is None:
        raise ValueError(f"{value.name} needs a known rank")
    return value.shape.rank()


def _as_rank_one(value: ir.Value) -> ir.Value:
    """A 0-d tensor as a vector of one element (the graph walk lifts ``self`` the same way)."""
    return op.Reshape(value, _ints(1)) if _rank(value) == 0 else value


def _filled_like(value: ir.Value, fill: float, shape: ir.Value | None = None) -> ir.Value:
    """A tensor of ``fill`` in ``value``'s dtype, shaped like ``value`` or as ``shape`` says."""
    return op.Expand(op.CastLike(fill, value), op.Shape(value) if shape is None else shape)


def _is_integral(value: ir.Value) -> bool:
    return value.dtype is not None and not value.dtype.is_floating_point()


def _floor_divide(totals: ir.Value, counts: ir.Value) -> ir.Value:
    """Integer division rounding toward negative infinity, as ATen's integral means do."""
    as_double = op.Div(op.Cast(totals, to=ir.DataType.DOUBLE), op.Cast(counts, to=ir.DataType.DOUBLE))
    return op.CastLike(op.Floor(as_double), totals)


# ONNX Runtime reduces in scatters only for these; others go through a wider type and back.
_SCATTER_REDUCTION_TYPES = frozenset({ir.DataType.FLOAT, ir.DataType.DOUBLE, ir.DataType.INT32, ir.DataType.INT64})


def _widened(value: ir.Value) -> ir.DataType | None:
    """The type to reduce ``value`` in, or None if ONNX Runtime reduces its own type.

    Casting back to a narrower integer wraps as ATen's arithmetic does, and a nonzero count or
    product is True for booleans (add is or, multiply is and).
    """
    if value.dtype in _SCATTER_REDUCTION_TYPES:
        return None
    return ir.DataType.FLOAT if value.dtype.is_floating_point() else _INT64


def _scatter_elements(data: ir.Value, indices: ir.Value, updates: ir.Value, axis: int, reduction: str = "none") -> ir.Value:
    wide = _widened(data) if reduction != "none" else None
    if wide is None:
        return op.ScatterElements(data, indices, updates, axis=axis, reduction=reduction)
    scattered = op.ScatterElements(op.Cast(data, to=wide), indices, op.Cast(updates, to=wide), axis=axis, reduction=reduction)
    return op.CastLike(scattered, data)


def _scatter_nd(data: ir.Value, indices: ir.Value, updates: ir.Value, reduction: str = "none") -> ir.Value:
    wide = _widened(data) if reduction != "none" else None
    if wide is None:
        return op.ScatterND(data, indices, updates, reduction=reduction)
    return op.CastLike(op.ScatterND(op.Cast(data, to=wide), indices, op.Cast(updates, to=wide), reduction=reduction), data)


# -- index_reduce, put, scatter(reduce=) ---------------------------------------------------------


@register("aten::index_reduce")
def aten_index_reduce(
    self: ir.Value, dim: int, index: ir.Value, source: ir.Value, reduce: str, *, include_self: bool = True
) -> ir.Value:
    """index_reduce(Tensor self, int dim, Tensor index, Tensor source, str reduce, *, bool include_self=True) -> Tensor"""
    rank = _rank(self)
    dim %= rank
    source = _as_rank_one(source)
    # index[i] names the slice of self that source's i-th slice along dim reduces into: spread it
    # over source's shape so ScatterElements sees one target per source element.
    along_dim = [1] * rank
    along_dim[dim] = -1
    positions = op.Expand(op.Reshape(op.Cast(index, to=_INT64), op.Constant(value_ints=along_dim)), op.Shape(source))
    ones = op.Expand(_int64(1), op.Shape(source))
    counts = op.ScatterElements(op.Expand(_int64(0), op.Shape(self)), positions, ones, axis=dim, reduction="add")
    touched = op.Greater(counts, _int64(0))
    if reduce in ("amax", "amin"):
        reduction = "max" if reduce == "amax" else "min"
        base = self
        if not include_self:
            # Overwriting first puts one of the sources into every touched slot; reducing over
            # all of them again then ignores self without needing an identity for the dtype.
            base = _scatter_elements(self, positions, source, dim)
        return _scatter_elements(base, positions, source, dim, reduction)
    if reduce == "prod":
        base = self if include_self else op.Where(touched, op.CastLike(1, self), self)
        return _scatter_elements(base, positions, source, dim, "mul")
    if reduce == "mean":
        base = self if include_self else op.Where(touched, op.CastLike(0, self), self)
        totals = _scatter_elements(base, positions, source, dim, "add")
        if include_self:
            counts = op.Add(counts, _int64(1))
        safe_counts = op.Where(touched, counts, _int64(1))
        mean = _floor_divide(totals, safe_counts) if _is_integral(self) else op.Div(totals, op.CastLike(safe_counts, totals))
        return op.Where(touched, mean, self)
    raise ValueError(f"index_reduce: unknown reduce {reduce!r}; expected prod, mean, amax or amin")


@register("aten::put")
def aten_put(self: ir.Value, index: ir.Value, source: ir.Value, accumulate: bool = False) -> ir.Value:
    """put(Tensor self, Tensor index, Tensor source, bool accumulate=False) -> Tensor"""
    # put indexes self as if it were flattened; negative indices count from the end.
    flat = op.Reshape(self, _ints(-1))
    positions = op.Reshape(op.Cast(index, to=_INT64), _ints(-1, 1))
    positions = op.Where(op.Less(positions, _int64(0)), op.Add(positions, op.Shape(flat)), positions)
    updates = op.Reshape(source, _ints(-1))
    result = _scatter_nd(flat, positions, updates, "add" if accumulate else "none")
    return op.Reshape(result, op.Shape(self))


_SCATTER_REDUCTIONS = {"add": "add", "multiply": "mul"}


def _scatter_with_reduction(self: ir.Value, dim: int, index: ir.Value, src: ir.Value, reduce: str) -> ir.Value:
    if reduce not in _SCATTER_REDUCTIONS:
        raise ValueError(f"scatter: unknown reduce {reduce!r}; expected 'add' or 'multiply'")
    rank = _rank(self)
    index = _as_rank_one(op.Cast(index, to=_INT64))
    src = _as_rank_one(src)
    # ATen reads only the index-shaped corner of a larger src; ONNX wants them the same shape.
    src = op.Slice(src, op.Constant(value_ints=[0] * rank), op.Shape(index), op.Constant(value_ints=list(range(rank))))
    return _scatter_elements(self, index, src, dim, _SCATTER_REDUCTIONS[reduce])


@register("aten::scatter.reduce")
def aten_scatter_reduce(self: ir.Value, dim: int, index: ir.Value, src: ir.Value, *, reduce: str) -> ir.Value:
    """scatter.reduce(Tensor self, int dim, Tensor index, Tensor src, *, str reduce) -> Tensor"""
    return _scatter_with_reduction(self, dim, index, src, reduce)


@register("aten::scatter.value_reduce")
def aten_scatter_value_reduce(self: ir.Value, dim: int, index: ir.Value, value: Any, *, reduce: str) -> ir.Value:
    """scatter.value_reduce(Tensor self, int dim, Tensor index, Scalar value, *, str reduce) -> Tensor"""
    src = _filled_like(self, value, op.Shape(index))
    return _scatter_with_reduction(self, dim, index, src, reduce)


# -- segment_reduce ------------------------------------------------------------------------------


def _without_indices(node: Any) -> bool:
    # ATen itself has no indices-based segment reduction yet.
    return node.kwargs.get("indices") is None


@register("aten::segment_reduce", supports=_without_indices)
def aten_segment_reduce(
    data: ir.Value,
    reduce: str,
    *,
    lengths: ir.Value | None = None,
    indices: ir.Value | None = None,
    offsets: ir.Value | None = None,
    axis: int = 0,
    unsafe: bool = False,
    initial: float | None = None,
) -> ir.Value:
    """segment_reduce(Tensor data, str reduce, *, Tensor? lengths=None, Tensor? indices=None, Tensor? offsets=None, int axis=0, bool unsafe=False, Scalar? initial=None) -> Tensor"""
    rank = _rank(data)
    axis %= rank
    trailing = rank - axis - 1
    # Segment s covers [starts[..., s], ends[..., s]) along axis; lengths and offsets carry the
    # leading dims of data before their segment dim.
    if lengths is not None:
        lengths = op.Cast(lengths, to=_INT64)
        ends = op.CumSum(lengths, _int64(-1))
        starts = op.Sub(ends, lengths)
    elif offsets is not None:
        offsets = op.Cast(offsets, to=_INT64)
        starts = op.Slice(offsets, _ints(0), _ints(-1), _ints(-1))
        ends = op.Slice(offsets, _ints(1), _ints(np.iinfo(np.int64).max), _ints(-1))
        lengths = op.Sub(ends, starts)
    else:
        raise ValueError("segment_reduce needs lengths or offsets")
    positions = op.Range(_int64(0), op.Squeeze(op.Shape(data, start=axis, end=axis + 1)), _int64(1))
    last = _ints(-1)
    # [..., S, N]: which positions each segment covers, then room for data's trailing dims.
    covers = op.And(
        op.LessOrEqual(op.Unsqueeze(starts, last), positions), op.Less(positions, op.Unsqueeze(ends, last))
    )
    if trailing:
        covers = op.Unsqueeze(covers, op.Constant(value_ints=list(range(-trailing, 0))))
        lengths = op.Unsqueeze(lengths, op.Constant(value_ints=list(range(-trailing, 0))))
    rows = op.Unsqueeze(data, _ints(axis))  # [..., 1, N, ...] against covers' [..., S, N, ...]
    over = _ints(axis + 1)
    start = None if initial is None else op.CastLike(initial, data)
    if reduce in ("sum", "mean"):
        total = op.ReduceSum(op.Where(covers, rows, op.CastLike(0, data)), over, keepdims=0)
        if start is not None:
            total = op.Add(total, start)
        if reduce == "sum":
            return total
        count = op.CastLike(lengths, data)
        mean = op.Div(total, count)
        # An empty segment's mean is the initial value when there is one, else 0/0 = nan.
        return mean if start is None else op.Where(op.Equal(lengths, _int64(0)), start, mean)
    if reduce == "prod":
        product = op.ReduceProd(op.Where(covers, rows, op.CastLike(1, data)), over, keepdims=0)
        return product if start is None else op.Mul(product, start)
    if reduce in ("max", "min"):
        pick_max = reduce == "max"
        empty = op.CastLike(float("-inf") if pick_max else float("inf"), data)
        masked = op.Where(covers, rows, empty)
        extreme = op.ReduceMax(masked, over, keepdims=0) if pick_max else op.ReduceMin(masked, over, keepdims=0)
        if start is None:
            return extreme
        return op.Max(extreme, start) if pick_max else op.Min(extreme, start)
    raise ValueError(f"segment_reduce: unknown reduce {reduce!r}; expected sum, mean, max, min or prod")


# -- histogram and histogramdd -------------------------------------------------------------------


def _padded(column: ir.Value, fill: float) -> ir.Value:
    """``column`` with one more value, ``fill``, at its end."""
    return op.Concat(column, op.CastLike(op.Constant(value_floats=[fill]), column), axis=0)


def _outer_edges(column: ir.Value, span: Sequence[float] | None) -> tuple[ir.Value, ir.Value]:
    """Leftmost and rightmost edge: ``span`` or the data's min and max (0 and 1 for no data),
    widened by 0.5 each way when they coincide, as ATen does."""
    if span is not None:
        left, right = op.CastLike(float(span[0]), column), op.CastLike(float(span[1]), column)
    else:
        # One padding element keeps the reductions defined on empty data.
        left = op.ReduceMin(_padded(column, float("inf")), keepdims=0)
        right = op.ReduceMax(_padded(column, float("-inf")), keepdims=0)
        empty = op.Equal(op.Size(column), _int64(0))
        left = op.Where(empty, op.CastLike(0.0, column), left)
        right = op.Where(empty, op.CastLike(1.0, column), right)
    same = op.Equal(left, right)
    half = op.CastLike(0.5, column)
    return op.Where(same, op.Sub(left, half), left), op.Where(same, op.Add(right, half), right)


def _linspace_edges(left: ir.Value, right: ir.Value, bins: int) -> ir.Value:
    """``bins + 1`` evenly spaced edges, computed as ATen's linspace does: the first half
    stepping up from ``left`` and the second half stepping down from ``right``."""
    steps = np.arange(bins + 1, dtype=np.float64)
    step = op.Div(op.Sub(right, left), op.CastLike(float(bins), left))
    up = op.Add(left, op.Mul(step, op.CastLike(steps, left)))
    down = op.Sub(right, op.Mul(step, op.CastLike(bins - steps, left)))
    first_half = op.Constant(value=ir.tensor(np.arange(bins + 1) < (bins + 1) // 2))
    return op.Where(first_half, up, down)


def _inside(column: ir.Value, edges: ir.Value) -> ir.Value:
    """Whether each value lies within the outermost edges (NaN never does)."""
    first = op.Gather(edges, _int64(0))
    last = op.Gather(edges, _int64(-1))
    return op.And(op.GreaterOrEqual(column, first), op.LessOrEqual(column, last))


def _clamp(value: ir.Value, low: int, high: ir.Value | int) -> ir.Value:
    high = _int64(high) if isinstance(high, int) else high
    return op.Min(op.Max(value, _int64(low)), high)


def _linear_bin(column: ir.Value, edges: ir.Value, bins: int) -> ir.Value:
    """Bin of each in-range value of ``column`` for evenly spaced edges.

    ATen guesses the bin from the value's relative position and then settles it against the
    neighbouring edges, so a value lying on an edge lands where the edges say; mirroring that
    keeps rounding from moving values between bins.
    """
    first = op.Gather(edges, _int64(0))
    last = op.Gather(edges, _int64(-1))
    scaled = op.Div(op.Mul(op.Sub(column, first), op.CastLike(float(bins), column)), op.Sub(last, first))
    # Out-of-range and NaN values get some in-range guess; they are dropped later.
    guess = _clamp(op.Cast(op.Where(_inside(column, edges), scaled, op.CastLike(0.0, column)), to=_INT64), 0, bins)
    lowest = op.Max(op.Sub(guess, _int64(1)), _int64(0))
    # upper_bound over edges[guess - 1 : guess + 2]: the lowest window index plus the count of
    # window edges not above the value, minus one.
    at_most = []
    for offset in (-1, 0, 1):
        candidate = op.Add(guess, _int64(offset))
        in_window = op.And(op.GreaterOrEqual(candidate, _int64(0)), op.LessOrEqual(candidate, _int64(bins)))
        edge = op.Gather(edges, _clamp(candidate, 0, bins))
        at_most.append(op.Cast(op.And(in_window, op.LessOrEqual(edge, column)), to=_INT64))
    below, on, above = at_most
    found = op.Sub(op.Add(op.Add(lowest, below), op.Add(on, above)), _int64(1))
    # The last edge closes the last bin.
    return _clamp(found, 0, bins - 1)


def _searched_bin(d: int, column: ir.Value, edges: ir.Value) -> ir.Value:
    """Bin of each value for arbitrary sorted edges: upper_bound minus one, the last edge
    belonging to the last bin. (``d``, the dim, only completes ``_histogram``'s ``bins_of``.)"""
    # ONNX Runtime keeps the reduced axis of a reduction over no rows: one padding value keeps
    # the rows nonempty and is cut off again.
    not_above = op.LessOrEqual(op.Unsqueeze(edges, _ints(0)), op.Unsqueeze(_padded(column, 0.0), _ints(-1)))
    counted = op.ReduceSum(op.Cast(not_above, to=_INT64), _ints(-1), keepdims=0)
    found = op.Sub(op.Slice(counted, _ints(0), _ints(-1)), _int64(1))
    last_bin = op.Sub(op.Size(edges), _int64(2))
    return _clamp(found, 0, last_bin)


def _bin_counts(
    per_dim_bins: Sequence[ir.Value], inside: ir.Value, weight: ir.Value | None, sizes: ir.Value, like: ir.Value
) -> ir.Value:
    """Scatter-add each in-range value's weight (or 1) into the bin its per-dim bins name."""
    flat_bin = per_dim_bins[-1]
    stride = op.Gather(sizes, _int64(len(per_dim_bins) - 1))
    for d in range(len(per_dim_bins) - 2, -1, -1):
        flat_bin = op.Add(flat_bin, op.Mul(per_dim_bins[d], stride))
        stride = op.Mul(stride, op.Gather(sizes, _int64(d)))
    amounts = _filled_like(like, 1.0, op.Shape(flat_bin)) if weight is None else op.Reshape(weight, _ints(-1))
    amounts = op.Where(inside, amounts, op.CastLike(0.0, like))
    zeros = _filled_like(like, 0.0, op.ReduceProd(sizes, keepdims=1))
    counts = _scatter_elements(zeros, op.Where(inside, flat_bin, _int64(0)), amounts, 0, "add")
    return op.Reshape(counts, sizes)


def _densities(counts: ir.Value, all_edges: Sequence[ir.Value]) -> ir.Value:
    """Counts divided by their total and by each bin's width in every dim."""
    density = op.Div(counts, op.ReduceSum(counts, keepdims=0))
    rank = len(all_edges)
    for d, edges in enumerate(all_edges):
        widths = op.Sub(op.Slice(edges, _ints(1), _ints(np.iinfo(np.int64).max)), op.Slice(edges, _ints(0), _ints(-1)))
        shape = [1] * rank
        shape[d] = -1
        density = op.Div(density, op.Reshape(widths, op.Constant(value_ints=shape)))
    return density


def _histogram(
    samples: ir.Value,
    dims: int,
    edges_of: Callable[[int, ir.Value], ir.Value],
    bins_of: Callable[[int, ir.Value, ir.Value], ir.Value],
    weight: ir.Value | None,
    density: bool,
) -> tuple[ir.Value, list[ir.Value]]:
    """Histogram of the rows of ``samples`` (``[..., dims]``): ``edges_of(d, column)`` gives each
    dim's edges and ``bins_of(d, column, edges)`` each value's bin there."""
    rows = op.Reshape(samples, op.Constant(value_ints=[-1, dims]))
    all_edges, all_bins, inside = [], [], None
    for d in range(dims):
        column = op.Gather(rows, _int64(d), axis=1)
        edges = edges_of(d, column)
        all_edges.append(edges)
        all_bins.append(bins_of(d, column, edges))
        within = _inside(column, edges)
        inside = within if inside is None else op.And(inside, within)
    sizes = op.Concat(*[op.Sub(op.Shape(edges), _int64(1)) for edges in all_edges], axis=0)
    counts = _bin_counts(all_bins, inside, weight, sizes, samples)
    return (_densities(counts, all_edges) if density else counts), all_edges


def _linear_histogram(
    samples: ir.Value, bins: Sequence[int], span: Sequence[float] | None, weight: ir.Value | None, density: bool
) -> tuple[ir.Value, list[ir.Value]]:
    def edges_of(d: int, column: ir.Value) -> ir.Value:
        left, right = _outer_edges(column, None if span is None else span[2 * d : 2 * d + 2])
        return _linspace_edges(left, right, bins[d])

    return _histogram(samples, len(bins), edges_of, lambda d, column, edges: _linear_bin(column, edges, bins[d]), weight, density)


@register("aten::histogram.bin_ct")
def aten_histogram_bin_ct(
    self: ir.Value,
    bins: int = 100,
    *,
    range: Sequence[float] | None = None,
    weight: ir.Value | None = None,
    density: bool = False,
) -> tuple[ir.Value, ir.Value]:
    """histogram.bin_ct(Tensor self, int bins=100, *, float[]? range=None, Tensor? weight=None, bool density=False) -> (Tensor hist, Tensor bin_edges)"""
    counts, edges = _linear_histogram(op.Reshape(self, _ints(-1, 1)), [bins], range, weight, density)
    return counts, edges[0]


@register("aten::histogram.bins_tensor")
def aten_histogram_bins_tensor(
    self: ir.Value, bins: ir.Value, *, weight: ir.Value | None = None, density: bool = False
) -> tuple[ir.Value, ir.Value]:
    """histogram.bins_tensor(Tensor self, Tensor bins, *, Tensor? weight=None, bool density=False) -> (Tensor hist, Tensor bin_edges)"""
    samples = op.Reshape(self, _ints(-1, 1))
    counts, _ = _histogram(samples, 1, lambda d, column: bins, _searched_bin, weight, density)
    return counts, op.Identity(bins)


@register("aten::_histogramdd_bin_edges")
def aten_histogramdd_bin_edges(
    self: ir.Value,
    bins: Sequence[int],
    *,
    range: Sequence[float] | None = None,
    weight: ir.Value | None = None,
    density: bool = False,
) -> list[ir.Value]:
    """_histogramdd_bin_edges(Tensor self, int[] bins, *, float[]? range=None, Tensor? weight=None, bool density=False) -> Tensor[]"""
    rows = op.Reshape(self, op.Constant(value_ints=[-1, len(bins)]))
    edges = []
    for d, count in enumerate(bins):
        left, right = _outer_edges(op.Gather(rows, _int64(d), axis=1), None if range is None else range[2 * d : 2 * d + 2])
        edges.append(_linspace_edges(left, right, count))
    return edges


@register("aten::_histogramdd_from_bin_cts")
def aten_histogramdd_from_bin_cts(
    self: ir.Value,
    bins: Sequence[int],
    *,
    range: Sequence[float] | None = None,
    weight: ir.Value | None = None,
    density: bool = False,
) -> ir.Value:
    """_histogramdd_from_bin_cts(Tensor self, int[] bins, *, float[]? range=None, Tensor? weight=None, bool density=False) -> Tensor"""
    counts, _ = _linear_histogram(self, list(bins), range, weight, density)
    return counts


@register("aten::_histogramdd_from_bin_tensors")
def aten_histogramdd_from_bin_tensors(
    self: ir.Value, bins: Sequence[ir.Value], *, weight: ir.Value | None = None, density: bool = False
) -> ir.Value:
    """_histogramdd_from_bin_tensors(Tensor self, Tensor[] bins, *, Tensor? weight=None, bool density=False) -> Tensor"""
    counts, _ = _histogram(self, len(bins), lambda d, column: bins[d], _searched_bin, weight, density)
    return counts


# -- nonzero_static, pdist -----------------------------------------------------------------------


@register("aten::nonzero_static")
def aten_nonzero_static(self: ir.Value, *, size: Any, fill_value: int = -1) -> ir.Value:
    """nonzero_static(Tensor self, *, SymInt size, int fill_value=-1) -> Tensor"""
    rank = _rank(self)
    size = op.Reshape(op.Cast(size, to=_INT64), _ints(1)) if isinstance(size, ir.Value) else _ints(int(size))
    filler = op.Expand(_int64(fill_value), op.Concat(size, _ints(rank), axis=0))
    if rank == 0:
        return filler
    # The found indices, padded with fill_value rows, cut to size rows.
    found = op.Transpose(op.NonZero(self), perm=[1, 0])
    return op.Slice(op.Concat(found, filler, axis=0), _ints(0), size, _ints(0))


@register("aten::_pdist_forward")
def aten_pdist_forward(self: ir.Value, p: float = 2.0) -> ir.Value:
    """_pdist_forward(Tensor self, float p=2.) -> Tensor"""
    # The distances of rows i < j, in row-major order: the strict upper triangle of cdist(x, x).
    distances = aten_cdist_forward(self, self, p)
    rows = op.Range(_int64(0), op.Squeeze(op.Shape(self, start=0, end=1)), _int64(1))
    upper = op.Less(op.Unsqueeze(rows, _ints(1)), op.Unsqueeze(rows, _ints(0)))
    return op.Compress(op.Reshape(distances, _ints(-1)), op.Reshape(upper, _ints(-1)), axis=0)


# -- grid_sampler_3d -----------------------------------------------------------------------------

_INTERPOLATION_MODES = {0: "linear", 1: "nearest"}
_PADDING_MODES = {0: "zeros", 1: "border", 2: "reflection"}


def _trilinear_or_nearest(node: Any) -> bool:
    # ATen has no bicubic sampling in 3-D.
    return node.args[2] in _INTERPOLATION_MODES


@register("aten::grid_sampler_3d", min_opset=20, supports=_trilinear_or_nearest)
def aten_grid_sampler_3d_opset20(
    input: ir.Value, grid: ir.Value, interpolation_mode: int, padding_mode: int, align_corners: bool
) -> ir.Value:
    """grid_sampler_3d(Tensor input, Tensor grid, int interpolation_mode, int padding_mode, bool align_corners) -> Tensor"""
    return opset20.GridSample(
        input,
        grid,
        align_corners=int(align_corners),
        mode=_INTERPOLATION_MODES[interpolation_mode],
        padding_mode=_PADDING_MODES[padding_mode],
    )


def _source_coordinate(coordinate: ir.Value, size: ir.Value, padding_mode: int, align_corners: bool) -> ir.Value:
    """A normalized grid coordinate in [-1, 1] as a position along an axis of ``size`` samples,
    reflected or clipped into range as the padding mode says."""
    one, two = op.CastLike(1.0, coordinate), op.CastLike(2.0, coordinate)
    if align_corners:
        position = op.Mul(op.Div(op.Add(coordinate, one), two), op.Sub(size, one))
    else:
        position = op.Div(op.Sub(op.Mul(op.Add(coordinate, one), size), one), two)
    if padding_mode == 0:
        return position
    if padding_mode == 2:
        # Mirror at the first and last sample centres (align_corners) or at the outer borders.
        low = op.CastLike(0.0 if align_corners else -0.5, coordinate)
        span = op.Sub(size, one) if align_corners else size
        distance = op.Abs(op.Sub(position, low))
        flips = op.Floor(op.Div(distance, span))
        extra = op.Sub(distance, op.Mul(flips, span))
        even = op.Equal(op.Mod(flips, two, fmod=1), op.CastLike(0.0, coordinate))
        reflected = op.Where(even, op.Add(extra, low), op.Add(op.Sub(span, extra), low))
        # A single sample with align_corners has nothing to mirror across.
        position = op.Where(op.Equal(span, op.CastLike(0.0, coordinate)), op.CastLike(0.0, coordinate), reflected)
    return op.Min(op.Max(position, op.CastLike(0.0, coordinate)), op.Sub(size, one))


@register("aten::grid_sampler_3d", supports=_trilinear_or_nearest)
def aten_grid_sampler_3d(
    input: ir.Value, grid: ir.Value, interpolation_mode: int, padding_mode: int, align_corners: bool
) -> ir.Value:
    """grid_sampler_3d(Tensor input, Tensor grid, int interpolation_mode, int padding_mode, bool align_corners) -> Tensor

    Below opset 20 GridSample is 2-D only: look the (up to eight) neighbours up with
    GatherElements on the flattened volume and blend them.
    """
    batch_channels = op.Shape(input, start=0, end=2)
    volume = op.Reshape(input, op.Concat(batch_channels, _ints(-1), axis=0))  # [N, C, D*H*W]
    out_spatial = op.Shape(grid, start=1, end=4)
    points = op.Reshape(grid, op.Concat(op.Shape(grid, start=0, end=1), _ints(-1, 3), axis=0))  # [N, P, 3]
    sizes = [op.CastLike(op.Shape(input, start=axis, end=axis + 1), grid) for axis in (4, 3, 2)]  # W, H, D
    # x samples W, y samples H and z samples D.
    coords = [
        _source_coordinate(op.Gather(points, _int64(k), axis=2), sizes[k], padding_mode, align_corners) for k in range(3)
    ]
    width, height = op.Shape(input, start=4, end=5), op.Shape(input, start=3, end=4)
    strides = [_int64(1), width, op.Mul(height, width)]

    def sample(corner: Sequence[ir.Value], weight: ir.Value) -> ir.Value:
        inside, flat = None, None
        for k, position in enumerate(corner):
            last = op.Sub(sizes[k], op.CastLike(1.0, grid))
            within = op.And(op.GreaterOrEqual(position, op.CastLike(0.0, grid)), op.LessOrEqual(position, last))
            inside = within if inside is None else op.And(inside, within)
            term = op.Mul(op.Cast(position, to=_INT64), strides[k])
            flat = term if flat is None else op.Add(flat, term)
        flat = op.Where(inside, flat, _int64(0))  # [N, P]
        per_channel = op.Expand(op.Unsqueeze(flat, _ints(1)), op.Concat(batch_channels, op.Shape(flat, start=1), axis=0))
        gathered = op.GatherElements(volume, per_channel, axis=2)
        return op.Mul(gathered, op.Unsqueeze(op.Where(inside, weight, op.CastLike(0.0, grid)), _ints(1)))

    if interpolation_mode == 1:
        blended = sample([op.Round(c) for c in coords], op.CastLike(1.0, grid))
    else:
        lows = [op.Floor(c) for c in coords]
        fractions = [op.Sub(c, low) for c, low in zip(coords, lows)]
        blended = None
        for corner in np.ndindex(2, 2, 2):
            positions, weight = [], None
            for k, upper in enumerate(corner):
                positions.append(op.Add(lows[k], op.CastLike(1.0, grid)) if upper else lows[k])
                factor = fractions[k] if upper else op.Sub(op.CastLike(1.0, grid), fractions[k])
                weight = factor if weight is None else op.Mul(weight, factor)
            contribution = sample(positions, weight)
            blended = contribution if blended is None else op.Add(blended, contribution)
    return op.Reshape(blended, op.Concat(batch_channels, out_spatial, axis=0))


# -- cross entropy: unbatched, and linear_cross_entropy's chunked ops ----------------------------


def _unbatched_class_indices(node: Any) -> bool:
    args = list(node.args) + [None] * 6
    scores = args[0].meta.get("val") if isinstance(args[0], torch.fx.Node) else None
    target = args[1].meta.get("val") if isinstance(args[1], torch.fx.Node) else None
    smoothing = node.kwargs.get("label_smoothing", args[5]) or 0.0
    return (
        isinstance(scores, torch.Tensor)
        and scores.dim() == 1
        and isinstance(target, torch.Tensor)
        and not target.dtype.is_floating_point
        and smoothing == 0.0
    )


_REDUCTIONS = {0: "none", 1: "mean", 2: "sum"}


@register("aten::cross_entropy_loss", supports=_unbatched_class_indices)
def aten_cross_entropy_loss_unbatched(
    self: ir.Value,
    target: ir.Value,
    weight: ir.Value | None = None,
    reduction: int = 1,
    ignore_index: int = -100,
    label_smoothing: float = 0.0,
) -> ir.Value:
    """cross_entropy_loss(Tensor self, Tensor target, Tensor? weight=None, int reduction=Mean, SymInt ignore_index=-100, float label_smoothing=0.0) -> Tensor

    For one sample (scores ``[C]``, a 0-d target). SoftmaxCrossEntropyLoss requires a batch
    dim; ONNX Runtime rejects ``[C]`` scores with "Reshape: Invalid position of 0" (its
    function body reshapes them to ``[N, C, -1]`` with a 0 copying a dim the input lacks).
    """
    batch = _ints(0)
    loss, _ = op.SoftmaxCrossEntropyLoss(
        op.Unsqueeze(self, batch),
        op.Unsqueeze(op.Cast(target, to=_INT64), batch),
        weight,
        reduction=_REDUCTIONS[reduction],
        ignore_index=ignore_index,
    )
    return op.Squeeze(loss, batch) if reduction == 0 else loss


def _weighted_probabilities(node: Any) -> bool:
    args = list(node.args) + [None] * 6
    target = args[1].meta.get("val") if isinstance(args[1], torch.fx.Node) else None
    weight = node.kwargs.get("weight", args[2])
    smoothing = node.kwargs.get("label_smoothing", args[5]) or 0.0
    return isinstance(target, torch.Tensor) and target.dtype.is_floating_point and (weight is not None or smoothing != 0.0)


@register("aten::cross_entropy_loss", supports=_weighted_probabilities)
def aten_cross_entropy_loss_weighted_probabilities(
    self: ir.Value,
    target: ir.Value,
    weight: ir.Value | None = None,
    reduction: int = 1,
    ignore_index: int = -100,
    label_smoothing: float = 0.0,
) -> ir.Value:
    """cross_entropy_loss(Tensor self, Tensor target, Tensor? weight=None, int reduction=Mean, SymInt ignore_index=-100, float label_smoothing=0.0) -> Tensor

    Class probabilities as target with class weights or label smoothing:
    ``-sum(weight * target * log_softmax(self))`` over the class dim. SoftmaxCrossEntropyLoss
    only takes class indices; the mean divides by the sample count, not by the weights.
    """
    rank = _rank(self)
    class_axis = 1 if rank > 1 else 0
    if label_smoothing != 0.0:
        classes = op.CastLike(op.Shape(self, start=class_axis, end=class_axis + 1), self)
        uniform = op.Div(op.CastLike(label_smoothing, self), classes)
        target = op.Add(op.Mul(target, op.CastLike(1.0 - label_smoothing, self)), uniform)
    terms = op.Mul(target, op.LogSoftmax(self, axis=class_axis))
    if weight is not None:
        terms = op.Mul(terms, op.Reshape(weight, op.Constant(value_ints=[-1] + [1] * (rank - class_axis - 1))))
    losses = op.Neg(op.ReduceSum(terms, _ints(class_axis), keepdims=0))
    if reduction == 0:
        return losses
    if reduction == 2:
        return op.ReduceSum(losses, keepdims=0)
    return op.ReduceMean(losses, keepdims=0)


def _chunked_losses(
    input: ir.Value,
    linear_weight: ir.Value,
    target: ir.Value,
    linear_bias: ir.Value | None,
    weight: ir.Value | None,
    ignore_index: int,
    acc_dtype: int | None,
) -> tuple[ir.Value, ir.Value, ir.Value, ir.Value]:
    """Per-sample logits' log-softmax, each sample's class weight (0 where ignored), its
    one-hot target and its loss, all in the accumulation dtype.

    The chunked ops compute, a batch chunk at a time, exactly cross_entropy(input @ W.T + b);
    without the memory pressure the chunking answers, one pass over the batch does.
    """
    if acc_dtype is not None and acc_dtype != input.dtype:
        input, linear_weight = op.Cast(input, to=acc_dtype), op.Cast(linear_weight, to=acc_dtype)
        if linear_bias is not None:
            linear_bias = op.Cast(linear_bias, to=acc_dtype)
    logits = op.MatMul(input, op.Transpose(linear_weight, perm=[1, 0]))
    if linear_bias is not None:
        logits = op.Add(logits, linear_bias)
    log_probabilities = op.LogSoftmax(logits, axis=1)
    target = op.Cast(target, to=_INT64)
    ignored = op.Equal(target, _int64(ignore_index))
    # Ignored targets may name no class; any valid one keeps the lookups in range.
    classes = op.Where(ignored, _int64(0), target)
    if weight is None:
        class_weights = _filled_like(logits, 1.0, op.Shape(target))
    else:
        class_weights = op.CastLike(op.Gather(weight, classes), logits)
    class_weights = op.Where(ignored, op.CastLike(0.0, logits), class_weights)
    picked = op.Squeeze(op.GatherElements(log_probabilities, op.Unsqueeze(classes, _ints(1)), axis=1), _ints(1))
    losses = op.Neg(op.Mul(class_weights, picked))
    every_class = op.Range(_int64(0), op.Squeeze(op.Shape(logits, start=1, end=2)), _int64(1))
    one_hot = op.Equal(op.Unsqueeze(classes, _ints(1)), every_class)
    return log_probabilities, class_weights, one_hot, losses


@register("torch_nn::_linear_cross_entropy_batch_chunked")
def torch_nn_linear_cross_entropy_batch_chunked(
    input: ir.Value,
    linear_weight: ir.Value,
    target: ir.Value,
    linear_bias: ir.Value | None,
    weight: ir.Value | None,
    reduction: str,
    ignore_index: int,
    label_smoothing: float,
    batch_chunk_size: int,
    acc_policy: str,
    acc_dtype: int | None,
    allow_retain_graph: bool,
    compute_input_grad: bool,
    compute_linear_weight_grad: bool,
    compute_linear_bias_grad: bool,
) -> tuple[ir.Value, ir.Value, ir.Value, ir.Value]:
    """_linear_cross_entropy_batch_chunked(Tensor input, Tensor linear_weight, Tensor target, Tensor? linear_bias, Tensor? weight, str reduction, int ignore_index, float label_smoothing, int batch_chunk_size, str acc_policy, ScalarType acc_dtype, bool allow_retain_graph, bool compute_input_grad, bool compute_linear_weight_grad, bool compute_linear_bias_grad) -> (Tensor, Tensor, Tensor, Tensor)

    The scalar loss (mean or sum) and the gradients the op precomputes for its backward, each
    an empty tensor unless asked for: d loss / d logits is the weight-scaled
    ``softmax - one_hot(target)``, pulled back through the linear layer.
    """
    if label_smoothing != 0.0 or reduction not in ("mean", "sum"):
        raise ValueError(
            f"linear_cross_entropy chunked op: reduction={reduction!r}, label_smoothing={label_smoothing} unsupported"
        )
    log_probabilities, class_weights, one_hot, losses = _chunked_losses(
        input, linear_weight, target, linear_bias, weight, ignore_index, acc_dtype
    )
    loss = op.ReduceSum(losses, keepdims=0)
    scale = class_weights
    if reduction == "mean":
        # Normalised by the weight of the counted samples; none counted gives 0 / 0 = NaN.
        total_weight = op.ReduceSum(class_weights, keepdims=0)
        loss = op.Div(loss, total_weight)
        scale = op.Div(class_weights, total_weight)
    logits_grad = op.Mul(
        op.Sub(op.Exp(log_probabilities), op.CastLike(one_hot, log_probabilities)), op.Unsqueeze(scale, _ints(1))
    )

    def gradient(wanted: bool, compute: Any, empty_shape: list[int]) -> ir.Value:
        if not wanted:
            return _filled_like(input, 0.0, op.Constant(value_ints=empty_shape))
        return op.CastLike(compute(), input)

    grad_input = gradient(compute_input_grad, lambda: op.MatMul(logits_grad, op.CastLike(linear_weight, logits_grad)), [0, 0])
    grad_linear_weight = gradient(
        compute_linear_weight_grad,
        lambda: op.MatMul(op.Transpose(logits_grad, perm=[1, 0]), op.CastLike(input, logits_grad)),
        [0, 0],
    )
    grad_linear_bias = gradient(compute_linear_bias_grad, lambda: op.ReduceSum(logits_grad, _ints(0), keepdims=0), [0])
    return op.CastLike(loss, input), grad_input, grad_linear_weight, grad_linear_bias


@register("torch_nn::_linear_cross_entropy_batch_chunked_no_reduction")
def torch_nn_linear_cross_entropy_batch_chunked_no_reduction(
    input: ir.Value,
    linear_weight: ir.Value,
    target: ir.Value,
    linear_bias: ir.Value | None,
    weight: ir.Value | None,
    ignore_index: int,
    batch_chunk_size: int,
    acc_policy: str,
    acc_dtype: int | None,
) -> ir.Value:
    """_linear_cross_entropy_batch_chunked_no_reduction(Tensor input, Tensor linear_weight, Tensor target, Tensor? linear_bias, Tensor? weight, int ignore_index, int batch_chunk_size, str acc_policy, ScalarType acc_dtype) -> Tensor"""
    *_, losses = _chunked_losses(input, linear_weight, target, linear_bias, weight, ignore_index, acc_dtype)
    return op.CastLike(losses, input)


# -- hash_tensor ---------------------------------------------------------------------------------


def _reduced_dims(rank: int, dim: Sequence[int] | None) -> list[int]:
    return sorted({d % rank for d in dim}) if dim else list(range(rank))


def _integral_with_static_reduction(node: Any) -> bool:
    """Integers and booleans only: ATen hashes floats by their float64 bit pattern, which ONNX
    can only read with BitCast (opset 26). The XOR tree needs the reduced sizes up front."""
    example = node.args[0].meta.get("val") if isinstance(node.args[0], torch.fx.Node) else None
    if not isinstance(example, torch.Tensor) or example.is_floating_point() or example.is_complex():
        return False
    if node.kwargs.get("mode", 0) != 0:
        return False
    dim = node.kwargs.get("dim", node.args[1] if len(node.args) > 1 else None)
    rank = max(example.dim(), 1)
    shape = list(example.shape) or [1]
    return all(isinstance(shape[d], int) for d in _reduced_dims(rank, dim))


@register("aten::hash_tensor", supports=_integral_with_static_reduction)
def aten_hash_tensor(self: ir.Value, dim: Sequence[int] = (), *, keepdim: bool = False, mode: int = 0) -> ir.Value:
    """hash_tensor(Tensor self, int[1] dim=[], *, bool keepdim=False, int mode=0) -> Tensor

    Mode 0 XORs the elements' 64-bit patterns; an integer's is its value sign-extended to
    int64, which a Cast to int64 and on to uint64 keeps bit for bit. ONNX has no XOR
    reduction, so halves of the reduced axis are XORed together until one element is left.
    """
    rank = _rank(self)
    dims = _reduced_dims(rank, dim)
    kept = [d for d in range(rank) if d not in dims]
    words = op.Cast(op.Cast(self, to=_INT64), to=ir.DataType.UINT64)
    if kept + dims != list(range(rank)):
        words = op.Transpose(words, perm=kept + dims)
    length = int(np.prod([int(self.shape[d]) for d in dims]))
    # A 0 in Reshape's shape copies that dim: the kept dims stay as they are, dynamic or not.
    words = op.Reshape(words, op.Constant(value_ints=[0] * len(kept) + [length]))
    last = _ints(-1)
    while length > 1:
        if length % 2:
            first = op.Slice(words, _ints(0), _ints(1), last)
            words = op.Concat(words, op.BitwiseXor(first, first), axis=-1)  # XOR's identity, 0
            length += 1
        half = length // 2
        words = op.BitwiseXor(op.Slice(words, _ints(0), _ints(half), last), op.Slice(words, _ints(half), _ints(length), last))
        length = half
    hashed = op.Squeeze(words, last)
    return op.Unsqueeze(hashed, op.Constant(value_ints=dims)) if keepdim else hashed
