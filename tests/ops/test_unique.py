"""torch.unique of floating tensors with NaNs (ops/unique.py)."""

from __future__ import annotations

import pytest
import torch

from helpers import assert_matches_eager

NAN = float("nan")


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16])
def test_unique_keeps_every_nan_as_aten(dtype):
    # ONNX's Unique folded the NaNs: unique([1, nan, 2, nan, ...]) had 4 values for eager's 6, and
    # the inverse indices of the NaNs were wrong (torch.onnx the same).
    x = torch.tensor([[1.0, NAN, 2.0, NAN], [1.0, 5.0, -3.0, 2.0]], dtype=dtype)
    assert_matches_eager(
        lambda x: (
            torch.unique(x), *torch.unique(x, return_inverse=True, return_counts=True), *torch.unique(x * NAN, return_inverse=True, return_counts=True),
            *torch.unique(x[:0], return_inverse=True, return_counts=True),
        ),
        (x,), rtol=0, atol=0,
    )
