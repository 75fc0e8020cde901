"""Symmetric eigenvalues, singular values and the pseudo-inverse, by Jacobi rotations.

Cyclic Jacobi in round-robin order: each loop iteration rotates all ``n // 2`` disjoint pairs of a
round at once, and the loop stops once every pair is orthogonal to float64 precision. Eigenvalues
come from the two-sided form, singular values from the one-sided form (column norms).
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import onnx_ir as ir
from onnxscript import opset18 as op

from torch_onnx_fx.translate.op_context import OpContext
from torch_onnx_fx.ops.linalg import _matrix as mx
from torch_onnx_fx.ops.linalg.qr import apply_reflectors, householder_qr
from torch_onnx_fx.registry import register, wants_context

__all__ = [
    "aten_linalg_eigh",
    "aten_linalg_svd",
    "aten_linalg_pinv",
]


# Rotations per pair before giving up; Jacobi converges quadratically, in well under 15 sweeps.
_MAX_SWEEPS = 30
# Off-diagonal size, relative to the diagonal, at which float64 Jacobi has converged.
_JACOBI_TOLERANCE = 1e-13


def _rotation(app: ir.Value, aqq: ir.Value, apq: ir.Value) -> tuple[ir.Value, ir.Value]:
    """Cosine and sine of the rotation zeroing ``apq`` of the symmetric 2x2 ``[[app, apq], [apq, aqq]]``."""
    zero = op.Equal(apq, 0.0)
    theta = op.Div(op.Sub(aqq, app), op.Mul(2.0, op.Where(zero, 1.0, apq)))
    # The smaller root of t^2 + 2 theta t - 1 = 0, t = tan(angle); sign(0) taken as +1.
    t = op.Div(1.0, op.Add(op.Abs(theta), op.Sqrt(op.Add(op.Mul(theta, theta), 1.0))))
    t = op.Where(zero, 0.0, op.Where(op.Less(theta, 0.0), op.Neg(t), t))
    c = op.Div(1.0, op.Sqrt(op.Add(op.Mul(t, t), 1.0)))
    return c, op.Mul(t, c)


def _jacobi(ctx: OpContext, a: ir.Value, two_sided: bool) -> tuple[ir.Value, ir.Value]:
    """Cyclic Jacobi on ``(..., m, n)``: returns ``(a', V)`` with ``V`` orthogonal and

    * two-sided (``a`` symmetric): ``a' = V^T a V`` diagonal (eigenvalues of ``a``);
    * one-sided: ``a' = a V`` with orthogonal columns (``a^T a`` diagonalized; singular values are
      the column norms).

    Each iteration is one round of a round-robin tournament over the columns, whose ``n // 2``
    disjoint pairs are rotated together as one matrix ``J``. The loop ends once every pair is
    orthogonal to within ``_JACOBI_TOLERANCE``.
    """
    # Rotations and their convergence test square the entries: the loop works on the matrix scaled
    # by a power of two near its largest entry, which is exact and leaves V as it is.
    unit = mx.matrix_scale(a)
    a = op.Div(a, unit)
    n = mx.size(a, -1)
    # An even number of players: for odd n one more, who sits out whoever it meets.
    players = op.Add(n, op.Mod(n, 2))
    rounds = op.Max(op.Sub(players, 1), 1)
    pairs = op.Range(0, op.Div(players, 2), 1)
    columns = op.Range(0, n, 1)
    dims = mx.dims(a)
    eye = mx.eye(n, n)
    v = mx.shaped(op.Expand(eye, mx.shape_vector(mx.batch_shape(a), 1, 1)), [*dims[:-2], dims[-1], dims[-1]])
    count = op.Mul(rounds, _MAX_SWEEPS)

    def one_hot(players: ir.Value) -> ir.Value:
        return op.Cast(op.Equal(op.Unsqueeze(players, [-1]), columns), to=mx.DOUBLE)

    def sum_last(x: ir.Value, axis: int = -1) -> ir.Value:
        return op.ReduceSum(x, [axis], keepdims=0)

    def step(i: ir.Value, a: ir.Value, v: ir.Value) -> list[ir.Value]:
        # Round r pairs player (r + k) mod (N - 1) with (r - k) mod (N - 1), and r with N - 1;
        # for odd n, player N - 1 = n is the one who sits out (its one-hot row is empty).
        r = op.Mod(i, rounds)
        first = one_hot(op.Mod(op.Add(r, pairs), rounds))
        second = one_hot(op.Where(op.Equal(pairs, 0), rounds, op.Mod(op.Add(op.Sub(r, pairs), rounds), rounds)))
        if two_sided:
            app = sum_last(op.Mul(op.MatMul(first, a), first))
            apq = sum_last(op.Mul(op.MatMul(first, a), second))
            aqq = sum_last(op.Mul(op.MatMul(second, a), second))
        else:
            ap, aq = op.MatMul(a, mx.mT(first)), op.MatMul(a, mx.mT(second))
            app = mx.reduce("ReduceSum", op.Mul(ap, ap), -2)
            apq = mx.reduce("ReduceSum", op.Mul(ap, aq), -2)
            aqq = mx.reduce("ReduceSum", op.Mul(aq, aq), -2)
        c, s = _rotation(app, aqq, apq)

        def spread(left: ir.Value, weights: ir.Value, right: ir.Value) -> ir.Value:
            # left^T diag(weights) right: (n, N/2) @ (..., N/2, n).
            return op.MatMul(mx.mT(left), op.Mul(op.Unsqueeze(weights, [-1]), right))

        c_1 = op.Sub(c, 1.0)
        rotation = op.Add(
            op.Add(eye, op.Add(spread(first, c_1, first), spread(second, c_1, second))),
            op.Sub(spread(first, s, second), spread(second, s, first)),
        )
        a = op.MatMul(a, rotation)
        if two_sided:
            a = op.MatMul(mx.mT(rotation), a)
        return [a, op.MatMul(v, rotation)]

    def converged(a: ir.Value, v: ir.Value) -> ir.Value:
        gram = a if two_sided else op.MatMul(mx.mT(a), a)
        diagonal = op.Abs(mx.diagonal(gram))
        scale = op.Mul(op.Unsqueeze(diagonal, [-1]), op.Unsqueeze(diagonal, [-2]))
        off = op.Where(op.Cast(eye, to=ir.DataType.BOOL), 0.0, op.Mul(gram, gram))
        return op.Not(mx.any_true(op.Greater(off, op.Mul(scale, _JACOBI_TOLERANCE**2))))

    a, v = mx.loop(ctx, count, [a, v], step, until=converged)
    return op.Mul(a, unit), v


def _sorted_columns(values: ir.Value, vectors: Sequence[ir.Value], count: ir.Value, descending: bool) -> list[ir.Value]:
    """The ``count`` largest (or smallest) ``values`` in order, and the matching columns of ``vectors``."""
    values, order = op.TopK(values, mx.at(count), axis=-1, largest=int(descending), sorted=1)
    # Columns are picked by a one-hot matrix product (GatherElements rejects empty matrices).
    columns = op.Unsqueeze(op.Range(0, mx.size(vectors[0], -1), 1), [-1])
    picker = op.Cast(op.Equal(columns, op.Unsqueeze(order, [-2])), to=mx.DOUBLE)
    return [values, *(op.MatMul(matrix, picker) for matrix in vectors)]


def _eigh(ctx: OpContext, a: ir.Value) -> tuple[ir.Value, ir.Value]:
    """Ascending eigenvalues and eigenvectors (as columns) of symmetric ``a``."""
    diagonal, vectors = _jacobi(ctx, a, two_sided=True)
    values, vectors = _sorted_columns(mx.diagonal(diagonal), [vectors], mx.size(a, -1), descending=False)
    return values, vectors


def _singular(ctx: OpContext, a: ir.Value) -> tuple[ir.Value, ir.Value, ir.Value, bool]:
    """One-sided Jacobi on the narrower side of ``a``: ``(W, V, sigma, transposed)`` with
    ``W = B V`` having orthogonal columns of norms ``sigma``, where ``B`` is ``a`` or (``transposed``)
    ``a^T``. Unsorted; for dynamic sizes ``B`` is ``a``."""
    rows, cols = mx.dims(a)[-2:]
    transposed = isinstance(rows, int) and isinstance(cols, int) and rows < cols
    work, v = _jacobi(ctx, mx.mT(a) if transposed else a, two_sided=False)
    # Column norms of squares scaled per column, as in the rotations (mx.power_of_two_near).
    unit = mx.power_of_two_near(mx.reduce("ReduceMax", op.Abs(work), -2, keepdims=True))
    scaled = op.Div(work, unit)
    sigma = op.Mul(op.Sqrt(mx.reduce("ReduceSum", op.Mul(scaled, scaled), -2)), op.Squeeze(unit, [-2]))
    return work, v, sigma, transposed


@register("aten::_linalg_eigh", supports=mx.real_inputs)
@wants_context
def aten_linalg_eigh(A: ir.Value, UPLO: str = "L", compute_v: bool = True, *, ctx: OpContext) -> tuple[ir.Value, ir.Value]:
    """_linalg_eigh(Tensor A, str UPLO="L", bool compute_v=True) -> (Tensor eigenvalues, Tensor eigenvectors)"""
    values, vectors = _eigh(ctx, mx.symmetric(mx.double(A), UPLO == "U"))
    return mx.like(values, A), mx.like(vectors, A) if compute_v else mx.empty(A)


def _orthonormal_completion(ctx: OpContext, q: ir.Value, keep: ir.Value) -> ir.Value:
    """A square orthogonal matrix whose first columns are those of ``q (..., r, k)`` flagged by
    ``keep (..., k)`` (orthonormal already); the others come from ``q``'s Householder QR, which
    spans the rest of the space (the flagged columns are sorted first)."""
    packed, tau = householder_qr(ctx, q)
    rows, cols = mx.size(q, -2), mx.size(q, -1)
    basis = apply_reflectors(ctx, packed, tau, mx.eye(rows, rows), backwards=True, from_identity=True)
    extra = op.Sub(rows, cols)
    rank = mx.rank(q)
    pads = mx.shape_vector(*([0] * (2 * rank - 1)), extra)
    padded = op.Pad(q, pads, op.CastLike(0.0, q))
    flags = op.Pad(op.Cast(keep, to=mx.DOUBLE), mx.shape_vector(*([0] * (2 * rank - 3)), extra), op.CastLike(0.0, q))
    return op.Where(op.Cast(op.Unsqueeze(flags, [-2]), to=ir.DataType.BOOL), padded, basis)


@register("aten::_linalg_svd", supports=mx.real_inputs)
@wants_context
def aten_linalg_svd(
    A: ir.Value, full_matrices: bool = False, compute_uv: bool = True, *, driver: str | None = None, ctx: OpContext
) -> tuple[ir.Value, ir.Value, ir.Value]:
    """_linalg_svd(Tensor A, bool full_matrices=False, bool compute_uv=True, *, str? driver=None) -> (Tensor U, Tensor S, Tensor Vh)"""
    a = mx.double(A)
    work, v, sigma, transposed = _singular(ctx, a)
    rows, cols = mx.size(work, -2), mx.size(work, -1)
    k = op.Min(rows, cols)
    static_k = mx.smaller(*mx.dims(a)[-2:])
    # All columns sorted: V stays square, and only the first k singular values can be nonzero.
    sigma, work, v = _sorted_columns(sigma, [work, v], cols, descending=True)
    values = mx.take(sigma, k, -1, static_k)
    if not compute_uv:
        return mx.empty(A), mx.like(values, A), mx.empty(A)
    # W = B V = U S: the left vectors are W's columns scaled to unit length; those of zero
    # singular values are completed to an orthonormal basis.
    scaled = op.Div(work, op.Unsqueeze(op.Where(op.Equal(sigma, 0.0), 1.0, sigma), [-2]))
    left = _orthonormal_completion(ctx, mx.take(scaled, k, -1, static_k), op.Greater(values, 0.0))
    if not full_matrices:
        left, v = mx.take(left, k, -1, static_k), mx.take(v, k, -1, static_k)
    u, vh = (v, mx.mT(left)) if transposed else (left, mx.mT(v))
    return mx.like(u, A), mx.like(values, A), mx.like(vh, A)


@register("aten::linalg_pinv.atol_rtol_tensor", supports=mx.real_inputs)
@wants_context
def aten_linalg_pinv(
    self: ir.Value, *, atol: ir.Value | None = None, rtol: ir.Value | None = None, hermitian: bool = False, ctx: OpContext
) -> ir.Value:
    """linalg_pinv.atol_rtol_tensor(Tensor self, *, Tensor? atol=None, Tensor? rtol=None, bool hermitian=False) -> Tensor"""
    a = mx.double(self)
    if hermitian:
        # Eigenvalues of the lower triangle stand for singular values, with their signs.
        magnitudes, vectors = _jacobi(ctx, mx.symmetric(a, upper=False), two_sided=True)
        values = mx.diagonal(magnitudes)
        magnitudes = op.Abs(values)
    else:
        work, vectors, magnitudes, transposed = _singular(ctx, a)
    largest = mx.reduce("ReduceMax", magnitudes, keepdims=True)
    if rtol is None:
        # Default: eps * max(m, n) in the input's precision, or 0 when a positive atol is given.
        size = op.Cast(op.Max(mx.size(a, -2), mx.size(a, -1)), to=mx.DOUBLE)
        rtol = op.Mul(size, float(np.finfo(self.dtype.numpy()).eps))
        if atol is not None:
            rtol = op.Where(op.Greater(atol, 0.0), 0.0, rtol)
    threshold = op.Mul(op.Unsqueeze(mx.double(rtol), [-1]) if mx.rank(rtol) else mx.double(rtol), largest)
    if atol is not None:
        threshold = op.Max(threshold, op.Unsqueeze(mx.double(atol), [-1]) if mx.rank(atol) else mx.double(atol))
    keep = op.Greater(magnitudes, threshold)
    if hermitian:
        weights = op.Where(keep, op.Div(1.0, op.Where(keep, values, 1.0)), 0.0)
        result = op.MatMul(op.Mul(vectors, op.Unsqueeze(weights, [-2])), mx.mT(vectors))
    else:
        # B = U S V^T, W = U S: pinv(B) = V S^-1 U^T with U = W S^-1 (not V S^-2 W^T, whose
        # squares overflow past 1e154 and vanish below 1e-154).
        safe = op.Unsqueeze(op.Where(keep, magnitudes, 1.0), [-2])
        weights = op.Where(op.Unsqueeze(keep, [-2]), op.Div(1.0, safe), 0.0)
        result = op.MatMul(op.Mul(vectors, weights), mx.mT(op.Div(work, safe)))
        result = mx.mT(result) if transposed else result
    return mx.like(result, self)
