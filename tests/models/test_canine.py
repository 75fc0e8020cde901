"""CANINE's character encoder attends block by block in a Python loop over the sequence's blocks,
and max-pools its mask with a pooling module built in forward: either fixes the length at capture
(torch.export reports the conflict; both exporters failed with a dynamic sequence). Replaced during
capture by one attention with other blocks' keys at -inf and a windowed maximum."""

from __future__ import annotations

import pytest
import torch

from helpers import assert_matches_eager, assert_patch_keeps_eager

transformers = pytest.importorskip("transformers")


def _model():
    config = transformers.CanineConfig(
        hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=37,
        local_transformer_stride=8, downsampling_rate=4, num_hash_buckets=64, num_hash_functions=2,
    )
    torch.manual_seed(0)
    return transformers.CanineModel(config).eval()


def _inputs(batch: int, length: int, padded: int = 0) -> dict[str, torch.Tensor]:
    ids = torch.randint(0, 1000, (batch, length), generator=torch.Generator().manual_seed(length))
    mask = torch.ones_like(ids)
    if padded:
        # A whole block of padding at the end of the last row: its queries attend to nothing real.
        mask[-1, length - padded:] = 0
    return {"input_ids": ids, "attention_mask": mask}


class _Outputs(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.model = _model()

    def forward(self, input_ids, attention_mask):
        out = self.model(input_ids=input_ids, attention_mask=attention_mask)
        return out.last_hidden_state, out.pooler_output


@pytest.mark.parametrize("patched", ["CanineAttention.forward", "CanineModel._downsample_attention_mask"])
def test_replacements_equal_the_originals_in_eager(patched):
    model = _Outputs()
    # Lengths under one block, exactly two blocks, and a partial last block, with padding.
    for inputs in (_inputs(1, 5), _inputs(2, 16, padded=8), _inputs(2, 21, padded=11)):
        assert_patch_keeps_eager(lambda **kw: model(**kw), inputs, patched)


def test_canine_exports_with_a_dynamic_sequence_and_matches_eager():
    assert_matches_eager(
        _Outputs(), (), _inputs(2, 13),
        dynamic_shapes={name: {0: "batch", 1: "sequence"} for name in ("input_ids", "attention_mask")},
        more_inputs=[((), _inputs(3, 21, padded=11)), ((), _inputs(1, 40)), ((), _inputs(2, 8, padded=3))],
    )
