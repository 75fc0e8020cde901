"""ExportableModule: export with no arguments from the module's own recipe."""

from __future__ import annotations

import torch
from torch import nn

import torch_onnx_fx
from helpers import assert_matches_eager


class Recipe(torch_onnx_fx.ExportableModule):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3)

    def forward(self, x, scale: float = 1.0):
        return self.conv(x) * scale

    def example_arguments(self):
        return (torch.randn(2, 3, 8, 8),), {"scale": 2.0}

    def dynamic_shapes(self):
        return {"x": {0: "batch_size"}, "scale": None}

    def input_names(self):
        return ("image",)

    def output_names(self):
        return ("features",)


def test_export_without_arguments_uses_the_recipe():
    module = Recipe().eval()
    for program in (torch_onnx_fx.export(module, verbose=False), module.to_onnx(verbose=False)):
        graph = program.model.graph
        assert [v.name for v in graph.inputs] == ["image"]
        assert [v.name for v in graph.outputs] == ["features"]
        assert str(graph.inputs[0].shape[0]) == "batch_size"
        x = torch.randn(5, 3, 8, 8)
        with torch.no_grad():
            torch.testing.assert_close(program(x, scale=2.0)[0], module(x, scale=2.0), rtol=1e-4, atol=1e-5)


def test_explicit_arguments_win_over_the_recipe():
    module = Recipe().eval()
    program = assert_matches_eager(module, (torch.randn(3, 3, 6, 6),), {"scale": 2.0}, output_names=["out"], opset_version=18)
    assert [v.name for v in program.model.graph.outputs] == ["out"]
    assert program.model.opset_imports[""] == 18


def test_torch_onnx_exportable_module_is_accepted():
    class TorchStyle(torch.onnx.ExportableModule):
        def __init__(self):
            super().__init__()
            self.linear = nn.Linear(4, 2)

        def forward(self, x):
            return self.linear(x)

        def example_arguments(self):
            return (torch.randn(3, 4),), None

    module = TorchStyle().eval()
    program = torch_onnx_fx.export(module, verbose=False)
    x = torch.randn(3, 4)
    with torch.no_grad():
        torch.testing.assert_close(program(x)[0], module(x), rtol=1e-4, atol=1e-5)
