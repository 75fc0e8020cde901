"""float64 sliding-window and resampling operators ONNX Runtime's CPU provider lacks, in float64 ones it has.

ONNX Runtime registers ``Conv``, ``ConvTranspose`` and ``AveragePool`` for float32 only, so a
float64 convolution, transposed convolution, average pooling or local response norm (which
torch writes as an average pooling over channels) exports a graph the runtime refuses. Running
them in float32 would narrow the model. Each is written here from strided slices of the padded
input, one per kernel offset:

- ``Conv`` stacks the slices (im2col) into one float64 ``MatMul`` with the weights;
- ``ConvTranspose`` is the ``Conv`` of the input spread out by the stride (zeros between its
  elements), padded by the kernel's reach less the pads, with the weights flipped and their
  channel axes swapped: the adjoint of a strided convolution, which is what a transposed
  convolution is;
- ``AveragePool`` sums the slices and divides by the number of elements each window covers,
  counted by pooling ones the same way (padding counted or not, windows that ``ceil_mode`` lets run
  past the end clipped as ATen clips them).

- ``Resize`` (float32 and integer kernels only) is one ``Gather`` per axis for nearest
  neighbours, and gathered neighbours times ATen's float64 weights for linear and cubic modes.

Kernel sizes, channel counts and, for ``ceil_mode``, the spatial sizes must be static; otherwise
the node is left for the runtime to name at session creation (loud, not wrong).
"""

from __future__ import annotations

import itertools
import math
from typing import Callable

import onnx_ir as ir

__all__ = ["REWRITES"]

Rewrite = Callable[[ir.tape.Tape, ir.Node], ir.Value]

# Slice's end for "to the end of the axis".
_END = 2**62


def _ints(node: ir.Node, name: str, default: list[int]) -> list[int]:
    attribute = node.attributes.get(name)
    return [int(v) for v in attribute.value] if attribute is not None else default


def _int(node: ir.Node, name: str, default: int) -> int:
    attribute = node.attributes.get(name)
    return int(attribute.value) if attribute is not None else default


def _int64s(tape: ir.tape.Tape, values: list[int]) -> ir.Value:
    return tape.op("Constant", [], {"value": ir.tensor(values, dtype=ir.DataType.INT64)})


def _double(tape: ir.tape.Tape, value: float) -> ir.Value:
    return tape.op("Constant", [], {"value": ir.tensor(value, dtype=ir.DataType.DOUBLE)})


def _explicit_pads(node: ir.Node, spatial: int) -> list[int] | None:
    """The node's pads, or None where ``auto_pad`` asks the runtime to work them out."""
    auto_pad = node.attributes.get("auto_pad")
    if auto_pad is not None and auto_pad.value != "NOTSET":
        return None
    return _ints(node, "pads", [0] * 2 * spatial)


def _pad(tape: ir.tape.Tape, x: ir.Value, pads: list[int], spatial: int, value: ir.Value | None = None) -> ir.Value:
    """``x`` [N, C, *spatial] padded (negative pads crop, as ONNX's Pad allows)."""
    if not any(pads):
        return x
    inputs = [x, _int64s(tape, [0, 0, *pads[:spatial], 0, 0, *pads[spatial:]])]
    return tape.op("Pad", inputs + ([value] if value is not None else []))


def _windows(tape: ir.tape.Tape, x: ir.Value, kernel: list[int], strides: list[int], dilations: list[int]) -> list[ir.Value]:
    """One strided slice of ``x`` (already padded) per kernel offset, in the kernel's row-major
    order: slice k holds, at each output position, the element under offset k of its window."""
    spatial = len(kernel)
    axes, steps = _int64s(tape, list(range(2, 2 + spatial))), _int64s(tape, strides)
    slices = []
    for offset in itertools.product(*(range(k) for k in kernel)):
        starts = [o * d for o, d in zip(offset, dilations)]
        # The last window ends (kernel - 1 - offset) dilated steps before the end.
        ends = [-(d * (k - 1 - o)) or _END for o, d, k in zip(offset, dilations, kernel)]
        slices.append(tape.op("Slice", [x, _int64s(tape, starts), _int64s(tape, ends), axes, steps]))
    return slices


def _patch_product(
    tape: ir.tape.Tape, x: ir.Value, w: ir.Value, bias: ir.Value | None,
    weight_shape: list[int], strides: list[int], dilations: list[int], pads: list[int], groups: int,
) -> ir.Value:
    """Conv as one float64 ``MatMul`` of the input's patches (im2col): the window slices stacked
    after the channels, so that ``[C, kernel]`` flattens as the weight's ``[C / group, *kernel]``."""
    out_channels, group_channels, *kernel = weight_shape
    spatial = len(kernel)
    x = _pad(tape, x, pads, spatial)
    slices = _windows(tape, x, kernel, strides, dilations)
    stacked = tape.op("Concat", [tape.op("Unsqueeze", [s, _int64s(tape, [2])]) for s in slices], {"axis": 2})
    columns = group_channels * math.prod(kernel)
    rows = tape.op("Reshape", [stacked, _int64s(tape, [0, groups, columns, -1])])
    weights = tape.op("Reshape", [w, _int64s(tape, [groups, out_channels // groups, columns])])
    product = tape.op("MatMul", [weights, rows])  # [N, groups, out_channels / groups, positions]
    batch = tape.op("Shape", [x], {"end": 1})
    positions = tape.op("Shape", [slices[0]], {"start": 2})
    result = tape.op("Reshape", [product, tape.op("Concat", [batch, _int64s(tape, [out_channels]), positions], {"axis": 0})])
    if bias is not None:
        result = tape.op("Add", [result, tape.op("Reshape", [bias, _int64s(tape, [out_channels] + [1] * spatial)])])
    return result


def _static_weight(node: ir.Node) -> list[int] | None:
    x, w = node.inputs[0], node.inputs[1]
    if x.shape is None or w.shape is None or not all(isinstance(d, int) for d in w.shape):
        return None
    return [int(d) for d in w.shape]


def _conv(tape: ir.tape.Tape, node: ir.Node) -> ir.Value | None:
    weight_shape = _static_weight(node)
    spatial = len(weight_shape) - 2 if weight_shape is not None else 0
    pads = _explicit_pads(node, spatial)
    if weight_shape is None or pads is None:
        return None
    return _patch_product(
        tape, node.inputs[0], node.inputs[1], node.inputs[2] if len(node.inputs) > 2 else None, weight_shape,
        _ints(node, "strides", [1] * spatial), _ints(node, "dilations", [1] * spatial), pads, _int(node, "group", 1),
    )


def _spread(tape: ir.tape.Tape, x: ir.Value, rank: int, axis: int, stride: int) -> ir.Value:
    """``x`` with ``stride - 1`` zeros between neighbours along ``axis``: each element gets a row
    of zeros after it (a new axis padded, then merged), and the last row is cut off."""
    pads = [0] * 2 * (rank + 1)
    pads[rank + 1 + axis + 1] = stride - 1
    grown = tape.op("Pad", [tape.op("Unsqueeze", [x, _int64s(tape, [axis + 1])]), _int64s(tape, pads)])
    shape = tape.op("Shape", [x])
    merged = tape.op("Concat", [
        tape.op("Slice", [shape, _int64s(tape, [0]), _int64s(tape, [axis])]),
        _int64s(tape, [-1]),
        tape.op("Slice", [shape, _int64s(tape, [axis + 1]), _int64s(tape, [_END])]),
    ], {"axis": 0})
    flat = tape.op("Reshape", [grown, merged])
    return tape.op("Slice", [flat, _int64s(tape, [0]), _int64s(tape, [-(stride - 1)]), _int64s(tape, [axis])])


def _conv_transpose(tape: ir.tape.Tape, node: ir.Node) -> ir.Value | None:
    weight_shape = _static_weight(node)
    if weight_shape is None or "output_shape" in node.attributes:
        return None
    in_channels, group_out, *kernel = weight_shape
    spatial = len(kernel)
    pads = _explicit_pads(node, spatial)
    if pads is None:
        return None
    x, w = node.inputs[0], node.inputs[1]
    strides, dilations = _ints(node, "strides", [1] * spatial), _ints(node, "dilations", [1] * spatial)
    extra = _ints(node, "output_padding", [0] * spatial)
    groups = _int(node, "group", 1)
    for i, stride in enumerate(strides):
        if stride > 1:
            x = _spread(tape, x, 2 + spatial, 2 + i, stride)
    reach = [d * (k - 1) for d, k in zip(dilations, kernel)]
    conv_pads = [r - p for r, p in zip(reach, pads[:spatial])] + [r - p + e for r, p, e in zip(reach, pads[spatial:], extra)]
    # [C_in, C_out / g, *k] -> [C_out, C_in / g, *k], kernel reversed along every spatial axis.
    per_group = tape.op("Reshape", [w, _int64s(tape, [groups, in_channels // groups, group_out, *kernel])])
    swapped = tape.op("Transpose", [per_group], {"perm": [0, 2, 1, *range(3, 3 + spatial)]})
    out_channels = groups * group_out
    flipped = tape.op("Slice", [
        tape.op("Reshape", [swapped, _int64s(tape, [out_channels, in_channels // groups, *kernel])]),
        _int64s(tape, [-1] * spatial), _int64s(tape, [-_END] * spatial),
        _int64s(tape, list(range(2, 2 + spatial))), _int64s(tape, [-1] * spatial),
    ])
    bias = node.inputs[2] if len(node.inputs) > 2 else None
    return _patch_product(
        tape, x, flipped, bias, [out_channels, in_channels // groups, *kernel], [1] * spatial, dilations, conv_pads, groups,
    )


def _average_pool(tape: ir.tape.Tape, node: ir.Node) -> ir.Value | None:
    x = node.inputs[0]
    kernel = _ints(node, "kernel_shape", [])
    spatial = len(kernel)
    pads = _explicit_pads(node, spatial)
    if x.shape is None or not kernel or pads is None:
        return None
    strides, dilations = _ints(node, "strides", [1] * spatial), _ints(node, "dilations", [1] * spatial)
    beyond = [0] * spatial
    if _int(node, "ceil_mode", 0):
        sizes = list(x.shape)[2:]
        if not all(isinstance(s, int) for s in sizes):
            return None
        for i, (size, k, s, d) in enumerate(zip(sizes, kernel, strides, dilations)):
            padded, reach = size + pads[i] + pads[spatial + i], d * (k - 1) + 1
            count = -(-(padded - reach) // s) + 1
            # ATen's rule: the last window must start inside the input or its left padding.
            if (count - 1) * s >= size + pads[i]:
                count -= 1
            beyond[i] = max(0, (count - 1) * s + reach - padded)
    counted = _int(node, "count_include_pad", 0)
    # Windows that ceil_mode runs past the padded input read zeros that neither count nor add.
    total = _pad(tape, _pad(tape, x, pads, spatial), [0] * spatial + beyond, spatial)
    sums = tape.op("Sum", _windows(tape, total, kernel, strides, dilations))
    if counted and not any(beyond):
        return tape.op("Div", [sums, _double(tape, float(math.prod(kernel)))])
    # Only the spatial layout matters for the count: one batch and channel of ones.
    layout = tape.op("Concat", [_int64s(tape, [1, 1]), tape.op("Shape", [x], {"start": 2})], {"axis": 0})
    ones = tape.op("ConstantOfShape", [layout], {"value": ir.tensor([1.0], dtype=ir.DataType.DOUBLE)})
    inside = _pad(tape, ones, pads, spatial, _double(tape, 1.0 if counted else 0.0))
    inside = _pad(tape, inside, [0] * spatial + beyond, spatial)
    counts = tape.op("Sum", _windows(tape, inside, kernel, strides, dilations))
    return tape.op("Div", [sums, counts])


def _resize_nearest(tape: ir.tape.Tape, node: ir.Node) -> ir.Value | None:
    """Nearest-neighbour ``Resize`` as one ``Gather`` per axis. Which source element each output
    takes is left to ONNX Runtime's own int32 ``Resize``, applied to the axis's positions
    ``0 .. size - 1`` with every other axis kept at size 1: its nearest selection is one
    computation for all element types and independent per axis, so the float64 result takes the
    elements the float32 kernel would take, and nothing is rounded."""
    x = node.inputs[0]
    attributes = {name: attribute.value for name, attribute in node.attributes.items()}
    if (
        x.shape is None or attributes.get("mode", "nearest") != "nearest" or "axes" in attributes
        or attributes.get("coordinate_transformation_mode") == "tf_crop_and_resize"
        or attributes.get("keep_aspect_ratio_policy", "stretch") != "stretch"
    ):
        return None
    rank = x.shape.rank()
    inputs = list(node.inputs) + [None] * (4 - len(node.inputs))
    scales, sizes = inputs[2], inputs[3]
    given = sizes if sizes is not None else scales
    if given is None:
        return None
    known = given.const_value.numpy().tolist() if given.const_value is not None else None
    static = list(x.shape)
    dims = tape.op("Shape", [x])
    result = x
    for axis in range(rank):
        if known is not None and (known[axis] == 1.0 if given is scales else known[axis] == static[axis]):
            continue  # an axis kept at its size maps every position to itself
        alone = [0] * rank
        alone[axis] = 1
        # The node's scales or sizes on this axis, 1 on the others (exact: x * 1 + 0, or 0 + 1).
        others = tape.op("Constant", [], {"value": ir.tensor([1 - a for a in alone], dtype=given.dtype)})
        mask = tape.op("Constant", [], {"value": ir.tensor(alone, dtype=given.dtype)})
        one_axis = tape.op("Add", [tape.op("Mul", [given, mask]), others])
        size = tape.op("Slice", [dims, _int64s(tape, [axis]), _int64s(tape, [axis + 1])])
        count = tape.op("Cast", [tape.op("Squeeze", [size])], {"to": ir.DataType.INT32})
        zero, step = (tape.op("Constant", [], {"value": ir.tensor(v, dtype=ir.DataType.INT32)}) for v in (0, 1))
        grid_shape = _int64s(tape, [-1 if a else 1 for a in alone])
        grid = tape.op("Reshape", [tape.op("Range", [zero, count, step]), grid_shape])
        resize_inputs = [grid, inputs[1]] + ([one_axis, None] if given is scales else [None, one_axis])
        picked = tape.op("Resize", resize_inputs, {**attributes, "mode": "nearest"})
        result = tape.op("Gather", [result, tape.op("Reshape", [picked, _int64s(tape, [-1])])], {"axis": axis})
    return result


# Coordinate modes whose source positions are written below; the others are left to the runtime.
_SOURCE_MODES = ("half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric")


def _exact_scale(value: float) -> bool:
    """Whether a float32 scale is surely the double the model was given: ATen computes with the
    double ``1 / scale_factor``, the graph holds a float32 copy. Short binary fractions (2, 0.5,
    1.25...) are the same in both; others (1.7) would move every source position by ~1e-8."""
    return value > 0 and (value * 1024).is_integer()


def _source_positions(tape: ir.tape.Tape, size: ir.Value, out: ir.Value, scale: float | None, mode: str, cubic: bool) -> ir.Value:
    """ATen's source position of each output position along one axis, in float64
    (``area_pixel_compute_scale`` and ``area_pixel_compute_source_index``); ``size`` and ``out``
    are float64 scalars, ``scale`` the node's scale where it has one."""
    zero, one, half = (_double(tape, v) for v in (0.0, 1.0, 0.5))
    positions = tape.op("Range", [zero, out, one])
    if mode == "align_corners":
        spread = tape.op("Div", [tape.op("Sub", [size, one]), tape.op("Sub", [out, one])])
        ratio = tape.op("Where", [tape.op("Greater", [out, one]), spread, zero])
        return tape.op("Mul", [ratio, positions])
    ratio = _double(tape, 1.0 / scale) if scale is not None else tape.op("Div", [size, out])
    if mode == "asymmetric":
        return tape.op("Mul", [ratio, positions])
    source = tape.op("Sub", [tape.op("Mul", [ratio, tape.op("Add", [positions, half])]), half])
    if mode == "pytorch_half_pixel":
        source = tape.op("Where", [tape.op("Greater", [out, one]), source, _double(tape, -0.5)])
    # Linear interpolation starts at the first element; cubic extends past it (clamped indices).
    return source if cubic else tape.op("Max", [source, zero])


def _cubic_weights(tape: ir.tape.Tape, t: ir.Value, a: float) -> list[ir.Value]:
    """The four cubic-convolution weights of fraction ``t`` (ATen's
    ``get_cubic_upsample_coefficients``: Keys' kernel with coefficient ``a``)."""
    a_, a2, a3 = _double(tape, a), _double(tape, a + 2), _double(tape, a + 3)
    five_a, eight_a, four_a, one = _double(tape, 5 * a), _double(tape, 8 * a), _double(tape, 4 * a), _double(tape, 1.0)

    def near(d: ir.Value) -> ir.Value:  # |d| <= 1: ((a + 2) d - (a + 3)) d d + 1
        return tape.op("Add", [tape.op("Mul", [tape.op("Mul", [tape.op("Sub", [tape.op("Mul", [a2, d]), a3]), d]), d]), one])

    def far(d: ir.Value) -> ir.Value:  # 1 < |d| < 2: ((a d - 5a) d + 8a) d - 4a
        inner = tape.op("Add", [tape.op("Mul", [tape.op("Sub", [tape.op("Mul", [a_, d]), five_a]), d]), eight_a])
        return tape.op("Sub", [tape.op("Mul", [inner, d]), four_a])

    rest = tape.op("Sub", [one, t])
    return [far(tape.op("Add", [t, one])), near(t), near(rest), far(tape.op("Add", [rest, one]))]


def _resize_interpolating(tape: ir.tape.Tape, node: ir.Node) -> ir.Value | None:
    """Linear and cubic ``Resize`` as ATen computes them: one axis at a time, the last first,
    each output the weighted sum of the gathered neighbours (two, or four with clamped indices),
    weights computed in float64 from the sizes. ATen's kernel nests its sums the same way, so
    the float64 results are ATen's to rounding. Antialiasing, ``exclude_outside``, cropping and
    scales that are not short binary fractions are left to the runtime."""
    x = node.inputs[0]
    attributes = {name: attribute.value for name, attribute in node.attributes.items()}
    mode = attributes.get("mode", "nearest")
    coordinates = attributes.get("coordinate_transformation_mode", "half_pixel")
    if (
        x.shape is None or mode not in ("linear", "cubic") or attributes.get("antialias", 0)
        or attributes.get("exclude_outside", 0) or "axes" in attributes or coordinates not in _SOURCE_MODES
        or attributes.get("keep_aspect_ratio_policy", "stretch") != "stretch"
    ):
        return None
    rank, cubic = x.shape.rank(), mode == "cubic"
    inputs = list(node.inputs) + [None] * (4 - len(node.inputs))
    scales, sizes = inputs[2], inputs[3]
    if sizes is None and (scales is None or scales.const_value is None):
        return None
    scale_values = scales.const_value.numpy().tolist() if sizes is None else None
    if scale_values is not None and not all(_exact_scale(v) for v in scale_values):
        return None
    static = list(x.shape)
    dims = tape.op("Cast", [tape.op("Shape", [x])], {"to": ir.DataType.DOUBLE})
    out_sizes = tape.op("Cast", [sizes], {"to": ir.DataType.DOUBLE}) if sizes is not None else None
    result = x
    for axis in reversed(range(rank)):
        if scale_values is not None and scale_values[axis] == 1.0:
            continue
        if sizes is not None and sizes.const_value is not None and int(sizes.const_value.numpy()[axis]) == static[axis]:
            continue
        pick = _int64s(tape, [axis])
        size = tape.op("Squeeze", [tape.op("Gather", [dims, pick])])
        scale = scale_values[axis] if scale_values is not None else None
        if out_sizes is not None:
            out = tape.op("Squeeze", [tape.op("Gather", [out_sizes, pick])])
        else:
            out = tape.op("Floor", [tape.op("Mul", [size, _double(tape, scale)])])
        source = _source_positions(tape, size, out, scale, coordinates, cubic)
        last = tape.op("Sub", [size, _double(tape, 1.0)])
        start = tape.op("Floor", [source])
        # Weights broadcast along the axis: [out, 1, ...] for the axes after it.
        along = _int64s(tape, [-1] + [1] * (rank - 1 - axis))
        if cubic:
            taps = [tape.op("Add", [start, _double(tape, float(j - 1))]) for j in range(4)]
            weights = _cubic_weights(tape, tape.op("Sub", [source, start]), attributes.get("cubic_coeff_a", -0.75))
            taps = [tape.op("Min", [tape.op("Max", [tap, _double(tape, 0.0)]), last]) for tap in taps]
        else:
            upper = tape.op("Sub", [source, start])
            weights = [tape.op("Sub", [_double(tape, 1.0), upper]), upper]
            taps = [start, tape.op("Min", [tape.op("Add", [start, _double(tape, 1.0)]), last])]
        terms = [
            tape.op("Mul", [
                tape.op("Gather", [result, tape.op("Cast", [tap], {"to": ir.DataType.INT64})], {"axis": axis}),
                tape.op("Reshape", [weight, along]),
            ])
            for tap, weight in zip(taps, weights)
        ]
        total = terms[0]
        for term in terms[1:]:
            total = tape.op("Add", [total, term])
        result = total
    return result


def _resize(tape: ir.tape.Tape, node: ir.Node) -> ir.Value | None:
    mode = node.attributes.get("mode")
    if mode is None or mode.value == "nearest":
        return _resize_nearest(tape, node)
    return _resize_interpolating(tape, node)


REWRITES: dict[str, Rewrite] = {
    "Conv": _conv, "ConvTranspose": _conv_transpose, "AveragePool": _average_pool, "Resize": _resize,
}
