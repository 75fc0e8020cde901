"""Keypoints from per-box heatmaps, as one operator torch.export can capture.

Keypoint R-CNN reads each detection's keypoints off its heatmaps by resizing them (bicubic) to
the box's size in pixels and taking each map's peak. The resize's size differs per box and is
known only from the data, so the library loops over the detections in Python, a loop torch.export
cannot capture: the count has no value at capture, and neither has each size. Here the whole
step is one custom operator, ``torch_onnx_fx::heatmap_keypoints``, whose result sizes depend only
on the count: capture records it as one node, and its translation (``torch_onnx_fx.ops.vision``)
is an ONNX ``Loop`` over the boxes that resizes with ``Resize`` at sizes computed in the graph.

The operator's eager kernel is the same computation box by box, so a patched model computes in
eager PyTorch what the library does (``tests/capture/test_keypoint_heatmaps.py`` checks it bit for bit
against torchvision's function where torchvision is installed).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

__all__ = ["NAME", "heatmap_keypoints"]

NAME = "torch_onnx_fx::heatmap_keypoints"


@torch.library.custom_op(NAME, mutates_args=())
def heatmap_keypoints(maps: torch.Tensor, boxes: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``maps`` (boxes, keypoints, height, width) float32, ``boxes`` (boxes, 4) as x1, y1, x2, y2:
    each keypoint's (x, y, 1) in image coordinates (boxes, keypoints, 3) and its peak's value
    (boxes, keypoints), both float32."""
    count, joints = maps.shape[0], maps.shape[1]
    points = torch.zeros((count, joints, 3), dtype=torch.float32, device=maps.device)
    peaks = torch.zeros((count, joints), dtype=torch.float32, device=maps.device)
    # A box under one pixel is taken as one pixel wide: the map is resized to at least 1 x 1.
    widths = (boxes[:, 2] - boxes[:, 0]).clamp(min=1)
    heights = (boxes[:, 3] - boxes[:, 1]).clamp(min=1)
    for i in range(count):
        columns, rows = int(widths[i].ceil()), int(heights[i].ceil())
        resized = F.interpolate(maps[i][:, None], size=(rows, columns), mode="bicubic", align_corners=False)
        flat = resized.reshape(joints, -1)
        peak = flat.argmax(dim=1)
        column = peak % columns
        row = torch.div(peak - column, columns, rounding_mode="floor")
        # Pixel centres, scaled back from the whole-pixel grid to the box's true size.
        points[i, :, 0] = (column.float() + 0.5) * (widths[i] / columns) + boxes[i, 0]
        points[i, :, 1] = (row.float() + 0.5) * (heights[i] / rows) + boxes[i, 1]
        points[i, :, 2] = 1
        peaks[i] = flat.gather(1, peak[:, None])[:, 0]
    return points, peaks


@heatmap_keypoints.register_fake
def _(maps: torch.Tensor, boxes: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    count, joints = maps.shape[0], maps.shape[1]
    return (
        maps.new_empty((count, joints, 3), dtype=torch.float32),
        maps.new_empty((count, joints), dtype=torch.float32),
    )
