"""torch_onnx_fx.integrations.genai: a decoder exported into a folder ONNX Runtime GenAI loads and
generates from, with eager ``generate``'s greedy tokens, for the architectures GenAI's own model
builder serves (Llama, Qwen2, Mistral, Phi-3, Gemma-2 with its sliding window exercised)."""

from __future__ import annotations

import json

import pytest
import torch

og = pytest.importorskip("onnxruntime_genai", reason="onnxruntime-genai is a test extra")
transformers = pytest.importorskip("transformers")

from torch_onnx_fx.integrations.genai import export_for_genai  # noqa: E402

NEW_TOKENS = 12
COMMON = dict(
    hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
    vocab_size=100, max_position_embeddings=128, eos_token_id=2, bos_token_id=1, pad_token_id=0,
)
ARCHITECTURES = {
    "llama": ("LlamaConfig", "LlamaForCausalLM", {}),
    "qwen2": ("Qwen2Config", "Qwen2ForCausalLM", {}),
    "mistral": ("MistralConfig", "MistralForCausalLM", {"sliding_window": None}),
    "phi3": ("Phi3Config", "Phi3ForCausalLM", {}),
    "gemma2": ("Gemma2Config", "Gemma2ForCausalLM", {"head_dim": 8, "sliding_window": 4}),  # 19 tokens > window
}


def _eager(model, prompts):
    """Eager ``generate``'s greedy tokens; the model's end token is then set to one it never
    produced, so GenAI generates as many tokens as eager did."""
    with torch.no_grad():
        eager = model.generate(
            input_ids=prompts, attention_mask=torch.ones_like(prompts), max_new_tokens=NEW_TOKENS, do_sample=False,
            eos_token_id=None, pad_token_id=0,
        )
    model.generation_config.eos_token_id = next(t for t in range(3, 100) if t not in eager.flatten().tolist())
    return eager.tolist()


def _generated(folder, prompts, new_tokens):
    genai_model = og.Model(str(folder))
    params = og.GeneratorParams(genai_model)
    params.set_search_options(max_length=prompts.shape[1] + new_tokens, do_sample=False, batch_size=prompts.shape[0])
    generator = og.Generator(genai_model, params)
    generator.append_tokens(prompts.numpy())
    while not generator.is_done():
        generator.generate_next_token()
    return [[int(t) for t in generator.get_sequence(row)] for row in range(prompts.shape[0])]


@pytest.mark.parametrize("fusion", ["standard", "onnxruntime"])
@pytest.mark.parametrize("name", list(ARCHITECTURES))
def test_genai_generates_eager_tokens(name, fusion, tmp_path):
    # fusion="onnxruntime" at opset 23: the residual norms are ONNX Runtime's fused kernels (the
    # attention keeps the standard's: GenAI's graph lets batch, new positions and cache all vary).
    config_class, model_class, extra = ARCHITECTURES[name]
    model = getattr(transformers, model_class)(getattr(transformers, config_class)(**COMMON, **extra)).eval()
    prompts = torch.randint(3, 100, (2, 7))
    eager = _eager(model, prompts)
    options = {"opset_version": 23, "fusion": fusion} if fusion == "onnxruntime" else {}
    folder = export_for_genai(model, tmp_path / name, **options)
    config = json.loads((tmp_path / name / "genai_config.json").read_text())
    assert config["model"]["decoder"]["num_key_value_heads"] == 2 and config["model"]["type"] == model.config.model_type
    if fusion == "onnxruntime":
        import onnx

        graph = onnx.load(str(tmp_path / name / "model.onnx"), load_external_data=False).graph
        assert any(node.op_type == "SkipSimplifiedLayerNormalization" for node in graph.node)
    assert _generated(folder, prompts, NEW_TOKENS) == eager


@pytest.mark.parametrize("name", ["llama", "qwen2", "mistral", "phi3"])
def test_shared_cache_buffer(name, tmp_path):
    # GenAI's past_present_share_buffer mode: one cache buffer of the search's maximum length per
    # layer, written in place by GroupQueryAttention; the graph reads how much of it is filled
    # from the attention mask. A graph that still read the buffer's length or concatenated it
    # would generate other tokens or fail to run.
    config_class, model_class, extra = ARCHITECTURES[name]
    model = getattr(transformers, model_class)(getattr(transformers, config_class)(**COMMON, **extra)).eval()
    prompts = torch.randint(3, 100, (2, 7))
    eager = _eager(model, prompts)
    folder = export_for_genai(model, tmp_path / name, opset_version=23, fusion="onnxruntime", shared_buffer=True)
    config = json.loads((tmp_path / name / "genai_config.json").read_text())
    assert config["search"]["past_present_share_buffer"] is True
    import onnx

    graph = onnx.load(str(tmp_path / name / "model.onnx"), load_external_data=False).graph
    assert sum(node.op_type == "GroupQueryAttention" for node in graph.node) == COMMON["num_hidden_layers"]
    assert not any(node.op_type == "Concat" and node.input[0].startswith("past_key_values") for node in graph.node)
    assert _generated(folder, prompts, NEW_TOKENS) == eager


def test_shared_cache_buffer_refuses_attention_it_cannot_fuse(tmp_path):
    # Gemma-2 caps its attention logits, so its attention stays the standard graph, whose cache
    # is concatenated: a shared buffer would be read at its full length. Refused, naming the reader.
    from torch_onnx_fx.errors import UnsupportedArgumentError

    config_class, model_class, extra = ARCHITECTURES["gemma2"]
    model = getattr(transformers, model_class)(getattr(transformers, config_class)(**COMMON, **extra)).eval()
    with pytest.raises(UnsupportedArgumentError, match="past_key_values.0.key is read by Concat"):
        export_for_genai(model, tmp_path / "gemma2", opset_version=23, fusion="onnxruntime", shared_buffer=True)
    with pytest.raises(UnsupportedArgumentError, match="fusion='onnxruntime'"):
        export_for_genai(model, tmp_path / "gemma2", shared_buffer=True)


@pytest.mark.parametrize("shared_buffer", [False, True], ids=["concatenated", "shared_buffer"])
def test_int4_weights_as_matmul_nbits(shared_buffer, tmp_path):
    # torchao's int4 weight-only model, its products MatMulNBits at accuracy level 1: GenAI
    # generates the torchao model's greedy tokens, with the cache concatenated or in GenAI's
    # shared buffer (what GenAI's model builder writes for int4).
    quantization = pytest.importorskip("torchao.quantization")
    granularity = pytest.importorskip("torchao.quantization.granularity")
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(transformers.LlamaConfig(**COMMON)).eval()
    quantization.quantize_(model, quantization.IntxWeightOnlyConfig(weight_dtype=torch.int4, granularity=granularity.PerGroup(32)))
    prompts = torch.randint(3, 100, (2, 7))
    eager = _eager(model, prompts)
    folder = export_for_genai(model, tmp_path / "int4", opset_version=21, fusion="onnxruntime", shared_buffer=shared_buffer)
    import onnx

    graph = onnx.load(str(tmp_path / "int4" / "model.onnx"), load_external_data=False).graph
    # Per layer: q/k/v packed, o, gate/up packed, down; and the head.
    assert sum(node.op_type == "MatMulNBits" for node in graph.node) == 2 * 4 + 1
    assert _generated(folder, prompts, NEW_TOKENS) == eager


def test_tokenizer_files_are_copied(tmp_path):
    source = tmp_path / "tokenizer"
    source.mkdir()
    (source / "tokenizer.json").write_text("{}")
    (source / "unrelated.bin").write_text("")
    model = transformers.LlamaForCausalLM(transformers.LlamaConfig(**COMMON)).eval()
    folder = export_for_genai(model, tmp_path / "out", tokenizer=source)
    names = sorted(p.name for p in (tmp_path / "out").iterdir())
    assert names == ["genai_config.json", "model.onnx", "model.onnx.data", "tokenizer.json"], names
    assert folder == str(tmp_path / "out")
