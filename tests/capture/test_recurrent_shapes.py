"""capture/recurrent_shapes.py: LSTM and GRU layers keep a dynamic sequence length and batch.

Before, torch.export's shape computation looped over the example's time steps, the dynamic
sequence conflicted, and capture applied the suggested fix: a static length, with a warning.
torch.onnx keeps the sequence dynamic only while the batch is static.
"""

from __future__ import annotations

import warnings

import pytest
import torch

import torch_onnx_fx
from helpers import assert_matches_eager
from torch_onnx_fx.capture import recurrent_shapes


class Recurrent(torch.nn.Module):
    def __init__(self, layer: torch.nn.Module):
        super().__init__()
        self.layer = layer

    def forward(self, x, *state):
        return self.layer(x, *state)


LAYERS = {
    "lstm_2_layers_bidirectional": lambda: torch.nn.LSTM(4, 3, num_layers=2, bidirectional=True, batch_first=True),
    "lstm_sequence_first": lambda: torch.nn.LSTM(4, 3),
    "gru_2_layers_bidirectional": lambda: torch.nn.GRU(4, 3, num_layers=2, bidirectional=True, batch_first=True),
    "gru_sequence_first": lambda: torch.nn.GRU(4, 3, bias=False),
}


def _inputs(layer: torch.nn.Module, batch: int, length: int) -> torch.Tensor:
    return torch.randn(batch, length, 4) if layer.batch_first else torch.randn(length, batch, 4)


@pytest.mark.parametrize("name", sorted(LAYERS))
def test_batch_and_sequence_stay_dynamic(name):
    model = Recurrent(LAYERS[name]()).eval()
    dims = {0: "batch", 1: "sequence"} if model.layer.batch_first else {0: "sequence", 1: "batch"}
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)  # neither a refinement nor a size condition
        program = torch_onnx_fx.export(
            model, (_inputs(model.layer, 2, 5),), dynamic_shapes=(dims,), verbose=False,
        )
    assert [str(d) for d in program.model.graph.inputs[0].shape][:2] == [dims[0], dims[1]]
    assert program.size_conditions == []
    assert_matches_eager(model, (_inputs(model.layer, 2, 5),), program=program,
                         more_inputs=[((_inputs(model.layer, 3, 9),), {}), ((_inputs(model.layer, 1, 1),), {})])


def test_initial_states_follow_the_dynamic_batch():
    model = Recurrent(torch.nn.LSTM(4, 3, num_layers=2, batch_first=True)).eval()

    def call(batch, length):
        return (torch.randn(batch, length, 4), torch.randn(2, batch, 3), torch.randn(2, batch, 3))

    program = torch_onnx_fx.export(
        lambda x, h, c: model.layer(x, (h, c)), call(2, 5),
        dynamic_shapes=({0: "batch", 1: "sequence"}, {1: "batch"}, {1: "batch"}), verbose=False,
    )
    assert_matches_eager(lambda x, h, c: model.layer(x, (h, c)), call(2, 5), program=program, more_inputs=[(call(4, 7), {})])


def test_projections_keep_the_loop_and_say_so():
    # Our translation decomposes projected LSTMs into the time-step loop, which needs a static length.
    model = Recurrent(torch.nn.LSTM(4, 3, proj_size=2, batch_first=True)).eval()
    with pytest.warns(UserWarning, match="suggested fixes"):
        program = torch_onnx_fx.export(
            model, (torch.randn(2, 5, 4),), verbose=False,
            dynamic_shapes=({0: torch.export.Dim("batch"), 1: torch.export.Dim("sequence")},),
        )
    assert_matches_eager(model, (torch.randn(2, 5, 4),), program=program, more_inputs=[((torch.randn(3, 5, 4),), {})])


def test_real_tensors_get_the_real_kernel():
    # Inside the capture context an eager call still computes: no made-up values outside fake mode.
    layer = torch.nn.LSTM(4, 3, bidirectional=True).eval()
    x = torch.randn(5, 2, 4)
    with torch.no_grad():
        expected = layer(x)
        with recurrent_shapes.symbolic_lengths():
            actual = layer(x)
    for a, e in zip(torch.utils._pytree.tree_leaves(actual), torch.utils._pytree.tree_leaves(expected)):
        torch.testing.assert_close(a, e)
    assert torch.ops.aten.lstm.input.py_kernels[torch._C.DispatchKey.CompositeImplicitAutograd].__name__ != "kernel"
