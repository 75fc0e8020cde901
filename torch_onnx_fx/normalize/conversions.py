"""What the dtype passes of the normalize stage share: a ``prims.convert_element_type`` node
inserted in front of an operand, and the walk that inserts the ones a pass asks for.

ATen computes ``int_tensor + 0.5`` in float, ``real * 1j`` in complex, ``bool_tensor.sum()`` in
int64 and indexes with any integer type; ONNX operators take one dtype per type parameter and
index with int64. Each dtype pass inserts conversions (translated as a ``Cast``, or for complex
results by the complex conversion) in front of the operands that need one.
"""

from __future__ import annotations

import logging
from typing import Any

import torch
from torch.fx.passes.infra.pass_base import PassBase, PassResult

__all__ = ["CONVERT", "INSERTED", "ConvertingPass", "converted", "dtype_position", "dtype_argument", "node_name", "tensor_example"]

logger = logging.getLogger(__name__)

CONVERT = torch.ops.prims.convert_element_type.default
INSERTED = "torch_onnx_fx_inserted_conversion"


def node_name(node: torch.fx.Node) -> str | None:
    return node.target.name() if isinstance(node.target, torch._ops.OpOverload) else None


def tensor_example(arg: Any) -> torch.Tensor | None:
    example = arg.meta.get("val") if isinstance(arg, torch.fx.Node) else None
    return example if isinstance(example, torch.Tensor) else None


def dtype_position(node: torch.fx.Node) -> int | None:
    """Where the operator's schema puts its ``dtype`` argument, if it has one."""
    names = [a.name for a in node.target._schema.arguments]
    return names.index("dtype") if "dtype" in names else None


def dtype_argument(node: torch.fx.Node) -> Any:
    """The node's ``dtype`` argument, given by keyword or by position; None when not given."""
    if "dtype" in node.kwargs:
        return node.kwargs["dtype"]
    position = dtype_position(node)
    return node.args[position] if position is not None and position < len(node.args) else None


def converted(node: torch.fx.Node, arg: torch.fx.Node, dtype: torch.dtype) -> torch.fx.Node:
    """A ``convert_element_type(arg, dtype)`` node just before ``node``, with ``node``'s source
    location so that errors about it point at the model's line."""
    graph = node.graph
    with graph.inserting_before(node):
        conversion = graph.call_function(CONVERT, (arg, dtype))
    conversion.meta["val"] = arg.meta["val"].to(dtype)
    # Told apart from a conversion the model itself makes (half_precision reads it).
    conversion.meta[INSERTED] = True
    for key in ("stack_trace", "nn_module_stack", "source_fn_stack"):
        if key in node.meta:
            conversion.meta[key] = node.meta[key]
    return conversion


class ConvertingPass(PassBase):
    """Shared walk: ``conversions(node)`` names (argument index, dtype) pairs; list arguments
    are addressed as (index, position in the list)."""

    def conversions(self, node: torch.fx.Node) -> list[tuple[int | tuple[int, int], torch.dtype]]:
        raise NotImplementedError

    def call(self, graph_module: torch.fx.GraphModule) -> PassResult:
        count = 0
        for node in list(graph_module.graph.nodes):
            if node.op != "call_function":
                continue
            wanted = self.conversions(node)
            if not wanted:
                continue
            args = list(node.args)
            for where, dtype in wanted:
                if isinstance(where, tuple):
                    index, position = where
                    items = list(args[index])
                    items[position] = converted(node, items[position], dtype)
                    args[index] = type(node.args[index])(items)
                else:
                    args[where] = converted(node, args[where], dtype)
                count += 1
            node.args = tuple(args)
        if count:
            logger.debug("%s: %d conversion(s)", type(self).__name__, count)
        return PassResult(graph_module, bool(count))
