"""nn.Transformer with attention masks: torch's causal-mask detection decides on the mask's data,
where torch.export stopped (torch.onnx too). The capture reads a mask as given instead."""

from __future__ import annotations

import torch

import torch_onnx_fx
from helpers import assert_matches_eager
from torch_onnx_fx.capture import library_patches


class _Translate(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.transformer = torch.nn.Transformer(16, 4, 2, 2, 32, dropout=0.0, batch_first=True).eval()

    def forward(self, source, target, target_mask, padding):
        return self.transformer(source, target, tgt_mask=target_mask, src_key_padding_mask=padding, memory_key_padding_mask=padding)


def test_a_transformer_with_a_target_mask_exports():
    mask = torch.nn.Transformer.generate_square_subsequent_mask
    padding = torch.tensor([[False] * 7, [False] * 4 + [True] * 3])
    assert_matches_eager(
        _Translate(), (torch.randn(2, 7, 16), torch.randn(2, 5, 16), mask(5), padding), rtol=1e-5, atol=1e-5,
        dynamic_shapes=({0: "batch", 1: "source"}, {0: "batch", 1: "target"}, {0: "target", 1: "target"}, {0: "batch", 1: "source"}),
        more_inputs=[((torch.randn(3, 9, 16), torch.randn(3, 6, 16), mask(6), torch.zeros(3, 9, dtype=torch.bool)), {})],
    )


def test_an_encoder_with_any_mask_exports():
    encoder = _Translate().transformer.encoder
    x = torch.randn(2, 7, 16)
    for mask in (torch.nn.Transformer.generate_square_subsequent_mask(7), torch.randn(7, 7)):
        program = torch_onnx_fx.export(lambda x, mask: encoder(x, mask=mask), (x, mask), verbose=False)
        # With gradients on: under no_grad eager takes its fused fast path, whose result for a
        # random float mask is NaN.
        torch.testing.assert_close(program(x, mask)[0], encoder(x, mask=mask), rtol=1e-5, atol=1e-5)


def test_the_hint_is_kept_and_a_mask_is_read_as_given():
    with library_patches.applied() as names:
        assert "torch.nn.modules.transformer._detect_is_causal_mask" in names
        from torch.nn.modules import transformer

        causal = torch.nn.Transformer.generate_square_subsequent_mask(4)
        assert transformer._detect_is_causal_mask(causal) is False
        assert transformer._detect_is_causal_mask(causal, True) is True
        assert transformer._detect_is_causal_mask(None, None) is False
