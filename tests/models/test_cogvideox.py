"""CogVideoX's positional table (diffusers' CogVideoXPatchEmbed, also ConsisID's): diffusers
writes the patches' table into the text slots' zeros through ``.data``, which tracing does not
follow. torch.export's strict capture kept the zeros alone, its re-trace refused the write, and
the model did not export at any size but the config's (torch.onnx the same). The capture patch
builds the same table by concatenation."""

from __future__ import annotations

import diffusers
import pytest
import torch

from helpers import assert_matches_eager
from torch_onnx_fx.capture import library_patches


def _transformer() -> torch.nn.Module:
    torch.manual_seed(0)
    return diffusers.CogVideoXTransformer3DModel(
        num_attention_heads=2, attention_head_dim=8, in_channels=4, out_channels=4, time_embed_dim=2, text_embed_dim=8,
        num_layers=1, sample_width=8, sample_height=8, sample_frames=8, patch_size=2, patch_size_t=None,
        temporal_compression_ratio=4, max_text_seq_length=8,
    ).eval()


@pytest.mark.parametrize("height, width, frames", [(8, 8, 8), (16, 8, 1), (8, 12, 13)])
def test_the_table_is_diffusers_in_eager_mode(height, width, frames):
    embed = _transformer().patch_embed
    expected = embed._get_positional_embeddings(height, width, frames)
    with library_patches.applied() as names:
        assert "diffusers.models.embeddings.CogVideoXPatchEmbed._get_positional_embeddings" in names
        patched = embed._get_positional_embeddings(height, width, frames)
    assert patched.dtype == expected.dtype
    torch.testing.assert_close(patched, expected, rtol=0, atol=0)


def test_cogvideox_exports_at_a_size_other_than_its_config():
    # One frame where the config says 8: the forward builds the table for the call's size.
    def inputs(batch):
        generator = torch.Generator().manual_seed(batch)
        return (torch.randn(batch, 1, 4, 8, 8, generator=generator), torch.randn(batch, 8, 8, generator=generator),
                torch.tensor([10, 500, 900][:batch]))

    model = _transformer()
    assert_matches_eager(
        lambda hidden, text, step: model(hidden, text, step, return_dict=False)[0], inputs(2), rtol=1e-4, atol=1e-5,
        dynamic_shapes=({0: "batch"}, {0: "batch"}, {0: "batch"}), more_inputs=[(inputs(3), {})],
    )
