"""ops/integer_windows.py: integer convolutions and pooling, exact as ATen's.

ONNX's Conv and AveragePool take floating-point tensors only, its MaxPool 8-bit integers, and
through float64 the sums and maxima would round past 2**53: these were refused before. Compared
bit for bit with eager (integers), indices included."""

from __future__ import annotations

import pytest
import torch

from helpers import assert_matches_eager

F = torch.nn.functional


def _ints(*shape: int, low: int = -50, high: int = 50, dtype: torch.dtype = torch.int64) -> torch.Tensor:
    return torch.randint(low, high, shape, dtype=dtype)


# Past 2**53 (float64 would round the sums) and past 2**63 (int64 arithmetic wraps, as ATen's).
HUGE = 2**61 + 12345

CASES = {
    "conv1d_huge_values_wrap": (
        lambda x, w, b: F.conv1d(x, w, b, stride=2, padding=1),
        lambda: (_ints(2, 3, 9) * HUGE, _ints(4, 3, 3), _ints(4)),
    ),
    "conv2d_groups_dilation": (
        lambda x, w: F.conv2d(x, w, stride=(2, 1), padding=(1, 2), dilation=(1, 2), groups=2),
        lambda: (_ints(1, 4, 7, 6), _ints(6, 2, 3, 2)),
    ),
    "conv2d_same_padding_unbatched": (lambda x, w: F.conv2d(x, w, padding="same"), lambda: (_ints(3, 5, 6), _ints(2, 3, 2, 3))),
    "conv3d": (lambda x, w: F.conv3d(x, w, padding=1), lambda: (_ints(1, 2, 3, 4, 3), _ints(2, 2, 2, 2, 2))),
    "conv_transpose2d": (
        lambda x, w, b: F.conv_transpose2d(x, w, b, stride=2, padding=1, output_padding=1, dilation=2),
        lambda: (_ints(2, 4, 3, 4), _ints(4, 3, 3, 2), _ints(3)),
    ),
    "conv_transpose1d_unbatched_groups": (
        lambda x, w: F.conv_transpose1d(x, w, stride=3, groups=2), lambda: (_ints(4, 5), _ints(4, 1, 3)),
    ),
    # ATen divides each window's int64 sum by its count, truncating toward zero (negative sums too).
    "avg_pool2d_uncounted_pads_ceil": (
        lambda x: F.avg_pool2d(x, 3, 2, 1, ceil_mode=True, count_include_pad=False), lambda: (_ints(2, 3, 8, 7),),
    ),
    "avg_pool2d_counted_pads_ceil": (
        lambda x: F.avg_pool2d(x, 3, 2, 1, ceil_mode=True, count_include_pad=True), lambda: (_ints(1, 1, 6, 6),),
    ),
    "avg_pool1d_huge": (lambda x: F.avg_pool1d(x, 4, 3), lambda: (_ints(2, 3, 11) * HUGE,)),
    "avg_pool3d_divisor": (lambda x: F.avg_pool3d(x, 2, 1, divisor_override=3), lambda: (_ints(1, 2, 4, 3, 4),)),
    # ATen averages int64 only; it convolves every integer type, wrapping in the narrow type.
    "conv2d_int8_wraps": (
        lambda x, w: F.conv2d(x, w, padding=1),
        lambda: (_ints(1, 2, 5, 5, low=-128, high=128, dtype=torch.int8), _ints(3, 2, 3, 3, low=-128, high=128, dtype=torch.int8)),
    ),
    "conv1d_uint8_wraps": (
        lambda x, w: F.conv1d(x, w),
        lambda: (_ints(2, 2, 9, low=0, high=256, dtype=torch.uint8), _ints(3, 2, 4, low=0, high=256, dtype=torch.uint8)),
    ),
    # Maxima past 2**53 (float64 would merge neighbours), ties (the first in the window wins the
    # index), padding and ceil_mode windows that never win, as ATen's scan has them.
    "max_pool2d_indices_ties_padding_ceil": (
        lambda x: F.max_pool2d(x, 3, 2, 1, dilation=1, ceil_mode=True, return_indices=True),
        lambda: (_ints(2, 3, 7, 8, low=-3, high=3) + HUGE,),
    ),
    "max_pool3d_indices_dilated": (
        lambda x: F.max_pool3d(x, 2, 1, 0, dilation=2, return_indices=True), lambda: (_ints(1, 2, 5, 4, 5, low=-2, high=2),),
    ),
    "max_pool2d_int16_unbatched": (
        lambda x: F.max_pool2d(x, 3, 2, 1), lambda: (_ints(3, 9, 10, low=-(2**15), high=2**15, dtype=torch.int16),),
    ),
    "max_pool2d_int32_negative": (
        lambda x: F.max_pool2d(x, 2, return_indices=True), lambda: (_ints(1, 2, 6, 6, low=-(2**31), high=-(2**31) + 3, dtype=torch.int32),),
    ),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_integer_windows_equal_eager(name):
    fn, make_args = CASES[name]
    program = assert_matches_eager(fn, make_args(), rtol=0, atol=0)
    assert not {"Conv", "ConvTranspose", "AveragePool", "MaxPool", "Cast"} & {
        n.op_type for n in program.model.graph if n.op_type != "Cast" or n.outputs[0].dtype.is_floating_point()
    }


def test_integer_convolution_with_dynamic_sizes():
    class Net(torch.nn.Module):
        def forward(self, x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
            return F.avg_pool2d(F.conv2d(x, w, padding=1), 2)

    dim = torch.export.Dim
    assert_matches_eager(
        Net(), (_ints(2, 3, 8, 6), _ints(4, 3, 3, 3)),
        dynamic_shapes={"x": {0: dim("batch"), 2: dim("height", min=2), 3: dim("width", min=2)}, "w": None},
        more_inputs=[((_ints(1, 3, 5, 9), _ints(4, 3, 3, 3)), {})], rtol=0, atol=0,
    )
