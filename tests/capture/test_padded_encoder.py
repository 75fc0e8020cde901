"""capture/padded_encoder.py: nn.TransformerEncoder with a padding mask computes at padded positions
what it computes in inference (zeros before the final norm, from its nested-tensor path), where
both exporters returned the plain path's other numbers (3.5 off).

Eager references run under ``torch.no_grad()`` (as ``assert_matches_eager`` runs them): with grad
enabled PyTorch takes the plain path, and the exported model is an inference model.
"""

from __future__ import annotations

import pytest
import torch
from torch import nn

from helpers import assert_matches_eager

_DYNAMIC = ({0: "batch", 1: "length"}, {0: "batch", 1: "length"})


class _Encoder(nn.Module):
    def __init__(self, norm: bool = False, mask_check: bool = True, nested: bool = True, float_mask: float | None = None):
        super().__init__()
        torch.manual_seed(0)
        layer = nn.TransformerEncoderLayer(16, 4, 32, dropout=0.0, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, 2, norm=nn.LayerNorm(16) if norm else None,
                                             enable_nested_tensor=nested, mask_check=mask_check)
        self.float_mask = float_mask

    def forward(self, x, padded):
        if self.float_mask is not None:
            padded = torch.zeros(padded.shape, dtype=x.dtype).masked_fill(padded, self.float_mask)
        return self.encoder(x, src_key_padding_mask=padded)


def _batch(lengths: list[int], steps: int, left: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    padded = torch.zeros(len(lengths), steps, dtype=torch.bool)
    for row, length in enumerate(lengths):
        if left:
            padded[row, : steps - length] = True
        else:
            padded[row, length:] = True
    return torch.randn(len(lengths), steps, 16), padded


@pytest.mark.parametrize("norm", [False, True])
@pytest.mark.parametrize("float_mask", [None, float("-inf"), -1.0, 2.0], ids=["bool", "float-inf", "float-minus-one", "float-two"])
def test_padded_positions_match_inference(norm, float_mask):
    """A float mask's finite nonzero entries drop their key in the nested tensor too (they are
    additive in the plain path): the valid positions were 0.4-1.7 off with -1 or 2."""
    model = _Encoder(norm=norm, float_mask=float_mask).eval()
    with torch.no_grad():
        x, padded = _batch([7, 5, 2], 7)
        assert model(x, padded)[padded].abs().max() == 0 or norm  # the nested path ran in eager
    assert_matches_eager(
        model, _batch([7, 5, 2], 7), dynamic_shapes=_DYNAMIC,
        more_inputs=[(_batch([4, 4, 1, 3], 9), {}), (_batch([3, 3], 3), {})],
    )


@pytest.mark.parametrize("float_mask", [None, -1.0])
def test_padding_first_takes_the_plain_path_as_eager_does(float_mask):
    """Eager checks that every row's valid positions come first (``mask_check``); one exported
    graph gives both answers. Unpacked, the layers' inference kernel reads a float mask's nonzero
    entries as dropped keys too (not added: 0.56 off)."""
    model = _Encoder(float_mask=float_mask).eval()
    assert_matches_eager(
        model, _batch([7, 5, 2], 7), dynamic_shapes=_DYNAMIC,
        more_inputs=[(_batch([6, 5, 2], 7, left=True), {}), (_batch([4, 6], 6), {})],
    )


def test_without_mask_check_each_row_keeps_its_first_positions():
    """Without the check the nested tensor holds each row's first (count of valid) positions,
    wherever the mask puts the valid ones: left padding was 2.8 off."""
    model = _Encoder(mask_check=False).eval()
    assert_matches_eager(model, _batch([7, 5, 2], 7), dynamic_shapes=_DYNAMIC,
                         more_inputs=[(_batch([5, 1], 5), {}), (_batch([6, 3, 4], 7, left=True), {})])


@pytest.mark.parametrize("model", [_Encoder(nested=False).eval(), _Encoder().train()], ids=["no_nested_tensor", "training"])
def test_plain_path_is_unchanged(model):
    model.encoder.layers[0].dropout.p = 0.0
    assert_matches_eager(model, _batch([7, 5, 2], 7), dynamic_shapes=_DYNAMIC, more_inputs=[(_batch([5, 1], 5), {})])


def test_full_transformer_with_source_padding():
    """Without a memory mask the decoder attends to the encoder's padded positions: every output
    of the translation reads them."""
    torch.manual_seed(0)

    class Translator(nn.Module):
        def __init__(self):
            super().__init__()
            self.transformer = nn.Transformer(16, 4, 2, 2, 32, dropout=0.0, batch_first=True)

        def forward(self, src, tgt, padded):
            return self.transformer(src, tgt, src_key_padding_mask=padded)

    def inputs(lengths, steps, target):
        src, padded = _batch(lengths, steps)
        return src, torch.randn(len(lengths), target, 16), padded

    dynamic = ({0: "batch", 1: "length"}, {0: "batch", 1: "target"}, {0: "batch", 1: "length"})
    assert_matches_eager(Translator().eval(), inputs([6, 3], 6, 4), dynamic_shapes=dynamic,
                         more_inputs=[(inputs([5, 5, 2], 8, 3), {})])
