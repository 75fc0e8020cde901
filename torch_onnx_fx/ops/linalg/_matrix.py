"""Shared pieces of the linear algebra translations: shapes, masks, reductions, the ``Loop`` builder.

Everything works on stacks of matrices ``(..., m, n)`` whose sizes may be symbolic. ONNX shape
inference cannot follow an ``Expand`` to a computed shape, so the builders record the shapes they
know (:func:`shaped`): later steps read ranks from them.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import onnx_ir as ir
import torch
from onnxscript import opset18 as op

from torch_onnx_fx.translate.op_context import OpContext
from torch_onnx_fx.errors import TranslationError

__all__ = [
    "DOUBLE", "INT64", "INT32", "real_inputs", "rank", "size", "dims", "shaped", "fill", "smaller", "batch_shape",
    "shape_vector", "reduce", "mT", "double", "like", "at", "eye", "diagonal", "tril", "take", "symmetric",
    "broadcast_to_batch", "one_hot_rows", "swap", "empty", "any_true", "loop", "power_of_two_near", "matrix_scale",
]

DOUBLE = ir.DataType.DOUBLE
INT64 = ir.DataType.INT64
INT32 = ir.DataType.INT32


def real_inputs(node: torch.fx.Node) -> bool:
    """Complex inputs are left to torch (which fails with a clear missing-translation error)."""
    return not any(
        isinstance(arg, torch.fx.Node) and isinstance(arg.meta.get("val"), torch.Tensor) and arg.meta["val"].is_complex()
        for arg in node.args
    )


# -- shapes and masks ------------------------------------------------------------------------------


def rank(x: ir.Value) -> int:
    if x.shape is None:
        raise TranslationError(
            f"Linear algebra translations need tensors of known rank; {x.name} has none. Sizes may be "
            "dynamic, but the number of dims must be fixed."
        )
    return x.shape.rank()


def size(x: ir.Value, axis: int) -> ir.Value:
    """Dim ``axis`` of ``x`` as an INT64 scalar."""
    axis %= rank(x)
    return op.Squeeze(op.Shape(x, start=axis, end=axis + 1))


def dims(x: ir.Value) -> list[Any]:
    rank(x)
    return list(x.shape)  # type: ignore[union-attr]


def shaped(x: ir.Value, dims: Sequence[Any]) -> ir.Value:
    """Record the shape of a value whose shape inference cannot tell (``Expand`` to a computed shape)."""
    x.shape = ir.Shape([d if isinstance(d, (int, ir.SymbolicDim)) else None for d in dims])
    return x


def fill(value: Any, shape: ir.Value, known: Sequence[Any], dtype: ir.DataType = INT64) -> ir.Value:
    """A tensor of ``value`` of the computed ``shape``, whose dims are ``known`` as far as they are."""
    return shaped(op.Expand(op.Constant(value=ir.tensor(value, dtype=dtype)), shape), known)


def smaller(a: Any, b: Any) -> Any:
    return min(a, b) if isinstance(a, int) and isinstance(b, int) else None


def _broadcast_dims(a: Sequence[Any], b: Sequence[Any]) -> list[Any]:
    width = max(len(a), len(b))
    a, b = [1] * (width - len(a)) + list(a), [1] * (width - len(b)) + list(b)
    return [y if x == 1 else x if y == 1 or x == y else None for x, y in zip(a, b)]


def batch_shape(x: ir.Value) -> ir.Value:
    """The batch dims of a stack of matrices, as a 1-D shape (empty for a single matrix)."""
    return op.Shape(x, start=0, end=rank(x) - 2)


def shape_vector(*items: ir.Value | int) -> ir.Value:
    """A 1-D INT64 shape from scalars and 1-D shapes."""
    parts = [[item] if isinstance(item, int) else op.Reshape(item, [-1]) for item in items]
    return op.Concat(*parts, axis=0)


_IDENTITY = {"ReduceSum": 0.0, "ReduceProd": 1.0, "ReduceMax": 0.0}


def reduce(reduction: str, x: ir.Value, axis: int = -1, keepdims: bool = False) -> ir.Value:
    """A reduction over one axis that may be empty.

    ONNX Runtime returns its input unchanged when the reduced axis has length zero, so the axis
    gets one more element, the reduction's identity (``ReduceMax`` is only used on values >= 0).
    """
    width = rank(x)
    axis %= width
    pads = [0] * (2 * width)
    pads[width + axis] = 1
    padded = op.Pad(x, pads, op.CastLike(_IDENTITY[reduction], x))
    reduced = getattr(op, reduction)(padded, [axis], keepdims=int(keepdims))
    kept = dims(x)
    return shaped(reduced, [*kept[:axis], *([1] if keepdims else []), *kept[axis + 1 :]])


def power_of_two_near(magnitude: ir.Value) -> ir.Value:
    """A power of two within a factor 2 of ``magnitude`` (float64, >= 0), 1 where it is 0, inf or NaN.

    Dividing by it and multiplying back is exact, so a computation on the scaled values rounds as
    on the originals, but squares of entries past 1e154 no longer overflow and those below 1e-162
    no longer vanish (LAPACK scales its norms for the same reason). ``Pow(2, k)`` is exact for
    every integer k of float64's range, subnormals included."""
    usable = op.And(op.Greater(magnitude, 0.0), op.Not(op.IsInf(magnitude)))
    safe = op.Where(usable, magnitude, 1.0)
    exponent = op.Floor(op.Div(op.Log(safe), op.Log(op.CastLike(2.0, safe))))
    return op.Pow(op.CastLike(2.0, safe), exponent)


def matrix_scale(a: ir.Value) -> ir.Value:
    """:func:`power_of_two_near` the largest magnitude of each matrix of ``a`` (kept dims ``(..., 1, 1)``)."""
    return power_of_two_near(reduce("ReduceMax", reduce("ReduceMax", op.Abs(a), -1, keepdims=True), -2, keepdims=True))


def mT(x: ir.Value) -> ir.Value:
    width = rank(x)
    return op.Transpose(x, perm=[*range(width - 2), width - 1, width - 2])


def double(x: ir.Value) -> ir.Value:
    return x if x.dtype == DOUBLE else op.Cast(x, to=DOUBLE)


def like(x: ir.Value, reference: ir.Value) -> ir.Value:
    return x if x.dtype == reference.dtype else op.Cast(x, to=reference.dtype)


def at(i: ir.Value) -> ir.Value:
    """A scalar index as a 1-element vector, so ``Gather`` keeps the axis."""
    return op.Reshape(i, [1])


def eye(rows: ir.Value, cols: ir.Value) -> ir.Value:
    return op.Cast(op.Equal(op.Unsqueeze(op.Range(0, rows, 1), [-1]), op.Range(0, cols, 1)), to=DOUBLE)


def diagonal(x: ir.Value) -> ir.Value:
    """The main diagonal of ``(..., m, n)`` as ``(..., min(m, n))``."""
    m, n = size(x, -2), size(x, -1)
    on_diagonal = op.Cast(eye(m, n), to=ir.DataType.BOOL)
    diagonal = reduce("ReduceSum", op.Where(on_diagonal, x, 0.0))
    rows, cols = dims(x)[-2:]
    return take(diagonal, op.Min(m, n), -1, cols if rows == cols else smaller(rows, cols))


def tril(x: ir.Value, upper: bool = False, k: int = 0) -> ir.Value:
    return op.Trilu(x, op.Constant(value_int=k), upper=int(upper))


def take(x: ir.Value, count: ir.Value, axis: int, static_count: Any = None) -> ir.Value:
    """The first ``count`` entries along ``axis`` (nothing to do when statically all of them).

    A ``Gather`` rather than a ``Slice``: the optimizer rewrites static slices into ``Split``s,
    which ONNX Runtime rejects on an axis of length zero.
    """
    if static_count is not None and static_count == dims(x)[axis]:
        return x
    return op.Gather(x, op.Range(0, count, 1), axis=axis)


def symmetric(a: ir.Value, upper: bool) -> ir.Value:
    """The symmetric matrix stored in one triangle of ``a`` (the other is not read, as in LAPACK)."""
    part = tril(a, upper)
    strict = tril(a, upper, 1 if upper else -1)
    return op.Add(part, mT(strict))


def broadcast_to_batch(x: ir.Value, other: ir.Value) -> ir.Value:
    """``x`` expanded to the batch dims it shares with ``other`` (its matrix dims kept)."""
    expanded = op.Expand(x, shape_vector(batch_shape(other), 1, 1))
    return shaped(expanded, [*_broadcast_dims(dims(x)[:-2], dims(other)[:-2]), *dims(x)[-2:]])


def one_hot_rows(perm: ir.Value) -> ir.Value:
    """``M`` with ``M[..., i, c] = (perm[..., i] == c)``: ``M @ b`` gathers the rows of ``b``."""
    return op.Cast(op.Equal(op.Unsqueeze(perm, [-1]), op.Range(0, size(perm, -1), 1)), to=DOUBLE)


def gather_rows(x: ir.Value, perm: ir.Value) -> ir.Value:
    """``x``'s rows in the order ``perm`` (``out[..., i, :] = x[..., perm[..., i], :]``); ``perm``'s
    batch dims are ``x``'s or broadcast to them. What ``one_hot_rows(perm) @ x`` computes, without
    its products, where 0 * inf would make every row of that column NaN."""
    return op.GatherElements(x, op.Expand(op.Unsqueeze(perm, [-1]), op.Shape(x)), axis=-2)


def inverse_permutation(perm: ir.Value) -> ir.Value:
    """``q`` with ``q[perm[i]] = i``: where each row went."""
    return op.ArgMax(one_hot_rows(perm), axis=-2, keepdims=0)


def swap(rows: ir.Value, i: ir.Value, j: ir.Value) -> ir.Value:
    """The index map over ``rows`` exchanging positions ``i`` and ``j``; either may be per batch,
    shaped ``(..., 1)``."""
    return op.Where(op.Equal(rows, i), j, op.Where(op.Equal(rows, j), i, rows))


def empty(reference: ir.Value) -> ir.Value:
    return op.Cast(op.ConstantOfShape([0]), to=reference.dtype)


def any_true(condition: ir.Value) -> ir.Value:
    """Whether ``condition`` holds anywhere (false for an empty batch)."""
    flat = op.Reshape(op.Cast(condition, to=DOUBLE), [-1])
    return op.Cast(reduce("ReduceMax", shaped(flat, [None])), to=ir.DataType.BOOL)


# -- loops ---------------------------------------------------------------------------------------------


def loop(
    ctx: OpContext,
    count: ir.Value | int,
    states: Sequence[ir.Value],
    body: Callable[..., Sequence[ir.Value]],
    *,
    until: Callable[..., ir.Value] | None = None,
) -> list[ir.Value]:
    """:meth:`OpContext.loop` over a stack of matrices: an empty first state (an empty batch)
    runs no iteration — there is nothing to compute, and ONNX Runtime mishandles some empty
    tensors (``ArgMax``, ``MatMul``)."""
    if isinstance(count, int):
        count = op.Constant(value=ir.tensor(count, dtype=INT64))
    count = op.Mul(count, op.Min(op.Size(states[0]), 1))
    return ctx.loop(count, states, body, until=until)
