"""A transformers decoder exported with its KV cache, checked over two decoding steps."""

from __future__ import annotations

import copy
import inspect

import pytest
import torch
from torch.export import Dim

import torch_onnx_fx

transformers = pytest.importorskip("transformers")
from transformers import DynamicCache, LlamaConfig, LlamaForCausalLM  # noqa: E402
from transformers.exporters.exporter_dynamo import register_cache_pytrees_for_model  # noqa: E402

LAYERS, KV_HEADS, HEAD = 2, 2, 8
# transformers 5.24 renamed the forward's cache argument (past_key_values went into **kwargs,
# where a dynamic_shapes dict cannot name it); the tests use whichever name the forward has.
CACHE = "cache" if "cache" in inspect.signature(LlamaForCausalLM.forward).parameters else "past_key_values"


def _model() -> LlamaForCausalLM:
    config = LlamaConfig(
        vocab_size=100, hidden_size=32, intermediate_size=64, num_hidden_layers=LAYERS,
        num_attention_heads=4, num_key_value_heads=KV_HEADS, max_position_embeddings=64,
    )
    config._attn_implementation = "sdpa"
    model = LlamaForCausalLM(config).eval()
    register_cache_pytrees_for_model(model)
    return model


def _cache(model: LlamaForCausalLM, tensors: list[torch.Tensor]) -> DynamicCache:
    cache = DynamicCache(config=model.config)
    for layer in range(LAYERS):
        cache.update(tensors[2 * layer], tensors[2 * layer + 1], layer)
    return cache


def _inputs(model, batch, length, past, cache_tensors=None):
    if cache_tensors is None:
        cache_tensors = [torch.randn(batch, KV_HEADS, past, HEAD) for _ in range(2 * LAYERS)]
    return {
        "input_ids": torch.randint(0, 100, (batch, length)),
        "attention_mask": torch.ones(batch, past + length, dtype=torch.long),
        CACHE: _cache(model, cache_tensors),
    }, cache_tensors


def test_decoder_with_dynamic_cache_over_two_steps():
    model = _model()
    example, _ = _inputs(model, batch=2, length=3, past=5)
    cache_dims = [{0: "batch", 2: "past"}] * (2 * LAYERS)
    program = torch_onnx_fx.export(
        model, (), kwargs={**example, "use_cache": True},
        dynamic_shapes={
            "input_ids": {0: "batch", 1: "sequence"},
            "attention_mask": {0: "batch", 1: torch.export.Dim.AUTO},
            CACHE: cache_dims,
            "use_cache": None,
        },
        verbose=False,
    )
    graph = program.model.graph
    assert [str(d) for d in graph.inputs[0].shape] == ["batch", "sequence"]
    assert [str(d) for d in graph.inputs[2].shape] == ["batch", "2", "past", "8"]
    assert str(graph.outputs[1].shape[2]) in ("past + sequence", "sequence + past")

    _check_two_steps(program, model)


def _check_two_steps(program, model) -> None:
    """A prompt, then one token fed with the present key/values the ONNX model produced, at other
    sizes than the export's; every output compared with eager."""
    inputs, _ = _inputs(model, batch=3, length=4, past=6)
    with torch.no_grad():
        expected = model(**copy.deepcopy(inputs), use_cache=True)
    logits, *present = program(**inputs, use_cache=True)
    torch.testing.assert_close(logits, expected.logits, rtol=1e-4, atol=1e-5)
    expected_present = [t for layer in getattr(expected, CACHE).layers for t in (layer.keys, layer.values)]
    assert len(present) == len(expected_present) == 2 * LAYERS
    for ours, theirs in zip(present, expected_present):
        torch.testing.assert_close(ours, theirs, rtol=1e-4, atol=1e-5)

    step, _ = _inputs(model, batch=3, length=1, past=10, cache_tensors=present)
    with torch.no_grad():
        expected = model(**copy.deepcopy(step), use_cache=True)
    logits, *present = program(**step, use_cache=True)
    assert len(present) == 2 * LAYERS
    torch.testing.assert_close(logits, expected.logits, rtol=1e-4, atol=1e-5)


def test_decoder_with_dim_ranges_wider_than_the_model_allows_exports():
    """Named Dims whose ranges the model narrows (the mask's length is past + sequence, at least
    past + 2 here): plain torch.export refuses them ("Constraints violated"); capture defers the
    checks or applies torch.export's suggested fixes, as torch.onnx does."""
    model = _model()
    example, _ = _inputs(model, batch=2, length=3, past=5)
    batch, sequence, past, total = Dim("batch"), Dim("sequence"), Dim("past"), Dim("total", max=1024)
    shapes = {
        "input_ids": {0: batch, 1: sequence},
        "attention_mask": {0: batch, 1: total},
        CACHE: [{0: batch, 2: past}] * (2 * LAYERS),
        "use_cache": None,
    }
    with pytest.raises(torch._dynamo.exc.UserError, match="Constraints violated"):
        torch.export.export(model, (), kwargs={**example, "use_cache": True}, dynamic_shapes=shapes, strict=False)
    program = torch_onnx_fx.export(model, (), kwargs={**example, "use_cache": True}, dynamic_shapes=shapes, verbose=False)
    graph = program.model.graph
    assert [str(d) for d in graph.inputs[0].shape] == ["batch", "sequence"]
    _check_two_steps(program, model)
