"""CPM-Ant builds its attention mask from a Python list of the sequence's length; the capture-time
patch (torch_onnx_fx.capture.library_patches) keeps the length dynamic."""

from __future__ import annotations

import pytest
import torch

from helpers import assert_matches_eager, assert_patch_keeps_eager

transformers = pytest.importorskip("transformers")


def _model():
    config = transformers.CpmAntConfig(
        vocab_size=60, hidden_size=16, num_attention_heads=2, dim_head=8, dim_ff=32, num_hidden_layers=2,
        prompt_types=3, prompt_length=4, segment_types=4,
    )
    torch.manual_seed(0)
    return transformers.CpmAntModel(config).eval()


class Hidden(torch.nn.Module):
    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, input_ids):
        return self.model(input_ids=input_ids, use_cache=False).last_hidden_state


def test_patched_mask_is_the_original():
    model = Hidden(_model())
    for length in (1, 5, 9):
        ids = torch.randint(6, 60, (2, length))
        ids[1, :2] = 0  # left padding: CPM-Ant's pad id 0 shortens the row's length
        assert_patch_keeps_eager(lambda **kw: model(**kw), {"input_ids": ids}, "CpmAntModel._prepare_attention_mask")


def test_cpmant_exports_with_a_dynamic_sequence():
    model = Hidden(_model())
    ids = torch.randint(6, 60, (2, 8))
    more = torch.randint(6, 60, (3, 13))
    more[0, :3] = 0
    assert_matches_eager(
        model, (ids,), dynamic_shapes=({0: "batch", 1: "sequence"},), more_inputs=[((more,), {})], rtol=1e-4, atol=1e-5
    )
