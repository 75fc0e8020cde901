"""Convolutions and average pooling of integer tensors, exact as ATen computes them.

ONNX's ``Conv``, ``ConvTranspose`` and ``AveragePool`` take floating-point tensors only
(``ConvInteger`` is 8-bit into int32), and through float64 the sums would round past 2**53.
ATen convolves integers with wrapping fixed-width arithmetic and averages them as the int64 sum
of each window divided by its count, truncated toward zero. Here both are computed in int64 from
the window slices of :mod:`torch_onnx_fx.ops.windows` (one int64 ``MatMul`` per convolution,
``Add`` for the sums, integer ``Div``) and cast back to the input's type: sums and products wrap
modulo 2**64 exactly, so the narrowed result is the one ATen's narrower arithmetic wraps to.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import onnx_ir as ir
import torch

from torch_onnx_fx.dtypes import onnx_dtype
from torch_onnx_fx.errors import TranslationError
from torch_onnx_fx.ops import windows
from torch_onnx_fx.registry import arg_example, integral_input, register, wants_context
from torch_onnx_fx.translate.op_context import OpContext

__all__ = [
    "aten_integer_conv", "aten_integer_conv_transpose", "aten_integer_convolution", "aten_integer_avg_pool",
    "aten_integer_max_pool", "aten_integer_max_pool_with_indices",
]

_INT64 = ir.DataType.INT64


def _batched(ctx: OpContext, x: ir.Value, rank: int, spatial: int) -> tuple[ir.Value, bool]:
    """``x`` with a batch axis, and whether one was added (ATen takes unbatched inputs too)."""
    if rank == spatial + 1:
        return ctx.op("Unsqueeze", [x, windows.int64s(ctx, [0])]), True
    return x, False


def _finish(ctx: OpContext, result: ir.Value, added_batch: bool) -> ir.Value:
    if added_batch:
        result = ctx.op("Squeeze", [result, windows.int64s(ctx, [0])])
    # Every result here has its input's type (a pooling's indices are int64 already).
    dtype = ctx.inputs[0].dtype
    if dtype != torch.int64:
        result = ctx.cast(result, onnx_dtype(dtype))
    return result


def _pooling(
    ctx: OpContext, kernel_size: Any, stride: Any, padding: Any, dilation: Any, ceil_mode: bool, what: str,
) -> tuple[int, list[int], list[int], list[int], list[int], list[int]]:
    """A pooling's spatial rank, kernel, strides, pads (begin then end), dilations and how far
    ``ceil_mode``'s last windows reach past the padded input."""
    spatial = len(kernel_size) if isinstance(kernel_size, (list, tuple)) else 1
    kernel = windows.per_axis(kernel_size, spatial, [])
    strides = windows.per_axis(stride, spatial, kernel)
    pads = windows.per_axis(padding, spatial, [0] * spatial) * 2
    dilations = windows.per_axis(dilation, spatial, [1] * spatial)
    beyond = [0] * spatial
    if ceil_mode:
        example = ctx.inputs[0]
        sizes = list(example.shape)[example.dim() - spatial:]
        if not all(isinstance(s, int) for s in sizes):
            raise TranslationError(f"an integer {what} with ceil_mode needs static spatial sizes")
        beyond = windows.ceil_extension([int(s) for s in sizes], kernel, strides, dilations, pads)
    return spatial, kernel, strides, pads, dilations, beyond


def _weight_shape(ctx: OpContext) -> list[int]:
    weight = ctx.inputs[1]
    if not all(isinstance(d, int) for d in weight.shape):
        raise TranslationError("an integer convolution needs static weight sizes (its kernel is sliced at export)")
    return [int(d) for d in weight.shape]


def _product(
    ctx: OpContext, input: ir.Value, weight: ir.Value, bias: ir.Value | None, stride: Any, padding: Any,
    dilation: Any, transposed: bool, output_padding: Any, groups: int,
) -> ir.Value:
    weight_shape = _weight_shape(ctx)
    spatial = len(weight_shape) - 2
    strides, dilations = windows.per_axis(stride, spatial, [1] * spatial), windows.per_axis(dilation, spatial, [1] * spatial)
    if isinstance(padding, str):
        # ATen's "same" pads the kernel's reach, the odd element at the end; "valid" none.
        reach = [d * (k - 1) for d, k in zip(dilations, weight_shape[2:])] if padding == "same" else [0] * spatial
        pads = [r // 2 for r in reach] + [r - r // 2 for r in reach]
    else:
        pads = windows.per_axis(padding, spatial, [0] * spatial) * 2
    x, added = _batched(ctx, ctx.cast(input, _INT64), ctx.inputs[0].dim(), spatial)
    w = ctx.cast(weight, _INT64)
    b = ctx.cast(bias, _INT64) if bias is not None else None
    if transposed:
        extra = windows.per_axis(output_padding, spatial, [0] * spatial)
        result = windows.transposed_product(ctx, x, w, b, weight_shape, strides, dilations, pads, extra, groups)
    else:
        result = windows.patch_product(ctx, x, w, b, weight_shape, strides, dilations, pads, groups)
    return _finish(ctx, result, added)


@register("aten::conv1d", "aten::conv2d", "aten::conv3d", "aten::conv1d.padding", "aten::conv2d.padding", "aten::conv3d.padding", supports=integral_input)
@wants_context
def aten_integer_conv(
    input: ir.Value, weight: ir.Value, bias: ir.Value | None = None, stride: Any = 1, padding: Any = 0,
    dilation: Any = 1, groups: int = 1, *, ctx: OpContext,
) -> ir.Value:
    """conv{1,2,3}d(Tensor input, Tensor weight, Tensor? bias=None, SymInt[] stride=1, SymInt[]|str padding=0,
    SymInt[] dilation=1, SymInt groups=1) -> Tensor, of integers"""
    return _product(ctx, input, weight, bias, stride, padding, dilation, False, 0, groups)


@register("aten::conv_transpose1d", "aten::conv_transpose2d.input", "aten::conv_transpose3d.input", supports=integral_input)
@wants_context
def aten_integer_conv_transpose(
    input: ir.Value, weight: ir.Value, bias: ir.Value | None = None, stride: Any = 1, padding: Any = 0,
    output_padding: Any = 0, groups: int = 1, dilation: Any = 1, *, ctx: OpContext,
) -> ir.Value:
    """conv_transpose{1,2,3}d(Tensor input, Tensor weight, Tensor? bias=None, SymInt[] stride=1, SymInt[] padding=0,
    SymInt[] output_padding=0, SymInt groups=1, SymInt[] dilation=1) -> Tensor, of integers"""
    return _product(ctx, input, weight, bias, stride, padding, dilation, True, output_padding, groups)


@register("aten::convolution", supports=integral_input)
@wants_context
def aten_integer_convolution(
    input: ir.Value, weight: ir.Value, bias: ir.Value | None, stride: Any, padding: Any, dilation: Any,
    transposed: bool, output_padding: Any, groups: int, *, ctx: OpContext,
) -> ir.Value:
    """convolution(Tensor input, Tensor weight, Tensor? bias, SymInt[] stride, SymInt[] padding, SymInt[] dilation,
    bool transposed, SymInt[] output_padding, SymInt groups) -> Tensor, of integers"""
    return _product(ctx, input, weight, bias, stride, padding, dilation, transposed, output_padding, groups)


@register("aten::avg_pool1d", "aten::avg_pool2d", "aten::avg_pool3d", supports=integral_input)
@wants_context
def aten_integer_avg_pool(
    self: ir.Value, kernel_size: Sequence[int], stride: Sequence[int] = (), padding: Any = 0, ceil_mode: bool = False,
    count_include_pad: bool = True, divisor_override: int | None = None, *, ctx: OpContext,
) -> ir.Value:
    """avg_pool{1,2,3}d(Tensor self, int[] kernel_size, int[] stride=[], int[] padding=0, bool ceil_mode=False,
    bool count_include_pad=True, int? divisor_override=None) -> Tensor, of integers: each window's
    int64 sum divided by its count (or the divisor), truncated toward zero"""
    spatial, kernel, strides, pads, dilations, beyond = _pooling(ctx, kernel_size, stride, padding, 1, ceil_mode, "average pooling")
    x, added = _batched(ctx, ctx.cast(self, _INT64), ctx.inputs[0].dim(), spatial)
    sums = windows.window_sums(ctx, x, kernel, strides, dilations, pads, beyond, integral=True)
    if divisor_override:
        counts = ctx.constant(int(divisor_override), _INT64)
    elif count_include_pad and not any(beyond):
        counts = ctx.constant(math.prod(kernel), _INT64)
    else:
        counts = windows.window_counts(ctx, x, kernel, strides, dilations, pads, beyond, bool(count_include_pad), _INT64)
    return _finish(ctx, ctx.op("Div", [sums, counts]), added)


def _max_windows(
    ctx: OpContext, self: ir.Value, kernel_size: Any, stride: Any, padding: Any, dilation: Any, ceil_mode: bool,
    with_indices: bool,
) -> Any:
    """The largest element of each window (padding never wins), and where requested its flat
    position in the input's spatial plane, the first of equal maxima in the window's row-major
    order as ATen's scan keeps it."""
    spatial, kernel, strides, pads, dilations, beyond = _pooling(ctx, kernel_size, stride, padding, dilation, ceil_mode, "max pooling")
    padding_ends = windows.with_ceil_ends(pads, beyond)
    x, added = _batched(ctx, ctx.cast(self, _INT64), ctx.inputs[0].dim(), spatial)
    # Padding holds int64's lowest value: every window covers one element of the input at least
    # (ATen allows pads up to half the kernel), so it never exceeds the input's largest.
    lowest = ctx.constant(-(2**63), _INT64)
    padded = windows.pad(ctx, x, padding_ends, spatial, lowest)
    values = windows.windows(ctx, padded, kernel, strides, dilations)
    largest = ctx.op("Max", values) if len(values) > 1 else values[0]
    if not with_indices:
        return _finish(ctx, largest, added)
    # The positions 0 .. H*W-1 of the plane, pooled the same way with -1 for padding.
    plane = ctx.op("Shape", [x], {"start": 2})
    count = ctx.op("ReduceProd", [plane, windows.int64s(ctx, [0])], {"keepdims": 0})
    positions = ctx.op("Range", [ctx.constant(0, _INT64), count, ctx.constant(1, _INT64)])
    layout = ctx.op("Concat", [windows.int64s(ctx, [1, 1]), plane], {"axis": 0})
    positions = ctx.op("Reshape", [positions, layout])
    none = ctx.constant(-1, _INT64)
    places = windows.windows(ctx, windows.pad(ctx, positions, padding_ends, spatial, none), kernel, strides, dilations)
    best, where = values[0], places[0]
    for value, place in zip(values[1:], places[1:]):
        inside = ctx.op("GreaterOrEqual", [place, ctx.constant(0, _INT64)])
        first = ctx.op("Less", [where, ctx.constant(0, _INT64)])
        take = ctx.op("And", [inside, ctx.op("Or", [ctx.op("Greater", [value, best]), first])])
        best = ctx.op("Where", [take, value, best])
        where = ctx.op("Where", [take, place, where])
    # The positions broadcast over batch and channels: expanded to the values' shape.
    where = ctx.op("Expand", [where, ctx.op("Shape", [largest])])
    if added:
        where = ctx.op("Squeeze", [where, windows.int64s(ctx, [0])])
    return _finish(ctx, largest, added), where


def _wide_integer_input(node: torch.fx.Node) -> bool:
    """int16, int32 and int64: ONNX Runtime's MaxPool takes the 8-bit integer types itself."""
    example = arg_example(node)
    return isinstance(example, torch.Tensor) and example.dtype in (torch.int16, torch.int32, torch.int64)


@register("aten::max_pool1d", "aten::max_pool2d", "aten::max_pool3d", supports=_wide_integer_input)
@wants_context
def aten_integer_max_pool(
    self: ir.Value, kernel_size: Sequence[int], stride: Sequence[int] = (), padding: Any = 0, dilation: Any = 1,
    ceil_mode: bool = False, *, ctx: OpContext,
) -> ir.Value:
    """max_pool{1,2,3}d(Tensor self, int[] kernel_size, int[] stride=[], int[] padding=0, int[] dilation=1,
    bool ceil_mode=False) -> Tensor, of 16-, 32- and 64-bit integers"""
    return _max_windows(ctx, self, kernel_size, stride, padding, dilation, ceil_mode, with_indices=False)


@register("aten::max_pool2d_with_indices", "aten::max_pool3d_with_indices", supports=_wide_integer_input)
@wants_context
def aten_integer_max_pool_with_indices(
    self: ir.Value, kernel_size: Sequence[int], stride: Sequence[int] = (), padding: Any = 0, dilation: Any = 1,
    ceil_mode: bool = False, *, ctx: OpContext,
) -> tuple[ir.Value, ir.Value | None]:
    """max_pool{2,3}d_with_indices(Tensor self, int[] kernel_size, int[] stride=[], int[] padding=0,
    int[] dilation=1, bool ceil_mode=False) -> (Tensor, Tensor), of 16-, 32- and 64-bit integers"""
    wanted = ctx.results_read is None or 1 in ctx.results_read
    if not wanted:
        return _max_windows(ctx, self, kernel_size, stride, padding, dilation, ceil_mode, with_indices=False), None
    return _max_windows(ctx, self, kernel_size, stride, padding, dilation, ceil_mode, with_indices=True)
