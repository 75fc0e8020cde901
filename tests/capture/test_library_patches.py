"""Capture-time patches of library functions: each equals the original in eager mode, and with
them torch.export gets through torchvision's detection models. Needs torchvision (its own
environment, see docs/coverage.md)."""

from __future__ import annotations

import importlib.util

import pytest
import torch

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("torchvision") is None, reason="the patches replace torchvision functions; torchvision is not installed"
)


def _boxes(n: int, seed: int) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    corner = torch.rand(n, 2, generator=generator) * 30
    return torch.cat([corner, corner + 1 + torch.rand(n, 2, generator=generator) * 20], 1)


@pytest.mark.parametrize("count", [0, 7, 1500])  # none, the coordinate trick, torchvision's per-class loop
def test_batched_nms_patch_keeps_what_torchvision_keeps(count):
    import torchvision

    from torch_onnx_fx.capture import library_patches

    boxes, scores = _boxes(count, 0), torch.rand(count, generator=torch.Generator().manual_seed(1))
    classes = torch.randint(0, 5, (count,), generator=torch.Generator().manual_seed(2))
    expected = torchvision.ops.batched_nms(boxes, scores, classes, 0.5)
    with library_patches.applied() as names:
        assert "torchvision.ops.boxes.batched_nms" in names
        patched = torchvision.ops.boxes.batched_nms(boxes, scores, classes, 0.5)
    assert torchvision.ops.boxes.batched_nms is not patched  # restored
    assert torch.equal(patched, expected)


def test_multiscale_roi_align_patch_pools_what_torchvision_pools():
    import torchvision

    from torch_onnx_fx.capture import library_patches

    pooler = torchvision.ops.MultiScaleRoIAlign(["a", "b"], 3, 2)
    features = {"a": torch.randn(1, 4, 32, 32), "b": torch.randn(1, 4, 16, 16)}
    for boxes in ([_boxes(9, 3)], [torch.zeros(0, 4)]):
        expected = pooler(features, boxes, [(64, 64)])
        with library_patches.applied():
            patched = pooler(features, boxes, [(64, 64)])
        torch.testing.assert_close(patched, expected)


def test_faster_rcnn_is_captured_through_its_data_dependent_filtering():
    import torchvision

    import torch_onnx_fx

    torch.manual_seed(0)
    model = torchvision.models.detection.fasterrcnn_mobilenet_v3_large_320_fpn(weights=None, weights_backbone=None).eval()
    images = [torch.rand(3, 256, 256)]
    program = torch_onnx_fx.export(model, (images,), verbose=False)
    # Random weights score every class about 1/91, below the 0.05 threshold: no detections, in
    # eager and in ONNX Runtime (a model that detects needs trained or calibrated weights).
    with torch.no_grad():
        expected = model(images)[0]
    actual = program(images)
    assert [tuple(t.shape) for t in actual] == [tuple(t.shape) for t in expected.values()]


@pytest.mark.parametrize("count", [0, 1, 7])
def test_paste_masks_patch_pastes_what_torchvision_pastes(count):
    from torchvision.models.detection import roi_heads, transform

    from torch_onnx_fx.capture import library_patches

    generator = torch.Generator().manual_seed(count)
    masks = torch.rand(count, 1, 28, 28, generator=generator)
    corner = torch.rand(count, 2, generator=generator) * 200 - 20  # some boxes cross the border
    boxes = torch.cat([corner, corner + torch.rand(count, 2, generator=generator) * 80], 1)
    expected = roi_heads.paste_masks_in_image(masks, boxes, (180, 240))
    with library_patches.applied() as names:
        assert "torchvision.models.detection.roi_heads.paste_masks_in_image" in names
        patched = transform.paste_masks_in_image(masks, boxes, (180, 240))
    assert transform.paste_masks_in_image is roi_heads.paste_masks_in_image  # restored
    # ATen's bilinear kernel sums the four taps in another order: float32 rounding apart.
    torch.testing.assert_close(patched, expected, rtol=0, atol=1e-5)
