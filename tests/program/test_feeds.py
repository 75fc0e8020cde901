"""program/feeds.py: a call's arguments checked against the graph inputs before ONNX Runtime runs."""

from __future__ import annotations

import numpy as np
import onnx_ir as ir
import pytest
import torch

from torch_onnx_fx.errors import InputMismatchError
from torch_onnx_fx.program.feeds import check_feeds


def _input(name: str, dtype: ir.DataType, dims: list[int | str]) -> ir.Value:
    return ir.Value(name=name, type=ir.TensorType(dtype), shape=ir.Shape(dims))


INPUTS = [_input("x", ir.DataType.FLOAT, ["batch", 3]), _input("n", ir.DataType.INT64, [])]


def test_values_that_fit_pass():
    check_feeds(INPUTS, [torch.zeros(5, 3), torch.tensor(2)])
    check_feeds(INPUTS, [torch.zeros(1, 3), 7])  # a Python int for a rank-0 int64 input


@pytest.mark.parametrize(
    "values, message",
    [
        ([torch.zeros(5, 3, dtype=torch.float64), 1], r"input 0 \('x'\): got a tensor of dtype torch.float64, expected a torch.float32"),
        ([torch.zeros(5, 4), 1], r"input 0 \('x'\): dimension 1 is 4, but the model was exported with a static size 3"),
        ([torch.zeros(5), 1], r"input 0 \('x'\): got a tensor of shape \[5\] \(rank 1\)"),
        ([np.zeros((5, 3), np.float32), 1], r"got a numpy array; the program takes torch tensors"),
        ([torch.zeros(5, 3), 1.5], r"input 1 \('n'\): got the Python float 1.5, expected a torch.int64 tensor of shape \[\]"),
        ([torch.zeros(5, 3), True], r"input 1 \('n'\): got the Python bool True"),
        ([torch.zeros(5, 3), "2"], r"input 1 \('n'\): got str"),
    ],
    ids=["dtype", "static-size", "rank", "numpy", "float-for-int", "bool-for-int", "str"],
)
def test_each_misfit_names_the_input_and_what_was_expected(values, message):
    with pytest.raises(InputMismatchError, match=message):
        check_feeds(INPUTS, values)


def test_complex_tensors_are_checked_as_their_real_pairs():
    graph_input = _input("z", ir.DataType.FLOAT, [4, 2])
    check_feeds([graph_input], [torch.zeros(4, dtype=torch.complex64)])
    with pytest.raises(InputMismatchError, match="complex128"):
        check_feeds([graph_input], [torch.zeros(4, dtype=torch.complex128)])


def test_a_program_call_runs_the_check_before_onnx_runtime():
    import torch_onnx_fx

    program = torch_onnx_fx.export(torch.nn.Linear(3, 2), (torch.randn(4, 3),), verbose=False)
    with pytest.raises(InputMismatchError, match=r"input 0 \('input'\): dimension 0 is 5"):
        program(torch.randn(5, 3))
