"""The generated diffusers corpus: the denoisers, autoencoders and ControlNets diffusion pipelines export.

Each model is built from a small config (the sizes of diffusers' own tiny test models, from
``tests/models/**/test_models_*.py``, or the pipelines' tests for the models without their own)
with random weights, no download, and called with ``return_dict=False`` on random latents,
timesteps and text embeddings, batch dynamic (example batch 2, second input set batch 3) except
where ``_STATIC_BATCH`` says why not. Outputs are compared at rtol 1e-3 / atol 1e-5; where that
fails, with eager in float64, as the other generated corpora of deep random-weight networks are
(the ONNX outputs must be as close to it as eager's float32 ones).

- UNets: UNet2DConditionModel, UNet2DModel, UNet1DModel, UNet3DConditionModel,
  UNetSpatioTemporalConditionModel, UNetMotionModel, I2VGenXLUNet, Kandinsky3UNet, StableCascadeUNet,
  UVit2DModel.
- Autoencoders: AutoencoderKL as the two halves a pipeline runs separately (the encoder, image ->
  the latent distribution's moments, and the decoder, latent -> image); ConsistencyDecoderVAE's
  encoder (its decoder samples noise); AutoencoderTiny, VQModel, AsymmetricAutoencoderKL,
  AutoencoderKLTemporalDecoder, AutoencoderDC, AutoencoderOobleck and the video autoencoders
  (CogVideoX, HunyuanVideo, LTXVideo, Magvit, Mochi, Wan, Cosmos) as image -> reconstruction.
- Transformers: DiT, SD3, Flux, PixArt, PriorTransformer, HunyuanDiT, CogVideoX, ConsisID,
  Lumina-Next, Lumina2, Sana, SanaVideo, AuraFlow, Allegro, Mochi, LTXVideo, LTX2Video, Wan, WanVACE,
  ChronoEdit, SkyReelsV2, Latte, CogView3Plus, CogView4, GlmImage, Chroma, Flux2, Bria, BriaFibo,
  OvisImage, LongCatImage, QwenImage, HiDream, OmniGen, Cosmos, HunyuanVideo, HunyuanVideo15,
  EasyAnimate, ErnieImage, ZImage, StableAudioDiT.
- ControlNets: ControlNetModel, UNetControlNetXSModel, SD3ControlNetModel, FluxControlNetModel.

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


def _new(class_name: str, **config: Any) -> Callable[[], Any]:
    """Builds ``diffusers.<class_name>(**config)`` (imported when the case is built)."""

    def make() -> Any:
        import diffusers

        return getattr(diffusers, class_name)(**config)

    return make


def _ones(*shape: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    return torch.ones(*shape, dtype=dtype)


def _rows(batch: int, *values: float) -> torch.Tensor:
    """The same row of values for every sample: micro-conditions (sizes, crop corners)."""
    return torch.tensor([values] * batch, dtype=torch.float32)


def _image_ids(height: int, width: int) -> torch.Tensor:
    """Flux's (0, row, column) ids of a latent image's tokens."""
    grid = torch.meshgrid(torch.zeros(1), torch.arange(float(height)), torch.arange(float(width)), indexing="ij")
    return torch.stack(grid, -1).reshape(height * width, 3)


def _rope(length: int, dim: int) -> tuple[torch.Tensor, torch.Tensor]:
    """A rotary table (cos, sin) of ``length`` positions, as pipelines precompute it."""
    angles = _randn(length, dim)
    return angles.cos(), angles.sin()


def _lumina_rope() -> torch.Tensor:
    """Lumina-Next's complex rotary table as its pipeline computes it, for an 8 x 8 patch grid."""
    from diffusers.models.embeddings import get_2d_rotary_pos_embed_lumina

    return get_2d_rotary_pos_embed_lumina(8, 8, 8)


# name -> (build the model, inputs of a batch as keyword arguments); the settings of the tiny
# models of diffusers' tests (tests/models/**/test_models_*.py, or the pipelines' tests for the
# models without their own), with the batch as the one free size.
_MODELS: dict[str, tuple[Callable[[], Any], Callable[[int], dict[str, Any]]]] = {
    # -- UNets
    "unet2d-condition": (
        _new(
            "UNet2DConditionModel", sample_size=16, in_channels=4, out_channels=4, block_out_channels=(32, 64),
            layers_per_block=1, down_block_types=("CrossAttnDownBlock2D", "DownBlock2D"),
            up_block_types=("UpBlock2D", "CrossAttnUpBlock2D"), cross_attention_dim=TEXT_DIM, attention_head_dim=8,
            norm_num_groups=32,
        ),
        lambda b: {"sample": _randn(b, 4, 16, 16), "timestep": _timesteps(b),
                   "encoder_hidden_states": _randn(b, TEXT, TEXT_DIM)},
    ),
    "unet2d": (
        _new(
            "UNet2DModel", sample_size=16, in_channels=3, out_channels=3, block_out_channels=(32, 64),
            layers_per_block=1, down_block_types=("DownBlock2D", "AttnDownBlock2D"),
            up_block_types=("AttnUpBlock2D", "UpBlock2D"), norm_num_groups=32,
        ),
        lambda b: {"sample": _randn(b, 3, 16, 16), "timestep": _timesteps(b)},
    ),
    "unet1d": (
        _new(
            "UNet1DModel", block_out_channels=(8, 8, 16, 16), in_channels=14, out_channels=14,
            time_embedding_type="positional", use_timestep_embedding=True, flip_sin_to_cos=False, freq_shift=1.0,
            out_block_type="OutConv1DBlock", mid_block_type="MidResTemporalBlock1D",
            down_block_types=("DownResnetBlock1D",) * 4, up_block_types=("UpResnetBlock1D",) * 3, act_fn="swish",
        ),
        lambda b: {"sample": _randn(b, 14, 16), "timestep": _timesteps(b)},
    ),
    "unet3d-condition": (
        _new(
            "UNet3DConditionModel", block_out_channels=(4, 8), norm_num_groups=4,
            down_block_types=("CrossAttnDownBlock3D", "DownBlock3D"),
            up_block_types=("UpBlock3D", "CrossAttnUpBlock3D"), cross_attention_dim=8, attention_head_dim=2,
            out_channels=4, in_channels=4, layers_per_block=1, sample_size=16,
        ),
        lambda b: {"sample": _randn(b, 4, 4, 16, 16), "timestep": _timesteps(b),
                   "encoder_hidden_states": _randn(b, 4, 8)},
    ),
    "unet-spatio-temporal": (
        _new(
            "UNetSpatioTemporalConditionModel", block_out_channels=(32, 64),
            down_block_types=("CrossAttnDownBlockSpatioTemporal", "DownBlockSpatioTemporal"),
            up_block_types=("UpBlockSpatioTemporal", "CrossAttnUpBlockSpatioTemporal"), cross_attention_dim=32,
            num_attention_heads=8, out_channels=4, in_channels=4, layers_per_block=2, sample_size=32,
            projection_class_embeddings_input_dim=96, addition_time_embed_dim=32,
        ),
        lambda b: {"sample": _randn(b, 2, 4, 32, 32), "timestep": _timesteps(b),
                   "encoder_hidden_states": _randn(b, 1, 32), "added_time_ids": _rows(b, 6, 127, 0.02)},
    ),
    "unet-motion": (
        _new(
            "UNetMotionModel", block_out_channels=(16, 32), norm_num_groups=16,
            down_block_types=("CrossAttnDownBlockMotion", "DownBlockMotion"),
            up_block_types=("UpBlockMotion", "CrossAttnUpBlockMotion"), cross_attention_dim=16, num_attention_heads=2,
            out_channels=4, in_channels=4, layers_per_block=1, sample_size=16,
        ),
        # The text embeddings come per frame: batch x 4 frames rows.
        lambda b: {"sample": _randn(b, 4, 4, 16, 16), "timestep": _timesteps(b),
                   "encoder_hidden_states": _randn(b * 4, 4, 16)},
    ),
    "i2vgen-xl": (
        _new(
            "I2VGenXLUNet", block_out_channels=(4, 8), layers_per_block=1, sample_size=16, in_channels=4,
            out_channels=4, down_block_types=("CrossAttnDownBlock3D", "DownBlock3D"),
            up_block_types=("UpBlock3D", "CrossAttnUpBlock3D"), cross_attention_dim=4, attention_head_dim=4,
            num_attention_heads=None, norm_num_groups=2,
        ),
        lambda b: {"sample": _randn(b, 4, 2, 16, 16), "timestep": _timesteps(b), "fps": torch.full((b,), 16.0),
                   "image_latents": _randn(b, 4, 2, 16, 16), "image_embeddings": _randn(b, 4),
                   "encoder_hidden_states": _randn(b, TEXT, 4)},
    ),
    "kandinsky3": (
        _new(
            "Kandinsky3UNet", in_channels=4, time_embedding_dim=4, groups=2, attention_head_dim=4, layers_per_block=3,
            block_out_channels=(32, 64), cross_attention_dim=4, encoder_hid_dim=32,
        ),
        lambda b: {"sample": _randn(b, 4, 16, 16), "timestep": _timesteps(b),
                   "encoder_hidden_states": _randn(b, TEXT, 32), "encoder_attention_mask": _ones(b, TEXT)},
    ),
    "stable-cascade": (
        _new(
            "StableCascadeUNet", conditioning_dim=128, block_out_channels=(128, 128), num_attention_heads=(2, 2),
            down_num_layers_per_block=(1, 1), up_num_layers_per_block=(1, 1), switch_level=(False,),
            clip_image_in_channels=768, clip_text_in_channels=32, clip_text_pooled_in_channels=32, dropout=(0.1, 0.1),
        ),
        lambda b: {"sample": _randn(b, 16, 8, 8), "timestep_ratio": torch.linspace(0.1, 0.9, b),
                   "clip_text_pooled": _randn(b, 1, 32), "clip_text": _randn(b, TEXT, 32),
                   "clip_img": _randn(b, 1, 768)},
    ),
    "uvit2d": (
        _new(
            "UVit2DModel", hidden_size=8, use_bias=False, hidden_dropout=0.0, cond_embed_dim=8,
            micro_cond_encode_dim=2, micro_cond_embed_dim=10, encoder_hidden_size=8, vocab_size=32, codebook_size=32,
            in_channels=8, block_out_channels=8, num_res_blocks=1, downsample=True, upsample=True, block_num_heads=1,
            num_hidden_layers=1, num_attention_heads=1, attention_dropout=0.0, intermediate_size=8,
            layer_norm_eps=1e-6, ln_elementwise_affine=True,
        ),
        lambda b: {"input_ids": torch.arange(b * 16).reshape(b, 4, 4) % 32, "encoder_hidden_states": _randn(b, TEXT, 8),
                   "pooled_text_emb": _randn(b, 8), "micro_conds": _rows(b, 32, 32, 0, 0, 6)},
    ),
    # -- autoencoders: AutoencoderKL as a pipeline's two halves, the others image -> reconstruction
    "autoencoder-kl-encoder": (lambda: _VaeEncoder(_vae()), lambda b: {"image": _randn(b, 3, 32, 32)}),
    "autoencoder-kl-decoder": (lambda: _VaeDecoder(_vae()), lambda b: {"latent": _randn(b, 4, 16, 16)}),
    "autoencoder-tiny": (
        _new(
            "AutoencoderTiny", in_channels=3, out_channels=3, encoder_block_out_channels=(32, 32),
            decoder_block_out_channels=(32, 32), num_encoder_blocks=(1, 1), num_decoder_blocks=(1, 1),
        ),
        lambda b: {"sample": _randn(b, 3, 32, 32)},
    ),
    "vq": (
        _new(
            "VQModel", block_out_channels=(8, 16), norm_num_groups=8, in_channels=3, out_channels=3,
            down_block_types=("DownEncoderBlock2D",) * 2, up_block_types=("UpDecoderBlock2D",) * 2, latent_channels=3,
        ),
        lambda b: {"sample": _randn(b, 3, 32, 32)},
    ),
    "asymmetric-autoencoder-kl": (
        _new(
            "AsymmetricAutoencoderKL", in_channels=3, out_channels=3, down_block_types=("DownEncoderBlock2D",) * 2,
            down_block_out_channels=(2, 4), layers_per_down_block=1, up_block_types=("UpDecoderBlock2D",) * 2,
            up_block_out_channels=(2, 4), layers_per_up_block=1, act_fn="silu", latent_channels=4, norm_num_groups=2,
            sample_size=32, scaling_factor=0.18215,
        ),
        lambda b: {"sample": _randn(b, 3, 32, 32), "mask": _ones(b, 1, 32, 32)},
    ),
    "autoencoder-kl-temporal-decoder": (
        _new(
            "AutoencoderKLTemporalDecoder", block_out_channels=(32, 64), in_channels=3, out_channels=3,
            down_block_types=("DownEncoderBlock2D",) * 2, latent_channels=4, layers_per_block=2,
        ),
        lambda b: {"sample": _randn(b, 3, 32, 32)},
    ),
    "autoencoder-dc": (
        _new(
            "AutoencoderDC", in_channels=3, latent_channels=4, attention_head_dim=2,
            encoder_block_types=("ResBlock", "EfficientViTBlock"),
            decoder_block_types=("ResBlock", "EfficientViTBlock"),
            encoder_block_out_channels=(8, 8), decoder_block_out_channels=(8, 8), encoder_qkv_multiscales=((), (5,)),
            decoder_qkv_multiscales=((), (5,)), encoder_layers_per_block=(1, 1), decoder_layers_per_block=(1, 1),
            downsample_block_type="conv", upsample_block_type="interpolate", decoder_norm_types="rms_norm",
            decoder_act_fns="silu", scaling_factor=0.41407,
        ),
        lambda b: {"sample": _randn(b, 3, 32, 32)},
    ),
    "autoencoder-oobleck": (
        _new(
            "AutoencoderOobleck", encoder_hidden_size=12, decoder_channels=12, decoder_input_channels=6,
            audio_channels=2, downsampling_ratios=[2, 4], channel_multiples=[1, 2],  # lists: the model adds them to one
        ),
        lambda b: {"sample": _randn(b, 2, 24)},
    ),
    "consistency-decoder-vae-encoder": (
        lambda: _VaeEncoder(_new(
            "ConsistencyDecoderVAE", encoder_block_out_channels=(2, 4), encoder_in_channels=3, encoder_out_channels=4,
            encoder_down_block_types=("DownEncoderBlock2D",) * 2, decoder_add_attention=False,
            decoder_block_out_channels=(2, 4), decoder_down_block_types=("ResnetDownsampleBlock2D",) * 2,
            decoder_downsample_padding=1, decoder_in_channels=7, decoder_layers_per_block=1, decoder_norm_eps=1e-5,
            decoder_norm_num_groups=2, encoder_norm_num_groups=2, decoder_num_train_timesteps=1024,
            decoder_out_channels=6, decoder_resnet_time_scale_shift="scale_shift",
            decoder_time_embedding_type="learned", decoder_up_block_types=("ResnetUpsampleBlock2D",) * 2,
            scaling_factor=1, latent_channels=4,
        )()),
        lambda b: {"image": _randn(b, 3, 32, 32)},
    ),
    "autoencoder-kl-cogvideox": (
        _new(
            "AutoencoderKLCogVideoX", in_channels=3, out_channels=3, down_block_types=("CogVideoXDownBlock3D",) * 4,
            up_block_types=("CogVideoXUpBlock3D",) * 4, block_out_channels=(8, 8, 8, 8), latent_channels=4,
            layers_per_block=1, norm_num_groups=2, temporal_compression_ratio=4,
        ),
        lambda b: {"sample": _randn(b, 3, 8, 16, 16)},
    ),
    "autoencoder-kl-hunyuan-video": (
        _new(
            "AutoencoderKLHunyuanVideo", in_channels=3, out_channels=3, latent_channels=4,
            down_block_types=("HunyuanVideoDownBlock3D",) * 4, up_block_types=("HunyuanVideoUpBlock3D",) * 4,
            block_out_channels=(8, 8, 8, 8), layers_per_block=1, act_fn="silu", norm_num_groups=4,
            scaling_factor=0.476986, spatial_compression_ratio=8, temporal_compression_ratio=4,
            mid_block_add_attention=True,
        ),
        lambda b: {"sample": _randn(b, 3, 9, 16, 16)},
    ),
    "autoencoder-kl-ltx-video": (
        _new(
            "AutoencoderKLLTXVideo", in_channels=3, out_channels=3, latent_channels=8, block_out_channels=(8, 8, 8, 8),
            decoder_block_out_channels=(8, 8, 8, 8), layers_per_block=(1, 1, 1, 1, 1),
            decoder_layers_per_block=(1, 1, 1, 1, 1), spatio_temporal_scaling=(True, True, False, False),
            decoder_spatio_temporal_scaling=(True, True, False, False), decoder_inject_noise=(False,) * 5,
            upsample_residual=(False,) * 4, upsample_factor=(1, 1, 1, 1), timestep_conditioning=False, patch_size=1,
            patch_size_t=1, encoder_causal=True, decoder_causal=False,
        ),
        lambda b: {"sample": _randn(b, 3, 9, 16, 16)},
    ),
    "autoencoder-kl-magvit": (
        _new(
            "AutoencoderKLMagvit", in_channels=3, latent_channels=4, out_channels=3, block_out_channels=(8, 8, 8, 8),
            down_block_types=("SpatialDownBlock3D",) + ("SpatialTemporalDownBlock3D",) * 3,
            up_block_types=("SpatialUpBlock3D",) + ("SpatialTemporalUpBlock3D",) * 3, layers_per_block=1,
            norm_num_groups=8, spatial_group_norm=True,
        ),
        lambda b: {"sample": _randn(b, 3, 9, 16, 16)},
    ),
    "autoencoder-kl-mochi": (
        _new(
            "AutoencoderKLMochi", in_channels=15, out_channels=3, latent_channels=4,
            encoder_block_out_channels=(32, 32, 32, 32), decoder_block_out_channels=(32, 32, 32, 32),
            layers_per_block=(1, 1, 1, 1, 1), act_fn="silu", scaling_factor=1,
        ),
        lambda b: {"sample": _randn(b, 3, 7, 16, 16)},
    ),
    "autoencoder-kl-wan": (
        # Lists: the model adds dim_mult to one.
        _new("AutoencoderKLWan", base_dim=3, z_dim=16, dim_mult=[1, 1, 1, 1], num_res_blocks=1,
             temperal_downsample=[False, True, True]),
        lambda b: {"sample": _randn(b, 3, 9, 16, 16)},
    ),
    "autoencoder-kl-cosmos": (
        _new(
            "AutoencoderKLCosmos", in_channels=3, out_channels=3, latent_channels=4,
            encoder_block_out_channels=(8, 8, 8, 8), decode_block_out_channels=(8, 8, 8, 8), attention_resolutions=(8,),
            resolution=64, num_layers=2, patch_size=4, patch_type="haar", scaling_factor=1.0,
            spatial_compression_ratio=4, temporal_compression_ratio=4,
        ),
        lambda b: {"sample": _randn(b, 3, 9, 32, 32)},
    ),
    # -- transformers
    "dit": (
        _new(
            "DiTTransformer2DModel", num_attention_heads=2, attention_head_dim=16, in_channels=4, out_channels=8,
            num_layers=2, sample_size=8, patch_size=2, num_embeds_ada_norm=10, norm_num_groups=32,
        ),
        lambda b: {"hidden_states": _randn(b, 4, 8, 8), "timestep": _timesteps(b).long(),
                   "class_labels": torch.arange(b) % 10},
    ),
    "sd3": (
        _new(
            "SD3Transformer2DModel", sample_size=16, patch_size=2, in_channels=4, num_layers=2, attention_head_dim=8,
            num_attention_heads=4, caption_projection_dim=32, joint_attention_dim=TEXT_DIM, pooled_projection_dim=64,
            out_channels=4,
        ),
        lambda b: {"hidden_states": _randn(b, 4, 16, 16), "encoder_hidden_states": _randn(b, TEXT, TEXT_DIM),
                   "pooled_projections": _randn(b, 64), "timestep": _timesteps(b)},
    ),
    "flux": (
        _new(
            "FluxTransformer2DModel", patch_size=1, in_channels=4, num_layers=1, num_single_layers=1,
            attention_head_dim=16, num_attention_heads=2, joint_attention_dim=TEXT_DIM, pooled_projection_dim=32,
            axes_dims_rope=(4, 4, 8),
        ),
        lambda b: {
            "hidden_states": _randn(b, 16, 4), "encoder_hidden_states": _randn(b, TEXT, TEXT_DIM),
            "pooled_projections": _randn(b, 32), "timestep": _timesteps(b) / 1000, "img_ids": _image_ids(4, 4),
            "txt_ids": torch.zeros(TEXT, 3),
        },
    ),
    "pixart": (
        _new(
            "PixArtTransformer2DModel", sample_size=8, num_layers=2, patch_size=2, attention_head_dim=8,
            num_attention_heads=3, in_channels=4, out_channels=8, cross_attention_dim=24, caption_channels=TEXT_DIM,
            norm_elementwise_affine=False, norm_eps=1e-6, use_additional_conditions=False,
        ),
        lambda b: {"hidden_states": _randn(b, 4, 8, 8), "encoder_hidden_states": _randn(b, TEXT, TEXT_DIM),
                   "timestep": _timesteps(b).long()},
    ),
    "prior": (
        _new("PriorTransformer", num_attention_heads=2, attention_head_dim=4, num_layers=2, embedding_dim=8,
             num_embeddings=7, additional_embeddings=4),
        lambda b: {"hidden_states": _randn(b, 8), "timestep": _timesteps(b), "proj_embedding": _randn(b, 8),
                   "encoder_hidden_states": _randn(b, 7, 8)},
    ),
    "hunyuan-dit": (
        _new(
            "HunyuanDiT2DModel", sample_size=8, patch_size=2, in_channels=4, num_layers=1, attention_head_dim=8,
            num_attention_heads=2, cross_attention_dim=8, cross_attention_dim_t5=8, pooled_projection_dim=4,
            hidden_size=16, text_len=4, text_len_t5=4, activation_fn="gelu-approximate",
        ),
        lambda b: {
            "hidden_states": _randn(b, 4, 8, 8), "encoder_hidden_states": _randn(b, 4, 8),
            "text_embedding_mask": _ones(b, 4), "encoder_hidden_states_t5": _randn(b, 4, 8),
            "text_embedding_mask_t5": _ones(b, 4), "timestep": _timesteps(b),
            "image_meta_size": _rows(b, 1024, 1024, 16, 16, 0, 0), "style": torch.zeros(b, dtype=torch.int64),
            "image_rotary_emb": _rope(16, 8),
        },
    ),
    "cogvideox": (
        _new(
            "CogVideoXTransformer3DModel", num_attention_heads=2, attention_head_dim=8, in_channels=4, out_channels=4,
            time_embed_dim=2, text_embed_dim=8, num_layers=2, sample_width=8, sample_height=8, sample_frames=8,
            patch_size=2, patch_size_t=None, temporal_compression_ratio=4, max_text_seq_length=8,
        ),
        lambda b: {"hidden_states": _randn(b, 1, 4, 8, 8), "encoder_hidden_states": _randn(b, 8, 8),
                   "timestep": _timesteps(b).long()},
    ),
    "consisid": (
        _new(
            "ConsisIDTransformer3DModel", num_attention_heads=2, attention_head_dim=8, in_channels=4, out_channels=4,
            time_embed_dim=2, text_embed_dim=8, num_layers=1, sample_width=8, sample_height=8, sample_frames=8,
            patch_size=2, temporal_compression_ratio=4, max_text_seq_length=8, cross_attn_interval=1, is_kps=False,
            is_train_face=True, cross_attn_dim_head=1, cross_attn_num_heads=1, LFE_id_dim=2, LFE_vit_dim=2,
            LFE_depth=5, LFE_dim_head=8, LFE_num_heads=2, LFE_num_id_token=1, LFE_num_querie=1, LFE_output_dim=10,
            LFE_ff_mult=1, LFE_num_scale=1,
        ),
        lambda b: {"hidden_states": _randn(b, 1, 4, 8, 8), "encoder_hidden_states": _randn(b, 8, 8),
                   "timestep": _timesteps(b).long(), "id_vit_hidden": [_randn(b, 2, 2)], "id_cond": _randn(b, 2)},
    ),
    "lumina-next": (
        _new(
            "LuminaNextDiT2DModel", sample_size=16, patch_size=2, in_channels=4, hidden_size=24, num_layers=2,
            num_attention_heads=3, num_kv_heads=1, multiple_of=16, ffn_dim_multiplier=None, norm_eps=1e-5,
            learn_sigma=False, qk_norm=True, cross_attention_dim=32, scaling_factor=1.0,
        ),
        lambda b: {
            "hidden_states": _randn(b, 4, 16, 16), "encoder_hidden_states": _randn(b, 16, 32),
            "timestep": _timesteps(b) / 1000, "encoder_mask": _ones(b, 16, dtype=torch.int64),
            "image_rotary_emb": _lumina_rope(),
        },
    ),
    "lumina2": (
        _new(
            "Lumina2Transformer2DModel", sample_size=16, patch_size=2, in_channels=4, hidden_size=24, num_layers=2,
            num_refiner_layers=1, num_attention_heads=3, num_kv_heads=1, multiple_of=2, ffn_dim_multiplier=None,
            norm_eps=1e-5, scaling_factor=1.0, axes_dim_rope=(4, 2, 2), axes_lens=(128, 128, 128), cap_feat_dim=32,
        ),
        lambda b: {"hidden_states": _randn(b, 4, 16, 16), "encoder_hidden_states": _randn(b, 16, 32),
                   "timestep": _timesteps(b) / 1000, "encoder_attention_mask": _ones(b, 16, dtype=torch.bool)},
    ),
    "sana": (
        _new(
            "SanaTransformer2DModel", patch_size=1, in_channels=4, out_channels=4, num_layers=1, attention_head_dim=4,
            num_attention_heads=2, num_cross_attention_heads=2, cross_attention_head_dim=4, cross_attention_dim=8,
            caption_channels=8, sample_size=32,
        ),
        lambda b: {"hidden_states": _randn(b, 4, 32, 32), "encoder_hidden_states": _randn(b, 8, 8),
                   "timestep": _timesteps(b)},
    ),
    "sana-video": (
        _new(
            "SanaVideoTransformer3DModel", in_channels=16, out_channels=16, num_attention_heads=2,
            attention_head_dim=12, num_layers=2, num_cross_attention_heads=2, cross_attention_head_dim=12,
            cross_attention_dim=24, caption_channels=16, mlp_ratio=2.5, dropout=0.0, attention_bias=False,
            sample_size=8, patch_size=(1, 2, 2), norm_elementwise_affine=False, norm_eps=1e-6,
            qk_norm="rms_norm_across_heads", rope_max_seq_len=32,
        ),
        lambda b: {"hidden_states": _randn(b, 16, 2, 16, 16), "encoder_hidden_states": _randn(b, 12, 16),
                   "timestep": _timesteps(b)},
    ),
    "auraflow": (
        _new(
            "AuraFlowTransformer2DModel", sample_size=32, patch_size=2, in_channels=4, num_mmdit_layers=1,
            num_single_dit_layers=1, attention_head_dim=8, num_attention_heads=4, caption_projection_dim=32,
            joint_attention_dim=32, out_channels=4, pos_embed_max_size=256,
        ),
        lambda b: {"hidden_states": _randn(b, 4, 32, 32), "encoder_hidden_states": _randn(b, 16, 32),
                   "timestep": _timesteps(b)},
    ),
    "allegro": (
        _new(
            "AllegroTransformer3DModel", num_attention_heads=2, attention_head_dim=8, in_channels=4, out_channels=4,
            num_layers=1, cross_attention_dim=16, sample_width=8, sample_height=8, sample_frames=8, caption_channels=8,
        ),
        lambda b: {"hidden_states": _randn(b, 4, 2, 8, 8), "encoder_hidden_states": _randn(b, 16, 8),
                   "timestep": _timesteps(b)},
    ),
    "mochi": (
        _new(
            "MochiTransformer3DModel", patch_size=2, num_attention_heads=2, attention_head_dim=8, num_layers=2,
            pooled_projection_dim=16, in_channels=4, out_channels=None, qk_norm="rms_norm", text_embed_dim=16,
            time_embed_dim=4, activation_fn="swiglu", max_sequence_length=16,
        ),
        lambda b: {"hidden_states": _randn(b, 4, 2, 16, 16), "encoder_hidden_states": _randn(b, 16, 16),
                   "timestep": _timesteps(b), "encoder_attention_mask": _ones(b, 16, dtype=torch.bool)},
    ),
    "ltx-video": (
        _new(
            "LTXVideoTransformer3DModel", in_channels=4, out_channels=4, num_attention_heads=2, attention_head_dim=8,
            cross_attention_dim=16, num_layers=1, qk_norm="rms_norm_across_heads", caption_channels=16,
        ),
        lambda b: {"hidden_states": _randn(b, 2 * 16 * 16, 4), "encoder_hidden_states": _randn(b, 16, 16),
                   "timestep": _timesteps(b), "encoder_attention_mask": _ones(b, 16, dtype=torch.bool)},
    ),
    "ltx2-video": (
        _new(
            "LTX2VideoTransformer3DModel", in_channels=4, out_channels=4, patch_size=1, patch_size_t=1,
            num_attention_heads=2, attention_head_dim=8, cross_attention_dim=16, audio_in_channels=4,
            audio_out_channels=4, audio_num_attention_heads=2, audio_attention_head_dim=4, audio_cross_attention_dim=8,
            num_layers=2, qk_norm="rms_norm_across_heads", caption_channels=16, rope_double_precision=False,
        ),
        lambda b: {
            "hidden_states": _randn(b, 2 * 16 * 16, 4), "audio_hidden_states": _randn(b, 9, 4),
            "encoder_hidden_states": _randn(b, 16, 16), "audio_encoder_hidden_states": _randn(b, 16, 16),
            "timestep": _timesteps(b), "encoder_attention_mask": _ones(b, 16, dtype=torch.bool),
        },
    ),
    "wan": (
        _new(
            "WanTransformer3DModel", patch_size=(1, 2, 2), num_attention_heads=2, attention_head_dim=12, in_channels=4,
            out_channels=4, text_dim=16, freq_dim=256, ffn_dim=32, num_layers=2, cross_attn_norm=True,
            qk_norm="rms_norm_across_heads", rope_max_seq_len=32,
        ),
        lambda b: {"hidden_states": _randn(b, 4, 2, 16, 16), "encoder_hidden_states": _randn(b, 12, 16),
                   "timestep": _timesteps(b)},
    ),
    "wan-vace": (
        _new(
            "WanVACETransformer3DModel", patch_size=(1, 2, 2), num_attention_heads=2, attention_head_dim=12,
            in_channels=16, out_channels=16, text_dim=32, freq_dim=256, ffn_dim=32, num_layers=4, cross_attn_norm=True,
            qk_norm="rms_norm_across_heads", rope_max_seq_len=32, vace_layers=(0, 2), vace_in_channels=48,
        ),
        lambda b: {"hidden_states": _randn(b, 16, 2, 16, 16), "encoder_hidden_states": _randn(b, 12, 32),
                   "control_hidden_states": _randn(b, 48, 2, 16, 16), "timestep": _timesteps(b)},
    ),
    "chronoedit": (
        _new(
            "ChronoEditTransformer3DModel", patch_size=(1, 2, 2), num_attention_heads=2, attention_head_dim=8,
            in_channels=16, out_channels=16, text_dim=32, freq_dim=16, ffn_dim=32, num_layers=2, cross_attn_norm=True,
            qk_norm="rms_norm_across_heads", eps=1e-6, image_dim=None, added_kv_proj_dim=None, rope_max_seq_len=64,
            pos_embed_seq_len=None, rope_temporal_skip_len=8,
        ),
        lambda b: {"hidden_states": _randn(b, 16, 2, 8, 8), "timestep": _timesteps(b),
                   "encoder_hidden_states": _randn(b, 12, 32)},
    ),
    "skyreels-v2": (
        _new(
            "SkyReelsV2Transformer3DModel", patch_size=(1, 2, 2), num_attention_heads=2, attention_head_dim=12,
            in_channels=4, out_channels=4, text_dim=16, freq_dim=256, ffn_dim=32, num_layers=2, cross_attn_norm=True,
            qk_norm="rms_norm_across_heads", rope_max_seq_len=32,
        ),
        lambda b: {"hidden_states": _randn(b, 4, 2, 16, 16), "encoder_hidden_states": _randn(b, 12, 16),
                   "timestep": _timesteps(b)},
    ),
    "latte": (
        _new(
            "LatteTransformer3DModel", sample_size=8, num_layers=1, patch_size=2, attention_head_dim=4,
            num_attention_heads=2, caption_channels=8, in_channels=4, cross_attention_dim=8, out_channels=8,
            attention_bias=True, activation_fn="gelu-approximate", num_embeds_ada_norm=1000,
            norm_type="ada_norm_single", norm_elementwise_affine=False, norm_eps=1e-6,
        ),
        lambda b: {"hidden_states": _randn(b, 4, 1, 8, 8), "encoder_hidden_states": _randn(b, 8, 8),
                   "timestep": _timesteps(b).long()},
    ),
    "cogview3plus": (
        _new(
            "CogView3PlusTransformer2DModel", patch_size=2, in_channels=4, num_layers=2, attention_head_dim=4,
            num_attention_heads=2, out_channels=4, text_embed_dim=8, time_embed_dim=8, condition_dim=2,
            pos_embed_max_size=8, sample_size=8,
        ),
        lambda b: {"hidden_states": _randn(b, 4, 8, 8), "encoder_hidden_states": _randn(b, 8, 8),
                   "original_size": _rows(b, 64, 64), "target_size": _rows(b, 64, 64), "crop_coords": _rows(b, 0, 0),
                   "timestep": _timesteps(b)},
    ),
    "cogview4": (
        _new(
            "CogView4Transformer2DModel", patch_size=2, in_channels=4, num_layers=2, attention_head_dim=4,
            num_attention_heads=4, out_channels=4, text_embed_dim=8, time_embed_dim=8, condition_dim=4,
        ),
        lambda b: {"hidden_states": _randn(b, 4, 8, 8), "encoder_hidden_states": _randn(b, 8, 8),
                   "timestep": _timesteps(b), "original_size": _rows(b, 64, 64), "target_size": _rows(b, 64, 64),
                   "crop_coords": _rows(b, 0, 0)},
    ),
    "glm-image": (
        _new(
            "GlmImageTransformer2DModel", patch_size=2, in_channels=4, out_channels=4, num_layers=1,
            attention_head_dim=8, num_attention_heads=2, text_embed_dim=32, time_embed_dim=16, condition_dim=8,
            prior_vq_quantizer_codebook_size=64,
        ),
        lambda b: {"hidden_states": _randn(b, 4, 8, 8), "encoder_hidden_states": _randn(b, 12, 32),
                   "prior_token_id": torch.arange(b * 16).reshape(b, 16) % 64,  # one prior token per patch
                   "prior_token_drop": torch.zeros(b, 16, dtype=torch.bool),
                   "timestep": _timesteps(b), "target_size": _rows(b, 8, 8), "crop_coords": _rows(b, 0, 0)},
    ),
    "chroma": (
        _new(
            "ChromaTransformer2DModel", patch_size=1, in_channels=4, num_layers=1, num_single_layers=1,
            attention_head_dim=16, num_attention_heads=2, joint_attention_dim=TEXT_DIM, axes_dims_rope=(4, 4, 8),
            approximator_num_channels=8, approximator_hidden_dim=16, approximator_layers=1,
        ),
        lambda b: {"hidden_states": _randn(b, 16, 4), "encoder_hidden_states": _randn(b, TEXT, TEXT_DIM),
                   "img_ids": _image_ids(4, 4), "txt_ids": torch.zeros(TEXT, 3), "timestep": _timesteps(b) / 1000},
    ),
    "flux2": (
        _new(
            "Flux2Transformer2DModel", patch_size=1, in_channels=4, num_layers=1, num_single_layers=1,
            attention_head_dim=16, num_attention_heads=2, joint_attention_dim=TEXT_DIM, timestep_guidance_channels=256,
            axes_dims_rope=(4, 4, 4, 4),
        ),
        lambda b: {
            "hidden_states": _randn(b, 16, 4), "encoder_hidden_states": _randn(b, TEXT, TEXT_DIM),
            # (t, row, column, l) ids, shared by the batch.
            "img_ids": torch.cartesian_prod(torch.arange(1), torch.arange(4), torch.arange(4), torch.arange(1)),
            "txt_ids": torch.cartesian_prod(torch.arange(1), torch.arange(1), torch.arange(1), torch.arange(TEXT)),
            "timestep": _timesteps(b) / 1000, "guidance": torch.full((b,), 1.0),
        },
    ),
    "bria": (
        _new(
            "BriaTransformer2DModel", patch_size=1, in_channels=4, num_layers=1, num_single_layers=1,
            attention_head_dim=8, num_attention_heads=2, joint_attention_dim=TEXT_DIM, pooled_projection_dim=None,
            axes_dims_rope=(0, 4, 4),
        ),
        lambda b: {"hidden_states": _randn(b, 16, 4), "encoder_hidden_states": _randn(b, TEXT, TEXT_DIM),
                   "img_ids": _image_ids(4, 4), "txt_ids": torch.zeros(TEXT, 3), "timestep": _timesteps(b) / 1000},
    ),
    "bria-fibo": (
        _new(
            "BriaFiboTransformer2DModel", patch_size=1, in_channels=48, num_layers=1, num_single_layers=1,
            attention_head_dim=8, num_attention_heads=2, joint_attention_dim=64, text_encoder_dim=32,
            pooled_projection_dim=None, axes_dims_rope=(0, 4, 4),
        ),
        lambda b: {
            "hidden_states": _randn(b, 256, 48), "encoder_hidden_states": _randn(b, 32, 64),
            "img_ids": _image_ids(16, 16), "txt_ids": torch.zeros(32, 3), "timestep": _timesteps(b) / 1000,
            "text_encoder_layers": [_randn(b, 32, 32), _randn(b, 32, 32)],
        },
    ),
    "ovis-image": (
        _new(
            "OvisImageTransformer2DModel", patch_size=1, in_channels=4, out_channels=4, num_layers=1,
            num_single_layers=1, attention_head_dim=16, num_attention_heads=2, joint_attention_dim=TEXT_DIM,
            axes_dims_rope=(4, 4, 8),
        ),
        lambda b: {"hidden_states": _randn(b, 16, 4), "encoder_hidden_states": _randn(b, TEXT, TEXT_DIM),
                   "img_ids": _image_ids(4, 4), "txt_ids": torch.zeros(TEXT, 3), "timestep": _timesteps(b) / 1000},
    ),
    "longcat-image": (
        _new(
            "LongCatImageTransformer2DModel", patch_size=1, in_channels=4, num_layers=1, num_single_layers=1,
            attention_head_dim=16, num_attention_heads=2, joint_attention_dim=TEXT_DIM, pooled_projection_dim=32,
            axes_dims_rope=(4, 4, 8),
        ),
        lambda b: {"hidden_states": _randn(b, 16, 4), "encoder_hidden_states": _randn(b, TEXT, TEXT_DIM),
                   "img_ids": _image_ids(4, 4), "txt_ids": torch.zeros(TEXT, 3), "timestep": _timesteps(b) / 1000,
                   "guidance": torch.full((b,), 3.5)},
    ),
    "qwenimage": (
        _new(
            "QwenImageTransformer2DModel", patch_size=2, in_channels=16, out_channels=4, num_layers=2,
            attention_head_dim=16, num_attention_heads=4, joint_attention_dim=16, guidance_embeds=False,
            axes_dims_rope=(8, 4, 4),
        ),
        lambda b: {"hidden_states": _randn(b, 16, 16), "encoder_hidden_states": _randn(b, 8, 16),
                   "encoder_hidden_states_mask": _ones(b, 8, dtype=torch.int64), "timestep": _timesteps(b) / 1000},
    ),
    "hidream": (
        _new(
            "HiDreamImageTransformer2DModel", patch_size=2, in_channels=4, out_channels=4, num_layers=1,
            num_single_layers=1, attention_head_dim=8, num_attention_heads=4, caption_channels=(8, 4), text_emb_dim=8,
            num_routed_experts=2, num_activated_experts=2, axes_dims_rope=(4, 2, 2), max_resolution=(32, 32),
            llama_layers=(0, 1), force_inference_output=True,
        ),
        lambda b: {"hidden_states": _randn(b, 4, 32, 32), "encoder_hidden_states_t5": _randn(b, 8, 8),
                   # one per llama layer, then the batch
                   "encoder_hidden_states_llama3": _randn(2, b, 8, 4), "pooled_embeds": _randn(b, 8),
                   "timesteps": _timesteps(b)},
    ),
    "omnigen": (
        _new(
            "OmniGenTransformer2DModel", hidden_size=16, num_attention_heads=4, num_key_value_heads=4,
            intermediate_size=32, num_layers=20, pad_token_id=0, vocab_size=1000, in_channels=4, time_step_dim=4,
            rope_scaling={"long_factor": [1, 2], "short_factor": [1, 2]},
        ),
        # Text only (no input images): 24 tokens, the time token and 16 latent patches.
        lambda b: {"hidden_states": _randn(b, 4, 8, 8), "timestep": _timesteps(b) / 1000,
                   "input_ids": torch.arange(b * 24).reshape(b, 24) % 10 + 1, "attention_mask": _ones(b, 41, 41),
                   "position_ids": torch.arange(41).expand(b, 41)},
    ),
    "cosmos": (
        _new(
            "CosmosTransformer3DModel", in_channels=4, out_channels=4, num_attention_heads=2, attention_head_dim=12,
            num_layers=2, mlp_ratio=2, text_embed_dim=16, adaln_lora_dim=4, max_size=(4, 32, 32), patch_size=(1, 2, 2),
            rope_scale=(2.0, 1.0, 1.0), extra_pos_embed_type="learnable",
            # The tests' concat_padding_mask=True resizes the mask with torchvision, not installed here.
            concat_padding_mask=False,
        ),
        lambda b: {"hidden_states": _randn(b, 4, 1, 16, 16), "timestep": _timesteps(b),
                   "encoder_hidden_states": _randn(b, 12, 16), "attention_mask": _ones(b, 12)},
    ),
    "hunyuan-video": (
        _new(
            "HunyuanVideoTransformer3DModel", in_channels=4, out_channels=4, num_attention_heads=2,
            attention_head_dim=10, num_layers=1, num_single_layers=1, num_refiner_layers=1, patch_size=1,
            patch_size_t=1, guidance_embeds=True, text_embed_dim=16, pooled_projection_dim=8, rope_axes_dim=(2, 4, 4),
            image_condition_type=None,
        ),
        lambda b: {"hidden_states": _randn(b, 4, 1, 16, 16), "timestep": _timesteps(b),
                   "encoder_hidden_states": _randn(b, 12, 16), "pooled_projections": _randn(b, 8),
                   "encoder_attention_mask": _ones(b, 12), "guidance": torch.full((b,), 500.0)},
    ),
    "hunyuan-video15": (
        _new(
            "HunyuanVideo15Transformer3DModel", in_channels=4, out_channels=4, num_attention_heads=2,
            attention_head_dim=8, num_layers=2, num_refiner_layers=1, mlp_ratio=2.0, patch_size=1, patch_size_t=1,
            text_embed_dim=16, text_embed_2_dim=8, image_embed_dim=12, rope_axes_dim=(2, 2, 4), target_size=16,
            task_type="t2v",
        ),
        lambda b: {"hidden_states": _randn(b, 4, 1, 8, 8), "timestep": _timesteps(b),
                   "encoder_hidden_states": _randn(b, 6, 16), "encoder_hidden_states_2": _randn(b, 4, 8),
                   "encoder_attention_mask": _ones(b, 6), "encoder_attention_mask_2": _ones(b, 4),
                   "image_embeds": torch.zeros(b, 3, 12)},
    ),
    "easyanimate": (
        _new(
            "EasyAnimateTransformer3DModel", attention_head_dim=16, num_attention_heads=2, in_channels=4,
            mmdit_layers=2, num_layers=2, out_channels=4, patch_size=2, sample_height=60, sample_width=90,
            text_embed_dim=16, time_embed_dim=8, time_position_encoding_type="3d_rope", timestep_activation_fn="silu",
        ),
        lambda b: {"hidden_states": _randn(b, 4, 2, 16, 16), "timestep": _timesteps(b),
                   "encoder_hidden_states": _randn(b, 16, 16)},
    ),
    "ernie-image": (
        _new(
            "ErnieImageTransformer2DModel", hidden_size=16, num_attention_heads=1, num_layers=1, ffn_hidden_size=16,
            in_channels=16, out_channels=16, patch_size=1, text_in_dim=16, rope_theta=256, rope_axes_dim=(8, 4, 4),
            eps=1e-6, qk_layernorm=True,
        ),
        lambda b: {"hidden_states": _randn(b, 16, 16, 16), "timestep": _timesteps(b),
                   "text_bth": _randn(b, 16, 16), "text_lens": torch.full((b,), 16)},
    ),
    "z-image": (
        _new(
            "ZImageTransformer2DModel", all_patch_size=(2,), all_f_patch_size=(1,), in_channels=16, dim=16, n_layers=1,
            n_refiner_layers=1, n_heads=1, n_kv_heads=2, qk_norm=True, cap_feat_dim=16, rope_theta=256.0,
            t_scale=1000.0, axes_dims=(8, 4, 4), axes_lens=(256, 32, 32),
        ),
        lambda b: {"x": [_randn(16, 1, 16, 16)] * b, "cap_feats": [_randn(16, 16)] * b, "t": _timesteps(b) / 1000},
    ),
    "stable-audio": (
        _new(
            "StableAudioDiTModel", sample_size=4, in_channels=3, num_layers=2, attention_head_dim=4,
            num_key_value_attention_heads=2, out_channels=3, cross_attention_dim=4, time_proj_dim=8,
            global_states_input_dim=8, cross_attention_input_dim=4,
        ),
        # The global state is prepended to the 8 latent steps: rotary positions for 9.
        lambda b: {"hidden_states": _randn(b, 3, 8), "timestep": _timesteps(b),
                   "encoder_hidden_states": _randn(b, TEXT, 4), "global_hidden_states": _randn(b, 1, 8),
                   "rotary_embedding": _rope(9, 2)},
    ),
    # -- controlnets
    "controlnet": (
        _new(
            "ControlNetModel", block_out_channels=(4, 8), layers_per_block=2, in_channels=4,
            down_block_types=("DownBlock2D", "CrossAttnDownBlock2D"), cross_attention_dim=TEXT_DIM,
            conditioning_embedding_out_channels=(16, 32), norm_num_groups=1,
        ),
        lambda b: {"sample": _randn(b, 4, 16, 16), "timestep": _timesteps(b),
                   "encoder_hidden_states": _randn(b, TEXT, TEXT_DIM), "controlnet_cond": _randn(b, 3, 32, 32)},
    ),
    "controlnet-xs": (
        _new(
            "UNetControlNetXSModel", sample_size=16, down_block_types=("DownBlock2D", "CrossAttnDownBlock2D"),
            up_block_types=("CrossAttnUpBlock2D", "UpBlock2D"), block_out_channels=(4, 8), cross_attention_dim=8,
            transformer_layers_per_block=1, num_attention_heads=2, norm_num_groups=4, upcast_attention=False,
            ctrl_block_out_channels=(2, 4), ctrl_num_attention_heads=4, ctrl_max_norm_num_groups=2,
            ctrl_conditioning_embedding_out_channels=(2, 2),
        ),
        lambda b: {"sample": _randn(b, 4, 16, 16), "timestep": _timesteps(b), "encoder_hidden_states": _randn(b, 4, 8),
                   "controlnet_cond": _randn(b, 3, 32, 32)},
    ),
    "sd3-controlnet": (
        _new(
            "SD3ControlNetModel", sample_size=32, patch_size=1, in_channels=8, num_layers=1, attention_head_dim=8,
            num_attention_heads=4, joint_attention_dim=TEXT_DIM, caption_projection_dim=32, pooled_projection_dim=64,
            out_channels=8,
        ),
        lambda b: {"hidden_states": _randn(b, 8, 16, 16), "controlnet_cond": _randn(b, 8, 16, 16),
                   "encoder_hidden_states": _randn(b, TEXT, TEXT_DIM), "pooled_projections": _randn(b, 64),
                   "timestep": _timesteps(b)},
    ),
    "flux-controlnet": (
        _new(
            "FluxControlNetModel", patch_size=1, in_channels=16, num_layers=1, num_single_layers=1,
            attention_head_dim=16, num_attention_heads=2, joint_attention_dim=TEXT_DIM, pooled_projection_dim=32,
            axes_dims_rope=(4, 4, 8),
        ),
        lambda b: {"hidden_states": _randn(b, 16, 16), "controlnet_cond": _randn(b, 16, 16),
                   "encoder_hidden_states": _randn(b, TEXT, TEXT_DIM), "pooled_projections": _randn(b, 32),
                   "timestep": _timesteps(b) / 1000, "img_ids": _image_ids(4, 4), "txt_ids": torch.zeros(TEXT, 3)},
    ),
}

# Inputs shared by the whole batch (position ids, rotary tables) have no batch dimension.
_UNBATCHED = {"img_ids", "txt_ids", "image_rotary_emb", "rotary_embedding"}

# Dynamic shapes other than ``{0: "batch"}``, per model and input.
_SHAPES: dict[str, dict[str, Any]] = {
    "hidream": {"encoder_hidden_states_llama3": {1: "batch"}},
    "unet-motion": {"encoder_hidden_states": {0: "batch_frames"}},  # batch x frames rows
}

# Call arguments that are not tensors (sizes, flags), per model: passed as they are, never dynamic.
_OPTIONS: dict[str, dict[str, Any]] = {
    "latte": {"enable_temporal_attentions": True},
    "lumina-next": {"cross_attention_kwargs": {}},
    "ltx-video": {"num_frames": 2, "height": 16, "width": 16},
    "ltx2-video": {"num_frames": 2, "height": 16, "width": 16, "audio_num_frames": 9, "fps": 25.0},
    "qwenimage": {"img_shapes": [(1, 4, 4)]},  # one (frames, rows, columns) for the whole batch
    "omnigen": {"input_img_latents": [], "input_image_sizes": {}},
    "cosmos": {"fps": 30},
    "autoencoder-kl-temporal-decoder": {"num_frames": 2},
}

# Models exported with a fixed batch (example batch 2, no second input set), and why.
_STATIC_BATCH = {
    # Takes a list of per-image tensors: the batch is the list's length, a Python int.
    "z-image",
    # Decodes a batch of frames as videos of num_frames (an int): the batch is that many frames.
    "autoencoder-kl-temporal-decoder",
}

# Called without return_dict: our own wrappers, and UVit2DModel, whose forward has none.
_PLAIN = {"autoencoder-kl-encoder", "autoencoder-kl-decoder", "consistency-decoder-vae-encoder", "uvit2d"}


def _shapes(value: Any, dynamic: Any) -> Any:
    """The dynamic shapes of an input, in its structure (torch.export wants lists, tuples and dicts
    mirrored, empty ones included): ``dynamic`` for each tensor, None for anything else."""
    if isinstance(value, torch.Tensor):
        return dynamic
    if isinstance(value, dict):
        return {key: _shapes(item, dynamic) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_shapes(item, dynamic) for item in value)
    return None


def _case(name: str) -> ModelCase:
    make, inputs = _MODELS[name]
    # diffusers' own models return a tuple with return_dict=False.
    extra = {**({} if name in _PLAIN else {"return_dict": False}), **_OPTIONS.get(name, {})}
    static = name in _STATIC_BATCH

    def build() -> tuple[Any, tuple, dict, Any]:
        torch.manual_seed(0)
        kwargs = inputs(2)
        overrides = _SHAPES.get(name, {})
        shapes = {
            key: _shapes(value, None if static or key in _UNBATCHED else overrides.get(key, {0: "batch"}))
            for key, value in kwargs.items()
        }
        shapes.update((key, _shapes(value, None)) for key, value in extra.items())
        return make().eval(), (), {**kwargs, **extra}, shapes

    second = None if static else (lambda: ((), {**inputs(3), **extra}))
    return ModelCase(f"diff-{name}", build, "diffusion", second, rtol=RTOL, atol=ATOL, ci=False, float64_reference=True)


def cases() -> list[ModelCase]:
    return [_case(name) for name in _MODELS]
