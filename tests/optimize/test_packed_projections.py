"""fusion="onnxruntime": products of one input with several weights stored transposed are one
product and a Split, run in ONNX Runtime against eager; the packed weight keeps apply_weights."""

from __future__ import annotations

import pytest
import torch

from helpers import assert_matches_eager
from tests.optimize.test_fusion import _ops


class _Projections(torch.nn.Module):
    """Three projections of one input (q, k, v), one of them optionally read again elsewhere."""

    def __init__(self, dtype=torch.float32, shared: bool = False) -> None:
        super().__init__()
        self.q, self.k, self.v = (torch.nn.Linear(16, n, bias=False, dtype=dtype) for n in (16, 8, 8))
        self.shared = shared

    def forward(self, x):
        q, k, v = self.q(x), self.k(x), self.v(x)
        out = q.sum(-1, keepdim=True) * k + v
        if self.shared:
            out = out + torch.nn.functional.linear(out, self.k.weight.t()[:8, :8])
        return out, q


def test_projections_of_one_input_are_one_product():
    torch.manual_seed(0)
    model = _Projections().eval()
    x = torch.randn(2, 3, 16)
    program = assert_matches_eager(model, (x,), fusion="onnxruntime", dynamic_shapes=({0: "batch", 1: "length"},),
                                   more_inputs=[((torch.randn(1, 5, 16),), {})])
    ops = _ops(program)
    assert (ops["MatMul"], ops["Split"]) == (1, 1)
    # The packed weight is remade from a new state dict.
    state = {name: torch.randn_like(tensor) for name, tensor in model.state_dict().items()}
    program.apply_weights(state)
    model.load_state_dict(state)
    assert_matches_eager(model, (x,), program=program)


@pytest.mark.parametrize("shared, dtype", [(True, torch.float32), (False, torch.float64)], ids=["weight-read-twice", "float64"])
def test_left_apart_where_packing_would_grow_or_differ(shared, dtype):
    torch.manual_seed(0)
    program = assert_matches_eager(_Projections(dtype, shared).eval(), (torch.randn(2, 3, 16, dtype=dtype),), fusion="onnxruntime")
    # A weight read elsewhere stays as it is (the other two are packed); float64 is not packed.
    assert _ops(program)["Split"] == (1 if shared else 0)


def test_standard_fusion_keeps_the_products_apart():
    program = assert_matches_eager(_Projections().eval(), (torch.randn(2, 3, 16),))
    assert _ops(program)["MatMul"] == 3
