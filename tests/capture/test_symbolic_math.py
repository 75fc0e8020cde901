"""NumPy's sqrt of a symbolic size while capturing (torch_onnx_fx.capture.symbolic_math)."""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from helpers import assert_matches_eager


class ScaledByRatio(nn.Module):
    """diffusers' Cosmos: a norm scaled by NumPy's sqrt of a ratio of element counts."""

    def forward(self, x, y):
        return x * np.sqrt(x.numel() / y.numel()) + y.sum()


def test_numpy_sqrt_of_a_symbolic_ratio_is_computed_at_run_time():
    shapes = ({0: "rows", 1: "columns"}, {0: "length"})
    assert_matches_eager(
        ScaledByRatio(), (torch.randn(3, 5), torch.randn(7)), dynamic_shapes=shapes,
        more_inputs=[((torch.randn(6, 2), torch.randn(5)), {}), ((torch.randn(2, 2), torch.randn(9)), {})],
        rtol=1e-6, atol=1e-6,
    )


def test_the_method_is_gone_after_capture():
    assert_matches_eager(ScaledByRatio(), (torch.randn(3, 5), torch.randn(7)), dynamic_shapes=({0: "rows"}, {0: "length"}))
    assert not hasattr(torch.SymFloat, "sqrt") and not hasattr(torch.SymInt, "sqrt")
