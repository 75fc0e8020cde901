"""The decompose stage re-traces what only a re-trace removes."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import torch_onnx_fx
from helpers import assert_matches_eager
from torch_onnx_fx.errors import DecompositionError


class RowScaled(nn.Module):
    """``torch.vmap`` in forward, as transformers builds attention masks (T5Gemma 2)."""

    def forward(self, x, bias):
        return torch.vmap(lambda row: row * row.sum() + bias)(x)


def test_vmap_in_forward_is_retraced_into_aten_ops():
    # Captured, the graph holds pre-dispatch transform calls (_vmap_increment_nesting,
    # _add_batch_dim...) with no ONNX translation; the re-trace runs them.
    assert_matches_eager(
        RowScaled(), (torch.randn(3, 4), torch.randn(4)), dynamic_shapes=({0: "rows"}, None),
        more_inputs=[((torch.randn(5, 4), torch.randn(4)), {})],
    )


class _WrittenThroughData(torch.nn.Module):
    def forward(self, x):
        rows = torch.arange(4.0).unsqueeze(1).expand(4, 3) * 0.5
        table = rows.new_zeros(1, 6, 3)
        table.data[:, 2:].copy_(rows)
        return x + table


def test_a_write_through_data_is_refused_not_dropped():
    """Tracing does not follow ``.data``: torch.export's strict capture reads the zeros and writes
    into a lifted constant of their own (its program is 1.5 off), which the re-trace then refuses.
    That refusal must stand: making the constant writable exports the wrong program."""
    x = torch.randn(2, 6, 3)
    with pytest.raises(DecompositionError, match="lifted_tensor_0 is mutated"):
        torch_onnx_fx.export(_WrittenThroughData(), (x,), verbose=False)
