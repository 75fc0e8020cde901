"""torch.multinomial as ATen samples (ops/sampling.py). The draws are random: the tests check what
every draw must satisfy, and frequencies over 20,000 rows within 0.03 (over 4 standard errors)."""

from __future__ import annotations

import pytest
import torch

import torch_onnx_fx

_WEIGHTS = torch.tensor([5.0, 2.0, 1.0, 0.5, 0.0])


class _Sample(torch.nn.Module):
    def __init__(self, count: int, replacement: bool) -> None:
        super().__init__()
        self.count, self.replacement = count, replacement

    def forward(self, weights: torch.Tensor) -> torch.Tensor:
        return torch.multinomial(weights, self.count, self.replacement)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16])
def test_multinomial_without_replacement_names_each_category_once(dtype):
    # ONNX's Multinomial samples with replacement: torchlib's rows named a category twice.
    rows = _WEIGHTS.to(dtype).expand(20000, 5).contiguous()
    samples = torch_onnx_fx.export(_Sample(3, False), (rows,), verbose=False)(rows)[0]
    assert samples.shape == (20000, 3) and samples.dtype == torch.int64
    assert all(len(set(row)) == 3 for row in samples.tolist())
    assert not (samples == 4).any()  # a category of weight 0 is never drawn
    expected = torch.multinomial(rows.float(), 3)
    for column in range(3):
        frequencies = torch.bincount(samples[:, column], minlength=5) / 20000
        torch.testing.assert_close(frequencies, torch.bincount(expected[:, column], minlength=5) / 20000, rtol=0, atol=0.03)


def test_multinomial_with_replacement_follows_the_weights():
    rows = _WEIGHTS.expand(20000, 5).contiguous()
    samples = torch_onnx_fx.export(_Sample(2, True), (rows,), verbose=False)(rows)[0]
    frequencies = torch.bincount(samples.reshape(-1), minlength=5) / samples.numel()
    torch.testing.assert_close(frequencies, _WEIGHTS / _WEIGHTS.sum(), rtol=0, atol=0.03)


@pytest.mark.parametrize("count", [1, 3])
def test_multinomial_of_one_row_keeps_its_sample_dim(count):
    # torchlib squeezed a 1-D result of one sample to a 0-d tensor (eager: shape [1]).
    samples = torch_onnx_fx.export(_Sample(count, False), (_WEIGHTS,), verbose=False)(_WEIGHTS)[0]
    assert samples.shape == (count,)
    assert len(set(samples.tolist())) == count and 4 not in samples.tolist()
