"""Scatter-style operators: index_reduce, put, scatter with reduce=, segment_reduce and
nonzero_static; also ``hash_tensor`` of integers, and ``index_put`` of the leading dims.

torchlib lacks all of them but ``index_put`` and torch has no decomposition either, so without
these the export fails; ``index_put`` is here so that the graphs that need it (mixture-of-experts
routing inverts a permutation with it) do not load torchlib for it. The reductions are ``ScatterElements`` with the matching ``reduction`` (ONNX has add, mul,
max and min); means divide a sum by a count scattered the same way. Sizes are read with
``Shape``, so the translations work on dynamic sizes (hash_tensor's reduced dims excepted).
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np
import onnx_ir as ir
import torch
from onnxscript import opset18 as op

from torch_onnx_fx.ops import _tensors as tx
from torch_onnx_fx.ops.arithmetic import aten_div_mode_integer
from torch_onnx_fx.registry import arg_example, register

__all__ = [
    "aten_index_reduce",
    "aten_put",
    "aten_index_put",
    "aten_scatter_reduce",
    "aten_scatter_add",
    "aten_scatter_reduce_extreme",
    "aten_scatter_reduce_mean",
    "aten_scatter_reduce_two",
    "aten_scatter_src",
    "aten_scatter_value_reduce",
    "aten_segment_reduce",
    "aten_nonzero_static",
    "aten_hash_tensor",
]


def _as_rank_one(value: ir.Value) -> ir.Value:
    """A 0-d tensor as a vector of one element (the graph walk lifts ``self`` the same way)."""
    return op.Reshape(value, tx.ints(1)) if tx.rank(value) == 0 else value


def _is_integral(value: ir.Value) -> bool:
    return value.dtype is not None and not value.dtype.is_floating_point()


def _floor_divide(totals: ir.Value, counts: ir.Value) -> ir.Value:
    """Integer division rounding toward negative infinity, as ATen's integral means do: exactly
    (through double it lost int64 sums past 2**53)."""
    return aten_div_mode_integer(totals, op.CastLike(counts, totals), rounding_mode="floor")


# -- index_reduce, put, scatter(reduce=) ---------------------------------------------------------


@register("aten::index_reduce")
def aten_index_reduce(
    self: ir.Value, dim: int, index: ir.Value, source: ir.Value, reduce: str, *, include_self: bool = True
) -> ir.Value:
    """index_reduce(Tensor self, int dim, Tensor index, Tensor source, str reduce, *, bool include_self=True) -> Tensor"""
    rank = tx.rank(self)
    dim %= rank
    source = _as_rank_one(source)
    # index[i] names the slice of self that source's i-th slice along dim reduces into: spread it
    # over source's shape so ScatterElements sees one target per source element.
    along_dim = [1] * rank
    along_dim[dim] = -1
    positions = op.Expand(op.Reshape(op.Cast(index, to=tx.INT64), op.Constant(value_ints=along_dim)), op.Shape(source))
    ones = op.Expand(tx.int64(1), op.Shape(source))
    counts = op.ScatterElements(op.Expand(tx.int64(0), op.Shape(self)), positions, ones, axis=dim, reduction="add")
    touched = op.Greater(counts, tx.int64(0))
    if reduce in ("amax", "amin"):
        reduction = "max" if reduce == "amax" else "min"
        base = self
        if not include_self:
            # Overwriting first puts one of the sources into every touched slot; reducing over
            # all of them again then ignores self without needing an identity for the dtype.
            base = tx.scatter_elements(self, positions, source, dim)
        return tx.scatter_elements(base, positions, source, dim, reduction)
    if reduce == "prod":
        base = self if include_self else op.Where(touched, op.CastLike(1, self), self)
        return tx.scatter_elements(base, positions, source, dim, "mul")
    if reduce == "mean":
        base = self if include_self else op.Where(touched, op.CastLike(0, self), self)
        totals = tx.scatter_elements(base, positions, source, dim, "add")
        if include_self:
            counts = op.Add(counts, tx.int64(1))
        safe_counts = op.Where(touched, counts, tx.int64(1))
        mean = _floor_divide(totals, safe_counts) if _is_integral(self) else op.Div(totals, op.CastLike(safe_counts, totals))
        return op.Where(touched, mean, self)
    raise ValueError(f"index_reduce: unknown reduce {reduce!r}; expected prod, mean, amax or amin")


@register("aten::put")
def aten_put(self: ir.Value, index: ir.Value, source: ir.Value, accumulate: bool = False) -> ir.Value:
    """put(Tensor self, Tensor index, Tensor source, bool accumulate=False) -> Tensor"""
    # put indexes self as if it were flattened; negative indices count from the end.
    flat = op.Reshape(self, tx.ints(-1))
    positions = op.Reshape(op.Cast(index, to=tx.INT64), tx.ints(-1, 1))
    positions = op.Where(op.Less(positions, tx.int64(0)), op.Add(positions, op.Shape(flat)), positions)
    updates = op.Reshape(source, tx.ints(-1))
    result = tx.scatter_nd(flat, positions, updates, "add" if accumulate else "none")
    return op.Reshape(result, op.Shape(self))


def _leading_index_put(node: torch.fx.Node) -> bool:
    """``index_put`` this module writes: real tensors of one dtype, integer index tensors for
    the first dims (no ``None`` between or before them, no boolean masks), values no wider than
    the indexed result, and either overwriting or summing integers and bools, whose sums do not
    depend on the order duplicates are added in (float sums do: those stay with torchlib)."""
    self_example, values = arg_example(node, 0), arg_example(node, 2)
    indices = node.args[1] if len(node.args) > 1 else None
    if not isinstance(self_example, torch.Tensor) or not isinstance(values, torch.Tensor) or not isinstance(indices, (list, tuple)):
        return False
    if self_example.is_complex() or values.dtype != self_example.dtype or not indices:
        return False
    examples = [index.meta.get("val") if isinstance(index, torch.fx.Node) else None for index in indices]
    if not all(isinstance(e, torch.Tensor) and e.dtype in (torch.int64, torch.int32) for e in examples):
        return False
    if len(examples) > self_example.dim():
        return False
    indexed_rank = max(e.dim() for e in examples) + self_example.dim() - len(examples)
    accumulate = node.args[3] if len(node.args) > 3 else node.kwargs.get("accumulate", False)
    summable = not self_example.dtype.is_floating_point
    return values.dim() <= indexed_rank and (not accumulate or summable)


@register("aten::index_put", "aten::_unsafe_index_put", supports=_leading_index_put)
def aten_index_put(self: ir.Value, indices: Sequence[ir.Value], values: ir.Value, accumulate: bool = False) -> ir.Value:
    """index_put(Tensor self, Tensor?[] indices, Tensor values, bool accumulate=False) -> Tensor

    The k index tensors, broadcast together, name the rows of self's first k dims that take
    ``values`` (broadcast to the indexed shape): a ``ScatterND`` whose coordinates are the index
    tensors stacked on a last axis. Negative indices count from the end in ATen and in ONNX
    Runtime's ScatterND alike; duplicates are undefined in both when overwriting."""
    stacked, shape = tx.index_coordinates(list(indices))
    rows = op.Shape(self, start=len(indices))
    updates = op.Expand(values, op.Concat(shape, rows, axis=0))
    return tx.scatter_nd(self, stacked, updates, "add" if accumulate else "none")


_SCATTER_REDUCTIONS = {"add": "add", "multiply": "mul"}


def _index_shaped(self: ir.Value, index: ir.Value, src: ir.Value) -> tuple[ir.Value, ir.Value]:
    """``index`` as int64 and ``src`` cut to its shape: ATen reads only the index-shaped corner
    of a larger src; ONNX wants them the same shape."""
    rank = max(tx.rank(self), 1)
    index = _as_rank_one(op.Cast(index, to=tx.INT64))
    src = _as_rank_one(src)
    if _same_static_shape(src, index):
        # The usual case (src made to index's shape): the cut would be a whole-tensor Slice that
        # ONNX Runtime still copies through.
        return index, src
    return index, op.Slice(src, op.Constant(value_ints=[0] * rank), op.Shape(index), op.Constant(value_ints=list(range(rank))))


def _same_static_shape(a: ir.Value, b: ir.Value) -> bool:
    return a.shape is not None and a.shape.is_static() and b.shape is not None and a.shape == b.shape


def _scatter_with_reduction(self: ir.Value, dim: int, index: ir.Value, src: ir.Value, reduce: str) -> ir.Value:
    if reduce not in _SCATTER_REDUCTIONS:
        raise ValueError(f"scatter: unknown reduce {reduce!r}; expected 'add' or 'multiply'")
    return _scattered(self, dim, index, src, _SCATTER_REDUCTIONS[reduce])


def _reduces_by(*names: str) -> Callable[[Any], bool]:
    """A ``supports`` predicate: whether a ``scatter_reduce.two`` node's ``reduce`` is one of ``names``."""

    def supported(node: Any) -> bool:
        args = list(node.args) + [None] * 5
        return args[4] in names

    return supported


@register("aten::scatter_reduce.two", supports=_reduces_by("amax", "amin"))
def aten_scatter_reduce_extreme(
    self: ir.Value, dim: int, index: ir.Value, src: ir.Value, reduce: str, *, include_self: bool = True
) -> ir.Value:
    """scatter_reduce.two(..., str reduce="amax"|"amin", *, bool include_self=True) -> Tensor

    Without self, the touched slots first take one of their sources (a plain scatter), as
    index_reduce does. torchlib instead min-scattered float32's lowest value there, which relied
    on ONNX Runtime skipping a NaN of self (so the NaN propagation pass made such a slot NaN) and
    clamped float64 sources below -3.4e38."""
    index, src = _index_shaped(self, index, src)
    base = self if include_self else tx.scatter_elements(self, index, src, dim)
    return tx.scatter_elements(base, index, src, dim, "max" if reduce == "amax" else "min")


def _scattered(self: ir.Value, dim: int, index: ir.Value, src: ir.Value, reduction: str = "none", *, include_self: bool = True) -> ir.Value:
    """``src`` scattered into ``self`` along ``dim`` with ``reduction`` (``none``, ``add``,
    ``mul``): a 0-d ``self`` as a vector of one, ``src`` cut to ``index``'s shape. Without
    ``self``, the touched slots start from the reduction's identity, as in ATen."""
    scalar = tx.rank(self) == 0
    data = _as_rank_one(self)
    index, src = _index_shaped(self, index, src)
    if not include_self:
        identity = op.Expand(op.CastLike(0 if reduction == "add" else 1, data), op.Shape(index))
        data = op.ScatterElements(data, index, identity, axis=dim)
    result = tx.scatter_elements(data, index, src, dim, reduction)
    return op.Reshape(result, op.Constant(value_ints=[])) if scalar else result


@register("aten::scatter.src")
def aten_scatter_src(self: ir.Value, dim: int, index: ir.Value, src: ir.Value) -> ir.Value:
    """scatter.src(Tensor self, int dim, Tensor index, Tensor src) -> Tensor

    ATen reads only the index-shaped corner of a larger ``src``; torchlib passed all of it and
    ONNX Runtime refused the shapes."""
    return _scattered(self, dim, index, src)


@register("aten::scatter_add")
def aten_scatter_add(self: ir.Value, dim: int, index: ir.Value, src: ir.Value) -> ir.Value:
    """scatter_add(Tensor self, int dim, Tensor index, Tensor src) -> Tensor"""
    return _scattered(self, dim, index, src, "add")


@register("aten::scatter_reduce.two", supports=_reduces_by("sum", "prod"))
def aten_scatter_reduce_two(
    self: ir.Value, dim: int, index: ir.Value, src: ir.Value, reduce: str, *, include_self: bool = True
) -> ir.Value:
    """scatter_reduce.two(..., str reduce="sum"|"prod", *, bool include_self=True) -> Tensor"""
    return _scattered(self, dim, index, src, "add" if reduce == "sum" else "mul", include_self=include_self)


@register("aten::scatter_reduce.two", supports=_reduces_by("mean"))
def aten_scatter_reduce_mean(
    self: ir.Value, dim: int, index: ir.Value, src: ir.Value, reduce: str, *, include_self: bool = True
) -> ir.Value:
    """scatter_reduce.two(..., str reduce="mean", *, bool include_self=True) -> Tensor

    ONNX has no mean reduction (torchlib falls back to a plain scatter): sum the sources and count
    them with two additive scatters, then divide; untouched positions keep ``self``.
    """
    # Zeros and ones of the operands' shapes, not self * 0 and src * 0 + 1: those are NaN at
    # every inf or NaN, which spread to untouched slots and to the counts.
    scalar = tx.rank(self) == 0
    index, src = _index_shaped(self, index, src)
    self = _as_rank_one(self)
    zeros = op.Expand(op.CastLike(0, self), op.Shape(self))
    totals = op.ScatterElements(zeros, index, src, axis=dim, reduction="add")
    counts = op.ScatterElements(zeros, index, op.Expand(op.CastLike(1, self), op.Shape(index)), axis=dim, reduction="add")
    if include_self:
        totals = op.Add(totals, self)
        counts = op.Add(counts, op.CastLike(1, self))
    touched = op.Greater(counts, op.CastLike(0, counts))
    safe_counts = op.Where(touched, counts, op.CastLike(1, counts))
    mean = op.Div(totals, safe_counts)
    if self.dtype is not None and not self.dtype.is_floating_point():
        # Integer means round toward negative infinity in ATen (floor division).
        mean = op.CastLike(op.Floor(op.Div(op.Cast(totals, to=ir.DataType.DOUBLE), op.Cast(safe_counts, to=ir.DataType.DOUBLE))), self)
    result = op.Where(touched, mean, self)
    return op.Reshape(result, op.Constant(value_ints=[])) if scalar else result


@register("aten::scatter.reduce")
def aten_scatter_reduce(self: ir.Value, dim: int, index: ir.Value, src: ir.Value, *, reduce: str) -> ir.Value:
    """scatter.reduce(Tensor self, int dim, Tensor index, Tensor src, *, str reduce) -> Tensor"""
    return _scatter_with_reduction(self, dim, index, src, reduce)


@register("aten::scatter.value_reduce")
def aten_scatter_value_reduce(self: ir.Value, dim: int, index: ir.Value, value: Any, *, reduce: str) -> ir.Value:
    """scatter.value_reduce(Tensor self, int dim, Tensor index, Scalar value, *, str reduce) -> Tensor"""
    src = tx.filled_like(self, value, op.Shape(index))
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
    rank = tx.rank(data)
    axis %= rank
    trailing = rank - axis - 1
    # Segment s covers [starts[..., s], ends[..., s]) along axis; lengths and offsets carry the
    # leading dims of data before their segment dim.
    if lengths is not None:
        lengths = op.Cast(lengths, to=tx.INT64)
        ends = op.CumSum(lengths, tx.int64(-1))
        starts = op.Sub(ends, lengths)
    elif offsets is not None:
        offsets = op.Cast(offsets, to=tx.INT64)
        starts = op.Slice(offsets, tx.ints(0), tx.ints(-1), tx.ints(-1))
        ends = op.Slice(offsets, tx.ints(1), tx.ints(np.iinfo(np.int64).max), tx.ints(-1))
        lengths = op.Sub(ends, starts)
    else:
        raise ValueError("segment_reduce needs lengths or offsets")
    positions = op.Range(tx.int64(0), op.Squeeze(op.Shape(data, start=axis, end=axis + 1)), tx.int64(1))
    last = tx.ints(-1)
    # [..., S, N]: which positions each segment covers, then room for data's trailing dims.
    covers = op.And(
        op.LessOrEqual(op.Unsqueeze(starts, last), positions), op.Less(positions, op.Unsqueeze(ends, last))
    )
    if trailing:
        covers = op.Unsqueeze(covers, op.Constant(value_ints=list(range(-trailing, 0))))
        lengths = op.Unsqueeze(lengths, op.Constant(value_ints=list(range(-trailing, 0))))
    rows = op.Unsqueeze(data, tx.ints(axis))  # [..., 1, N, ...] against covers' [..., S, N, ...]
    over = tx.ints(axis + 1)
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
        return mean if start is None else op.Where(op.Equal(lengths, tx.int64(0)), start, mean)
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


# -- nonzero_static ------------------------------------------------------------------------------


@register("aten::nonzero_static")
def aten_nonzero_static(self: ir.Value, *, size: Any, fill_value: int = -1) -> ir.Value:
    """nonzero_static(Tensor self, *, SymInt size, int fill_value=-1) -> Tensor"""
    rank = tx.rank(self)
    size = op.Reshape(op.Cast(size, to=tx.INT64), tx.ints(1)) if isinstance(size, ir.Value) else tx.ints(int(size))
    filler = op.Expand(tx.int64(fill_value), op.Concat(size, tx.ints(rank), axis=0))
    if rank == 0:
        return filler
    # The found indices, padded with fill_value rows, cut to size rows.
    found = op.Transpose(op.NonZero(self), perm=[1, 0])
    return op.Slice(op.Concat(found, filler, axis=0), tx.ints(0), size, tx.ints(0))


# -- hash_tensor ---------------------------------------------------------------------------------


def _reduced_dims(rank: int, dim: Sequence[int] | None) -> list[int]:
    return sorted({d % rank for d in dim}) if dim else list(range(rank))


def _integral_with_static_reduction(node: Any) -> bool:
    """Integers and booleans only: ATen hashes floats by their float64 bit pattern, which ONNX
    can only read with BitCast (opset 26). The XOR tree needs the reduced sizes up front."""
    example = arg_example(node)
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
    rank = tx.rank(self)
    dims = _reduced_dims(rank, dim)
    kept = [d for d in range(rank) if d not in dims]
    words = op.Cast(op.Cast(self, to=tx.INT64), to=ir.DataType.UINT64)
    if kept + dims != list(range(rank)):
        words = op.Transpose(words, perm=kept + dims)
    length = int(np.prod([int(self.shape[d]) for d in dims]))
    # A 0 in Reshape's shape copies that dim: the kept dims stay as they are, dynamic or not.
    words = op.Reshape(words, op.Constant(value_ints=[0] * len(kept) + [length]))
    last = tx.ints(-1)
    while length > 1:
        if length % 2:
            first = op.Slice(words, tx.ints(0), tx.ints(1), last)
            words = op.Concat(words, op.BitwiseXor(first, first), axis=-1)  # XOR's identity, 0
            length += 1
        half = length // 2
        words = op.BitwiseXor(op.Slice(words, tx.ints(0), tx.ints(half), last), op.Slice(words, tx.ints(half), tx.ints(length), last))
        length = half
    hashed = op.Squeeze(words, last)
    return op.Unsqueeze(hashed, op.Constant(value_ints=dims)) if keepdim else hashed
