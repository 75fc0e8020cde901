"""Neural-network layers torchlib lacks at the level torch.export leaves them.

``adaptive_avg_pool*`` and ``_weight_norm`` appear as such in torch.export's graphs; without a
translation torch re-traces the program to decompose them into several nodes each.
"""

from __future__ import annotations

from typing import Any, Sequence

import onnx_ir as ir
import torch
from onnxscript import opset18 as op

from torch_onnx_fx.registry import register

__all__ = [
    "aten_weight_norm",
    "aten_adaptive_avg_pool",
    "aten_cdist_forward",
    "aten_cross_entropy_probabilities",
    "transformers_grouped_mm_fallback",
]


@register("aten::_weight_norm")
def aten_weight_norm(v: ir.Value, g: ir.Value, dim: int = 0) -> ir.Value:
    """_weight_norm(Tensor v, Tensor g, int dim=0) -> Tensor"""
    rank = v.shape.rank() if v.shape is not None else None
    if rank is None:
        raise ValueError("_weight_norm needs a weight of known rank")
    if dim < 0 and dim != -1:
        dim += rank
    axes = [a for a in range(rank) if a != dim] if dim != -1 else list(range(rank))
    norm = op.ReduceL2(v, op.Constant(value_ints=axes), keepdims=1)
    return op.Mul(v, op.Div(g, norm))


def _static_divisible_pool(node: Any) -> bool:
    """Every pooled dim static and a multiple of its output size: one (Global)AveragePool."""
    example = node.args[0].meta.get("val")
    output_size = node.args[1]
    if not isinstance(example, torch.Tensor) or not all(isinstance(o, int) and o > 0 for o in output_size):
        return False
    spatial = example.shape[-len(output_size):]
    return all(isinstance(s, int) and s % o == 0 for s, o in zip(spatial, output_size))


@register("aten::adaptive_avg_pool1d", "aten::adaptive_avg_pool2d", "aten::_adaptive_avg_pool2d", supports=_static_divisible_pool)
def aten_adaptive_avg_pool(self: ir.Value, output_size: Sequence[int]) -> ir.Value:
    """adaptive_avg_pool{1,2}d(Tensor self, SymInt[] output_size) -> Tensor"""
    spatial = [int(d) for d in self.shape[-len(output_size):]]
    unbatched = self.shape.rank() == len(output_size) + 1
    x = op.Unsqueeze(self, op.Constant(value_ints=[0])) if unbatched else self
    if all(o == 1 for o in output_size):
        pooled = op.GlobalAveragePool(x)
    else:
        kernel = [s // o for s, o in zip(spatial, output_size)]
        pooled = op.AveragePool(x, kernel_shape=kernel, strides=kernel)
    return op.Squeeze(pooled, op.Constant(value_ints=[0])) if unbatched else pooled


@register("aten::_cdist_forward")
def aten_cdist_forward(x1: ir.Value, x2: ir.Value, p: float, compute_mode: int | None = None) -> ir.Value:
    """_cdist_forward(Tensor x1, Tensor x2, float p, int? compute_mode) -> Tensor"""
    # [..., P, 1, M] - [..., 1, R, M]: all pairwise differences, reduced over the last dim.
    diff = op.Abs(op.Sub(op.Unsqueeze(x1, op.Constant(value_ints=[-2])), op.Unsqueeze(x2, op.Constant(value_ints=[-3]))))
    last = op.Constant(value_ints=[-1])
    if p == 0:
        return op.ReduceSum(op.CastLike(op.Not(op.Equal(diff, op.CastLike(0, diff))), diff), last, keepdims=0)
    if p == float("inf"):
        return op.ReduceMax(diff, last, keepdims=0)
    if p == 1:
        return op.ReduceSum(diff, last, keepdims=0)
    if p == 2:
        return op.Sqrt(op.ReduceSumSquare(diff, last, keepdims=0))
    return op.Pow(op.ReduceSum(op.Pow(diff, op.CastLike(p, diff)), last, keepdims=0), op.CastLike(1.0 / p, diff))


def _probability_targets(node: Any) -> bool:
    target = node.args[1].meta.get("val") if isinstance(node.args[1], torch.fx.Node) else None
    args = list(node.args) + [None] * 6
    weight = node.kwargs.get("weight", args[2])
    smoothing = node.kwargs.get("label_smoothing", args[5]) or 0.0
    return isinstance(target, torch.Tensor) and target.dtype.is_floating_point and weight is None and smoothing == 0.0


@register("aten::cross_entropy_loss", supports=_probability_targets)
def aten_cross_entropy_probabilities(
    self: ir.Value, target: ir.Value, weight: ir.Value | None = None, reduction: int = 1, ignore_index: int = -100, label_smoothing: float = 0.0
) -> ir.Value:
    """cross_entropy_loss with class probabilities as target: -sum(target * log_softmax(self), class dim)"""
    # ONNX SoftmaxCrossEntropyLoss only takes class indices.
    class_axis = 1 if self.shape.rank() > 1 else 0
    losses = op.Neg(op.ReduceSum(op.Mul(target, op.LogSoftmax(self, axis=class_axis)), op.Constant(value_ints=[class_axis]), keepdims=0))
    if reduction == 0:
        return losses
    if reduction == 2:
        return op.ReduceSum(losses, keepdims=0)
    # Mean over the batch and any extra dims: the element count of the per-sample losses.
    return op.ReduceMean(losses, keepdims=0)


@register("transformers::grouped_mm_fallback")
def transformers_grouped_mm_fallback(input: ir.Value, weight: ir.Value, offs: ir.Value) -> ir.Value:
    """grouped_mm_fallback(Tensor input, Tensor weight, Tensor offs) -> Tensor

    transformers' mixture-of-experts matmul: rows of ``input`` are sorted by expert and ``offs``
    holds each expert's cumulative row count; row r uses expert #{i : offs[i] <= r}.
    """
    rows = op.Range(op.Constant(value_int=0), op.Squeeze(op.Shape(input, start=0, end=1)), op.Constant(value_int=1))
    boundaries = op.Unsqueeze(op.Cast(offs, to=ir.DataType.INT64), op.Constant(value_ints=[0]))
    passed = op.LessOrEqual(boundaries, op.Unsqueeze(rows, op.Constant(value_ints=[1])))
    expert = op.ReduceSum(op.Cast(passed, to=ir.DataType.INT64), op.Constant(value_ints=[1]), keepdims=0)
    last_expert = op.Sub(op.Squeeze(op.Shape(weight, start=0, end=1)), op.Constant(value_int=1))
    expert = op.Min(expert, last_expert)
    per_row = op.Gather(weight, expert, axis=0)  # [S, input_dim, output_dim]
    product = op.MatMul(op.Unsqueeze(input, op.Constant(value_ints=[1])), per_row)
    return op.Squeeze(product, op.Constant(value_ints=[1]))
