"""histogram, histogramdd, histc and bincount: counts (or densities) of values in bins, with their
bin edges.

torchlib lacks the first two and torch has neither a decomposition nor a fake kernel for them;
torchlib's histc compares values with precomputed edges (ATen computes each value's bin by a
formula, which can put values near an edge elsewhere) and refuses ``min == max``, the default,
where the range comes from the data (MoE routers count tokens per expert so). Evenly
spaced bins place values as ATen does (a guess from the relative position, settled against the
neighbouring edges), so values on an edge land in the same bin; explicit edges are searched.
The counts are a ``ScatterElements`` add of each in-range value's weight (or 1) into its bin;
bincount's too (torchlib's refuses weights), which ONNX Runtime adds in input order as ATen does.
"""

from __future__ import annotations

from typing import Callable, Sequence

import numpy as np
import onnx_ir as ir
from onnxscript import opset18 as op

from torch_onnx_fx.dtypes import onnx_dtype
from torch_onnx_fx.ops import _tensors as tx
from torch_onnx_fx.registry import register, wants_context
from torch_onnx_fx.translate.op_context import OpContext

__all__ = [
    "aten_bincount",
    "aten_histc",
    "aten_histogram_bin_ct",
    "aten_histogram_bins_tensor",
    "aten_histogramdd_bin_edges",
    "aten_histogramdd_from_bin_cts",
    "aten_histogramdd_from_bin_tensors",
]


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
        empty = op.Equal(op.Size(column), tx.int64(0))
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
    first = op.Gather(edges, tx.int64(0))
    last = op.Gather(edges, tx.int64(-1))
    return op.And(op.GreaterOrEqual(column, first), op.LessOrEqual(column, last))


def _clamp(value: ir.Value, low: int, high: ir.Value | int) -> ir.Value:
    high = tx.int64(high) if isinstance(high, int) else high
    return op.Min(op.Max(value, tx.int64(low)), high)


def _linear_bin(column: ir.Value, edges: ir.Value, bins: int) -> ir.Value:
    """Bin of each in-range value of ``column`` for evenly spaced edges.

    ATen guesses the bin from the value's relative position and then settles it against the
    neighbouring edges, so a value lying on an edge lands where the edges say; mirroring that
    keeps rounding from moving values between bins.
    """
    first = op.Gather(edges, tx.int64(0))
    last = op.Gather(edges, tx.int64(-1))
    scaled = op.Div(op.Mul(op.Sub(column, first), op.CastLike(float(bins), column)), op.Sub(last, first))
    # Out-of-range and NaN values get some in-range guess; they are dropped later.
    guess = _clamp(op.Cast(op.Where(_inside(column, edges), scaled, op.CastLike(0.0, column)), to=tx.INT64), 0, bins)
    lowest = op.Max(op.Sub(guess, tx.int64(1)), tx.int64(0))
    # upper_bound over edges[guess - 1 : guess + 2]: the lowest window index plus the count of
    # window edges not above the value, minus one.
    at_most = []
    for offset in (-1, 0, 1):
        candidate = op.Add(guess, tx.int64(offset))
        in_window = op.And(op.GreaterOrEqual(candidate, tx.int64(0)), op.LessOrEqual(candidate, tx.int64(bins)))
        edge = op.Gather(edges, _clamp(candidate, 0, bins))
        at_most.append(op.Cast(op.And(in_window, op.LessOrEqual(edge, column)), to=tx.INT64))
    below, on, above = at_most
    found = op.Sub(op.Add(op.Add(lowest, below), op.Add(on, above)), tx.int64(1))
    # The last edge closes the last bin.
    return _clamp(found, 0, bins - 1)


def _searched_bin(d: int, column: ir.Value, edges: ir.Value) -> ir.Value:
    """Bin of each value for arbitrary sorted edges: upper_bound minus one, the last edge
    belonging to the last bin. (``d``, the dim, only completes ``_histogram``'s ``bins_of``.)"""
    # ONNX Runtime keeps the reduced axis of a reduction over no rows: one padding value keeps
    # the rows nonempty and is cut off again.
    not_above = op.LessOrEqual(op.Unsqueeze(edges, tx.ints(0)), op.Unsqueeze(_padded(column, 0.0), tx.ints(-1)))
    counted = op.ReduceSum(op.Cast(not_above, to=tx.INT64), tx.ints(-1), keepdims=0)
    found = op.Sub(op.Slice(counted, tx.ints(0), tx.ints(-1)), tx.int64(1))
    last_bin = op.Sub(op.Size(edges), tx.int64(2))
    return _clamp(found, 0, last_bin)


def _bin_counts(
    per_dim_bins: Sequence[ir.Value], inside: ir.Value, weight: ir.Value | None, sizes: ir.Value, like: ir.Value
) -> ir.Value:
    """Scatter-add each in-range value's weight (or 1) into the bin its per-dim bins name."""
    flat_bin = per_dim_bins[-1]
    stride = op.Gather(sizes, tx.int64(len(per_dim_bins) - 1))
    for d in range(len(per_dim_bins) - 2, -1, -1):
        flat_bin = op.Add(flat_bin, op.Mul(per_dim_bins[d], stride))
        stride = op.Mul(stride, op.Gather(sizes, tx.int64(d)))
    amounts = tx.filled_like(like, 1.0, op.Shape(flat_bin)) if weight is None else op.Reshape(weight, tx.ints(-1))
    amounts = op.Where(inside, amounts, op.CastLike(0.0, like))
    zeros = tx.filled_like(like, 0.0, op.ReduceProd(sizes, keepdims=1))
    counts = tx.scatter_elements(zeros, op.Where(inside, flat_bin, tx.int64(0)), amounts, 0, "add")
    return op.Reshape(counts, sizes)


def _densities(counts: ir.Value, all_edges: Sequence[ir.Value]) -> ir.Value:
    """Counts divided by their total and by each bin's width in every dim."""
    density = op.Div(counts, op.ReduceSum(counts, keepdims=0))
    rank = len(all_edges)
    for d, edges in enumerate(all_edges):
        widths = op.Sub(op.Slice(edges, tx.ints(1), tx.ints(np.iinfo(np.int64).max)), op.Slice(edges, tx.ints(0), tx.ints(-1)))
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
        column = op.Gather(rows, tx.int64(d), axis=1)
        edges = edges_of(d, column)
        all_edges.append(edges)
        all_bins.append(bins_of(d, column, edges))
        within = _inside(column, edges)
        inside = within if inside is None else op.And(inside, within)
    sizes = op.Concat(*[op.Sub(op.Shape(edges), tx.int64(1)) for edges in all_edges], axis=0)
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
    counts, edges = _linear_histogram(op.Reshape(self, tx.ints(-1, 1)), [bins], range, weight, density)
    return counts, edges[0]


@register("aten::histogram.bins_tensor")
def aten_histogram_bins_tensor(
    self: ir.Value, bins: ir.Value, *, weight: ir.Value | None = None, density: bool = False
) -> tuple[ir.Value, ir.Value]:
    """histogram.bins_tensor(Tensor self, Tensor bins, *, Tensor? weight=None, bool density=False) -> (Tensor hist, Tensor bin_edges)"""
    samples = op.Reshape(self, tx.ints(-1, 1))
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
        left, right = _outer_edges(op.Gather(rows, tx.int64(d), axis=1), None if range is None else range[2 * d : 2 * d + 2])
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


@register("aten::histc")
def aten_histc(self: ir.Value, bins: int = 100, min: float = 0.0, max: float = 0.0) -> ir.Value:
    """histc(Tensor self, int bins=100, Scalar min=0, Scalar max=0) -> Tensor

    As ATen computes it: ``min == max`` takes the data's minimum and maximum (when there is
    data), a range still empty is widened by 1 each way; a value in range goes to bin
    ``int((x - left) * bins / (right - left))`` in the input's dtype, the right edge to the last
    bin; values out of range and NaN are not counted. Where ATen raises because the data's range
    is not finite (a NaN or infinity in the data), every count is NaN: ONNX cannot raise.
    """
    column = op.Reshape(self, tx.ints(-1))
    left, right = op.CastLike(float(min), column), op.CastLike(float(max), column)
    finite = None
    if min == max:
        has_data = op.Greater(op.Size(column), tx.int64(0))
        left = op.Where(has_data, op.ReduceMin(_padded(column, float("inf")), keepdims=0), left)
        right = op.Where(has_data, op.ReduceMax(_padded(column, float("-inf")), keepdims=0), right)
        same = op.Equal(left, right)
        one = op.CastLike(1.0, column)
        left, right = op.Where(same, op.Sub(left, one), left), op.Where(same, op.Add(right, one), right)
        # ONNX Runtime's ReduceMin/Max skip NaN where ATen's aminmax returns it: look for any.
        bad = op.Cast(op.Or(op.IsNaN(column), op.IsInf(column)), to=tx.INT64)
        finite = op.Equal(op.ReduceMax(op.Concat(bad, tx.ints(0), axis=0), keepdims=0), tx.int64(0))
    inside = op.And(op.GreaterOrEqual(column, left), op.LessOrEqual(column, right))
    position = op.Div(op.Mul(op.Sub(column, left), op.CastLike(float(bins), column)), op.Sub(right, left))
    # Out-of-range and NaN values get bin 0 and no count.
    index = op.Cast(op.Where(inside, position, op.CastLike(0.0, column)), to=tx.INT64)
    index = _clamp(index, 0, bins - 1)
    amounts = op.Where(inside, op.CastLike(1.0, column), op.CastLike(0.0, column))
    zeros = tx.filled_like(self, 0.0, tx.ints(bins))
    counts = tx.scatter_elements(zeros, index, amounts, 0, "add")
    return counts if finite is None else op.Where(finite, counts, op.CastLike(float("nan"), column))


@register("aten::bincount")
@wants_context
def aten_bincount(self: ir.Value, weights: ir.Value | None = None, minlength: int = 0, *, ctx: OpContext) -> ir.Value:
    """bincount(Tensor self, Tensor? weights=None, SymInt minlength=0) -> Tensor

    max(self) + 1 bins (none for an empty input), at least ``minlength``. Weights are summed in
    the result's type (float32 for float32 weights, double for any other), one by one in input
    order as ATen's loop adds them, so the sums are its bits; counts are int64."""
    values = op.Cast(self, to=ir.DataType.INT64)
    # A -1 keeps the maximum defined for an empty input and makes its length 0.
    largest = op.ReduceMax(op.Concat(values, op.Constant(value_ints=[-1]), axis=0), keepdims=1)
    length = op.Max(op.Add(largest, op.Constant(value_ints=[1])), op.Constant(value_ints=[minlength]))
    result_type = onnx_dtype(ctx.result.dtype)
    zeros = op.ConstantOfShape(length, value=ir.tensor(np.zeros(1, dtype=result_type.numpy())))
    if weights is None:
        updates = op.Expand(op.Constant(value=ir.tensor(np.ones((), dtype=result_type.numpy()))), op.Shape(values))
    else:
        updates = op.Cast(weights, to=result_type)
    return op.ScatterElements(zeros, values, updates, axis=0, reduction="add")
