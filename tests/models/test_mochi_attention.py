"""diffusers' Mochi attends sample by sample over the image tokens and the prompt tokens its mask
keeps (gathered with ``nonzero()``), then pads each result back to the full length: a Python loop
over the batch, which made the batch a constant (torch.onnx fails the same way). The capture patch
attends for the whole batch at once with the dropped prompt tokens masked out, and moves each
sample's kept prompt rows to the front as the padding left them."""

from __future__ import annotations

import pytest
import torch
from diffusers.models.attention_processor import MochiAttention, MochiAttnProcessor2_0

from helpers import assert_matches_eager
from torch_onnx_fx.capture import library_patches

_IMAGE, _PROMPT = 6, 5


def _attention() -> MochiAttention:
    torch.manual_seed(0)
    return MochiAttention(query_dim=16, added_kv_proj_dim=12, processor=MochiAttnProcessor2_0(), heads=2, dim_head=8).eval()


def _inputs(batch: int, mask: torch.Tensor) -> tuple[torch.Tensor, ...]:
    generator = torch.Generator().manual_seed(batch)
    angles = torch.randn(_IMAGE, 2, 4, generator=generator)
    return (
        torch.randn(batch, _IMAGE, 16, generator=generator),
        torch.randn(batch, _PROMPT, 12, generator=generator),
        mask,
        (angles.cos(), angles.sin()),
    )


_MASKS = {
    "all kept": torch.ones(3, _PROMPT, dtype=torch.bool),
    "padded at the end": torch.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1], [1, 0, 0, 0, 0]], dtype=torch.bool),
    "scattered, one sample with none": torch.tensor([[0, 1, 0, 1, 1], [0, 0, 0, 0, 0], [1, 0, 1, 0, 1]], dtype=torch.bool),
}


class _Call(torch.nn.Module):
    """The attention called as MochiTransformerBlock calls it."""

    def __init__(self):
        super().__init__()
        self.attn = _attention()

    def forward(self, hidden_states, encoder_hidden_states, attention_mask, cos, sin):
        return self.attn(hidden_states, encoder_hidden_states, attention_mask, image_rotary_emb=(cos, sin))


@pytest.mark.parametrize("mask", sorted(_MASKS))
def test_patched_attention_is_diffusers_in_eager_mode(mask):
    attention = _attention()
    hidden, prompt, kept, rotary = _inputs(3, _MASKS[mask])
    expected = attention(hidden, prompt, kept, image_rotary_emb=rotary)
    with library_patches.applied() as names:
        assert "diffusers.models.attention_processor.MochiAttnProcessor2_0.__call__" in names
        patched = attention(hidden, prompt, kept, image_rotary_emb=rotary)
    # The whole batch's attention sums in another order than one sample's: rounding apart.
    torch.testing.assert_close(patched, expected, rtol=1e-5, atol=1e-6)


def test_nan_in_dropped_prompt_tokens_stays_out():
    # diffusers gathers the kept tokens only: what the dropped ones hold never reaches the result.
    attention = _attention()
    hidden, prompt, _, rotary = _inputs(3, None)
    kept = _MASKS["scattered, one sample with none"]
    prompt = torch.where(kept[:, :, None], prompt, torch.tensor(float("nan")))
    expected = attention(hidden, prompt, kept, image_rotary_emb=rotary)
    with library_patches.applied():
        patched = attention(hidden, prompt, kept, image_rotary_emb=rotary)
    assert not expected[0].isnan().any()
    torch.testing.assert_close(patched, expected, rtol=1e-5, atol=1e-6, equal_nan=True)


def test_mochi_attention_exports_with_a_dynamic_batch():
    hidden, prompt, _, (cos, sin) = _inputs(2, None)
    batched = {0: "batch"}
    two = (hidden, prompt, _MASKS["scattered, one sample with none"][:2], cos, sin)
    hidden, prompt, _, _ = _inputs(3, None)
    three = (hidden, prompt, _MASKS["padded at the end"], cos, sin)
    assert_matches_eager(
        _Call(), two, dynamic_shapes=(batched, batched, batched, None, None), more_inputs=[(three, {})],
        rtol=1e-5, atol=1e-5,
    )
