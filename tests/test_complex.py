"""Complex tensors: inputs, outputs and intermediates, FFTs and STFT.

The ONNX graph holds a complex tensor as a real tensor with a trailing dim of 2; ONNXProgram
converts at the boundary, so callers pass and receive complex tensors.
"""

from __future__ import annotations

import pytest
import torch

from helpers import assert_matches_eager

WINDOW = torch.hann_window(16)


def _stft(x):
    return torch.stft(x, 16, hop_length=4, window=WINDOW, return_complex=True)


CASES = {
    "view_as_real_complex": (lambda x: torch.view_as_real(torch.view_as_complex(x) * 2), lambda: (torch.randn(3, 4, 2),)),
    "complex_mul_abs": (lambda x, y: (torch.view_as_complex(x) * torch.view_as_complex(y)).abs(), lambda: (torch.randn(3, 2), torch.randn(3, 2))),
    "angle": (lambda x: torch.view_as_complex(x).angle(), lambda: (torch.randn(3, 2),)),
    "fft": (lambda x: torch.view_as_real(torch.fft.fft(x)), lambda: (torch.randn(4, 8),)),
    "rfft_irfft": (lambda x: torch.fft.irfft(torch.fft.rfft(x), n=8), lambda: (torch.randn(4, 8),)),
    "complex_input_and_output": (lambda z: z * (1 + 2j) + z.conj(), lambda: (torch.randn(3, dtype=torch.complex64),)),
    "stft_magnitude": (lambda x: _stft(x).abs(), lambda: (torch.randn(2, 64),)),
    "stft_complex_output": (_stft, lambda: (torch.randn(64),)),
    "istft_round_trip": (lambda x: torch.istft(_stft(x), 16, hop_length=4, window=WINDOW), lambda: (torch.randn(2, 64),)),
}


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("opset", [18, 20])
def test_complex(name, opset):
    fn, make_args = CASES[name]
    # FFTs sum many terms; float32 rounding grows with length, hence atol 1e-4.
    assert_matches_eager(fn, make_args(), opset_version=opset, atol=1e-4)


def test_complex_output_is_returned_complex():
    program = assert_matches_eager(lambda z: z * 2j, (torch.randn(4, dtype=torch.complex64),))
    (result,) = program(torch.ones(4, dtype=torch.complex64))
    assert result.dtype == torch.complex64
    torch.testing.assert_close(result, torch.full((4,), 2j, dtype=torch.complex64))
