"""State-space and RNN-style language models (transformers' Mamba, FalconMamba, Jamba, RWKV) export with
a dynamic sequence: their Python loop over positions is replaced during capture by a scan
(torch_onnx_fx.capture.library_patches), which becomes an ONNX ``Scan``.

torch.onnx fails at capture: the loop unrolls and the sequence length becomes a constant
("Found the following conflicts between user-specified ranges and inferred ranges").
"""

from __future__ import annotations

import pytest
import torch

from helpers import assert_matches_eager, assert_patch_keeps_eager

transformers = pytest.importorskip("transformers")

_SIZES = dict(vocab_size=50, hidden_size=16, num_hidden_layers=2)


def _mamba():
    return transformers.MambaModel(transformers.MambaConfig(**_SIZES, state_size=4, expand=2, conv_kernel=3))


def _falcon_mamba():
    return transformers.FalconMambaModel(transformers.FalconMambaConfig(**_SIZES, state_size=4, expand=2, conv_kernel=3))


def _rwkv():
    return transformers.RwkvForCausalLM(
        transformers.RwkvConfig(**_SIZES, attention_hidden_size=16, intermediate_size=32, context_length=64,
                                 rescale_every=0)  # no in-place weight rescaling at the first eval call
    )


def _jamba():
    # Mamba layers between attention layers; Mamba's selective scan copied into Jamba's module.
    return transformers.JambaModel(
        transformers.JambaConfig(**_SIZES, num_attention_heads=2, num_key_value_heads=1, intermediate_size=32,
                                 mamba_d_state=4, mamba_expand=2, mamba_d_conv=3, mamba_dt_rank=4, num_experts=1,
                                 attn_layer_period=2, attn_layer_offset=1, use_mamba_kernels=False)
    )


def _recurrent_gemma():
    # Griffin: RG-LRU recurrent blocks (a Python loop over the prompt) and local attention.
    return transformers.RecurrentGemmaModel(
        transformers.RecurrentGemmaConfig(**_SIZES, num_attention_heads=2, num_key_value_heads=1, intermediate_size=32,
                                          lru_width=16, attention_window_size=8, conv1d_width=3,
                                          block_types=["recurrent", "attention"])
    )


BUILDERS = {"mamba": _mamba, "falcon_mamba": _falcon_mamba, "jamba": _jamba, "rwkv": _rwkv, "recurrent_gemma": _recurrent_gemma}


def _inputs(batch: int, length: int) -> dict[str, torch.Tensor]:
    return {"input_ids": torch.randint(0, 50, (batch, length), generator=torch.Generator().manual_seed(length))}


def _first_output(model):
    def run(**inputs):
        output = model(**inputs, use_cache=False)
        return output.logits if hasattr(output, "logits") else output.last_hidden_state

    return run


@pytest.mark.parametrize("name", list(BUILDERS))
def test_scan_replacement_equals_the_loop_in_eager(name):
    torch.manual_seed(0)
    run = _first_output(BUILDERS[name]().eval())
    for batch, length in ((2, 7), (1, 1)):
        assert_patch_keeps_eager(run, _inputs(batch, length), ("mamba_selective_scan", "rwkv_linear_attention_cpu", "_rnn_scan"))


@pytest.mark.parametrize("name", list(BUILDERS))
def test_recurrent_model_exports_with_dynamic_sequence_and_matches_eager(name):
    torch.manual_seed(0)
    model = BUILDERS[name]().eval()

    class Logits(torch.nn.Module):
        # The model's own output object holds a cache; its first tensor is what this test compares.
        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, input_ids):
            return _first_output(self.model)(input_ids=input_ids)

    program = assert_matches_eager(
        Logits().eval(), (), _inputs(2, 6), dynamic_shapes={"input_ids": {0: "batch", 1: "sequence"}},
        more_inputs=[((), _inputs(3, 11)), ((), _inputs(1, 1))],
    )
    assert "Scan" in {node.op_type for node in program.model.graph}
