"""torchvision's detection operators: ``nms`` as NonMaxSuppression, ``roi_align`` as RoiAlign,
``roi_pool`` as MaxRoiPool, ``ps_roi_align`` through RoiAlign, ``deform_conv2d`` as DeformConv.

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


_ROIS = torch.tensor([
    [0, 1.0, 2.0, 9.0, 12.0], [1, 0.5, 0.5, 3.0, 30.0], [1, 4.0, 4.0, 4.2, 4.1], [0, 10.3, 3.7, 15.9, 15.2],
    [1, -3.0, -2.0, 5.0, 4.0], [0, 7.0, 7.0, 6.0, 6.5],
])


@pytest.mark.skipif(not HAS_TORCHVISION, reason="roi_pool's reference is torchvision itself (its own environment)")
@pytest.mark.parametrize("scale", [1.0, 0.5])
def test_roi_pool_matches_torchvision(scale):
    class Pool(torch.nn.Module):
        def forward(self, features, rois):
            return torchvision.ops.roi_pool(features, rois, (3, 4), scale)

    features = torch.randn(2, 3, 16, 16)
    assert_matches_eager(Pool(), (features, _ROIS), rtol=0, atol=0)
    assert_matches_eager(Pool(), (-features.abs(), _ROIS), rtol=0, atol=0)
    # torchvision's maximum skips NaN, wherever it lies in the bin
    spotted = features.clone()
    spotted[:, :, ::3, 1::2] = float("nan")
    assert_matches_eager(Pool(), (spotted, _ROIS), rtol=0, atol=0)


@pytest.mark.skipif(not HAS_TORCHVISION, reason="roi_pool's reference is torchvision itself (its own environment)")
def test_roi_pool_refuses_what_it_cannot_compute():
    import torch_onnx_fx

    class Positions(torch.nn.Module):
        def forward(self, features, rois):
            return torch.ops.torchvision.roi_pool(features, rois, 1.0, 2, 2)[1]

    with pytest.raises(torch_onnx_fx.TranslationError, match="position of each maximum"):
        torch_onnx_fx.export(Positions(), (torch.randn(1, 2, 8, 8), _ROIS[:1] * 0), verbose=False)

    class Half(torch.nn.Module):
        def forward(self, features, rois):
            return torchvision.ops.roi_pool(features, rois, (2, 2), 1.0)

    with pytest.raises(torch_onnx_fx.TranslationError, match="float32"):
        torch_onnx_fx.export(Half(), (torch.randn(1, 2, 8, 8, dtype=torch.float64), _ROIS[:1].double() * 0), verbose=False)


@pytest.mark.skipif(not HAS_TORCHVISION, reason="ps_roi_align's reference is torchvision itself (its own environment)")
@pytest.mark.parametrize("sampling_ratio", [-1, 2])
def test_ps_roi_align_matches_torchvision(sampling_ratio):
    class Align(torch.nn.Module):
        def forward(self, features, rois):
            return torchvision.ops.ps_roi_align(features, rois, (3, 2), 0.5, sampling_ratio)

    # A box thin enough that a bin gets no sampling point (adaptive grid): NaN in torchvision.
    rois = torch.cat([_ROIS, torch.tensor([[0, 5.0, 5.0, 5.0, 9.0]])])
    features = torch.randn(2, 12, 16, 16)
    boxes = torch.export.Dim("boxes")
    assert_matches_eager(
        Align(), (features, rois), rtol=1e-5, atol=1e-6, dynamic_shapes=(None, {0: boxes}),
        more_inputs=[((features, rois[:0]), {})],  # no proposals at all
    )


@pytest.mark.skipif(not HAS_TORCHVISION, reason="ps_roi_align's reference is torchvision itself (its own environment)")
def test_ps_roi_align_channel_mapping():
    import torch_onnx_fx

    class Both(torch.nn.Module):
        def forward(self, features, rois):
            return torch.ops.torchvision.ps_roi_align(features, rois, 1.0, 2, 2, 2)

    args = (torch.randn(1, 8, 10, 10), _ROIS[:3] * torch.tensor([0, 1, 1, 1, 1]))
    program = torch_onnx_fx.export(Both(), args, verbose=False)
    expected, actual = Both()(*args), program(*args)
    assert len(actual) == 2
    torch.testing.assert_close(actual[0], expected[0], rtol=1e-5, atol=1e-6)
    assert actual[1].dtype == expected[1].dtype and torch.equal(actual[1], expected[1])


@pytest.mark.skipif(not HAS_TORCHVISION, reason="deform_conv2d's reference is torchvision itself (its own environment)")
@pytest.mark.parametrize("masked", [False, True])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_deform_conv2d_matches_torchvision(masked, dtype):
    class Deform(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv = torchvision.ops.DeformConv2d(4, 6, 3, stride=2, padding=1, dilation=1, groups=2)

        def forward(self, x, offset, mask):
            return self.conv(x, offset, mask if masked else None)

    generator = torch.Generator().manual_seed(0)
    x = torch.randn(2, 4, 9, 11, generator=generator, dtype=dtype)
    # two offset groups, 3 x 3 kernel, 5 x 6 outputs; offsets reach outside the image
    offset = 3 * torch.randn(2, 2 * 2 * 9, 5, 6, generator=generator, dtype=dtype)
    mask = torch.rand(2, 2 * 9, 5, 6, generator=generator, dtype=dtype)
    model = Deform().to(dtype).eval()
    tolerance = {"rtol": 1e-5, "atol": 1e-5} if dtype == torch.float32 else {"rtol": 1e-10, "atol": 1e-10}
    assert_matches_eager(model, (x, offset, mask), **tolerance)
