"""Operators that read storage take the tensor that owns it, not a view of it.

``as_strided(x, size, stride, offset)`` reads ``x``'s *storage* — the memory of the tensor ``x``
is a view of — at ``offset + sum(i * stride)``, whatever ``x``'s own shape, strides and offset
are. An ONNX graph has values, not memory, so a translation can only reconstruct storage from the
tensor it is given and that tensor's layout. Given a view (``t.permute(...)``, ``t[:, 1:]``,
``t.unfold(...)``), it would see only part of the storage, or see it in the view's order. Every
view shares its base's storage, so ``as_strided(view, ...)`` is ``as_strided(base, ...)`` in
eager PyTorch too; this pass makes that explicit, and the translation then lays out the base as
its recorded strides say (``ops/strided.py``).
"""

from __future__ import annotations

import logging
from typing import Any

import torch
from torch.fx.passes.infra.pass_base import PassBase, PassResult

__all__ = ["StorageBasePass", "READS_STORAGE"]

logger = logging.getLogger(__name__)

READS_STORAGE = frozenset({torch.ops.aten.as_strided.default, torch.ops.aten.as_strided_copy.default})


def _storage(node: Any) -> Any:
    example = node.meta.get("val") if isinstance(node, torch.fx.Node) else None
    if not isinstance(example, torch.Tensor):
        return None
    try:
        return example.untyped_storage()._cdata
    except (NotImplementedError, RuntimeError):  # tensors without storage (sparse, nested)
        return None


def _base(node: torch.fx.Node) -> torch.fx.Node:
    """The oldest node of the chain of first arguments that shares ``node``'s storage."""
    storage = _storage(node)
    while storage is not None and node.op == "call_function" and node.args:
        source = node.args[0]
        if not isinstance(source, torch.fx.Node) or _storage(source) != storage:
            break
        node = source
    return node


class StorageBasePass(PassBase):
    """``as_strided`` (and ``as_strided_copy``) of a view reads its base instead.

    Contract: for every such node whose input is a view (its first argument's chain of first
    arguments shares its storage, per the recorded example values), the input becomes the oldest
    node of that chain, and a missing storage offset becomes the view's own (as_strided starts
    where its input starts); the result is the same in eager PyTorch, which reads storage either
    way. A view with a symbolic storage offset is left as it is.
    """

    def call(self, graph_module: torch.fx.GraphModule) -> PassResult:
        count = 0
        for node in graph_module.graph.nodes:
            if node.op != "call_function" or node.target not in READS_STORAGE or not node.args:
                continue
            source = node.args[0]
            if not isinstance(source, torch.fx.Node):
                continue
            base = _base(source)
            if base is source:
                continue
            args = list(node.args) + [None] * (4 - len(node.args))
            if args[3] is None:
                # Without an offset, as_strided starts where its input starts, not its base.
                offset = source.meta["val"].storage_offset()
                if not isinstance(offset, int):
                    continue
                args[3] = offset
            node.args = (base, *args[1:])
            count += 1
        if count:
            logger.debug("StorageBasePass: %d as_strided node(s) read their base's storage", count)
        return PassResult(graph_module, bool(count))
