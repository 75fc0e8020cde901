"""Functional forms of writes into views (``*_scatter``) that torchlib lacks or makes long.

torch.export writes ``x.diagonal().copy_(src)`` as ``diagonal_scatter``; torch's decomposition
of it copies into a view (``prims.copy_to``), which cannot be functionalized, so without a
translation the export fails.

Functionalization writes ``h[:, 0] += 1`` as a ``select_scatter`` into ``h[:]`` followed by a
``slice_scatter`` of the result back over the whole of dim 0: that outer write replaces every
element, so its result is ``src`` itself. torchlib builds it as Shape/Gather/Range/Slice/
Unsqueeze/ScatterND (and Transposes around them off dim 0), run at every inference.

Other slices and selects written into are the parts of ``self`` before and after the written
range concatenated around ``src`` (a strided slice: a ``ScatterElements`` at its positions), so
that graphs with them (in-place writes of caches and states) do not load torchlib.
"""

from __future__ import annotations

import sys
from typing import Any

import onnx_ir as ir
import torch
from onnxscript import opset18 as op

from torch_onnx_fx.normalize.arange_indexing import whole_range
from torch_onnx_fx.ops import _tensors as tx
from torch_onnx_fx.registry import arg_example, arg_value, register, wants_context
from torch_onnx_fx.translate.op_context import OpContext

__all__ = ["aten_diagonal_scatter", "aten_slice_scatter_whole", "aten_slice_scatter_bounds", "aten_select_scatter"]


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


def _resolve(size: Any, start: Any, end: Any, step: Any) -> tuple[int, int | None, int] | None:
    """A slice's (start, end or None for "to the end", step) as ATen resolves them, when numbers
    and Slice's own clamping give ATen's range: non-negative bounds on any size (the end raised to
    the start, as ATen does), negative ones and strides only where the dim's size is known."""
    if any(v is not None and (not isinstance(v, int) or isinstance(v, bool)) for v in (start, end, step)):
        return None
    start, step = start or 0, step or 1
    end = None if end is None or end >= sys.maxsize else end
    if start < 0 or (end is not None and end < 0):
        if not isinstance(size, int):
            return None
        start = min(max(start + size if start < 0 else start, 0), size)
        end = None if end is None else min(max(end + size if end < 0 else end, 0), size)
    if end is not None and end < start:
        end = start
    if step > 1:
        if not isinstance(size, int):
            return None
        end = size if end is None else min(end, size)
    return (start, end, step) if step >= 1 else None


def _bounds(node: torch.fx.Node) -> tuple[int, int | None, int] | None:
    self_example = arg_example(node, 0)
    dim = arg_value(node, 2, "dim", 0)
    if not isinstance(self_example, torch.Tensor) or self_example.dim() == 0 or self_example.is_complex() or not isinstance(dim, int):
        return None
    size = self_example.shape[dim % self_example.dim()]
    return _resolve(size, arg_value(node, 3, "start", None), arg_value(node, 4, "end", None), arg_value(node, 5, "step", 1))


@register("aten::slice_scatter", supports=lambda node: _bounds(node) is not None)
@wants_context
def aten_slice_scatter_bounds(
    self: ir.Value, src: ir.Value, dim: int = 0, start: Any = None, end: Any = None, step: int = 1, *, ctx: OpContext
) -> ir.Value:
    """slice_scatter(Tensor self, Tensor src, int dim=0, SymInt? start=None, SymInt? end=None, SymInt step=1)
    by numbers: ``self`` before the slice, ``src``, ``self`` after it (ATen has checked that
    ``src`` has the slice's shape); a strided slice scatters ``src`` to its positions."""
    example = ctx.inputs[0]
    rank = example.dim()
    dim %= rank
    start, end, step = _resolve(example.shape[dim], start, end, step)
    if step == 1:
        pieces = ([tx.slice_axis(self, dim, 0, start)] if start > 0 else []) + [src] + ([tx.slice_axis(self, dim, end, None)] if end is not None else [])
        return op.Concat(*pieces, axis=dim) if len(pieces) > 1 else op.Identity(src)
    along = [1] * rank
    along[dim] = -1
    positions = op.Constant(value_ints=list(range(start, end, step)))
    return op.ScatterElements(self, op.Expand(op.Reshape(positions, op.Constant(value_ints=along)), op.Shape(src)), src, axis=dim)


def _select_by_number(node: torch.fx.Node) -> bool:
    self_example = arg_example(node, 0)
    dim, index = arg_value(node, 2, "dim"), arg_value(node, 3, "index")
    return (
        isinstance(self_example, torch.Tensor) and self_example.dim() > 0 and not self_example.is_complex()
        and isinstance(dim, int) and isinstance(index, int) and not isinstance(index, bool)
    )


@register("aten::select_scatter", supports=_select_by_number)
def aten_select_scatter(self: ir.Value, src: ir.Value, dim: int, index: int) -> ir.Value:
    """select_scatter(Tensor self, Tensor src, int dim, SymInt index) -> Tensor: ``src`` (``self``
    without ``dim``) put back as that dim's ``index``-th entry between the entries around it;
    a negative index counts from the end, in ATen and in Slice alike."""
    dim %= self.shape.rank()
    pieces = [op.Unsqueeze(src, op.Constant(value_ints=[dim]))]
    if index != 0:
        pieces.insert(0, tx.slice_axis(self, dim, 0, index))
    if index != -1:
        pieces.append(tx.slice_axis(self, dim, index + 1, None))
    return op.Concat(*pieces, axis=dim) if len(pieces) > 1 else pieces[0]
