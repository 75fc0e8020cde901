"""float64 ``beta * self + alpha * product``: addmm, addmv, addbmm, baddbmm, addr.

torchlib passes ``beta`` and ``alpha`` as float32 (Gemm's attributes, or constants cast to the
tensor's type), so a float64 product scaled by 0.7 was scaled by 0.69999998807907: every element
about 4e-8 relatively off, silently, as with torch.onnx. Here the numbers become constants of the
tensor's dtype made from the Python numbers themselves. Only float64 is taken: below it the float32
number is the one ATen uses (half precision computes in float32, ``normalize/half_precision.py``).

ATen's zero cases are kept: ``beta=0`` ignores ``self`` (NaNs included) in all five, and
``alpha=0`` skips the product (its NaNs and infinities included) in addmm, addmv and addbmm, whose
BLAS calls do not read the matrices then, while addr multiplies by the zero. baddbmm multiplies
too, as ATen's own loop does for small products (under 400 multiply-adds); larger ones go to BLAS,
which skips the product: a NaN in the batches then differs.
"""

from __future__ import annotations

from typing import Any

import onnx_ir as ir
import torch
from onnxscript import opset18 as op

from torch_onnx_fx.registry import arg_example, float64_input, register

__all__ = ["aten_addmm_float64", "aten_addmv_float64", "aten_addbmm_float64", "aten_baddbmm_float64", "aten_addr_float64"]


def _float64_operands(node: torch.fx.Node) -> bool:
    """All three tensors float64 (mixed dtypes are ATen errors), the numbers plain Python ones."""
    tensors = [arg_example(node, index) for index in range(3)]
    numbers = [node.kwargs.get("beta", 1), node.kwargs.get("alpha", 1)]
    return (
        float64_input(node) and all(isinstance(t, torch.Tensor) and t.dtype == torch.float64 for t in tensors)
        and all(isinstance(n, (int, float)) and not isinstance(n, bool) for n in numbers)
    )


def _times(value: ir.Value, number: Any) -> ir.Value:
    # The tracer makes a Python number a constant of the tensor's dtype from the number itself.
    return value if number == 1 else op.Mul(value, float(number))


def _zeros_like(value: ir.Value) -> ir.Value:
    return op.Expand(op.CastLike(op.Constant(value=ir.tensor(0.0)), value), op.Shape(value))


def _combined(self: ir.Value, product: ir.Value, beta: Any, alpha: Any, *, zero_alpha_skips: bool) -> ir.Value:
    """``beta * self + alpha * product`` in the product's (the result's) shape."""
    if alpha == 0 and zero_alpha_skips:
        return _zeros_like(product) if beta == 0 else op.Expand(_times(self, beta), op.Shape(product))
    scaled = _times(product, alpha)
    return scaled if beta == 0 else op.Add(_times(self, beta), scaled)


@register("aten::addmm", supports=_float64_operands)
def aten_addmm_float64(self: ir.Value, mat1: ir.Value, mat2: ir.Value, *, beta: Any = 1, alpha: Any = 1) -> ir.Value:
    """addmm(Tensor self, Tensor mat1, Tensor mat2, *, Scalar beta=1, Scalar alpha=1) -> Tensor"""
    return _combined(self, op.MatMul(mat1, mat2), beta, alpha, zero_alpha_skips=True)


@register("aten::addmv", supports=_float64_operands)
def aten_addmv_float64(self: ir.Value, mat: ir.Value, vec: ir.Value, *, beta: Any = 1, alpha: Any = 1) -> ir.Value:
    """addmv(Tensor self, Tensor mat, Tensor vec, *, Scalar beta=1, Scalar alpha=1) -> Tensor"""
    return _combined(self, op.MatMul(mat, vec), beta, alpha, zero_alpha_skips=True)


@register("aten::addbmm", supports=_float64_operands)
def aten_addbmm_float64(self: ir.Value, batch1: ir.Value, batch2: ir.Value, *, beta: Any = 1, alpha: Any = 1) -> ir.Value:
    """addbmm(Tensor self, Tensor batch1, Tensor batch2, *, Scalar beta=1, Scalar alpha=1) -> Tensor"""
    product = op.ReduceSum(op.MatMul(batch1, batch2), op.Constant(value_ints=[0]), keepdims=0)
    return _combined(self, product, beta, alpha, zero_alpha_skips=True)


@register("aten::baddbmm", supports=_float64_operands)
def aten_baddbmm_float64(self: ir.Value, batch1: ir.Value, batch2: ir.Value, *, beta: Any = 1, alpha: Any = 1) -> ir.Value:
    """baddbmm(Tensor self, Tensor batch1, Tensor batch2, *, Scalar beta=1, Scalar alpha=1) -> Tensor"""
    return _combined(self, op.MatMul(batch1, batch2), beta, alpha, zero_alpha_skips=False)


@register("aten::addr", supports=_float64_operands)
def aten_addr_float64(self: ir.Value, vec1: ir.Value, vec2: ir.Value, *, beta: Any = 1, alpha: Any = 1) -> ir.Value:
    """addr(Tensor self, Tensor vec1, Tensor vec2, *, Scalar beta=1, Scalar alpha=1) -> Tensor:
    alpha scales vec1 before the outer product, in ATen's order."""
    column = op.Unsqueeze(_times(vec1, alpha), op.Constant(value_ints=[1]))
    outer = op.Mul(column, op.Unsqueeze(vec2, op.Constant(value_ints=[0])))
    return outer if beta == 0 else op.Add(_times(self, beta), outer)
