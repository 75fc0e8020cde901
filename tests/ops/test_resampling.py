"""Bilinear and bicubic resizing with ATen's taps and weights: antialiased, and plain float64."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from helpers import assert_matches_eager

_CASES = [
    {"size": (3, 3), "mode": "bilinear", "align_corners": False},
    {"scale_factor": (0.8, 1.0), "mode": "bilinear", "align_corners": True},
    {"size": (7, 13), "mode": "bilinear", "align_corners": True},
    {"size": (4, 30), "mode": "bicubic", "align_corners": False},
    {"scale_factor": (0.37, 0.5), "mode": "bicubic", "align_corners": True},
]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("kwargs", _CASES, ids=lambda k: "-".join(f"{v}" for v in k.values()))
def test_antialiased_resize_matches_eager(kwargs: dict, dtype: torch.dtype) -> None:
    # ONNX Runtime's Resize(antialias=1) was up to 3.5 off with align_corners=True and has no
    # float64 kernel; the taps and weights are ATen's, a value differs by an ulp at most.
    torch.manual_seed(0)
    x = torch.randn(2, 3, 10, 20, dtype=dtype)
    x[0, 0, 0, 0], x[1, 2, 5, 7] = float("inf"), float("nan")
    tolerance = 1e-6 if dtype == torch.float32 else 1e-14
    program = assert_matches_eager(lambda x: F.interpolate(x, antialias=True, **kwargs), (x,), rtol=tolerance, atol=tolerance)
    assert "Resize" not in [node.op_type for node in program.model.graph]


def test_explicit_scales_read_only_atens_window() -> None:
    # ATen places the taps by the given scale (1.7 for an output of 3 rows from 10 reads only the
    # first rows): a NaN outside that window leaves the output finite, as in eager.
    x = torch.randn(2, 3, 10, 20)
    x[:, :, 6:, :] = float("nan")
    assert_matches_eager(lambda x: torch.ops.aten._upsample_bilinear2d_aa(x, [3, 3], False, 1.7, 0.9), (x,), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("mode, spatial", [("linear", 1), ("bilinear", 2), ("bicubic", 2), ("trilinear", 3)])
@pytest.mark.parametrize("align_corners", [False, True])
def test_plain_float64_interpolation_runs(mode: str, spatial: int, align_corners: bool) -> None:
    # ONNX Runtime has no float64 Resize kernel: the session failed to load.
    x = torch.randn(2, 3, *[4] * spatial, dtype=torch.float64)
    for scale in (1.7, 0.6):
        program = assert_matches_eager(
            lambda x: F.interpolate(x, scale_factor=scale, mode=mode, align_corners=align_corners), (x,), rtol=1e-13, atol=1e-13
        )
        assert "Resize" not in [node.op_type for node in program.model.graph]
