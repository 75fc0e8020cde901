"""The decompose stage re-traces what only a re-trace removes."""

from __future__ import annotations

import torch
from torch import nn

from helpers import assert_matches_eager


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
