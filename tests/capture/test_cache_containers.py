"""capture/cache_containers.py: a transformers decoder exports called the plain way, its cache in
the outputs (and, for a decode step, among the inputs), without the user registering the cache
as a pytree first. Both exporters stopped at the unregistered ``DynamicCache`` before.

Each check runs in a fresh interpreter: the registration is process-wide and lasts, so a test in
this process could pass on another test's registration.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("transformers.exporters.exporter_dynamo")

_SCRIPT = textwrap.dedent(
    """
    import copy, inspect, torch, transformers
    import torch.utils._pytree as pytree
    import torch_onnx_fx

    assert transformers.DynamicCache not in pytree.SUPPORTED_NODES
    # A plain model beside an imported transformers loads nothing of transformers' exporters.
    import sys
    torch_onnx_fx.export(torch.nn.Linear(3, 2).eval(), (torch.randn(1, 3),), verbose=False)
    assert "transformers.exporters.exporter_dynamo" not in sys.modules
    config = transformers.LlamaConfig(vocab_size=100, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                      num_attention_heads=4, num_key_value_heads=2)
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(config).eval()
    cache_name = "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"

    # The plain call: use_cache left at its default, a DynamicCache among the outputs.
    prefill = torch_onnx_fx.export(model, (torch.randint(0, 100, (1, 8)),), dynamic_shapes=({0: "batch", 1: "sequence"},),
                                   verbose=False)
    names = [value.name for value in prefill.model.graph.outputs]
    assert names == ["logits"] + [f"{cache_name}.layers.{i}.{kind}" for i in range(2) for kind in ("keys", "values")], names
    ids = torch.randint(0, 100, (2, 5))
    with torch.no_grad():
        expected = model(ids)
    outputs = prefill(ids)
    eager = [expected.logits] + [t for layer in expected.past_key_values.layers for t in (layer.keys, layer.values)]
    assert len(outputs) == len(eager) == 5
    for ours, theirs in zip(outputs, eager):
        torch.testing.assert_close(ours, theirs, rtol=1e-4, atol=1e-5)

    # A decode step: the cache an input, with dynamic shapes naming its tensors.
    def cache_of(tensors):
        cache = transformers.DynamicCache(config=config)
        for layer in range(2):
            cache.update(tensors[2 * layer], tensors[2 * layer + 1], layer)
        return cache

    def step(batch, past):
        tensors = [torch.randn(batch, 2, past, 8) for _ in range(4)]
        return {"input_ids": torch.randint(0, 100, (batch, 1)), cache_name: cache_of(tensors)}, tensors

    example, _ = step(2, 5)
    decode = torch_onnx_fx.export(model, (), kwargs=example, verbose=False, dynamic_shapes={
        "input_ids": {0: "batch"}, cache_name: [{0: "batch", 2: "past"}] * 4})
    inputs, tensors = step(3, 7)
    with torch.no_grad():
        expected = model(**copy.deepcopy(inputs))
    outputs = decode(**inputs)
    eager = [expected.logits] + [t for layer in expected.past_key_values.layers for t in (layer.keys, layer.values)]
    assert len(outputs) == len(eager) == 5
    for ours, theirs in zip(outputs, eager):
        torch.testing.assert_close(ours, theirs, rtol=1e-4, atol=1e-5)

    # A sliding-window cache keeps its count of tokens seen beside the tensors (Gemma 3): the
    # export bakes it in, so a cache of another past length is refused, not computed with it.
    gemma = transformers.Gemma3ForCausalLM(transformers.Gemma3TextConfig(
        num_hidden_layers=2, hidden_size=32, intermediate_size=64, num_attention_heads=4, num_key_value_heads=2,
        head_dim=8, vocab_size=100, sliding_window=4)).eval()

    def window_step(batch, past):
        with torch.no_grad():
            cache = gemma(torch.randint(0, 100, (batch, past))).past_key_values
        return {"input_ids": torch.randint(0, 100, (batch, 1)), cache_name: cache}

    example = window_step(2, 6)
    torch_onnx_fx.capture.cache_containers.register_caches(gemma, (), example)
    leaves = pytree.tree_leaves(example[cache_name])
    windowed = torch_onnx_fx.export(gemma, (), kwargs=copy.deepcopy(example), verbose=False, dynamic_shapes={
        "input_ids": {0: "batch"}, cache_name: [{0: "batch"} if leaf.dim() else None for leaf in leaves]})
    inputs = window_step(3, 6)
    with torch.no_grad():
        expected = gemma(**copy.deepcopy(inputs))
    torch.testing.assert_close(windowed(**inputs)[0], expected.logits, rtol=1e-4, atol=1e-5)
    try:
        windowed(**window_step(2, 9))
    except torch_onnx_fx.InputMismatchError as exc:
        assert "differs in structure" in str(exc), exc
    else:
        raise AssertionError("a cache of another past length was computed with the export's")
    print("OK")
    """
)


def test_decoder_exports_with_its_cache_unregistered():
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [os.getcwd(), os.environ.get("PYTHONPATH")]))}
    result = subprocess.run([sys.executable, "-c", _SCRIPT], env=env, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0 and result.stdout.strip().endswith("OK"), result.stderr[-3000:]
