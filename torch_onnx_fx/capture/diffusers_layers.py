"""diffusers' layers written for capture: the same numbers, without what torch.export cannot trace.

CogVideoX's patch embedding writes its positional table through ``.data``; its video
autoencoder convolves inputs above 2 GB in parts, and Mochi's normalizes its frames 8 at a time,
both to spare GPU memory and both deciding on the input's size. Chroma embeds a guidance of zeros
made from a Python list as long as the batch, and Lumina-Next's patch embedding returns the image
size once per sample in one: both fix the batch. Mochi's attention loops over the batch in Python,
gathering each sample's prompt tokens with ``nonzero``. OmniGen picks its rotary scaling factors
with a Python ``if`` on the largest position id, a value of the data. Each function takes the
original and returns its replacement; :mod:`torch_onnx_fx.capture.library_patches` installs them
while a capture runs, only when diffusers is already imported (``tests/models/test_cogvideox.py``,
``test_video_autoencoders.py``, ``test_chroma.py``, ``test_lumina_next.py``,
``test_mochi_attention.py`` and ``test_omnigen_rotary.py`` check them against the originals).
"""

from __future__ import annotations

import math
import sys
from typing import Any

import torch

__all__ = [
    "cogvideox_positions", "whole_convolution", "unchunked_group_norm", "chroma_timestep_embeddings", "lumina_patch_sizes",
    "mochi_joint_attention", "omnigen_rotary_factors",
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


def _heads(attn: Any, states: torch.Tensor, q: Any, k: Any, v: Any, norm_q: Any, norm_k: Any) -> list[torch.Tensor]:
    """Mochi's query, key and value of ``states``: projected, split into heads, normalized."""
    query, key, value = (project(states).unflatten(2, (attn.heads, -1)) for project in (q, k, v))
    return [norm_q(query) if norm_q is not None else query, norm_k(key) if norm_k is not None else key, value]


def _rotated(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    even, odd = x[..., 0::2].float(), x[..., 1::2].float()
    return torch.stack([(even * cos - odd * sin).to(x.dtype), (even * sin + odd * cos).to(x.dtype)], dim=-1).flatten(-2)


def mochi_joint_attention(original: Any) -> Any:
    def call(self, attn, hidden_states, encoder_hidden_states, attention_mask, image_rotary_emb=None):  # type: ignore[no-untyped-def]
        # Mochi attends sample by sample over the image tokens and the prompt tokens its mask
        # keeps (gathered with nonzero()), then pads each result with zero rows to the full
        # length: a Python loop over the batch, which makes it a constant. The same attention for
        # the whole batch at once: the dropped prompt tokens masked out of every sample's keys,
        # and each sample's kept prompt rows moved to the front, in order, zeros after, where the
        # padding put them. Equal to diffusers' up to the rounding of the attention's sums.
        query, key, value = _heads(attn, hidden_states, attn.to_q, attn.to_k, attn.to_v, attn.norm_q, attn.norm_k)
        prompt = _heads(
            attn, encoder_hidden_states, attn.add_q_proj, attn.add_k_proj, attn.add_v_proj, attn.norm_added_q,
            attn.norm_added_k,
        )
        if image_rotary_emb is not None:
            query, key = _rotated(query, *image_rotary_emb), _rotated(key, *image_rotary_emb)
        image_length, prompt_length = query.shape[1], prompt[0].shape[1]
        kept = attention_mask != 0
        # Dropped tokens' keys and values zeroed, not only masked: a masked key's weight is 0, and
        # 0 times an inf or nan value would still be nan (diffusers never reads them).
        dropped = ~kept[:, :, None, None]
        prompt[1:] = [torch.where(dropped, torch.zeros_like(part), part) for part in prompt[1:]]
        joint = [torch.cat([mine, theirs], dim=1).transpose(1, 2) for mine, theirs in zip((query, key, value), prompt)]
        keys = torch.cat([kept.new_ones(kept.shape[0], image_length), kept], dim=1)[:, None, None, :]
        attended = torch.nn.functional.scaled_dot_product_attention(*joint, attn_mask=keys, dropout_p=0.0, is_causal=False)
        image_rows, prompt_rows = attended.split_with_sizes((image_length, prompt_length), dim=2)
        # A kept token's row goes to its rank among the kept; a dropped one's to a spare row cut off after.
        rank = torch.where(kept, kept.long().cumsum(1) - 1, prompt_length)[:, None, :, None].expand_as(prompt_rows)
        spare = prompt_rows.new_zeros(*prompt_rows.shape[:2], prompt_length + 1, prompt_rows.shape[-1])
        compacted = spare.scatter(2, rank, prompt_rows)[:, :, :prompt_length]
        joined = torch.cat([image_rows, compacted], dim=2).transpose(1, 2).flatten(2, 3)
        hidden_states, encoder_hidden_states = joined.split_with_sizes((image_length, prompt_length), dim=1)
        hidden_states = attn.to_out[1](attn.to_out[0](hidden_states))
        if hasattr(attn, "to_add_out"):
            encoder_hidden_states = attn.to_add_out(encoder_hidden_states)
        return hidden_states, encoder_hidden_states

    return call


def omnigen_rotary_factors(original: Any) -> Any:
    def forward(self, hidden_states, position_ids):  # type: ignore[no-untyped-def]
        # OmniGen picks the long or short scaling factors by a Python `if` on the largest position
        # id (a value of the data, which tracing cannot branch on): chosen in the graph instead.
        # It also stores the scaled frequencies in its inv_freq buffer, which nothing reads before
        # the next call overwrites them; the capture leaves the buffer as it is.
        device = hidden_states.device
        longest = torch.max(position_ids) + 1 > self.original_max_position_embeddings
        factors = torch.where(
            longest, torch.tensor(self.long_factor, dtype=torch.float32, device=device),
            torch.tensor(self.short_factor, dtype=torch.float32, device=device),
        )
        exponents = torch.arange(0, self.dim, 2, dtype=torch.int64, device=device).float() / self.dim
        frequencies = (1.0 / (factors * self.base**exponents))[None, :, None].float().expand(position_ids.shape[0], -1, 1)
        with torch.autocast(device_type=device.type if device.type != "mps" else "cpu", enabled=False):
            angles = (frequencies.float() @ position_ids[:, None, :].float()).transpose(1, 2)
            table = torch.cat((angles, angles), dim=-1)[0]
            scale = self.max_position_embeddings / self.original_max_position_embeddings
            factor = 1.0 if scale <= 1.0 else math.sqrt(1 + math.log(scale) / math.log(self.original_max_position_embeddings))
            return table.cos() * factor, table.sin() * factor

    return forward
