"""torchvision's detection operators as the standard ONNX operators.

``torchvision.ops.nms`` (and ``batched_nms``, which offsets boxes per class and calls it) is
``NonMaxSuppression``; ``roi_align`` is ``RoiAlign``; Keypoint R-CNN's heatmap decoding, captured
as ``torch_onnx_fx::heatmap_keypoints`` (see :mod:`torch_onnx_fx.capture.keypoint_heatmaps`), is a
``Loop`` over the boxes around ``Resize``. They are registered by qualified name, so nothing here
imports torchvision: a model without it never reaches them.
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir
import torch
from onnxscript import opset18 as op
from onnxscript import opset19

from torch_onnx_fx.errors import TranslationError
from torch_onnx_fx.translate.op_context import OpContext
from torch_onnx_fx.registry import register, wants_context

__all__: list[str] = []


@register("torchvision::nms")
def torchvision_nms(dets: ir.Value, scores: ir.Value, iou_threshold: float) -> ir.Value:
    """nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor

    Indices of the kept boxes, highest score first, a box dropped when its IoU with a kept one
    exceeds the threshold: ONNX's rule too. IoU does not depend on the order of the two corners'
    coordinates, so torchvision's (x1, y1, x2, y2) go in as they are. Every box may be kept (the
    limit per class is the box count; 0 would keep none).
    """
    boxes = op.Unsqueeze(dets, op.Constant(value_ints=[0]))
    ranked = op.Unsqueeze(scores, op.Constant(value_ints=[0, 1]))
    limit = op.Shape(dets, start=0, end=1)
    threshold = op.Constant(value_floats=[float(iou_threshold)])
    selected = op.NonMaxSuppression(boxes, ranked, limit, threshold, center_point_box=0)
    column = op.Slice(selected, op.Constant(value_ints=[2]), op.Constant(value_ints=[3]), op.Constant(value_ints=[1]))
    return op.Reshape(column, op.Constant(value_ints=[-1]))


@register("torchvision::roi_align", min_opset=16)
def torchvision_roi_align(
    input: ir.Value,
    rois: ir.Value,
    spatial_scale: float,
    pooled_height: int,
    pooled_width: int,
    sampling_ratio: int,
    aligned: bool,
) -> ir.Value:
    """roi_align(Tensor input, Tensor rois, float spatial_scale, SymInt pooled_height,
    SymInt pooled_width, int sampling_ratio, bool aligned) -> Tensor

    ``rois`` rows are (batch index, x1, y1, x2, y2). ``aligned`` shifts by half a pixel
    (``half_pixel``); the legacy mode (``output_half_pixel``) also makes every roi at least one
    pixel wide, as torchvision does. A negative sampling ratio is ONNX's 0: adaptive.
    """
    one = op.Constant(value_ints=[1])
    batch = op.Cast(op.Reshape(op.Slice(rois, op.Constant(value_ints=[0]), one, one), op.Constant(value_ints=[-1])), to=ir.DataType.INT64)
    boxes = op.Slice(rois, one, op.Constant(value_ints=[5]), one)
    return op.RoiAlign(
        input, boxes, batch,
        mode="avg",
        output_height=int(pooled_height),
        output_width=int(pooled_width),
        sampling_ratio=max(0, int(sampling_ratio)),
        spatial_scale=float(spatial_scale),
        coordinate_transformation_mode="half_pixel" if aligned else "output_half_pixel",
    )


@register("torch_onnx_fx::heatmap_keypoints", min_opset=15)
@wants_context
def heatmap_keypoints(maps: ir.Value, boxes: ir.Value, *, ctx: OpContext) -> tuple[ir.Value, ir.Value]:
    """heatmap_keypoints(Tensor maps, Tensor boxes) -> (Tensor, Tensor)

    One iteration per box: its maps resized (bicubic, half-pixel centres, A = -0.75, edges
    repeated: ``F.interpolate(mode="bicubic", align_corners=False)``'s rule) to the box's size
    rounded up to whole pixels, each map's first peak, and the peak's pixel centre scaled back to
    the box. Each iteration writes its box's rows into buffers the size of the result, so no
    boxes give empty results of the right shape. ONNX Runtime's cubic weights round differently
    from ATen's: where two pixels of a resized map are within float32 rounding of each other, the
    other one may be the peak.
    """
    # torchvision's decoding is float32 whatever the maps; only float32 maps are routed here.
    _refuse_other_dtypes("torch_onnx_fx::heatmap_keypoints", ctx, torch.float32)
    joints = op.Shape(maps, start=1, end=2)
    count = op.Squeeze(op.Shape(maps, start=0, end=1))
    points = op.Expand(op.Constant(value_float=0.0), op.Concat(op.Shape(boxes, start=0, end=1), joints, op.Constant(value_ints=[3]), axis=0))
    peaks = op.Expand(op.Constant(value_float=0.0), op.Shape(maps, start=0, end=2))

    def corner(box: ir.Value, index: int) -> ir.Value:
        return op.Gather(box, op.Constant(value_int=index), axis=0)

    def one_box(i: ir.Value, points: ir.Value, peaks: ir.Value) -> list[ir.Value]:
        box = op.Gather(boxes, i, axis=0)
        left, top = corner(box, 0), corner(box, 1)
        width = op.Max(op.Sub(corner(box, 2), left), op.Constant(value_float=1.0))
        height = op.Max(op.Sub(corner(box, 3), top), op.Constant(value_float=1.0))
        columns, rows = op.Ceil(width), op.Ceil(height)
        whole = op.Cast(op.Concat(op.Reshape(rows, op.Constant(value_ints=[1])), op.Reshape(columns, op.Constant(value_ints=[1])), axis=0), to=ir.DataType.INT64)
        planes = op.Unsqueeze(op.Gather(maps, i, axis=0), op.Constant(value_ints=[1]))
        sizes = op.Concat(joints, op.Constant(value_ints=[1]), whole, axis=0)
        resized = op.Resize(
            planes, None, None, sizes,
            mode="cubic", cubic_coeff_a=-0.75, coordinate_transformation_mode="half_pixel", exclude_outside=0,
        )
        flat = op.Reshape(resized, op.Concat(joints, op.Constant(value_ints=[-1]), axis=0))
        peak = op.ArgMax(flat, axis=1, keepdims=1)
        value = op.Squeeze(op.GatherElements(flat, peak, axis=1), op.Constant(value_ints=[1]))
        peak = op.Squeeze(peak, op.Constant(value_ints=[1]))
        per_row = op.Cast(columns, to=ir.DataType.INT64)
        column = op.Mod(peak, per_row)
        row = op.Div(op.Sub(peak, column), per_row)

        def centre(index: ir.Value, extent: ir.Value, pixels: ir.Value, start: ir.Value) -> ir.Value:
            scaled = op.Mul(op.Add(op.Cast(index, to=ir.DataType.FLOAT), op.Constant(value_float=0.5)), op.Div(extent, pixels))
            return op.Unsqueeze(op.Add(scaled, start), op.Constant(value_ints=[1]))

        ones = op.Expand(op.Constant(value_floats=[1.0]), op.Concat(joints, op.Constant(value_ints=[1]), axis=0))
        point = op.Concat(centre(column, width, columns, left), centre(row, height, rows, top), ones, axis=1)
        at = op.Reshape(i, op.Constant(value_ints=[1, 1]))
        return [
            op.ScatterND(points, at, op.Unsqueeze(point, op.Constant(value_ints=[0]))),
            op.ScatterND(peaks, at, op.Unsqueeze(value, op.Constant(value_ints=[0]))),
        ]

    points, peaks = ctx.loop(count, [points, peaks], one_box)
    return points, peaks


def _refuse_other_dtypes(operator: str, ctx: OpContext, *dtypes: torch.dtype) -> None:
    """A TranslationError unless the first input is of one of ``dtypes``."""
    dtype = getattr(ctx.inputs[0], "dtype", None)
    if dtype not in dtypes:
        names = " and ".join(str(d).removeprefix("torch.") for d in dtypes)
        raise TranslationError(f"{operator} is translated for {names} inputs only; got {dtype}.")


@register("torchvision::roi_pool")
@wants_context
def torchvision_roi_pool(
    input: ir.Value, rois: ir.Value, spatial_scale: float, pooled_height: int, pooled_width: int, *, ctx: OpContext
) -> tuple[ir.Value, ir.Value | None]:
    """roi_pool(Tensor input, Tensor rois, float spatial_scale, SymInt pooled_height,
    SymInt pooled_width) -> (Tensor, Tensor)

    ``MaxRoiPool``: both follow Caffe's RoI pooling (box corners rounded to whole pixels, bins
    from floor/ceil of their fractional bounds, an empty bin 0); NaN features, which torchvision's
    maximum skips, go in as -inf. The second result, each maximum's
    position, has no ONNX equivalent: ``torchvision.ops.roi_pool`` discards it, and a model that
    reads it is refused.
    """
    # ONNX Runtime's kernel is float32 only, and computing a narrower type in float32 would round
    # the box coordinates differently from torchvision.
    _refuse_other_dtypes("torchvision::roi_pool", ctx, torch.float32)
    if ctx.results_read is None or 1 in ctx.results_read:
        raise TranslationError(
            "torchvision::roi_pool's second result (the position of each maximum) has no ONNX "
            "equivalent; only its pooled values can be exported."
        )
    # torchvision's running maximum skips NaN (``value > max`` is false); ONNX Runtime's does not.
    # -inf is skipped by both, and a bin of nothing else gives both their -FLT_MAX start.
    input = op.Where(op.IsNaN(input), op.Constant(value_float=float("-inf")), input)
    pooled = op.MaxRoiPool(input, rois, pooled_shape=[int(pooled_height), int(pooled_width)], spatial_scale=float(spatial_scale))
    return pooled, None


@register("torchvision::ps_roi_align", min_opset=16)
@wants_context
def torchvision_ps_roi_align(
    input: ir.Value, rois: ir.Value, spatial_scale: float, pooled_height: int, pooled_width: int, sampling_ratio: int,
    *, ctx: OpContext,
) -> tuple[ir.Value, ir.Value]:
    """ps_roi_align(Tensor input, Tensor rois, float spatial_scale, SymInt pooled_height,
    SymInt pooled_width, int sampling_ratio) -> (Tensor, Tensor)

    Position-sensitive RoIAlign: output channel ``c`` at bin ``(i, j)`` averages input channel
    ``(c * pooled_height + i) * pooled_width + j`` over that bin alone. Each bin is computed as
    ``RoiAlign`` computes it with half-pixel coordinates (torchvision's kernels share the sampling
    and interpolation, and neither clamps the box to a pixel here), so the translation runs
    ``RoiAlign`` over every channel and gathers each output channel's own bin: exact, at
    ``pooled_height * pooled_width`` times the work. One difference is made explicit: with an
    adaptive sampling grid, a box so thin that a bin gets no sampling point divides 0 by 0 in
    torchvision (NaN) where ``RoiAlign`` gives 0.
    """
    _refuse_other_dtypes("torchvision::ps_roi_align", ctx, torch.float32)  # as roi_pool
    height, width = int(pooled_height), int(pooled_width)
    bins = height * width
    aligned = torchvision_roi_align(input, rois, spatial_scale, height, width, sampling_ratio, True)
    # (boxes, out_channels * bins, h, w) -> (boxes, out_channels, bins, bins): input channel
    # c * bins + b at bin b' sits at [.., c, b, b']; each output keeps b == b'.
    # The output channel count is static; the box count may be 0, which Reshape's 0 would copy
    # beside a -1 (invalid).
    out_channels = int(ctx.result[0].shape[1])
    square = op.Reshape(aligned, op.Constant(value_ints=[-1, out_channels, bins, bins]))
    diagonal = op.Constant(value=ir.tensor(np.arange(bins, dtype=np.int64).reshape(1, 1, bins, 1)))
    boxes_channels = op.Shape(square, start=0, end=2)
    taken = op.GatherElements(square, op.Expand(diagonal, op.Concat(boxes_channels, op.Constant(value_ints=[bins, 1]), axis=0)), axis=3)
    pooled = op.Reshape(taken, op.Concat(boxes_channels, op.Constant(value_ints=[height, width]), axis=0))
    if int(sampling_ratio) <= 0:
        one = op.Constant(value_ints=[1])

        def extent(start: int) -> ir.Value:
            # torchvision's arithmetic: both corners scaled and shifted by half a pixel, then subtracted.
            scale, half = op.Constant(value_float=float(spatial_scale)), op.Constant(value_float=0.5)
            low = op.Sub(op.Mul(op.Slice(rois, op.Constant(value_ints=[start]), op.Constant(value_ints=[start + 1]), one), scale), half)
            high = op.Sub(op.Mul(op.Slice(rois, op.Constant(value_ints=[start + 2]), op.Constant(value_ints=[start + 3]), one), scale), half)
            return op.Sub(high, low)

        grid_h = op.Ceil(op.Div(extent(2), op.Constant(value_float=float(height))))
        grid_w = op.Ceil(op.Div(extent(1), op.Constant(value_float=float(width))))
        empty = op.Reshape(op.Equal(op.Mul(grid_h, grid_w), op.Constant(value_float=0.0)), op.Constant(value_ints=[-1, 1, 1, 1]))
        pooled = op.Where(empty, op.Constant(value_float=float("nan")), pooled)
    channels = np.arange(out_channels * bins, dtype=np.int32).reshape(1, -1, height, width)
    mapping = op.Expand(op.Constant(value=ir.tensor(channels)), op.Shape(pooled))
    return pooled, mapping


@register("torchvision::deform_conv2d", min_opset=19)
@wants_context
def torchvision_deform_conv2d(
    input: ir.Value, weight: ir.Value, offset: ir.Value, mask: ir.Value, bias: ir.Value,
    stride_h: int, stride_w: int, pad_h: int, pad_w: int, dilation_h: int, dilation_w: int,
    groups: int, offset_groups: int, use_mask: bool, *, ctx: OpContext,
) -> ir.Value:
    """deform_conv2d(Tensor input, Tensor weight, Tensor offset, Tensor mask, Tensor bias,
    SymInt stride_h, SymInt stride_w, SymInt pad_h, SymInt pad_w, SymInt dilation_h,
    SymInt dilation_w, SymInt groups, SymInt offset_groups, bool use_mask) -> Tensor

    ``DeformConv``, whose offset and mask layouts are torchvision's ((y, x) pairs per kernel
    position and offset group); the mask goes in only when ``use_mask`` (torchvision passes an
    empty one otherwise).
    """
    _refuse_other_dtypes("torchvision::deform_conv2d", ctx, torch.float32, torch.float64)  # ONNX Runtime's kernels
    inputs = [input, weight, offset, bias] + ([mask] if use_mask else [])
    return opset19.DeformConv(
        *inputs,
        strides=[int(stride_h), int(stride_w)],
        pads=[int(pad_h), int(pad_w), int(pad_h), int(pad_w)],
        dilations=[int(dilation_h), int(dilation_w)],
        group=int(groups),
        offset_group=int(offset_groups),
    )
