"""Keypoint R-CNN's heatmap decoding as one operator: ``torch_onnx_fx::heatmap_keypoints`` is a
Loop over the boxes in ONNX, which must find the peaks eager finds for any number of boxes (none
included) and any box size (under a pixel, smaller and larger than the maps)."""

from __future__ import annotations

import importlib.util

import pytest
import torch

import torch_onnx_fx
from torch_onnx_fx.errors import TranslationError
from torch_onnx_fx.capture.keypoint_heatmaps import heatmap_keypoints


class Decode(torch.nn.Module):
    def forward(self, maps: torch.Tensor, boxes: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return heatmap_keypoints(maps, boxes)


def _case(count: int, seed: int, scale: float = 1.0) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    maps = torch.randn(count, 17, 56, 56, generator=generator)
    corner = torch.rand(count, 2, generator=generator) * 100
    boxes = torch.cat([corner, corner + torch.rand(count, 2, generator=generator) * 150 * scale], 1)
    return maps, boxes


def _program() -> torch_onnx_fx.ONNXProgram:
    count = torch.export.Dim("count")
    return torch_onnx_fx.export(Decode().eval(), _case(4, 0), dynamic_shapes=({0: count}, {0: count}), verbose=False)


def test_keypoints_match_eager_for_any_count_and_box_size():
    program = _program()
    assert "Loop" in [node.op_type for node in program.model.graph]
    tiny = (torch.randn(3, 17, 56, 56), torch.tensor([[5.0, 5.0, 5.2, 5.4], [0.0, 0.0, 1.0, 1.0], [2.5, 3.5, 60.25, 4.0]]))
    for maps, boxes in (_case(4, 1), _case(9, 2, scale=0.2), _case(2, 3, scale=4.0), tiny, _case(0, 4)):
        expected = Decode()(maps, boxes)
        actual = program(maps, boxes)
        assert len(actual) == len(expected) == 2
        # Random maps have no near-ties (which ATen's and ONNX Runtime's cubic weights may break
        # differently): the same pixel is every keypoint's peak, the positions agree exactly.
        torch.testing.assert_close(actual[0], expected[0], rtol=0, atol=0)
        # ONNX Runtime's cubic weights round differently from ATen's: the peak values agree to
        # float32 rounding of a few operations.
        torch.testing.assert_close(actual[1], expected[1], rtol=1e-5, atol=1e-5)


def test_float64_maps_are_refused_not_approximated():
    maps, boxes = _case(2, 5)
    with pytest.raises(TranslationError, match="heatmap_keypoints"):
        torch_onnx_fx.export(Decode().eval(), (maps.double(), boxes), verbose=False)


@pytest.mark.skipif(importlib.util.find_spec("torchvision") is None, reason="compares with torchvision's function; torchvision is not installed")
@pytest.mark.parametrize("count", [0, 1, 6])
def test_patch_decodes_what_torchvision_decodes(count):
    from torchvision.models.detection import roi_heads

    from torch_onnx_fx.capture import library_patches

    maps, boxes = _case(count, 6, scale=1.5)
    expected = roi_heads.heatmaps_to_keypoints(maps, boxes)
    with library_patches.applied() as names:
        assert "torchvision.models.detection.roi_heads.heatmaps_to_keypoints" in names
        patched = roi_heads.heatmaps_to_keypoints(maps, boxes)
    assert len(patched) == len(expected) == 2
    for got, want in zip(patched, expected):
        assert got.dtype == want.dtype and got.shape == want.shape
        assert torch.equal(got, want)
