"""Linear layers, layer norms, inference dropout, means and running sums, as transformers use them.

With ``ops/elementwise.py`` and ``ops/layout.py``, these keep a transformer's graph free of
torchlib's functions (whose import costs a process ~0.4 s). Half-precision inputs reach them
already widened where ATen accumulates in float32 (``normalize/half_precision.py``); forms these
do not take are left to the later translations of the same target.
"""

from __future__ import annotations

from typing import Any, Sequence

import onnx_ir as ir
import torch
from onnxscript import opset18 as op

from torch_onnx_fx.dtypes import FLOAT_TYPES, onnx_dtype
from torch_onnx_fx.ops.windows import per_axis
from torch_onnx_fx.registry import arg_example, arg_value, float32_attribute, floating_input, limit_torchlib, register, wants_context
from torch_onnx_fx.translate.op_context import OpContext

__all__ = ["aten_linear", "aten_layer_norm", "aten_dropout_inference", "aten_mean_dim", "aten_cumsum", "aten_addmm", "aten_matmul",
           "aten_softmax", "aten_sum_dim"]


def _matrix_weight(node: torch.fx.Node) -> bool:
    weight = arg_example(node, 1)
    return floating_input(node) and isinstance(weight, torch.Tensor) and weight.dim() == 2


@register("aten::linear", supports=_matrix_weight)
def aten_linear(input: ir.Value, weight: ir.Value, bias: ir.Value | None = None) -> ir.Value:
    """linear(Tensor input, Tensor weight, Tensor? bias=None) -> Tensor

    A matrix input is one Gemm; other ranks multiply by the transposed weight, which ONNX
    Runtime's MatMul and the optimizer's projection packing read as one product."""
    if len(input.shape) == 2:
        return op.Gemm(input, weight, bias, transB=1)
    product = op.MatMul(input, op.Transpose(weight, perm=[1, 0]))
    return product if bias is None else op.Add(product, bias)


# LayerNormalization's epsilon is a float attribute: a float64 layer norm whose eps it would round
# goes to torch's decomposition, which adds eps in double. torchlib's translation would take the
# node with the same attribute, so it declines the same nodes.
_EPSILON_KEPT = float32_attribute(4, "eps", 1e-5)
limit_torchlib("aten::layer_norm", _EPSILON_KEPT)


def _layer_norm_epsilon_kept(node: torch.fx.Node) -> bool:
    return floating_input(node) and _EPSILON_KEPT(node)


@register("aten::layer_norm", supports=_layer_norm_epsilon_kept)
def aten_layer_norm(
    input: ir.Value, normalized_shape: Sequence[int], weight: ir.Value | None = None, bias: ir.Value | None = None,
    eps: float = 1e-5, cudnn_enable: bool = True,
) -> ir.Value:
    """layer_norm(Tensor input, SymInt[] normalized_shape, Tensor? weight=None, Tensor? bias=None, float eps=1e-05, bool cudnn_enable=True) -> Tensor"""
    axis = -len(normalized_shape)
    if weight is None:
        # LayerNormalization takes a scale; without one the normalized values are scaled by 1.
        weight = op.Expand(op.CastLike(op.Constant(value_float=1.0), input), op.Shape(input, start=axis))
    normalized, _, _ = op.LayerNormalization(input, weight, bias, axis=axis, epsilon=eps)
    return normalized


def _inference(node: torch.fx.Node) -> bool:
    return arg_value(node, 2, "train") is False


@register("aten::dropout", supports=_inference)
def aten_dropout_inference(input: ir.Value, p: float, train: bool) -> ir.Value:
    """dropout(Tensor input, float p, bool? train) -> Tensor, not training: the input itself."""
    return op.Identity(input)


def _float_reduction_over_dims(node: torch.fx.Node) -> bool:
    """A float mean or sum over listed dims of a tensor with dims, in its own dtype (no ``dtype=``;
    an empty list, ATen's "every dim", is left to the others)."""
    dims = arg_value(node, 1, "dim")
    example, result = arg_example(node), node.meta.get("val")
    return (
        floating_input(node) and example.dim() > 0 and isinstance(dims, (list, tuple)) and len(dims) > 0
        and all(isinstance(d, int) for d in dims) and "dtype" not in node.kwargs
        and isinstance(result, torch.Tensor) and result.dtype == example.dtype
    )


@register("aten::mean.dim", supports=_float_reduction_over_dims)
def aten_mean_dim(self: ir.Value, dim: Sequence[int], keepdim: bool = False, **kwargs: Any) -> ir.Value:
    """mean.dim(Tensor self, int[1]? dim, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor"""
    return op.ReduceMean(self, list(dim), keepdims=int(keepdim))


_INTEGRAL = frozenset({torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64})


def _running_sum(node: torch.fx.Node) -> bool:
    """A cumsum in its input's dtype (bools excluded), or of integers or bools in int64, where ATen
    sums them unless ``dtype=`` says otherwise: casting the input to int64 first is exact."""
    example, result = arg_example(node), node.meta.get("val")
    if not isinstance(example, torch.Tensor) or example.is_complex() or example.dim() == 0 or not isinstance(result, torch.Tensor):
        return False
    if result.dtype == example.dtype:
        return example.dtype != torch.bool
    return result.dtype == torch.int64 and example.dtype in _INTEGRAL


@register("aten::cumsum", supports=_running_sum)
@wants_context
def aten_cumsum(self: ir.Value, dim: int, *, ctx: OpContext, **kwargs: Any) -> ir.Value:
    """cumsum(Tensor self, int dim, *, ScalarType? dtype=None) -> Tensor"""
    if ctx.result.dtype != ctx.inputs[0].dtype:
        self = op.Cast(self, to=ir.DataType.INT64)
    return op.CumSum(self, dim)


def _float_matrices_kept_bias(node: torch.fx.Node) -> bool:
    """Float addmm whose ``self`` counts (beta != 0): with beta 0 ATen ignores ``self``, NaNs
    included, where Gemm would multiply them by 0."""
    mat1, mat2 = arg_example(node, 1), arg_example(node, 2)
    beta = node.kwargs.get("beta", 1)
    return (
        floating_input(node) and isinstance(mat1, torch.Tensor) and isinstance(mat2, torch.Tensor)
        and mat1.dtype == mat2.dtype == arg_example(node).dtype and isinstance(beta, (int, float)) and beta != 0
    )


@register("aten::addmm", supports=_float_matrices_kept_bias)
def aten_addmm(self: ir.Value, mat1: ir.Value, mat2: ir.Value, beta: float = 1.0, alpha: float = 1.0) -> ir.Value:
    """addmm(Tensor self, Tensor mat1, Tensor mat2, *, Scalar beta=1, Scalar alpha=1) -> Tensor"""
    return op.Gemm(mat1, mat2, self, alpha=float(alpha), beta=float(beta))


def _float_matrices(node: torch.fx.Node) -> bool:
    other = arg_example(node, 1)
    return (
        floating_input(node) and isinstance(other, torch.Tensor) and other.dtype == arg_example(node).dtype
        and arg_example(node).dim() > 0 and other.dim() > 0
    )


@register("aten::matmul", "aten::bmm", "aten::mm", supports=_float_matrices)
def aten_matmul(self: ir.Value, other: ir.Value) -> ir.Value:
    """matmul(Tensor self, Tensor other) -> Tensor: ONNX's MatMul broadcasts and drops 1-D
    operands' dims as torch.matmul does."""
    return op.MatMul(self, other)


def _batched_convolution(spatial: int) -> Any:
    """A float convolution of a batched input with numeric padding (``"same"``/``"valid"``
    strings and unbatched inputs are left to the others)."""

    def accepts(node: torch.fx.Node) -> bool:
        example, weight = arg_example(node), arg_example(node, 1)
        padding = arg_value(node, 4, "padding", 0)
        return (
            floating_input(node) and example.dim() == spatial + 2 and isinstance(weight, torch.Tensor)
            and weight.dtype == example.dtype and not isinstance(padding, str)
        )

    return accepts


def _convolution(spatial: int) -> Any:
    def translation(
        input: ir.Value, weight: ir.Value, bias: ir.Value | None = None, stride: Any = 1, padding: Any = 0,
        dilation: Any = 1, groups: int = 1,
    ) -> ir.Value:
        pads = per_axis(padding, spatial, [0] * spatial)
        return op.Conv(
            input, weight, bias, strides=per_axis(stride, spatial, [1] * spatial), pads=pads + pads,
            dilations=per_axis(dilation, spatial, [1] * spatial), group=int(groups),
        )

    translation.__name__ = f"aten_conv{spatial}d"
    translation.__doc__ = (
        f"conv{spatial}d(Tensor input, Tensor weight, Tensor? bias=None, SymInt[{spatial}] stride=1, "
        f"SymInt[{spatial}] padding=0, SymInt[{spatial}] dilation=1, SymInt groups=1) -> Tensor"
    )
    return translation


for _spatial in (1, 2, 3):
    register(f"aten::conv{_spatial}d", supports=_batched_convolution(_spatial))(_convolution(_spatial))


def _batched_pooling(spatial: int) -> Any:
    """Max pooling of a batched float or uint8 input (the wider integers have exact translations
    in ops/integer_windows.py; unbatched inputs are left to the others)."""

    def accepts(node: torch.fx.Node) -> bool:
        example = arg_example(node)
        return (
            isinstance(example, torch.Tensor) and example.dim() == spatial + 2
            and (example.dtype.is_floating_point or example.dtype == torch.uint8)
        )

    return accepts


def _max_pool(spatial: int) -> Any:
    def translation(
        self: ir.Value, kernel_size: Any, stride: Any = (), padding: Any = 0, dilation: Any = 1, ceil_mode: bool = False,
    ) -> ir.Value:
        kernel = per_axis(kernel_size, spatial, [])
        pads = per_axis(padding, spatial, [0] * spatial)
        # An empty stride is ATen's "the kernel's size".
        pooled, _ = op.MaxPool(
            self, kernel_shape=kernel, strides=per_axis(stride, spatial, kernel), pads=pads + pads,
            dilations=per_axis(dilation, spatial, [1] * spatial), ceil_mode=int(bool(ceil_mode)),
        )
        return pooled

    translation.__name__ = f"aten_max_pool{spatial}d"
    translation.__doc__ = (
        f"max_pool{spatial}d(Tensor self, int[{spatial}] kernel_size, int[{spatial}] stride=[], int[{spatial}] padding=0, "
        f"int[{spatial}] dilation=1, bool ceil_mode=False) -> Tensor"
    )
    return translation


for _spatial in (1, 2, 3):
    register(f"aten::max_pool{_spatial}d", supports=_batched_pooling(_spatial))(_max_pool(_spatial))


def _float_softmax(node: torch.fx.Node) -> bool:
    """A softmax of floats computed in float32 or float64: the input's own dtype, the ``dtype=``
    asked for (a float input widened to it, which is exact), or float32 for a half-precision
    input, whose result ATen rounds back once."""
    example, result = arg_example(node), node.meta.get("val")
    if not isinstance(example, torch.Tensor) or example.dtype not in FLOAT_TYPES or example.dim() == 0:
        return False
    if not isinstance(result, torch.Tensor) or result.dtype not in FLOAT_TYPES:
        return False
    if arg_value(node, 2, "dtype") is None:
        return result.dtype == example.dtype
    return result.dtype in (torch.float32, torch.float64) and result.dtype.itemsize >= example.dtype.itemsize


@register("aten::softmax.int", supports=_float_softmax)
@wants_context
def aten_softmax(self: ir.Value, dim: int, dtype: Any = None, *, ctx: OpContext) -> ir.Value:
    """softmax.int(Tensor self, int dim, ScalarType? dtype=None) -> Tensor"""
    own, result = ctx.inputs[0].dtype, ctx.result.dtype
    if own in (torch.float32, torch.float64) and result == own:
        return op.Softmax(self, axis=dim)
    computed = op.Softmax(op.Cast(self, to=ir.DataType.DOUBLE if result == torch.float64 else ir.DataType.FLOAT), axis=dim)
    return computed if result in (torch.float32, torch.float64) else op.Cast(computed, to=onnx_dtype(result))


@register("aten::sum.dim_IntList", supports=_float_reduction_over_dims)
def aten_sum_dim(self: ir.Value, dim: Sequence[int], keepdim: bool = False, **kwargs: Any) -> ir.Value:
    """sum.dim_IntList(Tensor self, int[1]? dim, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor"""
    return op.ReduceSum(self, list(dim), keepdims=int(keepdim))
