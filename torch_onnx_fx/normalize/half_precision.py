"""float16/bfloat16 reductions, matrix products, convolutions and multi-step elementwise formulas
computed in float32, as ATen's CPU kernels compute them."""

from __future__ import annotations

import logging
from typing import Any, Callable

import torch
from torch.fx.passes.infra.pass_base import PassBase, PassResult

from torch_onnx_fx.normalize.conversions import CONVERT, converted, node_name, tensor_example

__all__ = ["HalfPrecisionAccumulationPass"]

logger = logging.getLogger(__name__)

# Operators ATen's CPU kernels compute on float16/bfloat16 tensors with float32 accumulation
# (``opmath``): sums of many terms, norms, products of matrices, convolutions, attention.
# Computed in half precision they overflow (a norm of a few hundred values exceeds 65504) or
# lose digits eager keeps; computed in float32 and rounded once they round as eager does.
_HALF_ACCUMULATING = frozenset({
    "aten::sum", "aten::sum.dim_IntList", "aten::mean", "aten::mean.dim", "aten::linalg_vector_norm",
    "aten::dist", "aten::norm.Scalar", "aten::norm.ScalarOpt_dim", "aten::var.correction", "aten::std.correction",
    "aten::cumsum", "aten::prod", "aten::prod.dim_int", "aten::mm", "aten::bmm", "aten::addmm", "aten::addbmm",
    "aten::baddbmm", "aten::matmul", "aten::linear", "aten::dot", "aten::mv", "aten::addmv", "aten::convolution",
    "aten::conv1d", "aten::conv2d", "aten::conv3d", "aten::conv_transpose1d", "aten::conv_transpose2d",
    "aten::conv_transpose3d.input", "aten::scaled_dot_product_attention", "aten::linalg_matrix_exp",
    "aten::logsumexp", "aten::_softmax", "aten::_log_softmax", "aten::grid_sampler_2d", "aten::upsample_bilinear2d.vec",
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
})
_HALF_IN_FLOAT32 = _HALF_ACCUMULATING | _HALF_COMPOSITE
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
            if node.op != "call_function" or node_name(node) not in _HALF_IN_FLOAT32 or self.fused(node):
                continue
            result = node.meta.get("val")
            if not isinstance(result, torch.Tensor) or result.dtype not in _HALF:
                continue
            node.args = tuple(_to_float(node, a) for a in node.args)
            node.kwargs = {k: _to_float(node, v) for k, v in node.kwargs.items()}
            node.meta["val"] = result.to(torch.float32)
            graph = graph_module.graph
            with graph.inserting_after(node):
                back = graph.call_function(CONVERT, (node, result.dtype))
            back.meta["val"] = result
            for key in ("stack_trace", "nn_module_stack", "source_fn_stack"):
                if key in node.meta:
                    back.meta[key] = node.meta[key]
            node.replace_all_uses_with(back, delete_user_cb=lambda user: user is not back)
            count += 1
        if count:
            logger.debug("computing %d half-precision node(s) in float32", count)
        return PassResult(graph_module, bool(count))


def _to_float(node: torch.fx.Node, arg: Any) -> Any:
    example = tensor_example(arg)
    if example is not None and example.dtype in _HALF:
        return converted(node, arg, torch.float32)
    if isinstance(arg, (list, tuple)):
        return type(arg)(_to_float(node, a) for a in arg)
    return arg
