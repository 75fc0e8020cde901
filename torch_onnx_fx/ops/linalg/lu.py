"""LU with partial pivoting and what rests on it; triangular solves; Cholesky.

LU follows LAPACK's ``getrf`` step for step (pivot on the largest magnitude below the diagonal,
first on ties), so ``pivots`` and the packed factors match eager. Solves, the inverse and the
log-determinant go through it; triangular systems are solved by substitution, one row per
iteration.
"""

from __future__ import annotations

import math

import onnx_ir as ir
from onnxscript import opset18 as op

from torch_onnx_fx.translate.op_context import OpContext
from torch_onnx_fx.ops.complex.real_view import _atan2
from torch_onnx_fx.ops.linalg import _matrix as mx
from torch_onnx_fx.ops.linalg.field import REAL, Field, field_of, register_real_and_complex
from torch_onnx_fx.registry import float64_input, register, wants_context

__all__ = [
    "aten_linalg_lu_factor_ex",
    "aten_linalg_lu",
    "aten_lu_unpack",
    "aten_linalg_lu_solve",
    "aten_linalg_inv_ex",
    "aten_linalg_solve_ex",
    "aten_linalg_slogdet",
    "aten_linalg_det",
    "aten_linalg_det_double",
    "aten_logdet_double",
    "aten_linalg_solve_triangular",
    "aten_triangular_solve",
    "aten_linalg_cholesky_ex",
    "aten_cholesky",
    "aten_cholesky_inverse",
    "aten_cholesky_solve",
]


def _lu_factor(
    ctx: OpContext, a: ir.Value, pivot: bool = True, field: Field = REAL
) -> tuple[ir.Value, ir.Value, ir.Value, ir.Value]:
    """LU with partial pivoting of ``(..., m, n)``, LAPACK's ``getrf``.

    Returns the packed factors, the 0-based pivots ``(..., min(m, n))``, the row permutation
    ``perm`` (row ``i`` of ``L @ U`` is row ``perm[i]`` of ``a``) and ``info`` (first zero pivot,
    1-based, or 0).
    """
    shape = field.matrix(a)
    m, n = mx.size(shape, -2), mx.size(shape, -1)
    steps = op.Min(m, n)
    rows, cols, taken = op.Range(0, m, 1), op.Range(0, n, 1), op.Range(0, steps, 1)
    batch, dims = mx.batch_shape(shape), mx.dims(shape)
    perm = mx.shaped(op.Expand(rows, mx.shape_vector(batch, m)), dims[:-1])
    pivots = mx.shaped(op.Expand(taken, mx.shape_vector(batch, steps)), [*dims[:-2], mx.smaller(*dims[-2:])])
    info = mx.fill(0, batch, dims[:-2])

    def step(j: ir.Value, a: ir.Value, perm: ir.Value, pivots: ir.Value, info: ir.Value) -> list[ir.Value]:
        at_j = mx.at(j)
        if pivot:
            candidates = op.Where(op.GreaterOrEqual(rows, j), field.pivot_size(op.Gather(a, j, axis=-1)), -1.0)
            chosen = op.ArgMax(candidates, axis=-1, keepdims=1)
            swap = mx.swap(rows, j, chosen)
            a = mx.gather_rows(a, swap)
            perm = op.GatherElements(perm, swap, axis=-1)
            pivots = op.Where(op.Equal(taken, j), chosen, pivots)
        row = op.Gather(a, at_j, axis=-2)
        head = op.Gather(row, at_j, axis=-1)
        zero = field.is_zero(head)
        below = op.Unsqueeze(op.Greater(rows, j), [-1])
        factors = op.Where(below, field.div(op.Gather(a, at_j, axis=-1), field.one_where(zero, head)), 0.0)
        # Only the rows below the pivot change, right of it: the pivot row (and those above)
        # minus 0 * row would turn NaN where it holds inf or NaN, and LAPACK never touches it.
        a = op.Where(op.And(below, op.Greater(cols, j)), op.Sub(a, field.mul(factors, row)), a)
        a = op.Where(op.And(below, op.Equal(cols, j)), factors, a)
        first_zero = op.And(op.Equal(info, 0), op.Squeeze(zero, [-2, -1]))
        info = op.Where(first_zero, op.Add(j, 1), info)
        return [a, perm, pivots, info]

    lu, perm, pivots, info = mx.loop(ctx, steps, [a, perm, pivots, info], step)
    return lu, pivots, perm, info


def _permutation(ctx: OpContext, pivots: ir.Value, size: ir.Value) -> ir.Value:
    """The row permutation that LAPACK's 0-based swap list ``pivots`` applies, as ``perm`` above."""
    rows = op.Range(0, size, 1)
    batch = mx.dims(pivots)[:-1]
    perm = mx.shaped(op.Expand(rows, mx.shape_vector(op.Shape(pivots, start=0, end=len(batch)), size)), [*batch, None])

    def step(j: ir.Value, perm: ir.Value) -> list[ir.Value]:
        swap = mx.swap(rows, j, op.Gather(pivots, mx.at(j), axis=-1))
        return [op.GatherElements(perm, swap, axis=-1)]

    return mx.loop(ctx, mx.size(pivots, -1), [perm], step)[0]


def _substitute(
    ctx: OpContext, t: ir.Value, b: ir.Value, *, upper: bool, unit: bool = False, field: Field = REAL
) -> ir.Value:
    """``X`` with ``T @ X = B`` for triangular ``T`` (only its triangle is read), batches broadcast."""
    x = mx.broadcast_to_batch(b, t)
    size = mx.size(t, -1)
    rows = op.Range(0, size, 1)

    def step(i: ir.Value, x: ir.Value) -> list[ir.Value]:
        j = op.Sub(op.Sub(size, 1), i) if upper else i
        at_j = mx.at(j)
        row = op.Gather(x, at_j, axis=-2)
        if not unit:
            row = field.div(row, op.Gather(op.Gather(t, at_j, axis=-2), at_j, axis=-1))
        pending = op.Unsqueeze(op.Less(rows, j) if upper else op.Greater(rows, j), [-1])
        # Only the pending rows change: a solved row minus 0 * row would turn NaN where the row
        # holds inf or NaN (back substitution never touches the rows it solved).
        x = op.Where(pending, op.Sub(x, field.mul(op.Gather(t, at_j, axis=-1), row)), x)
        return [op.Where(op.Unsqueeze(op.Equal(rows, j), [-1]), row, x)]

    return mx.loop(ctx, size, [x], step)[0]


def _lu_solve(
    ctx: OpContext, lu: ir.Value, perm: ir.Value, b: ir.Value, *, transposed: bool = False,
    conjugated: bool = False, field: Field = REAL,
) -> ir.Value:
    """``X`` with ``op(A) @ X = B`` from ``A``'s LU factors and permutation, where ``op`` transposes
    and/or conjugates ``A`` (``conj(A) X = B`` is ``A conj(X) = conj(B)``)."""
    if conjugated:
        b = field.conj(b)
    # B's rows permuted by gathering them (LAPACK swaps them): a product with the permutation
    # matrix would add 0 * inf, NaN in a whole column where B holds one inf.
    if not transposed:
        y = _substitute(ctx, lu, mx.gather_rows(mx.broadcast_to_batch(b, lu), perm), upper=False, unit=True, field=field)
        x = _substitute(ctx, lu, y, upper=True, field=field)
    else:
        # A^T = U^T L^T P^T: U^T is lower, L^T upper with a unit diagonal.
        lu_t = mx.mT(lu)
        y = _substitute(ctx, lu_t, b, upper=False, field=field)
        x = mx.gather_rows(_substitute(ctx, lu_t, y, upper=True, unit=True, field=field), mx.inverse_permutation(perm))
    return field.conj(x) if conjugated else x


def _pivots_out(pivots: ir.Value) -> ir.Value:
    return op.Cast(op.Add(pivots, 1), to=mx.INT32)


def _pivots_in(pivots: ir.Value) -> ir.Value:
    return op.Sub(op.Cast(pivots, to=mx.INT64), 1)


@register_real_and_complex("aten::linalg_lu_factor_ex")
def aten_linalg_lu_factor_ex(A: ir.Value, *, pivot: bool = True, check_errors: bool = False, ctx: OpContext) -> tuple[ir.Value, ir.Value, ir.Value]:
    """linalg_lu_factor_ex(Tensor A, *, bool pivot=True, bool check_errors=False) -> (Tensor LU, Tensor pivots, Tensor info)"""
    field = field_of(ctx)
    lu, pivots, _, info = _lu_factor(ctx, field.enter(A), pivot, field)
    return field.leave(lu, A), _pivots_out(pivots), op.Cast(info, to=mx.INT32)


def _unpack(lu: ir.Value, field: Field) -> tuple[ir.Value, ir.Value]:
    """``L (m, k)`` with a unit diagonal and ``U (k, n)`` from packed factors."""
    shape = field.matrix(lu)
    m, n = mx.size(shape, -2), mx.size(shape, -1)
    k = op.Min(m, n)
    static_k = mx.smaller(*mx.dims(shape)[-2:])
    lower = op.Add(mx.take(mx.tril(lu, k=-1), k, -1, static_k), field.from_real(mx.eye(m, k), mx.rank(shape)))
    upper = mx.take(mx.tril(lu, upper=True), k, -2, static_k)
    return lower, upper


def _permutation_matrix(perm: ir.Value, field: Field) -> ir.Value:
    """``P`` with ``A = P @ L @ U``: the transpose of the one-hot rows of ``perm``."""
    return field.from_real(mx.mT(mx.one_hot_rows(perm)))


@register_real_and_complex("aten::linalg_lu")
def aten_linalg_lu(A: ir.Value, *, pivot: bool = True, ctx: OpContext) -> tuple[ir.Value, ir.Value, ir.Value]:
    """linalg_lu(Tensor A, *, bool pivot=True) -> (Tensor P, Tensor L, Tensor U)"""
    field = field_of(ctx)
    lu, _, perm, _ = _lu_factor(ctx, field.enter(A), pivot, field)
    lower, upper = _unpack(lu, field)
    return field.leave(_permutation_matrix(perm, field), A), field.leave(lower, A), field.leave(upper, A)


@register_real_and_complex("aten::lu_unpack")
def aten_lu_unpack(
    LU_data: ir.Value, LU_pivots: ir.Value, unpack_data: bool = True, unpack_pivots: bool = True, *, ctx: OpContext
) -> tuple[ir.Value, ir.Value, ir.Value]:
    """lu_unpack(Tensor LU_data, Tensor LU_pivots, bool unpack_data=True, bool unpack_pivots=True) -> (Tensor P, Tensor L, Tensor U)"""
    field = field_of(ctx)
    lu = field.enter(LU_data)
    # What is not unpacked comes back empty, as in eager.
    if unpack_data:
        lower, upper = (field.leave(part, LU_data) for part in _unpack(lu, field))
    else:
        lower, upper = field.empty(LU_data), field.empty(LU_data)
    if not unpack_pivots:
        return field.empty(LU_data), lower, upper
    perm = _permutation(ctx, _pivots_in(LU_pivots), mx.size(field.matrix(lu), -2))
    return field.leave(_permutation_matrix(perm, field), LU_data), lower, upper


@register_real_and_complex("aten::linalg_lu_solve")
def aten_linalg_lu_solve(
    LU: ir.Value, pivots: ir.Value, B: ir.Value, *, left: bool = True, adjoint: bool = False, ctx: OpContext
) -> ir.Value:
    """linalg_lu_solve(Tensor LU, Tensor pivots, Tensor B, *, bool left=True, bool adjoint=False) -> Tensor"""
    field = field_of(ctx)
    lu, b = field.aligned(field.enter(LU), field.enter(B))
    perm = _permutation(ctx, _pivots_in(pivots), mx.size(field.matrix(lu), -1))
    if left:
        return field.leave(_lu_solve(ctx, lu, perm, b, transposed=adjoint, conjugated=adjoint, field=field), B)
    # X op(A) = B  <=>  op(A)^T X^T = B^T, and (A^H)^T = conj(A).
    x = _lu_solve(ctx, lu, perm, mx.mT(b), transposed=not adjoint, conjugated=adjoint, field=field)
    return field.leave(mx.mT(x), B)


@register_real_and_complex("aten::linalg_inv_ex")
def aten_linalg_inv_ex(A: ir.Value, *, check_errors: bool = False, ctx: OpContext) -> tuple[ir.Value, ir.Value]:
    """linalg_inv_ex(Tensor A, *, bool check_errors=False) -> (Tensor inverse, Tensor info)"""
    field = field_of(ctx)
    a = field.enter(A)
    lu, _, perm, info = _lu_factor(ctx, a, field=field)
    shape = field.matrix(a)
    inverse = _lu_solve(ctx, lu, perm, field.identity(mx.size(shape, -1), mx.rank(shape)), field=field)
    return field.leave(inverse, A), op.Cast(info, to=mx.INT32)


def _is_vector_rhs(A: ir.Value, B: ir.Value) -> bool:
    """ATen's rule: ``B`` is a vector (or batch of vectors) when it is 1-D or ``A`` without its last dim."""
    rank_b = mx.rank(B)
    if rank_b == 1:
        return True
    return rank_b == mx.rank(A) - 1 and list(B.shape) == list(A.shape)[:-1]


@register_real_and_complex("aten::_linalg_solve_ex")
def aten_linalg_solve_ex(
    A: ir.Value, B: ir.Value, *, left: bool = True, check_errors: bool = False, ctx: OpContext
) -> tuple[ir.Value, ir.Value, ir.Value, ir.Value]:
    """_linalg_solve_ex(Tensor A, Tensor B, *, bool left=True, bool check_errors=False) -> (Tensor result, Tensor LU, Tensor pivots, Tensor info)"""
    field = field_of(ctx)
    a, b = field.enter(A), field.enter(B)
    vector = _is_vector_rhs(field.matrix(a), field.matrix(b))
    a, b = field.aligned(a, mx.shaped(op.Unsqueeze(b, [-1]), [*mx.dims(b), 1]) if vector else b)
    lu, pivots, perm, info = _lu_factor(ctx, a, field=field)
    if left:
        x = _lu_solve(ctx, lu, perm, b, field=field)
    else:
        x = mx.mT(_lu_solve(ctx, lu, perm, mx.mT(b), transposed=True, field=field))
    x = op.Squeeze(x, [-1]) if vector else x
    return field.leave(x, B), field.leave(lu, A), _pivots_out(pivots), op.Cast(info, to=mx.INT32)


def _log_determinant(ctx: OpContext, A: ir.Value, field: Field) -> tuple[ir.Value, ir.Value, ir.Value, ir.Value]:
    """``(sign, log|det|, LU, pivots)`` of ``A`` from its LU factors, the sign (a unit complex
    number for complex ``A``, 0 for a singular one) in the computing form."""
    lu, pivots, _, _ = _lu_factor(ctx, field.enter(A), field=field)
    diagonal = mx.diagonal(lu)
    swapped = op.Cast(op.Not(op.Equal(pivots, op.Range(0, mx.size(pivots, -1), 1))), to=mx.DOUBLE)
    # Each row exchange flips the sign; (-1)^swaps = cos(pi * swaps).
    parity = op.Round(op.Cos(op.Mul(mx.reduce("ReduceSum", swapped), math.pi)))
    if not field.is_complex:
        # torch's sign of NaN is 0 (ONNX's is NaN): a matrix holding NaN has sign 0, as in eager.
        signs = op.Where(op.IsNaN(diagonal), op.CastLike(0.0, diagonal), op.Sign(diagonal))
        sign = op.Mul(mx.reduce("ReduceProd", signs), parity)
        return sign, mx.reduce("ReduceSum", op.Log(op.Abs(diagonal))), lu, pivots
    re, im = field.real(diagonal), field.imag(diagonal)
    magnitude = op.Sqrt(op.Add(op.Mul(re, re), op.Mul(im, im)))
    # The product of the diagonal's unit factors, by adding their angles.
    turn = mx.reduce("ReduceSum", _atan2(im, re))
    singular = mx.reduce("ReduceMax", op.Cast(op.Equal(magnitude, 0.0), to=mx.DOUBLE))
    scale = op.Mul(parity, op.Sub(1.0, singular))
    sign = field.pair(op.Unsqueeze(op.Mul(op.Cos(turn), scale), [0]), op.Unsqueeze(op.Mul(op.Sin(turn), scale), [0]))
    return sign, mx.reduce("ReduceSum", op.Log(magnitude)), lu, pivots


@register_real_and_complex("aten::_linalg_slogdet")
def aten_linalg_slogdet(A: ir.Value, *, ctx: OpContext) -> tuple[ir.Value, ir.Value, ir.Value, ir.Value]:
    """_linalg_slogdet(Tensor A) -> (Tensor sign, Tensor logabsdet, Tensor LU, Tensor pivots)"""
    field = field_of(ctx)
    sign, logabsdet, lu, pivots = _log_determinant(ctx, A, field)
    return field.leave(sign, A), mx.like(logabsdet, A), field.leave(lu, A), _pivots_out(pivots)


# float64 matrices: ONNX Runtime has no float64 ``Det`` (torchlib's translation of the others).
@register("aten::_linalg_det", supports=float64_input)
@register("aten::_linalg_det", complex=True)
@wants_context
def aten_linalg_det(A: ir.Value, *, ctx: OpContext) -> tuple[ir.Value, ir.Value, ir.Value]:
    """_linalg_det(Tensor A) -> (Tensor result, Tensor LU, Tensor pivots) from the LU factors in
    float64: the diagonal's product with the permutation's sign (complex: sign * exp(log|det|))"""
    field = field_of(ctx)
    sign, logabsdet, lu, pivots = _log_determinant(ctx, A, field)
    if field.is_complex:
        det = op.Mul(sign, op.Exp(logabsdet))
    else:
        det = op.Mul(sign, op.Abs(mx.reduce("ReduceProd", mx.diagonal(lu))))
    return field.leave(det, A), field.leave(lu, A), _pivots_out(pivots)


@register("aten::linalg_det", "aten::det", supports=float64_input)
@wants_context
def aten_linalg_det_double(A: ir.Value, *, ctx: OpContext) -> ir.Value:
    """linalg_det(Tensor A) -> Tensor of float64 matrices (torchlib's ``Det`` has no float64
    kernel in ONNX Runtime)"""
    return aten_linalg_det(A, ctx=ctx)[0]


@register("aten::logdet", supports=float64_input)
@wants_context
def aten_logdet_double(self: ir.Value, *, ctx: OpContext) -> ir.Value:
    """logdet(Tensor self) -> Tensor of float64 matrices: log(det), NaN for a negative one"""
    return op.Log(aten_linalg_det(self, ctx=ctx)[0])


# -- triangular systems and Cholesky -----------------------------------------------------------------


@register_real_and_complex("aten::linalg_solve_triangular")
def aten_linalg_solve_triangular(
    self: ir.Value, B: ir.Value, *, upper: bool, left: bool = True, unitriangular: bool = False, ctx: OpContext
) -> ir.Value:
    """linalg_solve_triangular(Tensor self, Tensor B, *, bool upper, bool left=True, bool unitriangular=False) -> Tensor"""
    field = field_of(ctx)
    a, b = field.aligned(field.enter(self), field.enter(B))
    if left:
        x = _substitute(ctx, a, b, upper=upper, unit=unitriangular, field=field)
    else:
        # X A = B  <=>  A^T X^T = B^T, and A^T is triangular the other way.
        x = mx.mT(_substitute(ctx, mx.mT(a), mx.mT(b), upper=not upper, unit=unitriangular, field=field))
    return field.leave(x, B)


@register_real_and_complex("aten::triangular_solve")
def aten_triangular_solve(
    self: ir.Value, A: ir.Value, upper: bool = True, transpose: bool = False, unitriangular: bool = False, *, ctx: OpContext
) -> tuple[ir.Value, ir.Value]:
    """triangular_solve(Tensor self, Tensor A, bool upper=True, bool transpose=False, bool unitriangular=False) -> (Tensor solution, Tensor cloned_coefficient)"""
    field = field_of(ctx)
    a, b = field.aligned(field.enter(A), field.enter(self))
    coefficient = mx.broadcast_to_batch(a, b)
    if transpose:  # a plain transpose, complex too
        a, upper = mx.mT(a), not upper
    x = _substitute(ctx, a, b, upper=upper, unit=unitriangular, field=field)
    return field.leave(x, self), field.leave(coefficient, A)


def _cholesky(ctx: OpContext, a: ir.Value, field: Field = REAL) -> tuple[ir.Value, ir.Value]:
    """The lower Cholesky factor of self-adjoint ``a`` and LAPACK's ``info`` (first non-positive
    minor); only the real part of each diagonal element is read, as LAPACK does."""
    shape = field.matrix(a)
    size = mx.size(shape, -1)
    rows = op.Range(0, size, 1)
    info = mx.fill(0, mx.batch_shape(shape), mx.dims(shape)[:-2])

    def step(j: ir.Value, a: ir.Value, info: ir.Value) -> list[ir.Value]:
        at_j = mx.at(j)
        head = field.real(op.Gather(op.Gather(a, at_j, axis=-2), at_j, axis=-1))
        root = op.Sqrt(head)
        column = op.Div(op.Gather(a, at_j, axis=-1), root)
        factors = op.Where(op.Unsqueeze(op.Greater(rows, j), [-1]), column, 0.0)
        a = op.Sub(a, field.mul(factors, field.adjoint(factors)))
        # Column j from the diagonal down becomes [root, factors].
        in_column = op.And(op.Unsqueeze(op.GreaterOrEqual(rows, j), [-1]), op.Equal(rows, j))
        a = op.Where(in_column, op.Where(op.Unsqueeze(op.Equal(rows, j), [-1]), field.from_real(root), column), a)
        failed = op.And(op.Equal(info, 0), op.Not(op.Squeeze(op.Greater(head, 0.0), [-2, -1])))
        return [a, op.Where(failed, op.Add(j, 1), info)]

    factor, info = mx.loop(ctx, size, [a, info], step)
    return mx.tril(factor), info


@register_real_and_complex("aten::linalg_cholesky_ex")
def aten_linalg_cholesky_ex(self: ir.Value, *, upper: bool = False, check_errors: bool = False, ctx: OpContext) -> tuple[ir.Value, ir.Value]:
    """linalg_cholesky_ex(Tensor self, *, bool upper=False, bool check_errors=False) -> (Tensor L, Tensor info)"""
    field = field_of(ctx)
    lower, info = _cholesky(ctx, field.self_adjoint(field.enter(self), upper), field)
    return field.leave(field.adjoint(lower) if upper else lower, self), op.Cast(info, to=mx.INT32)


@register_real_and_complex("aten::cholesky")
def aten_cholesky(self: ir.Value, upper: bool = False, *, ctx: OpContext) -> ir.Value:
    """cholesky(Tensor self, bool upper=False) -> Tensor"""
    return aten_linalg_cholesky_ex(self, upper=upper, ctx=ctx)[0]


@register_real_and_complex("aten::cholesky_inverse")
def aten_cholesky_inverse(self: ir.Value, upper: bool = False, *, ctx: OpContext) -> ir.Value:
    """cholesky_inverse(Tensor self, bool upper=False) -> Tensor"""
    field = field_of(ctx)
    factor = field.enter(self)
    shape = field.matrix(factor)
    inverse = _substitute(ctx, factor, field.identity(mx.size(shape, -1), mx.rank(shape)), upper=upper, field=field)
    # (L L^H)^-1 = L^-H L^-1 and (U^H U)^-1 = U^-1 U^-H.
    if upper:
        result = field.matmul(inverse, field.adjoint(inverse))
    else:
        result = field.matmul(field.adjoint(inverse), inverse)
    return field.leave(result, self)


@register_real_and_complex("aten::cholesky_solve")
def aten_cholesky_solve(self: ir.Value, input2: ir.Value, upper: bool = False, *, ctx: OpContext) -> ir.Value:
    """cholesky_solve(Tensor self, Tensor input2, bool upper=False) -> Tensor"""
    field = field_of(ctx)
    factor, b = field.aligned(field.enter(input2), field.enter(self))
    lower = field.adjoint(factor) if upper else factor
    y = _substitute(ctx, lower, b, upper=False, field=field)
    return field.leave(_substitute(ctx, field.adjoint(lower), y, upper=True, field=field), self)
