"""``torch.unique`` of floating tensors: every NaN its own value, as ATen counts them.

ONNX's ``Unique`` (torchlib's translation) folds NaNs together or drops them: ``unique([1, nan,
2, nan, 1])`` had 2 values where eager has 4 (``[1, 2, nan, nan]``), silently (torch.onnx the
same). Here the numbers are made unique by ``Unique`` and the NaNs follow them, each with a count
of 1 and the next inverse index, in input order, as ATen sorts them last.
"""

from __future__ import annotations

import onnx_ir as ir
import torch
from onnxscript import opset18 as op

from torch_onnx_fx.ops import _tensors as tx
from torch_onnx_fx.registry import arg_example, register

__all__ = ["aten_unique2_floating"]


def _floating(node: torch.fx.Node) -> bool:
    example = arg_example(node)
    return isinstance(example, torch.Tensor) and example.dtype.is_floating_point


@register("aten::_unique2", supports=_floating)
def aten_unique2_floating(
    self: ir.Value, sorted: bool = True, return_inverse: bool = False, return_counts: bool = False
) -> tuple[ir.Value, ir.Value, ir.Value]:
    """_unique2(Tensor self, bool sorted=True, bool return_inverse=False, bool return_counts=False) -> (Tensor, Tensor, Tensor)

    Sorted either way: ATen's CPU kernel sorts when asked not to."""
    flat = op.Reshape(self, tx.ints(-1))
    nan = op.IsNaN(flat)
    numbers = op.Not(nan)
    values, _, number_inverse, number_counts = op.Unique(op.Compress(flat, numbers, axis=0), axis=None, sorted=1)
    nans = op.Compress(flat, nan, axis=0)
    result = op.Concat(values, nans, axis=0)
    empty = op.Constant(value=ir.tensor(torch.zeros(0, dtype=torch.int64).numpy()))
    inverse = counts = empty
    if return_inverse:
        # The n-th NaN (counting from 0) is value len(values) + n.
        nan_rank = op.Sub(op.CumSum(op.Cast(nan, to=ir.DataType.INT64), tx.int64(0)), tx.int64(1))
        after_numbers = op.Add(op.Shape(values), nan_rank)
        positions = op.Reshape(op.NonZero(numbers), tx.ints(-1))
        scattered = op.ScatterElements(op.ConstantOfShape(op.Shape(flat), value=ir.tensor([0], dtype=ir.DataType.INT64)), positions, number_inverse, axis=0)
        inverse = op.Reshape(op.Where(nan, after_numbers, scattered), op.Shape(self), allowzero=1)
    if return_counts:
        ones = op.Expand(tx.int64(1), op.Shape(nans))
        counts = op.Concat(number_counts, ones, axis=0)
    return result, inverse, counts
