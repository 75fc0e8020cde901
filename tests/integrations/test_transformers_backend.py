"""torch_onnx_fx.integrations.transformers: transformers' exporters with torch_onnx_fx underneath.

A generative model exported for generation (prefill and decode components) runs greedy decoding
through transformers' own ONNX Runtime runner and gives eager ``generate``'s tokens, in memory and
after ``save_pretrained``/``from_pretrained``; the registry finds the backend by its format.
"""

from __future__ import annotations

import pytest
import torch

exporters = pytest.importorskip("transformers.exporters", reason="transformers.exporters needs transformers 5.24 (the version tested)")

from transformers import DynamicCache, GenerationConfig, LlamaConfig, LlamaForCausalLM  # noqa: E402

from torch_onnx_fx.integrations.transformers import EXPORT_FORMAT, TorchOnnxFxConfig, TorchOnnxFxExporter  # noqa: E402

NEW_TOKENS = 10


def _llama() -> LlamaForCausalLM:
    config = LlamaConfig(
        hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
        vocab_size=100, max_position_embeddings=128,
    )
    model = LlamaForCausalLM(config).eval()
    model.generation_config = GenerationConfig(do_sample=False, eos_token_id=None, pad_token_id=0)
    return model


def _greedy(exported, input_ids: torch.Tensor) -> torch.Tensor:
    """Greedy decoding over the exported prefill and decode components, as generate does it."""
    prefill, decode = exported.runners["prefill"], exported.runners["decode"]
    out = prefill(input_ids=input_ids, position_ids=torch.arange(input_ids.shape[1])[None], cache=DynamicCache(config=exported.config))
    sequence = input_ids
    for step in range(NEW_TOKENS):
        token = out.logits[:, -1].argmax(-1, keepdim=True)
        sequence = torch.cat([sequence, token], dim=-1)
        if step < NEW_TOKENS - 1:
            out = decode(input_ids=token, position_ids=torch.tensor([[sequence.shape[1] - 1]]), cache=out.cache)
    return sequence


def test_generation_through_transformers_runner_matches_eager(tmp_path):
    model = _llama()
    input_ids = torch.randint(1, 100, (1, 7))
    inputs = {"input_ids": input_ids, "attention_mask": torch.ones_like(input_ids)}
    exported = TorchOnnxFxExporter().export_for_generation(model, inputs, TorchOnnxFxConfig(dynamic=True))
    decode = exported.components["decode"].program.graph
    # Named as the runner matches them: keyword paths, "input."/"output." on the carried cache.
    assert [v.name for v in decode.inputs][2:4] == ["input.cache.layers.0.keys", "input.cache.layers.0.values"]
    assert [v.name for v in decode.outputs][:2] == ["logits", "output.cache.layers.0.keys"]
    with torch.no_grad():
        eager = model.generate(**inputs, max_new_tokens=NEW_TOKENS)
    exported.to("cpu")
    assert torch.equal(_greedy(exported, input_ids), eager)
    exported.save_pretrained(tmp_path)
    loaded = exporters.ExportedModel.from_pretrained(tmp_path, device="cpu")
    assert torch.equal(_greedy(loaded, input_ids), eager)


def test_the_registry_knows_the_backend():
    exporter = exporters.AutoHfExporter.from_config({"export_format": EXPORT_FORMAT, "dynamic": True})
    assert isinstance(exporter, TorchOnnxFxExporter)


def test_a_plain_forward_export_matches_eager():
    model = _llama()
    input_ids = torch.randint(1, 100, (2, 5))
    inputs = {"input_ids": input_ids, "attention_mask": torch.ones_like(input_ids)}
    exported = TorchOnnxFxExporter().export(model, inputs, TorchOnnxFxConfig(dynamic=False))
    with torch.no_grad():
        expected = model(**inputs, use_cache=False).logits
    torch.testing.assert_close(exported(**inputs).logits, expected, rtol=1e-4, atol=1e-4)


def _fsmt():
    from transformers import FSMTConfig, FSMTForConditionalGeneration

    config = FSMTConfig(
        langs=["en", "de"], src_vocab_size=60, tgt_vocab_size=60, d_model=16, encoder_layers=1, decoder_layers=1,
        encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=32, decoder_ffn_dim=32, use_cache=False,
    )
    return FSMTForConditionalGeneration(config).eval()


def _switch():
    from transformers import SwitchTransformersConfig, SwitchTransformersForConditionalGeneration

    config = SwitchTransformersConfig(
        vocab_size=60, d_model=16, d_kv=8, d_ff=32, num_layers=2, num_decoder_layers=2, num_heads=2, num_experts=2,
        encoder_sparse_step=1, decoder_sparse_step=1, use_cache=False,
    )
    return SwitchTransformersForConditionalGeneration(config).eval()


@pytest.mark.parametrize("build", [_fsmt, _switch], ids=["fsmt-guard-on-data", "switch-dynamo-only"])
def test_models_transformers_capture_fails_on_export_through_ours(build):
    """transformers' torch.export call fails on these (FSMT without a cache: a data-dependent
    ``if not padding_mask.any()``; Switch: a module it cannot swap, which only TorchDynamo traces);
    the backend captures them again with torch_onnx_fx's capture, names included, and the export
    matches eager. (Switch without a cache: TorchDynamo cannot trace transformers' unflattening of
    a cache, which imports its class.)"""
    torch.manual_seed(0)
    model = build()
    input_ids = torch.randint(3, 60, (2, 6))
    inputs = {"input_ids": input_ids, "attention_mask": torch.ones_like(input_ids), "decoder_input_ids": torch.randint(3, 60, (2, 4))}
    with torch.no_grad():
        expected = model(**inputs).logits
    exported = TorchOnnxFxExporter().export(model, inputs, TorchOnnxFxConfig(dynamic=False))
    assert [v.name for v in exported.program.graph.outputs][0] == "logits"
    torch.testing.assert_close(exported(**inputs).logits, expected, rtol=1e-4, atol=1e-4)
