"""Switch Transformers' (and OpenAI Privacy Filter's) experts loop over the experts some token chose, a loop of data-dependent
length: replaced during capture (torch_onnx_fx.capture.library_patches) by every expert on every token,
keeping the routed rows. torch.onnx fails at capture."""

from __future__ import annotations

import pytest
import torch

from helpers import assert_matches_eager, assert_patch_keeps_eager

transformers = pytest.importorskip("transformers")


def _model():
    config = transformers.SwitchTransformersConfig(
        vocab_size=60, d_model=16, d_kv=4, d_ff=32, num_layers=2, num_decoder_layers=2, num_heads=4, num_experts=4,
        expert_capacity=3, num_sparse_encoder_layers=1, num_sparse_decoder_layers=1, decoder_start_token_id=0,
    )
    torch.manual_seed(0)
    return transformers.SwitchTransformersEncoderModel(config).eval()


def _inputs(batch: int, length: int) -> dict[str, torch.Tensor]:
    # With capacity 3, longer rows overflow an expert: those tokens get no expert's output.
    ids = torch.randint(0, 60, (batch, length), generator=torch.Generator().manual_seed(length))
    return {"input_ids": ids, "attention_mask": torch.ones_like(ids)}


def _privacy_filter():
    """OpenAI Privacy Filter (gpt-oss's experts in float32) loops over the experts hit as Switch
    Transformers' do; both exporters failed at capture before the patch."""
    config = transformers.OpenAIPrivacyFilterConfig(
        vocab_size=60, hidden_size=32, intermediate_size=32, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, head_dim=8, num_local_experts=4, num_experts_per_tok=2, pad_token_id=0,
    )
    torch.manual_seed(0)
    return transformers.OpenAIPrivacyFilterModel(config).eval()


# Each model with the name of the method patched during its capture.
_MODELS = {"switch_transformers": (_model, "SwitchTransformersExperts.forward"), "privacy_filter": (_privacy_filter, "OpenAIPrivacyFilterExperts.forward")}


@pytest.mark.parametrize("name", sorted(_MODELS))
def test_experts_replacement_equals_the_original_in_eager(name):
    build, patched = _MODELS[name]
    model = build()
    for inputs in (_inputs(2, 9), _inputs(1, 1)):
        assert_patch_keeps_eager(lambda **kw: model(**kw).last_hidden_state, inputs, patched)


@pytest.mark.parametrize("name", sorted(_MODELS))
def test_experts_models_export_and_match_eager(name):
    model = _MODELS[name][0]()

    class Hidden(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, input_ids, attention_mask):
            return self.model(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state

    assert_matches_eager(
        Hidden().eval(), (), _inputs(2, 9), dynamic_shapes={name: {0: "batch", 1: "sequence"} for name in ("input_ids", "attention_mask")},
        more_inputs=[((), _inputs(3, 5)), ((), _inputs(1, 12))],
    )
