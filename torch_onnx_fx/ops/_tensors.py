"""Small building blocks shared by the indexing, histogram, grid sampling and loss translations.

Constants, a rank that must be known, a filled tensor, and scatters that reduce in a type ONNX
Runtime supports. They are one ``Constant`` or a few nodes each; keeping them here lets the
translation modules stay one operator family each without copying them.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx_ir as ir
import torch
from onnx_ir.tensor_adapters import TorchTensor
from onnxscript import opset18 as op

__all__ = [
    "INT64", "END", "ints", "int64", "rank", "filled_like", "scatter_elements", "scatter_nd", "slice_axis",
    "index_coordinates", "mean_by_count", "scalar_of", "double", "rolled",
]

INT64 = ir.DataType.INT64
# A Slice end past any size: "to the end" (ATen's open end is the same number).
END = 2**63 - 1


def ints(*values: int) -> ir.Value:
    """A 1-D int64 constant: axes, shapes, slice bounds."""
    return op.Constant(value_ints=list(values))


def int64(value: int) -> ir.Value:
    """A 0-d int64 constant."""
    return op.Constant(value=ir.tensor(np.int64(value)))


def double(value: object) -> ir.Value:
    """A 0-d double: a number as a constant, a value (a symbolic size or float) cast unless it
    is one already."""
    if isinstance(value, ir.Value):
        return value if value.dtype == ir.DataType.DOUBLE else op.Cast(value, to=ir.DataType.DOUBLE)
    return op.Constant(value=ir.tensor(float(value), dtype=ir.DataType.DOUBLE))


def constant(value: float, like: ir.Value) -> ir.Value:
    """A float constant in ``like``'s dtype, held in float64 and rounded once to it: a float32
    constant would round pi or log(2) for a float64 computation (8.7e-8 off for pi)."""
    return op.CastLike(op.Constant(value=ir.tensor(np.array(value, dtype=np.float64))), like)


def scalar_of(value: object, dtype: torch.dtype) -> ir.Value:
    """A 0-d constant of ``value`` converted to ``dtype`` as ATen converts a fill value: by torch
    itself, so that -9 into uint8 wraps to 247 and 0.1 into bfloat16 rounds as it does."""
    return op.Constant(value=TorchTensor(torch.full((), value, dtype=dtype)))


def rank(value: ir.Value) -> int:
    """``value``'s rank, for translations that cannot do without it."""
    if value.shape is None:
        raise ValueError(f"{value.name} needs a known rank")
    return value.shape.rank()


def mean_by_count(x: ir.Value, axes: list[int], keepdims: bool) -> ir.Value:
    """The sum over ``axes`` divided by their element count (read at run time), as ATen divides:
    NaN for an empty reduction, where ONNX Runtime's ReduceMean returns 0 or the empty input."""
    total = op.ReduceSum(x, ints(*axes), keepdims=int(keepdims))
    count = op.ReduceProd(op.Gather(op.Shape(x), ints(*axes)), keepdims=0)
    return op.Div(total, op.CastLike(count, total))


def filled_like(value: ir.Value, fill: float, shape: ir.Value | None = None) -> ir.Value:
    """A tensor of ``fill`` in ``value``'s dtype, shaped like ``value`` or as ``shape`` says."""
    return op.Expand(op.CastLike(fill, value), op.Shape(value) if shape is None else shape)


# ONNX Runtime reduces in scatters only for these; others go through a wider type and back.
_SCATTER_REDUCTION_TYPES = frozenset({ir.DataType.FLOAT, ir.DataType.DOUBLE, ir.DataType.INT32, ir.DataType.INT64})


def _widened(value: ir.Value) -> ir.DataType | None:
    """The type to reduce ``value`` in, or None if ONNX Runtime reduces its own type.

    Casting back to a narrower integer wraps as ATen's arithmetic does, and a nonzero count or
    product is True for booleans (add is or, multiply is and).
    """
    if value.dtype in _SCATTER_REDUCTION_TYPES:
        return None
    return ir.DataType.FLOAT if value.dtype.is_floating_point() else INT64


def scatter_elements(data: ir.Value, indices: ir.Value, updates: ir.Value, axis: int, reduction: str = "none") -> ir.Value:
    """``ScatterElements``, reducing through a wider type where ONNX Runtime needs one."""
    wide = _widened(data) if reduction != "none" else None
    if wide is None:
        return op.ScatterElements(data, indices, updates, axis=axis, reduction=reduction)
    scattered = op.ScatterElements(op.Cast(data, to=wide), indices, op.Cast(updates, to=wide), axis=axis, reduction=reduction)
    return op.CastLike(scattered, data)


def scatter_nd(data: ir.Value, indices: ir.Value, updates: ir.Value, reduction: str = "none") -> ir.Value:
    """``ScatterND``, reducing through a wider type where ONNX Runtime needs one."""
    wide = _widened(data) if reduction != "none" else None
    if wide is None:
        return op.ScatterND(data, indices, updates, reduction=reduction)
    return op.CastLike(op.ScatterND(op.Cast(data, to=wide), indices, op.Cast(updates, to=wide), reduction=reduction), data)


def slice_axis(value: ir.Value, axis: int, start: int, end: int | None = None) -> ir.Value:
    """``value[start:end]`` along ``axis`` (``end=None``: to the end); Slice clamps the bounds as
    Python does."""
    return op.Slice(value, ints(start), ints(END if end is None else end), ints(axis))


def index_coordinates(indices: list[ir.Value]) -> tuple[ir.Value, ir.Value]:
    """Index tensors broadcast together, cast to int64 and stacked on a new last axis: the
    coordinates ``GatherND`` and ``ScatterND`` take for the dims they index; and the broadcast
    shape."""
    broadcast = indices[0]
    for index in indices[1:]:
        broadcast = op.Expand(broadcast, op.Shape(index))
    shape, last = op.Shape(broadcast), ints(-1)
    coordinates = [op.Unsqueeze(op.Cast(op.Expand(index, shape), to=INT64), last) for index in indices]
    return (coordinates[0] if len(coordinates) == 1 else op.Concat(*coordinates, axis=-1)), shape


def rolled(value: ir.Value, shift: Any, axis: int) -> ir.Value:
    """``value`` rolled by ``shift`` along ``axis``: the last ``shift`` entries (mod the size) first.
    A statically empty axis is the caller's to leave alone (there is nothing to move)."""
    size = value.shape[axis] if value.shape is not None else None
    if isinstance(size, int) and isinstance(shift, int):
        if shift % size == 0:
            return op.Identity(value)
        start = ints((-shift) % size)
    else:
        length = op.Shape(value, start=axis, end=axis + 1)
        # An empty axis rolls to itself: any split of it is empty, and Mod must not divide by 0.
        divisor = op.Max(length, ints(1))
        amount = op.Cast(op.Reshape(shift, ints(1)), to=ir.DataType.INT64) if isinstance(shift, ir.Value) else ints(shift)
        start = op.Mod(op.Sub(divisor, op.Mod(amount, divisor)), divisor)
    tail = op.Slice(value, start, ints(2**63 - 1), ints(axis))
    head = op.Slice(value, ints(0), start, ints(axis))
    return op.Concat(tail, head, axis=axis)
