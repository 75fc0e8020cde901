"""The generated diffusers corpus: the denoisers and autoencoders diffusion pipelines export.

Each model is built from a small config (the sizes of diffusers' own tiny test models: two
blocks, 32/64 channels, two layers...) with random weights, no download, and called with
``return_dict=False`` on random latents, timesteps and text embeddings, batch dynamic (example
batch 2, second input set batch 3). AutoencoderKL is exported as the two halves a pipeline
runs separately: the encoder (image -> the latent distribution's moments) and the decoder
(latent -> image). Outputs are compared at rtol 1e-3 / atol 1e-5.

Cases are named ``diff-<model>``; the sweep is ``python tools/sweeps/modelsweep.py --corpus diffusers``
in the main environment (``pip install diffusers``).
"""

from __future__ import annotations

from typing import Any, Callable

import torch

from tools.corpus.models import ModelCase, _randn

__all__ = ["cases"]

RTOL, ATOL = 1e-3, 1e-5
TEXT, TEXT_DIM = 7, 32  # text tokens and their embedding size


class _VaeEncoder(torch.nn.Module):
    """image -> the moments (mean and log-variance) of AutoencoderKL's latent distribution."""

    def __init__(self, vae: Any) -> None:
        super().__init__()
        self.vae = vae

    def forward(self, image: torch.Tensor) -> torch.Tensor:
        return self.vae.encode(image).latent_dist.parameters


class _VaeDecoder(torch.nn.Module):
    def __init__(self, vae: Any) -> None:
        super().__init__()
        self.vae = vae

    def forward(self, latent: torch.Tensor) -> torch.Tensor:
        return self.vae.decode(latent, return_dict=False)[0]


def _timesteps(batch: int) -> torch.Tensor:
    return torch.linspace(1.0, 999.0, batch)


def _vae() -> Any:
    import diffusers

    return diffusers.AutoencoderKL(
        in_channels=3, out_channels=3, latent_channels=4, block_out_channels=(32, 64), layers_per_block=1,
        down_block_types=("DownEncoderBlock2D",) * 2, up_block_types=("UpDecoderBlock2D",) * 2, norm_num_groups=32,
        sample_size=32,
    )


# name -> (build the model, inputs of a batch as keyword arguments)
_MODELS: dict[str, tuple[Callable[[], Any], Callable[[int], dict[str, torch.Tensor]]]] = {
    "unet2d-condition": (
        lambda: __import__("diffusers").UNet2DConditionModel(
            sample_size=16, in_channels=4, out_channels=4, block_out_channels=(32, 64), layers_per_block=1,
            down_block_types=("CrossAttnDownBlock2D", "DownBlock2D"),
            up_block_types=("UpBlock2D", "CrossAttnUpBlock2D"), cross_attention_dim=TEXT_DIM, attention_head_dim=8,
            norm_num_groups=32,
        ),
        lambda b: {"sample": _randn(b, 4, 16, 16), "timestep": _timesteps(b),
                   "encoder_hidden_states": _randn(b, TEXT, TEXT_DIM)},
    ),
    "unet2d": (
        lambda: __import__("diffusers").UNet2DModel(
            sample_size=16, in_channels=3, out_channels=3, block_out_channels=(32, 64), layers_per_block=1,
            down_block_types=("DownBlock2D", "AttnDownBlock2D"), up_block_types=("AttnUpBlock2D", "UpBlock2D"),
            norm_num_groups=32,
        ),
        lambda b: {"sample": _randn(b, 3, 16, 16), "timestep": _timesteps(b)},
    ),
    "autoencoder-kl-encoder": (lambda: _VaeEncoder(_vae()), lambda b: {"image": _randn(b, 3, 32, 32)}),
    "autoencoder-kl-decoder": (lambda: _VaeDecoder(_vae()), lambda b: {"latent": _randn(b, 4, 16, 16)}),
    "dit": (
        lambda: __import__("diffusers").DiTTransformer2DModel(
            num_attention_heads=2, attention_head_dim=16, in_channels=4, out_channels=8, num_layers=2,
            sample_size=8, patch_size=2, num_embeds_ada_norm=10, norm_num_groups=32,
        ),
        lambda b: {"hidden_states": _randn(b, 4, 8, 8), "timestep": _timesteps(b).long(),
                   "class_labels": torch.arange(b) % 10},
    ),
    "sd3": (
        lambda: __import__("diffusers").SD3Transformer2DModel(
            sample_size=16, patch_size=2, in_channels=4, num_layers=2, attention_head_dim=8, num_attention_heads=4,
            caption_projection_dim=32, joint_attention_dim=TEXT_DIM, pooled_projection_dim=64, out_channels=4,
        ),
        lambda b: {"hidden_states": _randn(b, 4, 16, 16), "encoder_hidden_states": _randn(b, TEXT, TEXT_DIM),
                   "pooled_projections": _randn(b, 64), "timestep": _timesteps(b)},
    ),
    "flux": (
        lambda: __import__("diffusers").FluxTransformer2DModel(
            patch_size=1, in_channels=4, num_layers=1, num_single_layers=1, attention_head_dim=16,
            num_attention_heads=2, joint_attention_dim=TEXT_DIM, pooled_projection_dim=32, axes_dims_rope=(4, 4, 8),
        ),
        lambda b: {
            "hidden_states": _randn(b, 16, 4), "encoder_hidden_states": _randn(b, TEXT, TEXT_DIM),
            "pooled_projections": _randn(b, 32), "timestep": _timesteps(b) / 1000,
            "img_ids": torch.stack(torch.meshgrid(torch.zeros(1), torch.arange(4.0), torch.arange(4.0), indexing="ij"),
                                   -1).reshape(16, 3),
            "txt_ids": torch.zeros(TEXT, 3),
        },
    ),
    "pixart": (
        lambda: __import__("diffusers").PixArtTransformer2DModel(
            sample_size=8, num_layers=2, patch_size=2, attention_head_dim=8, num_attention_heads=3, in_channels=4,
            out_channels=8, cross_attention_dim=24, caption_channels=TEXT_DIM, norm_elementwise_affine=False,
            norm_eps=1e-6, use_additional_conditions=False,
        ),
        lambda b: {"hidden_states": _randn(b, 4, 8, 8), "encoder_hidden_states": _randn(b, TEXT, TEXT_DIM),
                   "timestep": _timesteps(b).long()},
    ),
}

# Inputs shared by the whole batch (Flux's position ids) have no batch dimension.
_UNBATCHED = {"img_ids", "txt_ids"}


def _case(name: str) -> ModelCase:
    make, inputs = _MODELS[name]
    # diffusers' own models return a tuple with return_dict=False; the autoencoder halves are ours.
    extra = {} if name.startswith("autoencoder-kl-") else {"return_dict": False}

    def build() -> tuple[Any, tuple, dict, Any]:
        torch.manual_seed(0)
        kwargs = inputs(2)
        shapes = {key: (None if key in _UNBATCHED else {0: "batch"}) for key in kwargs}
        return make().eval(), (), {**kwargs, **extra}, {**shapes, **dict.fromkeys(extra)}

    return ModelCase(
        f"diff-{name}", build, "diffusion", lambda: ((), {**inputs(3), **extra}), rtol=RTOL, atol=ATOL, ci=False,
    )


def cases() -> list[ModelCase]:
    return [_case(name) for name in _MODELS]

