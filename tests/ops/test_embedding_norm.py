"""nn.Embedding(max_norm=...): the rows it reads renormalized as ATen does (ops/embedding_norm.py)."""

from __future__ import annotations

import copy
import math

import pytest
import torch

import torch_onnx_fx


@pytest.mark.parametrize("norm_type", [2.0, 1.0, 1.5, math.inf])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16])
def test_embedding_max_norm_renormalizes_as_aten(dtype, norm_type):
    # torchlib compared and divided with float32 constants (float64 8.5e-9 off, half types an ulp)
    # and raised |w| to the power inf for norm_type=inf: every renormalized row 0.39 off.
    torch.manual_seed(0)
    model = torch.nn.Embedding(10, 7, max_norm=0.3, norm_type=norm_type, dtype=dtype).eval()
    with torch.no_grad():
        model.weight[3] *= 0.01  # one row within the limit stays as it is
    ids = torch.tensor([[0, 2, 3], [2, 9, 0]])
    program = torch_onnx_fx.export(copy.deepcopy(model), (ids,), verbose=False, state_outputs=True)
    embedded, weight = program(ids)
    expected = model(ids)
    # Eager's bits, but for p = 1.5 whose power sums ONNX Runtime rounds an ulp differently.
    rtol = 0 if norm_type in (1.0, 2.0, math.inf) else 4 * torch.finfo(dtype).eps
    torch.testing.assert_close(embedded, expected, rtol=rtol, atol=0)
    torch.testing.assert_close(weight, model.weight.detach(), rtol=rtol, atol=0)


def test_embedding_max_norm_with_int32_indices():
    # ScatterND takes int64 indices only: an int32 lookup did not load.
    model = torch.nn.Embedding(10, 4, max_norm=1.0).eval()
    with torch.no_grad():
        model.weight.mul_(3)
    ids = torch.tensor([[1, 2, 2, 9]], dtype=torch.int32)
    program = torch_onnx_fx.export(copy.deepcopy(model), (ids,), verbose=False)
    assert torch.equal(program(ids)[0], model(ids))
