"""optimize/runtime/exact_round_trips.py: a float32 value holding float16 numbers is not cast to
float16 and back between two widened nodes."""

from __future__ import annotations

import torch
from torch import nn

from helpers import assert_matches_eager


class HalfBlock(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.norm = nn.BatchNorm2d(8)
        self.conv2 = nn.Conv2d(8, 8, 3, padding=1)

    def forward(self, x):
        y = torch.relu(self.norm(self.conv1(x)))
        return self.conv2(y.transpose(-1, -2)) + y


def test_picked_half_numbers_are_read_in_float32():
    torch.manual_seed(0)
    model = HalfBlock().half().eval()
    # The convolutions sum in another order than ATen's: a float16 result in a thousand differs.
    program = assert_matches_eager(model, (torch.randn(2, 3, 8, 8).half(),), rtol=1e-3, atol=1e-5)
    graph = program.model.graph
    # Relu of numbers cast from float16 holds float16 numbers: the widened Add reads it in
    # float32, without a Cast to float16 and back.
    (relu,) = [node for node in graph if node.op_type == "Relu"]
    (add,) = [node for node in graph if node.op_type == "Add"]
    assert relu.outputs[0] in add.inputs
    # The BatchNormalization's result is rounded to float16 before Relu reads it, as ATen's is.
    (norm,) = [node for node in graph if node.op_type == "BatchNormalization"]
    assert {user.op_type for user, _ in norm.outputs[0].uses()} == {"Cast"}
