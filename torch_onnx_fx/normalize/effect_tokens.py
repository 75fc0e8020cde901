"""Side-effecting operators called without ``with_effects``' ordering token: an ONNX graph has no
side effects to order."""

from __future__ import annotations

import logging
from typing import Any

import torch
from torch.fx.passes.infra.pass_base import PassBase, PassResult

__all__ = ["EffectTokenPass"]

logger = logging.getLogger(__name__)

_WITH_EFFECTS = torch.ops.higher_order.with_effects


class EffectTokenPass(PassBase):
    """Side-effecting operators are called directly, without their ordering token.

    Contract: every ``with_effects(token, op, *args)`` becomes ``op(*args)``; its users
    ``getitem(·, 0)`` (the new token) read the incoming token instead, and ``getitem(·, i)``
    read the op's result ``i - 1``. An ONNX graph has no side effects to order, so the token
    chain collapses to the program's token inputs, which the graph walk leaves out of the graph.
    """

    def call(self, graph_module: torch.fx.GraphModule) -> PassResult:
        graph = graph_module.graph
        count = 0
        for node in list(graph.nodes):
            if node.op != "call_function" or node.target is not _WITH_EFFECTS:
                continue
            token, op, *args = node.args
            with graph.inserting_before(node):
                call = graph.call_function(op, tuple(args), dict(node.kwargs))
            call.meta = {**node.meta, "val": _results(node.meta.get("val"))}
            single = not isinstance(call.meta["val"], (list, tuple))
            for user in list(node.users):
                index = user.args[1]
                if index == 0:
                    user.replace_all_uses_with(token)
                elif single:
                    user.replace_all_uses_with(call)
                else:
                    user.args = (call, index - 1)
                    continue
                graph.erase_node(user)
            graph.erase_node(node)
            count += 1
        if count:
            logger.debug("EffectTokenPass: %d effectful call(s) unwrapped", count)
        return PassResult(graph_module, bool(count))


def _results(value: Any) -> Any:
    """The wrapped op's result from ``with_effects``' ``(token, *results)``."""
    if not isinstance(value, (list, tuple)):
        return value
    rest = tuple(value[1:])
    return rest[0] if len(rest) == 1 else rest
