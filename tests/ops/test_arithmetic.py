"""ops/arithmetic.py: integer arithmetic exactly as ATen's fixed-width types compute it, and floor
division of floats (and a half remainder by a number) step for step as ATen computes it."""

from __future__ import annotations

import pytest
import torch

import torch_onnx_fx
from helpers import Fn, assert_matches_eager

INTEGERS = [torch.int8, torch.uint8, torch.int16, torch.int32, torch.int64]


@pytest.mark.parametrize("dtype", INTEGERS)
def test_an_integer_tensor_to_a_tensor_power_wraps_around_as_eager(dtype):
    # ONNX Runtime's integer Pow computes in double and saturates at the type's maximum.
    low = 0 if dtype == torch.uint8 else -60
    base = torch.cat([torch.randint(low, 60, (40,)), torch.tensor([1, 2, 3])]).to(dtype)
    exponent = torch.cat([torch.randint(0, 12, (40,)), torch.tensor([0, 7, 5])]).to(dtype)
    assert_matches_eager(lambda b, e: b ** e, (base, exponent))


def test_negative_integer_exponents_follow_atens_rule():
    base = torch.tensor([2, -1, 1, 3, 0, -2, -1], dtype=torch.int32)
    exponent = torch.tensor([-1, -3, -2, 40, -1, 31, -4], dtype=torch.int32)
    assert_matches_eager(lambda b, e: b ** e, (base, exponent))


@pytest.mark.parametrize("exponent", [0, 1, 2, 3, 13])
def test_an_integer_tensor_to_a_static_power_near_the_types_limits(exponent):
    x = torch.tensor([2**31 - 1, -(2**31), 46341, 3, -7], dtype=torch.int32)
    assert_matches_eager(lambda t: t ** exponent, (x,))


def test_a_number_to_an_integer_tensor_power():
    assert_matches_eager(lambda e: 2 ** e, (torch.tensor([31, 32, 33, 62, 63, 64, -1], dtype=torch.int64),))


@pytest.mark.parametrize("dtype", INTEGERS)
@pytest.mark.parametrize("equation", ["i->", "ij->i", "ij,j->i", "i,i->"])
def test_integer_einsums_sum_exactly(dtype, equation):
    # ONNX Runtime's integer Einsum reduces in double and saturates; ATen's sums promote and wrap.
    info = torch.iinfo(dtype)
    big = torch.tensor([info.max - 3, info.max - 1, info.min + 2 if info.min else 7], dtype=dtype)
    operands = {"i->": (big,), "ij->i": (big.repeat(2, 1),), "ij,j->i": (big.repeat(2, 1), torch.tensor([1, 2, 3], dtype=dtype)), "i,i->": (big, big)}[equation]
    assert_matches_eager(lambda *xs: torch.einsum(equation, *xs), operands)


@pytest.mark.parametrize(
    "equation, shapes",
    [
        ("...ik,...j->ij", [(2, 3, 4), (2, 5)]),  # the ellipsis summed away
        ("i...,i...->i", [(3, 4, 5), (3, 4, 5)]),
        ("...ij,...jk->...ik", [(2, 3, 4, 5), (5, 6)]),  # ellipses of different ranks
        ("...i,...i->...", [(2, 3, 4), (4,)]),
        ("...,...->", [(3, 4), (4,)]),
        ("...ij,...jk", [(3, 4, 5), (1, 5, 6)]),  # ONNX Runtime's own Einsum, broadcasting
    ],
)
def test_einsum_ellipses_onnx_runtime_does_not_run(equation, shapes):
    """ONNX Runtime's Einsum refuses ellipses of different ranks (at load) and an ellipsis the
    output drops (when run); those are torch's decomposition now."""
    operands = tuple(torch.randn(*shape) for shape in shapes)
    assert_matches_eager(lambda *xs: torch.einsum(equation, *xs), operands)


@pytest.mark.parametrize("divisor", [4, -3, 1, -7])
@pytest.mark.parametrize("dtype", [torch.int8, torch.int32, torch.int64])
def test_floor_division_by_a_number_is_exact_in_six_nodes(dtype, divisor):
    """A divisor known at export has one sign: the truncated quotient is rounded down where the
    remainder's sign is not the divisor's, one comparison instead of four."""
    info = torch.iinfo(dtype)
    x = torch.tensor([info.min, info.min + 1, -9, -8, -7, -1, 0, 1, 7, 8, 9, info.max - 1, info.max], dtype=dtype)
    program = assert_matches_eager(lambda x: torch.div(x, divisor, rounding_mode="floor"), (x,), rtol=0, atol=0)
    assert len(program.model.graph) <= 6, [node.op_type for node in program.model.graph]


def test_floor_division_by_a_tensor_is_exact():
    a = torch.tensor([-9, -8, -7, -1, 0, 1, 7, 8, 9, -2**63, 2**63 - 1, -5, 5])
    b = torch.tensor([4, -4, 3, -3, 2, -2, 5, -5, 4, 3, -3, -5, 5])
    assert_matches_eager(lambda a, b: (a // b, torch.div(a, b, rounding_mode="floor")), (a, b), rtol=0, atol=0)


def _floats(dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """Quotients that round up to an integer (0.7 / 0.1 is 7.0 in float32), signed zeros, a zero
    divisor, infinities, and random values."""
    torch.manual_seed(0)
    a = torch.cat([torch.tensor([0.7, -0.7, 1.0, 5.0, -5.0, 0.0, 3.0, 1e4, float("inf"), 7.0, float("nan")]), torch.randn(500) * 10])
    b = torch.cat([torch.tensor([0.1, 0.1, 0.0, -2.0, 2.0, -3.0, float("inf"), 3e-3, 2.0, -0.0, 1.0]), torch.randn(500)])
    return a.to(dtype), b.to(dtype)


def _assert_same_numbers(expected: torch.Tensor, actual: torch.Tensor) -> None:
    """Equal, NaN where NaN, as numbers: ONNX Runtime's float Where returns +0 for a -0 it
    selects, so the sign of a zero quotient is not compared."""
    assert expected.dtype == actual.dtype and expected.shape == actual.shape
    same = (expected == actual) | (expected.isnan() & actual.isnan())
    assert bool(same.all()), (expected[~same], actual[~same])


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16], ids=str)
def test_float_floor_division_is_atens(dtype):
    # torchlib's Floor(Div(a, b)) rounds the quotient first: 0.7 // 0.1 was 7 for ATen's 6,
    # inf // 2 inf for ATen's NaN, and a half tensor // 0.3 was off for 3 % of the values.
    a, b = _floats(dtype)
    functions = (
        lambda a, b: torch.floor_divide(a, b),
        lambda a, b: torch.div(a, b, rounding_mode="floor"),
        lambda a, b: a // 0.1,
        lambda a, b: torch.div(a, 0.7, rounding_mode="floor"),
        lambda a, b: 7.3 // b,
    )
    for function in functions:
        program = torch_onnx_fx.export(Fn(function), (a, b), verbose=False)
        _assert_same_numbers(function(a, b), program(a, b)[0])


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
def test_half_truncating_division_by_a_number_truncates_the_float32_quotient(dtype):
    # The quotient rounded to bfloat16 before truncation: 80 of 4,096 div(x, 0.7, "trunc") a
    # whole unit off.
    torch.manual_seed(0)
    specials = [0.0, -0.0, -0.3, 0.3, float("inf"), float("-inf"), float("nan"), 1e-30, -1e-30]
    x = torch.cat([torch.randn(4096) * 4, torch.tensor(specials)]).to(dtype)
    for divisor in (0.7, -0.7, 3, 1e-3, 0.0):
        function = lambda a, divisor=divisor: torch.div(a, divisor, rounding_mode="trunc")
        program = torch_onnx_fx.export(Fn(function), (x,), verbose=False)
        expected, actual = function(x), program(x)[0]
        _assert_same_numbers(expected, actual)
        # -1 / 3 truncates to -0.0 (a Where picking Ceil's -0.0 gave +0.0).
        assert torch.equal(torch.signbit(actual[actual == 0]), torch.signbit(expected[expected == 0]))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
def test_half_remainder_by_a_number_divides_by_the_number_in_the_tensors_type(dtype):
    # ATen rounds 0.3 to the tensor's type before its float32 remainder; the float32 0.3 made 97 %
    # of float16's results differ.
    a, b = _floats(dtype)
    for function in (lambda a, b: a % 0.3, lambda a, b: 0.3 % b, lambda a, b: torch.remainder(a, -2.7)):
        program = torch_onnx_fx.export(Fn(function), (a, b), verbose=False)
        _assert_same_numbers(function(a, b), program(a, b)[0])


def test_float32_add_and_sub_with_alpha_round_once_as_atens_fused_kernel():
    # ATen's float32 kernel computes a + alpha * b with one rounding (a fused multiply-add);
    # the graph's Mul then Add rounded twice: 771 of 3,000 results of add(x, y, alpha=0.3) an ulp
    # or more off (up to 712 ulps next to cancellation; torch.onnx the same).
    generator = torch.Generator().manual_seed(0)
    x, y = torch.randn(3000, generator=generator) * 50, torch.randn(3000, generator=generator) * 50
    assert_matches_eager(
        lambda x, y: (
            torch.add(x, y, alpha=0.3), torch.sub(x, y, alpha=0.7), torch.add(x, y, alpha=-1.3), torch.rsub(x, y, alpha=0.3),
            torch.add(x, 3, alpha=0.7), torch.sub(x, 0.3, alpha=3), torch.rsub(x, 0.3, alpha=0.7),
        ),
        (x, y), rtol=0, atol=0,
    )
