"""optimize/runtime/kernel_gaps.py: what ONNX Runtime lacks or computes less exactly, done exactly."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from helpers import assert_matches_eager


@pytest.mark.parametrize("dtype", [torch.int16, torch.int32, torch.int64, torch.uint8, torch.float32])
def test_pixel_shuffle_of_every_type_is_data_movement(dtype):
    # ONNX Runtime has no integer DepthToSpace/SpaceToDepth beyond uint8: the session was refused.
    x = torch.arange(2 * 8 * 3 * 2).reshape(2, 8, 3, 2).to(dtype)
    assert_matches_eager(lambda t: (F.pixel_shuffle(t, 2), F.pixel_unshuffle(F.pixel_shuffle(t, 2), 2)), (x,))


@pytest.mark.parametrize("fn", [torch.sinh, torch.cosh], ids=["sinh", "cosh"])
def test_float32_sinh_and_cosh_do_not_overflow_before_their_result(fn):
    # exp(89) overflows float32 where sinh(89) = 2.24e38 does not: ONNX Runtime returned inf.
    x = torch.tensor([89.0, -89.2, 88.9, 3.0, 0.0, -1e-3, 90.0])
    assert_matches_eager(lambda t: fn(t), (x,), rtol=1e-6, atol=0)
