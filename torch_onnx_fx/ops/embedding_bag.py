"""float64 ``embedding_bag`` (sum and mean) as ATen computes it, without narrowing.

torchlib collects the bags in a float32 sequence (after an ONNX Runtime bug with other element
types), and torch has no decomposition to fall back to, so a float64 bag lost half its digits.
Here each looked-up row (times its ``per_sample_weights``) is added into its bag's row with one
``ScatterElements(reduction="add")``, which adds in index order as ATen's loop over the indices
does; a mean divides by the bag's count (at least 1: an empty bag is zeros). Rows at
``padding_idx`` go to a spare row cut off after; with ``include_last_offset`` the last offset's
value is ignored, as ATen ignores it (the last bag runs to the end). ``max`` bags (where ATen's running maximum skips a later NaN) and the other
results (``offset2bag``, ``bag_size``, ``max_indices``) stay refused.
"""

from __future__ import annotations

from typing import Any

import onnx_ir as ir
import torch
from onnxscript import opset18 as op

from torch_onnx_fx.errors import TranslationError
from torch_onnx_fx.registry import arg_value, float64_input, register, wants_context
from torch_onnx_fx.translate.op_context import OpContext

__all__ = ["aten_embedding_bag_float64"]

_SUM, _MEAN = 0, 1


def _sum_or_mean(node: torch.fx.Node) -> bool:
    return float64_input(node) and arg_value(node, 4, "mode", 0) in (_SUM, _MEAN)


@register(
    "aten::embedding_bag", "aten::embedding_bag.padding_idx", "aten::_embedding_bag", "aten::_embedding_bag_forward_only",
    supports=_sum_or_mean,
)
@wants_context
def aten_embedding_bag_float64(
    weight: ir.Value, indices: ir.Value, offsets: ir.Value, scale_grad_by_freq: bool = False, mode: int = 0,
    sparse: bool = False, per_sample_weights: ir.Value | None = None, include_last_offset: bool = False,
    padding_idx: int | None = None, *, ctx: OpContext,
) -> tuple[Any, ...]:
    """embedding_bag.padding_idx(Tensor weight, Tensor indices, Tensor offsets, bool scale_grad_by_freq, int mode,
    bool sparse, Tensor? per_sample_weights, bool include_last_offset, int? padding_idx) -> (Tensor, Tensor, Tensor,
    Tensor), float64 sums and means"""
    if ctx.results_read is None or ctx.results_read - {0}:
        raise TranslationError(
            "embedding_bag's offset2bag, bag_size and max_indices results are not exported; only its bags can be."
        )
    if ctx.inputs[1].dim() != 1:
        raise TranslationError("embedding_bag with 2-D indices and offsets is not exported (use 1-D indices and offsets)")
    if padding_idx is not None and padding_idx < 0 and ctx.target == "aten::embedding_bag.padding_idx":
        # This overload wraps a negative padding_idx (None is "no padding"); the internal ones
        # are given it wrapped, with -1 for none.
        rows_count = ctx.inputs[0].shape[0]
        if not isinstance(rows_count, int):
            raise TranslationError("embedding_bag with a negative padding_idx needs a static number of embeddings")
        padding_idx += rows_count
    zero, one = op.Constant(value_int=0), op.Constant(value_int=1)
    offsets = op.Cast(offsets, to=ir.DataType.INT64)
    if include_last_offset:
        # ATen ignores the last offset's value: the last bag runs to the end of the indices.
        offsets = op.Slice(offsets, op.Constant(value_ints=[0]), op.Constant(value_ints=[-1]))
    bags = op.Shape(offsets)
    # Each index position's bag: how many offsets (after the first) it has reached.
    positions = op.Range(zero, op.Squeeze(op.Shape(indices)), one)
    reached = op.LessOrEqual(op.Unsqueeze(offsets, op.Constant(value_ints=[0])), op.Unsqueeze(positions, op.Constant(value_ints=[1])))
    bag = op.Sub(op.ReduceSum(op.Cast(reached, to=ir.DataType.INT64), op.Constant(value_ints=[1]), keepdims=0), one)
    spare = op.Squeeze(bags)
    # Entries at padding_idx go to the spare row, cut off after.
    unused = op.Equal(indices, op.CastLike(op.Constant(value_int=int(padding_idx) if padding_idx is not None else -1), indices))
    bag = op.Where(unused, spare, bag)
    rows = op.Gather(weight, indices, axis=0)
    if per_sample_weights is not None:
        rows = op.Mul(rows, op.Unsqueeze(per_sample_weights, op.Constant(value_ints=[1])))
    width = op.Shape(weight, start=1, end=2)
    targets = op.Expand(op.Unsqueeze(bag, op.Constant(value_ints=[1])), op.Shape(rows))
    base = op.ConstantOfShape(op.Concat(op.Add(bags, one), width, axis=0), value=ir.tensor([0.0], dtype=ir.DataType.DOUBLE))
    sums = op.ScatterElements(base, targets, rows, axis=0, reduction="add")
    result = op.Slice(sums, op.Constant(value_ints=[0]), bags, op.Constant(value_ints=[0]))
    if mode == _MEAN:
        counted = op.Cast(op.Not(unused), to=ir.DataType.INT64)
        count = op.ScatterElements(op.ConstantOfShape(op.Add(bags, one), value=ir.tensor([0], dtype=ir.DataType.INT64)), bag, counted, axis=0, reduction="add")
        count = op.Max(op.Slice(count, op.Constant(value_ints=[0]), bags, op.Constant(value_ints=[0])), one)
        result = op.Div(result, op.Unsqueeze(op.Cast(count, to=ir.DataType.DOUBLE), op.Constant(value_ints=[1])))
    return result, None, None, None
