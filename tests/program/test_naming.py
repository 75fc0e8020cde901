"""program/naming.py: the graph's interface named as the user asked, on an exported graph."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import torch_onnx_fx
from helpers import assert_matches_eager
from torch_onnx_fx.errors import UnsupportedArgumentError
from torch_onnx_fx.program import naming
from torch_onnx_fx.translate.metadata import ORIGINAL_NAME_KEY


class AddAndScale(nn.Module):
    def forward(self, x, y):
        return x + y, x * 2


def _program(**options) -> torch_onnx_fx.ONNXProgram:
    args = (torch.randn(2, 3), torch.randn(2, 3))
    return torch_onnx_fx.export(AddAndScale(), args, dynamic_shapes=({0: "batch"}, {0: "batch"}), verbose=False, **options)


def test_names_given_at_export_name_the_interface_and_the_program_still_computes():
    program = _program(input_names=["a", "b"], output_names=["total", "double"])
    graph = program.model.graph
    assert [v.name for v in graph.inputs] == ["a", "b"]
    assert [v.name for v in graph.outputs] == ["total", "double"]
    # The FX name each renamed value had is kept in its metadata.
    assert {v.metadata_props.get(ORIGINAL_NAME_KEY) for v in graph.inputs} == {"x", "y"}
    assert_matches_eager(AddAndScale(), (torch.randn(5, 3), torch.randn(5, 3)), program=program)


def test_name_interface_renames_and_names_output_dims_in_place():
    program = _program()
    graph = program.model.graph
    naming.name_interface(
        graph, program.signature, input_names=["p"], output_names=["sum"],
        dynamic_axes={"sum": {0: "rows"}}, state_outputs=False,
    )
    assert [v.name for v in graph.inputs] == ["p", "y"]
    assert graph.outputs[0].name == "sum" and str(graph.outputs[0].shape[0]) == "rows"
    program.release()
    x, y = torch.randn(4, 3), torch.randn(4, 3)
    assert_matches_eager(AddAndScale(), (x, y), program=program)


@pytest.mark.parametrize(
    "names, message",
    [(["a", "b", "c"], "3 input_names were given but the model has 2 inputs"), (["a", "a"], "input_names must be unique")],
)
def test_names_that_cannot_apply_are_refused(names, message):
    program = _program()
    with pytest.raises(UnsupportedArgumentError, match=message):
        naming.rename_inputs(program.model.graph, names, program.signature)


def test_dims_named_in_dynamic_shapes_name_the_graph_inputs_dims():
    program = _program()
    assert [str(v.shape[0]) for v in program.model.graph.inputs] == ["batch", "batch"]
