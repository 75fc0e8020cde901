"""ops/diagonal.py: diagonals gathered by position, so values off the diagonal are never read.

torchlib multiplied the matrix by an identity mask and summed: one inf or NaN anywhere made every
diagonal element NaN (a masked score matrix's diagonal, its trace).
"""

from __future__ import annotations

import pytest
import torch

from helpers import assert_matches_eager

INF, NAN = float("inf"), float("nan")
SCORES = torch.tensor([[1.0, -INF, -INF, 7.0], [3.0, 4.0, -INF, 8.0], [NAN, 5.0, 6.0, INF]])


@pytest.mark.parametrize("offset", [0, 1, -1, 3, -2, 9, -9])
def test_diagonal_ignores_what_lies_off_it(offset):
    assert_matches_eager(lambda x: (torch.diagonal(x, offset), torch.diag(x, offset)), (SCORES,), rtol=0, atol=0)


def test_trace_of_a_masked_matrix():
    assert_matches_eager(lambda x: torch.trace(x[:, :3]), (SCORES.nan_to_num(nan=2.0),), rtol=0, atol=0)


@pytest.mark.parametrize("dims", [(0, 1), (2, 0), (-1, -2), (1, 2)])
def test_batched_diagonals_of_any_two_dims(dims):
    x = torch.randn(3, 4, 5)
    x[0, 1, 2] = INF
    assert_matches_eager(lambda x: (torch.diagonal(x, 1, *dims), torch.diagonal_copy(x, -1, *dims)), (x,), rtol=0, atol=0)


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64, torch.bool, torch.float16, torch.complex64])
def test_every_dtype(dtype):
    x = (torch.randn(4, 3) * 10).to(dtype)
    assert_matches_eager(lambda x: torch.diagonal(x, -1), (x,), rtol=0, atol=0)


def test_dynamic_and_empty_matrices():
    program = assert_matches_eager(
        lambda x: torch.diagonal(x, 1), (torch.randn(3, 5),), dynamic_shapes=({0: "rows", 1: "cols"},), rtol=0, atol=0,
        more_inputs=[((torch.randn(6, 2),), {}), ((torch.randn(1, 1),), {}), ((torch.randn(4, 4),), {})],
    )
    assert [n.op_type for n in program.model.graph if n.op_type in ("Mul", "EyeLike")] != ["EyeLike"]
    assert_matches_eager(lambda x: torch.diagonal(x, 0, 1, 2), (torch.randn(0, 3, 3),))
