"""Indexing a tensor by aranges over its whole dimensions is a reshape of it.

transformers' attention masks (``masking_utils``) read the padding mask as
``padding_mask[batch_arange[:, None, None, None], kv_arange[None, None, None, :]]``: advanced
indexing whose indices enumerate each dimension in order, placed on different broadcast axes.
The result is the mask itself with size-1 axes inserted, ``padding_mask[:, None, None, :]``;
translated as written it is a GatherND over broadcast index grids (Max, Shape, two Expands, two
Unsqueezes, a Concat: eight nodes in every model, and a gather of batch x length elements at every
inference).

:class:`ArangeIndexPass` finds ``aten.index.Tensor`` nodes whose every index is
``arange(size of that dimension)`` (start 0, step 1) carried through ``unsqueeze``, whole-range
``slice`` and ``+ 0`` onto one broadcast axis each, in increasing order, and replaces each with
``unsqueeze`` nodes of the indexed tensor (after an ``index_select`` by the arange where its
length is not provably the dimension's). It is exact (the same elements in the same places, the
same out-of-range failure) and applied only when the result's shape is provably the index's.
"""

from __future__ import annotations

import dataclasses
import logging
import sys
from typing import Any

import torch
from torch.fx.experimental.symbolic_shapes import statically_known_true
from torch.fx.passes.infra.pass_base import PassBase, PassResult

__all__ = ["ArangeIndexPass", "whole_range"]

logger = logging.getLogger(__name__)

aten = torch.ops.aten
_INDEX = aten.index.Tensor
_ARANGES = (aten.arange.default, aten.arange.start, aten.arange.start_step)


@dataclasses.dataclass(frozen=True)
class _Placed:
    """The 1-d ``arange`` node ``source`` of ``length`` elements, placed on axis ``axis`` of a
    rank-``rank`` tensor (other axes 1)."""

    source: torch.fx.Node
    length: Any
    axis: int
    rank: int


def _val(value: Any) -> Any:
    return value.meta.get("val") if isinstance(value, torch.fx.Node) else value


def _is(value: Any, number: int) -> bool:
    value = _val(value)
    return isinstance(value, (int, torch.SymInt)) and statically_known_true(value == number)


def whole_range(size: Any, start: Any, end: Any, step: Any) -> bool:
    """Whether ``start:end:step`` (numbers, SymInts or None) covers all of a dimension of
    ``size``: start 0, step 1, an end at or past the size (``sys.maxsize`` as functionalization
    writes it, or a size known to be no smaller)."""
    whole_end = end is None or (isinstance(end, int) and end >= sys.maxsize) or (
        isinstance(end, (int, torch.SymInt)) and statically_known_true(end >= size)
    )
    return (start is None or _is(start, 0)) and (step is None or _is(step, 1)) and whole_end


def _whole_slice(node: torch.fx.Node) -> bool:
    """``aten.slice.Tensor(x, dim, 0, end >= size, 1)``: all of ``x``."""
    source, dim, start, end, step = (*node.args, None, None, None, None)[:5]
    example = _val(source)
    if not isinstance(example, torch.Tensor) or not isinstance(dim, int) or example.dim() == 0:
        return False
    return whole_range(example.shape[dim % example.dim()], start, _val(end), step)


def _placed(node: Any) -> _Placed | None:
    """Where an index enumerating a whole dimension puts it; None for any other index."""
    if not isinstance(node, torch.fx.Node) or node.op != "call_function":
        return None
    example = _val(node)
    if not isinstance(example, torch.Tensor) or example.dtype != torch.int64:
        return None
    if node.target in _ARANGES:
        args = node.args
        start, step = (0, 1) if node.target is aten.arange.default else (args[0], args[2] if len(args) > 2 else 1)
        if not (_is(start, 0) and _is(step, 1)) or example.dim() != 1:
            return None
        return _Placed(node, example.shape[0], 0, 1)
    if node.target is aten.unsqueeze.default:
        inner = _placed(node.args[0])
        if inner is None:
            return None
        at = node.args[1] % (inner.rank + 1)
        return dataclasses.replace(inner, axis=inner.axis + (1 if at <= inner.axis else 0), rank=inner.rank + 1)
    if node.target is aten.slice.Tensor and _whole_slice(node):
        return _placed(node.args[0])
    if node.target in (aten.add.Tensor, aten.add.Scalar) and len(node.args) == 2 and _is(node.args[1], 0) and not node.kwargs:
        return _placed(node.args[0])
    return None


def _same_shape(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.dim() == b.dim() and all(statically_known_true(x == y) for x, y in zip(a.shape, b.shape))


def _steps(node: torch.fx.Node) -> list[tuple[Any, tuple[Any, ...], Any]] | None:
    """The ``(target, extra args, example value)`` nodes that compute the index from the indexed
    tensor; None when the node is not an index by whole-dimension aranges in increasing
    broadcast order. An arange not provably as long as its dimension (the batch of
    ``input_ids`` and of ``attention_mask`` are separate symbols) selects it with
    ``index_select``: a shorter one keeps its prefix, a longer one fails as eager indexing does."""
    source, indices = node.args[0], node.args[1]
    example = _val(source)
    if not isinstance(example, torch.Tensor) or not indices or any(index is None for index in indices):
        return None
    placed = [_placed(index) for index in indices]
    if any(item is None for item in placed) or len(placed) > example.dim():
        return None
    rank = max(item.rank for item in placed)  # type: ignore[union-attr]
    axes = [item.axis + rank - item.rank for item in placed]  # type: ignore[union-attr]
    if any(later <= earlier for earlier, later in zip(axes, axes[1:])):
        return None
    steps: list[tuple[Any, tuple[Any, ...], Any]] = []
    for dim, item in enumerate(placed):
        if not statically_known_true(item.length == example.shape[dim]):  # type: ignore[union-attr]
            example = aten.index_select.default(example, dim, _val(item.source))  # type: ignore[union-attr]
            steps.append((aten.index_select.default, (dim, item.source), example))  # type: ignore[union-attr]
    for axis in range(rank):
        if axis not in axes:
            example = aten.unsqueeze.default(example, axis)
            steps.append((aten.unsqueeze.default, (axis,), example))
    if not steps:
        steps.append((aten.clone.default, (), aten.clone.default(example)))
    return steps if _same_shape(steps[-1][2], _val(node)) else None


class ArangeIndexPass(PassBase):
    """Contract: every ``aten.index.Tensor`` node whose indices enumerate whole dimensions of the
    indexed tensor, in increasing broadcast order, is replaced by ``index_select`` (by an arange
    not provably the dimension's length) and ``unsqueeze`` nodes of that tensor (a ``clone`` when
    none is needed) with the same example value shape; other nodes stay as they are."""

    def call(self, graph_module: torch.fx.GraphModule) -> PassResult:
        count = 0
        graph = graph_module.graph
        for node in list(graph.nodes):
            if node.op != "call_function" or node.target is not _INDEX:
                continue
            steps = _steps(node)
            if steps is None:
                continue
            result = node.args[0]
            with graph.inserting_before(node):
                for target, extra, value in steps:
                    result = graph.call_function(target, (result, *extra))
                    result.meta = {**node.meta, "val": value}
            node.replace_all_uses_with(result)
            graph.erase_node(node)
            count += 1
        if count:
            # The aranges left unread go with the ONNX graph's dead nodes.
            logger.debug("%d index(es) by whole-dimension aranges made reshapes", count)
        return PassResult(graph_module, bool(count))
