"""Activations whose torchlib translations compute something else than ATen for some arguments
(ops/activation.py)."""

from __future__ import annotations

import pytest
import torch

from helpers import assert_matches_eager

_X = torch.randn(64, generator=torch.Generator().manual_seed(0)) * 3
_X[0] = float("nan")

# Tolerances an order of magnitude above ONNX Runtime's exp(x) - 1 where ATen has expm1; half
# types at torch's defaults (rounded once from float32, as ATen does).
_TOLERANCE = {torch.float32: (1e-6, 1e-7), torch.float64: (1e-14, 1e-16), torch.float16: (1e-3, 1e-5), torch.bfloat16: (1.6e-2, 1e-5)}


@pytest.mark.parametrize("alpha, scale, input_scale", [(0.3, 1.1, 0.7), (1.0, 1.0, 0.7), (1.0, 1.1, 1.0), (0.3, 1.0, -0.7), (0.3, 2.0, 0.0)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16])
def test_elu_scales_the_input_only_where_it_is_not_positive(dtype, alpha, scale, input_scale):
    # torchlib computed Elu(x * input_scale) * scale: x * input_scale * scale where x > 0, 0.26
    # off for input_scale=0.7 (torch.onnx too); in half precision its coefficients were rounded
    # to the half type, where ATen computes in float32.
    rtol, atol = _TOLERANCE[dtype]
    assert_matches_eager(lambda x: torch.ops.aten.elu(x, alpha, scale, input_scale), (_X.to(dtype),), rtol=rtol, atol=atol)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16])
def test_rrelu_outside_training_is_the_mean_slope(dtype):
    # No translation before: F.rrelu and nn.RReLU in eval mode failed to export (torch.onnx too).
    module = torch.nn.Sequential(torch.nn.RReLU(0.1, 0.3), torch.nn.RReLU()).eval()
    assert_matches_eager(lambda x: (module(x), torch.nn.functional.rrelu(x, 0.2, 0.25)), (_X.to(dtype),), rtol=0, atol=0)


def test_elu_with_a_negative_input_scale_near_zero_in_float64():
    # expm1 of a small positive argument was exp(y) - 1: 268 ulps off at x = -1e-8.
    x = -torch.logspace(-10, 1, 60, dtype=torch.float64)
    assert_matches_eager(lambda x: torch.ops.aten.elu(x, 0.3, 1.1, -0.7), (x,), rtol=1e-15, atol=0)
