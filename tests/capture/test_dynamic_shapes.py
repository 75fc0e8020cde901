"""dynamic_shapes in every form torch.export accepts, named dims, symbolic arithmetic."""

from __future__ import annotations

import pytest
import torch
from torch import nn
from torch.export import Dim

import torch_onnx_fx
from helpers import assert_matches_eager


class Reshaper(nn.Module):
    def forward(self, x, y):
        b, s = x.shape
        z = x.reshape(b, s, 1).transpose(1, 2).reshape(b, -1)
        return z * y[:, :1], torch.cat([x, y], dim=1), (b * s) // 3, x.new_zeros(b + 1, 2)


ARGS = (torch.randn(3, 8), torch.randn(3, 10))
OTHER = ((torch.randn(5, 6), torch.randn(5, 10)), {})


@pytest.mark.parametrize(
    "dynamic_shapes",
    [
        ({0: "batch", 1: "seq"}, {0: "batch"}),
        [{0: "batch", 1: "seq"}, {0: "batch"}],
        {"x": {0: "batch", 1: "seq"}, "y": {0: "batch"}},
        ({0: Dim("batch"), 1: Dim("seq", min=2)}, {0: Dim("batch")}),
        ({0: Dim.AUTO, 1: Dim.AUTO}, {0: Dim.AUTO, 1: Dim.AUTO}),
        ({0: Dim.DYNAMIC, 1: Dim.DYNAMIC}, {0: Dim.DYNAMIC, 1: Dim.DYNAMIC}),
        ([Dim.DYNAMIC, Dim.DYNAMIC], [Dim.DYNAMIC, Dim.STATIC]),
    ],
    ids=["tuple-names", "list-names", "dict-by-arg", "Dim-objects", "AUTO", "DYNAMIC", "list-axes"],
)
def test_dynamic_shape_forms(dynamic_shapes):
    program = assert_matches_eager(Reshaper(), ARGS, dynamic_shapes=dynamic_shapes, more_inputs=[OTHER])
    first = program.model.graph.inputs[0].shape
    assert not isinstance(first[0], int) and not isinstance(first[1], int)


def test_names_reach_inputs_and_derived_output_dims():
    program = torch_onnx_fx.export(
        Reshaper(), ARGS, dynamic_shapes=({0: "batch", 1: "seq"}, {0: "batch"}), verbose=False
    )
    graph = program.model.graph
    assert [str(d) for d in graph.inputs[0].shape] == ["batch", "seq"]
    assert str(graph.inputs[1].shape[0]) == "batch"
    output_dims = [str(d) for d in graph.outputs[3].shape]
    assert output_dims == ["batch + 1", "2"]


def test_dynamic_axes_list_and_dict_forms():
    class Model(nn.Module):
        def forward(self, a, b):
            return a.sum(1) + b.mean(1)

    program = assert_matches_eager(
        Model(),
        (torch.randn(3, 4), torch.randn(3, 5)),
        input_names=["a", "b"],
        output_names=["out"],
        dynamic_axes={"a": {0: "n"}, "b": [0], "out": {0: "n_out"}},
        more_inputs=[((torch.randn(6, 4), torch.randn(6, 5)), {})],
    )
    graph = program.model.graph
    assert str(graph.inputs[0].shape[0]) == "n"
    assert str(graph.outputs[0].shape[0]) == "n_out"


def test_symbolic_arithmetic_and_comparisons():
    class Model(nn.Module):
        def forward(self, x):
            n = x.shape[0]
            half = n // 2
            rest = n - half
            scale = x.shape[1] / 4
            return x[:half] * scale, x[half:], torch.full((rest, max(n, 3)), 1.0)

    assert_matches_eager(
        Model(),
        (torch.randn(6, 4),),
        dynamic_shapes=({0: "n", 1: "m"},),
        more_inputs=[((torch.randn(9, 8),), {})],
    )


def test_sym_sum_and_abs_of_sizes():
    class Model(nn.Module):
        def forward(self, x, y):
            total = torch.sym_sum([x.shape[0], y.shape[0], 1])
            return torch.zeros(total, abs(x.shape[1] - y.shape[1]) + 1)

    assert_matches_eager(
        Model(), (torch.randn(2, 3), torch.randn(4, 5)),
        dynamic_shapes=({0: "a", 1: "b"}, {0: "c", 1: "d"}),
        more_inputs=[((torch.randn(3, 7), torch.randn(1, 2)), {})],
    )


def test_floor_division_of_sizes_is_one_div_unless_it_can_be_negative():
    class Model(nn.Module):
        def forward(self, x):
            n = x.shape[0]
            # n // 3 is a size (n >= 0): truncating Div floors. (n - 7) // 3 may be negative.
            return torch.zeros(n // 3 + 1), torch.arange((n - 7) // 3 + 4)

    program = assert_matches_eager(
        Model(), (torch.randn(6, 2),), dynamic_shapes=({0: "n"},),
        more_inputs=[((torch.randn(2, 2),), {}), ((torch.randn(11, 2),), {})],
    )
    ops = [node.op_type for node in program.model.graph]
    assert ops.count("Div") == 2 and ops.count("Mod") == 1, ops


def test_split_and_chunk_by_a_symbolic_size():
    """RAFT chunks the features of both images (batch 2B) back into two over a dynamic batch:
    torchlib's SplitToSequence with a computed size crashed onnxscript's constant folder."""

    class Chunks(torch.nn.Module):
        def forward(self, a, b):
            features = torch.cat([a, b], 0) * 2
            first, second = torch.chunk(features, 2, 0)
            head, tail = torch.split(features, a.shape[0] + 1, 0)
            left, right = torch.split(features, 2 * a.shape[0] - 1, -2)
            return first - second, head.sum(0), tail, left, right

    shapes = ({0: "n"}, {0: "n"})
    assert_matches_eager(
        Chunks(), (torch.randn(3, 4), torch.randn(3, 4)), dynamic_shapes=shapes,
        more_inputs=[((torch.randn(5, 4), torch.randn(5, 4)), {})],
    )
