"""ONNXProgram.rename_axes, as torch.onnx's ONNXProgram has it: symbolic dims renamed in the whole
model, expressions of them included; the renamed model saves and runs."""

from __future__ import annotations

import onnx
import onnx_ir as ir
import onnxruntime
import pytest
import torch
from torch.export import Dim

import torch_onnx_fx


class _Joined(torch.nn.Module):
    def forward(self, x, y):
        return torch.cat([x, y], 1).relu(), x.sum(1)


def _program():
    batch = Dim("b")
    return torch_onnx_fx.export(
        _Joined().eval(), (torch.randn(2, 3), torch.randn(2, 4)),
        dynamic_shapes=({0: batch, 1: Dim("n")}, {0: batch, 1: Dim("m")}), verbose=False,
    )


def _shapes(values):
    return [[str(d) for d in v.shape] for v in values]


def test_dims_and_their_expressions_are_renamed_and_the_model_runs(tmp_path):
    program = _program()
    graph = program.model.graph
    assert _shapes(graph.inputs) == [["b", "n"], ["b", "m"]]
    program.rename_axes({graph.inputs[0].shape[0]: "batch", "n": "left", "m": "right"})
    assert _shapes(graph.inputs) == [["batch", "left"], ["batch", "right"]]
    joined, summed = _shapes(graph.outputs)
    assert joined[0] == "batch" and sorted(joined[1].split(" + ")) == ["left", "right"] and summed == ["batch"]
    assert not any("b" in str(d).split() for node in graph for v in node.outputs if v.shape for d in v.shape)

    path = tmp_path / "model.onnx"
    program.save(path)
    assert [d.dim_param for d in onnx.load(path).graph.input[0].type.tensor_type.shape.dim] == ["batch", "left"]
    session = onnxruntime.InferenceSession(path, providers=["CPUExecutionProvider"])
    x, y = torch.randn(5, 2), torch.randn(5, 6)
    out, total = session.run(None, {"x": x.numpy(), "y": y.numpy()})
    torch.testing.assert_close(torch.from_numpy(out), torch.cat([x, y], 1).relu())
    torch.testing.assert_close(torch.from_numpy(total), x.sum(1))


def test_names_are_swapped_not_chained():
    """torch.onnx renames inside expressions one name after another: ``n + m`` became ``n + n``."""
    program = _program()
    program.rename_axes({"n": "m", "m": "n"})
    assert _shapes(program.model.graph.inputs) == [["b", "m"], ["b", "n"]]
    assert sorted(_shapes(program.model.graph.outputs)[0][1].split(" + ")) == ["m", "n"]


def test_size_conditions_read_the_new_names():
    class Even(torch.nn.Module):
        def forward(self, x):
            return x.reshape(x.shape[0] // 2, 2, x.shape[1]).sum(1) if x.shape[0] % 2 == 0 else x

    program = torch_onnx_fx.export(Even(), (torch.randn(4, 3),), dynamic_shapes=({0: Dim("rows")},), verbose=False)
    assert any("rows" in condition for condition in program.size_conditions)
    program.rename_axes({"rows": "tokens"})
    assert program.size_conditions and all("rows" not in c and "tokens" in c for c in program.size_conditions)
    assert "tokens" in program.model.metadata_props["pkg.torch_onnx_fx.size_conditions"]
    with pytest.raises(torch_onnx_fx.InputMismatchError, match="tokens"):
        program(torch.randn(5, 3))


@pytest.mark.parametrize("mapping", [{1: "x"}, {"n": 3}, {"n": ""}, {ir.SymbolicDim(None): "x"}, ["n"]])
def test_bad_mappings_are_refused(mapping):
    with pytest.raises(torch_onnx_fx.errors.ArgumentTypeError, match="rename_axes"):
        _program().rename_axes(mapping)
