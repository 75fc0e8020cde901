"""PT2E's ``quantized_decomposed`` operators: per-tensor quantize, dequantize and the dynamic
choice of scale and zero point.

torchlib's quantize ignores ``quant_min``/``quant_max``: ``QuantizeLinear`` saturates to the
whole 8-bit range, so a model quantized to a narrower one (``reduce_range=True``: 0..127) gave
values up to 255 wherever an input passed the calibrated range (31 % of a small conv net's
output range off, silently). Its ``.tensor`` forms, which dynamic quantization produces with a
computed float64 scale, and ``choose_qparams``, which computes that scale, did not export.

8-bit results with a number scale and a zero point the type holds stay
``QuantizeLinear``/``DequantizeLinear``, so that ONNX Runtime's QDQ fusion still finds integer
kernels. ``QuantizeLinear`` divides by the scale where PyTorch multiplies by its float32
reciprocal: a value within one float32 ulp of a rounding midpoint can land one step apart
(docs/quantization.md). Everything else (16 and 32 bits, which ``QuantizeLinear`` lacks before
opset 21; the ``.tensor`` forms; zero points past the type) follows PyTorch's arithmetic exactly.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx_ir as ir
import torch
from onnxscript import opset18 as op

from torch_onnx_fx.registry import arg_example, arg_value, limit_torchlib, register
from torch_onnx_fx.translate.weight_data import without_data

__all__ = [
    "quantized_quantize_per_tensor",
    "quantized_dequantize_per_tensor",
    "quantized_choose_qparams",
    "quantized_choose_qparams_symmetric",
    "quantized_quantize_per_channel",
    "quantized_dequantize_per_channel",
]

_FLOAT = ir.DataType.FLOAT
_DOUBLE = ir.DataType.DOUBLE
_INT64 = ir.DataType.INT64
# The integer types ONNX's 8-bit QuantizeLinear/DequantizeLinear take, with their full ranges.
_EIGHT_BIT = {int(ir.DataType.UINT8): (0, 255), int(ir.DataType.INT8): (-128, 127)}
# The integer targets. PyTorch's float8 "quantization" rounds to integers before its cast, which
# ONNX's float8 QuantizeLinear does not: ops/exactness refuses those nodes.
_INTEGRAL = (torch.uint8, torch.int8, torch.uint16, torch.int16, torch.int32)


def _float32(value: float) -> ir.Value:
    return op.Constant(value=ir.tensor(np.float32(value)))


def _item(value: ir.Value) -> ir.Value:
    """A one-element tensor as a 0-d one: PyTorch reads these parameters with ``.item()``."""
    return op.Reshape(value, op.Constant(value_ints=[]))


def _scalar_scale(scale: Any) -> ir.Value:
    """The scale as a 0-d float32: PyTorch reads a tensor scale with ``.item()`` (a Python
    float) and applies it to float32 values, which rounds it to float32."""
    if isinstance(scale, ir.Value):
        return op.Cast(_item(scale), to=_FLOAT)
    return _float32(scale)


def _scalar(value: Any, dtype: int) -> ir.Value:
    """A 0-d zero point or bound of ``dtype`` (an int, or a one-element tensor)."""
    if isinstance(value, ir.Value):
        return op.Cast(_item(value), to=dtype)
    return op.Cast(op.Constant(value=ir.tensor(np.int64(value))), to=dtype)


def _supported_quantization(node: Any) -> bool:
    return arg_value(node, 5, "dtype") in _INTEGRAL


def _linear_form(scale: Any, zero_point: Any, dtype: int) -> bool:
    """Whether ``QuantizeLinear``/``DequantizeLinear`` take these parameters as they are: a
    number scale and a zero point the 8-bit type holds. A zero point past it would wrap; tensor
    parameters (the ``.tensor`` forms: dynamic quantization, which no integer kernel fuses
    anyway) take PyTorch's arithmetic, exact to the bit."""
    full = _EIGHT_BIT.get(dtype)
    return (
        full is not None
        and not isinstance(scale, ir.Value)
        and isinstance(zero_point, int)
        and full[0] <= zero_point <= full[1]
    )


def _inverse(scale: Any) -> ir.Value:
    """PyTorch's ``1.0 / scale`` in double (``scale.item()`` for a tensor), rounded to float32 as it
    multiplies float32 values."""
    if isinstance(scale, ir.Value):
        double = op.Cast(_item(scale), to=_DOUBLE)
        return op.Cast(op.Div(op.Constant(value=ir.tensor(np.float64(1.0))), double), to=_FLOAT)
    return _float32(1.0 / scale)


@register(
    "quantized_decomposed::quantize_per_tensor",
    "quantized_decomposed::quantize_per_tensor.tensor",
    "quantized_decomposed::quantize_per_tensor.tensor2",
    supports=_supported_quantization,
)
def quantized_quantize_per_tensor(
    input: ir.Value, scale: Any, zero_point: Any, quant_min: Any, quant_max: Any, dtype: int
) -> ir.Value:
    """quantize_per_tensor(Tensor input, float scale, int zero_point, int quant_min, int quant_max, ScalarType dtype) -> Tensor
    (also ``.tensor``: scale and zero point as one-element tensors; ``.tensor2``: the bounds too)

    ``clamp(round(input * (1 / scale)) + zero_point, quant_min, quant_max)`` in float32."""
    if input.dtype != _FLOAT:
        # PyTorch quantizes half-precision inputs from float32.
        input = op.Cast(input, to=_FLOAT)
    if _linear_form(scale, zero_point, dtype):
        quantized = op.QuantizeLinear(input, _scalar_scale(scale), _scalar(zero_point, dtype))
        if (quant_min, quant_max) == _EIGHT_BIT[dtype]:
            return quantized
        # QuantizeLinear saturates to the type's range only; a narrower one is PyTorch's clamp.
        return op.Clip(quantized, _scalar(quant_min, dtype), _scalar(quant_max, dtype))
    shifted = op.Add(op.Round(op.Mul(input, _inverse(scale))), _scalar(zero_point, _FLOAT))
    clamped = op.Min(op.Max(shifted, _scalar(quant_min, _FLOAT)), _scalar(quant_max, _FLOAT))
    return op.Cast(clamped, to=dtype)


def _supported_dequantization(node: Any) -> bool:
    dtype = arg_value(node, 5, "dtype")
    out_dtype = node.kwargs.get("out_dtype")
    # float8 values are exact in float32, as integers up to 2**24 are.
    source = dtype in _INTEGRAL or (isinstance(dtype, torch.dtype) and dtype.is_floating_point)
    return source and out_dtype in (None, torch.float32, torch.float16, torch.bfloat16)


def _rounded(value: ir.Value, dtype: int) -> ir.Value:
    """``value`` rounded to ``dtype`` and read back in float32: one half-precision result of
    PyTorch, which computes each half-precision operation in float32 and rounds it."""
    return op.Cast(op.Cast(value, to=dtype), to=_FLOAT)


@register(
    "quantized_decomposed::dequantize_per_tensor",
    "quantized_decomposed::dequantize_per_tensor.tensor",
    "quantized_decomposed::dequantize_per_tensor.tensor2",
    supports=_supported_dequantization,
)
def quantized_dequantize_per_tensor(
    input: ir.Value,
    scale: Any,
    zero_point: Any,
    quant_min: Any,
    quant_max: Any,
    dtype: int,
    *,
    out_dtype: int | None = None,
) -> ir.Value:
    """dequantize_per_tensor(Tensor input, float scale, int zero_point, int quant_min, int quant_max, ScalarType dtype, *, ScalarType? out_dtype=None) -> Tensor

    ``(input.to(out_dtype) - zero_point) * scale`` with the scale rounded to float32."""
    half = out_dtype if out_dtype not in (None, -1, int(_FLOAT)) else None
    if _linear_form(scale, zero_point, dtype):
        # 8-bit values less an 8-bit zero point are exact in half precision: one rounding, as
        # PyTorch's.
        result = op.DequantizeLinear(input, _scalar_scale(scale), _scalar(zero_point, dtype))
        return result if half is None else op.Cast(result, to=half)
    # PyTorch's order, each step rounded as it rounds it: the integer to the result's type (past
    # 2**24 in float32, past 2048 in float16), the difference, then the product.
    value = op.Cast(input, to=_FLOAT) if half is None else _rounded(input, half)
    difference = op.Sub(value, _scalar(zero_point, _FLOAT))
    if half is not None:
        difference = _rounded(difference, half)
    result = op.Mul(difference, _scalar_scale(scale))
    return result if half is None else op.Cast(result, to=half)


def _float32_input(node: Any) -> bool:
    """choose_qparams of a float32 input (a half-precision one computes its range and scale in
    its own dtype first) into an integer type."""
    example = arg_example(node)
    dtype = arg_value(node, 4, "dtype")
    return isinstance(example, torch.Tensor) and example.dtype == torch.float32 and dtype in _INTEGRAL


def _range(input: ir.Value) -> tuple[ir.Value, ir.Value]:
    """min(min(input), 0) and max(max(input), 0), as 0-d float32 values."""
    flat = op.Reshape(input, op.Constant(value_ints=[-1]))
    zero = _float32(0.0)
    low = op.Min(op.ReduceMin(flat, keepdims=0), zero)
    high = op.Max(op.ReduceMax(flat, keepdims=0), zero)
    return low, high


def _qparams(scale: ir.Value, zero_point: ir.Value) -> tuple[ir.Value, ir.Value]:
    """PyTorch's outputs: a one-element float64 scale and int64 zero point."""
    one = op.Constant(value_ints=[1])
    return op.Cast(op.Reshape(scale, one), to=_DOUBLE), op.Reshape(zero_point, one)


@register("quantized_decomposed::choose_qparams.tensor", supports=_float32_input)
def quantized_choose_qparams(input: ir.Value, quant_min: int, quant_max: int, eps: float, dtype: int) -> tuple[ir.Value, ir.Value]:
    """choose_qparams.tensor(Tensor input, int quant_min, int quant_max, float eps, ScalarType dtype) -> (Tensor, Tensor)

    scale = max((max(x, 0) - min(x, 0)) / (quant_max - quant_min), eps) in float32;
    zero point = clamp(quant_min - round(min(x, 0) / scale), quant_min, quant_max)."""
    low, high = _range(input)
    scale = op.Max(op.Div(op.Sub(high, low), _float32(float(quant_max - quant_min))), _float32(eps))
    offset = op.Cast(op.Round(op.Div(low, scale)), to=_INT64)
    bounds = [op.Constant(value=ir.tensor(np.int64(b))) for b in (quant_min, quant_max)]
    zero_point = op.Clip(op.Sub(bounds[0], offset), *bounds)
    return _qparams(scale, zero_point)


@register("quantized_decomposed::choose_qparams_symmetric.tensor", supports=_float32_input)
def quantized_choose_qparams_symmetric(
    input: ir.Value, quant_min: int, quant_max: int, eps: float, dtype: int
) -> tuple[ir.Value, ir.Value]:
    """choose_qparams_symmetric.tensor(Tensor input, int quant_min, int quant_max, float eps, ScalarType dtype) -> (Tensor, Tensor)

    scale = max(max(|min(x, 0)|, max(x, 0)) / ((quant_max - quant_min) / 2), eps) in float32;
    the zero point is 128 for uint8 and 0 otherwise."""
    low, high = _range(input)
    magnitude = op.Max(op.Neg(low), high)
    scale = op.Max(op.Div(magnitude, _float32(float(quant_max - quant_min) / 2)), _float32(eps))
    zero_point = op.Constant(value=ir.tensor(np.int64(128 if dtype == int(ir.DataType.UINT8) else 0)))
    return _qparams(scale, zero_point)


def _channel_zero_points_fit(zero_points: ir.Value | None, dtype: int) -> bool:
    """Whether per-channel zero points are constants the 8-bit type holds: torchlib casts them
    to it, and a uint8 zero point of -10 became 246 (every value of that channel 248 steps
    off). A zero point known only at run time takes PyTorch's arithmetic."""
    full = _EIGHT_BIT.get(dtype)
    if full is None:
        return False
    if zero_points is None:
        return True
    tensor = zero_points.const_value
    if tensor is None or without_data(zero_points):
        return False
    values = np.asarray(tensor.numpy())
    return values.size == 0 or (full[0] <= values.min() and values.max() <= full[1])


def _along(value: ir.Value, axis: int, rank: int) -> ir.Value:
    """A per-channel parameter shaped to broadcast along ``axis``."""
    return op.Reshape(value, op.Constant(value_ints=[-1 if i == axis else 1 for i in range(rank)]))


def _per_channel_quantization(node: Any) -> bool:
    scales = arg_example(node, 1)
    return arg_value(node, 6, "dtype") in _INTEGRAL and isinstance(scales, torch.Tensor) and scales.dtype in (
        torch.float32, torch.float64,
    )


@register("quantized_decomposed::quantize_per_channel", supports=_per_channel_quantization)
def quantized_quantize_per_channel(
    input: ir.Value, scales: ir.Value, zero_points: ir.Value, axis: int, quant_min: int, quant_max: int, dtype: int
) -> ir.Value:
    """quantize_per_channel(Tensor input, Tensor scales, Tensor zero_points, int axis, int quant_min, int quant_max, ScalarType dtype) -> Tensor

    ``clamp(round(input * (1 / scales)) + zero_points, quant_min, quant_max)`` per channel of
    ``axis``, in the scales' dtype."""
    if input.dtype != _FLOAT:
        input = op.Cast(input, to=_FLOAT)
    if scales.dtype == _FLOAT and _channel_zero_points_fit(zero_points, dtype):
        quantized = op.QuantizeLinear(input, scales, op.Cast(zero_points, to=dtype), axis=axis)
        if (quant_min, quant_max) == _EIGHT_BIT[dtype]:
            return quantized
        return op.Clip(quantized, _scalar(quant_min, dtype), _scalar(quant_max, dtype))
    rank = len(input.shape)  # type: ignore[arg-type]
    axis %= rank
    # float32 scales: a float32 reciprocal and product; float64 ones promote the product.
    wide = scales.dtype
    one = op.Cast(op.Constant(value=ir.tensor(np.float64(1.0))), to=wide)
    product = op.Mul(input if wide == _FLOAT else op.Cast(input, to=wide), op.Div(one, _along(scales, axis, rank)))
    shifted = op.Add(op.Round(product), op.Cast(_along(zero_points, axis, rank), to=wide))
    clamped = op.Min(op.Max(shifted, _scalar(quant_min, wide)), _scalar(quant_max, wide))
    return op.Cast(clamped, to=dtype)


def _per_channel_dequantization(node: Any) -> bool:
    scales = arg_example(node, 1)
    out_dtype = node.kwargs.get("out_dtype")
    return (
        arg_value(node, 6, "dtype") in _INTEGRAL
        and isinstance(scales, torch.Tensor) and scales.dtype in (torch.float32, torch.float64)
        and out_dtype in (None, torch.float32, torch.float16, torch.bfloat16)
    )


@register("quantized_decomposed::dequantize_per_channel", supports=_per_channel_dequantization)
def quantized_dequantize_per_channel(
    input: ir.Value,
    scales: ir.Value,
    zero_points: ir.Value | None,
    axis: int,
    quant_min: int,
    quant_max: int,
    dtype: int,
    *,
    out_dtype: int | None = None,
) -> ir.Value:
    """dequantize_per_channel(Tensor input, Tensor scales, Tensor? zero_points, int axis, int quant_min, int quant_max, ScalarType dtype, *, ScalarType? out_dtype=None) -> Tensor

    ``((input - zero_points) * scales).to(out_dtype)`` per channel of ``axis``: the integer
    difference is exact, the product rounds once in the scales' dtype."""
    target = _FLOAT if out_dtype in (None, -1) else out_dtype
    if scales.dtype == _FLOAT and _channel_zero_points_fit(zero_points, dtype):
        points = None if zero_points is None else op.Cast(zero_points, to=dtype)
        result = op.DequantizeLinear(input, scales, points, axis=axis)
        return result if target == _FLOAT else op.Cast(result, to=target)
    rank = len(input.shape)  # type: ignore[arg-type]
    axis %= rank
    difference = op.Cast(input, to=_INT64)
    if zero_points is not None:
        difference = op.Sub(difference, op.Cast(_along(zero_points, axis, rank), to=_INT64))
    product = op.Mul(op.Cast(difference, to=scales.dtype), _along(scales, axis, rank))
    return product if scales.dtype == target else op.Cast(product, to=target)


# torchlib's forms ignore the bounds and mistranslate float8: none of them is used.
for _name in (
    "quantized_decomposed::quantize_per_tensor",
    "quantized_decomposed::quantize_per_tensor.tensor",
    "quantized_decomposed::quantize_per_tensor.tensor2",
    "quantized_decomposed::dequantize_per_tensor",
    "quantized_decomposed::dequantize_per_tensor.tensor",
    "quantized_decomposed::dequantize_per_tensor.tensor2",
    "quantized_decomposed::quantize_per_channel",
    "quantized_decomposed::dequantize_per_channel",
):
    limit_torchlib(_name, lambda node: False)
