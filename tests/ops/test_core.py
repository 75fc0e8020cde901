"""ops/core.py: core operators torchlib lacks or translates less well."""

from __future__ import annotations

import onnx
import pytest
import torch

from helpers import assert_matches_eager

import torch_onnx_fx
from torch_onnx_fx.capture.library_patches import applied


@pytest.mark.parametrize(
    "size, shape",
    [((-1, 4, 3), (2, 1, 3)), ((2, -1, 3), (1, 3)), ((5, -1, -1), (1, 0, 3))],
    ids=["leading-kept", "middle-kept-under-new-dim", "empty-kept"],
)
def test_broadcast_to_keeps_the_inputs_size_where_the_target_says_minus_one(size, shape):
    # torchlib passes -1 to Expand, which ONNX Runtime rejects when it loads the graph.
    assert_matches_eager(lambda x: torch.broadcast_to(x, size), (torch.randn(shape),))


def test_broadcast_to_minus_one_on_a_dynamic_dim():
    def model(x):
        return torch.broadcast_to(x, (-1, 4, 3)) * 2

    assert_matches_eager(
        model, (torch.randn(2, 1, 3),), dynamic_shapes=({0: "batch"},), more_inputs=[((torch.randn(5, 1, 3),), {})],
    )


def test_cat_of_empty_tensors_only():
    # torchlib's cat drops empty inputs and then asserts on nothing left (triu_indices of an
    # empty matrix concatenates two empty index rows).
    assert_matches_eager(lambda x: (torch.triu_indices(0, 3), torch.cat([x[:0], x[:0]])), (torch.arange(4),))


@pytest.mark.parametrize("dtype", [torch.float32, torch.int32])
@pytest.mark.parametrize("shape, factor", [((1, 0, 1, 1), 1), ((1, 1, 0, 1), 1), ((1, 4, 0, 1), 2), ((2, 1, 4, 2, 0), 2)])
def test_pixel_shuffle_of_empty_tensors(dtype, shape, factor):
    # torchlib's reshapes to [-1, C, H, W] (and with a 0 for int32) made models ONNX Runtime
    # refused to load (OpInfo's empty samples).
    assert_matches_eager(lambda x: torch.nn.functional.pixel_shuffle(x, factor), (torch.zeros(shape, dtype=dtype),))


@pytest.mark.parametrize("shape, factor", [((1, 0, 1, 1), 1), ((1, 1, 0, 2), 2), ((2, 0, 1, 4, 4), 2)])
def test_pixel_unshuffle_of_empty_tensors_has_the_exported_shape(shape, factor):
    # Eager's CPU kernel returns an empty input unchanged; its meta function (the shape the
    # exported graph declares) unshuffles the shape. The model loads and has the latter.
    class Unshuffle(torch.nn.Module):
        def forward(self, x):
            return torch.nn.functional.pixel_unshuffle(x, factor)

    x = torch.zeros(shape)
    (result,) = torch_onnx_fx.export(Unshuffle(), (x,), verbose=False)(x)
    assert result.shape == torch.nn.functional.pixel_unshuffle(x.to("meta"), factor).shape


@pytest.mark.parametrize("shape, dim", [((7,), -1), ((1, 7), -1), ((2, 7), -2), ((3, 2, 7), -1)])
def test_unique_consecutive_with_a_negative_dim(shape, dim):
    """torch's fake kernel sized the values of a [1, 5] input with dim=-1 as [1, u0, 1, 5]; the
    graph declared it, an invalid model (ONNX's checker). The patch counts the dim from 0."""
    torch.manual_seed(0)
    x = torch.randint(0, 2, shape).float()
    program = assert_matches_eager(lambda x: torch.unique_consecutive(x, return_inverse=True, return_counts=True, dim=dim), (x,))
    onnx.checker.check_model(program.model_proto, full_check=True)
    with applied():
        patched = torch.unique_consecutive(x, return_inverse=True, return_counts=True, dim=dim)
    assert all(torch.equal(a, b) for a, b in zip(patched, torch.unique_consecutive(x, return_inverse=True, return_counts=True, dim=dim)))


def test_unique_consecutive_along_a_dim_beside_an_empty_one_is_refused():
    # Eager raises ("0 sized dimensions ... aren't selected"); the graph returned three runs.
    class Unique(torch.nn.Module):
        def forward(self, x):
            return torch.unique_consecutive(x, dim=0)

    with pytest.raises(torch_onnx_fx.errors.TranslationError, match="size 0"):
        torch_onnx_fx.export(Unique(), (torch.zeros(3, 0),), verbose=False)
