"""Diagonals read by position.

torchlib takes a diagonal by multiplying the matrix with an identity mask and summing each row:
one infinity or NaN anywhere in the matrix (a score matrix with -inf where a mask hides it) makes
``inf * 0`` a NaN in every row, so ``diagonal``, ``diag`` and ``trace`` returned NaN where eager
returns the diagonal's own values. Here the diagonal's elements are gathered from the flattened
matrix by their positions (``(i + r) * cols + (i + c)``), which reads nothing else and needs no
arithmetic on the values, for every dtype.
"""

from __future__ import annotations

import onnx_ir as ir
from onnxscript import opset18 as op

from torch_onnx_fx.registry import register

__all__ = ["aten_diagonal"]


def _int(value: int) -> ir.Value:
    return op.Constant(value_ints=[value])


@register("aten::diagonal", "aten::diagonal_copy")
def aten_diagonal(self: ir.Value, offset: int = 0, dim1: int = 0, dim2: int = 1) -> ir.Value:
    """diagonal(Tensor(a) self, int offset=0, int dim1=0, int dim2=1) -> Tensor(a)"""
    rank = len(self.shape)
    dim1, dim2 = dim1 % rank, dim2 % rank
    perm = [d for d in range(rank) if d not in (dim1, dim2)] + [dim1, dim2]
    matrices = self if perm == list(range(rank)) else op.Transpose(self, perm=perm)
    rows = op.Shape(matrices, start=-2, end=-1)
    cols = op.Shape(matrices, start=-1)
    first_row, first_col = max(-offset, 0), max(offset, 0)
    count = op.Max(op.Min(op.Sub(rows, _int(first_row)), op.Sub(cols, _int(first_col))), _int(0))
    steps = op.Range(op.Constant(value_int=0), op.Squeeze(count, [0]), op.Constant(value_int=1))
    row_index = op.Add(steps, op.Constant(value_int=first_row))
    col_index = op.Add(steps, op.Constant(value_int=first_col))
    positions = op.Add(op.Mul(row_index, op.Squeeze(cols, [0])), col_index)
    # rows * cols spelled out: a -1 cannot be resolved when a leading dim is 0.
    flat = op.Reshape(matrices, op.Concat(op.Shape(matrices, end=-2), op.Mul(rows, cols), axis=0))
    return op.Gather(flat, positions, axis=-1)
