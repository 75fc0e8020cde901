"""Normalization layers as single ONNX operators where the opset has them.

``GroupNormalization`` (opset 21, per-channel scale and bias) and ``RMSNormalization`` (opset 23)
replace the mean/variance arithmetic torchlib or a decomposition would otherwise produce; for
``rms_norm`` below opset 23 we still write a compact formula rather than let torch decompose it.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import onnx_ir as ir
import torch
from onnxscript import opset18 as op
from onnxscript import opset21, opset23

from torch_onnx_fx.dtypes import onnx_dtype
from torch_onnx_fx.registry import arg_example, register, wants_context
from torch_onnx_fx.translate.op_context import OpContext

__all__ = [
    "aten_native_batch_norm_legit_no_stats",
    "aten_native_batch_norm_legit_no_training",
    "aten_group_norm_opset21",
    "aten_group_norm_of_empty_batch",
    "aten_native_group_norm_of_empty_batch",
    "aten_rms_norm",
    "aten_rms_norm_opset23",
    "aten_batch_norm",
    "aten_native_batch_norm",
    "aten_native_batch_norm_legit_functional",
]


def _per_channel(value: ir.Value | None, x: ir.Value, fill: float) -> ir.Value:
    """``value`` or a vector of ``fill`` with one entry per channel (dim 1) of ``x``."""
    if value is not None:
        return value
    channels = op.Shape(x, start=1, end=2)
    return op.Expand(op.CastLike(fill, x), channels)


def _empty_batch(node: Any) -> bool:
    example = arg_example(node)
    return isinstance(example, torch.Tensor) and example.dim() > 0 and isinstance(example.shape[0], int) and example.shape[0] == 0


@register("aten::group_norm", supports=_empty_batch)
def aten_group_norm_of_empty_batch(input: ir.Value, num_groups: int, *args: Any, **kwargs: Any) -> ir.Value:
    """group_norm of a batch of 0 samples: an empty result of the input's shape.

    Every other translation views the input as [N, groups, -1], which ONNX cannot reshape when N
    is 0 (the -1 is ambiguous: ONNX Runtime refuses the model at load), ONNX Runtime's
    GroupNormalization (opset 21) included. Registered first, so it is preferred to both."""
    return op.Identity(input)


@register("aten::native_group_norm", supports=_empty_batch)
@wants_context
def aten_native_group_norm_of_empty_batch(
    input: ir.Value, weight: ir.Value | None, bias: ir.Value | None, N: Any, C: Any, HxW: Any, group: int, eps: float, *, ctx: OpContext
) -> tuple[ir.Value, ir.Value, ir.Value]:
    """native_group_norm(Tensor input, Tensor? weight, Tensor? bias, SymInt N, SymInt C, SymInt HxW, int group, float eps) -> (Tensor, Tensor, Tensor)
    of a batch of 0 samples: the empty input and [0, group] statistics, for the same reason."""
    statistics = op.ConstantOfShape(op.Constant(value_ints=[0, group]), value=ir.tensor(np.zeros(1, dtype=onnx_dtype(ctx.result[1].dtype).numpy())))
    return op.Identity(input), statistics, statistics


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


_HALF = (ir.DataType.FLOAT16, ir.DataType.BFLOAT16)


@register("aten::rms_norm", min_opset=23)
def aten_rms_norm_opset23(
    input: ir.Value, normalized_shape: Sequence[int], weight: ir.Value | None = None, eps: float | None = None
) -> ir.Value:
    """rms_norm(Tensor input, SymInt[] normalized_shape, Tensor? weight=None, float? eps=None) -> Tensor

    A half-precision input is normalized in float32 and its weight applied there too, rounding
    once as ATen does; ONNX's RMSNormalization would apply the scale after rounding."""
    epsilon = eps if eps is not None else _opmath_eps(input)
    axis = -len(normalized_shape)
    if input.dtype in _HALF:
        scale = op.Cast(weight, to=ir.DataType.FLOAT) if weight is not None else op.Constant(value_float=1.0)
        normalized = opset23.RMSNormalization(op.Cast(input, to=ir.DataType.FLOAT), scale, axis=axis, epsilon=epsilon, stash_type=1)
        return op.CastLike(normalized, input)
    scale = weight if weight is not None else op.CastLike(1.0, input)
    return opset23.RMSNormalization(input, scale, axis=axis, epsilon=epsilon, stash_type=1)


@register("aten::rms_norm")
def aten_rms_norm(
    input: ir.Value, normalized_shape: Sequence[int], weight: ir.Value | None = None, eps: float | None = None
) -> ir.Value:
    """rms_norm(Tensor input, SymInt[] normalized_shape, Tensor? weight=None, float? eps=None) -> Tensor

    As ATen computes it: half-precision inputs in float32, the weight applied in float32 too,
    one rounding at the end; eps by default float32's (the computing type's), not the input's."""
    rank = input.shape.rank() if input.shape is not None else None
    if rank is None:
        raise ValueError("rms_norm needs an input of known rank")
    axes = op.Constant(value_ints=_axes(rank, normalized_shape))
    half = input.dtype in _HALF
    compute = op.Cast(input, to=ir.DataType.FLOAT) if half else input
    epsilon = eps if eps is not None else _opmath_eps(input)
    mean_square = op.ReduceMean(op.Mul(compute, compute), axes, keepdims=1)
    normalized = op.Mul(compute, op.Reciprocal(op.Sqrt(op.Add(mean_square, epsilon))))
    if weight is not None:
        normalized = op.Mul(normalized, op.Cast(weight, to=ir.DataType.FLOAT) if half else weight)
    return op.CastLike(normalized, input) if half else normalized


def _opmath_eps(value: ir.Value) -> float:
    """ATen's default rms_norm epsilon: that of the type it computes in (float32 for float16
    and bfloat16 inputs, whose own eps is 8000 times larger)."""
    return float(np.finfo(np.float64 if value.dtype == ir.DataType.DOUBLE else np.float32).eps)


def _batch_statistics(input: ir.Value, eps: float) -> tuple[ir.Value, ir.Value, ir.Value, list[int]]:
    """Mean, biased variance (both kept as [1, C, 1...]) and 1/sqrt(var + eps) over N and spatial dims."""
    rank = input.shape.rank() if input.shape is not None else None
    if rank is None:
        raise ValueError("batch_norm needs an input of known rank")
    axes = [0, *range(2, rank)]
    axes_value = op.Constant(value_ints=axes)
    mean = op.ReduceMean(input, axes_value, keepdims=1)
    centered = op.Sub(input, mean)
    variance = op.ReduceMean(op.Mul(centered, centered), axes_value, keepdims=1)
    invstd = op.Reciprocal(op.Sqrt(op.Add(variance, op.CastLike(eps, input))))
    return mean, variance, invstd, axes


def _batch_count(input: ir.Value, axes: ir.Value) -> ir.Value:
    """How many values each channel's statistics are over: the product of the sizes at ``axes``."""
    return op.ReduceProd(op.Gather(op.Shape(input), axes, axis=0), keepdims=0)


def _per_channel_view(value: ir.Value, rank: int) -> ir.Value:
    return op.Reshape(value, op.Constant(value_ints=[1, -1, *([1] * (rank - 2))]))


def _batch_norm(
    input: ir.Value,
    weight: ir.Value | None,
    bias: ir.Value | None,
    running_mean: ir.Value | None,
    running_var: ir.Value | None,
    training: bool,
    momentum: float,
    eps: float,
) -> tuple[ir.Value, ...]:
    """(output, save_mean, save_invstd, new_running_mean, new_running_var) as ATen computes them."""
    rank = input.shape.rank()
    if not training:
        scale = weight if weight is not None else op.Expand(op.CastLike(1.0, input), op.Shape(running_mean))
        shift = bias if bias is not None else op.Expand(op.CastLike(0.0, input), op.Shape(running_mean))
        if input.dtype == ir.DataType.DOUBLE:
            # epsilon is a float attribute, which would round a float64 norm's eps (1e-5 became
            # 9.99999974738e-06: 1.2e-8 off for small variances); added in double, as ATen adds it.
            output = op.BatchNormalization(input, scale, shift, running_mean, op.Add(running_var, op.CastLike(eps, input)), epsilon=0.0)
        else:
            output = op.BatchNormalization(input, scale, shift, running_mean, running_var, epsilon=eps)
        # ATen returns empty saved statistics in inference.
        empty = op.CastLike(op.Constant(value=ir.tensor(np.zeros([0], dtype=np.float32))), input)
        return output, empty, empty, running_mean, running_var
    if input.dtype in _HALF:
        return _half_batch_norm_training(input, weight, bias, running_mean, running_var, momentum, eps)
    mean, variance, invstd, axes = _batch_statistics(input, eps)
    output = op.Mul(op.Sub(input, mean), invstd)
    if weight is not None:
        output = op.Mul(output, _per_channel_view(weight, rank))
    if bias is not None:
        output = op.Add(output, _per_channel_view(bias, rank))
    axes_value = op.Constant(value_ints=axes)
    save_mean, save_invstd = op.Squeeze(mean, axes_value), op.Squeeze(invstd, axes_value)
    if running_mean is None or running_var is None:
        return output, save_mean, save_invstd, running_mean, running_var
    # Running statistics use the unbiased variance: n / (n - 1).
    count = op.CastLike(_batch_count(input, axes_value), input)
    unbiased = op.Mul(op.Squeeze(variance, axes_value), op.Div(count, op.Sub(count, op.CastLike(1.0, input))))
    keep = op.CastLike(1.0 - momentum, input)
    new_mean = op.Add(op.Mul(running_mean, keep), op.Mul(save_mean, op.CastLike(momentum, input)))
    new_var = op.Add(op.Mul(running_var, keep), op.Mul(unbiased, op.CastLike(momentum, input)))
    return output, save_mean, save_invstd, new_mean, new_var


def _half_batch_norm_training(
    input: ir.Value,
    weight: ir.Value | None,
    bias: ir.Value | None,
    running_mean: ir.Value | None,
    running_var: ir.Value | None,
    momentum: float,
    eps: float,
) -> tuple[ir.Value, ...]:
    """Batch statistics of a float16/bfloat16 input as ATen's CPU kernel computes them.

    Sums run in float32; the saved mean and inverse deviation are of the parameters' type, and
    the output is ``x * alpha + beta`` from those statistics, fused, rounded once. Each step
    rounded to the half type instead squared deviations past float16's 65504 (values near 3000
    spread by 100 gave zeros for eager's -0.8) and put ulps into every result. The two half types
    take different kernels in ATen, measured on 48 inputs of 6 shapes and 4 scales: float16 sums
    the squares around the float32 mean and keeps the sum in float32 (eager's bits everywhere,
    running statistics too); bfloat16 sums them around the rounded mean, rounds the sum, and
    updates the running mean in bfloat16 arithmetic, as ``c10::BFloat16``'s operators round.
    With float32 parameters (a mixed-type call) the statistics stay float32 throughout."""
    float32, half = ir.DataType.FLOAT, input.dtype
    params = [v for v in (weight, bias, running_mean, running_var) if v is not None]
    mixed = any(v.dtype == float32 for v in params)
    stats = float32 if mixed else half
    rank = input.shape.rank()
    axes = op.Constant(value_ints=[0, *range(2, rank)])

    def rounded(value: ir.Value) -> ir.Value:
        return value if mixed else op.Cast(op.Cast(value, to=half), to=float32)

    wide = op.Cast(input, to=float32)
    count = op.Cast(_batch_count(input, axes), to=float32)
    mean = op.Div(op.ReduceSum(wide, axes, keepdims=1), count)
    mean_param = rounded(mean)
    if half == ir.DataType.FLOAT16 or mixed:
        centered = op.Sub(wide, mean)
        square_sum = op.ReduceSum(op.Mul(centered, centered), axes, keepdims=1)
        variance = op.Div(square_sum, count)
        unbiased = op.Div(square_sum, op.Sub(count, 1.0))
    else:
        centered = op.Sub(wide, mean_param)
        square_sum = rounded(op.ReduceSum(op.Mul(centered, centered), axes, keepdims=1))
        # ATen divides the bfloat16 sum by the count as a bfloat16 (289 is 288) and rounds the
        # quotient, for the saved deviation and the running variance alike.
        variance = rounded(op.Div(square_sum, rounded(count)))
        unbiased = rounded(op.Div(square_sum, rounded(op.Sub(count, 1.0))))
    invstd = rounded(op.Reciprocal(op.Sqrt(op.Add(variance, float(np.float32(eps))))))
    alpha = invstd if weight is None else op.Mul(invstd, _per_channel_view(op.Cast(weight, to=float32), rank))
    beta = op.Neg(op.Mul(mean_param, alpha))
    if bias is not None:
        beta = op.Add(_per_channel_view(op.Cast(bias, to=float32), rank), beta)
    # ATen's vector loop fuses the multiply-add; in float64 the product is exact.
    double = ir.DataType.DOUBLE
    fused = op.Add(op.Mul(op.Cast(input, to=double), op.Cast(alpha, to=double)), op.Cast(beta, to=double))
    output = op.Cast(op.Cast(fused, to=float32), to=half)
    save_mean, save_invstd = (op.Cast(op.Squeeze(v, axes), to=stats) for v in (mean_param, invstd))
    if running_mean is None or running_var is None:
        return output, save_mean, save_invstd, running_mean, running_var
    unbiased = op.Squeeze(unbiased, axes)
    if half == ir.DataType.FLOAT16 or mixed:
        keep, step = float(np.float32(1.0 - momentum)), float(np.float32(momentum))
        new_mean = op.Add(op.Mul(op.Squeeze(mean, axes), step), op.Mul(op.Cast(running_mean, to=float32), keep))
        new_var = op.Add(op.Mul(unbiased, step), op.Mul(op.Cast(running_var, to=float32), keep))
        return output, save_mean, save_invstd, op.Cast(new_mean, to=stats), op.Cast(new_var, to=stats)
    # c10::BFloat16 arithmetic rounds each product and sum of two bfloat16 numbers; a float32
    # operand makes the operation float32.
    step = float(torch.tensor(momentum, dtype=torch.bfloat16))
    keep = float(torch.tensor(1.0 - step, dtype=torch.bfloat16))
    kept_mean = rounded(op.Mul(op.Cast(running_mean, to=float32), keep))
    new_mean = op.Add(rounded(op.Mul(op.Squeeze(mean_param, axes), step)), kept_mean)
    new_var = op.Add(op.Mul(unbiased, step), rounded(op.Mul(op.Cast(running_var, to=float32), keep)))
    return output, save_mean, save_invstd, op.Cast(new_mean, to=half), op.Cast(new_var, to=half)


@register("aten::native_batch_norm")
def aten_native_batch_norm(
    input: ir.Value,
    weight: ir.Value | None,
    bias: ir.Value | None,
    running_mean: ir.Value | None,
    running_var: ir.Value | None,
    training: bool,
    momentum: float,
    eps: float,
) -> tuple[ir.Value, ir.Value, ir.Value]:
    """native_batch_norm(Tensor input, Tensor? weight, Tensor? bias, Tensor? running_mean, Tensor? running_var, bool training, float momentum, float eps) -> (Tensor, Tensor, Tensor)"""
    return _batch_norm(input, weight, bias, running_mean, running_var, training, momentum, eps)[:3]


# torchlib's translations of these two take eps as a float attribute (a float64 norm 4.3e-9 off).
@register("aten::_native_batch_norm_legit.no_stats")
def aten_native_batch_norm_legit_no_stats(
    input: ir.Value, weight: ir.Value | None, bias: ir.Value | None, training: bool, momentum: float, eps: float,
) -> tuple[ir.Value, ir.Value, ir.Value]:
    """_native_batch_norm_legit.no_stats(Tensor input, Tensor? weight, Tensor? bias, bool training, float momentum, float eps) -> (Tensor, Tensor, Tensor)

    Without running statistics the batch's own are used, in training or not."""
    return _batch_norm(input, weight, bias, None, None, True, momentum, eps)[:3]


@register("aten::_native_batch_norm_legit_no_training")
def aten_native_batch_norm_legit_no_training(
    input: ir.Value, weight: ir.Value | None, bias: ir.Value | None, running_mean: ir.Value, running_var: ir.Value,
    momentum: float, eps: float,
) -> tuple[ir.Value, ir.Value, ir.Value]:
    """_native_batch_norm_legit_no_training(Tensor input, Tensor? weight, Tensor? bias, Tensor running_mean, Tensor running_var, float momentum, float eps) -> (Tensor, Tensor, Tensor)"""
    return _batch_norm(input, weight, bias, running_mean, running_var, False, momentum, eps)[:3]


@register("aten::_native_batch_norm_legit_functional")
def aten_native_batch_norm_legit_functional(
    input: ir.Value,
    weight: ir.Value | None,
    bias: ir.Value | None,
    running_mean: ir.Value,
    running_var: ir.Value,
    training: bool,
    momentum: float,
    eps: float,
) -> tuple[ir.Value, ...]:
    """_native_batch_norm_legit_functional(...) -> (Tensor, Tensor, Tensor, Tensor running_mean_out, Tensor running_var_out)"""
    return _batch_norm(input, weight, bias, running_mean, running_var, training, momentum, eps)


def _inference_with_stats(node: Any) -> bool:
    """aten::batch_norm in inference: training mode updates buffers, which torch must functionalize."""
    training = node.args[5] if len(node.args) > 5 else node.kwargs.get("training")
    return not training and node.args[3] is not None and node.args[4] is not None


@register("aten::batch_norm", supports=_inference_with_stats)
def aten_batch_norm(
    input: ir.Value,
    weight: ir.Value | None,
    bias: ir.Value | None,
    running_mean: ir.Value,
    running_var: ir.Value,
    training: bool,
    momentum: float,
    eps: float,
    cudnn_enabled: bool,
) -> ir.Value:
    """batch_norm(Tensor input, Tensor? weight, Tensor? bias, Tensor? running_mean, Tensor? running_var, bool training, float momentum, float eps, bool cudnn_enabled) -> Tensor"""
    return _batch_norm(input, weight, bias, running_mean, running_var, False, momentum, eps)[0]
