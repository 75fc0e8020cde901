"""Complex tensors through strides, indices, masks and products (ops/complex/tensors.py),
compared with eager in complex64 and complex128, 0-d and empty tensors included."""

from __future__ import annotations

import pytest
import torch

import torch_onnx_fx
from helpers import Fn, assert_matches_eager


INDEX = torch.tensor([[0, 1, 2, 0], [2, 1, 0, 1]])
MASK = torch.tensor([[True, False, True, True], [False, False, True, False], [True, True, False, False]])
FLAT = torch.arange(12) * (0.5 - 1j)

CASES = {
    "as_strided": lambda z: torch.as_strided(z, (2, 2), (1, 2), 1),
    "diagonal_of_product": lambda z: torch.diagonal(z * 2, offset=1),
    "trace": torch.trace,
    "prod": torch.prod,
    "prod_dim_keepdim": lambda z: torch.prod(z, 1, keepdim=True),
    "cumprod": lambda z: torch.cumprod(z, 0),
    "gather": lambda z: torch.gather(z, 0, INDEX),
    "take_along_dim": lambda z: torch.take_along_dim(z, INDEX, 0),
    "scatter_src": lambda z: z.scatter(0, INDEX, z[:2] * 2),
    "scatter_add": lambda z: z.scatter_add(0, INDEX, z[:2] * 2),
    "scatter_value": lambda z: z.scatter(0, INDEX, 1.5),
    "masked_select": lambda z: torch.masked_select(z, MASK),
    "masked_scatter": lambda z: z.masked_scatter(MASK, FLAT.to(z.dtype)),
    "masked_scatter_broadcast": lambda z: z[0].masked_scatter(MASK, FLAT.to(z.dtype)),  # self [4], mask [3, 4]
    "cat_with_legacy_empty": lambda z: torch.cat([torch.zeros(0, dtype=z.dtype), z, z * 1j, torch.zeros(0, dtype=z.dtype)], 1),
    "cat_1d_with_legacy_empty": lambda z: torch.cat([torch.zeros(0, dtype=z.dtype), z[0]]),
    "put": lambda z: z.put(torch.tensor([0, -1, 5]), FLAT[:3].to(z.dtype)),
    "put_accumulate": lambda z: z.put(torch.tensor([0, -1, 0]), FLAT[:3].to(z.dtype), accumulate=True),
    "logical_or": lambda z: torch.logical_or(z, z * 0),
    "logical_not": torch.logical_not,
    "pad_value": lambda z: torch.nn.functional.pad(z, (1, 2), value=1.5),
    "pad_circular": lambda z: torch.nn.functional.pad(z[None], (1, 2), mode="circular"),
    "diagonal_scatter": lambda z: torch.diagonal_scatter(z, z[0, :3] * 1j),
    "as_strided_scatter": lambda z: torch.as_strided_scatter(z, z[0, :2] * 3, (2,), (5,), 1),
    "nonzero_static": lambda z: torch.nonzero_static(z * MASK, size=8),
    "addbmm": lambda z: torch.addbmm(z, torch.stack([z, z * 1j]), torch.stack([z.mT @ z, z.mH @ z]), beta=2 - 1j, alpha=1j),
}


@pytest.mark.parametrize("dtype", [torch.complex64, torch.complex128])
@pytest.mark.parametrize("name", sorted(CASES))
def test_complex_tensor_op(name, dtype):
    z = torch.randn(3, 4, dtype=dtype)
    tolerance = {"rtol": 1e-5, "atol": 1e-5} if dtype == torch.complex64 else {"rtol": 1e-12, "atol": 1e-12}
    assert_matches_eager(Fn(CASES[name]), (z,), **tolerance)


EDGE_CASES = {
    "prod_0d": (torch.prod, ()),
    "cumprod_0d": (lambda z: torch.cumprod(z, 0), ()),
    "gather_0d": (lambda z: torch.gather(z, 0, torch.tensor(0)), ()),
    "scatter_0d": (lambda z: z.scatter(0, torch.tensor(0), z * 2), ()),
    "prod_over_empty_dim": (lambda z: torch.prod(z, 0), (0, 3)),
    "prod_of_nothing": (torch.prod, (0, 3)),
    "cumprod_empty": (lambda z: torch.cumprod(z, 0), (0, 3)),
}


@pytest.mark.parametrize("name", sorted(EDGE_CASES))
def test_complex_tensor_edge(name):
    fn, shape = EDGE_CASES[name]
    assert_matches_eager(Fn(fn), (torch.randn(shape, dtype=torch.complex128),), rtol=1e-12, atol=1e-12)


def test_complex_product_is_sequential_complex_multiplication():
    # ReduceProd over the real view would multiply real parts and imaginary parts apart:
    # (1+2i)(3+4i) = -5+10i, not 3+8i.
    z = torch.tensor([1 + 2j, 3 + 4j], dtype=torch.complex64)
    program = torch_onnx_fx.export(Fn(torch.prod), (z,), verbose=False)
    assert program(z)[0].item() == -5 + 10j


def test_multiplying_scatter_of_complex_is_refused():
    z = torch.randn(3, 4, dtype=torch.complex64)
    with pytest.raises(torch_onnx_fx.errors.TranslationError, match="multiply"):
        torch_onnx_fx.export(Fn(lambda z: z.scatter(0, INDEX, z[:2], reduce="multiply")), (z,), verbose=False)


@pytest.mark.parametrize("dtype", [torch.complex64, torch.complex128])
def test_complex_take_with_a_0d_index(dtype):
    # torch's decomposition of take guards on a data-dependent size for a 0-d index.
    z = torch.randn(3, 4, dtype=dtype)
    model = lambda z, i, j, k: (torch.take(z, i), torch.take(z[0, 0], k), torch.take(z, j))  # noqa: E731
    assert_matches_eager(model, (z, torch.tensor([[0, -1], [5, 2]]), torch.tensor(3), torch.tensor(0)))
