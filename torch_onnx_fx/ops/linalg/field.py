"""The numbers a factorization computes with: real matrices, or complex ones with their parts first.

LU, triangular solves and Cholesky are the same algorithms over the real and the complex numbers;
only products, quotients, conjugation and the pivot's size differ. So the algorithms take a
:class:`Field` and leave those four to it. A complex matrix travels between translations as its
real view ``(..., m, n, 2)``; inside an algorithm it is ``(2, ..., m, n)`` — real part, imaginary
part — so that the gathers and masks on the matrix axes (-1, -2) work unchanged and the pair is
one more batch dim, which broadcasts against the real masks, permutations and pivots.
"""

from __future__ import annotations

from typing import Any, Callable

import onnx_ir as ir
import torch
from onnxscript import opset18 as op

from torch_onnx_fx.translate.op_context import OpContext
from torch_onnx_fx.ops.linalg import _matrix as mx
from torch_onnx_fx.registry import register, wants_context

__all__ = ["Field", "ComplexField", "REAL", "COMPLEX", "field_of", "register_real_and_complex"]


class Field:
    """The real numbers: every operation is ONNX's own."""

    is_complex = False

    def enter(self, x: ir.Value) -> ir.Value:
        """An input in the form the algorithms compute on (float64)."""
        return mx.double(x)

    def leave(self, x: ir.Value, reference: ir.Value) -> ir.Value:
        """A result back in the form and precision of ``reference``, a translation's input."""
        return mx.like(x, reference)

    def matrix(self, x: ir.Value) -> ir.Value:
        """A real tensor of the matrix stack's shape, to read sizes and batch dims from."""
        return x

    def empty(self, reference: ir.Value) -> ir.Value:
        """The empty tensor eager returns for an output not computed."""
        return mx.empty(reference)

    def aligned(self, *xs: ir.Value) -> list[ir.Value]:
        """Operands of one computation, with batch dims that broadcast against each other."""
        return list(xs)

    def mul(self, x: ir.Value, y: ir.Value) -> ir.Value:
        return op.Mul(x, y)

    def div(self, x: ir.Value, y: ir.Value) -> ir.Value:
        return op.Div(x, y)

    def pivot_size(self, x: ir.Value) -> ir.Value:
        """The magnitude LAPACK picks pivots by (``|x|``)."""
        return op.Abs(x)

    def is_zero(self, x: ir.Value) -> ir.Value:
        return op.Equal(x, 0.0)

    def one_where(self, condition: ir.Value, x: ir.Value) -> ir.Value:
        """``x`` with 1 where ``condition`` holds (a safe divisor)."""
        return op.Where(condition, 1.0, x)

    def real(self, x: ir.Value) -> ir.Value:
        return x

    def imag(self, x: ir.Value) -> ir.Value:
        return op.Expand(op.CastLike(0.0, x), op.Shape(x))

    def matmul(self, x: ir.Value, y: ir.Value) -> ir.Value:
        return op.MatMul(x, y)

    def from_real(self, x: ir.Value, rank: int | None = None) -> ir.Value:
        """``x`` as a matrix of this field that broadcasts against stacks of ``rank`` dims."""
        return x

    def adjoint(self, x: ir.Value) -> ir.Value:
        return mx.mT(x)

    def conj(self, x: ir.Value) -> ir.Value:
        return x

    def identity(self, size: ir.Value, rank: int = 2) -> ir.Value:
        return self.from_real(mx.eye(size, size), rank)

    def self_adjoint(self, x: ir.Value, upper: bool) -> ir.Value:
        """The symmetric (Hermitian) matrix stored in one triangle of ``x``; the other is not read."""
        return op.Add(mx.tril(x, upper), self.adjoint(mx.tril(x, upper, 1 if upper else -1)))


class ComplexField(Field):
    """The complex numbers, as ``(2, ..., m, n)`` real tensors."""

    is_complex = True

    def enter(self, x: ir.Value) -> ir.Value:
        width = mx.rank(x)
        return op.Transpose(mx.double(x), perm=[width - 1, *range(width - 1)])

    def leave(self, x: ir.Value, reference: ir.Value) -> ir.Value:
        width = mx.rank(x)
        return mx.like(op.Transpose(x, perm=[*range(1, width), 0]), reference)

    def aligned(self, *xs: ir.Value) -> list[ir.Value]:
        # Right-aligned broadcasting would match one operand's pair with another's batch dim:
        # give every operand the same number of batch dims, inserted after the pair.
        width = max(mx.rank(x) for x in xs)
        return [
            mx.shaped(op.Unsqueeze(x, list(range(1, 1 + width - mx.rank(x)))), [2, *[1] * (width - mx.rank(x)), *mx.dims(x)[1:]])
            if mx.rank(x) < width else x
            for x in xs
        ]

    def empty(self, reference: ir.Value) -> ir.Value:
        return op.Cast(op.ConstantOfShape([0, 2]), to=reference.dtype)

    @staticmethod
    def _parts(x: ir.Value) -> tuple[ir.Value, ir.Value]:
        return op.Gather(x, [0], axis=0), op.Gather(x, [1], axis=0)

    @staticmethod
    def pair(re: ir.Value, im: ir.Value) -> ir.Value:
        """The complex matrix of parts shaped ``(1, ..., m, n)``."""
        return op.Concat(re, im, axis=0)

    def matrix(self, x: ir.Value) -> ir.Value:
        return mx.shaped(op.Squeeze(op.Gather(x, [0], axis=0), [0]), mx.dims(x)[1:])

    def mul(self, x: ir.Value, y: ir.Value) -> ir.Value:
        (a, b), (c, d) = self._parts(x), self._parts(y)
        return self.pair(op.Sub(op.Mul(a, c), op.Mul(b, d)), op.Add(op.Mul(a, d), op.Mul(b, c)))

    def div(self, x: ir.Value, y: ir.Value) -> ir.Value:
        (a, b), (c, d) = self._parts(x), self._parts(y)
        norm = op.Add(op.Mul(c, c), op.Mul(d, d))
        return self.pair(op.Div(op.Add(op.Mul(a, c), op.Mul(b, d)), norm), op.Div(op.Sub(op.Mul(b, c), op.Mul(a, d)), norm))

    def pivot_size(self, x: ir.Value) -> ir.Value:
        # LAPACK's izamax compares |re| + |im| (cabs1), not the modulus: the same pivots as eager.
        a, b = self._parts(x)
        return op.Squeeze(op.Add(op.Abs(a), op.Abs(b)), [0])

    def is_zero(self, x: ir.Value) -> ir.Value:
        a, b = self._parts(x)
        return op.Squeeze(op.And(op.Equal(a, 0.0), op.Equal(b, 0.0)), [0])

    def one_where(self, condition: ir.Value, x: ir.Value) -> ir.Value:
        a, b = self._parts(x)
        return self.pair(op.Where(condition, 1.0, a), op.Where(condition, 0.0, b))

    def real(self, x: ir.Value) -> ir.Value:
        return op.Squeeze(op.Gather(x, [0], axis=0), [0])

    def imag(self, x: ir.Value) -> ir.Value:
        return op.Squeeze(op.Gather(x, [1], axis=0), [0])

    def matmul(self, x: ir.Value, y: ir.Value) -> ir.Value:
        (a, b), (c, d) = self._parts(x), self._parts(y)
        return self.pair(op.Sub(op.MatMul(a, c), op.MatMul(b, d)), op.Add(op.MatMul(a, d), op.MatMul(b, c)))

    def from_real(self, x: ir.Value, rank: int | None = None) -> ir.Value:
        # The pair must lead the batch dims it broadcasts with, not stand in for one of them.
        missing = 0 if rank is None else rank - mx.rank(x)
        x = op.Unsqueeze(x, list(range(missing + 1)))
        return self.pair(x, op.Expand(op.CastLike(0.0, x), op.Shape(x)))

    def adjoint(self, x: ir.Value) -> ir.Value:
        return self.conj(mx.mT(x))

    def conj(self, x: ir.Value) -> ir.Value:
        a, b = self._parts(x)
        return self.pair(a, op.Neg(b))


REAL = Field()
COMPLEX = ComplexField()


def field_of(ctx: OpContext) -> Field:
    """The field of a linear algebra node: complex when its first tensor argument is."""
    for example in ctx.inputs:
        if isinstance(example, torch.Tensor):
            return COMPLEX if example.is_complex() else REAL
    return REAL

def register_real_and_complex(target: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Register a translation written over a :class:`Field` for real and complex nodes alike
    (it takes ``ctx``, and ``field_of(ctx)`` picks the arithmetic)."""

    def decorate(fn: Callable[..., Any]) -> Callable[..., Any]:
        return register(target, complex=True)(register(target)(wants_context(fn)))

    return decorate
