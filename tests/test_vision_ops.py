"""torchvision's detection operators: ``nms`` as NonMaxSuppression, ``roi_align`` as RoiAlign.

With torchvision installed (its own environment: see docs/coverage.md) the tests use it; without,
``torchvision::nms`` is defined here with torchvision's documented rule (greedy by descending
score, a box dropped when its IoU with a kept box exceeds the threshold), so the translation is
tested in every environment.
"""

from __future__ import annotations

import importlib.util

import pytest
import torch

from helpers import assert_matches_eager

HAS_TORCHVISION = importlib.util.find_spec("torchvision") is not None


def _reference_nms(boxes: torch.Tensor, scores: torch.Tensor, iou_threshold: float) -> torch.Tensor:
    order = torch.argsort(scores, descending=True, stable=True)
    area = (boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1])
    kept: list[int] = []
    for i in order.tolist():
        ok = True
        for j in kept:
            low = torch.maximum(boxes[i, :2], boxes[j, :2])
            high = torch.minimum(boxes[i, 2:], boxes[j, 2:])
            inter = (high - low).clamp(min=0).prod()
            if inter / (area[i] + area[j] - inter) > iou_threshold:
                ok = False
                break
        if ok:
            kept.append(i)
    return torch.tensor(kept, dtype=torch.int64)


if HAS_TORCHVISION:
    import torchvision

    nms = torchvision.ops.nms
else:
    @torch.library.custom_op("torchvision::nms", mutates_args=())
    def nms(dets: torch.Tensor, scores: torch.Tensor, iou_threshold: float) -> torch.Tensor:
        return _reference_nms(dets, scores, iou_threshold)

    @nms.register_fake
    def _(dets, scores, iou_threshold):
        return dets.new_empty((torch.library.get_ctx().new_dynamic_size(),), dtype=torch.int64)


def _boxes(n: int, spread: float, seed: int) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    corner = torch.rand(n, 2, generator=generator) * spread
    return torch.cat([corner, corner + 4 + torch.rand(n, 2, generator=generator)], 1)


class Suppress(torch.nn.Module):
    def forward(self, boxes, scores):
        return nms(boxes, scores, 0.3)


@pytest.mark.parametrize("spread", [5.0, 50.0], ids=["overlapping", "spread"])
def test_nms_keeps_the_boxes_torchvision_keeps(spread):
    boxes, scores = _boxes(40, spread, 0), torch.rand(40, generator=torch.Generator().manual_seed(1))
    program = assert_matches_eager(
        Suppress(), (boxes, scores), dynamic_shapes=({0: "boxes"}, {0: "boxes"}),
        more_inputs=[((_boxes(17, spread, 2), torch.rand(17)), {}), ((torch.zeros(0, 4), torch.zeros(0)), {})],
        rtol=0, atol=0,
    )
    assert "NonMaxSuppression" in [node.op_type for node in program.model.graph]


@pytest.mark.skipif(not HAS_TORCHVISION, reason="roi_align's reference is torchvision itself (its own environment)")
@pytest.mark.parametrize("aligned", [False, True])
@pytest.mark.parametrize("sampling_ratio", [-1, 2])
def test_roi_align_matches_torchvision(aligned, sampling_ratio):
    class Align(torch.nn.Module):
        def forward(self, features, rois):
            return torchvision.ops.roi_align(features, rois, (3, 4), 0.5, sampling_ratio, aligned)

    rois = torch.tensor([[0, 1.0, 2.0, 9.0, 12.0], [1, 0.5, 0.5, 3.0, 30.0], [1, 4.0, 4.0, 4.2, 4.1]])
    assert_matches_eager(Align(), (torch.randn(2, 3, 16, 16), rois), rtol=1e-5, atol=1e-6)
