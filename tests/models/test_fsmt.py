"""FSMT's decoder padding mask is None when no token is padding (a branch on the data); the
capture-time patch (torch_onnx_fx.capture.library_patches) always returns the mask, which its only
reader applies as a no-op when it is all False."""

from __future__ import annotations

import pytest
import torch

from helpers import assert_matches_eager, assert_patch_keeps_eager

transformers = pytest.importorskip("transformers")


def _model():
    config = transformers.FSMTConfig(
        langs=["en", "de"], src_vocab_size=40, tgt_vocab_size=40, d_model=16, encoder_layers=1, decoder_layers=1,
        encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=32, decoder_ffn_dim=32,
        max_position_embeddings=64, pad_token_id=1, bos_token_id=0, eos_token_id=2, decoder_start_token_id=2,
    )
    torch.manual_seed(0)
    return transformers.FSMTForConditionalGeneration(config).eval()


class Logits(torch.nn.Module):
    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, input_ids, attention_mask):
        return self.model(input_ids=input_ids, attention_mask=attention_mask, use_cache=False).logits


def _inputs(batch, length, padded):
    ids = torch.randint(3, 40, (batch, length), generator=torch.Generator().manual_seed(length))
    mask = torch.ones_like(ids)
    if padded:
        ids[0, -2:] = 1
        mask[0, -2:] = 0
    return {"input_ids": ids, "attention_mask": mask}


def test_patched_padding_mask_is_the_original():
    model = Logits(_model())
    for padded in (False, True):
        assert_patch_keeps_eager(lambda **kw: model(**kw), _inputs(2, 7, padded), "make_padding_mask")


def test_fsmt_exports_with_and_without_padding():
    model = Logits(_model())
    first = _inputs(2, 7, padded=False)
    assert_matches_eager(
        model, (), first, dynamic_shapes={"input_ids": {0: "batch", 1: "sequence"}, "attention_mask": {0: "batch", 1: "sequence"}},
        more_inputs=[((), _inputs(3, 11, padded=True))],
    )
