"""diffusers' OmniGen picks its rotary scaling factors (long or short) by a Python ``if`` on the
largest position id: a value of the data, where tracing stops (torch.onnx fails the same way). The
capture patch chooses in the graph, so one export takes either branch as the positions say."""

from __future__ import annotations

import pytest
import torch
from diffusers.models.transformers.transformer_omnigen import OmniGenSuScaledRotaryEmbedding

from helpers import assert_matches_eager
from torch_onnx_fx.capture import library_patches


def _rotary() -> OmniGenSuScaledRotaryEmbedding:
    factors = {"long_factor": [1.5, 3.0, 0.5], "short_factor": [1.0, 2.0, 4.0]}
    return OmniGenSuScaledRotaryEmbedding(6, max_position_embeddings=64, original_max_position_embeddings=8, rope_scaling=factors)


def _positions(batch: int, length: int, start: int) -> torch.Tensor:
    return (torch.arange(length) + start).expand(batch, length)


@pytest.mark.parametrize("start", [0, 5])  # largest id 4 (short factors), 9 (long)
def test_patched_rotary_is_diffusers_in_eager_mode(start):
    rotary = _rotary()
    hidden, positions = torch.randn(2, 5, 6), _positions(2, 5, start)
    expected = rotary(hidden, positions)
    with library_patches.applied() as names:
        assert "diffusers.models.transformers.transformer_omnigen.OmniGenSuScaledRotaryEmbedding.forward" in names
        patched = rotary(hidden, positions)
    torch.testing.assert_close(patched, expected, rtol=0, atol=0)


def test_one_export_takes_the_branch_the_positions_say():
    shapes = ({0: "batch", 1: "length"}, {0: "batch", 1: "length"})
    assert_matches_eager(
        _rotary(), (torch.randn(2, 5, 6), _positions(2, 5, 0)), dynamic_shapes=shapes,
        more_inputs=[((torch.randn(3, 7, 6), _positions(3, 7, 20)), {})], rtol=1e-6, atol=1e-6,
    )
