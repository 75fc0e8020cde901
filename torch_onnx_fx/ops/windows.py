"""Convolutions and average pooling spelled out from strided slices, for types ONNX's ops lack.

ONNX's ``Conv``, ``ConvTranspose`` and ``AveragePool`` take floating-point tensors, and ONNX
Runtime's CPU provider registers them for float32 only. For float64 (the runtime pass
``optimize/runtime/float64_windows.py``) and integers (``ops/integer_windows.py``) they are
written here in operators every type has:

- a convolution stacks one strided slice of the padded input per kernel offset (im2col) and
  multiplies them with the weights in one ``MatMul``;
- a transposed convolution is the convolution of the input spread out by the stride (zeros
  between its elements), padded by the kernel's reach less the pads, with the weights flipped and
  their channel axes swapped: the adjoint of a strided convolution, which it is;
- an average pooling sums the slices and divides by the number of elements each window covers,
  counted by pooling ones the same way (padding counted or not, windows that ``ceil_mode`` lets
  run past the end clipped as ATen clips them).

Every function takes a *builder*: anything with ``op(op_type, inputs, attributes)`` returning the
node's output (an ``onnx_ir`` tape, or a translation's ``OpContext``). Inputs are ``[N, C,
*spatial]``; kernel sizes and channel counts are static.
"""

from __future__ import annotations

import itertools
import math
from typing import Any, Protocol, Sequence

import onnx_ir as ir

__all__ = [
    "Builder", "END", "per_axis", "int64s", "pad", "windows", "patch_product", "transposed_product",
    "ceil_extension", "with_ceil_ends", "window_sums", "window_counts",
]

# Slice's end for "to the end of the axis".
END = 2**62


class Builder(Protocol):
    def op(self, op_type: str, inputs: Sequence[ir.Value | None], attributes: Any = None) -> Any: ...


def per_axis(value: Any, dims: int, default: Sequence[int]) -> list[int]:
    """An ATen size argument (``kernel_size``, ``stride``...) as one entry per spatial axis: an int
    or a single entry repeated, ``default`` when left out or empty."""
    if value is None or (isinstance(value, (list, tuple)) and not value):
        return list(default)
    if isinstance(value, int):
        return [value] * dims
    return list(value) * dims if len(value) == 1 else list(value)


def int64s(build: Builder, values: Sequence[int]) -> ir.Value:
    return build.op("Constant", [], {"value": ir.tensor(list(values), dtype=ir.DataType.INT64)})


def pad(build: Builder, x: ir.Value, pads: Sequence[int], spatial: int, value: ir.Value | None = None) -> ir.Value:
    """``x`` [N, C, *spatial] padded (negative pads crop, as ONNX's Pad allows)."""
    if not any(pads):
        return x
    inputs = [x, int64s(build, [0, 0, *pads[:spatial], 0, 0, *pads[spatial:]])]
    return build.op("Pad", inputs + ([value] if value is not None else []))


def windows(build: Builder, x: ir.Value, kernel: Sequence[int], strides: Sequence[int], dilations: Sequence[int]) -> list[ir.Value]:
    """One strided slice of ``x`` (already padded) per kernel offset, in the kernel's row-major
    order: slice k holds, at each output position, the element under offset k of its window."""
    spatial = len(kernel)
    axes, steps = int64s(build, list(range(2, 2 + spatial))), int64s(build, strides)
    slices = []
    for offset in itertools.product(*(range(k) for k in kernel)):
        starts = [o * d for o, d in zip(offset, dilations)]
        # The last window ends (kernel - 1 - offset) dilated steps before the end.
        ends = [-(d * (k - 1 - o)) or END for o, d, k in zip(offset, dilations, kernel)]
        slices.append(build.op("Slice", [x, int64s(build, starts), int64s(build, ends), axes, steps]))
    return slices


def patch_product(
    build: Builder, x: ir.Value, w: ir.Value, bias: ir.Value | None,
    weight_shape: Sequence[int], strides: Sequence[int], dilations: Sequence[int], pads: Sequence[int], groups: int,
) -> ir.Value:
    """Conv as one ``MatMul`` of the input's patches (im2col): the window slices stacked after the
    channels, so that ``[C, kernel]`` flattens as the weight's ``[C / group, *kernel]``."""
    out_channels, group_channels, *kernel = weight_shape
    spatial = len(kernel)
    x = pad(build, x, pads, spatial)
    slices = windows(build, x, kernel, strides, dilations)
    stacked = build.op("Concat", [build.op("Unsqueeze", [s, int64s(build, [2])]) for s in slices], {"axis": 2})
    columns = group_channels * math.prod(kernel)
    rows = build.op("Reshape", [stacked, int64s(build, [0, groups, columns, -1])])
    weights = build.op("Reshape", [w, int64s(build, [groups, out_channels // groups, columns])])
    product = build.op("MatMul", [weights, rows])  # [N, groups, out_channels / groups, positions]
    batch = build.op("Shape", [x], {"end": 1})
    positions = build.op("Shape", [slices[0]], {"start": 2})
    result = build.op("Reshape", [product, build.op("Concat", [batch, int64s(build, [out_channels]), positions], {"axis": 0})])
    if bias is not None:
        result = build.op("Add", [result, build.op("Reshape", [bias, int64s(build, [out_channels] + [1] * spatial)])])
    return result


def _spread(build: Builder, x: ir.Value, rank: int, axis: int, stride: int) -> ir.Value:
    """``x`` with ``stride - 1`` zeros between neighbours along ``axis``: each element gets a row
    of zeros after it (a new axis padded, then merged), and the last row is cut off."""
    pads = [0] * 2 * (rank + 1)
    pads[rank + 1 + axis + 1] = stride - 1
    grown = build.op("Pad", [build.op("Unsqueeze", [x, int64s(build, [axis + 1])]), int64s(build, pads)])
    shape = build.op("Shape", [x])
    merged = build.op("Concat", [
        build.op("Slice", [shape, int64s(build, [0]), int64s(build, [axis])]),
        int64s(build, [-1]),
        build.op("Slice", [shape, int64s(build, [axis + 1]), int64s(build, [END])]),
    ], {"axis": 0})
    flat = build.op("Reshape", [grown, merged])
    return build.op("Slice", [flat, int64s(build, [0]), int64s(build, [-(stride - 1)]), int64s(build, [axis])])


def transposed_product(
    build: Builder, x: ir.Value, w: ir.Value, bias: ir.Value | None, weight_shape: Sequence[int],
    strides: Sequence[int], dilations: Sequence[int], pads: Sequence[int], extra: Sequence[int], groups: int,
) -> ir.Value:
    """ConvTranspose of ``x`` by ``w`` ``[C_in, C_out / groups, *kernel]`` with ONNX's
    attributes (``pads`` begin then end, ``extra`` its ``output_padding``)."""
    in_channels, group_out, *kernel = weight_shape
    spatial = len(kernel)
    for i, stride in enumerate(strides):
        if stride > 1:
            x = _spread(build, x, 2 + spatial, 2 + i, stride)
    reach = [d * (k - 1) for d, k in zip(dilations, kernel)]
    conv_pads = [r - p for r, p in zip(reach, pads[:spatial])] + [r - p + e for r, p, e in zip(reach, pads[spatial:], extra)]
    # [C_in, C_out / g, *k] -> [C_out, C_in / g, *k], kernel reversed along every spatial axis.
    per_group = build.op("Reshape", [w, int64s(build, [groups, in_channels // groups, group_out, *kernel])])
    swapped = build.op("Transpose", [per_group], {"perm": [0, 2, 1, *range(3, 3 + spatial)]})
    out_channels = groups * group_out
    flipped = build.op("Slice", [
        build.op("Reshape", [swapped, int64s(build, [out_channels, in_channels // groups, *kernel])]),
        int64s(build, [-1] * spatial), int64s(build, [-END] * spatial),
        int64s(build, list(range(2, 2 + spatial))), int64s(build, [-1] * spatial),
    ])
    return patch_product(
        build, x, flipped, bias, [out_channels, in_channels // groups, *kernel], [1] * spatial, dilations, conv_pads, groups,
    )


def ceil_extension(
    sizes: Sequence[int], kernel: Sequence[int], strides: Sequence[int], dilations: Sequence[int], pads: Sequence[int],
) -> list[int]:
    """How far ``ceil_mode``'s last windows reach past the padded input, per spatial axis (ATen's
    rule: a last window must start inside the input or its left padding)."""
    spatial = len(kernel)
    beyond = []
    for i, (size, k, s, d) in enumerate(zip(sizes, kernel, strides, dilations)):
        padded, reach = size + pads[i] + pads[spatial + i], d * (k - 1) + 1
        count = -(-(padded - reach) // s) + 1
        if (count - 1) * s >= size + pads[i]:
            count -= 1
        beyond.append(max(0, (count - 1) * s + reach - padded))
    return beyond


def _total(build: Builder, values: list[ir.Value], integral: bool) -> ir.Value:
    # ONNX Runtime has Sum for floating types only; integers are added pairwise (exact either way).
    if not integral:
        return build.op("Sum", values)
    total = values[0]
    for value in values[1:]:
        total = build.op("Add", [total, value])
    return total


def with_ceil_ends(pads: Sequence[int], beyond: Sequence[int]) -> list[int]:
    """``pads`` (begin then end) with ``ceil_mode``'s reach past the end added to the ends."""
    spatial = len(beyond)
    return list(pads[:spatial]) + [p + b for p, b in zip(pads[spatial:], beyond)]


def window_sums(
    build: Builder, x: ir.Value, kernel: Sequence[int], strides: Sequence[int], dilations: Sequence[int],
    pads: Sequence[int], beyond: Sequence[int], integral: bool,
) -> ir.Value:
    """The sum of each window of ``x``, padded with zeros (and ``beyond`` more at the end)."""
    padded = pad(build, x, with_ceil_ends(pads, beyond), len(kernel))
    return _total(build, windows(build, padded, kernel, strides, dilations), integral)


def window_counts(
    build: Builder, x: ir.Value, kernel: Sequence[int], strides: Sequence[int], dilations: Sequence[int],
    pads: Sequence[int], beyond: Sequence[int], counted: bool, dtype: ir.DataType,
) -> ir.Value:
    """How many elements each window averages, ``[1, 1, *out]`` of ``dtype``: those of the input,
    and of its padding where ``counted``, never those ``beyond`` it."""
    spatial = len(kernel)
    layout = build.op("Concat", [int64s(build, [1, 1]), build.op("Shape", [x], {"start": 2})], {"axis": 0})
    ones = build.op("ConstantOfShape", [layout], {"value": ir.tensor([1], dtype=dtype)})
    fill = build.op("Constant", [], {"value": ir.tensor(1 if counted else 0, dtype=dtype)})
    inside = pad(build, ones, pads, spatial, fill)
    inside = pad(build, inside, [0] * spatial + list(beyond), spatial)
    return _total(build, windows(build, inside, kernel, strides, dilations), not dtype.is_floating_point())
