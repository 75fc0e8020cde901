"""The call's arguments, normalised as torch.onnx.export normalises them."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import torch_onnx_fx
from helpers import assert_matches_eager


class TwoInputs(nn.Module):
    def forward(self, x, b):
        return x.relu(), b.sigmoid()


def test_a_dict_ending_args_is_the_keyword_arguments():
    x, b = torch.randn(2, 3), torch.randn(2, 3)
    program = torch_onnx_fx.export(TwoInputs(), (x, {"b": b}), verbose=False)
    assert [v.name for v in program.model.graph.inputs] == ["x", "b"]
    assert_matches_eager(TwoInputs(), (x,), {"b": b}, program=program)


def test_a_trailing_empty_dict_passes_a_dict_positionally():
    class TakesDict(nn.Module):
        def forward(self, x, extra):
            return x * extra["scale"]

    x, scale = torch.randn(3), torch.randn(3)
    # As with torch.onnx (and the TorchScript exporter): the last dict is the keyword arguments,
    # so a model whose last positional argument is a dict gets an empty one after it.
    program = torch_onnx_fx.export(TakesDict(), (x, {"scale": scale}, {}), verbose=False)
    assert len(program.model.graph.inputs) == 2
    assert_matches_eager(TakesDict(), (x, {"scale": scale}), program=program)


class Nested(nn.Module):
    def forward(self, x, ys: list[torch.Tensor], zs: dict[str, torch.Tensor], c):
        return x + ys[0] + ys[1] + zs["a"] + zs["b"], c * 2


def _nested_inputs(n: int):
    return (torch.ones(n), [torch.zeros(n), torch.ones(n)], {"a": torch.zeros(n), "b": torch.ones(n)}, torch.ones(4))


def test_input_names_name_the_flattened_inputs_and_dynamic_axes_follow_them():
    names = ["input_x", "input_y", "input_z", "d", "e", "f"]
    axes = {name: {0: "dim"} for name in names[:5]}
    with pytest.warns(DeprecationWarning, match="from_dynamic_axes_to_dynamic_shapes is deprecated"):
        program = torch_onnx_fx.export(Nested(), _nested_inputs(5), input_names=names, dynamic_axes=axes, verbose=False)
    inputs = program.model.graph.inputs
    assert [v.name for v in inputs] == names
    assert [str(v.shape[0]) for v in inputs] == ["dim"] * 5 + ["4"]
    assert_matches_eager(Nested(), _nested_inputs(7), program=program)


def test_dynamic_axes_partial_list_and_output_names():
    args = (torch.randn(2, 2, 3), torch.randn(2, 2, 3))
    program = torch_onnx_fx.export(
        TwoInputs(), args, input_names=["x", "b"], output_names=["x_out", "b_out"],
        dynamic_axes={"b": [0, 1, 2], "b_out": {0: "rows"}}, verbose=False,
    )
    x, b = program.model.graph.inputs
    assert list(x.shape) == [2, 2, 3]
    assert [str(d) for d in b.shape] == ["b_dynamic_axes_1", "b_dynamic_axes_2", "b_dynamic_axes_3"]
    assert [v.name for v in program.model.graph.outputs] == ["x_out", "b_out"]
    assert str(program.model.graph.outputs[1].shape[0]) == "rows"
    assert_matches_eager(TwoInputs(), (torch.randn(2, 2, 3), torch.randn(5, 1, 4)), program=program)


def test_dynamic_axes_custom_names_are_kept():
    axes = {"x": {0: "cx0", 1: "cx1"}, "b": {0: "cb0", 2: "cb2"}}
    program = torch_onnx_fx.export(TwoInputs(), (torch.randn(2, 2, 3), {"b": torch.randn(2, 2, 3)}), dynamic_axes=axes, verbose=False)
    x, b = program.model.graph.inputs
    assert [str(d) for d in x.shape] == ["cx0", "cx1", "3"]
    assert [str(d) for d in b.shape] == ["cb0", "2", "cb2"]


def test_two_names_for_one_symbol_warn_as_torch_onnx_does():
    class Add(nn.Module):
        def forward(self, x, y):
            return x + y

    with pytest.warns(UserWarning, match="# The axis name: .* will not be used, since it shares the same shape constraints"):
        torch_onnx_fx.export(Add(), (torch.randn(3), torch.randn(3)), dynamic_shapes=({0: "n"}, {0: "m"}), verbose=False)


@pytest.mark.parametrize("opset", [12, 999, "18", True])
def test_opsets_outside_the_supported_range_are_refused_before_any_work(opset):
    with pytest.raises(torch_onnx_fx.UnsupportedArgumentError, match=r"(builds opsets|an int from) 13 to \d+"):
        torch_onnx_fx.export(TwoInputs(), (torch.randn(2), torch.randn(2)), opset_version=opset, verbose=False)


def test_fx_passes_run_after_decomposition_and_edit_what_is_translated():
    seen = []

    def relu_to_sigmoid(graph_module):
        seen.append(sorted(str(n.target) for n in graph_module.graph.nodes if n.op == "call_function"))
        for node in graph_module.graph.nodes:
            if node.target == torch.ops.aten.relu.default:
                node.target = torch.ops.aten.sigmoid.default

    x = torch.randn(3, 4)
    program = torch_onnx_fx.export(nn.Sequential(nn.ReLU()), (x,), fx_passes=[relu_to_sigmoid], verbose=False)
    torch.testing.assert_close(program(x)[0], torch.sigmoid(x))
    assert seen == [["aten.relu.default"]]
    with pytest.raises(torch_onnx_fx.ArgumentTypeError, match="fx_passes"):
        torch_onnx_fx.export(nn.ReLU(), (x,), fx_passes=relu_to_sigmoid)
