"""Zero padding in front of a quantized convolution becomes the convolution's own padding."""

from __future__ import annotations

import torch
import torch.ao.quantization.fx._decomposed  # noqa: F401 - defines torch.ops.quantized_decomposed

from helpers import assert_matches_eager

qd = torch.ops.quantized_decomposed


class _PaddedQuantizedConv(torch.nn.Module):
    """Explicit zero padding, then the quantize/dequantize pair PT2E puts in front of a conv."""

    def __init__(self, padding: tuple[int, ...], zero_point: int = 7, value: float = 0.0, conv_padding: int = 1):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3, padding=conv_padding)
        self.padding, self.zero_point, self.value = padding, zero_point, value

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        padded = torch.nn.functional.pad(x, self.padding, value=self.value)
        q = qd.quantize_per_tensor.default(padded, 0.02, self.zero_point, 0, 255, torch.uint8)
        return self.conv(qd.dequantize_per_tensor.default(q, 0.02, self.zero_point, 0, 255, torch.uint8))


def _op_types(program) -> list[str]:
    return [node.op_type for node in program.model.graph]


def test_zero_padding_moves_into_the_conv() -> None:
    model = _PaddedQuantizedConv((1, 2, 0, 1)).eval()
    program = assert_matches_eager(model, (torch.randn(2, 3, 9, 11),), rtol=1e-5, atol=1e-5)
    assert "Pad" not in _op_types(program)
    conv = next(node for node in program.model.graph if node.op_type == "Conv")
    # Conv pads are [top, left, bottom, right]: its own 1 on every side plus the Pad's.
    assert list(conv.attributes.get_ints("pads")) == [1, 2, 2, 3]


def test_other_padding_stays() -> None:
    # A nonzero fill is not what the convolution adds; padding the channels is no convolution padding.
    for model in (_PaddedQuantizedConv((1, 1, 1, 1), value=0.5), _PaddedQuantizedConv((0, 0, 0, 0, 1, 0), conv_padding=0)):
        if model.padding[4:]:
            model.conv = torch.nn.Conv2d(4, 4, 3)
        program = assert_matches_eager(model.eval(), (torch.randn(2, 3, 9, 11),), rtol=1e-5, atol=1e-5)
        assert "Pad" in _op_types(program)
