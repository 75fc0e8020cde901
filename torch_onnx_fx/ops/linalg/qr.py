"""Householder QR in LAPACK's conventions: ``geqrf``, ``householder_product``, ``ormqr``, ``qr``.

Each reflector is chosen as LAPACK's ``larfg`` does (``beta = -sign(alpha) * norm``), so the packed
factor, ``tau``, Q and R all match eager.
"""

from __future__ import annotations

from typing import Any

import onnx_ir as ir
from onnxscript import opset18 as op

from torch_onnx_fx.ops.linalg import _matrix as mx
from torch_onnx_fx.registry import register, wants_context
from torch_onnx_fx.tracer import GraphTracer

__all__ = [
    "householder_qr",
    "apply_reflectors",
    "aten_geqrf",
    "aten_linalg_householder_product",
    "aten_ormqr",
    "aten_linalg_qr",
]


def _reflector_vector(packed: ir.Value, j: ir.Value, rows: ir.Value) -> ir.Value:
    """Householder vector ``j`` of LAPACK's packed form: 0 above row j, 1 at it, column j below."""
    rows = op.Unsqueeze(rows, [-1])
    column = op.Gather(packed, mx.at(j), axis=-1)
    return op.Where(op.Greater(rows, j), column, op.Cast(op.Equal(rows, j), to=mx.DOUBLE))


def householder_qr(tracer: GraphTracer, a: ir.Value) -> tuple[ir.Value, ir.Value]:
    """Householder QR in LAPACK's packed form (``geqrf``): R on and above the diagonal, the
    reflectors' tails below it, and their scales ``tau``."""
    m, n = mx.size(a, -2), mx.size(a, -1)
    steps = op.Min(m, n)
    rows, cols, taken = op.Unsqueeze(op.Range(0, m, 1), [-1]), op.Range(0, n, 1), op.Range(0, steps, 1)
    dims = mx.dims(a)
    tau = mx.fill(0.0, mx.shape_vector(mx.batch_shape(a), steps), [*dims[:-2], mx.smaller(*dims[-2:])], mx.DOUBLE)

    def step(j: ir.Value, a: ir.Value, tau: ir.Value) -> list[ir.Value]:
        column = op.Gather(a, mx.at(j), axis=-1)
        alpha = op.Gather(column, mx.at(j), axis=-2)
        below = op.Greater(rows, j)
        tail = op.ReduceSum(op.Where(below, op.Mul(column, column), 0.0), [-2], keepdims=1)
        norm = op.Sqrt(op.Add(op.Mul(alpha, alpha), tail))
        # beta = -sign(alpha) * norm, sign(0) = +1; nothing to reflect when the tail is zero.
        trivial = op.Equal(tail, 0.0)
        beta = op.Where(trivial, alpha, op.Where(op.Less(alpha, 0.0), norm, op.Neg(norm)))
        scale = op.Where(trivial, 0.0, op.Div(op.Sub(beta, alpha), beta))
        v = op.Where(below, op.Div(column, op.Where(trivial, 1.0, op.Sub(alpha, beta))), op.Cast(op.Equal(rows, j), to=mx.DOUBLE))
        projection = op.ReduceSum(op.Mul(v, a), [-2], keepdims=1)
        a = op.Sub(a, op.Where(op.Greater(cols, j), op.Mul(op.Mul(scale, v), projection), 0.0))
        a = op.Where(op.And(op.Equal(cols, j), op.GreaterOrEqual(rows, j)), op.Where(below, v, beta), a)
        tau = op.Where(op.Equal(taken, j), op.Squeeze(scale, [-1]), tau)
        return [a, tau]

    packed, tau = mx.loop(tracer, steps, [a, tau], step)
    return packed, tau


def apply_reflectors(tracer: GraphTracer, packed: ir.Value, tau: ir.Value, c: ir.Value, backwards: bool) -> ir.Value:
    """``H_0 @ H_1 @ ... @ C`` (``backwards``: the last reflector is applied first) or ``... H_1 @ H_0 @ C``."""
    c = mx.broadcast_to_batch(c, packed)
    count = mx.size(tau, -1)
    rows = op.Range(0, mx.size(packed, -2), 1)

    def step(i: ir.Value, c: ir.Value) -> list[ir.Value]:
        j = op.Sub(op.Sub(count, 1), i) if backwards else i
        v = _reflector_vector(packed, j, rows)
        scale = op.Unsqueeze(op.Gather(tau, mx.at(j), axis=-1), [-1])
        projection = op.ReduceSum(op.Mul(v, c), [-2], keepdims=1)
        return [op.Sub(c, op.Mul(op.Mul(scale, v), projection))]

    return mx.loop(tracer, count, [c], step)[0]


@register("aten::geqrf", supports=mx.real_inputs)
@wants_context
def aten_geqrf(self: ir.Value, *, ctx: Any, node: Any) -> tuple[ir.Value, ir.Value]:
    """geqrf(Tensor self) -> (Tensor a, Tensor tau)"""
    packed, tau = householder_qr(ctx.tracer, mx.double(self))
    return mx.like(packed, self), mx.like(tau, self)


@register("aten::linalg_householder_product", supports=mx.real_inputs)
@wants_context
def aten_linalg_householder_product(input: ir.Value, tau: ir.Value, *, ctx: Any, node: Any) -> ir.Value:
    """linalg_householder_product(Tensor input, Tensor tau) -> Tensor"""
    packed = mx.double(input)
    identity = mx.eye(mx.size(packed, -2), mx.size(packed, -1))
    return mx.like(apply_reflectors(ctx.tracer, packed, mx.double(tau), identity, backwards=True), input)


@register("aten::ormqr", supports=mx.real_inputs)
@wants_context
def aten_ormqr(
    self: ir.Value, input2: ir.Value, input3: ir.Value, left: bool = True, transpose: bool = False, *, ctx: Any, node: Any
) -> ir.Value:
    """ormqr(Tensor self, Tensor input2, Tensor input3, bool left=True, bool transpose=False) -> Tensor"""
    packed, tau, c = mx.double(self), mx.double(input2), mx.double(input3)
    # Q C applies the last reflector first, Q^T C the first; C Q = (Q^T C^T)^T, C Q^T = (Q C^T)^T.
    backwards = left != transpose
    if left:
        return mx.like(apply_reflectors(ctx.tracer, packed, tau, c, backwards), input3)
    return mx.like(mx.mT(apply_reflectors(ctx.tracer, packed, tau, mx.mT(c), backwards)), input3)


@register("aten::linalg_qr", supports=mx.real_inputs)
@wants_context
def aten_linalg_qr(A: ir.Value, mode: str = "reduced", *, ctx: Any, node: Any) -> tuple[ir.Value, ir.Value]:
    """linalg_qr(Tensor A, str mode="reduced") -> (Tensor Q, Tensor R)"""
    packed, tau = householder_qr(ctx.tracer, mx.double(A))
    m, n = mx.size(packed, -2), mx.size(packed, -1)
    rows, cols = mx.dims(packed)[-2:]
    r = mx.tril(packed, upper=True)
    if mode == "complete":
        return mx.like(apply_reflectors(ctx.tracer, packed, tau, mx.eye(m, m), backwards=True), A), mx.like(r, A)
    k, static_k = op.Min(m, n), mx.smaller(rows, cols)
    r = mx.like(mx.take(r, k, -2, static_k), A)
    if mode == "r":
        return mx.empty(A), r
    return mx.like(apply_reflectors(ctx.tracer, packed, tau, mx.eye(m, k), backwards=True), A), r
