"""torchvision's detection operators as the standard ONNX operators.

``torchvision.ops.nms`` (and ``batched_nms``, which offsets boxes per class and calls it) is
``NonMaxSuppression``; ``roi_align`` is ``RoiAlign``. They are registered by qualified name, so
nothing here imports torchvision: a model without it never reaches them.
"""

from __future__ import annotations

import onnx_ir as ir
from onnxscript import opset18 as op

from torch_onnx_fx.registry import register

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
