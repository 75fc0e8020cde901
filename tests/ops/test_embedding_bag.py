"""ops/embedding_bag.py: float64 embedding_bag sums and means, never through float32.

torchlib's translation collects the bags in a float32 sequence; these were refused."""

from __future__ import annotations

import onnx_ir as ir
import pytest
import torch

import torch_onnx_fx
from torch_onnx_fx.errors import TranslationError

from helpers import assert_matches_eager

F = torch.nn.functional


def _weights() -> torch.Tensor:
    # Beyond float32's range and finer than its precision: a narrowed bag would be inf or off.
    return torch.randn(6, 4, dtype=torch.float64) * 1e300 + torch.arange(24, dtype=torch.float64).reshape(6, 4) * 1e-10


CASES = {
    "sum_weighted_negative_padding": (
        dict(mode="sum", padding_idx=-1),
        lambda: (torch.tensor([0, 5, 1, 5, 2, 3]), torch.tensor([0, 3]), torch.randn(6, dtype=torch.float64)),
    ),
    # An empty bag in the middle (offsets 2, 2): zeros for sums, and for means.
    "mean_empty_bag_padding": (
        dict(mode="mean", padding_idx=1), lambda: (torch.tensor([1, 4, 1, 2, 0]), torch.tensor([0, 2, 2]), None),
    ),
    "sum_include_last_offset": (
        dict(mode="sum", include_last_offset=True), lambda: (torch.tensor([3, 4, 5, 0, 1]), torch.tensor([0, 1, 3]), None),
    ),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_float64_bags_match_eager(name):
    options, make = CASES[name]
    indices, offsets, weights = make()

    def bags(table, indices, offsets, *extra):
        return F.embedding_bag(indices, table, offsets, per_sample_weights=extra[0] if extra else None, **options)

    args = (_weights(), indices, offsets) + ((weights,) if weights is not None else ())
    program = assert_matches_eager(bags, args, rtol=1e-15, atol=0)
    assert not any(n.op_type == "Cast" and n.outputs[0].dtype == ir.DataType.FLOAT for n in program.model.graph)


def test_float64_max_bags_stay_refused():
    def bags(table, indices, offsets):
        return F.embedding_bag(indices, table, offsets, mode="max")

    with pytest.raises(TranslationError, match="mode='max'"):
        torch_onnx_fx.export(bags, (_weights(), torch.tensor([0, 1, 2]), torch.tensor([0, 2])), verbose=False)
