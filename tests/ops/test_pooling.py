"""Pooling ONNX's operators do not express directly (ops/pooling.py)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from helpers import assert_matches_eager


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16])
def test_uneven_adaptive_average_pooling_is_atens_arithmetic(dtype):
    # A bin's sum divided by its length along each axis in turn, as ATen divides (sum / kh / kw).
    # Weights of 1 / count were float32 and rounded twice: float32 results up to 4e3 ulps off
    # (1.2e-7 beside values near 0), float64 5e-9 off; half types now sum in float32 as ATen.
    x = torch.randn(2, 3, 10, 11, generator=torch.Generator().manual_seed(0)).to(dtype)
    x[0, 0, 0, 0], x[0, 0, 1, 1] = float("inf"), float("nan")
    assert_matches_eager(
        lambda x: (F.adaptive_avg_pool2d(x, (7, 4)), F.adaptive_avg_pool2d(x[0], (3, 7)), F.adaptive_avg_pool1d(x[0], 7), F.interpolate(x, size=(7, 4), mode="area")),
        (x,), rtol=0, atol=0,
    )


def test_uneven_adaptive_average_pooling_in_three_dims():
    # Exact in float32 and float64; ATen's 3-D kernel sums half types in the half type itself,
    # which the graph does not follow (tens of ulps), so they are not checked here.
    x = torch.randn(1, 2, 5, 7, 6, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    assert_matches_eager(lambda x: (F.adaptive_avg_pool3d(x, (3, 4, 4)), F.adaptive_avg_pool3d(x.float(), (3, 4, 4))), (x,), rtol=0, atol=0)
