"""float64 sliding-window and resampling operators ONNX Runtime's CPU provider lacks, in float64 ones it has.

ONNX Runtime registers ``Conv``, ``ConvTranspose``, ``AveragePool`` and float ``Resize`` for
float32 only, so a float64 convolution, transposed convolution, average pooling, local response
norm (which torch writes as an average pooling over channels) or interpolation exports a graph the
runtime refuses. Running them in float32 would narrow the model. Here they are rewritten in
float64 operators it has:

- ``Conv``, ``ConvTranspose`` and ``AveragePool`` from strided slices of the padded input
  (:mod:`torch_onnx_fx.ops.windows`, shared with the integer translations);
- ``Resize`` as one ``Gather`` per axis for nearest neighbours, and gathered neighbours times
  ATen's float64 weights for linear and cubic modes.

Kernel sizes, channel counts and, for ``ceil_mode``, the spatial sizes must be static; otherwise
the node is left for the runtime to name at session creation (loud, not wrong).
"""

from __future__ import annotations

import math
from typing import Callable

import onnx_ir as ir

from torch_onnx_fx.ops import windows

__all__ = ["REWRITES"]

Rewrite = Callable[[ir.tape.Tape, ir.Node], ir.Value]


def _ints(node: ir.Node, name: str, default: list[int]) -> list[int]:
    attribute = node.attributes.get(name)
    return [int(v) for v in attribute.value] if attribute is not None else default


def _int(node: ir.Node, name: str, default: int) -> int:
    attribute = node.attributes.get(name)
    return int(attribute.value) if attribute is not None else default


def double(tape: ir.tape.Tape, value: float) -> ir.Value:
    """A float64 scalar constant (float64_kernels builds with it too)."""
    return tape.op("Constant", [], {"value": ir.tensor(value, dtype=ir.DataType.DOUBLE)})


def _explicit_pads(node: ir.Node, spatial: int) -> list[int] | None:
    """The node's pads, or None where ``auto_pad`` asks the runtime to work them out."""
    auto_pad = node.attributes.get("auto_pad")
    if auto_pad is not None and auto_pad.value != "NOTSET":
        return None
    return _ints(node, "pads", [0] * 2 * spatial)


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
    return windows.patch_product(
        tape, node.inputs[0], node.inputs[1], node.inputs[2] if len(node.inputs) > 2 else None, weight_shape,
        _ints(node, "strides", [1] * spatial), _ints(node, "dilations", [1] * spatial), pads, _int(node, "group", 1),
    )


def _conv_transpose(tape: ir.tape.Tape, node: ir.Node) -> ir.Value | None:
    weight_shape = _static_weight(node)
    if weight_shape is None or "output_shape" in node.attributes:
        return None
    spatial = len(weight_shape) - 2
    pads = _explicit_pads(node, spatial)
    if pads is None:
        return None
    return windows.transposed_product(
        tape, node.inputs[0], node.inputs[1], node.inputs[2] if len(node.inputs) > 2 else None, weight_shape,
        _ints(node, "strides", [1] * spatial), _ints(node, "dilations", [1] * spatial), pads,
        _ints(node, "output_padding", [0] * spatial), _int(node, "group", 1),
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
        beyond = windows.ceil_extension(sizes, kernel, strides, dilations, pads)
    counted = bool(_int(node, "count_include_pad", 0))
    sums = windows.window_sums(tape, x, kernel, strides, dilations, pads, beyond, integral=False)
    if counted and not any(beyond):
        return tape.op("Div", [sums, double(tape, float(math.prod(kernel)))])
    counts = windows.window_counts(tape, x, kernel, strides, dilations, pads, beyond, counted, ir.DataType.DOUBLE)
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
        size = tape.op("Slice", [dims, windows.int64s(tape, [axis]), windows.int64s(tape, [axis + 1])])
        count = tape.op("Cast", [tape.op("Squeeze", [size])], {"to": ir.DataType.INT32})
        zero, step = (tape.op("Constant", [], {"value": ir.tensor(v, dtype=ir.DataType.INT32)}) for v in (0, 1))
        grid_shape = windows.int64s(tape, [-1 if a else 1 for a in alone])
        grid = tape.op("Reshape", [tape.op("Range", [zero, count, step]), grid_shape])
        resize_inputs = [grid, inputs[1]] + ([one_axis, None] if given is scales else [None, one_axis])
        picked = tape.op("Resize", resize_inputs, {**attributes, "mode": "nearest"})
        result = tape.op("Gather", [result, tape.op("Reshape", [picked, windows.int64s(tape, [-1])])], {"axis": axis})
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
    zero, one, half = (double(tape, v) for v in (0.0, 1.0, 0.5))
    positions = tape.op("Range", [zero, out, one])
    if mode == "align_corners":
        spread = tape.op("Div", [tape.op("Sub", [size, one]), tape.op("Sub", [out, one])])
        ratio = tape.op("Where", [tape.op("Greater", [out, one]), spread, zero])
        return tape.op("Mul", [ratio, positions])
    ratio = double(tape, 1.0 / scale) if scale is not None else tape.op("Div", [size, out])
    if mode == "asymmetric":
        return tape.op("Mul", [ratio, positions])
    source = tape.op("Sub", [tape.op("Mul", [ratio, tape.op("Add", [positions, half])]), half])
    if mode == "pytorch_half_pixel":
        source = tape.op("Where", [tape.op("Greater", [out, one]), source, double(tape, -0.5)])
    # Linear interpolation starts at the first element; cubic extends past it (clamped indices).
    return source if cubic else tape.op("Max", [source, zero])


def _cubic_weights(tape: ir.tape.Tape, t: ir.Value, a: float) -> list[ir.Value]:
    """The four cubic-convolution weights of fraction ``t`` (ATen's
    ``get_cubic_upsample_coefficients``: Keys' kernel with coefficient ``a``)."""
    a_, a2, a3 = double(tape, a), double(tape, a + 2), double(tape, a + 3)
    five_a, eight_a, four_a, one = double(tape, 5 * a), double(tape, 8 * a), double(tape, 4 * a), double(tape, 1.0)

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
    scales that are not short binary fractions are left to the runtime (the interpolations of
    static sizes ``ops/resampling.py`` translates before any ``Resize`` is written)."""
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
        pick = windows.int64s(tape, [axis])
        size = tape.op("Squeeze", [tape.op("Gather", [dims, pick])])
        scale = scale_values[axis] if scale_values is not None else None
        if out_sizes is not None:
            out = tape.op("Squeeze", [tape.op("Gather", [out_sizes, pick])])
        else:
            out = tape.op("Floor", [tape.op("Mul", [size, double(tape, scale)])])
        source = _source_positions(tape, size, out, scale, coordinates, cubic)
        last = tape.op("Sub", [size, double(tape, 1.0)])
        start = tape.op("Floor", [source])
        # Weights broadcast along the axis: [out, 1, ...] for the axes after it.
        along = windows.int64s(tape, [-1] + [1] * (rank - 1 - axis))
        if cubic:
            taps = [tape.op("Add", [start, double(tape, float(j - 1))]) for j in range(4)]
            weights = _cubic_weights(tape, tape.op("Sub", [source, start]), attributes.get("cubic_coeff_a", -0.75))
            taps = [tape.op("Min", [tape.op("Max", [tap, double(tape, 0.0)]), last]) for tap in taps]
        else:
            upper = tape.op("Sub", [source, start])
            weights = [tape.op("Sub", [double(tape, 1.0), upper]), upper]
            taps = [start, tape.op("Min", [tape.op("Add", [start, double(tape, 1.0)]), last])]
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
