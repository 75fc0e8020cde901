"""Symmetric indefinite ``LDL^T`` with Bunch-Kaufman pivoting, in LAPACK's ``sytrf``/``sytrs`` form.

The pivoting tests are LAPACK's, so ``pivots`` (1-based, negative on both rows of a 2x2 block) and
the compact factor match eager.
"""

from __future__ import annotations

import math

import onnx_ir as ir
from onnxscript import opset18 as op

from torch_onnx_fx.translate.op_context import OpContext
from torch_onnx_fx.ops.linalg import _matrix as mx
from torch_onnx_fx.registry import register, wants_context

__all__ = [
    "aten_linalg_ldl_factor_ex",
    "aten_linalg_ldl_solve",
]


# Bunch and Kaufman's threshold (1 + sqrt(17)) / 8: the pivot growth bound is minimal with it.
_BUNCH_KAUFMAN = (1.0 + math.sqrt(17.0)) / 8.0


def _symmetric_swap(m: ir.Value, i: ir.Value, j: ir.Value, first: ir.Value) -> ir.Value:
    """Exchange rows and columns ``i`` and ``j`` (per batch) of the block ``[first:, first:]``."""
    size = mx.size(m, -1)
    indices = op.Range(0, size, 1)
    swap = mx.swap(indices, op.Unsqueeze(i, [-1]), op.Unsqueeze(j, [-1]))  # (..., n)
    rows = mx.gather_rows(m, swap)
    both = op.GatherElements(rows, op.Expand(op.Unsqueeze(swap, [-2]), op.Shape(m)), axis=-1)
    inside = op.And(op.Unsqueeze(op.GreaterOrEqual(indices, first), [-1]), op.GreaterOrEqual(indices, first))
    return op.Where(inside, both, m)


def _row(m: ir.Value, index: ir.Value) -> ir.Value:
    """Row ``index[...]`` of each matrix, as ``(..., n)``."""
    where = op.Expand(op.Unsqueeze(index, [-1, -2]), mx.shape_vector(mx.batch_shape(m), 1, mx.size(m, -1)))
    return op.Squeeze(op.GatherElements(m, where, axis=-2), [-2])


def _pivot_choice(m: ir.Value, k: ir.Value, indices: ir.Value) -> tuple[ir.Value, ...]:
    """Bunch-Kaufman's tests at step ``k``: ``(one_by_one, two_by_two, partner, singular)``.

    With ``colmax`` the largest magnitude below the diagonal in column k (row ``imax``) and
    ``rowmax`` the largest off-diagonal magnitude of row ``imax`` in the trailing block: a 1x1 pivot
    stays at k if ``|a_kk|`` is large against ``colmax`` (or against ``colmax^2 / rowmax``); a 1x1
    pivot is taken from ``imax`` if ``|a_imax,imax|`` is large against ``rowmax``; otherwise rows k
    and ``imax`` form a 2x2 pivot (``imax`` moves to k + 1). A zero column needs no pivot at all.
    """
    column = op.Squeeze(op.Gather(m, mx.at(k), axis=-1), [-1])
    diagonal = op.Abs(op.Gather(column, k, axis=-1))
    below = op.Where(op.Greater(indices, k), op.Abs(column), -1.0)
    largest = op.Squeeze(op.ArgMax(below, axis=-1, keepdims=1), [-1])
    colmax = op.Max(op.ReduceMax(below, [-1], keepdims=0), 0.0)
    others = op.And(op.GreaterOrEqual(indices, k), op.Not(op.Equal(indices, op.Unsqueeze(largest, [-1]))))
    row = _row(m, largest)
    rowmax = op.ReduceMax(op.Where(others, op.Abs(row), 0.0), [-1], keepdims=0)
    threshold = op.Mul(_BUNCH_KAUFMAN, colmax)
    # LAPACK's test, MAX(|a_kk|, colmax) == 0, as the x86 build eager runs evaluates it: the
    # maximum with a NaN pivot is colmax (maxsd), so a NaN pivot over a zero column is singular
    # (it took an exchange with a finished row), and over a nonzero one goes on to the exchange
    # tests, where no comparison with it holds.
    singular = op.Or(op.Equal(op.Max(diagonal, colmax), 0.0), op.And(op.IsNaN(diagonal), op.Equal(colmax, 0.0)))
    stay = op.Or(
        singular,
        # LAPACK's colmax * (colmax / rowmax): the product |a_kk| * rowmax overflowed past 1e154
        # (and vanished below 1e-162), so huge and tiny matrices pivoted unlike eager.
        op.Or(op.GreaterOrEqual(diagonal, threshold), op.GreaterOrEqual(diagonal, op.Mul(threshold, op.Div(colmax, op.Where(op.Equal(rowmax, 0.0), 1.0, rowmax))))),
    )
    pivot_on_imax = op.GreaterOrEqual(op.Abs(op.GatherElements(row, op.Unsqueeze(largest, [-1]), axis=-1)), op.Unsqueeze(op.Mul(_BUNCH_KAUFMAN, rowmax), [-1]))
    exchange = op.And(op.Not(stay), op.Squeeze(pivot_on_imax, [-1]))
    two_by_two = op.Not(op.Or(stay, exchange))
    partner = op.Where(stay, k, largest)
    return op.Not(two_by_two), two_by_two, partner, singular


def _eliminate_one(m: ir.Value, k: ir.Value, rows: ir.Value, indices: ir.Value) -> ir.Value:
    """1x1 pivot ``d = a_kk``: column k below becomes ``a[k+1:, k] / d`` and the trailing block
    loses ``a[k+1:, k] a[k+1:, k]^T / d``."""
    column = op.Gather(m, mx.at(k), axis=-1)
    d = op.Gather(column, mx.at(k), axis=-2)
    under = op.Greater(rows, k)
    factors = op.Where(under, op.Div(column, op.Where(op.Equal(d, 0.0), 1.0, d)), 0.0)
    m = op.Sub(m, op.Mul(factors, mx.mT(op.Where(under, column, 0.0))))
    return op.Where(op.And(under, op.Equal(indices, k)), factors, m)


def _eliminate_two(m: ir.Value, k: ir.Value, k1: ir.Value, rows: ir.Value, indices: ir.Value) -> ir.Value:
    """2x2 pivot ``D`` on rows k, k + 1: with ``W = a[k+2:, k:k+2]``, columns k, k + 1 below become
    ``L = W D^-1`` and the trailing block loses ``L W^T``."""
    w0, w1 = op.Gather(m, mx.at(k), axis=-1), op.Gather(m, mx.at(k1), axis=-1)
    d00, d10, d11 = op.Gather(w0, mx.at(k), axis=-2), op.Gather(w0, mx.at(k1), axis=-2), op.Gather(w1, mx.at(k1), axis=-2)
    # D^-1 as LAPACK's sytf2 forms it, through ratios to d10 (nonzero for a 2x2 pivot): the
    # determinant d00 d11 - d10^2 overflowed past 1e154 and vanished below 1e-162.
    d10 = op.Where(op.Equal(d10, 0.0), 1.0, d10)
    r11, r00 = op.Div(d11, d10), op.Div(d00, d10)
    ratio = op.Div(op.Div(1.0, op.Sub(op.Mul(r11, r00), 1.0)), d10)
    under = op.Greater(rows, k1)
    w0, w1 = op.Where(under, w0, 0.0), op.Where(under, w1, 0.0)
    l0 = op.Mul(ratio, op.Sub(op.Mul(r11, w0), w1))
    l1 = op.Mul(ratio, op.Sub(op.Mul(r00, w1), w0))
    m = op.Sub(m, op.Add(op.Mul(l0, mx.mT(w0)), op.Mul(l1, mx.mT(w1))))
    return op.Where(op.And(under, op.Equal(indices, k)), l0, op.Where(op.And(under, op.Equal(indices, k1)), l1, m))


def _ldl_factor(ctx: OpContext, a: ir.Value) -> tuple[ir.Value, ir.Value, ir.Value]:
    """Bunch-Kaufman ``LDL^T`` of symmetric ``a`` as LAPACK's ``sytrf`` (lower) returns it: the
    compact factor, 1-based pivots (negative for both rows of a 2x2 block) and ``info``.

    The work matrix keeps the finished columns of L left of step k and the full symmetric Schur
    complement from k on. Row exchanges only touch that complement, as in LAPACK. A batch element
    that took a 2x2 pivot at k skips step k + 1.
    """
    size = mx.size(a, -1)
    indices = op.Range(0, size, 1)
    rows = op.Unsqueeze(indices, [-1])
    dims = mx.dims(a)
    info = mx.fill(0, mx.batch_shape(a), dims[:-2])
    pivots = mx.fill(0, mx.shape_vector(mx.batch_shape(a), size), dims[:-1])
    skip = mx.fill(False, mx.batch_shape(a), dims[:-2], ir.DataType.BOOL)

    def step(k: ir.Value, m: ir.Value, pivots: ir.Value, info: ir.Value, skip: ir.Value) -> list[ir.Value]:
        one_by_one, two_by_two, partner, singular = _pivot_choice(m, k, indices)
        one_by_one, two_by_two = op.And(one_by_one, op.Not(skip)), op.And(two_by_two, op.Not(skip))
        k1 = op.Min(op.Add(k, 1), op.Sub(size, 1))
        moved = op.Where(two_by_two, k1, k)
        m = _symmetric_swap(m, moved, op.Where(skip, moved, partner), k)
        # A singular step eliminates nothing (LAPACK's sytf2): the column stays as it is.
        eliminated = op.Unsqueeze(op.And(one_by_one, op.Not(singular)), [-1, -2])
        m = op.Where(op.Unsqueeze(two_by_two, [-1, -2]), _eliminate_two(m, k, k1, rows, indices), op.Where(eliminated, _eliminate_one(m, k, rows, indices), m))
        signed = op.Unsqueeze(op.Add(partner, 1), [-1])
        at_k = op.Equal(indices, k)
        pivots = op.Where(op.And(op.Unsqueeze(one_by_one, [-1]), at_k), signed, pivots)
        in_pair = op.Or(at_k, op.Equal(indices, op.Add(k, 1)))
        pivots = op.Where(op.And(op.Unsqueeze(two_by_two, [-1]), in_pair), op.Neg(signed), pivots)
        info = op.Where(op.And(op.And(one_by_one, singular), op.Equal(info, 0)), op.Add(k, 1), info)
        return [m, pivots, info, two_by_two]

    m, pivots, info, _ = mx.loop(ctx, size, [a, pivots, info, skip], step)
    return mx.tril(m), pivots, info


@register("aten::linalg_ldl_factor_ex", supports=mx.real_inputs)
@wants_context
def aten_linalg_ldl_factor_ex(
    self: ir.Value, *, hermitian: bool = False, check_errors: bool = False, ctx: OpContext
) -> tuple[ir.Value, ir.Value, ir.Value]:
    """linalg_ldl_factor_ex(Tensor self, *, bool hermitian=False, bool check_errors=False) -> (Tensor LD, Tensor pivots, Tensor info)"""
    factor, pivots, info = _ldl_factor(ctx, mx.symmetric(mx.double(self), upper=False))
    return mx.like(factor, self), op.Cast(pivots, to=mx.INT32), op.Cast(info, to=mx.INT32)


def _swap_rows(b: ir.Value, i: ir.Value, j: ir.Value) -> ir.Value:
    """Exchange rows ``i`` and ``j`` (per batch, shape ``(...)``) of ``b``."""
    swap = mx.swap(op.Range(0, mx.size(b, -2), 1), op.Unsqueeze(i, [-1]), op.Unsqueeze(j, [-1]))
    return mx.gather_rows(b, swap)


def _ldl_solve(ctx: OpContext, factor: ir.Value, pivots: ir.Value, b: ir.Value) -> ir.Value:
    """``X`` with ``A X = B`` from ``_ldl_factor``'s output: ``L D`` forward, then ``L^T`` backward,
    undoing the row exchanges in reverse order. Batches of ``factor``/``pivots`` and ``b`` broadcast."""
    x = mx.broadcast_to_batch(b, factor)
    size = mx.size(factor, -1)
    last = op.Sub(size, 1)
    rows = op.Unsqueeze(op.Range(0, size, 1), [-1])
    skip = mx.fill(False, mx.batch_shape(x), mx.dims(x)[:-2], ir.DataType.BOOL)

    def block(k: ir.Value, skip: ir.Value) -> tuple[ir.Value, ir.Value, ir.Value]:
        signed = op.Gather(pivots, k, axis=-1)
        double = op.And(op.Less(signed, 0), op.Not(skip))
        single = op.And(op.Greater(signed, 0), op.Not(skip))
        return single, double, op.Sub(op.Abs(signed), 1)

    def select(single: ir.Value, double: ir.Value, one: ir.Value, two: ir.Value, x: ir.Value) -> ir.Value:
        return op.Where(op.Unsqueeze(double, [-1, -2]), two, op.Where(op.Unsqueeze(single, [-1, -2]), one, x))

    def forward(k: ir.Value, x: ir.Value, skip: ir.Value) -> list[ir.Value]:
        single, double, partner = block(k, skip)
        k1 = op.Min(op.Add(k, 1), last)
        # The exchange made when row k (1x1) or k + 1 (2x2) was pivoted, then elimination.
        moved = op.Where(double, k1, k)
        x = _swap_rows(x, moved, op.Where(skip, moved, partner))
        l0, l1 = op.Gather(factor, mx.at(k), axis=-1), op.Gather(factor, mx.at(k1), axis=-1)
        x0, x1 = op.Gather(x, mx.at(k), axis=-2), op.Gather(x, mx.at(k1), axis=-2)
        d00, d10, d11 = op.Gather(l0, mx.at(k), axis=-2), op.Gather(l0, mx.at(k1), axis=-2), op.Gather(l1, mx.at(k1), axis=-2)
        one = op.Sub(x, op.Mul(op.Where(op.Greater(rows, k), l0, 0.0), x0))
        one = op.Where(op.Equal(rows, k), op.Div(x0, d00), one)
        after = op.Greater(rows, k1)
        two = op.Sub(x, op.Add(op.Mul(op.Where(after, l0, 0.0), x0), op.Mul(op.Where(after, l1, 0.0), x1)))
        # sytrs's ratios to d10, as in the factorization (no d00 d11 - d10^2 to overflow).
        d10 = op.Where(op.Equal(d10, 0.0), 1.0, d10)
        r00, r11, b0, b1 = op.Div(d00, d10), op.Div(d11, d10), op.Div(x0, d10), op.Div(x1, d10)
        denominator = op.Sub(op.Mul(r00, r11), 1.0)
        y0 = op.Div(op.Sub(op.Mul(r11, b0), b1), denominator)
        y1 = op.Div(op.Sub(op.Mul(r00, b1), b0), denominator)
        two = op.Where(op.Equal(rows, k), y0, op.Where(op.Equal(rows, k1), y1, two))
        return [select(single, double, one, two, x), double]

    def backward(i: ir.Value, x: ir.Value, skip: ir.Value) -> list[ir.Value]:
        k = op.Sub(last, i)
        single, double, partner = block(k, skip)
        k0 = op.Max(op.Sub(k, 1), 0)
        after = op.Greater(rows, k)
        tail = op.Where(after, x, 0.0)
        correction_k = op.ReduceSum(op.Mul(op.Gather(factor, mx.at(k), axis=-1), tail), [-2], keepdims=1)
        correction_k0 = op.ReduceSum(op.Mul(op.Gather(factor, mx.at(k0), axis=-1), tail), [-2], keepdims=1)
        one = op.Where(op.Equal(rows, k), op.Sub(x, correction_k), x)
        two = op.Where(op.Equal(rows, k0), op.Sub(x, correction_k0), one)
        x = select(single, double, one, two, x)
        # Row k is the one a 1x1 pivot or the second row of a 2x2 pivot exchanged.
        x = _swap_rows(x, k, op.Where(skip, k, partner))
        return [x, double]

    x, _ = mx.loop(ctx, size, [x, skip], forward)
    x, _ = mx.loop(ctx, size, [x, skip], backward)
    return x


@register("aten::linalg_ldl_solve", supports=mx.real_inputs)
@wants_context
def aten_linalg_ldl_solve(LD: ir.Value, pivots: ir.Value, B: ir.Value, *, hermitian: bool = False, ctx: OpContext) -> ir.Value:
    """linalg_ldl_solve(Tensor LD, Tensor pivots, Tensor B, *, bool hermitian=False) -> Tensor"""
    return mx.like(_ldl_solve(ctx, mx.double(LD), op.Cast(pivots, to=mx.INT64), mx.double(B)), B)
