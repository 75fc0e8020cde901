"""Longformer: global attention of data-dependent count exports (a capture-time replacement of its
self-attention, torch_onnx_fx.capture.library_patches) and matches eager with and without global tokens.

torch.onnx fails at capture (GuardOnDataDependentSymNode: the count of global tokens sizes a
tensor, and the sliding-window chunking divides sizes through tensors).
"""

from __future__ import annotations

import pytest
import torch

from helpers import assert_matches_eager, assert_patch_keeps_eager

transformers = pytest.importorskip("transformers")


def _model():
    config = transformers.LongformerConfig(
        vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
        attention_window=4, max_position_embeddings=128, pad_token_id=1,
    )
    torch.manual_seed(0)
    return transformers.LongformerModel(config).eval()


def _inputs(batch: int, length: int, global_tokens: list[int], padding: int = 0) -> dict[str, torch.Tensor]:
    ids = torch.randint(3, 100, (batch, length), generator=torch.Generator().manual_seed(length))
    mask = torch.ones(batch, length, dtype=torch.int64)
    if padding:
        mask[-1, -padding:] = 0
    global_mask = torch.zeros(batch, length, dtype=torch.int64)
    for row, count in enumerate(global_tokens):
        global_mask[row, :count] = 1
    return {"input_ids": ids, "attention_mask": mask, "global_attention_mask": global_mask}


_SHAPES = {name: {0: "batch", 1: "sequence"} for name in ("input_ids", "attention_mask", "global_attention_mask")}


def test_self_attention_replacement_equals_the_original_in_eager():
    model = _model()
    # Rows with different global counts (one with none), padding, a length needing window padding.
    for inputs in (_inputs(3, 16, [2, 0, 5], padding=3), _inputs(2, 13, [0, 0]), _inputs(2, 8, [8, 1])):
        assert_patch_keeps_eager(
            lambda **kw: model(**kw).last_hidden_state, inputs, "LongformerSelfAttention.forward", atol=1e-5
        )


@pytest.mark.parametrize("global_tokens", [[2, 1], [0, 0]], ids=["global", "no-global"])
def test_longformer_exports_and_matches_eager(global_tokens):
    # Lengths that are and are not multiples of the window (eager pads those to one).
    assert_matches_eager(
        _model(), (), _inputs(2, 16, global_tokens, padding=2), dynamic_shapes=_SHAPES,
        more_inputs=[((), _inputs(3, 24, [3, 0, 1], padding=5)), ((), _inputs(2, 13, [1, 0]))],
    )


def test_led_encoder_with_global_attention_exports_and_matches_eager():
    config = transformers.LEDConfig(
        vocab_size=100, d_model=32, encoder_layers=2, decoder_layers=1, encoder_attention_heads=4,
        decoder_attention_heads=4, encoder_ffn_dim=64, decoder_ffn_dim=64, attention_window=4,
        max_encoder_position_embeddings=64, max_decoder_position_embeddings=64, use_cache=False,
    )
    torch.manual_seed(0)
    model = transformers.LEDModel(config).eval()

    def inputs(batch, length, target, global_tokens):
        encoder = _inputs(batch, length, global_tokens, padding=2)
        return {**encoder, "decoder_input_ids": torch.randint(3, 100, (batch, target), generator=torch.Generator().manual_seed(target))}

    assert_matches_eager(
        model, (), inputs(2, 16, 5, [1, 0]), dynamic_shapes={**_SHAPES, "decoder_input_ids": {0: "batch", 1: "target"}},
        more_inputs=[((), inputs(3, 13, 4, [2, 0, 3]))],
    )
