"""A mean over a dim that is empty at run time is NaN, as in eager PyTorch, not ONNX Runtime's 0;
a mean over static, non-empty dims keeps its ReduceMean."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch.export import Dim

from helpers import assert_matches_eager

_MEANS = {
    "mean": lambda a, b: a.mean(),
    "mean_of_dim": lambda a, b: a.mean(0, keepdim=True),
    "mse_loss": lambda a, b: F.mse_loss(a, b),
    "l1_loss": lambda a, b: F.l1_loss(a, b),
    "cross_entropy_of_probabilities": lambda a, b: F.cross_entropy(a, b.softmax(-1)),
}


class _Mean(torch.nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, a, b):
        return self.fn(a, b)


@pytest.mark.parametrize("opset", [13, 17, 20])
@pytest.mark.parametrize("name", list(_MEANS))
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16])
def test_mean_of_a_dynamic_dim_is_nan_when_empty(name, dtype, opset):
    batch = Dim("batch")
    args = (torch.randn(4, 3, dtype=dtype), torch.randn(4, 3, dtype=dtype))
    empty = (torch.randn(0, 3, dtype=dtype), torch.randn(0, 3, dtype=dtype))
    assert_matches_eager(
        _Mean(_MEANS[name]), args, dynamic_shapes=({0: batch}, {0: batch}), opset_version=opset,
        more_inputs=[(empty, {}), ((torch.randn(7, 3, dtype=dtype), torch.randn(7, 3, dtype=dtype)), {})],
        rtol=1e-3 if dtype == torch.float16 else 1e-4,
    )


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_precision_means_are_summed_in_float32(dtype):
    """torchlib's mse_loss leaves a 16-bit ReduceMean: a float16 sum of 60,000 values near 1.3
    (or their count, 90,000) is inf in float16, where ATen sums and divides in float32."""
    batch = Dim("batch")
    torch.manual_seed(0)
    big = (torch.rand(30000, 3, dtype=dtype) * 2, torch.zeros(30000, 3, dtype=dtype))
    assert_matches_eager(
        _Mean(_MEANS["mse_loss"]), (torch.rand(4, 3, dtype=dtype), torch.rand(4, 3, dtype=dtype)),
        dynamic_shapes=({0: batch}, {0: batch}), more_inputs=[(big, {}), ((torch.rand(257, 3, dtype=dtype), torch.rand(257, 3, dtype=dtype)), {})],
        rtol=0, atol=0,
    )


def test_mse_loss_of_static_empty_tensors_is_nan():
    """torchlib's mse_loss is a ReduceMean over all dims: 0 for an empty input before."""
    assert_matches_eager(_Mean(_MEANS["mse_loss"]), (torch.randn(0, 3), torch.randn(0, 3)))


def test_mean_over_static_dims_keeps_reduce_mean():
    program = assert_matches_eager(_Mean(lambda a, b: (a * b).mean(-1)), (torch.randn(4, 8), torch.randn(4, 8)),
                                   dynamic_shapes=({0: Dim("batch")}, {0: Dim("batch")}))
    assert [node.op_type for node in program.model.graph] == ["Mul", "ReduceMean"]


def test_mean_in_a_loop_body():
    """A ReduceMean inside a control-flow body reads the new axes from the main graph."""

    class Branches(torch.nn.Module):
        def forward(self, x):
            return torch.cond(x.sum() > 0, lambda t: t.mean(0), lambda t: -t.mean(0), (x,))

    rows = Dim("rows")
    assert_matches_eager(Branches(), (torch.ones(4, 3),), dynamic_shapes=({0: rows},),
                         more_inputs=[((torch.ones(0, 3),), {}), ((-torch.ones(5, 3),), {})])
