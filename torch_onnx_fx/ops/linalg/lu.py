"""LU with partial pivoting and what rests on it; triangular solves; Cholesky.

LU follows LAPACK's ``getrf`` step for step (pivot on the largest magnitude below the diagonal,
first on ties), so ``pivots`` and the packed factors match eager. Solves, the inverse and the
log-determinant go through it; triangular systems are solved by substitution, one row per
iteration.
"""

from __future__ import annotations

import math
from typing import Any

import onnx_ir as ir
from onnxscript import opset18 as op

from torch_onnx_fx.ops.linalg import _matrix as mx
from torch_onnx_fx.registry import register, wants_context
from torch_onnx_fx.tracer import GraphTracer

__all__ = [
    "aten_linalg_lu_factor_ex",
    "aten_linalg_lu",
    "aten_lu_unpack",
    "aten_linalg_lu_solve",
    "aten_linalg_inv_ex",
    "aten_linalg_solve_ex",
    "aten_linalg_slogdet",
    "aten_linalg_solve_triangular",
    "aten_triangular_solve",
    "aten_linalg_cholesky_ex",
    "aten_cholesky",
    "aten_cholesky_inverse",
    "aten_cholesky_solve",
]


def _lu_factor(tracer: GraphTracer, a: ir.Value, pivot: bool = True) -> tuple[ir.Value, ir.Value, ir.Value, ir.Value]:
    """LU with partial pivoting of ``(..., m, n)``, LAPACK's ``getrf``.

    Returns the packed factors, the 0-based pivots ``(..., min(m, n))``, the row permutation
    ``perm`` (row ``i`` of ``L @ U`` is row ``perm[i]`` of ``a``) and ``info`` (first zero pivot,
    1-based, or 0).
    """
    m, n = mx.size(a, -2), mx.size(a, -1)
    steps = op.Min(m, n)
    rows, cols, taken = op.Range(0, m, 1), op.Range(0, n, 1), op.Range(0, steps, 1)
    batch, dims = mx.batch_shape(a), mx.dims(a)
    perm = mx.shaped(op.Expand(rows, mx.shape_vector(batch, m)), dims[:-1])
    pivots = mx.shaped(op.Expand(taken, mx.shape_vector(batch, steps)), [*dims[:-2], mx.smaller(*dims[-2:])])
    info = mx.fill(0, batch, dims[:-2])

    def step(j: ir.Value, a: ir.Value, perm: ir.Value, pivots: ir.Value, info: ir.Value) -> list[ir.Value]:
        at_j = mx.at(j)
        if pivot:
            candidates = op.Where(op.GreaterOrEqual(rows, j), op.Abs(op.Gather(a, j, axis=-1)), -1.0)
            chosen = op.ArgMax(candidates, axis=-1, keepdims=1)
            swap = mx.swap(rows, j, chosen)
            a = op.GatherElements(a, op.Expand(op.Unsqueeze(swap, [-1]), op.Shape(a)), axis=-2)
            perm = op.GatherElements(perm, swap, axis=-1)
            pivots = op.Where(op.Equal(taken, j), chosen, pivots)
        row = op.Gather(a, at_j, axis=-2)
        head = op.Gather(row, at_j, axis=-1)
        zero = op.Equal(head, 0.0)
        below = op.Unsqueeze(op.Greater(rows, j), [-1])
        factors = op.Where(below, op.Div(op.Gather(a, at_j, axis=-1), op.Where(zero, 1.0, head)), 0.0)
        a = op.Sub(a, op.Where(op.Greater(cols, j), op.Mul(factors, row), 0.0))
        a = op.Where(op.And(below, op.Equal(cols, j)), factors, a)
        first_zero = op.And(op.Equal(info, 0), op.Squeeze(zero, [-2, -1]))
        info = op.Where(first_zero, op.Add(j, 1), info)
        return [a, perm, pivots, info]

    lu, perm, pivots, info = mx.loop(tracer, steps, [a, perm, pivots, info], step)
    return lu, pivots, perm, info


def _permutation(tracer: GraphTracer, pivots: ir.Value, size: ir.Value) -> ir.Value:
    """The row permutation that LAPACK's 0-based swap list ``pivots`` applies, as ``perm`` above."""
    rows = op.Range(0, size, 1)
    batch = mx.dims(pivots)[:-1]
    perm = mx.shaped(op.Expand(rows, mx.shape_vector(op.Shape(pivots, start=0, end=len(batch)), size)), [*batch, None])

    def step(j: ir.Value, perm: ir.Value) -> list[ir.Value]:
        swap = mx.swap(rows, j, op.Gather(pivots, mx.at(j), axis=-1))
        return [op.GatherElements(perm, swap, axis=-1)]

    return mx.loop(tracer, mx.size(pivots, -1), [perm], step)[0]


def _substitute(tracer: GraphTracer, t: ir.Value, b: ir.Value, *, upper: bool, unit: bool = False) -> ir.Value:
    """``X`` with ``T @ X = B`` for triangular ``T`` (only its triangle is read), batches broadcast."""
    x = mx.broadcast_to_batch(b, t)
    size = mx.size(t, -1)
    rows = op.Range(0, size, 1)

    def step(i: ir.Value, x: ir.Value) -> list[ir.Value]:
        j = op.Sub(op.Sub(size, 1), i) if upper else i
        at_j = mx.at(j)
        row = op.Gather(x, at_j, axis=-2)
        if not unit:
            row = op.Div(row, op.Gather(op.Gather(t, at_j, axis=-2), at_j, axis=-1))
        pending = op.Unsqueeze(op.Less(rows, j) if upper else op.Greater(rows, j), [-1])
        x = op.Sub(x, op.Mul(op.Where(pending, op.Gather(t, at_j, axis=-1), 0.0), row))
        return [op.Where(op.Unsqueeze(op.Equal(rows, j), [-1]), row, x)]

    return mx.loop(tracer, size, [x], step)[0]


def _lu_solve(tracer: GraphTracer, lu: ir.Value, perm: ir.Value, b: ir.Value, adjoint: bool = False) -> ir.Value:
    """``X`` with ``A @ X = B`` (or ``A^T @ X = B``) from ``A``'s LU factors and permutation."""
    rows = mx.one_hot_rows(perm)
    if not adjoint:
        y = _substitute(tracer, lu, op.MatMul(rows, b), upper=False, unit=True)
        return _substitute(tracer, lu, y, upper=True)
    # A^T = U^T L^T P^T: U^T is lower, L^T upper with a unit diagonal.
    lu_t = mx.mT(lu)
    y = _substitute(tracer, lu_t, b, upper=False)
    return op.MatMul(mx.mT(rows), _substitute(tracer, lu_t, y, upper=True, unit=True))


def _pivots_out(pivots: ir.Value) -> ir.Value:
    return op.Cast(op.Add(pivots, 1), to=mx.INT32)


def _pivots_in(pivots: ir.Value) -> ir.Value:
    return op.Sub(op.Cast(pivots, to=mx.INT64), 1)


@register("aten::linalg_lu_factor_ex", supports=mx.real_inputs)
@wants_context
def aten_linalg_lu_factor_ex(A: ir.Value, *, pivot: bool = True, check_errors: bool = False, ctx: Any, node: Any) -> tuple[ir.Value, ir.Value, ir.Value]:
    """linalg_lu_factor_ex(Tensor A, *, bool pivot=True, bool check_errors=False) -> (Tensor LU, Tensor pivots, Tensor info)"""
    lu, pivots, _, info = _lu_factor(ctx.tracer, mx.double(A), pivot)
    return mx.like(lu, A), _pivots_out(pivots), op.Cast(info, to=mx.INT32)


def _unpack(lu: ir.Value, reference: ir.Value) -> tuple[ir.Value, ir.Value]:
    """``L (m, k)`` with a unit diagonal and ``U (k, n)`` from packed factors."""
    m, n = mx.size(lu, -2), mx.size(lu, -1)
    k = op.Min(m, n)
    static_k = mx.smaller(*mx.dims(lu)[-2:])
    lower = op.Add(mx.take(mx.tril(lu, k=-1), k, -1, static_k), mx.eye(m, k))
    upper = mx.take(mx.tril(lu, upper=True), k, -2, static_k)
    return mx.like(lower, reference), mx.like(upper, reference)


def _permutation_matrix(perm: ir.Value, reference: ir.Value) -> ir.Value:
    """``P`` with ``A = P @ L @ U``: the transpose of the one-hot rows of ``perm``."""
    return mx.like(mx.mT(mx.one_hot_rows(perm)), reference)


@register("aten::linalg_lu", supports=mx.real_inputs)
@wants_context
def aten_linalg_lu(A: ir.Value, *, pivot: bool = True, ctx: Any, node: Any) -> tuple[ir.Value, ir.Value, ir.Value]:
    """linalg_lu(Tensor A, *, bool pivot=True) -> (Tensor P, Tensor L, Tensor U)"""
    lu, _, perm, _ = _lu_factor(ctx.tracer, mx.double(A), pivot)
    lower, upper = _unpack(lu, A)
    return _permutation_matrix(perm, A), lower, upper


@register("aten::lu_unpack", supports=mx.real_inputs)
@wants_context
def aten_lu_unpack(
    LU_data: ir.Value, LU_pivots: ir.Value, unpack_data: bool = True, unpack_pivots: bool = True, *, ctx: Any, node: Any
) -> tuple[ir.Value, ir.Value, ir.Value]:
    """lu_unpack(Tensor LU_data, Tensor LU_pivots, bool unpack_data=True, bool unpack_pivots=True) -> (Tensor P, Tensor L, Tensor U)"""
    # What is not unpacked comes back empty, as in eager.
    lower, upper = _unpack(mx.double(LU_data), LU_data) if unpack_data else (mx.empty(LU_data), mx.empty(LU_data))
    if not unpack_pivots:
        return mx.empty(LU_data), lower, upper
    perm = _permutation(ctx.tracer, _pivots_in(LU_pivots), mx.size(LU_data, -2))
    return _permutation_matrix(perm, LU_data), lower, upper


@register("aten::linalg_lu_solve", supports=mx.real_inputs)
@wants_context
def aten_linalg_lu_solve(
    LU: ir.Value, pivots: ir.Value, B: ir.Value, *, left: bool = True, adjoint: bool = False, ctx: Any, node: Any
) -> ir.Value:
    """linalg_lu_solve(Tensor LU, Tensor pivots, Tensor B, *, bool left=True, bool adjoint=False) -> Tensor"""
    perm = _permutation(ctx.tracer, _pivots_in(pivots), mx.size(LU, -1))
    lu, b = mx.double(LU), mx.double(B)
    if left:
        return mx.like(_lu_solve(ctx.tracer, lu, perm, b, adjoint), B)
    # X A = B  <=>  A^T X^T = B^T.
    return mx.like(mx.mT(_lu_solve(ctx.tracer, lu, perm, mx.mT(b), not adjoint)), B)


@register("aten::linalg_inv_ex", supports=mx.real_inputs)
@wants_context
def aten_linalg_inv_ex(A: ir.Value, *, check_errors: bool = False, ctx: Any, node: Any) -> tuple[ir.Value, ir.Value]:
    """linalg_inv_ex(Tensor A, *, bool check_errors=False) -> (Tensor inverse, Tensor info)"""
    a = mx.double(A)
    lu, _, perm, info = _lu_factor(ctx.tracer, a)
    size = mx.size(a, -1)
    inverse = _lu_solve(ctx.tracer, lu, perm, mx.eye(size, size))
    return mx.like(inverse, A), op.Cast(info, to=mx.INT32)


def _is_vector_rhs(A: ir.Value, B: ir.Value) -> bool:
    """ATen's rule: ``B`` is a vector (or batch of vectors) when it is 1-D or ``A`` without its last dim."""
    rank_b = mx.rank(B)
    if rank_b == 1:
        return True
    return rank_b == mx.rank(A) - 1 and list(B.shape) == list(A.shape)[:-1]


@register("aten::_linalg_solve_ex", supports=mx.real_inputs)
@wants_context
def aten_linalg_solve_ex(
    A: ir.Value, B: ir.Value, *, left: bool = True, check_errors: bool = False, ctx: Any, node: Any
) -> tuple[ir.Value, ir.Value, ir.Value, ir.Value]:
    """_linalg_solve_ex(Tensor A, Tensor B, *, bool left=True, bool check_errors=False) -> (Tensor result, Tensor LU, Tensor pivots, Tensor info)"""
    vector = _is_vector_rhs(A, B)
    b = mx.double(B)
    b = op.Unsqueeze(b, [-1]) if vector else b
    lu, pivots, perm, info = _lu_factor(ctx.tracer, mx.double(A))
    if left:
        x = _lu_solve(ctx.tracer, lu, perm, b)
    else:
        x = mx.mT(_lu_solve(ctx.tracer, lu, perm, mx.mT(b), adjoint=True))
    x = op.Squeeze(x, [-1]) if vector else x
    return mx.like(x, B), mx.like(lu, A), _pivots_out(pivots), op.Cast(info, to=mx.INT32)


@register("aten::_linalg_slogdet", supports=mx.real_inputs)
@wants_context
def aten_linalg_slogdet(A: ir.Value, *, ctx: Any, node: Any) -> tuple[ir.Value, ir.Value, ir.Value, ir.Value]:
    """_linalg_slogdet(Tensor A) -> (Tensor sign, Tensor logabsdet, Tensor LU, Tensor pivots)"""
    lu, pivots, _, _ = _lu_factor(ctx.tracer, mx.double(A))
    diagonal = mx.diagonal(lu)
    swapped = op.Cast(op.Not(op.Equal(pivots, op.Range(0, mx.size(pivots, -1), 1))), to=mx.DOUBLE)
    # Each row exchange flips the sign; (-1)^swaps = cos(pi * swaps).
    parity = op.Cos(op.Mul(mx.reduce("ReduceSum", swapped), math.pi))
    sign = op.Mul(mx.reduce("ReduceProd", op.Sign(diagonal)), op.Round(parity))
    logabsdet = mx.reduce("ReduceSum", op.Log(op.Abs(diagonal)))
    return mx.like(sign, A), mx.like(logabsdet, A), mx.like(lu, A), _pivots_out(pivots)


# -- triangular systems and Cholesky -----------------------------------------------------------------


@register("aten::linalg_solve_triangular", supports=mx.real_inputs)
@wants_context
def aten_linalg_solve_triangular(
    self: ir.Value, B: ir.Value, *, upper: bool, left: bool = True, unitriangular: bool = False, ctx: Any, node: Any
) -> ir.Value:
    """linalg_solve_triangular(Tensor self, Tensor B, *, bool upper, bool left=True, bool unitriangular=False) -> Tensor"""
    a, b = mx.double(self), mx.double(B)
    if left:
        x = _substitute(ctx.tracer, a, b, upper=upper, unit=unitriangular)
    else:
        # X A = B  <=>  A^T X^T = B^T, and A^T is triangular the other way.
        x = mx.mT(_substitute(ctx.tracer, mx.mT(a), mx.mT(b), upper=not upper, unit=unitriangular))
    return mx.like(x, B)


@register("aten::triangular_solve", supports=mx.real_inputs)
@wants_context
def aten_triangular_solve(
    self: ir.Value, A: ir.Value, upper: bool = True, transpose: bool = False, unitriangular: bool = False, *, ctx: Any, node: Any
) -> tuple[ir.Value, ir.Value]:
    """triangular_solve(Tensor self, Tensor A, bool upper=True, bool transpose=False, bool unitriangular=False) -> (Tensor solution, Tensor cloned_coefficient)"""
    a = mx.double(A)
    if transpose:
        a, upper = mx.mT(a), not upper
    x = _substitute(ctx.tracer, a, mx.double(self), upper=upper, unit=unitriangular)
    return mx.like(x, self), mx.broadcast_to_batch(A, self)


def _cholesky(tracer: GraphTracer, a: ir.Value) -> tuple[ir.Value, ir.Value]:
    """The lower Cholesky factor of symmetric ``a`` and LAPACK's ``info`` (first non-positive minor)."""
    size = mx.size(a, -1)
    rows = op.Range(0, size, 1)
    info = mx.fill(0, mx.batch_shape(a), mx.dims(a)[:-2])

    def step(j: ir.Value, a: ir.Value, info: ir.Value) -> list[ir.Value]:
        at_j = mx.at(j)
        head = op.Gather(op.Gather(a, at_j, axis=-2), at_j, axis=-1)
        root = op.Sqrt(head)
        column = op.Div(op.Gather(a, at_j, axis=-1), root)
        factors = op.Where(op.Unsqueeze(op.Greater(rows, j), [-1]), column, 0.0)
        a = op.Sub(a, op.Mul(factors, mx.mT(factors)))
        # Column j from the diagonal down becomes [root, factors].
        in_column = op.And(op.Unsqueeze(op.GreaterOrEqual(rows, j), [-1]), op.Equal(rows, j))
        a = op.Where(in_column, op.Where(op.Unsqueeze(op.Equal(rows, j), [-1]), root, column), a)
        failed = op.And(op.Equal(info, 0), op.Not(op.Squeeze(op.Greater(head, 0.0), [-2, -1])))
        return [a, op.Where(failed, op.Add(j, 1), info)]

    factor, info = mx.loop(tracer, size, [a, info], step)
    return mx.tril(factor), info


@register("aten::linalg_cholesky_ex", supports=mx.real_inputs)
@wants_context
def aten_linalg_cholesky_ex(self: ir.Value, *, upper: bool = False, check_errors: bool = False, ctx: Any, node: Any) -> tuple[ir.Value, ir.Value]:
    """linalg_cholesky_ex(Tensor self, *, bool upper=False, bool check_errors=False) -> (Tensor L, Tensor info)"""
    lower, info = _cholesky(ctx.tracer, mx.symmetric(mx.double(self), upper))
    return mx.like(mx.mT(lower) if upper else lower, self), op.Cast(info, to=mx.INT32)


@register("aten::cholesky", supports=mx.real_inputs)
@wants_context
def aten_cholesky(self: ir.Value, upper: bool = False, *, ctx: Any, node: Any) -> ir.Value:
    """cholesky(Tensor self, bool upper=False) -> Tensor"""
    return aten_linalg_cholesky_ex(self, upper=upper, ctx=ctx, node=node)[0]


@register("aten::cholesky_inverse", supports=mx.real_inputs)
@wants_context
def aten_cholesky_inverse(self: ir.Value, upper: bool = False, *, ctx: Any, node: Any) -> ir.Value:
    """cholesky_inverse(Tensor self, bool upper=False) -> Tensor"""
    factor = mx.double(self)
    size = mx.size(factor, -1)
    inverse = _substitute(ctx.tracer, factor, mx.eye(size, size), upper=upper)
    # (L L^T)^-1 = L^-T L^-1 and (U^T U)^-1 = U^-1 U^-T.
    result = op.MatMul(inverse, mx.mT(inverse)) if upper else op.MatMul(mx.mT(inverse), inverse)
    return mx.like(result, self)


@register("aten::cholesky_solve", supports=mx.real_inputs)
@wants_context
def aten_cholesky_solve(self: ir.Value, input2: ir.Value, upper: bool = False, *, ctx: Any, node: Any) -> ir.Value:
    """cholesky_solve(Tensor self, Tensor input2, bool upper=False) -> Tensor"""
    factor = mx.double(input2)
    lower = mx.mT(factor) if upper else factor
    y = _substitute(ctx.tracer, lower, mx.double(self), upper=False)
    return mx.like(_substitute(ctx.tracer, mx.mT(lower), y, upper=True), self)
