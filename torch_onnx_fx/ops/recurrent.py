"""Recurrent layers over packed sequences: ONNX's LSTM, GRU and RNN with ``sequence_lens``.

A capture runs packed sequences on their padded batch through the operators of
:mod:`torch_onnx_fx.capture.packed_sequences`: ``padded_rnn`` is the layer stack over it, each
sequence stopping at its length, which ONNX's recurrent operators do with ``sequence_lens``
(outputs past a length are zeros, the final state is the last valid step's, the reverse direction
starts at each sequence's own end: the packed semantics). The gates are reordered from PyTorch's
layout (LSTM i, f, g, o; GRU r, z, n) to ONNX's (i, o, f, c; z, r, h) with slices of the
weights, which the optimizer folds into stored weights that ``apply_weights`` still fills.
"""

from __future__ import annotations

from typing import Any, Sequence

import onnx_ir as ir
import torch
from onnxscript import opset18 as op

from torch_onnx_fx.capture.packed_sequences import PACKED_DATA, PADDED_OUTPUT, PADDED_RNN
from torch_onnx_fx.errors import TranslationError
from torch_onnx_fx.ops import _tensors as tx
from torch_onnx_fx.registry import register, wants_context
from torch_onnx_fx.translate.op_context import OpContext

__all__ = ["packed_data", "padded_output", "padded_rnn"]

# PyTorch's gate order -> ONNX's, as indices of PyTorch's chunks.
_GATES = {"LSTM": (0, 3, 1, 2), "GRU": (1, 0, 2), "RNN_TANH": (0,), "RNN_RELU": (0,)}


def _valid_steps(padded: ir.Value, lengths: ir.Value) -> ir.Value:
    """(time, batch): whether each step of each sequence is within its length."""
    steps = op.Squeeze(op.Shape(padded, start=0, end=1))
    positions = op.Range(tx.int64(0), steps, tx.int64(1))
    return op.Less(op.Unsqueeze(positions, tx.ints(1)), op.Unsqueeze(op.Cast(lengths, to=tx.INT64), tx.ints(0)))


@register(PACKED_DATA)
def packed_data(padded: ir.Value, lengths: ir.Value) -> ir.Value:
    """packed_data(Tensor padded, Tensor lengths) -> Tensor

    The valid steps in time-major order: with the lengths longest first, the first batch_sizes[t]
    sequences at each step t, which is PyTorch's packed layout."""
    return op.GatherND(padded, op.Transpose(op.NonZero(_valid_steps(padded, lengths)), perm=[1, 0]))


@register(PADDED_OUTPUT)
def padded_output(data: ir.Value, lengths: ir.Value, padding_value: float) -> ir.Value:
    """padded_output(Tensor data, Tensor lengths, float padding_value) -> Tensor"""
    valid = _valid_steps(data, lengths)
    trailing = tx.rank(data) - 2
    if trailing:
        valid = op.Unsqueeze(valid, tx.ints(*range(2, 2 + trailing)))
    return op.Where(valid, data, op.CastLike(padding_value, data))


def _gates(weight: ir.Value, order: Sequence[int], size: int) -> ir.Value:
    """``weight``'s gate blocks (``size`` rows each) in ONNX's order, with a leading direction axis."""
    if len(order) > 1:
        weight = op.Concat(*(tx.slice_axis(weight, 0, g * size, (g + 1) * size) for g in order), axis=0)
    return op.Unsqueeze(weight, tx.ints(0))


@register(PADDED_RNN)
@wants_context
def padded_rnn(
    mode: str, input: ir.Value, lengths: ir.Value, hx: Sequence[ir.Value], params: Sequence[ir.Value],
    has_biases: bool, num_layers: int, bidirectional: bool, *, ctx: OpContext,
) -> list[ir.Value]:
    """padded_rnn(str mode, Tensor input, Tensor lengths, Tensor[] hx, Tensor[] params, bool has_biases, int num_layers, bool bidirectional) -> Tensor[]"""
    dtype = getattr(ctx.inputs[1], "dtype", None)
    if dtype != torch.float32:
        raise TranslationError(
            f"a {mode} over packed sequences is translated for float32 only (ONNX Runtime's recurrent "
            f"kernels are float32); got {dtype}."
        )
    directions = 2 if bidirectional else 1
    per_direction = 4 if has_biases else 2
    if len(params) != num_layers * directions * per_direction:
        raise TranslationError(f"an LSTM with projections (proj_size) over packed sequences has no ONNX form ({mode}).")
    hidden = int(ctx.inputs[3][0].shape[-1])
    order = _GATES[mode]
    op_type = "LSTM" if mode == "LSTM" else "GRU" if mode == "GRU" else "RNN"
    attributes: dict[str, Any] = {"hidden_size": hidden, "direction": "bidirectional" if bidirectional else "forward"}
    if mode == "GRU":
        # PyTorch applies the reset gate after the hidden product, as ONNX's linear_before_reset.
        attributes["linear_before_reset"] = 1
    elif op_type == "RNN":
        attributes["activations"] = ["Tanh" if mode == "RNN_TANH" else "Relu"] * directions
    sequence_lens = op.Cast(lengths, to=ir.DataType.INT32)
    x = input
    finals: list[list[ir.Value]] = [[] for _ in hx]
    for layer in range(num_layers):
        weights, recurrences, biases = [], [], []
        for direction in range(directions):
            base = (layer * directions + direction) * per_direction
            weights.append(_gates(params[base], order, hidden))
            recurrences.append(_gates(params[base + 1], order, hidden))
            if has_biases:
                biases.append(op.Concat(_gates(params[base + 2], order, hidden), _gates(params[base + 3], order, hidden), axis=1))
        bias = op.Concat(*biases, axis=0) if has_biases else None
        states = [tx.slice_axis(h, 0, layer * directions, (layer + 1) * directions) for h in hx]
        inputs = [x, op.Concat(*weights, axis=0), op.Concat(*recurrences, axis=0), bias, sequence_lens, *states]
        outputs = ctx.op(op_type, inputs, attributes, num_outputs=1 + len(hx))
        # (time, directions, batch, hidden) -> (time, batch, directions * hidden), PyTorch's layout.
        x = op.Reshape(op.Transpose(outputs[0], perm=[0, 2, 1, 3]), tx.ints(0, 0, -1))
        for kept, state in zip(finals, outputs[1:]):
            kept.append(state)
    return [x, *(op.Concat(*states, axis=0) if len(states) > 1 else states[0] for states in finals)]
