"""optimize/runtime/matrix_vector.py: matrix-vector products with a transposed matrix.

ONNX Runtime's Transpose-into-MatMul fusion returns wrong numbers for ``MatMul(Transpose(A), v)``
with a 1-D ``v``: ``x.t() @ v`` was off by units (and addmv of a transposed view by 159 in
float16). Every float32 case here failed before.
"""

from __future__ import annotations

import pytest
import torch

from helpers import assert_matches_eager


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16])
def test_transposed_matrix_times_vector(dtype):
    x, v, b = torch.randn(10, 6, dtype=dtype), torch.randn(10, dtype=dtype), torch.randn(5, dtype=dtype)
    batch = torch.randn(2, 10, 5, dtype=dtype)
    tolerance = {"rtol": 1e-2, "atol": 1e-2} if dtype == torch.float16 else {}

    def model(x, v, b, batch):
        sliced = x[:, 1:].t()
        return sliced @ v, torch.addmv(b, sliced, v), torch.mv(x.t(), v), batch.transpose(1, 2) @ v, v @ x

    assert_matches_eager(model, (x, v, b, batch), **tolerance)


def test_matrix_times_vector_inside_a_branch():
    # torch.cond's branches become If subgraphs: the pass reaches them too.
    def model(x, v):
        return torch.cond(v.sum() > 0, lambda x, v: x.t() @ v, lambda x, v: x.t() @ (v * 2), (x, v))

    x = torch.randn(10, 6)
    assert_matches_eager(model, (x, torch.ones(10)))
    assert_matches_eager(model, (x, -torch.ones(10)))
