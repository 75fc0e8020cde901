"""diffusers' layers written for capture: the same numbers, without what torch.export cannot trace.

CogVideoX's patch embedding writes its positional table through ``.data``; its video
autoencoder convolves inputs above 2 GB in parts, and Mochi's normalizes its frames 8 at a time,
both to spare GPU memory and both deciding on the input's size. Chroma embeds a guidance of zeros
made from a Python list as long as the batch, and Lumina-Next's patch embedding returns the image
size once per sample in one: both fix the batch. Each function takes the
original and returns its replacement; :mod:`torch_onnx_fx.capture.library_patches` installs them
while a capture runs, only when diffusers is already imported (``tests/models/test_cogvideox.py``,
``test_video_autoencoders.py``, ``test_chroma.py`` and ``test_lumina_next.py`` check them against
the originals).
"""

from __future__ import annotations

import sys
from typing import Any

import torch

__all__ = [
    "cogvideox_positions", "whole_convolution", "unchunked_group_norm", "chroma_timestep_embeddings", "lumina_patch_sizes",
]


def cogvideox_positions(original: Any) -> Any:
    embeddings = sys.modules["diffusers.models.embeddings"]

    def get_positional_embeddings(self, sample_height, sample_width, sample_frames, device=None):  # type: ignore[no-untyped-def]
        # diffusers writes the patches' table into zeros for the text slots through ``.data``,
        # which tracing does not follow: torch.export's strict capture kept the zeros alone (the
        # write went to a copy) and its re-trace refused the write. The same table, concatenated.
        patches = embeddings.get_3d_sincos_pos_embed(
            self.embed_dim,
            (sample_width // self.patch_size, sample_height // self.patch_size),
            (sample_frames - 1) // self.temporal_compression_ratio + 1,
            self.spatial_interpolation_scale,
            self.temporal_interpolation_scale,
            device=device,
            output_type="pt",
        ).flatten(0, 1)
        text = patches.new_zeros(self.max_text_seq_length, self.embed_dim)
        return torch.cat([text, patches]).unsqueeze(0)

    return get_positional_embeddings


def whole_convolution(original: Any) -> Any:
    def forward(self, input):  # type: ignore[no-untyped-def]
        # CogVideoX's VAE convolves inputs above 2 GB in parts along time, sparing GPU memory: a
        # branch on the size (a float division of it, which torch.export then failed to write as
        # an assert). Below 2 GB it is the plain convolution, which the graph computes at any size.
        return torch.nn.Conv3d.forward(self, input)

    return forward


def unchunked_group_norm(original: Any) -> Any:
    def forward(self, x):  # type: ignore[no-untyped-def]
        # Mochi's VAE normalizes its frames 8 at a time, sparing memory; each frame is normalized
        # on its own, so the chunks change no number, but their count is the batch's (a guard
        # on it). All frames at once.
        frames = x.permute(0, 2, 1, 3, 4).flatten(0, 1)
        return self.norm_layer(frames).unflatten(0, (x.size(0), -1)).permute(0, 2, 1, 3, 4)

    return forward


def chroma_timestep_embeddings(original: Any) -> Any:
    def forward(self, timestep):  # type: ignore[no-untyped-def]
        # Chroma's guidance is 0 for every sample, embedded from torch.tensor([0] * batch): a
        # Python list as long as the batch, which makes the batch a constant. The same int64
        # zeros, sized by the timestep's batch; the rest as diffusers computes it.
        batch = timestep.shape[0]
        steps = self.time_proj(timestep).to(dtype=timestep.dtype)
        guidance = self.guidance_proj(torch.zeros(batch, dtype=torch.int64)).to(dtype=timestep.dtype, device=timestep.device)
        rows = self.mod_proj.shape[0]
        table = self.mod_proj.to(dtype=steps.dtype, device=steps.device).repeat(batch, 1, 1)
        conditioning = torch.cat([steps, guidance], dim=1).unsqueeze(1).repeat(1, rows, 1)
        return torch.cat([conditioning, table], dim=-1).to(timestep.dtype)

    return forward


def lumina_patch_sizes(original: Any) -> Any:
    def forward(self, x, freqs_cis):  # type: ignore[no-untyped-def]
        # Lumina-Next's patch embedding returns the image size as a Python list with one entry per
        # sample, all equal, which makes the batch a constant; LuminaNextDiT2DModel, its only
        # user, reads the first. The list here has that one entry; the rest as diffusers computes it.
        batch, channels, height, width = x.size()
        side = self.patch_size
        rows, columns = height // side, width // side
        patches = x.view(batch, channels, rows, side, columns, side).permute(0, 2, 4, 1, 3, 5).flatten(3)
        tokens = self.proj(patches).flatten(1, 2)
        mask = torch.ones(tokens.shape[0], tokens.shape[1], dtype=torch.int32, device=tokens.device)
        rotary = freqs_cis.to(x[0].device)[:rows, :columns].flatten(0, 1).unsqueeze(0)
        return tokens, mask, [(height, width)], rotary

    return forward
