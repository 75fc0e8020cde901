"""Aranges as ATen computes them: the bounds in ATen's accumulator type, the length in double
(in integers for int64), the values in the accumulator, converted once."""

from __future__ import annotations

import pytest
import torch

from helpers import assert_matches_eager


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_constant_aranges_match_eager(dtype: torch.dtype) -> None:
    # torchlib's Range in float32: arange(0.1, -7.9, -4.0) had 3 elements for eager's 2 (an
    # invalid model), and a float64 arange was float32-accurate (3.6e-8 off for a step of 0.1).
    # These short ones are bit-identical; longer ones can differ from eager by an ulp in places.
    bounds = [(0.1, -7.9, -4.0), (0.0, 1.0, 0.1), (1.0, 2.0, 0.3), (-1.7, 3.3, 0.5), (0, 5, 1)]
    assert_matches_eager(lambda x: tuple(torch.arange(*b, dtype=dtype) + x for b in bounds), (torch.zeros(1, dtype=dtype),), rtol=0, atol=0)


@pytest.mark.parametrize("dtype", [torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64])
def test_integer_aranges_from_floating_bounds(dtype: torch.dtype) -> None:
    # ATen truncates the bounds to int64 and wraps each value into the type: uint8's
    # arange(-0.9, 2.1, 2.0) is [0, 2] (torchlib's [0, 1]), arange(2.1, -2.9, -1.0) ends 255, 254
    # (torchlib's 0, 255), arange(0.1, -7.9, -4.0) is 2 long (torchlib's 3, an invalid model).
    bounds = [(-0.9, 2.1, 2.0), (2.1, -2.9, -1.0), (0.1, -7.9, -4.0), (0.5, 5.5, 1.5), (-3, 5, 2), (7.9,)]
    assert_matches_eager(lambda x: tuple(torch.arange(*b, dtype=dtype) + x for b in bounds), (torch.zeros(1, dtype=dtype),), rtol=0, atol=0)


def test_int64_aranges_past_2_to_the_53() -> None:
    # Constant folding ran numpy's arange, which sizes it in double: the last element was lost.
    assert_matches_eager(
        lambda x: (torch.arange(0, 2**53 + 1, 2**53) + x, torch.arange(2**53 + 1, 0, -(2**53)) + x), (torch.zeros(1, dtype=torch.int64),), rtol=0, atol=0
    )


def test_integer_aranges_from_sizes() -> None:
    def function(x):
        n = x.shape[1]
        return torch.arange(n, dtype=torch.uint8), torch.arange(-2, n, 3, dtype=torch.int8), torch.arange(0.5, n, 1.5, dtype=torch.int32)

    assert_matches_eager(
        function, (torch.randn(2, 7),), rtol=0, atol=0,
        dynamic_shapes=({1: torch.export.Dim("n", min=2)},), more_inputs=[((torch.randn(2, 300),), {})],
    )


def test_sizes_from_the_input() -> None:
    # Symbolic integer ends, in every floating type.
    def function(x):
        n = x.shape[1]
        return (
            x + torch.arange(n, dtype=torch.float32) * 0.5,
            torch.arange(2, 2 * n + 1, 0.25, dtype=torch.float64),
            torch.arange(n, dtype=torch.float16),
        )

    assert_matches_eager(
        function, (torch.randn(2, 7),), rtol=1e-15, atol=0,
        dynamic_shapes=({1: torch.export.Dim("n", min=2)},), more_inputs=[((torch.randn(2, 40),), {})],
    )


def test_floating_bounds_from_sizes_match_eager() -> None:
    # A SymFloat was float32 in the graph: arange(0, 1, 1 / n) came out 26 long for n = 25 (19
    # of n = 2..100 one too long), so it was refused. As the double it is, every length is ATen's.
    # (Values within an ulp: ATen's vectorized kernel rounds each vector's first value to float32
    # before adding the step in double, at the CPU's vector width; the graph rounds each once.)
    model = _Arange(lambda x: (torch.arange(0, 1.0, 1.0 / x.shape[1]), torch.arange(0, x.shape[1] / 3, 0.5, dtype=torch.float64)))
    more = [((torch.rand(3, n),), {}) for n in range(2, 101)]
    assert_matches_eager(model, (torch.rand(3, 10),), rtol=1.2e-7, atol=0, dynamic_shapes=({1: torch.export.Dim("n", min=2)},), more_inputs=more)


class _Arange(torch.nn.Module):
    def __init__(self, function):
        super().__init__()
        self.function = function

    def forward(self, x):
        return self.function(x)
