"""torchvision's detection operators as the standard ONNX operators.

``torchvision.ops.nms`` (and ``batched_nms``, which offsets boxes per class and calls it) is
``NonMaxSuppression``; ``roi_align`` is ``RoiAlign``; Keypoint R-CNN's heatmap decoding, captured
as ``torch_onnx_fx::heatmap_keypoints`` (see :mod:`torch_onnx_fx.keypoint_heatmaps`), is a
``Loop`` over the boxes around ``Resize``. They are registered by qualified name, so nothing here
imports torchvision: a model without it never reaches them.
"""

from __future__ import annotations

import onnx_ir as ir
import torch
from onnxscript import opset18 as op

from torch_onnx_fx.errors import TranslationError
from torch_onnx_fx.op_context import OpContext
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
    the box. Each iteration writes its box's rows into buffers the size of the result, so no boxes
    give empty results of the right shape.
    """
    if ctx.inputs[0].dtype != torch.float32:
        # torchvision's decoding is float32 whatever the maps; only float32 maps are routed here.
        raise TranslationError(f"heatmap_keypoints decodes float32 heatmaps; got {ctx.inputs[0].dtype}.")
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
