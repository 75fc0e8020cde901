"""ops/stable.py and the half-precision composites: formulas that stay finite and keep their digits
where the textbook ones (torchlib's, and torch.onnx's) overflow, cancel or round away.

Each case failed before: logaddexp of large values was inf, log_sigmoid of large negatives -inf (a
multilabel soft-margin loss nan), log1p and expm1 of small values lost their digits, remainder of
large values was 0, and bfloat16 remainder and round(decimals) were off by units.
"""

from __future__ import annotations

import onnx
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


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_variance_of_large_float32_values_is_finite(dtype):
    # float32 is computed in float64 as ATen accumulates it; the squares of 1e28 overflowed.
    x = (torch.randn(4, 6) * 1e28).to(dtype)
    assert_matches_eager(
        lambda x: (torch.std(x, dim=1), *torch.std_mean(x, dim=0), torch.var(x, dim=1) * 1e-30),
        (x,), rtol=1e-5 if dtype == torch.float32 else 1e-2, atol=0,
    )


def test_variance_and_mean_of_nothing_are_nan():
    program = torch_onnx_fx.export(
        lambda x: (*torch.var_mean(x, dim=1), torch.std(x, dim=1)), (torch.randn(2, 3),), dynamic_shapes=({1: "n"},), verbose=False,
    )
    for value in program(torch.randn(2, 0)):
        assert value.isnan().all()


@pytest.mark.parametrize("scale", [1e28, 1e-40])
def test_float32_vector_norms_do_not_overflow_or_underflow(scale):
    # ReduceL2's float32 squares overflowed past 1.8e19 and were flushed to 0 below 1e-19; summed
    # in float64 they do neither (eager overflows too past 1.8e19: the finite norm is right).
    x = torch.randn(4, 5) * scale
    for ord in (2, 3, -1.5):
        (actual,) = _ours(lambda x: torch.linalg.vector_norm(x, ord=ord, dim=1), x)
        expected = torch.linalg.vector_norm((x / scale).double(), ord=ord, dim=1) * scale
        torch.testing.assert_close(actual, expected.float(), rtol=1e-5, atol=0)


@pytest.mark.parametrize("scale", [1e231, 1e-160, 1e-310])
def test_float64_vector_norms_as_eager_computes_them(scale):
    # float64 is summed as eager sums it: overflow and underflow where eager's do, and a single
    # element's norm its magnitude (eager's shortcut) even past 1e154.
    x = torch.randn(4, 5, dtype=torch.float64) * scale
    for ord in (2, 3):
        assert_matches_eager(lambda x: torch.linalg.vector_norm(x, ord=ord, dim=1), (x,), rtol=1e-12, atol=0)
    assert_matches_eager(lambda x: (torch.linalg.vector_norm(x[0, 0]), torch.linalg.vector_norm(x[:, :1], dim=1)), (x,), rtol=1e-12, atol=0)


def test_vector_norms_of_ordinary_values_infinities_and_nans_match_eager():
    x = torch.tensor([[0.0, 0.0, 0.0], [1.0, INF, 2.0], [1.0, NAN, 2.0], [-INF, 1.0, 1.0], [3.0, -4.0, 0.5]])
    for ord in (2, 3, 0.5, -1, 1, 0, INF, -INF):
        assert_matches_eager(lambda x: torch.linalg.vector_norm(x, ord=ord, dim=1), (x,), rtol=1e-6, atol=0)
    assert_matches_eager(lambda x: (torch.norm(x), F.normalize(x, dim=0), torch.linalg.vector_norm(x, dtype=torch.float64)), (torch.randn(3, 4),))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16])
def test_two_norms_square_signed_values_without_abs(dtype):
    # ReduceL2 squares: negative values, -0 and -inf need no Abs in front of it.
    x = torch.tensor([[-3.0, 4.0, -0.0], [-INF, 1.0, 2.0], [-1.0, NAN, -2.0], [-0.0, -0.0, -0.0]], dtype=dtype)
    program = assert_matches_eager(lambda x: (torch.linalg.vector_norm(x, dim=1), F.normalize(x, dim=0)), (x,), rtol=1e-3, atol=0)
    assert "Abs" not in [n.op_type for n in program.model.graph]


@pytest.mark.parametrize("dtype,scale", [(torch.float32, 1e28), (torch.float64, 1e231), (torch.float32, 3.0), (torch.bfloat16, 1e28), (torch.float16, 100.0)])
def test_logcumsumexp_keeps_every_prefix(dtype, scale):
    # torchlib subtracted the slice's maximum before a CumSum of exponentials: prefixes far below
    # it were -inf.
    x = (torch.randn(3, 7, 5) * scale).to(dtype)
    rtol = {torch.bfloat16: 2e-2, torch.float16: 1e-2}.get(dtype, 1e-5)
    assert_matches_eager(lambda x: (torch.logcumsumexp(x, 1), torch.logcumsumexp(x, -1)), (x,), rtol=rtol, atol=1e-6)


def test_logcumsumexp_of_infinities_and_other_lengths():
    x = torch.tensor([[-INF, -INF, 1.0, INF, 2.0, NAN, 3.0], [5.0, -INF, INF, INF, -INF, 1.0, 2.0]])
    assert_matches_eager(lambda x: torch.logcumsumexp(x, 1), (x,), rtol=1e-6)
    assert_matches_eager(
        lambda x: torch.logcumsumexp(x, 1), (torch.randn(2, 5, 3),), dynamic_shapes=({0: "a", 1: "b", 2: "c"},),
        more_inputs=[((torch.randn(2, 9, 3) * 50,), {}), ((torch.randn(1, 1, 1),), {}), ((torch.randn(3, 0, 2),), {})],
    )


@pytest.mark.parametrize("ord", [2, 1, 0.5, float("inf"), 0])
def test_norm_over_all_dims_keeps_each_dim(ord):
    # dim=None with keepdim: eager keeps every dim as 1 ([1] for a vector, [1, 1] for a matrix);
    # the flattened norm came back as a scalar, an invalid model for ONNX's checker.
    for x in (torch.randn(5), torch.randn(3, 4)):
        program = assert_matches_eager(
            lambda x: (torch.linalg.norm(x, keepdim=True), torch.linalg.vector_norm(x, ord, keepdim=True)), (x,), rtol=1e-6, atol=1e-6
        )
        onnx.checker.check_model(program.model_proto, full_check=True)
