"""Sums and products asked for in bool (``x.sum(dtype=torch.bool)``, ``cumprod(..., dtype=torch.bool)``,
whose decomposition is a ``prims.prod`` of bools).

ATen accumulates them in bool, where true + true stays true: a sum is "any", a product "all", a
running sum or product their running forms. ONNX has no bool reduction or cumulative sum, so
the graph computes the int64 count or product of the bools and converts the result back to
bool, which is exactly that (a count is non-zero where any is true, a product of 0s and 1s is 1
where all are).
"""

from __future__ import annotations

import torch
from torch.fx.passes.infra.pass_base import PassBase, PassResult

from torch_onnx_fx.normalize import promotion
from torch_onnx_fx.normalize.conversions import CONVERT, converted, dtype_argument, dtype_position, node_name, tensor_example

__all__ = ["BoolAccumulationPass"]


# prims' reductions have no dtype argument: they reduce in the input's type, bool included.
_PRIMS = frozenset({"prims::prod", "prims::sum"})


def _in_bool(node: torch.fx.Node) -> bool:
    name = node_name(node)
    if name in _PRIMS:
        result = node.meta.get("val")
        return isinstance(result, torch.Tensor) and result.dtype == torch.bool
    return name in promotion.INTEGRAL_TO_LONG and dtype_argument(node) == torch.bool


class BoolAccumulationPass(PassBase):
    """Contract: a sum, product or their cumulative forms (``promotion.INTEGRAL_TO_LONG``) with
    ``dtype=torch.bool``, or a prims sum or product of bools, reads its input as bool converted
    to int64 and computes in int64; its readers read that result converted to bool. Runs before
    ``IntegralAccumulationPass``, which then has nothing to convert."""

    def call(self, graph_module: torch.fx.GraphModule) -> PassResult:
        changed = False
        for node in list(graph_module.graph.nodes):
            if node.op != "call_function" or not node.args or not _in_bool(node):
                continue
            example = tensor_example(node.args[0])
            if example is None:
                continue
            operand = node.args[0] if example.dtype == torch.bool else converted(node, node.args[0], torch.bool)
            args = [converted(node, operand, torch.int64), *node.args[1:]]
            kwargs = dict(node.kwargs)
            if "dtype" in kwargs:
                kwargs["dtype"] = torch.int64
            elif node_name(node) not in _PRIMS:
                args[dtype_position(node)] = torch.int64
            node.args, node.kwargs = tuple(args), kwargs
            result = node.meta["val"]
            node.meta["val"] = result.to(torch.int64)
            with graph_module.graph.inserting_after(node):
                as_bool = graph_module.graph.call_function(CONVERT, (node, torch.bool))
            as_bool.meta.update({k: v for k, v in node.meta.items() if k != "val"})
            as_bool.meta["val"] = result
            node.replace_all_uses_with(as_bool, delete_user_cb=lambda user: user is not as_bool)
            changed = True
        return PassResult(graph_module, changed)
