"""capture/packed_sequences.py and ops/recurrent.py: pack_padded_sequence → LSTM/GRU/RNN →
pad_packed_sequence exports as ONNX's recurrent operators with sequence_lens.

Before, torch.export stopped at the layer (it reads the packed batch sizes as a size), in both
exporters; the legacy TorchScript exporter exported these models.
"""

from __future__ import annotations

import pytest
import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

import torch_onnx_fx
from helpers import assert_matches_eager
from torch_onnx_fx.capture import library_patches

_LAYERS = {"lstm": nn.LSTM, "gru": nn.GRU, "rnn_tanh": nn.RNN, "rnn_relu": nn.RNN}


class _Tagger(nn.Module):
    """A sequence tagger: variable-length batch in, padded per-step outputs and final state out."""

    def __init__(self, kind: str, batch_first: bool, enforce_sorted: bool, extra_length: int | None, padding_value: float):
        super().__init__()
        options = {"nonlinearity": "relu"} if kind == "rnn_relu" else {}
        self.rnn = _LAYERS[kind](5, 7, num_layers=2, bidirectional=True, batch_first=batch_first, **options)
        self.kind, self.batch_first, self.enforce_sorted = kind, batch_first, enforce_sorted
        self.extra_length, self.padding_value = extra_length, padding_value

    def forward(self, x, lengths, h0):
        packed = pack_padded_sequence(x, lengths, batch_first=self.batch_first, enforce_sorted=self.enforce_sorted)
        state = (h0, h0 * 0.5) if self.kind == "lstm" else h0
        output, final = self.rnn(packed, state)
        total = None if self.extra_length is None else x.shape[1 if self.batch_first else 0] + self.extra_length
        padded, lengths_out = pad_packed_sequence(output, batch_first=self.batch_first, padding_value=self.padding_value, total_length=total)
        return padded, final, lengths_out


def _inputs(batch: int, steps: int, lengths: list[int], batch_first: bool) -> tuple[torch.Tensor, ...]:
    x = torch.randn(batch, steps, 5) if batch_first else torch.randn(steps, batch, 5)
    return x, torch.tensor(lengths), torch.randn(4, batch, 7)


@pytest.mark.parametrize("kind", sorted(_LAYERS))
@pytest.mark.parametrize("batch_first,enforce_sorted,extra_length,padding_value", [
    (False, True, None, 0.0),  # output as long as the longest sequence (data-dependent)
    (True, False, 0, -1.5),  # total_length = the input's, batch reordered by length and back
    (True, True, 2, 3.0),  # total_length past the input's
])
def test_packed_recurrence_matches_eager_at_other_sizes_and_lengths(kind, batch_first, enforce_sorted, extra_length, padding_value):
    torch.manual_seed(0)
    model = _Tagger(kind, batch_first, enforce_sorted, extra_length, padding_value).eval()
    order = (lambda values: values) if enforce_sorted else (lambda values: values[::-1])
    time_dim = 1 if batch_first else 0
    dynamic = ({time_dim: "time", 1 - time_dim: "batch"}, {0: "batch"}, {1: "batch"})
    program = assert_matches_eager(
        model, _inputs(3, 6, order([6, 4, 2]), batch_first), dynamic_shapes=dynamic,
        more_inputs=[(_inputs(4, 9, order([7, 5, 5, 1]), batch_first), {}), (_inputs(2, 5, order([3, 2]), batch_first), {})],
    )
    op_types = {node.op_type for node in program.model.graph}
    assert {"LSTM" if kind == "lstm" else "GRU" if kind == "gru" else "RNN"} <= op_types, op_types


class _Classifier(nn.Module):
    """Reads only the final state; the lengths arrive as a list, and two layers pass the packed
    sequence between them."""

    def __init__(self):
        super().__init__()
        self.first = nn.GRU(5, 6)
        self.second = nn.LSTM(6, 4, bias=False)
        self.head = nn.Linear(4, 3)

    def forward(self, x):
        packed = pack_padded_sequence(x, [5, 3, 1])
        hidden, _ = self.first(packed)
        _, (h, _) = self.second(hidden)
        return self.head(h[-1])


def test_final_state_through_two_packed_layers():
    torch.manual_seed(0)
    assert_matches_eager(_Classifier().eval(), (torch.randn(5, 3, 5),))


def test_new_weights_apply_to_the_reordered_gates():
    torch.manual_seed(0)
    model = _Tagger("lstm", True, False, 0, 0.0).eval()
    args = _inputs(3, 6, [2, 6, 4], True)
    program = torch_onnx_fx.export(model, args, dynamo=True, verbose=False)
    other = _Tagger("lstm", True, False, 0, 0.0).eval()
    program.apply_weights(other.state_dict())
    for ours, eager in zip(program(*args), (o for part in other(*args) for o in (part if isinstance(part, tuple) else (part,)))):
        torch.testing.assert_close(ours, eager, rtol=1e-4, atol=1e-5)


class _ReadsPackedData(nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = nn.GRU(5, 6)

    def forward(self, x, lengths):
        packed = pack_padded_sequence(x, lengths, enforce_sorted=False)
        output, _ = self.rnn(packed)
        padded, _ = pad_packed_sequence(output)
        # A mean over the valid steps, by the packed data's size, and the packed data itself.
        return padded.sum(0) / packed.data.shape[0], output.data * 2, packed.batch_sizes


def test_packed_data_read_by_the_model_is_pytorchs_layout():
    # It was the padded batch: a mean over it divided by the padded size, 13 / 6 too large.
    torch.manual_seed(0)
    assert_matches_eager(
        _ReadsPackedData().eval(), (torch.randn(6, 3, 5), torch.tensor([4, 6, 3])),
        dynamic_shapes=({0: "time", 1: "batch"}, {0: "batch"}), more_inputs=[((torch.randn(7, 2, 5), torch.tensor([2, 7])), {})],
    )


class _ComputesOnPackedData(nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = nn.GRU(5, 6)

    def forward(self, x, lengths):
        packed = pack_padded_sequence(x, lengths)
        scaled = nn.utils.rnn.PackedSequence(packed.data * 2, packed.batch_sizes)
        return self.rnn(scaled)[1]


class _TrainingDropout(nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = nn.LSTM(5, 6, num_layers=2, dropout=0.3)

    def forward(self, x, lengths):
        return self.rnn(pack_padded_sequence(x, lengths))[1][0]


@pytest.mark.parametrize("model,reason", [
    (_ComputesOnPackedData(), "data was replaced after pack_padded_sequence"),
    (_TrainingDropout().train(), "training mode with dropout=0.3"),
])
def test_packed_forms_the_export_cannot_follow_are_refused_with_the_reason(model, reason):
    with pytest.raises(torch_onnx_fx.CaptureError, match=reason):
        torch_onnx_fx.export(model, (torch.randn(4, 2, 5), torch.tensor([4, 2])), dynamo=True, verbose=False)


class _Projected(nn.Module):
    def __init__(self, **options):
        super().__init__()
        self.rnn = nn.LSTM(5, 6, **options)

    def forward(self, x, lengths):
        output, _ = self.rnn(pack_padded_sequence(x, lengths))
        return pad_packed_sequence(output)[0]


@pytest.mark.parametrize("options,dtype,reason", [
    ({"proj_size": 3}, torch.float32, "projections"),
    ({}, torch.float64, "float32 only"),
])
def test_forms_without_an_onnx_kernel_are_refused(options, dtype, reason):
    model = _Projected(**options).to(dtype).eval()
    with pytest.raises(torch_onnx_fx.TranslationError, match=reason):
        torch_onnx_fx.export(model, (torch.randn(4, 2, 5, dtype=dtype), torch.tensor([4, 2])), dynamo=True, verbose=False)


def test_captured_program_computes_in_eager_what_the_model_does():
    # The operators' eager kernels (PyTorch's packed kernels), run through the captured program.
    torch.manual_seed(0)
    model = _Tagger("gru", False, False, None, -2.0).eval()
    args = _inputs(3, 6, [2, 6, 4], False)
    with library_patches.applied():
        captured = torch.export.export(model, args, strict=False)
    targets = {str(node.target) for node in captured.graph.nodes}
    assert "torch_onnx_fx.padded_rnn.default" in targets, targets
    for ours, eager in zip(torch.utils._pytree.tree_leaves(captured.module()(*args)), torch.utils._pytree.tree_leaves(model(*args))):
        torch.testing.assert_close(ours, eager, rtol=0, atol=0)
