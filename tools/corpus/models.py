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
import importlib.util
from typing import Any, Callable, Iterable

import torch
import torch.nn.functional as F
from torch import nn

__all__ = [
    "ModelCase", "CORPUS", "by_name", "named", "SmallCNN", "MLP", "RecurrentTagger", "AdvancedIndexing", "InPlaceUpdates",
    "Interpolations", "PoolingCorners", "RecurrentVariants", "MaskedAttention", "MixedDtypes", "DataDependentShapes",
    "CondBranches", "ConvolutionCorners", "ScatterGather",
]

Inputs = tuple[tuple[Any, ...], dict[str, Any]]
Built = tuple[nn.Module, tuple[Any, ...], dict[str, Any], Any]


@dataclasses.dataclass
class ModelCase:
    """One corpus entry.

    ``build`` returns ``(model in eval mode, args, kwargs, dynamic_shapes or None)``;
    ``second_inputs`` returns another ``(args, kwargs)`` with different dynamic sizes.
    ``family`` is one of text-encoder, decoder, encoder-decoder, vision, speech, multimodal,
    handwritten. ``ci`` is False for the cases whose export takes more than about 3 s on the CI
    machine (2 cores): ``tests/models/test_corpus.py`` runs only the ``ci`` cases, the model sweep
    (``tools/sweeps/modelsweep.py``) all of them.
    """

    name: str
    build: Callable[[], Built]
    family: str
    second_inputs: Callable[[], Inputs] | None = None
    rtol: float = 1e-4
    atol: float = 1e-5
    ci: bool = True
    # Where rtol/atol fail, compare both results with eager in float64 instead: passes when the
    # ONNX outputs are as close to it as eager's float32 ones (deep random-weight vision nets).
    float64_reference: bool = False


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


def _text(batch: int, length: int, *, pad: bool = False, left: bool = False) -> dict[str, torch.Tensor]:
    """``input_ids`` and ``attention_mask``; with ``pad`` row ``i`` ends in ``i`` padding tokens
    (begins with them when ``left``: how decoders are batched for generation, and what leaves
    the padding positions' query rows nothing to attend to)."""
    attention_mask = torch.ones(batch, length, dtype=torch.int64)
    if pad:
        for row in range(1, batch):
            padding = slice(0, row) if left else slice(length - row, length)
            attention_mask[row, padding] = 0
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
    attention: str | dict[str, str] | None = None,
    **options: Any,
) -> ModelCase:
    """A transformers model called with keyword inputs, built from ``config_class(**config)``.

    ``attention`` overrides the attention implementation (by default sdpa where the model
    supports it, else eager); a dict sets it per sub-config. ``options`` are further
    :class:`ModelCase` fields (``ci``, ``rtol``, ``atol``).
    """

    def build() -> Built:
        import transformers

        settings = getattr(transformers, config_class)(**config)
        model_type = getattr(transformers, model_class)
        # sdpa exports as one attention op per layer; the models without it use their eager
        # attention. No KV cache keeps the outputs plain tensors.
        settings._attn_implementation = attention or ("sdpa" if model_type._supports_sdpa else "eager")
        settings.use_cache = False
        torch.manual_seed(0)
        model = model_type(settings).eval()
        return model, (), example(), dynamic_shapes

    return ModelCase(name, build, family, lambda: ((), second()), **options)


def _text_case(
    name: str, family: str, model_class: str, config_class: str, *, ci: bool = True, **config: Any
) -> ModelCase:
    """Called with ``input_ids``/``attention_mask`` of dynamic batch and sequence."""
    return _transformers_case(
        name, family, model_class, config_class, config,
        lambda: _text(2, 8), lambda: _text(3, 5, pad=True, left=family == "decoder"), TEXT_SHAPES, ci=ci,
    )


def _seq2seq_case(
    name: str, model_class: str, config_class: str, *, ci: bool = True, second_length: int = 5, **config: Any
) -> ModelCase:
    """Called with source ids and mask and decoder ids, every length dynamic; the second input
    set's source is ``second_length`` long."""
    return _transformers_case(
        name, "encoder-decoder", model_class, config_class, config,
        lambda: _seq2seq(2, 8, 6), lambda: _seq2seq(3, second_length, 4, pad=True), SEQ2SEQ_SHAPES, ci=ci,
    )


def _image_case(
    name: str, model_class: str, config_class: str, *, spatial: bool = False, ci: bool = True, **config: Any
) -> ModelCase:
    """Called with ``pixel_values`` of a dynamic batch. The height and width are dynamic too with
    ``spatial`` (convolutional models); otherwise the config's ``image_size`` fixes them."""
    second_size = (48, 40) if spatial else (IMAGE_SIZE, IMAGE_SIZE)
    return _transformers_case(
        name, "vision", model_class, config_class, {"image_size": IMAGE_SIZE, **config},
        lambda: {"pixel_values": _randn(2, 3, IMAGE_SIZE, IMAGE_SIZE)},
        lambda: {"pixel_values": _randn(3, 3, *second_size)},
        {"pixel_values": {0: "batch", 2: "height", 3: "width"}} if spatial else IMAGE_SHAPES,
        ci=ci,
    )


def _multimodal_case(name: str, model_class: str, config_class: str, *, ci: bool = True, **config: Any) -> ModelCase:
    """Called with text (dynamic batch and sequence) and images of the same dynamic batch."""

    def inputs(batch: int, length: int, pad: bool) -> dict[str, torch.Tensor]:
        return {**_text(batch, length, pad=pad), "pixel_values": _randn(batch, 3, IMAGE_SIZE, IMAGE_SIZE)}

    return _transformers_case(
        name, "multimodal", model_class, config_class, config,
        lambda: inputs(2, 8, False), lambda: inputs(3, 5, True), {**TEXT_SHAPES, **IMAGE_SHAPES}, ci=ci,
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
_T5 = dict(vocab_size=VOCAB, d_model=HIDDEN, d_kv=8, d_ff=64, num_layers=2, num_heads=4, decoder_start_token_id=0)
# Two feature-extractor convolutions (stride 10 in all) instead of seven (stride 320).
_FEATURE_EXTRACTOR = dict(
    conv_dim=(16, 16),
    conv_stride=(5, 2),
    conv_kernel=(10, 3),
    num_conv_pos_embeddings=8,
    num_conv_pos_embedding_groups=4,
)
_AUDIO = dict(_BLOCKS, **_FEATURE_EXTRACTOR, vocab_size=32, do_stable_layer_norm=True, feat_extract_norm="layer")
# Vision towers of the multimodal models: 32x32 images in 16 patches.
_VISION_TOWER = dict(_BLOCKS, image_size=IMAGE_SIZE, patch_size=8)


def _decoder_case(name: str, model_class: str, config_class: str, *, ci: bool = True, **config: Any) -> ModelCase:
    return _text_case(name, "decoder", model_class, config_class, ci=ci, **{**_LLM, **config})


def _audio_case(name: str, model_class: str, config_class: str, *, ci: bool = True, **config: Any) -> ModelCase:
    """Called with raw ``input_values`` of dynamic batch and length."""
    return _transformers_case(
        name, "speech", model_class, config_class, {**_AUDIO, **config},
        lambda: {"input_values": _randn(2, 400)},
        lambda: {"input_values": _randn(3, 560)},
        {"input_values": {0: "batch", 1: "samples"}},
        ci=ci,
    )


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

_WAV2VEC2 = _audio_case("wav2vec2", "Wav2Vec2ForCTC", "Wav2Vec2Config")


def _speech_to_text_inputs(batch: int, samples: int, target: int) -> dict[str, torch.Tensor]:
    return {"input_values": _randn(batch, samples), "decoder_input_ids": _tokens(batch, target)}


_SPEECHT5 = _transformers_case(
    "speecht5",
    "speech",
    "SpeechT5ForSpeechToText",
    "SpeechT5Config",
    dict(
        _SEQ2SEQ,
        **_FEATURE_EXTRACTOR,
        hidden_size=HIDDEN,
        max_text_positions=64,
        pad_token_id=1,
        bos_token_id=0,
        eos_token_id=2,
        decoder_start_token_id=2,
    ),
    lambda: _speech_to_text_inputs(2, 400, 6),
    lambda: _speech_to_text_inputs(3, 560, 4),
    {"input_values": {0: "batch", 1: "samples"}, "decoder_input_ids": {0: "batch", 1: "target_sequence"}},
    ci=False,
)

# DETR's backbone: a two-stage ResNet built from its config (no timm, nothing pretrained).
_DETR = _transformers_case(
    "detr",
    "vision",
    "DetrForObjectDetection",
    "DetrConfig",
    dict(
        _SEQ2SEQ,
        backbone_config=dict(
            model_type="resnet", embedding_size=16, hidden_sizes=[16, 32], depths=[1, 1], out_features=["stage2"]
        ),
        use_timm_backbone=False,
        use_pretrained_backbone=False,
        num_queries=5,
        num_labels=5,
    ),
    lambda: {"pixel_values": _randn(2, 3, IMAGE_SIZE, IMAGE_SIZE)},
    lambda: {"pixel_values": _randn(3, 3, 48, 40)},
    {"pixel_values": {0: "batch", 2: "height", 3: "width"}},
    # The ResNet backbone has no attention to choose.
    attention={"": "sdpa", "backbone_config": "eager"},
    ci=False,
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


# -- hand-written stress models: one corner of the operator set each ---------------------------------


class AdvancedIndexing(nn.Module):
    """Reads and writes through int64 index tensors: a gather with negative and repeated indices,
    two broadcast index tensors, ``index_put`` with and without ``accumulate``, a boolean-mask
    assignment and a select assignment."""

    def forward(self, x: torch.Tensor, index: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        picked = x[:, index]
        diagonal = x[:, index, index % x.shape[2]]
        counts = torch.zeros(x.shape[1]).index_put_((index,), torch.ones(index.shape[0]), accumulate=True)
        out = x.clone()
        # A repeated index writes the same value each time, so the result does not depend on order.
        out[:, index] = picked * 2.0
        out[out < 0] = 0.0
        out[:, -1] = diagonal.mean(-1, keepdim=True)
        return out * counts[:, None], diagonal


class InPlaceUpdates(nn.Module):
    """In-place updates of an intermediate: a copy taken before them must not see them; updates
    go through selects, slices and a view of the intermediate."""

    def __init__(self, features: int = 8):
        super().__init__()
        self.linear = nn.Linear(features, features)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h = self.linear(x)
        before = h * 1.0
        h.mul_(0.5)
        h[:, 0] += 1.0
        h[..., :4] = h[..., 4:].sigmoid()
        halves = h.view(h.shape[0], h.shape[1], 2, 4)
        halves[:, :, 1].clamp_(min=-0.25)
        h.masked_fill_(x > 1.0, -1.0)
        return before, torch.relu_(h)


class Interpolations(nn.Module):
    """Every resampling mode of ``F.interpolate`` on inputs of dynamic height and width: by size
    and by scale, up and down, with and without ``align_corners``, antialiased, in 1, 2 and 3-d."""

    def forward(self, images: torch.Tensor) -> tuple[torch.Tensor, ...]:
        size = (12, 10)
        return (
            F.interpolate(images, scale_factor=2, mode="nearest"),
            F.interpolate(images, size=size, mode="nearest-exact"),
            F.interpolate(images, size=size, mode="bilinear", align_corners=False),
            F.interpolate(images, scale_factor=2, mode="bilinear", align_corners=True),
            F.interpolate(images, size=size, mode="bicubic", align_corners=False),
            F.interpolate(images, scale_factor=0.5, mode="bicubic", align_corners=True),
            F.interpolate(images, size=(5, 7), mode="bilinear", antialias=True),
            F.interpolate(images[:, :, 0], scale_factor=3, mode="linear"),
            F.interpolate(images.unsqueeze(2), scale_factor=2, mode="trilinear"),
        )


class PoolingCorners(nn.Module):
    """Pooling corner cases on dynamic height and width: ceil mode, padding, dilation, padding
    left out of averages, a divisor override, 1-d, Lp and global pooling, and max-pool indices."""

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        values, indices = F.max_pool2d(x, 2, return_indices=True)
        return (
            F.max_pool2d(x, 3, stride=2, ceil_mode=True),
            F.max_pool2d(x, 3, stride=1, padding=1, dilation=2),
            F.avg_pool2d(x, 3, stride=2, padding=1, ceil_mode=True, count_include_pad=False),
            F.avg_pool2d(x, (2, 3), stride=(2, 1), padding=(1, 1)),
            F.avg_pool2d(x, 2, divisor_override=3),
            F.max_pool1d(x.flatten(2), 4, stride=3, ceil_mode=True),
            F.lp_pool2d(x, 2, 2),
            F.adaptive_max_pool2d(x, 1),
            values,
            indices,
        )


class RecurrentVariants(nn.Module):
    """The recurrent layers besides RecurrentTagger's: a 2-layer bidirectional relu ``nn.RNN`` from
    a given initial state, a bidirectional LSTM with projections and a time-major bidirectional GRU,
    with padded steps masked out by length (packed sequences do not capture in torch.export)."""

    def __init__(self, features: int = 8):
        super().__init__()
        self.rnn = nn.RNN(features, 16, num_layers=2, nonlinearity="relu", bidirectional=True, batch_first=True)
        self.lstm = nn.LSTM(32, 12, proj_size=6, bidirectional=True, batch_first=True)
        self.gru = nn.GRU(12, 8, bidirectional=True)

    def forward(self, x: torch.Tensor, initial: torch.Tensor, lengths: torch.Tensor) -> tuple[torch.Tensor, ...]:
        out, last = self.rnn(x, initial)
        out, (hidden, cell) = self.lstm(out)
        out, _ = self.gru(out.transpose(0, 1))
        steps = torch.arange(x.shape[1])
        mask = steps[None, :] < lengths[:, None]
        return out.transpose(0, 1) * mask[..., None], last, hidden, cell


class MaskedAttention(nn.Module):
    """Attention under masks: ``scaled_dot_product_attention`` with a boolean padding-and-causal
    mask, with an additive float mask (``-inf`` on padding plus a distance bias), with
    ``is_causal``, and a hand-written softmax attention using ``masked_fill``."""

    def __init__(self, dim: int = 16, heads: int = 2):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.out = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor, padding: torch.Tensor) -> torch.Tensor:
        batch, length, dim = x.shape
        q, k, v = self.qkv(x).view(batch, length, 3, self.heads, dim // self.heads).permute(2, 0, 3, 1, 4)
        keep = padding[:, None, None, :]
        causal = torch.ones(length, length, dtype=torch.bool).tril()
        positions = torch.arange(length)
        distance = (positions[:, None] - positions[None, :]).abs().float()
        additive = torch.zeros(keep.shape).masked_fill(~keep, float("-inf")) - 0.1 * distance
        scores = (q @ k.transpose(-1, -2)) / (dim // self.heads) ** 0.5
        manual = scores.masked_fill(~keep, float("-inf")).softmax(-1) @ v
        mixed = (
            F.scaled_dot_product_attention(q, k, v, attn_mask=keep & causal)
            + F.scaled_dot_product_attention(q, k, v, attn_mask=additive)
            + F.scaled_dot_product_attention(q, k, v, is_causal=True)
            + manual
        )
        return self.out(mixed.transpose(1, 2).reshape(batch, length, dim))


class MixedDtypes(nn.Module):
    """int64 index arithmetic feeding float32 compute, a float16 branch cast back, and int64, bool
    and float outputs from integer division, comparisons, counts and type promotion."""

    def __init__(self, features: int = 8):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, features)
        self.proj = nn.Linear(features, features)

    def forward(self, ids: torch.Tensor) -> tuple[torch.Tensor, ...]:
        positions = ids.cumsum(1) % VOCAB
        h = self.embed(ids) + self.embed(positions)
        half = F.linear(h.half(), self.proj.weight.half(), self.proj.bias.half()).relu() * 0.5
        flags = ids % 3 == 0
        counts = flags.sum(-1)
        return (
            half.float().softmax(-1),
            h.argmax(-1),
            flags,
            counts,
            counts / ids.shape[1],
            ids.float() * 0.5 + flags,
            torch.div(ids - 50, 4, rounding_mode="floor"),
            torch.where(flags, ids, -ids),
        )


class DataDependentShapes(nn.Module):
    """Outputs whose first dimension depends on the input values (an unbacked size in
    torch.export): ``nonzero``, ``masked_select`` and boolean-mask indexing."""

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        positive = x > 0
        return torch.nonzero(positive), torch.masked_select(x, positive) * 2.0, x[x > 1.0]


class CondBranches(nn.Module):
    """``torch.cond`` on a data-dependent predicate, each branch with its own parameters; the two
    input sets of the corpus take different branches."""

    def __init__(self, features: int = 8):
        super().__init__()
        self.up = nn.Linear(features, features)
        self.down = nn.Linear(features, features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        def positive(t: torch.Tensor) -> torch.Tensor:
            return self.up(t).relu()

        def negative(t: torch.Tensor) -> torch.Tensor:
            return self.down(t).tanh() - 1.0

        return torch.cond(x.sum() > 0, positive, negative, (x,))


class ConvolutionCorners(nn.Module):
    """Convolution corner cases on dynamic height and width: a grouped transposed convolution with
    output padding, ``padding="same"`` with dilation, reflect and circular padding modes, a
    strided depthwise convolution and a pixel shuffle."""

    def __init__(self, channels: int = 4):
        super().__init__()
        self.transposed = nn.ConvTranspose2d(channels, 6, 3, stride=2, padding=1, output_padding=1, groups=2)
        self.same = nn.Conv2d(6, 6, 3, padding="same", dilation=2)
        self.reflect = nn.Conv2d(6, channels, 3, padding=1, padding_mode="reflect")
        self.circular = nn.Conv1d(channels, channels, 3, padding=1, padding_mode="circular")
        self.depthwise = nn.Conv2d(channels, 2 * channels, 5, stride=2, padding=2, groups=channels, bias=False)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        y = self.reflect(self.same(self.transposed(x)))
        return F.pixel_shuffle(self.depthwise(y), 2), self.circular(y.mean(-1))


class ScatterGather(nn.Module):
    """Index-driven reductions along a dimension: gather, scatter_add, scatter_reduce (amax without
    self, mean with self), index_add, an int64 gather in argsort order, and topk indices.
    (``take_along_dim`` is left out: torch.export specialises every dynamic size it sees.)"""

    def forward(self, x: torch.Tensor, index: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return (
            torch.gather(x, 1, index),
            torch.zeros_like(x).scatter_add(1, index, x),
            torch.full_like(x, -1.0).scatter_reduce(1, index, x, reduce="amax", include_self=False),
            x.scatter_reduce(1, index, x, reduce="mean"),
            x.index_add(1, index[0], x * 2.0),
            index.gather(1, x.argsort(-1, descending=True)),
            x.topk(3, dim=-1).indices,
        )


def _handwritten(
    name: str,
    make: Callable[[], nn.Module],
    example: torch.Tensor | tuple[torch.Tensor, ...],
    second: torch.Tensor | tuple[torch.Tensor, ...],
    dynamic_shapes: Any,
    **options: Any,
) -> ModelCase:
    """A hand-written model taking one tensor or a tuple of tensors; ``options`` as in ModelCase."""
    example_args = example if isinstance(example, tuple) else (example,)
    second_args = second if isinstance(second, tuple) else (second,)

    def build() -> Built:
        torch.manual_seed(0)
        return make().eval(), example_args, {}, dynamic_shapes

    return ModelCase(name, build, "handwritten", lambda: (second_args, {}), **options)


def _lengths(*values: int) -> torch.Tensor:
    return torch.tensor(values, dtype=torch.int64)


def _padding(lengths: torch.Tensor, length: int) -> torch.Tensor:
    """A boolean mask, True on the first ``lengths[i]`` positions of row ``i``."""
    return torch.arange(length)[None, :] < lengths[:, None]


def _indices(batch: int, n: int) -> torch.Tensor:
    generator = torch.Generator().manual_seed(batch * 100 + n)
    return torch.stack([torch.randint(0, n, (n,), generator=generator) for _ in range(batch)])


def calibrate(model: torch.nn.Module, batch: Callable[[], tuple], steps: int = 2) -> torch.nn.Module:
    """Make an untrained network's outputs informative, in place; returns it in eval mode.

    Untrained, BatchNorm statistics (mean 0, var 1) do not fit the activations, which shrink layer
    by layer (mobilenet_v3's logits were ~1e-9, below any absolute tolerance): they are re-estimated
    on ``steps`` random batches. Linear layers initialised to zero (ViT's head) get small weights.
    """
    for module in model.modules():
        if isinstance(module, torch.nn.modules.batchnorm._BatchNorm):
            module.reset_running_stats()
            module.momentum = None  # a cumulative average over the calibration batches
        if isinstance(module, torch.nn.Linear) and not module.weight.any():
            torch.nn.init.normal_(module.weight, std=0.02)
    model.train()
    with torch.no_grad():
        for _ in range(steps):
            model(*batch())
    return model.eval()


# torchvision's classifiers as published, random weights. torchvision pins torch 2.14.1, so they are
# in the corpus only where it is importable (a separate environment: see docs/coverage.md).
_TORCHVISION_MODELS = (
    "resnet18", "mobilenet_v3_small", "efficientnet_b0", "vit_b_16", "convnext_tiny", "swin_t", "regnet_y_400mf",
    "densenet121",
)


def _torchvision_case(builder: str) -> ModelCase:
    def build() -> Built:
        import torchvision

        torch.manual_seed(0)
        model = getattr(torchvision.models, builder)(weights=None)
        calibrate(model, lambda: (torch.randn(8, 3, 224, 224),))
        return model, (_randn(2, 3, 224, 224),), {}, ({0: "batch"},)

    # Full-size networks (1.5M to 86M parameters): far beyond the CI budget.
    return ModelCase(f"torchvision-{builder}", build, "vision", lambda: ((_randn(3, 3, 224, 224),), {}), ci=False)


def _torchvision_cases() -> list[ModelCase]:
    if importlib.util.find_spec("torchvision") is None:
        return []
    return [_torchvision_case(builder) for builder in _TORCHVISION_MODELS]


_IMAGE_DIMS = {0: "batch", 2: "height", 3: "width"}

CORPUS: list[ModelCase] = [
    # -- text encoders
    _text_case("bert", "text-encoder", "BertModel", "BertConfig", **_ENCODER),
    _text_case("roberta", "text-encoder", "RobertaModel", "RobertaConfig", **_ENCODER, pad_token_id=1),
    _text_case("clip-text", "text-encoder", "CLIPTextModel", "CLIPTextConfig", **_ENCODER, bos_token_id=1, eos_token_id=2),
    _text_case(
        "distilbert", "text-encoder", "DistilBertModel", "DistilBertConfig",
        vocab_size=VOCAB, dim=HIDDEN, hidden_dim=64, n_layers=2, n_heads=4, max_position_embeddings=64,
    ),
    # ALBERT and ELECTRA factorise the embeddings (16) below the hidden size (32).
    _text_case("albert", "text-encoder", "AlbertModel", "AlbertConfig", **_ENCODER, embedding_size=16),
    _text_case("electra", "text-encoder", "ElectraModel", "ElectraConfig", **_ENCODER, embedding_size=16),
    _text_case(
        "deberta-v2", "text-encoder", "DebertaV2Model", "DebertaV2Config",
        **_ENCODER, relative_attention=True, position_buckets=8, pos_att_type=["p2c", "c2p"], ci=False,
    ),
    _text_case("xlm-roberta", "text-encoder", "XLMRobertaModel", "XLMRobertaConfig", **_ENCODER, pad_token_id=1),
    _text_case("mpnet", "text-encoder", "MPNetModel", "MPNetConfig", **_ENCODER, pad_token_id=1, ci=False),
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
    # OPT projects its 16-wide embeddings up to the hidden size and back.
    _decoder_case("opt", "OPTForCausalLM", "OPTConfig", ffn_dim=64, word_embed_proj_dim=16, pad_token_id=1),
    _text_case(
        "bloom", "decoder", "BloomForCausalLM", "BloomConfig",
        vocab_size=VOCAB, hidden_size=HIDDEN, n_layer=2, n_head=4, ci=False,
    ),
    _decoder_case("falcon", "FalconForCausalLM", "FalconConfig", ffn_hidden_size=64, ci=False),
    _decoder_case("gpt-neox", "GPTNeoXForCausalLM", "GPTNeoXConfig"),
    _text_case(
        "gptj", "decoder", "GPTJForCausalLM", "GPTJConfig",
        vocab_size=VOCAB, n_embd=HIDDEN, n_layer=2, n_head=4, n_positions=64, rotary_dim=4, ci=False,
    ),
    _decoder_case("stablelm", "StableLmForCausalLM", "StableLmConfig", ci=False),
    _decoder_case("phi", "PhiForCausalLM", "PhiConfig", ci=False),
    _decoder_case("qwen3", "Qwen3ForCausalLM", "Qwen3Config", head_dim=8, ci=False),
    # A sliding-window layer (window 4, shorter than the sequences) and a global one.
    _decoder_case("gemma2", "Gemma2ForCausalLM", "Gemma2Config", head_dim=8, sliding_window=4, ci=False),
    _decoder_case(
        "gemma3", "Gemma3ForCausalLM", "Gemma3TextConfig",
        head_dim=8, sliding_window=4, layer_types=["sliding_attention", "full_attention"], ci=False,
    ),
    # A sparse mixture of experts: each token is routed to 2 of 4 experts.
    _decoder_case(
        "mixtral", "MixtralForCausalLM", "MixtralConfig", num_local_experts=4, num_experts_per_tok=2, ci=False
    ),
    _decoder_case("cohere", "CohereForCausalLM", "CohereConfig", ci=False),
    _decoder_case("olmo", "OlmoForCausalLM", "OlmoConfig", pad_token_id=1),
    # -- encoder-decoders
    _seq2seq_case("t5", "T5ForConditionalGeneration", "T5Config", **_T5),
    _seq2seq_case("bart", "BartForConditionalGeneration", "BartConfig", **_SEQ2SEQ, max_position_embeddings=64),
    _seq2seq_case(
        "mbart", "MBartForConditionalGeneration", "MBartConfig", **_SEQ2SEQ, max_position_embeddings=64, ci=False
    ),
    _seq2seq_case(
        "pegasus", "PegasusForConditionalGeneration", "PegasusConfig", **_SEQ2SEQ, max_position_embeddings=64, ci=False
    ),
    _seq2seq_case(
        "marian", "MarianMTModel", "MarianConfig",
        **_SEQ2SEQ, max_position_embeddings=64, pad_token_id=1, eos_token_id=2, decoder_start_token_id=1, ci=False,
    ),
    _seq2seq_case("mt5", "MT5ForConditionalGeneration", "MT5Config", **_T5, ci=False),
    # Transient-global attention: local windows of radius 2 plus a summary token per block of 4.
    # torch.export infers a source of at least 8 tokens, so the second one is longer, not shorter.
    _seq2seq_case(
        "longt5", "LongT5ForConditionalGeneration", "LongT5Config", second_length=11,
        **_T5, encoder_attention_type="transient-global", local_radius=2, global_block_size=4, ci=False,
    ),
    # -- vision
    _image_case("vit", "ViTForImageClassification", "ViTConfig", **_BLOCKS, patch_size=8, num_labels=5),
    _image_case("clip-vision", "CLIPVisionModel", "CLIPVisionConfig", **_BLOCKS, patch_size=8),
    _image_case(
        "swin", "SwinForImageClassification", "SwinConfig",
        patch_size=4, embed_dim=16, depths=[1, 1], num_heads=[2, 4], window_size=4, num_labels=5,
    ),
    _image_case(
        "resnet", "ResNetForImageClassification", "ResNetConfig",
        spatial=True, embedding_size=16, hidden_sizes=[16, 32], depths=[1, 1], num_labels=5,
    ),
    _image_case(
        "convnext", "ConvNextForImageClassification", "ConvNextConfig",
        spatial=True, num_stages=2, hidden_sizes=[16, 32], depths=[1, 1], num_labels=5, ci=False,
    ),
    _image_case("deit", "DeiTForImageClassification", "DeiTConfig", **_BLOCKS, patch_size=8, num_labels=5),
    _image_case(
        "beit", "BeitForImageClassification", "BeitConfig",
        **_BLOCKS, patch_size=8, use_relative_position_bias=True, num_labels=5, ci=False,
    ),
    _image_case("dinov2", "Dinov2Model", "Dinov2Config", **_BLOCKS, patch_size=8),
    _image_case(
        "mobilevit", "MobileViTForImageClassification", "MobileViTConfig",
        patch_size=2, hidden_sizes=[16, 24, 32], neck_hidden_sizes=[8, 8, 16, 16, 24, 24, 32], num_attention_heads=4,
        num_labels=5, ci=False,
    ),
    _image_case(
        "segformer", "SegformerForSemanticSegmentation", "SegformerConfig",
        spatial=True, num_encoder_blocks=2, depths=[1, 1], sr_ratios=[2, 1], hidden_sizes=[16, 32],
        patch_sizes=[7, 3], strides=[4, 2], num_attention_heads=[1, 2], mlp_ratios=[2, 2], decoder_hidden_size=32,
        num_labels=5, ci=False,
    ),
    _DETR,
    _image_case(
        "yolos", "YolosForObjectDetection", "YolosConfig",
        **_BLOCKS, image_size=[IMAGE_SIZE, IMAGE_SIZE], patch_size=8, num_detection_tokens=5, num_labels=5, ci=False,
    ),
    # -- speech
    _WHISPER,
    _WAV2VEC2,
    _audio_case("hubert", "HubertModel", "HubertConfig"),
    _audio_case("wavlm", "WavLMModel", "WavLMConfig", num_buckets=16, max_bucket_distance=64, ci=False),
    _audio_case("data2vec-audio", "Data2VecAudioModel", "Data2VecAudioConfig", ci=False),
    _SPEECHT5,
    # -- multimodal: text and image towers, their similarity logits
    _multimodal_case(
        "clip", "CLIPModel", "CLIPConfig",
        text_config=dict(_ENCODER, bos_token_id=1, eos_token_id=2), vision_config=_VISION_TOWER, projection_dim=16,
    ),
    _multimodal_case(
        "siglip", "SiglipModel", "SiglipConfig", text_config=_ENCODER, vision_config=_VISION_TOWER, ci=False
    ),
    _multimodal_case(
        "blip", "BlipModel", "BlipConfig",
        text_config=dict(_ENCODER, encoder_hidden_size=HIDDEN), vision_config=_VISION_TOWER, projection_dim=16,
        ci=False,
    ),
    # -- hand-written
    _handwritten("cnn", SmallCNN, _randn(2, 3, 16, 12), _randn(3, 3, 24, 20), ({0: "batch", 2: "height", 3: "width"},)),
    _handwritten("mlp", MLP, _randn(2, 16), _randn(5, 16), ({0: "batch"},)),
    # torch.export specialises the sequence length of aten.lstm/aten.gru (their fake-tensor
    # implementation unrolls the time steps), so only the batch is dynamic.
    _handwritten("lstm", lambda: RecurrentTagger(nn.LSTM), _tokens(2, 8), _tokens(3, 8), ({0: "batch"},)),
    _handwritten("gru", lambda: RecurrentTagger(nn.GRU), _tokens(2, 8), _tokens(3, 8), ({0: "batch"},)),
    # -- hand-written stress models
    _handwritten(
        "indexing", AdvancedIndexing,
        (_randn(2, 5, 6), torch.tensor([0, 3, -1, 3, 1])), (_randn(3, 5, 6), torch.tensor([2, -2, 2, 0, 4, 1])),
        ({0: "batch"}, {0: "indices"}),
    ),
    _handwritten("inplace", InPlaceUpdates, _randn(2, 5, 8), _randn(3, 7, 8), ({0: "batch", 1: "sequence"},)),
    _handwritten("interpolate", Interpolations, _randn(2, 3, 8, 6), _randn(3, 3, 11, 9), (_IMAGE_DIMS,), ci=False),
    _handwritten("pooling", PoolingCorners, _randn(2, 3, 11, 9), _randn(3, 3, 14, 17), (_IMAGE_DIMS,)),
    # The sequence length is static, as for lstm and gru above.
    _handwritten(
        "rnn-variants", RecurrentVariants,
        (_randn(2, 6, 8), _randn(4, 2, 16), _lengths(6, 4)), (_randn(3, 6, 8), _randn(4, 3, 16), _lengths(5, 6, 2)),
        ({0: "batch"}, {1: "batch"}, {0: "batch"}), ci=False,
    ),
    _handwritten(
        "masked-attention", MaskedAttention,
        (_randn(2, 6, 16), _padding(_lengths(6, 4), 6)), (_randn(3, 5, 16), _padding(_lengths(5, 3, 1), 5)),
        ({0: "batch", 1: "sequence"}, {0: "batch", 1: "sequence"}),
    ),
    # The float16 linear rounds to half precision (11-bit significand) where PyTorch's and ONNX
    # Runtime's kernels differ: up to ~1e-4 on the softmax after it.
    _handwritten(
        "mixed-dtypes", MixedDtypes, _tokens(2, 8), _tokens(3, 5), ({0: "batch", 1: "sequence"},), rtol=1e-3, atol=1e-3
    ),
    _handwritten("data-dependent", DataDependentShapes, _randn(2, 6), _randn(3, 5), ({0: "batch", 1: "features"},)),
    # The first input set sums to a positive number, the second to a negative one.
    _handwritten("cond", CondBranches, _randn(2, 8).abs(), -_randn(3, 8).abs(), ({0: "batch"},)),
    _handwritten("conv-corners", ConvolutionCorners, _randn(2, 4, 8, 6), _randn(3, 4, 10, 12), (_IMAGE_DIMS,)),
    _handwritten(
        "scatter-gather", ScatterGather,
        (_randn(2, 6), _indices(2, 6)), (_randn(3, 7), _indices(3, 7)),
        ({0: "batch", 1: "n"}, {0: "batch", 1: "n"}),
    ),
    *_torchvision_cases(),
]


def named(cases: Iterable[ModelCase], name: str) -> ModelCase:
    """The case called ``name`` among ``cases`` (this corpus or a generated one)."""
    found = {case.name: case for case in cases}
    if name not in found:
        raise KeyError(f"no corpus model named {name!r}; known: {list(found)}")
    return found[name]


def by_name(name: str) -> ModelCase:
    return named(CORPUS, name)
