"""float16/bfloat16 reductions, matrix products, convolutions and multi-step elementwise formulas
computed in float32, as ATen's CPU kernels compute them."""

from __future__ import annotations

import logging
import operator
from typing import Any, Callable

import torch
from torch.fx.passes.infra.pass_base import PassBase, PassResult

from torch_onnx_fx.normalize.conversions import CONVERT, INSERTED, converted, node_name, tensor_example

__all__ = ["HalfPrecisionAccumulationPass"]

logger = logging.getLogger(__name__)

# Operators ATen's CPU kernels compute on float16/bfloat16 tensors with float32 accumulation
# (``opmath``): sums of many terms, norms, products of matrices, convolutions, attention.
# Computed in half precision they overflow (a norm of a few hundred values exceeds 65504) or
# lose digits eager keeps; computed in float32 and rounded once they round as eager does.
_HALF_ACCUMULATING = frozenset({
    "aten::sum", "aten::sum.dim_IntList", "aten::mean", "aten::mean.dim", "aten::linalg_vector_norm",
    "aten::dist", "aten::norm.Scalar", "aten::norm.ScalarOpt_dim", "aten::var.correction", "aten::std.correction",
    "aten::var_mean.correction", "aten::std_mean.correction",
    "aten::cumsum", "aten::prod", "aten::prod.dim_int", "aten::mm", "aten::bmm", "aten::addmm", "aten::addbmm",
    "aten::baddbmm", "aten::matmul", "aten::linear", "aten::dot", "aten::mv", "aten::addmv", "aten::convolution",
    "aten::conv1d", "aten::conv2d", "aten::conv3d", "aten::conv_transpose1d", "aten::conv_transpose2d",
    "aten::conv_transpose3d.input", "aten::scaled_dot_product_attention", "aten::linalg_matrix_exp",
    "aten::logsumexp", "aten::_softmax", "aten::_log_softmax", "aten::grid_sampler_2d", "aten::upsample_bilinear2d.vec",
    # Not the 3-D ones: ATen's adaptive_avg_pool3d sums in the half type itself.
    "aten::adaptive_avg_pool1d", "aten::adaptive_avg_pool2d", "aten::_adaptive_avg_pool2d",
})
# Elementwise operators whose translation is several ONNX operators (remainder is a - floor(a / b)
# * b): computed in half precision each step rounds, where ATen computes the whole formula in
# float32 and rounds once. With values in the hundreds a bfloat16 step is off by units
# (remainder(-500.6, 3) gave 2.0 for -0.61; round(x, decimals=-3) missed by 1000).
# Only those measured to round once in eager (its result equal to the float32 computation rounded,
# on 4096 values near 500): floor division, logit, xlogy and sinc round step by step in eager too.
_HALF_COMPOSITE = frozenset({
    "aten::remainder.Tensor", "aten::remainder.Scalar", "aten::remainder.Scalar_Tensor", "aten::round.decimals",
    "aten::lerp.Scalar", "aten::lerp.Tensor", "aten::addcmul", "aten::addcdiv", "aten::hypot",
    # Measured like the above (4,096 float16 values, all equal to the float32 result rounded once)
    # once each node of a half graph rounds to its type (KernelGapPass), as ATen's separate
    # operators do: x * sigmoid(x) rounded between its two nodes was off in 23 % of silu's results.
    "aten::silu", "aten::sigmoid", "aten::rsqrt", "aten::softplus", "aten::erfc", "aten::log10", "aten::log2", "aten::glu",
    "aten::atan2", "aten::sinc", "aten::rad2deg", "aten::deg2rad", "aten::elu",
    # Normalized, scaled and shifted in float32 and rounded once (the float32 group norm rounded,
    # on 4 shapes): the scale and shift as half nodes put a third of float16 results an ulp off.
    "aten::group_norm", "aten::native_group_norm",
})
_HALF_IN_FLOAT32 = _HALF_ACCUMULATING | _HALF_COMPOSITE
_REMAINDERS = frozenset({"aten::remainder.Tensor", "aten::remainder.Scalar", "aten::remainder.Scalar_Tensor"})
# Products and quotients by a Python number: ATen computes them in float32 with the number as a
# float32, not rounded to the tensor's type first (x * 0.3 in float16 with 0.3 as float16: 23 % of
# the results off by an ulp; 45 % in bfloat16). Where the number is not a number of the half
# type, so do we. Sums and differences are not: ATen rounds their number to the tensor's type
# (measured: x + 0.1 and 0.7 - x computed so matched 95 % and 70 %, rounded first all).
_SCALAR_ARITHMETIC = frozenset({"aten::mul.Tensor", "aten::mul.Scalar", "aten::div.Tensor", "aten::div.Scalar"})
_HALF = (torch.float16, torch.bfloat16)


class HalfPrecisionAccumulationPass(PassBase):
    """float16/bfloat16 operators that ATen accumulates in float32 compute in float32 here too.

    Contract: a node of ``_HALF_ACCUMULATING`` or ``_HALF_COMPOSITE`` with one tensor result of a half dtype gets every
    half-dtype tensor argument converted to float32, computes in float32 (its example value
    says so), and a conversion back to the half dtype takes its place for every user. Nodes
    ``fused`` says become one ONNX operator (``Attention``) are left to that operator's kernel,
    which keeps its intermediates at the precision it chooses.
    """

    def __init__(self, fused: Callable[[torch.fx.Node], bool] = lambda node: False) -> None:
        super().__init__()
        self.fused = fused

    def call(self, graph_module: torch.fx.GraphModule) -> PassResult:
        count = 0
        for node in list(graph_module.graph.nodes):
            if node.op != "call_function" or self.fused(node):
                continue
            scaled_sum = _scaled_sum(node)
            scalar = _float_scalar_operand(node)
            if scalar is not None:
                _take_scalar_unrounded(node, scalar)
            if node_name(node) not in _HALF_IN_FLOAT32 and not _inexact_number(node) and not scaled_sum and scalar is None:
                continue
            result = node.meta.get("val")
            if isinstance(result, torch.Tensor) and result.dtype in _HALF:
                converted_results = [node]
            elif _half_tuple(node, result):
                # var_mean and std_mean: each result is read through a getitem, converted after it.
                converted_results = list(node.users)
            else:
                continue
            # A scaled sum is ATen's fused multiply-add in float32, rounded to the half type: in
            # float64 the product is exact and the sum rounds once more than the fused one
            # (a tie at float32 precision, never seen), then through float32 to the half type.
            wide = torch.float64 if scaled_sum else torch.float32
            node.args = tuple(_to_float(node, a, wide) for a in node.args)
            node.kwargs = {k: _to_float(node, v, wide) for k, v in node.kwargs.items()}
            if scaled_sum:
                # ATen rounds alpha, and a Python number as the other operand, to the tensors'
                # type, then sums in float32 and rounds once (other=0.3 taken as a float32 put
                # 14 of 300 float16 results of add(x, 0.3, alpha=2) an ulp or more off).
                # (rsub is sub(other, self, alpha) here: its number comes first.)
                node.kwargs = {**node.kwargs, "alpha": _rounded_number(float(node.kwargs["alpha"]), result.dtype)}
                node.args = tuple(_rounded_number(a, result.dtype) for a in node.args)
            if node_name(node) in _REMAINDERS:
                # ATen rounds a Python number to the tensor's type before its float32 remainder
                # (x % 0.3 in float16 divides by 0.2998...: 97 % of the results differed).
                node.args = tuple(_rounded_number(a, result.dtype) for a in node.args)
            halves = [value.meta["val"] for value in converted_results]
            node.meta["val"] = result.to(wide) if node in converted_results else type(result)(r.to(wide) for r in result)
            for value, half in zip(converted_results, halves):
                _round_back(graph_module.graph, value, half, node, wide)
            count += 1
        if count:
            logger.debug("computing %d half-precision node(s) in float32", count)
        return PassResult(graph_module, bool(count))


def _inexact_number(node: torch.fx.Node) -> bool:
    """Arithmetic of a half tensor with a Python float its type does not hold exactly."""
    result = node.meta.get("val")
    if node_name(node) not in _SCALAR_ARITHMETIC or not isinstance(result, torch.Tensor) or result.dtype not in _HALF:
        return False
    arguments = (*node.args, *node.kwargs.values())
    numbers = [a for a in arguments if isinstance(a, float)]
    # A size, or a number computed from sizes, is not known here: ATen takes it to float32 as it
    # takes a Python number (n ** 0.5 rounded to float16 first put 1 in 3 products an ulp off,
    # and x / n for n above 2048 divided by a neighbour of n).
    return any(_rounded_number(number, result.dtype) != number for number in numbers) or any(
        isinstance(a, torch.fx.Node) and isinstance(a.meta.get("val"), (torch.SymInt, torch.SymFloat)) for a in arguments
    )


def _float_scalar_operand(node: torch.fx.Node) -> torch.fx.Node | None:
    """The 0-dim float32/float64 tensor a half tensor is multiplied or divided by, as the second
    operand, before type promotion converted it to the half type; else None.

    ATen takes such a tensor as a CPU scalar and computes with its own value in float32, as with
    a Python number (``x * scale`` with a float32 ``scale`` buffer: a third of float16 products
    an ulp off when the scale was rounded first). Only as the second operand: ``scale * x``
    rounds it, and so does every other operator (measured on 4,096 values, three scales)."""
    result = node.meta.get("val")
    if node_name(node) not in ("aten::mul.Tensor", "aten::div.Tensor") or len(node.args) < 2:
        return None
    if not isinstance(result, torch.Tensor) or result.dtype not in _HALF:
        return None
    other = node.args[1]
    inserted = isinstance(other, torch.fx.Node) and other.target is CONVERT and other.meta.get(INSERTED, False)
    source = other.args[0] if inserted else other
    example = tensor_example(source)
    if example is None or example.dim() != 0 or example.dtype not in (torch.float32, torch.float64):
        return None
    return source


def _take_scalar_unrounded(node: torch.fx.Node, scalar: torch.fx.Node) -> None:
    """``node`` reads ``scalar`` itself (as float32) in place of its conversion to the half type."""
    conversion = node.args[1]
    unrounded = scalar if tensor_example(scalar).dtype == torch.float32 else converted(node, scalar, torch.float32)
    node.args = (node.args[0], unrounded, *node.args[2:])
    if isinstance(conversion, torch.fx.Node) and conversion is not scalar and not conversion.users:
        node.graph.erase_node(conversion)


def _rounded_number(arg: Any, dtype: torch.dtype) -> Any:
    """A Python float as the nearest number of ``dtype``; anything else as it is."""
    return float(torch.tensor(arg, dtype=dtype)) if isinstance(arg, float) else arg


def _scaled_sum(node: torch.fx.Node) -> bool:
    """``a + alpha * b`` (or minus) of half tensors: one ATen operator, rounded once, where the
    graph's Mul and Add would round twice (an add with alpha=0.3: 11 % of the results off)."""
    result = node.meta.get("val")
    alpha = node.kwargs.get("alpha")
    return (
        node_name(node) in ("aten::add.Tensor", "aten::sub.Tensor") and isinstance(result, torch.Tensor)
        and result.dtype in _HALF and isinstance(alpha, (int, float)) and not isinstance(alpha, bool) and alpha != 1
    )


def _half_tuple(node: torch.fx.Node, result: Any) -> bool:
    return (
        isinstance(result, (tuple, list)) and bool(result)
        and all(isinstance(r, torch.Tensor) and r.dtype in _HALF for r in result)
        and all(user.op == "call_function" and user.target is operator.getitem for user in node.users)
    )


def _round_back(graph: torch.fx.Graph, value: torch.fx.Node, half: torch.Tensor, source: torch.fx.Node, wide: torch.dtype) -> None:
    """``value`` (now ``wide``; ``half`` its example before) is converted back for all its users,
    through float32 from float64 (rounding float64 straight to the half type would round a value
    just past a float32 tie to the other side)."""
    if value is not source:
        value.meta["val"] = half.to(wide)
    steps = [half.to(torch.float32), half] if wide == torch.float64 else [half]
    first, back = None, value
    for example in steps:
        with graph.inserting_after(back):
            back = graph.call_function(CONVERT, (back, example.dtype))
        back.meta["val"] = example
        first = first or back
        for key in ("stack_trace", "nn_module_stack", "source_fn_stack"):
            if key in source.meta:
                back.meta[key] = source.meta[key]
    value.replace_all_uses_with(back, delete_user_cb=lambda user: user is not first)


def _to_float(node: torch.fx.Node, arg: Any, wide: torch.dtype = torch.float32) -> Any:
    example = tensor_example(arg)
    if example is not None and example.dtype in _HALF:
        return converted(node, arg, wide)
    if isinstance(arg, (list, tuple)):
        return type(arg)(_to_float(node, a, wide) for a in arg)
    return arg
