"""optimize/runtime/integer_reductions.py: integer sums and products exact, wrapping as ATen's do.

ONNX Runtime's CPU ReduceSum and ReduceProd accumulate integers in double precision: int64 sums
lose their low bits past 2**53 and overflowing sums and products saturate."""

from __future__ import annotations

import pytest
import torch

from helpers import assert_matches_eager

BIG = torch.tensor([[2**62 + 123, -5, 7], [2**53 + 1, 2**53 + 1, 3], [-(2**63) + 9, -11, 13]], dtype=torch.int64)

REDUCTIONS = {
    "sum-all": lambda t: t.sum(),
    "sum-dim-keepdim": lambda t: t.sum(1, keepdim=True),
    "sum-first-dim": lambda t: t.sum(0),
    "sum-empty": lambda t: t[:, :0].sum(1),
    "diagonal": lambda t: torch.diagonal(t),
    "trace": lambda t: torch.trace(t),
    "int32-sum-wraps": lambda t: (t % 2**31).to(torch.int32).sum(0, dtype=torch.int32),
    "prod-all": lambda t: t.prod(),
    "prod-dim": lambda t: (t + 1).prod(1),
    "prod-int8-wraps": lambda t: (t.to(torch.int8) + 3).prod(1, dtype=torch.int8),
    "prod-of-one": lambda t: t[:, :1].prod(1),
    "prod-empty": lambda t: t[:, :0].prod(1),
    "cumprod": lambda t: t[0].cumprod(0),
}


@pytest.mark.parametrize("name", REDUCTIONS)
def test_integer_reductions_are_exact_past_2_to_the_53_and_wrap_on_overflow(name):
    assert_matches_eager(REDUCTIONS[name], (BIG,))


@pytest.mark.parametrize("name", ["prod-dim", "prod-of-one", "sum-dim-keepdim"])
def test_axes_held_as_an_attribute_below_opset_18(name):
    # At opset 17 ReduceProd names its axes in an attribute: read as "no axes input", the product
    # over dim 1 was taken over every axis (a scalar for a [3] result).
    assert_matches_eager(REDUCTIONS[name], (BIG,), opset_version=17)


def test_long_integer_products_take_few_steps():
    # 1000 factors: a loop of ten halvings, not a thousand multiplications.
    x = torch.randint(-3, 4, (1000,), dtype=torch.int64)
    program = assert_matches_eager(lambda t: t.prod(), (x,))
    loops = [n for n in program.model.graph if n.op_type == "Loop"]
    assert len(loops) == 1


def test_an_integral_index_reduce_mean_floors_exactly():
    # The mean of int64 values past 2**53 went through double and lost its last digits.
    base = torch.tensor([2**62 + 5, -(2**62) - 7, 3], dtype=torch.int64)
    source = torch.tensor([2**61 + 1, 9, -(2**60) - 3, 11], dtype=torch.int64)
    index = torch.tensor([0, 0, 1, 2])
    assert_matches_eager(lambda b, s: b.index_reduce(0, index, s, "mean"), (base, source))


def test_counts_of_masks_and_bytes_keep_one_reduce_sum():
    """A sum of a bool, int8 or uint8 tensor cast to int64 never reaches 2**53 in ONNX Runtime's
    double accumulator, so it stays one ReduceSum; an int32 source can, and is rewritten."""
    x = torch.randint(-128, 128, (4, 1000), dtype=torch.int64)

    def counts(t):
        return (t > 3).sum(1), (t == 5).sum(), t.to(torch.int8).sum(0), t.to(torch.uint8).sum(1, keepdim=True)

    program = assert_matches_eager(counts, (x,))
    ops = [n.op_type for n in program.model.graph]
    assert ops.count("ReduceSum") == 4 and "CumSum" not in ops
    program = assert_matches_eager(lambda t: (t * 2**24).to(torch.int32).sum(1), (x,))
    assert "CumSum" in [n.op_type for n in program.model.graph]


def test_a_product_of_sizes_stays_one_reduce_prod():
    """The product of a tensor's sizes is its element count, far below 2**53: ONNX Runtime's own
    ReduceProd is exact there, so no halving Loop is written (it cost a decode step 0.5 ms)."""

    def positions(t):
        return torch.arange(t.numel()).reshape(t.shape) * 2

    dim = torch.export.Dim
    x = torch.randn(3, 5)
    program = assert_matches_eager(
        positions, (x,), dynamic_shapes={"t": {0: dim("rows"), 1: dim("columns")}},
        more_inputs=[((torch.randn(4, 7),), {})],
    )
    ops = [n.op_type for n in program.model.graph]
    assert "ReduceProd" in ops and "Loop" not in ops
