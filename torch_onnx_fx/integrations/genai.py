"""A decoder LLM as a folder ONNX Runtime GenAI loads.

ONNX Runtime GenAI (``onnxruntime-genai``) runs generation itself: it loads a folder with the
model, its external data, a ``genai_config.json`` and the tokenizer files, and feeds the graph by
fixed names: ``input_ids``, ``attention_mask``, ``position_ids`` and ``past_key_values.<i>.key`` /
``.value`` in, ``logits`` and ``present.<i>.key`` / ``.value`` out, every cache tensor
``[batch, kv_heads, length, head_size]``, the past empty on the first step and the presents
(past and new) fed back as the next past. :func:`export_for_genai` exports a transformers decoder
in that form with :func:`torch_onnx_fx.export` (batch, sequence and both cache lengths dynamic)
and writes the folder. transformers is needed (the model is one of its decoders); GenAI only to
run the folder.
"""

from __future__ import annotations

import json
import os
import shutil
from typing import Any

import torch

from torch_onnx_fx.errors import UnsupportedArgumentError
from torch_onnx_fx.export import export
from torch_onnx_fx.integrations import shared_cache

__all__ = ["export_for_genai", "genai_config"]

# Files of a saved tokenizer that GenAI's tokenizer reads, copied when present.
TOKENIZER_FILES = (
    "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "tokenizer.model",
    "vocab.json", "merges.txt", "added_tokens.json", "chat_template.jinja",
)


def _sizes(config: Any) -> tuple[int, int, int, int]:
    """(layers, attention heads, kv heads, head size) from a transformers text config."""
    config = config.get_text_config() if hasattr(config, "get_text_config") else config
    heads = config.num_attention_heads
    head_size = getattr(config, "head_dim", None) or config.hidden_size // heads
    return config.num_hidden_layers, heads, getattr(config, "num_key_value_heads", None) or heads, head_size


class _Decoder(torch.nn.Module):
    """The model with GenAI's interface: a flat past in, logits and the flat present out."""

    def __init__(self, model: torch.nn.Module, layers: int):
        super().__init__()
        self.model = model
        self.layers = layers

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, position_ids: torch.Tensor, *past: torch.Tensor) -> tuple[torch.Tensor, ...]:
        from transformers import DynamicCache

        # Full-length layers for every attention kind: GenAI carries the whole past and expects
        # present = past + new, where a sliding-window layer's cache would keep only the window
        # (the window is applied by the attention mask either way).
        cache = DynamicCache()
        for layer in range(self.layers):
            cache.update(past[2 * layer], past[2 * layer + 1], layer)
        out = self.model(input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids, cache=cache, use_cache=True)
        present = out.cache if hasattr(out, "cache") else out.past_key_values
        return (out.logits, *(t for layer in present.layers for t in (layer.keys, layer.values)))


def _example(model: torch.nn.Module, batch: int = 2, sequence: int = 3, past: int = 4) -> tuple[torch.Tensor, ...]:
    layers, _, kv_heads, head_size = _sizes(model.config)
    dtype = next(model.parameters()).dtype
    ids = torch.randint(3, model.config.get_text_config().vocab_size, (batch, sequence))
    mask = torch.ones(batch, past + sequence, dtype=torch.int64)
    positions = torch.arange(past, past + sequence).expand(batch, sequence)
    cache = [torch.randn(batch, kv_heads, past, head_size, dtype=dtype) for _ in range(2 * layers)]
    return (ids, mask, positions, *cache)


def genai_config(
    model: torch.nn.Module, filename: str = "model.onnx", context_length: int | None = None, shared_buffer: bool = False,
) -> dict[str, Any]:
    """The ``genai_config.json`` of a folder holding ``filename``: the graph's names, the model's
    sizes and special tokens, greedy search by default."""
    config = model.config.get_text_config() if hasattr(model.config, "get_text_config") else model.config
    layers, heads, kv_heads, head_size = _sizes(model.config)
    generation = getattr(model, "generation_config", None)
    context = context_length or getattr(config, "max_position_embeddings", None) or 4096

    def token(name: str) -> Any:
        value = getattr(generation, name, None) if generation is not None else None
        return value if value is not None else getattr(config, name, None)

    return {
        "model": {
            "bos_token_id": token("bos_token_id"),
            "context_length": context,
            "decoder": {
                "session_options": {"log_id": "onnxruntime-genai", "provider_options": []},
                "filename": filename,
                "head_size": head_size,
                "hidden_size": config.hidden_size,
                "inputs": {
                    "input_ids": "input_ids", "attention_mask": "attention_mask", "position_ids": "position_ids",
                    "past_key_names": "past_key_values.%d.key", "past_value_names": "past_key_values.%d.value",
                },
                "outputs": {"logits": "logits", "present_key_names": "present.%d.key", "present_value_names": "present.%d.value"},
                "num_attention_heads": heads,
                "num_hidden_layers": layers,
                "num_key_value_heads": kv_heads,
            },
            "eos_token_id": token("eos_token_id"),
            "pad_token_id": token("pad_token_id") if token("pad_token_id") is not None else token("eos_token_id"),
            "type": config.model_type,
            "vocab_size": config.vocab_size,
        },
        "search": {
            "diversity_penalty": 0.0, "do_sample": False, "early_stopping": True, "length_penalty": 1.0,
            "max_length": context, "min_length": 0, "no_repeat_ngram_size": 0, "num_beams": 1,
            "num_return_sequences": 1, "past_present_share_buffer": shared_buffer, "repetition_penalty": 1.0,
            "temperature": 1.0, "top_k": 1, "top_p": 1.0,
        },
    }


def export_for_genai(
    model: torch.nn.Module, folder: str | os.PathLike[str], *, tokenizer: Any = None, context_length: int | None = None,
    opset_version: int | None = None, fusion: str = "standard", shared_buffer: bool = False,
) -> str:
    """Export ``model`` (a transformers decoder-only LM) into ``folder`` for ONNX Runtime GenAI:
    ``model.onnx`` and ``model.onnx.data``, ``genai_config.json``, and the tokenizer's files when
    ``tokenizer`` is given (a transformers tokenizer, saved there, or the folder of a saved one,
    whose files are copied). Returns the folder. ``opset_version`` and ``fusion`` are
    ``export``'s (a torchao int4 model with ``opset_version=21, fusion="onnxruntime"`` runs its
    products as ``MatMulNBits``).

    ``shared_buffer=True`` (with ``fusion="onnxruntime"``) writes a graph for GenAI's
    ``past_present_share_buffer`` mode: each layer's attention is ``GroupQueryAttention``
    writing the new keys and values into the cache buffer in place (see
    :mod:`torch_onnx_fx.integrations.shared_cache`); a model whose attention cannot be is refused
    with an :class:`~torch_onnx_fx.errors.UnsupportedArgumentError` naming the reader of its cache."""
    if shared_buffer and fusion != "onnxruntime":
        raise UnsupportedArgumentError(
            f"export_for_genai(..., shared_buffer=True) needs fusion='onnxruntime' (got {fusion!r}): only ONNX "
            "Runtime's GroupQueryAttention writes a cache in place."
        )
    folder = os.fspath(folder)
    os.makedirs(folder, exist_ok=True)
    layers = _sizes(model.config)[0]
    names = [f".{layer}.{part}" for layer in range(layers) for part in ("key", "value")]
    past_names = [f"past_key_values{name}" for name in names]
    present_names = [f"present{name}" for name in names]
    cache_dims = {0: "batch_size", 2: "past_sequence_length"}
    dynamic_shapes = (
        {0: "batch_size", 1: "sequence_length"},
        {0: "batch_size", 1: "total_sequence_length"},
        {0: "batch_size", 1: "sequence_length"},
        tuple([cache_dims] * (2 * layers)),  # *past: one entry holding one per tensor
    )
    program = export(
        _Decoder(model.eval(), layers).eval(), _example(model), dynamic_shapes=dynamic_shapes, opset_version=opset_version,
        fusion=fusion,
        input_names=["input_ids", "attention_mask", "position_ids", *past_names],
        output_names=["logits", *present_names], verbose=False,
        custom_translation_table={"aten::scaled_dot_product_attention": shared_cache.attention} if shared_buffer else None,
    )
    if shared_buffer:
        shared_cache.PastLengthFromMaskPass(past_names)(program.model)
    program.save(os.path.join(folder, "model.onnx"), external_data=True)
    with open(os.path.join(folder, "genai_config.json"), "w", encoding="utf-8") as file:
        json.dump(genai_config(model, "model.onnx", context_length, shared_buffer), file, indent=2)
    if isinstance(tokenizer, (str, os.PathLike)):
        for name in TOKENIZER_FILES:
            source = os.path.join(os.fspath(tokenizer), name)
            if os.path.exists(source):
                shutil.copy(source, os.path.join(folder, name))
    elif tokenizer is not None:
        tokenizer.save_pretrained(folder)
    return folder
