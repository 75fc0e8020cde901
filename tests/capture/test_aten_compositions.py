"""capture/aten_compositions.py: ATen's compositions written out for capture give eager's bits in
eager mode, and the models that use them export."""

from __future__ import annotations

import pytest
import torch

from helpers import assert_matches_eager
from torch_onnx_fx.capture import library_patches


def _weights() -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(1)
    return torch.randint(0, 4, (10,), generator=generator), torch.rand(10, generator=generator)


_CALLS = {
    "cov": lambda x, f, a: torch.cov(x),
    "cov_unbiased_off": lambda x, f, a: x.cov(correction=0),
    "cov_vector": lambda x, f, a: torch.cov(x[0]),
    "cov_frequencies": lambda x, f, a: torch.cov(x, fweights=f),
    "cov_weights": lambda x, f, a: torch.cov(x, aweights=a),
    "cov_both": lambda x, f, a: torch.cov(x, fweights=f, aweights=a, correction=2),
    "cov_one_observation": lambda x, f, a: torch.cov(x[:, :1], aweights=a[:1]),
    "cov_integers": lambda x, f, a: torch.cov((x * 4).int()),
    "cov_complex": lambda x, f, a: torch.cov(torch.complex(x, x.flip(1))),
    "corrcoef": lambda x, f, a: torch.corrcoef(x),
    "corrcoef_method": lambda x, f, a: x.corrcoef(),
    "corrcoef_vector": lambda x, f, a: torch.corrcoef(x[0]),
}


@pytest.mark.parametrize("name", sorted(_CALLS))
def test_compositions_are_atens_in_eager_mode(name):
    x = torch.randn(3, 10, generator=torch.Generator().manual_seed(0))
    fweights, aweights = _weights()
    expected = _CALLS[name](x.clone(), fweights, aweights)
    with library_patches.applied() as names:
        assert {"torch.cov", "torch.Tensor.cov", "torch.corrcoef", "torch.Tensor.corrcoef"} <= set(names)
        patched = _CALLS[name](x.clone(), fweights, aweights)
    torch.testing.assert_close(patched, expected, rtol=0, atol=0, equal_nan=True)


def test_cov_and_corrcoef_export():
    """torch.export stopped at ATen's cov (its degrees-of-freedom check reads the data; torch.onnx
    fails the same way)."""
    fweights, aweights = _weights()

    def statistics(x, fweights, aweights):
        return torch.cov(x), torch.cov(x, fweights=fweights, aweights=aweights), torch.corrcoef(x), x.cov(correction=0)

    x = torch.randn(3, 10, generator=torch.Generator().manual_seed(0))
    assert_matches_eager(
        statistics, (x, fweights, aweights), rtol=1e-5, atol=1e-6,
        dynamic_shapes=({0: "variables", 1: "observations"}, {0: "observations"}, {0: "observations"}),
        more_inputs=[((torch.randn(5, 40), torch.randint(0, 4, (40,)), torch.rand(40)), {})],
    )


@pytest.mark.parametrize("labels", [[0, 3, 1], [[2, 0], [2, 2]], [0], [5]], ids=str)
@pytest.mark.parametrize("num_classes", [-1, 7])
def test_one_hot_is_atens_in_eager_mode(labels, num_classes):
    labels = torch.tensor(labels)
    expected = torch.nn.functional.one_hot(labels, num_classes)
    with library_patches.applied() as names:
        assert "torch.nn.functional.one_hot" in names
        patched = torch.nn.functional.one_hot(labels, num_classes)
    assert patched.dtype == expected.dtype
    torch.testing.assert_close(patched, expected, rtol=0, atol=0)


def test_one_hot_without_num_classes_exports():
    """The class count is the largest label + 1, read from the data: torch.export stopped at
    ATen's int() of it (torch.onnx fails the same way). The graph computes it, so labels with a
    larger id at run time widen the output as in eager."""

    def encode(labels, scores):
        classes = torch.nn.functional.one_hot(labels)
        return classes, (classes * scores.unsqueeze(-1)).sum(0), torch.nn.functional.one_hot(labels, num_classes=9)

    assert_matches_eager(
        encode, (torch.tensor([0, 3, 1]), torch.rand(3)), rtol=1e-6, atol=1e-6,
        dynamic_shapes=({0: "n"}, {0: "n"}),
        more_inputs=[((torch.tensor([7, 0, 1, 2, 2]), torch.rand(5)), {}), ((torch.tensor([0]), torch.rand(1)), {})],
    )
