"""ops/stable.py and the half-precision composites: formulas that stay finite and keep their digits
where the textbook ones (torchlib's, and torch.onnx's) overflow, cancel or round away.

Each case failed before: logaddexp of large values was inf, log_sigmoid of large negatives -inf (a
multilabel soft-margin loss nan), log1p and expm1 of small values lost their digits, remainder of
large values was 0, and bfloat16 remainder and round(decimals) were off by units.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import torch_onnx_fx
from helpers import assert_matches_eager

INF, NAN = float("inf"), float("nan")


def _ours(fn, *args):
    return torch_onnx_fx.export(fn, args, verbose=False)(*args)


def _assert_as_float64(fn, args, rtol):
    """Ours against the float64 computation rounded to the inputs' dtype, relative to each value:
    an absolute tolerance would hide a lost digit of a small result."""
    (actual,) = _ours(fn, *args)
    expected = fn(*(a.double() if a.is_floating_point() else a for a in args)).to(actual.dtype)
    torch.testing.assert_close(actual, expected, rtol=rtol, atol=0, equal_nan=True)


SMALL = torch.tensor([1e-8, -1e-8, 3e-6, -3e-6, 1e-3, -1e-3, 0.3, -0.3, 0.0, -1e-30])
WIDE = torch.tensor([0.7, -0.7, 5.0, 88.0, -100.0, -0.999999, 1e30, INF, -1.0, NAN])


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_log1p_keeps_the_digits_of_small_values(dtype):
    _assert_as_float64(lambda x: torch.log1p(x), (torch.cat([SMALL, WIDE]).to(dtype),), rtol=4 * torch.finfo(dtype).eps)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_expm1_keeps_the_digits_of_small_values(dtype):
    values = torch.cat([SMALL, torch.tensor([0.7, -0.7, 5.0, 80.0, -100.0, -INF, INF, NAN])]).to(dtype)
    _assert_as_float64(lambda x: torch.expm1(x), (values,), rtol=4 * torch.finfo(dtype).eps)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_precision_log1p_and_expm1_round_once(dtype):
    x = torch.tensor([1e-3, -1e-3, 0.25, -0.25, 2.0, 7.0], dtype=dtype)
    assert_matches_eager(lambda x: (torch.log1p(x), torch.expm1(x)), (x,), rtol=0, atol=0)


def test_log1p_of_integers_is_a_float():
    assert_matches_eager(lambda x: torch.log1p(x), (torch.tensor([0, 1, 7, 1000]),))


A = torch.tensor([1e4, -1e4, 0.0, INF, INF, -INF, -INF, NAN, 5.0, 30.0, 100.0])
B = torch.tensor([1e4 + 1, 3.0, 0.0, INF, -INF, -INF, 2.0, 1.0, 5.0, -30.0, 100.0])


@pytest.mark.parametrize("name", ["logaddexp", "logaddexp2"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_logaddexp_of_large_values_and_infinities(name, dtype):
    fn = getattr(torch, name)
    assert_matches_eager(lambda a, b: fn(a, b), (A.to(dtype), B.to(dtype)), rtol=1e-6, atol=0)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_precision_logaddexp_of_large_values(dtype):
    a = torch.tensor([500.0, -500.0, 12.0, 0.0], dtype=dtype)
    b = torch.tensor([501.0, 3.0, 11.0, 0.0], dtype=dtype)
    assert_matches_eager(lambda a, b: (torch.logaddexp(a, b), torch.logaddexp2(a, b)), (a, b), rtol=0, atol=0)


def test_log_sigmoid_of_large_magnitudes_and_the_loss_built_on_it():
    x = torch.tensor([-1e4, -200.0, -20.0, 0.0, 20.0, 200.0, 1e4, -INF, INF])
    assert_matches_eager(lambda x: F.logsigmoid(x), (x,), rtol=1e-6, atol=0)
    logits, labels = torch.randn(3, 5) * 1e4, (torch.rand(3, 5) > 0.5).float()
    assert_matches_eager(lambda x, y: F.multilabel_soft_margin_loss(x, y), (logits, labels), rtol=1e-5)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_remainder_of_large_values_is_an_exact_fmod(dtype):
    a = torch.tensor([1e28, -1e28, 7.5, -7.5, 7.5, -7.5, 0.0, -0.0, 1e10 + 0.5, INF, 5.0], dtype=dtype)
    b = torch.tensor([3.7, 3.7, 2.0, 2.0, -2.0, -2.0, 3.0, -3.0, 3.0, 2.0, INF], dtype=dtype)
    assert_matches_eager(lambda a, b: torch.remainder(a, b), (a, b), rtol=0, atol=0)
    assert_matches_eager(lambda a: torch.remainder(a, -3.7), (a,), rtol=0, atol=0)
    assert_matches_eager(lambda b: torch.remainder(1e20, b), (b,), rtol=0, atol=0)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_precision_composites_round_once(dtype):
    # Computed step by step in bfloat16 these were off by units: remainder(-500.6, 3) gave 2.0.
    a = (torch.randn(64) * 3 + 500).to(dtype) * torch.tensor([1.0, -1.0]).repeat(32).to(dtype)
    b = (torch.rand(64) * 4 + 1).to(dtype)
    assert_matches_eager(
        lambda a, b: (torch.remainder(a, b), torch.round(a, decimals=-1), torch.lerp(a, b, 0.3), torch.addcmul(a, a, b, value=0.7), torch.hypot(a, b)),
        (a, b), rtol=0, atol=0,
    )
