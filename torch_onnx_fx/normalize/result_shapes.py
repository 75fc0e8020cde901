"""Result shapes torch's fake kernels get wrong, corrected to what the operator returns.

The graph walk declares each ONNX value with its FX node's example shape, and torch.export takes
that example from the operator's fake (meta) kernel. Where the fake kernel disagrees with the
real one, the declared shape contradicts what the translation computes (ONNX's checker rejects
the model) and the program's output is described wrongly. Each entry here names an operator, when
its fake kernel is wrong, and the shape its real kernel gives.
"""

from __future__ import annotations

from typing import Any, Callable

import torch
from torch.fx.passes.infra.pass_base import PassBase, PassResult

from torch_onnx_fx.normalize.conversions import node_name

__all__ = ["ResultShapePass"]


def _multilabel_margin_loss(node: torch.fx.Node, result: torch.Tensor) -> torch.Tensor | None:
    """One sample's loss with ``reduction="none"`` is 0-d (the fake kernel says ``[1]``)."""
    scores = node.args[0].meta.get("val") if isinstance(node.args[0], torch.fx.Node) else None
    reduction = node.args[2] if len(node.args) > 2 else node.kwargs.get("reduction", 1)
    if isinstance(scores, torch.Tensor) and scores.dim() == 1 and reduction == 0 and result.dim() == 1:
        return result.reshape(())
    return None


_CORRECTIONS: dict[str, Callable[[torch.fx.Node, torch.Tensor], torch.Tensor | None]] = {
    "aten::multilabel_margin_loss": _multilabel_margin_loss,
}


class ResultShapePass(PassBase):
    """Contract: a node of ``_CORRECTIONS`` whose example result its fake kernel mis-sized gets
    the real kernel's shape in ``meta["val"]``; nothing else changes."""

    def call(self, graph_module: torch.fx.GraphModule) -> PassResult:
        modified = False
        for node in graph_module.graph.nodes:
            correct = _CORRECTIONS.get(node_name(node)) if node.op == "call_function" else None
            result: Any = node.meta.get("val")
            if correct is None or not isinstance(result, torch.Tensor):
                continue
            fixed = correct(node, result)
            if fixed is not None:
                node.meta["val"] = fixed
                modified = True
        return PassResult(graph_module, modified)
