"""An inference BatchNorm after a Conv is taken into the Conv's weights (stored with their recipe),
the exported model matches eager, and apply_weights still replaces the Conv and BatchNorm weights."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import torch_onnx_fx
from helpers import assert_matches_eager


def _stack(rank: int) -> nn.Sequential:
    conv = {1: nn.Conv1d, 2: nn.Conv2d, 3: nn.Conv3d}[rank]
    norm = {1: nn.BatchNorm1d, 2: nn.BatchNorm2d, 3: nn.BatchNorm3d}[rank]
    model = nn.Sequential(
        conv(3, 8, 3, padding=1), norm(8), nn.ReLU(),
        conv(8, 8, 3, padding=1, groups=4, bias=False), norm(8, eps=1e-3),
    )
    return _trained_statistics(model).eval()


def _trained_statistics(model: nn.Module) -> nn.Module:
    """Non-trivial statistics and affine weights, as a trained model has."""
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, nn.modules.batchnorm._BatchNorm):
                module.running_mean.uniform_(-1, 1)
                module.running_var.uniform_(0.5, 2)
                nn.init.uniform_(module.weight, 0.5, 1.5)
                nn.init.uniform_(module.bias, -0.5, 0.5)
    return model


def _input(rank: int, batch: int = 2) -> torch.Tensor:
    return torch.randn(batch, 3, *([6] * rank))


def _op_types(program: torch_onnx_fx.ONNXProgram) -> list[str]:
    return [node.op_type for node in program.model.graph]


@pytest.mark.parametrize("rank", [1, 2, 3])
def test_batchnorm_after_conv_is_folded(rank):
    torch.manual_seed(0)
    model = _stack(rank)
    program = assert_matches_eager(
        model, (_input(rank),), dynamic_shapes=({0: "batch"},), more_inputs=[((_input(rank, 3),), {})]
    )
    assert _op_types(program) == ["Conv", "Relu", "Conv"]


def test_apply_weights_reaches_folded_batchnorms():
    torch.manual_seed(0)
    x = _input(2)
    program = torch_onnx_fx.export(_stack(2), (x,), verbose=False)
    trained = _stack(2)
    program.apply_weights(trained.state_dict())
    assert_matches_eager(trained, (x,), program=program)


def test_meta_built_stack_folds_and_gets_its_weights():
    x = _input(2)
    with torch.device("meta"):
        meta = nn.Sequential(nn.Conv2d(3, 8, 3), nn.BatchNorm2d(8)).eval()
    program = torch_onnx_fx.export(meta, (x.to("meta"),), verbose=False)
    assert _op_types(program) == ["Conv"]
    torch.manual_seed(1)
    real = _trained_statistics(nn.Sequential(nn.Conv2d(3, 8, 3), nn.BatchNorm2d(8))).eval()
    program.apply_weights(real.state_dict())
    assert_matches_eager(real, (x,), program=program)


def test_batchnorm_not_after_a_lone_conv_stays():
    """A Conv whose output is also read elsewhere, and a BatchNorm after a Linear, keep their
    BatchNormalization: folding the first would need the unnormalised output too."""

    class Branches(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(3, 4, 1)
            self.norm = nn.BatchNorm2d(4)
            self.linear = nn.Linear(5, 4)
            self.norm1d = nn.BatchNorm1d(4)

        def forward(self, x, y):
            h = self.conv(x)
            return self.norm(h) + h, self.norm1d(self.linear(y))

    torch.manual_seed(0)
    model = Branches().eval()
    model.norm.running_mean.uniform_(-1, 1)
    program = assert_matches_eager(model, (torch.randn(2, 3, 5, 5), torch.randn(2, 5)))
    assert _op_types(program).count("BatchNormalization") == 2
