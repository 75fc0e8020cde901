"""Floating aranges as ATen computes them: the length in double, the values in ATen's
accumulator type, rounded once."""

from __future__ import annotations

import pytest
import torch

from helpers import assert_matches_eager


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_constant_aranges_match_eager_bit_for_bit(dtype: torch.dtype) -> None:
    # torchlib's Range in float32: arange(0.1, -7.9, -4.0) had 3 elements for eager's 2 (an
    # invalid model), and a float64 arange was float32-accurate (3.6e-8 off for a step of 0.1).
    bounds = [(0.1, -7.9, -4.0), (0.0, 1.0, 0.1), (1.0, 2.0, 0.3), (-1.7, 3.3, 0.5), (0, 5, 1)]
    assert_matches_eager(lambda x: tuple(torch.arange(*b, dtype=dtype) + x for b in bounds), (torch.zeros(1, dtype=dtype),), rtol=0, atol=0)


def test_sizes_from_the_input() -> None:
    # Symbolic ends (an int and a float derived from a dim), in every floating type; a float step
    # made torchlib's graph divide by a zero delta at run time.
    def function(x):
        n = x.shape[1]
        return (
            x + torch.arange(n, dtype=torch.float32) * 0.5,
            torch.arange(0.25, n * 0.7, 0.3, dtype=torch.float64),
            torch.arange(n, dtype=torch.float16),
        )

    assert_matches_eager(
        function, (torch.randn(2, 7),), rtol=1e-15, atol=0,
        dynamic_shapes=({1: torch.export.Dim("n", min=2)},), more_inputs=[((torch.randn(2, 40),), {})],
    )
