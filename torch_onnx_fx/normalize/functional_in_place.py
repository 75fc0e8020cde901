"""In-place operators on tensors nothing else observes, retargeted to their functional forms, so
the graph walk never rebinds a value."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import torch
from torch.fx.passes.infra.pass_base import PassBase, PassResult

from torch_onnx_fx.normalize import inplace

if TYPE_CHECKING:
    from torch_onnx_fx.registry import TranslationTable

__all__ = ["InPlaceToFunctionalPass"]

logger = logging.getLogger(__name__)


class InPlaceToFunctionalPass(PassBase):
    """In-place ops on tensors nothing else observes become their functional ops.

    Contract: an in-place node (``aten.add_.Tensor``) that ``table`` cannot translate as it is,
    but whose functional overload it can, and whose tensor :func:`torch_onnx_fx.normalize.inplace.same_tensor`
    finds unobserved through aliases, is retargeted to the functional overload; every node after
    it that read the mutated tensor (through any node of its chain) reads the new node instead.
    The graph is then free of that mutation, so translation never rebinds values.
    """

    def __init__(self, table: TranslationTable) -> None:
        super().__init__()
        self.table = table

    def call(self, graph_module: torch.fx.GraphModule) -> PassResult:
        count = 0
        order = {node: i for i, node in enumerate(graph_module.graph.nodes)}
        for node in list(graph_module.graph.nodes):
            if node.op != "call_function" or self.table.has(node.target, node):
                continue
            found = inplace.rebinding(node, self.table)
            if found is None:
                continue
            functional, chain = found
            node.target = functional
            for alias in chain:
                for user in list(alias.users):
                    if user is not node and (user.op == "output" or order[user] > order[node]):
                        user.replace_input_with(alias, node)
            count += 1
        if count:
            logger.debug("%d in-place op(s) made functional", count)
        return PassResult(graph_module, bool(count))
