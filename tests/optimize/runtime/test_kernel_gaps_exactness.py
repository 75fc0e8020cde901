"""optimize/runtime/kernel_gaps.py: what ONNX Runtime lacks or computes less exactly, done exactly."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import torch_onnx_fx
from helpers import assert_matches_eager


@pytest.mark.parametrize("dtype", [torch.int16, torch.int32, torch.int64, torch.uint8, torch.float32])
def test_pixel_shuffle_of_every_type_is_data_movement(dtype):
    # ONNX Runtime has no integer DepthToSpace/SpaceToDepth beyond uint8: the session was refused.
    x = torch.arange(2 * 8 * 3 * 2).reshape(2, 8, 3, 2).to(dtype)
    program = assert_matches_eager(lambda t: (F.pixel_shuffle(t, 2), F.pixel_unshuffle(F.pixel_shuffle(t, 2), 2)), (x,))
    # Static sizes make the shapes constants, not arithmetic on Shape at run time.
    assert "Shape" not in {node.op_type for node in program.model.graph}


def test_integer_pixel_shuffle_of_dynamic_sizes_reads_them_at_run_time():
    x = torch.arange(2 * 8 * 3 * 2).reshape(2, 8, 3, 2)
    assert_matches_eager(
        lambda t: F.pixel_shuffle(t, 2), (x,), dynamic_shapes=({0: "batch", 2: "height"},),
        more_inputs=[((torch.arange(3 * 8 * 5 * 2).reshape(3, 8, 5, 2),), {})],
    )


@pytest.mark.parametrize("fn", [torch.sinh, torch.cosh], ids=["sinh", "cosh"])
def test_float32_sinh_and_cosh_do_not_overflow_before_their_result(fn):
    # exp(89) overflows float32 where sinh(89) = 2.24e38 does not: ONNX Runtime returned inf.
    x = torch.tensor([89.0, -89.2, 88.9, 3.0, 0.0, -1e-3, 90.0])
    assert_matches_eager(lambda t: fn(t), (x,), rtol=1e-6, atol=0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_sinh_keeps_its_relative_precision_near_zero_and_cosh_its_range(dtype):
    # (exp(x) - exp(-x)) / 2 in float64 cancelled: sinh(1e-20) was 0, sinh(1e-5) 1e5 float64 ulps
    # off. And e^|x| overflows float64 from 709.78, sinh and cosh only from 710.48.
    x = torch.tensor([1e-30, -1e-20, 3e-9, -1e-5, 1e-3, 0.7, -20.5, 21.0, 88.0, -1e-38], dtype=dtype)
    if dtype == torch.float64:
        x = torch.cat([x, torch.tensor([710.0, -710.4, 709.9, 1e-300])])
    rtol = 2 * torch.finfo(dtype).eps
    assert_matches_eager(lambda t: (torch.sinh(t), torch.cosh(t)), (x,), rtol=rtol, atol=0)


# Chains of float16 operators ONNX Runtime has no kernel for: it computes each in float32 and
# drops the Casts between them, rounding once where ATen rounds after each operator.
_HALF_CHAINS = {
    "divide_by_sum": lambda t: t / (t.abs() + 1),
    "softsign": torch.nn.functional.softsign,
    "tanhshrink": torch.nn.functional.tanhshrink,
    "logit": lambda t: torch.logit(torch.sigmoid(t)),
    "xlogy": lambda t: torch.xlogy(t.abs(), t.abs().flip(0) + 0.5),
    "cast_between": lambda t: torch.sqrt(t.float().abs().half()) * 0.5 - t,
    # A function ONNX Runtime expands into such operators (no kernel of its own).
    "hardswish_after_divide": lambda t: F.hardswish(t / 10),
}
@pytest.mark.parametrize("name", sorted(_HALF_CHAINS))
def test_float16_chains_round_after_every_operator(name):
    torch.manual_seed(0)
    x = (torch.randn(4096) * 3).half()
    assert_matches_eager(lambda t: _HALF_CHAINS[name](t), (x,), rtol=0, atol=0)


def test_float16_mish_after_a_division_reads_the_rounded_quotient():
    """ONNX Runtime expands Mish (no kernel of its own) into operators without float16 kernels and
    dropped the rounding of the division before it: 1,039 of 4,096 results an ulp off. Widened
    with the quotient rounded, what is left is ONNX Runtime's float32 Mish beside ATen's formula
    (an ulp in a few results)."""
    torch.manual_seed(0)
    x = (torch.randn(4096) * 4).half()
    program = torch_onnx_fx.export(lambda t: F.mish(t / 10), (x,), verbose=False)
    expected = F.mish(x / 10)
    (actual,) = program(x)
    assert (actual != expected).sum() <= 4
    assert torch.allclose(actual.float(), expected.float(), rtol=2 ** -10, atol=0)


def test_a_lone_float16_operator_keeps_its_type():
    """Nothing next to it to lose a rounding to: ONNX Runtime's own float32 computation of it
    rounds once (PyTorch's exporter test asserts no Cast around x ** 2.0)."""
    program = assert_matches_eager(lambda t: t**2.0, (torch.tensor([1.0, 2.0, 3.0], dtype=torch.float16),), rtol=0, atol=0)
    assert [node.op_type for node in program.model.graph] == ["Pow"]


def test_float64_trigonometry_keeps_its_relative_precision_next_to_its_zeros():
    # ONNX Runtime's float64 Sin and Cos reduce by a two-part pi: sin(pi) came out 2.4e-16 for
    # 1.2e-16 and sin(12.55) 142 ulps off; ATen's (glibc's) are exact. Reduced by pi/2 in three
    # parts first, each within 4 ulps of eager up to 2^20 pi/2, and beyond it the kernels' own.
    import math

    zeros = [k * math.pi / 2 for k in range(-40, 41)]
    near = [z + d for z in zeros for d in (0.0, 1e-9, -3e-6, 0.05)] + [12.55, -9.45, 1e5 * math.pi, 1.6e6, 2e6, 1e10, 1e300]
    x = torch.tensor(near + [math.inf, -math.inf, math.nan], dtype=torch.float64)
    fn = lambda x: (torch.sin(x), torch.cos(x), torch.tan(x))
    assert_matches_eager(fn, (x,), rtol=4 * 2.0**-52, atol=0)
