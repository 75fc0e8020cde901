"""Variable-length batches through recurrent layers: ``pack_padded_sequence`` → LSTM/GRU/RNN →
``pad_packed_sequence``, as operators torch.export can capture.

A ``PackedSequence`` lays out only the valid steps of each sequence, so its size is the sum of
the lengths and its ``batch_sizes`` (the count of sequences still running at each step) are
data; the recurrent layer reads ``batch_sizes[0]`` as a size. torch.export stops there, and the
legacy exporter's answer was ONNX's ``sequence_lens``: the padded batch goes through the
recurrence, and each sequence stops at its length (its final state is the one at its last
valid step, its outputs past it are zeros).

While a capture runs (installed by ``library_patches``), the recurrence runs on the padded batch:

- ``torch.nn.utils.rnn``'s ``_VF._pack_padded_sequence`` makes the packed data in PyTorch's layout
  (``packed_data``; its size is data-dependent, as in eager), which carries the padded,
  time-major batch and the lengths along, and computes ``batch_sizes`` as PyTorch does, sized to
  the longest length;
- ``nn.LSTM``/``nn.GRU``/``nn.RNN.forward`` given such a sequence call ``padded_rnn`` on the
  padded batch: the whole stack of layers, each sequence to its length; its output is packed the
  same way;
- ``_VF._pad_packed_sequence`` puts ``padding_value`` past each length of the carried padded
  output (``padded_output``) and trims to the longest length (or pads to ``total_length``).

Everything else in ``pack_padded_sequence``/``pad_packed_sequence`` runs as written (sorting by
length with ``enforce_sorted=False`` and restoring the order, the ``total_length`` check), so a
user's import of those functions by name is covered, and code that reads ``packed.data`` reads
PyTorch's packed layout (the translation gathers it from the padded batch; unread, it is
dropped). Data replaced after packing (``packed.to(...)``, a new ``PackedSequence`` over
computed data) has no padded form at hand and is refused with the reason.

Each operator's eager kernel computes the packed form with PyTorch's own kernels, so the captured
program computes in eager what the model does.
"""

from __future__ import annotations

import functools
from typing import Any, Callable

import torch
from torch.nn.utils.rnn import PackedSequence

__all__ = ["PACKED_DATA", "PADDED_OUTPUT", "PADDED_RNN", "ops", "padded_forward", "padded_vf"]

PACKED_DATA = "torch_onnx_fx::packed_data"
PADDED_RNN = "torch_onnx_fx::padded_rnn"
PADDED_OUTPUT = "torch_onnx_fx::padded_output"

# The attribute by which packed data made here carries (padded batch, lengths): the lengths
# sorted as the batch is, longest first when pack_padded_sequence sorted it. Batch sizes made
# here carry it as True.
_PADDED = "_torch_onnx_fx_padded_batch"

# PyTorch's kernels, resolved before any capture replaces them.
_PACK = torch._C._VariableFunctions._pack_padded_sequence
_PAD = torch._C._VariableFunctions._pad_packed_sequence
_RECURRENCES: dict[str, Callable[..., Any]] = {
    "LSTM": torch._C._VariableFunctions.lstm,
    "GRU": torch._C._VariableFunctions.gru,
    "RNN_TANH": torch._C._VariableFunctions.rnn_tanh,
    "RNN_RELU": torch._C._VariableFunctions.rnn_relu,
}


def _packed_data(padded: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """The data of the packed sequence of ``padded`` (time, batch, ...) and ``lengths`` (longest
    first): each step's running sequences, step after step, as PyTorch packs them."""
    return _PACK(padded, lengths.cpu(), False)[0]


def _packed_data_fake(padded: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    # As many rows as the lengths add up to: a size known only from the data.
    return padded.new_empty((torch.library.get_ctx().new_dynamic_size(), *padded.shape[2:]))


def _padded_rnn(
    mode: str, input: torch.Tensor, lengths: torch.Tensor, hx: list[torch.Tensor], params: list[torch.Tensor],
    has_biases: bool, num_layers: int, bidirectional: bool,
) -> list[torch.Tensor]:
    """The recurrence ``mode`` (an ``nn.RNNBase.mode``) over ``input`` (time, batch, features),
    each sequence to its length: the output padded with zeros past each length, and the final
    states (for ``LSTM``, h and c) at each sequence's last valid step. ``lengths`` must be sorted
    longest first, as ``pack_padded_sequence`` leaves them."""
    data, batch_sizes = _PACK(input, lengths.cpu(), False)
    state = hx if mode == "LSTM" else hx[0]
    output, *states = _RECURRENCES[mode](data, batch_sizes, state, params, has_biases, num_layers, 0.0, False, bidirectional)
    padded, _ = _PAD(output, batch_sizes, False, 0.0, input.shape[0])
    return [padded, *states]


def _padded_rnn_fake(
    mode: str, input: torch.Tensor, lengths: torch.Tensor, hx: list[torch.Tensor], params: list[torch.Tensor],
    has_biases: bool, num_layers: int, bidirectional: bool,
) -> list[torch.Tensor]:
    directions = 2 if bidirectional else 1
    output = input.new_empty((input.shape[0], input.shape[1], directions * hx[0].shape[-1]))
    return [output, *(torch.empty_like(h) for h in hx)]


def _padded_output(data: torch.Tensor, lengths: torch.Tensor, padding_value: float) -> torch.Tensor:
    """``data`` (time, batch, ...) with ``padding_value`` past each sequence's length."""
    valid = torch.arange(data.shape[0], device=data.device)[:, None] < lengths.to(data.device)[None, :]
    return torch.where(valid.reshape(*valid.shape, *([1] * (data.dim() - 2))), data, padding_value)


def _padded_output_fake(data: torch.Tensor, lengths: torch.Tensor, padding_value: float) -> torch.Tensor:
    return torch.empty_like(data)


@functools.cache
def ops() -> Any:
    """Define the operators once per process, when a capture first packs a sequence: an export
    without packed sequences never defines them."""
    for name, kernel, fake in (
        (PACKED_DATA, _packed_data, _packed_data_fake),
        (PADDED_RNN, _padded_rnn, _padded_rnn_fake),
        (PADDED_OUTPUT, _padded_output, _padded_output_fake),
    ):
        torch.library.custom_op(name, kernel, mutates_args=()).register_fake(fake)
    return torch.ops.torch_onnx_fx


def _packed(padded: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """The packed data of ``padded``, which carries the padded batch and its lengths for the
    layers and the unpacking here; code that reads the data itself gets PyTorch's layout."""
    data = ops().packed_data(padded, lengths)
    setattr(data, _PADDED, (padded, lengths))
    return data


def _padded_of(data: torch.Tensor, batch_sizes: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor] | None:
    """The padded batch and lengths ``data`` carries; None for data no capture packed here. Data
    changed after packing (``packed.to(...)``, a new ``PackedSequence`` over computed data) is
    refused: its padded form is not at hand."""
    carried = getattr(data, _PADDED, None)
    if carried is None and getattr(batch_sizes, _PADDED, False):
        raise NotImplementedError(
            "torch_onnx_fx exports a packed sequence as its padded batch with each sequence's length, "
            "and this one's data was replaced after pack_padded_sequence (a new PackedSequence over "
            "computed data, or packed.to(...)). Compute on the padded tensor instead: "
            "pad_packed_sequence, then pack_padded_sequence again."
        )
    return carried


class _PaddedVF:
    """``torch._VF`` as ``torch.nn.utils.rnn`` reads it during a capture: packing keeps the batch
    padded, unpacking masks it; everything else is torch's."""

    def __init__(self, vf: Any) -> None:
        self._vf = vf

    def __getattr__(self, name: str) -> Any:
        return getattr(self._vf, name)

    def _pack_padded_sequence(self, input: torch.Tensor, lengths: torch.Tensor, batch_first: bool) -> tuple[torch.Tensor, torch.Tensor]:
        steps = input.shape[1] if batch_first else input.shape[0]
        lengths = lengths.to(torch.int64)
        # batch_sizes as PyTorch makes them: how many sequences run at each step, up to the
        # longest (which pad_packed_sequence reads as the padded length).
        running = (lengths[None, :] > torch.arange(steps)[:, None]).sum(1)
        # The longest length as the padded length less a count of at least zero: the shape
        # checks on it (pad_packed_sequence's total_length against it) then decide from that
        # count's range, where a data-dependent length compared with the input's would not.
        shortfall = (steps - lengths.max()).item()
        torch._check(shortfall >= 0)
        padded = input.transpose(0, 1) if batch_first else input
        batch_sizes = running.narrow(0, 0, steps - shortfall)
        setattr(batch_sizes, _PADDED, True)
        return _packed(padded, lengths), batch_sizes

    def _pad_packed_sequence(
        self, data: torch.Tensor, batch_sizes: torch.Tensor, batch_first: bool, padding_value: float, total_length: Any,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        carried = _padded_of(data, batch_sizes)
        if carried is None:
            return self._vf._pad_packed_sequence(data, batch_sizes, batch_first, padding_value, total_length)
        data, lengths = carried
        padded = ops().padded_output(data, lengths, float(padding_value))
        steps = data.shape[0]
        from torch.fx.experimental.symbolic_shapes import guard_or_false

        if guard_or_false(total_length == batch_sizes.shape[0]):
            # No total_length: as long as the longest sequence.
            padded = padded[:total_length]
        elif not guard_or_false(total_length == steps):
            # A total_length past the padded input's. (One between the longest length and the
            # input's length, a constant, stops the capture earlier: pad_packed_sequence's own
            # check against the longest length cannot be decided for it.)
            extra = [0, 0] * (data.dim() - 1) + [0, total_length - steps]
            padded = torch.nn.functional.pad(padded, extra, value=float(padding_value))
        return (padded.transpose(0, 1) if batch_first else padded), lengths


def padded_vf(original: Any) -> Any:
    """The ``_VF`` that ``torch.nn.utils.rnn`` reads while a capture runs."""
    return _PaddedVF(original)


def padded_forward(original: Callable[..., Any]) -> Callable[..., Any]:
    """``nn.LSTM``/``nn.GRU``/``nn.RNN.forward`` that run a sequence packed during the capture on
    its padded batch (any other input goes to ``original``)."""

    def forward(self: torch.nn.RNNBase, input: Any, hx: Any = None) -> Any:
        carried = _padded_of(input.data, input.batch_sizes) if isinstance(input, PackedSequence) else None
        if carried is None:
            return original(self, input, hx)
        if self.training and self.dropout > 0 and self.num_layers > 1:
            raise NotImplementedError(
                f"{type(self).__name__} in training mode with dropout={self.dropout} between its layers, over a "
                "packed sequence: the export has no random dropout for it. Export the model in eval() mode."
            )
        # As RNNBase.forward: the flat list must hold the tensors the capture put in place of
        # the parameters, or they would be captured as constants apply_weights cannot reach.
        self._update_flat_weights()
        _, batch_sizes, sorted_indices, unsorted_indices = input
        data, lengths = carried
        directions = 2 if self.bidirectional else 1
        hidden = self.proj_size if getattr(self, "proj_size", 0) > 0 else self.hidden_size
        if hx is None:
            made = {"dtype": data.dtype, "device": data.device}
            states = [torch.zeros((self.num_layers * directions, data.shape[1], hidden), **made)]
            if self.mode == "LSTM":
                states.append(torch.zeros((self.num_layers * directions, data.shape[1], self.hidden_size), **made))
        else:
            # Each sequence's initial state follows it to its sorted place, as in RNNBase.
            hx = self.permute_hidden(hx, sorted_indices)
            states = list(hx) if self.mode == "LSTM" else [hx]
        output, *final = ops().padded_rnn(
            self.mode, data, lengths, states, self._flat_weights, self.bias, self.num_layers, self.bidirectional,
        )
        result = PackedSequence(_packed(output, lengths), batch_sizes, sorted_indices, unsorted_indices)
        return result, self.permute_hidden(tuple(final) if self.mode == "LSTM" else final[0], unsorted_indices)

    return forward
