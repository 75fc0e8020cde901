"""Functional forms of writes into views (``*_scatter``) that torchlib lacks or makes long.

torch.export writes ``x.diagonal().copy_(src)`` as ``diagonal_scatter``; torch's decomposition
of it copies into a view (``prims.copy_to``), which cannot be functionalized, so without a
translation the export fails.

Functionalization writes ``h[:, 0] += 1`` as a ``select_scatter`` into ``h[:]`` followed by a
``slice_scatter`` of the result back over the whole of dim 0: that outer write replaces every
element, so its result is ``src`` itself. torchlib builds it as Shape/Gather/Range/Slice/
Unsqueeze/ScatterND (and Transposes around them off dim 0), run at every inference.
"""

from __future__ import annotations

from typing import Any

import onnx_ir as ir
import torch
from onnxscript import opset18 as op

from torch_onnx_fx.normalize.arange_indexing import whole_range
from torch_onnx_fx.registry import arg_example, arg_value, register

__all__ = ["aten_diagonal_scatter", "aten_slice_scatter_whole"]


def _scalar(value: int) -> ir.Value:
    return op.Constant(value_int=value)


@register("aten::diagonal_scatter")
def aten_diagonal_scatter(self: ir.Value, src: ir.Value, offset: int = 0, dim1: int = 0, dim2: int = 1) -> ir.Value:
    """diagonal_scatter(Tensor self, Tensor src, int offset=0, int dim1=0, int dim2=1) -> Tensor

    ``src`` holds the diagonal along its last dim (as ``diagonal`` returns it). The two dims are
    moved last; element (a, b) takes ``src[..., a if offset >= 0 else b]`` where ``b - a ==
    offset`` and keeps ``self`` elsewhere.
    """
    rank = self.shape.rank()
    dim1, dim2 = dim1 % rank, dim2 % rank
    rest = [d for d in range(rank) if d not in (dim1, dim2)]
    perm = [*rest, dim1, dim2]
    inverse = [perm.index(d) for d in range(rank)]
    moved = op.Transpose(self, perm=perm)
    rows = op.Range(_scalar(0), op.Squeeze(op.Shape(self, start=dim1, end=dim1 + 1)), _scalar(1))
    cols = op.Range(_scalar(0), op.Squeeze(op.Shape(self, start=dim2, end=dim2 + 1)), _scalar(1))
    row_grid = op.Unsqueeze(rows, op.Constant(value_ints=[1]))  # [n1, 1]
    col_grid = op.Unsqueeze(cols, op.Constant(value_ints=[0]))  # [1, n2]
    on_diagonal = op.Equal(op.Sub(col_grid, row_grid), _scalar(offset))
    # [n1, n2]: each element's index into the diagonal (adding the other grid times 0 broadcasts)
    if offset >= 0:
        position = op.Add(row_grid, op.Mul(col_grid, _scalar(0)))
    else:
        position = op.Add(col_grid, op.Mul(row_grid, _scalar(0)))
    # Off-diagonal positions may point past the diagonal's end; clamp them (Where discards them).
    last = op.Squeeze(op.Shape(src, start=-1))
    position = op.Clip(position, _scalar(0), last)
    # One padding element keeps the Gather valid when the diagonal is empty.
    pad = op.Expand(op.CastLike(0, src), op.Concat(op.Shape(src, end=-1), op.Constant(value_ints=[1]), axis=0))
    values = op.Gather(op.Concat(src, pad, axis=-1), position, axis=-1)  # [..., n1, n2]
    return op.Transpose(op.Where(on_diagonal, values, moved), perm=inverse)


def _writes_whole_dimension(node: torch.fx.Node) -> bool:
    """Whether the slice runs over all of ``self``'s dim: start 0, step 1, an end at or past its
    size (``sys.maxsize`` as functionalization writes it, or a size known to be no smaller)."""
    self_example = arg_example(node, 0)
    if not isinstance(self_example, torch.Tensor) or self_example.dim() == 0:
        return False
    dim = arg_value(node, 2, "dim", 0)
    if not isinstance(dim, int):
        return False
    size = self_example.shape[dim % self_example.dim()]
    return whole_range(size, arg_value(node, 3, "start", None), arg_value(node, 4, "end", None), arg_value(node, 5, "step", 1))


@register("aten::slice_scatter", supports=_writes_whole_dimension)
def aten_slice_scatter_whole(
    self: ir.Value, src: ir.Value, dim: int = 0, start: Any = None, end: Any = None, step: int = 1
) -> ir.Value:
    """slice_scatter(Tensor self, Tensor src, int dim=0, SymInt? start=None, SymInt? end=None, SymInt step=1)
    over the whole of ``dim``: every element of ``self`` is overwritten, and ATen has checked that
    ``src`` has the slice's (here ``self``'s) shape; normalize has cast it to ``self``'s dtype."""
    return op.Identity(src)
