"""The model corpus: small, randomly initialised models that exports are checked against.

Each :class:`ModelCase` builds a model in eval mode with example inputs and the dynamic shapes to
export with, and a second input set of other dynamic sizes, so a test (or a benchmark sweep) can
check that the exported graph is not specialised to the example. transformers models are built
from tiny ``*Config`` objects (hidden size 32, 2 layers, vocabulary 100) with random weights:
nothing is downloaded, and the whole corpus exports in a minute or two on two CPU cores.

Text inputs of the second set are right-padded, so attention masks with zeros are exercised
without creating fully masked query rows (whose outputs are ill-defined in eager PyTorch too).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

import torch
from torch import nn

__all__ = ["ModelCase", "CORPUS", "by_name", "SmallCNN", "MLP", "RecurrentTagger"]

Inputs = tuple[tuple[Any, ...], dict[str, Any]]
Built = tuple[nn.Module, tuple[Any, ...], dict[str, Any], Any]


@dataclasses.dataclass
class ModelCase:
    """One corpus entry.

    ``build`` returns ``(model in eval mode, args, kwargs, dynamic_shapes or None)``;
    ``second_inputs`` returns another ``(args, kwargs)`` with different dynamic sizes.
    ``family`` is one of text-encoder, decoder, encoder-decoder, vision, speech, handwritten.
    """

    name: str
    build: Callable[[], Built]
    family: str
    second_inputs: Callable[[], Inputs] | None = None
    rtol: float = 1e-4
    atol: float = 1e-5


VOCAB = 100
HIDDEN = 32
IMAGE_SIZE = 32

# -- inputs --------------------------------------------------------------------------------------


def _randn(*shape: int) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(sum(shape)))


def _tokens(batch: int, length: int) -> torch.Tensor:
    generator = torch.Generator().manual_seed(batch * 1000 + length)
    # Ids from 3 up, clear of the pad/bos/eos ids the configs use.
    return torch.randint(3, VOCAB, (batch, length), generator=generator)


def _text(batch: int, length: int, *, pad: bool = False) -> dict[str, torch.Tensor]:
    """``input_ids`` and ``attention_mask``; with ``pad`` row ``i`` ends in ``i`` padding tokens."""
    attention_mask = torch.ones(batch, length, dtype=torch.int64)
    if pad:
        for row in range(1, batch):
            attention_mask[row, length - row :] = 0
    return {"input_ids": _tokens(batch, length), "attention_mask": attention_mask}


def _seq2seq(batch: int, length: int, target: int, *, pad: bool = False) -> dict[str, torch.Tensor]:
    return {**_text(batch, length, pad=pad), "decoder_input_ids": _tokens(batch, target)}


TEXT_SHAPES = {"input_ids": {0: "batch", 1: "sequence"}, "attention_mask": {0: "batch", 1: "sequence"}}
SEQ2SEQ_SHAPES = {**TEXT_SHAPES, "decoder_input_ids": {0: "batch", 1: "target_sequence"}}
IMAGE_SHAPES = {"pixel_values": {0: "batch"}}

# -- transformers models ----------------------------------------------------------------------------


def _transformers_case(
    name: str,
    family: str,
    model_class: str,
    config_class: str,
    config: dict[str, Any],
    example: Callable[[], dict[str, Any]],
    second: Callable[[], dict[str, Any]],
    dynamic_shapes: Any,
) -> ModelCase:
    """A transformers model called with keyword inputs, built from ``config_class(**config)``."""

    def build() -> Built:
        import transformers

        settings = getattr(transformers, config_class)(**config)
        # sdpa exports as one attention op per layer; no KV cache keeps the outputs plain tensors.
        settings._attn_implementation = "sdpa"
        settings.use_cache = False
        torch.manual_seed(0)
        model = getattr(transformers, model_class)(settings).eval()
        return model, (), example(), dynamic_shapes

    return ModelCase(name, build, family, lambda: ((), second()))


def _text_case(name: str, family: str, model_class: str, config_class: str, **config: Any) -> ModelCase:
    """Called with ``input_ids``/``attention_mask`` of dynamic batch and sequence."""
    return _transformers_case(
        name, family, model_class, config_class, config,
        lambda: _text(2, 8), lambda: _text(3, 5, pad=True), TEXT_SHAPES,
    )


def _seq2seq_case(name: str, model_class: str, config_class: str, **config: Any) -> ModelCase:
    """Called with source ids and mask and decoder ids, every length dynamic."""
    return _transformers_case(
        name, "encoder-decoder", model_class, config_class, config,
        lambda: _seq2seq(2, 8, 6), lambda: _seq2seq(3, 5, 4, pad=True), SEQ2SEQ_SHAPES,
    )


def _image_case(name: str, model_class: str, config_class: str, **config: Any) -> ModelCase:
    """Called with ``pixel_values`` of a dynamic batch; the image size is fixed by the config."""
    return _transformers_case(
        name, "vision", model_class, config_class, {"image_size": IMAGE_SIZE, **config},
        lambda: {"pixel_values": _randn(2, 3, IMAGE_SIZE, IMAGE_SIZE)},
        lambda: {"pixel_values": _randn(3, 3, IMAGE_SIZE, IMAGE_SIZE)},
        IMAGE_SHAPES,
    )


# The transformer blocks every model shares.
_BLOCKS = dict(hidden_size=HIDDEN, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4)
_ENCODER = dict(_BLOCKS, vocab_size=VOCAB, max_position_embeddings=64)
# Grouped-query attention: 4 query heads share 2 key/value heads.
_LLM = dict(_ENCODER, num_key_value_heads=2)
_SEQ2SEQ = dict(
    vocab_size=VOCAB,
    d_model=HIDDEN,
    encoder_layers=2,
    decoder_layers=2,
    encoder_attention_heads=4,
    decoder_attention_heads=4,
    encoder_ffn_dim=64,
    decoder_ffn_dim=64,
)


def _decoder_case(name: str, model_class: str, config_class: str, **config: Any) -> ModelCase:
    return _text_case(name, "decoder", model_class, config_class, **_LLM, **config)


_WHISPER_MELS = 16
_WHISPER_SOURCE_POSITIONS = 16


def _whisper_inputs(batch: int, target: int) -> dict[str, torch.Tensor]:
    # Whisper's encoder requires exactly 2 * max_source_positions frames: only the batch and the
    # decoder length are dynamic.
    features = _randn(batch, _WHISPER_MELS, 2 * _WHISPER_SOURCE_POSITIONS)
    return {"input_features": features, "decoder_input_ids": _tokens(batch, target)}


_WHISPER = _transformers_case(
    "whisper",
    "speech",
    "WhisperForConditionalGeneration",
    "WhisperConfig",
    dict(
        _SEQ2SEQ,
        num_mel_bins=_WHISPER_MELS,
        max_source_positions=_WHISPER_SOURCE_POSITIONS,
        max_target_positions=32,
        pad_token_id=1,
        bos_token_id=1,
        eos_token_id=2,
        decoder_start_token_id=1,
    ),
    lambda: _whisper_inputs(2, 6),
    lambda: _whisper_inputs(3, 4),
    {"input_features": {0: "batch"}, "decoder_input_ids": {0: "batch", 1: "target_sequence"}},
)

_WAV2VEC2 = _transformers_case(
    "wav2vec2",
    "speech",
    "Wav2Vec2ForCTC",
    "Wav2Vec2Config",
    dict(
        _BLOCKS,
        vocab_size=32,
        # Two feature-extractor convolutions (stride 10 in all) instead of seven (stride 320).
        conv_dim=(16, 16),
        conv_stride=(5, 2),
        conv_kernel=(10, 3),
        num_conv_pos_embeddings=8,
        num_conv_pos_embedding_groups=4,
        do_stable_layer_norm=True,
        feat_extract_norm="layer",
    ),
    lambda: {"input_values": _randn(2, 400)},
    lambda: {"input_values": _randn(3, 560)},
    {"input_values": {0: "batch", 1: "samples"}},
)

# -- hand-written models --------------------------------------------------------------------------


class SmallCNN(nn.Module):
    """Convolutions, batch norm, pooling and a linear head: the classic image classifier."""

    def __init__(self, classes: int = 10):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 16, 3, padding=1),
            nn.BatchNorm2d(16),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1, groups=2),
            nn.BatchNorm2d(32),
            nn.SiLU(),
            nn.AdaptiveAvgPool2d(1),
        )
        self.head = nn.Linear(32, classes)
        # Fresh running statistics (mean 0, variance 1) would make batch norm an identity.
        for module in self.features:
            if isinstance(module, nn.BatchNorm2d):
                module.running_mean.uniform_(-0.5, 0.5)
                module.running_var.uniform_(0.5, 2.0)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        return self.head(torch.flatten(self.features(images), 1))


class MLP(nn.Module):
    def __init__(self, features: int = 16, hidden: int = 64, classes: int = 4):
        super().__init__()
        self.layers = nn.Sequential(
            nn.Linear(features, hidden),
            nn.GELU(),
            nn.LayerNorm(hidden),
            nn.Linear(hidden, hidden),
            nn.Tanh(),
            nn.Linear(hidden, classes),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.log_softmax(self.layers(x), dim=-1)


class RecurrentTagger(nn.Module):
    """Embedding, a 2-layer bidirectional recurrent network and a per-token classifier."""

    def __init__(self, cell: type[nn.RNNBase], hidden: int = HIDDEN, tags: int = 5):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, hidden)
        self.rnn = cell(hidden, hidden, num_layers=2, batch_first=True, bidirectional=True)
        self.head = nn.Linear(2 * hidden, tags)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        output, _ = self.rnn(self.embed(tokens))
        return self.head(output)


def _handwritten(
    name: str, make: Callable[[], nn.Module], example: torch.Tensor, second: torch.Tensor, dynamic_shapes: Any
) -> ModelCase:
    """A hand-written model taking one tensor."""

    def build() -> Built:
        torch.manual_seed(0)
        return make().eval(), (example,), {}, dynamic_shapes

    return ModelCase(name, build, "handwritten", lambda: ((second,), {}))


CORPUS: list[ModelCase] = [
    # -- text encoders
    _text_case("bert", "text-encoder", "BertModel", "BertConfig", **_ENCODER),
    _text_case("roberta", "text-encoder", "RobertaModel", "RobertaConfig", **_ENCODER, pad_token_id=1),
    _text_case("clip-text", "text-encoder", "CLIPTextModel", "CLIPTextConfig", **_ENCODER, bos_token_id=1, eos_token_id=2),
    # -- decoder-only language models
    _text_case(
        "gpt2", "decoder", "GPT2LMHeadModel", "GPT2Config",
        vocab_size=VOCAB, n_embd=HIDDEN, n_layer=2, n_head=4, n_positions=64,
    ),
    _decoder_case("llama", "LlamaForCausalLM", "LlamaConfig"),
    _decoder_case("qwen2", "Qwen2ForCausalLM", "Qwen2Config"),
    _decoder_case("mistral", "MistralForCausalLM", "MistralConfig"),
    _decoder_case("phi3", "Phi3ForCausalLM", "Phi3Config", pad_token_id=0),
    _decoder_case("gemma", "GemmaForCausalLM", "GemmaConfig", head_dim=8),
    # -- encoder-decoders
    _seq2seq_case(
        "t5", "T5ForConditionalGeneration", "T5Config",
        vocab_size=VOCAB, d_model=HIDDEN, d_kv=8, d_ff=64, num_layers=2, num_heads=4, decoder_start_token_id=0,
    ),
    _seq2seq_case("bart", "BartForConditionalGeneration", "BartConfig", **_SEQ2SEQ, max_position_embeddings=64),
    # -- vision
    _image_case("vit", "ViTForImageClassification", "ViTConfig", **_BLOCKS, patch_size=8, num_labels=5),
    _image_case("clip-vision", "CLIPVisionModel", "CLIPVisionConfig", **_BLOCKS, patch_size=8),
    _image_case(
        "swin", "SwinForImageClassification", "SwinConfig",
        patch_size=4, embed_dim=16, depths=[1, 1], num_heads=[2, 4], window_size=4, num_labels=5,
    ),
    # -- speech
    _WHISPER,
    _WAV2VEC2,
    # -- hand-written
    _handwritten("cnn", SmallCNN, _randn(2, 3, 16, 12), _randn(3, 3, 24, 20), ({0: "batch", 2: "height", 3: "width"},)),
    _handwritten("mlp", MLP, _randn(2, 16), _randn(5, 16), ({0: "batch"},)),
    # torch.export specialises the sequence length of aten.lstm/aten.gru (their fake-tensor
    # implementation unrolls the time steps), so only the batch is dynamic.
    _handwritten("lstm", lambda: RecurrentTagger(nn.LSTM), _tokens(2, 8), _tokens(3, 8), ({0: "batch"},)),
    _handwritten("gru", lambda: RecurrentTagger(nn.GRU), _tokens(2, 8), _tokens(3, 8), ({0: "batch"},)),
]


def by_name(name: str) -> ModelCase:
    for case in CORPUS:
        if case.name == name:
            return case
    raise KeyError(f"no corpus model named {name!r}; known: {[c.name for c in CORPUS]}")
