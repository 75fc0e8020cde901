"""The generated corpus: every transformers architecture that can be built offline, per task head.

Hand-picked corpora measure what was fixed alongside them. This one is generated from
transformers' own auto mappings: every ``model_type`` of each task mapping below (base model,
causal LM, masked LM, sequence classification, seq2seq LM, image classification) becomes a case
``hf-<model_type>-<task>``, built from its config class with small sizes (two layers, hidden size
64, four heads...) and random weights, no download. Inputs follow the model's ``main_input_name``:
token ids with an attention mask (batch and sequence dynamic; decoder ids for encoder-decoders),
raw audio (batch and samples dynamic) or pixel values (batch dynamic). A model that cannot be built this way, or that eager PyTorch
cannot run on those inputs, is a ``build_failed`` record: listed, not counted.

``cases()`` lists them (cheap: nothing is built); a sweep worker rebuilds one by name.
``--sample N`` in the sweep keeps every N-th case, for a quick measurement.
"""

from __future__ import annotations

import functools
from typing import Any, Callable

import torch

from tools._common import failure
from tools.corpus.models import ModelCase, _randn

__all__ = ["TASKS", "cases", "small_config", "selected", "built_and_run"]

# task -> the auto mapping of transformers.models.auto.modeling_auto it is read from.
TASKS = {
    "base": "MODEL_MAPPING_NAMES",
    "causal-lm": "MODEL_FOR_CAUSAL_LM_MAPPING_NAMES",
    "masked-lm": "MODEL_FOR_MASKED_LM_MAPPING_NAMES",
    "sequence-classification": "MODEL_FOR_SEQUENCE_CLASSIFICATION_MAPPING_NAMES",
    "seq2seq-lm": "MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES",
    "image-classification": "MODEL_FOR_IMAGE_CLASSIFICATION_MAPPING_NAMES",
}

VOCAB = 128
HIDDEN = 64
IMAGE = 32

# Config attributes set where a config has them: small, mutually consistent sizes. Names differ
# between families (n_layer, num_layers, encoder_layers...), so all spellings are listed.
_SMALL: dict[str, Any] = {
    "vocab_size": VOCAB, "hidden_size": HIDDEN, "d_model": HIDDEN, "n_embd": HIDDEN, "dim": HIDDEN, "embed_dim": HIDDEN,
    "num_hidden_layers": 2, "num_layers": 2, "n_layer": 2, "n_layers": 2, "encoder_layers": 2, "decoder_layers": 2,
    "num_decoder_layers": 2,
    "num_attention_heads": 4, "n_head": 4, "n_heads": 4, "encoder_attention_heads": 4, "decoder_attention_heads": 4,
    "num_heads": 4, "num_key_value_heads": 2,
    "intermediate_size": 128, "ffn_dim": 128, "encoder_ffn_dim": 128, "decoder_ffn_dim": 128, "d_ff": 128,
    "hidden_dim": 128, "n_inner": 128,
    "max_position_embeddings": 128, "n_positions": 128, "hidden_size_global": HIDDEN, "encoder_hash_byte_group_vocab": VOCAB,
    "image_size": IMAGE, "patch_size": 4, "num_channels": 3,
    "num_labels": 3, "use_cache": False,
}


_SPECIAL_TOKENS = {"pad_token_id": 0, "bos_token_id": 1, "eos_token_id": 2, "decoder_start_token_id": 1}

# Sampling noise some models add in eval mode (VITS's durations and waveform): eager itself gives a
# different output on every call, so no exporter could be compared with it. Zero noise keeps the
# computation and makes it a function of its inputs.
_DETERMINISTIC = {"noise_scale": 0.0, "noise_scale_duration": 0.0}


# Families whose other sub-configs (BLT's patcher, encoder, global and decoder transformers;
# DeepSeek-OCR 2's SAM and 32-layer vision encoder, nested in its vision config) left at full size
# make the build outlast the sweep's timeout. Shrinking every family's declared sub-configs would
# change some 99 families' cases (DETR backbones, SAM decoders...), which a full sweep would have
# to measure again; until then only these.
_ALL_SUB_CONFIGS = frozenset({"blt", "deepseek_ocr2"})


def _set_if_accepted(config: Any, name: str, value: Any) -> None:
    """Set ``config.name``; some config classes validate or derive attributes and refuse."""
    try:
        setattr(config, name, value)
    except (AttributeError, TypeError, ValueError):
        pass


def small_config(config: Any, every_sub_config: bool | None = None) -> Any:
    """``config`` with the small sizes of ``_SMALL`` where it has those attributes, sub-configs
    (text_config, vision_config, encoder, decoder...) included; with ``every_sub_config`` (by
    default: for the families of ``_ALL_SUB_CONFIGS``) every sub-config the classes declare, at
    every depth."""
    if every_sub_config is None:
        every_sub_config = getattr(config, "model_type", None) in _ALL_SUB_CONFIGS
    for name, value in _SMALL.items():
        if name in getattr(config, "__dict__", {}) or hasattr(type(config), name):
            _set_if_accepted(config, name, value)
    if hasattr(config, "head_dim") and getattr(config, "num_attention_heads", None):
        config.head_dim = HIDDEN // config.num_attention_heads
    # Special tokens of the full vocabulary lie outside the small one (an embedding's padding_idx
    # must be inside it); sequence classification needs a padding token to find each row's last
    # token. The example ids start at 3, after these.
    for name, token in _SPECIAL_TOKENS.items():
        current = getattr(config, name, None)
        if (current is None and name == "pad_token_id") or (isinstance(current, int) and current >= VOCAB):
            _set_if_accepted(config, name, token)
    for name, value in _DETERMINISTIC.items():
        if hasattr(config, name):
            setattr(config, name, value)
    declared = tuple(getattr(config, "sub_configs", None) or ()) if every_sub_config else ()
    for sub in dict.fromkeys(("text_config", "vision_config", "encoder", "decoder", "audio_config", *declared)):
        nested = getattr(config, sub, None)
        if nested is not None and hasattr(nested, "to_dict"):
            small_config(nested, every_sub_config)
    return config


def _text(batch: int, length: int, pad: bool, left: bool = False) -> dict[str, torch.Tensor]:
    """Token ids and a mask; with ``pad`` row ``i`` has ``i`` padding tokens, at the start when
    ``left`` (causal LMs are batched that way: the padding rows then attend to nothing)."""
    generator = torch.Generator().manual_seed(batch * 1000 + length)
    ids = torch.randint(3, VOCAB, (batch, length), generator=generator)
    mask = torch.ones(batch, length, dtype=torch.int64)
    if pad:
        for row in range(1, batch):
            mask[row, slice(0, row) if left else slice(length - row, length)] = 0
    return {"input_ids": ids, "attention_mask": mask}


def _inputs(model: Any, encoder_decoder: bool, left: bool = False) -> tuple[Callable[[], dict], Callable[[], dict], dict] | None:
    """(example inputs, second inputs of other sizes, dynamic shapes) for the model's main input."""
    name = getattr(model, "main_input_name", "input_ids")
    if name == "input_ids":
        shapes: dict[str, Any] = {"input_ids": {0: "batch", 1: "sequence"}, "attention_mask": {0: "batch", 1: "sequence"}}
        if not encoder_decoder:
            return (lambda: _text(2, 8, False)), (lambda: _text(3, 5, True, left)), shapes
        shapes["decoder_input_ids"] = {0: "batch", 1: "target"}

        def with_decoder(batch: int, length: int, target: int, pad: bool) -> dict[str, torch.Tensor]:
            ids = torch.randint(3, VOCAB, (batch, target), generator=torch.Generator().manual_seed(target))
            return {**_text(batch, length, pad), "decoder_input_ids": ids}

        return (lambda: with_decoder(2, 8, 6, False)), (lambda: with_decoder(3, 5, 4, True)), shapes
    if name == "input_values":
        # Raw audio (HuBERT, wav2vec2 and their kin): batch and sample count dynamic; the sizes
        # are multiples of the usual feature-extractor stride (320 samples per frame).
        return (
            (lambda: {"input_values": _randn(2, 1600)}),
            (lambda: {"input_values": _randn(3, 2240)}),
            {"input_values": {0: "batch", 1: "samples"}},
        )
    if name == "pixel_values":
        size = getattr(model.config, "image_size", IMAGE)
        size = size if isinstance(size, int) else IMAGE
        channels = getattr(model.config, "num_channels", 3)
        return (
            (lambda: {"pixel_values": _randn(2, channels, size, size)}),
            (lambda: {"pixel_values": _randn(3, channels, size, size)}),
            {"pixel_values": {0: "batch"}},
        )
    return None


@functools.lru_cache(maxsize=1)
def _mappings() -> dict[str, dict[str, str]]:
    from transformers.models.auto import modeling_auto

    return {task: dict(getattr(modeling_auto, mapping)) for task, mapping in TASKS.items()}


def _case(model_type: str, task: str, class_name: Any) -> ModelCase:
    name = f"hf-{model_type}-{task}"

    def build() -> tuple[Any, tuple, dict, Any]:
        import transformers

        class_names = class_name if isinstance(class_name, (list, tuple)) else [class_name]
        model_class = getattr(transformers, class_names[0])
        config = small_config(transformers.AutoConfig.for_model(model_type))
        if model_type == "blt":
            # Built again from its small sizes, so what the class derives from its sub-configs
            # (BLT's encoder-to-global projection) follows them.
            config = type(config)(**config.to_dict())
        config._attn_implementation = "sdpa" if getattr(model_class, "_supports_sdpa", False) else "eager"
        torch.manual_seed(0)
        model = model_class(config).eval()
        # Matrices some architectures initialise to zero (MoE routers) score every choice alike:
        # top-k then picks among exact ties, which ATen and ONNX Runtime break differently. Trained
        # weights have no such ties; small random values stand in for them.
        with torch.no_grad():
            for parameter in model.parameters():
                if parameter.dim() >= 2 and not parameter.any():
                    parameter.normal_(0.0, 0.02)
        inputs = _inputs(
            model, bool(getattr(config, "is_encoder_decoder", False)) or task == "seq2seq-lm", left=task == "causal-lm",
        )
        if inputs is None:
            raise ValueError(f"{class_names[0]} takes {getattr(model, 'main_input_name', '?')}, not token ids or pixels")
        example, second, shapes = inputs
        build.second = second  # type: ignore[attr-defined]
        return model, (), example(), shapes

    def second_inputs() -> tuple[tuple, dict]:
        return (), build.second()  # type: ignore[attr-defined]

    family = "vision" if task == "image-classification" else ("encoder-decoder" if task == "seq2seq-lm" else "text")
    # Transformers at random initialisation: 1e-4 relative as the hand-picked corpus uses, or as
    # close to eager in float64 as eager's float32 is (deep random-weight ResNets need it).
    return ModelCase(name, build, family, second_inputs, ci=False, float64_reference=True)


def cases() -> list[ModelCase]:
    """Every (model type, task) of the auto mappings, in a stable order."""
    return [
        _case(model_type, task, class_name)
        for task, mapping in _mappings().items()
        for model_type, class_name in sorted(mapping.items())
    ]



def selected(models: str | None, suffixes: tuple[str, ...], sample: int) -> list[ModelCase]:
    """The cases a corpus check runs: those named (comma-separated), else every ``sample``-th of
    the cases whose name ends with one of ``suffixes``."""
    every = cases()
    if models:
        wanted = set(models.split(","))
        return [c for c in every if c.name in wanted]
    return [c for c in every if c.name.endswith(suffixes)][::sample]


def built_and_run(case: ModelCase) -> tuple[Any, str | None]:
    """``case.build()`` once eager has run the model on its inputs, or None and why not: a case
    that cannot be built or run is listed by the checks, not counted."""
    try:
        built = case.build()
        model, args, kwargs, _ = built
        with torch.no_grad():
            model(*args, **kwargs)
    except Exception as exc:  # noqa: BLE001 - reported by the caller
        return None, failure(exc)
    return built, None
