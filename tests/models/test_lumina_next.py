"""diffusers' Lumina-Next: its patch embedding returns the image size as a Python list with one
entry per sample, which made the batch a constant (torch.onnx fails the same way). The capture
patch returns one entry, which is all LuminaNextDiT2DModel reads."""

from __future__ import annotations

import pytest
import torch
from diffusers.models.embeddings import LuminaPatchEmbed, get_2d_rotary_pos_embed_lumina
from diffusers.models.transformers.lumina_nextdit2d import LuminaNextDiT2DModel

from helpers import assert_matches_eager
from torch_onnx_fx.capture import library_patches


@pytest.mark.parametrize("batch", [1, 3])
def test_patched_embedding_is_diffusers_in_eager_mode(batch):
    torch.manual_seed(0)
    layer = LuminaPatchEmbed(patch_size=2, in_channels=4, embed_dim=8).eval()
    x, rope = torch.randn(batch, 4, 6, 10), get_2d_rotary_pos_embed_lumina(8, 8, 8)
    tokens, mask, sizes, rotary = layer(x, rope)
    with library_patches.applied() as names:
        assert "diffusers.models.embeddings.LuminaPatchEmbed.forward" in names
        patched = layer(x, rope)
    for expected, actual in zip((tokens, mask, rotary), (patched[0], patched[1], patched[3])):
        torch.testing.assert_close(actual, expected, rtol=0, atol=0)
    assert patched[2] == sizes[:1] == [(6, 10)]


def _inputs(batch: int) -> dict[str, torch.Tensor]:
    generator = torch.Generator().manual_seed(batch)
    return {
        "hidden_states": torch.randn(batch, 4, 16, 16, generator=generator),
        "encoder_hidden_states": torch.randn(batch, 16, 32, generator=generator),
        "timestep": torch.linspace(0.001, 0.999, batch),
        "encoder_mask": torch.ones(batch, 16, dtype=torch.int64),
        "image_rotary_emb": get_2d_rotary_pos_embed_lumina(8, 8, 8),
        "cross_attention_kwargs": {},
        "return_dict": False,
    }


def test_lumina_next_exports_with_a_dynamic_batch():
    torch.manual_seed(0)
    model = LuminaNextDiT2DModel(
        sample_size=16, patch_size=2, in_channels=4, hidden_size=24, num_layers=2, num_attention_heads=3,
        num_kv_heads=1, multiple_of=16, ffn_dim_multiplier=None, norm_eps=1e-5, learn_sigma=False, qk_norm=True,
        cross_attention_dim=32, scaling_factor=1.0,
    ).eval()
    batched = {0: "batch"}
    shapes = {"hidden_states": batched, "encoder_hidden_states": batched, "timestep": batched, "encoder_mask": batched,
              "image_rotary_emb": None, "cross_attention_kwargs": {}, "return_dict": None}
    assert_matches_eager(model, (), _inputs(2), dynamic_shapes=shapes, more_inputs=[((), _inputs(3))], rtol=1e-4, atol=1e-5)
