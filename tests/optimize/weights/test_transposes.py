"""Weights used transposed are stored transposed, under a Cast too, and apply_weights stores new
ones the same way."""

from __future__ import annotations

import onnx_ir as ir
import torch
from torch import nn

import torch_onnx_fx
from helpers import assert_matches_eager
from torch_onnx_fx.optimize.weights.transposes import PERM_KEY


class HalfBlock(nn.Module):
    """float16 Linears on a 3-d input: computed in float32 from ``Cast(W)`` (one rounding, as
    ATen's), which is where the Transpose used to stay."""

    def __init__(self):
        super().__init__()
        self.up = nn.Linear(64, 96).half()
        self.down = nn.Linear(96, 64).half()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down(torch.relu(self.up(x))) + x


def test_half_precision_weight_is_stored_transposed_under_its_cast():
    torch.manual_seed(0)
    x = torch.randn(2, 5, 64).half()
    program = assert_matches_eager(HalfBlock().eval(), (x,), rtol=1e-3, atol=1e-3)
    graph = program.model.graph
    assert "Transpose" not in [node.op_type for node in graph]
    stored = [value for value in graph.initializers.values() if PERM_KEY in value.metadata_props]
    assert sorted(value.name for value in stored) == ["down.weight.transposed", "up.weight.transposed"]
    # Stored in the weight's own dtype: the Cast to float32 stays, the file does not grow.
    assert {value.dtype for value in stored} == {ir.DataType.FLOAT16}


def test_apply_weights_stores_new_half_precision_weights_transposed():
    torch.manual_seed(0)
    x = torch.randn(2, 5, 64).half()
    program = torch_onnx_fx.export(HalfBlock().eval(), (x,), verbose=False)
    torch.manual_seed(1)
    trained = HalfBlock().eval()
    program.apply_weights(trained.state_dict())
    assert_matches_eager(trained, (x,), program=program, rtol=1e-3, atol=1e-3)
