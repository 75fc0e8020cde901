"""ops/nonfinite.py: atan2, heaviside and sign at NaN, infinities and signed zeros, as ATen computes them.

torchlib's atan2 turned every NaN into 0 and atan2(inf, inf) into 0 (pi/4 in C); its heaviside
gave 1 for NaN (ATen: 0); ONNX's Sign of NaN is NaN (ATen's CPU kernel: 0). Both failed here before; torch.onnx computes them as torchlib does.
"""

from __future__ import annotations

import itertools

import pytest
import torch
from torch.export import Dim

import torch_onnx_fx
from helpers import Fn, assert_matches_eager

SPECIAL = [float("nan"), 0.0, -0.0, 1.0, -1.0, 0.5, -3.0, float("inf"), float("-inf")]
FLOATS = [torch.float32, torch.float64, torch.float16, torch.bfloat16]


def _grid(dtype):
    pairs = list(itertools.product(SPECIAL, repeat=2))
    y = torch.tensor([p[0] for p in pairs], dtype=dtype)
    x = torch.tensor([p[1] for p in pairs], dtype=dtype)
    return y, x


@pytest.mark.parametrize("dtype", FLOATS)
def test_atan2_over_every_pair_of_special_values(dtype):
    y, x = _grid(dtype)
    assert_matches_eager(lambda y, x: torch.atan2(y, x), (y, x), rtol=2 * torch.finfo(dtype).eps, atol=0)  # ORT's atan may be one ulp off libm
    # the signs of zero results: atan2(-0, 1) is -0 and atan2(0, -1) is pi
    (actual,) = torch_onnx_fx.export(lambda y, x: torch.atan2(y, x), (y, x), verbose=False)(y, x)
    expected = torch.atan2(y, x)
    zeros = expected == 0
    assert torch.equal(torch.signbit(actual[zeros]), torch.signbit(expected[zeros]))


@pytest.mark.parametrize("dtype", FLOATS)
def test_heaviside_of_nan_is_zero(dtype):
    y, x = _grid(dtype)
    assert_matches_eager(lambda y, x: torch.heaviside(y, x), (y, x), rtol=0, atol=0)


def test_integer_operands_keep_torchlib():
    a, b = torch.tensor([-2, 0, 3]), torch.tensor([5, 7, 9])
    assert_matches_eager(lambda a, b: (torch.heaviside(a, b), torch.atan2(a, b)), (a, b))


@pytest.mark.parametrize("dtype", FLOATS)
def test_sign_of_nan_is_zero(dtype):
    x = torch.tensor(SPECIAL, dtype=dtype)
    assert_matches_eager(lambda x: (torch.sign(x), torch.sgn(x), torch.sign(x * 2)), (x,), rtol=0, atol=0)
    (actual, _, _) = torch_onnx_fx.export(lambda x: (torch.sign(x), torch.sgn(x), torch.sign(x * 2)), (x,), verbose=False)(x)
    assert not torch.signbit(actual[(x == 0)]).any()  # ATen's (0 < x) - (x < 0) is +0 for -0


@pytest.mark.parametrize("dtype", FLOATS)
def test_angle_of_real_values(dtype):
    x = torch.tensor(SPECIAL, dtype=dtype)
    assert_matches_eager(lambda x: torch.angle(x), (x,), rtol=0, atol=0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_bucketize_and_searchsorted_of_nan_are_past_every_boundary(dtype):
    boundaries = torch.tensor([-1.0, 0.0, 2.0, float("inf")], dtype=dtype)
    x = torch.tensor(SPECIAL, dtype=dtype)

    def model(x, boundaries):
        return (
            torch.bucketize(x, boundaries), torch.bucketize(x, boundaries, right=True),
            torch.searchsorted(boundaries, x), torch.searchsorted(boundaries, x, side="right"),
        )

    assert_matches_eager(model, (x, boundaries), rtol=0, atol=0)
    ints = torch.tensor([-3, 0, 2, 9])
    assert_matches_eager(model, (ints, torch.tensor([-1, 0, 2, 5])), rtol=0, atol=0)


@pytest.mark.parametrize("dtype", FLOATS)
def test_searchsorted_past_nan_boundaries_follows_atens_binary_search(dtype):
    """torch.sort puts NaNs last; ATen's binary search moves right past a NaN boundary, so a
    value's index is where the search lands, not the count of boundaries below it (which put
    every value one or two past eager's). Dynamic sizes, none included, run the search in a loop."""
    def model(boundaries, x):
        return (
            torch.searchsorted(boundaries, x), torch.searchsorted(boundaries, x, side="right"),
            torch.bucketize(x, boundaries), torch.bucketize(x, boundaries, right=True, out_int32=True),
        )

    boundaries = torch.tensor([-1.0, 0.5, 0.5, 2.0, 3.0, float("nan"), float("nan")], dtype=dtype)
    x = torch.tensor([2.5, 0.5, -5.0, 3.0, float("nan"), float("inf"), 0.0], dtype=dtype)
    torch.manual_seed(0)
    more = [
        ((torch.sort(torch.cat([torch.randn(n), torch.full((n // 5,), float("nan"))])).values.to(dtype), torch.randn(m).to(dtype)), {})
        for n, m in [(0, 3), (1, 4), (12, 0), (40, 9)]
    ]
    assert_matches_eager(
        model, (boundaries, x), rtol=0, atol=0, dynamic_shapes=({0: Dim("n", min=0)}, {0: Dim("m", min=0)}), more_inputs=more,
    )
    assert_matches_eager(model, (boundaries, x), rtol=0, atol=0)  # static sizes: a fixed number of steps


def test_searchsorted_compares_in_the_promoted_type():
    """int8 boundaries and an int64 value, float boundaries and a 2.5 scalar: ATen promotes both
    sides before comparing (the ONNX comparison of mixed types was refused at load)."""

    def model(boundaries, wide, floats):
        return torch.searchsorted(boundaries, wide), torch.searchsorted(boundaries, 2.5), torch.searchsorted(floats, boundaries.long())

    boundaries = torch.tensor([1, 2, 3, 100], dtype=torch.int8)
    assert_matches_eager(model, (boundaries, torch.tensor([300, 2, -200]), torch.tensor([0.5, 2.0, 99.5])), rtol=0, atol=0)


def test_searchsorted_of_a_0d_value_keeps_the_boundaries_type():
    """By ATen's result-type rules a 0-d value of the boundaries' category does not widen them:
    1.00000001 (float64) is 1.0 among float32 boundaries, and 300 (int64) wraps to 44 among uint8
    ones; promoting both (second review) put them one and two places later."""

    def model(floats, bytes_, wide, big):
        return (
            torch.searchsorted(floats, wide), torch.bucketize(wide, floats), torch.searchsorted(bytes_, big),
            torch.searchsorted(bytes_, 300), torch.searchsorted(floats.half(), wide),
        )

    floats = torch.tensor([0.0, 1.0, 1.0000001192092896, 2.0])
    bytes_ = torch.tensor([10, 20, 44, 200], dtype=torch.uint8)
    assert_matches_eager(model, (floats, bytes_, torch.tensor(1.00000001, dtype=torch.float64), torch.tensor(300)), rtol=0, atol=0)


@pytest.mark.parametrize("dtype", FLOATS)
def test_scatter_reduce_mean_with_infinities(dtype):
    # The zeros and ones it scatters were self * 0 and src * 0 + 1: NaN at every inf.
    x = torch.tensor([1.0, float("inf"), 3.0, float("nan"), 5.0], dtype=dtype)
    source = torch.tensor([float("inf"), 2.0, 4.0, 1.0], dtype=dtype)
    index = torch.tensor([0, 0, 2, 4])

    def model(x, source):
        return x.scatter_reduce(0, index, source, "mean"), x.scatter_reduce(0, index, source, "mean", include_self=False)

    assert_matches_eager(model, (x, source), rtol=1e-2 if dtype in (torch.float16, torch.bfloat16) else 1e-6, atol=0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_copysign_takes_the_sign_bit_of_zeros_and_numbers(dtype):
    """copysign by a Python number failed to export (its decomposition's prims.scalar_tensor had
    no translation); by a tensor, torchlib's ``other < 0`` gave +0.0 for a -0.0 sign. A NaN
    element's sign bit is not readable in ONNX before opset 26: the NaNs of ``other`` here are
    Python's positive ones."""
    x = torch.tensor(SPECIAL, dtype=dtype)
    other = torch.tensor([-1.0, -0.0, 0.0, 2.0, float("nan"), -0.0, 3.0, -5.0, 0.0], dtype=dtype)

    def model(x, other):
        return torch.copysign(x, other), torch.copysign(x, -3.14), torch.copysign(x, -0.0), torch.copysign(x, 2), torch.copysign(x.int(), other)

    program = torch_onnx_fx.export(Fn(model), (x, other), verbose=False)
    for ours, eager in zip(program(x, other), model(x, other)):
        assert ours.dtype == eager.dtype
        numbers = ~torch.isnan(eager)  # a NaN's own sign bit is not observable in ONNX either
        assert torch.equal(torch.signbit(ours[numbers]), torch.signbit(eager[numbers])) and torch.allclose(ours, eager, equal_nan=True)
