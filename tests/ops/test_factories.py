"""ops/factories.py: factories of known arguments are the constants eager computes, bit for bit."""

from __future__ import annotations

import pytest
import torch

import torch_onnx_fx

FACTORIES = {
    # ATen's logspace computes the second half of its exponents from the end; raising the base to
    # a linspace put 5 of 16 float64 values an ulp off, and made an int32 power one too small.
    "logspace": lambda n, dtype: torch.logspace(-2, 1.5, n, dtype=dtype),
    "logspace_base_2": lambda n, dtype: torch.logspace(-2, 1.5, n, 2.0, dtype=dtype),
    "linspace": lambda n, dtype: torch.linspace(-3.7, 11.3, n, dtype=dtype),
    # ONNX's HammingWindow (torchlib's translation) has other coefficients: 7e-3 off.
    "hamming": lambda n, dtype: torch.hamming_window(n, dtype=dtype),
    "hamming_alpha_beta": lambda n, dtype: torch.hamming_window(n, False, 0.5, 0.4, dtype=dtype),
    "hann": lambda n, dtype: torch.hann_window(n, dtype=dtype),
    "hann_symmetric": lambda n, dtype: torch.hann_window(n, periodic=False, dtype=dtype),
    "blackman": lambda n, dtype: torch.blackman_window(n, dtype=dtype),
    # Not translated before at all.
    "bartlett": lambda n, dtype: torch.bartlett_window(n, dtype=dtype),
    "kaiser": lambda n, dtype: torch.kaiser_window(n, dtype=dtype),
    "kaiser_beta": lambda n, dtype: torch.kaiser_window(n, False, 8.0, dtype=dtype),
}
_FLOATING = [torch.float32, torch.float64, torch.float16, torch.bfloat16]
# Window functions are floating only (eager raises for int32).
_CASES = [(name, dtype) for name in sorted(FACTORIES) for dtype in _FLOATING] + [
    (name, torch.int32) for name in ("linspace", "logspace", "logspace_base_2")
]


@pytest.mark.parametrize(("name", "dtype"), _CASES)
def test_factory_is_eager_bit_for_bit(name, dtype):
    factory = FACTORIES[name]

    def fn(x):
        return tuple(factory(n, dtype) + x for n in (1, 2, 16, 33, 400))

    x = torch.zeros((), dtype=dtype)
    program = torch_onnx_fx.export(fn, (x,), verbose=False)
    expected, actual = fn(x), program(x)
    assert len(actual) == len(expected)
    for a, e in zip(actual, expected):
        assert a.dtype == e.dtype and torch.equal(a, e)


def test_factory_on_the_meta_device_is_computed_on_the_cpu():
    # A model built on `meta` (exported for its graph, weights applied after) creates its window there.
    def fn(x):
        return torch.stft(x, 16, window=torch.hann_window(16, device=x.device), return_complex=False)

    program = torch_onnx_fx.export(fn, (torch.zeros(64, device="meta"),), verbose=False)
    x = torch.randn(64)
    actual, expected = program(x), fn(x)
    assert len(actual) == 1
    torch.testing.assert_close(actual[0], expected, rtol=1e-5, atol=1e-5)
