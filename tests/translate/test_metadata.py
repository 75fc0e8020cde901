"""PyTorch's metadata keys on nodes, values and the graph survive translation and optimization."""

from __future__ import annotations

import torch
from torch import nn

import torch_onnx_fx


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(4, 4)
        self.register_buffer("offset", torch.ones(4))
        self.register_buffer("scratch", torch.zeros(4), persistent=False)

    def forward(self, x):
        return torch.relu(self.linear(x)) + self.offset + self.scratch


class Outer(nn.Module):
    def __init__(self):
        super().__init__()
        self.block = Block()

    def forward(self, x):
        return self.block(x)


def test_node_metadata_keys():
    program = torch_onnx_fx.export(Outer().eval(), (torch.randn(2, 4),), verbose=False)
    relu = [n for n in program.model.graph if n.op_type == "Relu"]
    assert relu
    meta = relu[0].metadata_props
    assert "block: " in meta["namespace"] and meta["namespace"].endswith("relu: aten::relu")
    assert "Block" in meta["pkg.torch.onnx.class_hierarchy"]
    assert "relu" in meta["pkg.torch.onnx.fx_node"]
    assert "block" in meta["pkg.torch.onnx.name_scopes"]
    assert "test_metadata.py" in meta["pkg.torch.onnx.stack_trace"]


def test_graph_and_value_metadata():
    program = torch_onnx_fx.export(
        Outer().eval(), (torch.randn(2, 4),), input_names=["features"], output_names=["scores"], verbose=False, optimize=False
    )
    graph = program.model.graph
    assert "USER_INPUT" in graph.metadata_props["pkg.torch.export.ExportedProgram.graph_signature"]
    assert "pkg.torch.export.ExportedProgram.range_constraints" in graph.metadata_props
    (x,) = graph.inputs
    assert x.metadata_props["pkg.torch.export.graph_signature.InputSpec.kind"] == "USER_INPUT"
    assert x.metadata_props["pkg.torch.onnx.original_node_name"] == "x"
    weight = graph.initializers["block.linear.weight"]
    assert weight.metadata_props["pkg.torch.export.graph_signature.InputSpec.kind"] == "PARAMETER"
    offset = graph.initializers["block.offset"]
    assert offset.metadata_props["pkg.torch.export.graph_signature.InputSpec.persistent"] == "True"
    scratch = graph.initializers["block.scratch"]
    assert scratch.metadata_props["pkg.torch.export.graph_signature.InputSpec.persistent"] == "False"
    (out,) = graph.outputs
    assert out.name == "scores"
    assert out.metadata_props["pkg.torch.export.graph_signature.OutputSpec.kind"] == "USER_OUTPUT"
