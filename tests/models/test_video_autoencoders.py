"""diffusers' video autoencoders split work to spare GPU memory, deciding on the input's size:
CogVideoX convolves inputs above 2 GB in parts along time, Mochi normalizes its frames 8 at a
time. torch.export stopped at both (a float division of the size it failed to write as an
assert; a guard on the batch), and torch.onnx the same. The capture patches compute the whole
convolution and normalization: eager's numbers bit for bit below the split, at any batch."""

from __future__ import annotations

import pytest
import torch
from diffusers.models.autoencoders.autoencoder_kl_cogvideox import CogVideoXSafeConv3d
from diffusers.models.autoencoders.autoencoder_kl_mochi import MochiChunkedGroupNorm3D

from helpers import assert_matches_eager
from torch_onnx_fx.capture import library_patches


def _layers() -> dict[str, torch.nn.Module]:
    torch.manual_seed(0)
    return {
        "cogvideox_conv": CogVideoXSafeConv3d(4, 6, kernel_size=3).eval(),
        "mochi_norm": MochiChunkedGroupNorm3D(num_channels=8, num_groups=2).eval(),
    }


def _video(batch: int, channels: int, frames: int) -> torch.Tensor:
    return torch.randn(batch, channels, frames, 5, 6, generator=torch.Generator().manual_seed(batch * 100 + frames)) * 3 + 1


_CHANNELS = {"cogvideox_conv": 4, "mochi_norm": 8}


@pytest.mark.parametrize("name", sorted(_CHANNELS))
@pytest.mark.parametrize("batch, frames", [(1, 3), (3, 5), (2, 9)])
def test_patched_layers_are_diffusers_in_eager_mode(name, batch, frames):
    layer = _layers()[name]
    x = _video(batch, _CHANNELS[name], frames)
    expected = layer(x)
    with library_patches.applied() as names:
        assert any(n.endswith(type(layer).__name__ + ".forward") for n in names)
        patched = layer(x)
    torch.testing.assert_close(patched, expected, rtol=0, atol=0)


@pytest.mark.parametrize("name", sorted(_CHANNELS))
def test_patched_layers_export_with_a_dynamic_batch(name):
    layer = _layers()[name]
    channels = _CHANNELS[name]
    assert_matches_eager(
        layer, (_video(2, channels, 5),), rtol=1e-5, atol=1e-5, dynamic_shapes=({0: "batch"},),
        more_inputs=[((_video(3, channels, 5),), {}), ((_video(9, channels, 5),), {})],
    )
