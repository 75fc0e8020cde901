"""Normalization layers as single ONNX operators where the opset has them.

``GroupNormalization`` (opset 21, per-channel scale and bias) and ``RMSNormalization`` (opset 23)
replace the mean/variance arithmetic torchlib or a decomposition would otherwise produce; for
``rms_norm`` below opset 23 we still write a compact formula rather than let torch decompose it.
"""

from __future__ import annotations

from typing import Sequence

import onnx_ir as ir
from onnxscript import opset18 as op
from onnxscript import opset21, opset23

from torch_onnx_fx.registry import register

__all__ = ["aten_group_norm_opset21", "aten_rms_norm", "aten_rms_norm_opset23"]


def _per_channel(value: ir.Value | None, x: ir.Value, fill: float) -> ir.Value:
    """``value`` or a vector of ``fill`` with one entry per channel (dim 1) of ``x``."""
    if value is not None:
        return value
    channels = op.Shape(x, start=1, end=2)
    return op.Expand(op.CastLike(fill, x), channels)


@register("aten::group_norm", min_opset=21)
def aten_group_norm_opset21(
    input: ir.Value,
    num_groups: int,
    weight: ir.Value | None = None,
    bias: ir.Value | None = None,
    eps: float = 1e-05,
    cudnn_enabled: bool = True,
) -> ir.Value:
    """group_norm(Tensor input, int num_groups, Tensor? weight=None, Tensor? bias=None, float eps=1e-05, bool cudnn_enabled=True) -> Tensor"""
    scale = _per_channel(weight, input, 1.0)
    shift = _per_channel(bias, input, 0.0)
    # stash_type=1: statistics in float32 even for float16 inputs, as ATen computes them.
    return opset21.GroupNormalization(input, scale, shift, epsilon=eps, num_groups=num_groups, stash_type=1)


def _axes(rank: int, normalized_shape: Sequence[int]) -> list[int]:
    return list(range(rank - len(normalized_shape), rank))


@register("aten::rms_norm", min_opset=23)
def aten_rms_norm_opset23(
    input: ir.Value, normalized_shape: Sequence[int], weight: ir.Value | None = None, eps: float | None = None
) -> ir.Value:
    """rms_norm(Tensor input, SymInt[] normalized_shape, Tensor? weight=None, float? eps=None) -> Tensor"""
    if weight is None:
        weight = op.CastLike(1.0, input)
    axis = -len(normalized_shape)
    attrs = {"axis": axis, "stash_type": 1}
    if eps is not None:
        attrs["epsilon"] = eps
    else:
        attrs["epsilon"] = _finfo_eps(input)
    return opset23.RMSNormalization(input, weight, **attrs)


@register("aten::rms_norm")
def aten_rms_norm(
    input: ir.Value, normalized_shape: Sequence[int], weight: ir.Value | None = None, eps: float | None = None
) -> ir.Value:
    """rms_norm(Tensor input, SymInt[] normalized_shape, Tensor? weight=None, float? eps=None) -> Tensor"""
    rank = input.shape.rank() if input.shape is not None else None
    if rank is None:
        raise ValueError("rms_norm needs an input of known rank")
    axes = op.Constant(value_ints=_axes(rank, normalized_shape))
    # ATen accumulates in float32 for half-precision inputs; so do we.
    compute = input if input.dtype in (ir.DataType.FLOAT, ir.DataType.DOUBLE) else op.Cast(input, to=ir.DataType.FLOAT)
    epsilon = eps if eps is not None else _finfo_eps(input)
    mean_square = op.ReduceMean(op.Mul(compute, compute), axes, keepdims=1)
    normalized = op.Mul(compute, op.Reciprocal(op.Sqrt(op.Add(mean_square, epsilon))))
    result = op.CastLike(normalized, input)
    return result if weight is None else op.Mul(result, weight)


def _finfo_eps(value: ir.Value) -> float:
    """torch.finfo(dtype).eps, ATen's default epsilon for rms_norm."""
    import torch
    from onnx_ir.tensor_adapters import to_torch_dtype

    dtype = to_torch_dtype(value.dtype) if value.dtype is not None else torch.float32
    return float(torch.finfo(dtype).eps)
