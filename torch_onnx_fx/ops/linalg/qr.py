"""Householder QR in LAPACK's conventions: ``geqrf``, ``householder_product``, ``ormqr``, ``qr``.

Each reflector is chosen as LAPACK's ``larfg`` does (``beta = -sign(Re alpha) * norm``, real), so
the packed factor, ``tau``, Q and R all match eager. Complex matrices compute in the complex field
(``field.py``): a reflector is ``I - tau v v^H``, and ``geqrf`` applies its adjoint.
"""

from __future__ import annotations


import onnx_ir as ir
from onnxscript import opset18 as op

from torch_onnx_fx.translate.op_context import OpContext
from torch_onnx_fx.ops.linalg import _matrix as mx
from torch_onnx_fx.ops.linalg.field import REAL, Field, field_of, register_real_and_complex

__all__ = [
    "householder_qr",
    "apply_reflectors",
    "aten_geqrf",
    "aten_linalg_householder_product",
    "aten_ormqr",
    "aten_linalg_qr",
]


def _reflector_vector(packed: ir.Value, j: ir.Value, rows: ir.Value, field: Field) -> ir.Value:
    """Householder vector ``j`` of LAPACK's packed form: 0 above row j, 1 at it, column j below."""
    rows = op.Unsqueeze(rows, [-1])
    column = op.Gather(packed, mx.at(j), axis=-1)
    unit = field.from_real(op.Cast(op.Equal(rows, j), to=mx.DOUBLE), mx.rank(field.matrix(packed)))
    return op.Where(op.Greater(rows, j), column, unit)


def _reflect(c: ir.Value, v: ir.Value, scale: ir.Value, field: Field, rows: ir.Value, columns: ir.Value | None = None) -> ir.Value:
    """``(I - scale v v^H) C`` on the rows ``rows`` marks (reflector j's, from row j on) and the
    columns ``columns`` marks (all when None), as LAPACK applies a reflector to ``C[j:, k:]``:
    the rest is left as it is. A product over every entry multiplied the zeros of ``v`` above
    row j by an inf or NaN there (a column of R, of Q) and spread NaN into results LAPACK keeps
    finite."""
    projection = op.ReduceSum(field.mul(field.conj(v), op.Where(rows, c, 0.0)), [-2], keepdims=1)
    active = rows if columns is None else op.And(rows, columns)
    return op.Where(active, op.Sub(c, field.mul(field.mul(scale, v), projection)), c)


def householder_qr(ctx: OpContext, a: ir.Value, field: Field = REAL) -> tuple[ir.Value, ir.Value]:
    """Householder QR in LAPACK's packed form (``geqrf``): R on and above the diagonal, the
    reflectors' tails below it, and their scales ``tau``."""
    shape = field.matrix(a)
    m, n = mx.size(shape, -2), mx.size(shape, -1)
    steps = op.Min(m, n)
    rows, cols, taken = op.Unsqueeze(op.Range(0, m, 1), [-1]), op.Range(0, n, 1), op.Range(0, steps, 1)
    dims = mx.dims(shape)
    tau = mx.fill(0.0, mx.shape_vector(mx.batch_shape(shape), steps), [*dims[:-2], mx.smaller(*dims[-2:])], mx.DOUBLE)
    tau = field.from_real(tau)

    def step(j: ir.Value, a: ir.Value, tau: ir.Value) -> list[ir.Value]:
        column = op.Gather(a, mx.at(j), axis=-1)
        alpha = op.Gather(column, mx.at(j), axis=-2)
        below = op.Greater(rows, j)
        # The norm of the column from row j on, its squares taken of values scaled by a power of two
        # near the largest (see mx.power_of_two_near): past 1e154 they overflowed, below 1e-162
        # they vanished and a nonzero tail looked like none.
        tail_size = op.ReduceMax(op.Where(below, field.pivot_size(column), 0.0), [-2], keepdims=1)
        unit = mx.power_of_two_near(op.Max(tail_size, field.pivot_size(alpha)))
        scaled, scaled_alpha = op.Div(column, unit), op.Div(alpha, unit)
        tail = op.ReduceSum(op.Where(below, field.real(field.mul(field.conj(scaled), scaled)), 0.0), [-2], keepdims=1)
        real_alpha = field.real(alpha)
        norm = op.Mul(op.Sqrt(op.Add(field.real(field.mul(field.conj(scaled_alpha), scaled_alpha)), tail)), unit)
        # beta = -sign(Re alpha) * norm, sign(0) = +1; nothing to reflect when alpha is already
        # real and the tail is zero.
        trivial = op.Equal(tail_size, 0.0)
        if field.is_complex:
            trivial = op.And(trivial, op.Equal(field.imag(alpha), 0.0))
        beta = field.from_real(op.Where(trivial, real_alpha, op.Where(op.Less(real_alpha, 0.0), norm, op.Neg(norm))))
        scale = op.Where(trivial, 0.0, field.div(op.Sub(beta, alpha), field.one_where(trivial, beta)))
        divisor = field.one_where(trivial, op.Sub(alpha, beta))
        v = op.Where(below, field.div(column, divisor), field.from_real(op.Cast(op.Equal(rows, j), to=mx.DOUBLE), len(dims)))
        # geqrf applies each reflector's adjoint, I - conj(tau) v v^H.
        a = _reflect(a, v, field.conj(scale), field, op.GreaterOrEqual(rows, j), op.Greater(cols, j))
        a = op.Where(op.And(op.Equal(cols, j), op.GreaterOrEqual(rows, j)), op.Where(below, v, beta), a)
        tau = op.Where(op.Equal(taken, j), op.Squeeze(scale, [-1]), tau)
        return [a, tau]

    packed, tau = mx.loop(ctx, steps, [a, tau], step)
    return packed, tau


def apply_reflectors(
    ctx: OpContext, packed: ir.Value, tau: ir.Value, c: ir.Value, backwards: bool, field: Field = REAL,
    from_identity: bool = False,
) -> ir.Value:
    """``Q C = H_0 @ H_1 @ ... @ C`` (``backwards``: the last reflector is applied first) or
    ``Q^H C = ... H_1^H @ H_0^H @ C``. ``from_identity`` (C the identity's first columns: Q
    itself, as LAPACK's ``orgqr`` forms it) leaves the columns before reflector j alone, which
    it cannot change but an inf or NaN in the reflector would turn NaN."""
    packed, c = field.aligned(packed, c)
    # tau has one dim fewer than the reflectors: aligned to it like to a matrix stack of its rank.
    tau = field.aligned(tau, field.matrix(packed))[0]
    c = mx.broadcast_to_batch(c, packed)
    count = mx.size(tau, -1)
    rows = op.Range(0, mx.size(field.matrix(packed), -2), 1)
    columns = op.Range(0, mx.size(field.matrix(c), -1), 1) if from_identity else None

    def step(i: ir.Value, c: ir.Value) -> list[ir.Value]:
        j = op.Sub(op.Sub(count, 1), i) if backwards else i
        scale = op.Unsqueeze(op.Gather(tau, mx.at(j), axis=-1), [-1])
        scale = scale if backwards else field.conj(scale)
        v = _reflector_vector(packed, j, rows, field)
        touched = op.GreaterOrEqual(op.Unsqueeze(rows, [-1]), j)
        if columns is None:
            return [_reflect(c, v, scale, field, touched)]
        # Column j is still e_j here: its image e_j - scale v is written directly, as orgqr does
        # (the product v^H e_j multiplied an inf or NaN of v by the zeros of e_j).
        unit = field.from_real(op.Cast(op.Equal(op.Unsqueeze(rows, [-1]), j), to=mx.DOUBLE), mx.rank(field.matrix(v)))
        image = op.Sub(unit, field.mul(scale, v))
        return [op.Where(op.Equal(columns, j), image, _reflect(c, v, scale, field, touched, op.Greater(columns, j)))]

    return mx.loop(ctx, count, [c], step)[0]


@register_real_and_complex("aten::geqrf")
def aten_geqrf(self: ir.Value, *, ctx: OpContext) -> tuple[ir.Value, ir.Value]:
    """geqrf(Tensor self) -> (Tensor a, Tensor tau)"""
    field = field_of(ctx)
    packed, tau = householder_qr(ctx, field.enter(self), field)
    return field.leave(packed, self), field.leave(tau, self)


@register_real_and_complex("aten::linalg_householder_product")
def aten_linalg_householder_product(input: ir.Value, tau: ir.Value, *, ctx: OpContext) -> ir.Value:
    """linalg_householder_product(Tensor input, Tensor tau) -> Tensor"""
    field = field_of(ctx)
    packed = field.enter(input)
    shape = field.matrix(packed)
    identity = field.from_real(mx.eye(mx.size(shape, -2), mx.size(shape, -1)), mx.rank(shape))
    return field.leave(apply_reflectors(ctx, packed, field.enter(tau), identity, True, field, from_identity=True), input)


@register_real_and_complex("aten::ormqr")
def aten_ormqr(
    self: ir.Value, input2: ir.Value, input3: ir.Value, left: bool = True, transpose: bool = False, *, ctx: OpContext
) -> ir.Value:
    """ormqr(Tensor self, Tensor input2, Tensor input3, bool left=True, bool transpose=False) -> Tensor"""
    field = field_of(ctx)
    packed, tau, c = field.enter(self), field.enter(input2), field.enter(input3)
    # Q C applies the last reflector first, Q^H C the first; C Q = (Q^H C^H)^H, C Q^H = (Q C^H)^H.
    backwards = left != transpose
    if left:
        return field.leave(apply_reflectors(ctx, packed, tau, c, backwards, field), input3)
    return field.leave(field.adjoint(apply_reflectors(ctx, packed, tau, field.adjoint(c), backwards, field)), input3)


@register_real_and_complex("aten::linalg_qr")
def aten_linalg_qr(A: ir.Value, mode: str = "reduced", *, ctx: OpContext) -> tuple[ir.Value, ir.Value]:
    """linalg_qr(Tensor A, str mode="reduced") -> (Tensor Q, Tensor R)"""
    field = field_of(ctx)
    packed, tau = householder_qr(ctx, field.enter(A), field)
    shape = field.matrix(packed)
    m, n = mx.size(shape, -2), mx.size(shape, -1)
    rows, cols = mx.dims(shape)[-2:]
    r = mx.tril(packed, upper=True)
    if mode == "complete":
        q = apply_reflectors(ctx, packed, tau, field.from_real(mx.eye(m, m), mx.rank(shape)), True, field, from_identity=True)
        return field.leave(q, A), field.leave(r, A)
    k, static_k = op.Min(m, n), mx.smaller(rows, cols)
    r = field.leave(mx.take(r, k, -2, static_k), A)
    if mode == "r":
        return field.empty(A), r
    q = apply_reflectors(ctx, packed, tau, field.from_real(mx.eye(m, k), mx.rank(shape)), True, field, from_identity=True)
    return field.leave(q, A), r
