"""diffusers' Chroma embeds a guidance of 0 per sample from ``torch.tensor([0] * batch)``: a Python
list as long as the batch, which made the batch a constant (torch.onnx fails the same way). The
capture patch makes the zeros from the timestep's batch: eager's numbers bit for bit, any batch."""

from __future__ import annotations

import pytest
import torch
from diffusers.models.transformers.transformer_chroma import ChromaCombinedTimestepTextProjEmbeddings

from helpers import assert_matches_eager
from torch_onnx_fx.capture import library_patches


def _embeddings() -> ChromaCombinedTimestepTextProjEmbeddings:
    torch.manual_seed(0)
    return ChromaCombinedTimestepTextProjEmbeddings(num_channels=8, out_dim=5).eval()


@pytest.mark.parametrize("batch", [1, 2, 5])
def test_patched_embeddings_are_diffusers_in_eager_mode(batch):
    layer = _embeddings()
    timestep = torch.rand(batch) * 1000
    expected = layer(timestep)
    with library_patches.applied() as names:
        assert any(n.endswith("ChromaCombinedTimestepTextProjEmbeddings.forward") for n in names)
        patched = layer(timestep)
    torch.testing.assert_close(patched, expected, rtol=0, atol=0)


def test_patched_embeddings_export_with_a_dynamic_batch():
    assert_matches_eager(
        _embeddings(), (torch.rand(2) * 1000,), rtol=1e-5, atol=1e-5, dynamic_shapes=({0: "batch"},),
        more_inputs=[((torch.rand(3) * 1000,), {}), ((torch.rand(7) * 1000,), {})],
    )
