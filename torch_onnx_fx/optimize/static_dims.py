"""Static dims read from a partly dynamic shape become constants.

torchlib's functions read sizes at run time: ``Gather(Shape(x), [1])`` for the length of the dim
they work on. When x has a dynamic batch but a static length, onnxscript's folder keeps the
``Shape`` (its output is not constant) and so the ``Gather`` and the arithmetic after it:
``unfold`` of a 1024-sample signal with a dynamic batch built its frame indices from 7 nodes at
every inference. :class:`FoldStaticDimsPass` replaces such a ``Gather`` (or a ``Shape`` slice)
whose dims are all static with the constant they are; the next folding round folds the rest.
"""

from __future__ import annotations

import logging

import numpy as np
import onnx_ir as ir

__all__ = ["ExpandToOwnShapePass", "FoldStaticDimsPass"]

logger = logging.getLogger(__name__)


def _shape_of(value: ir.Value | None) -> tuple[ir.Value, int, int] | None:
    """``(x, start, end)`` when ``value`` is ``Shape(x)`` (with its start and end), else None."""
    node = value.producer() if value is not None else None
    if node is None or node.op_type != "Shape" or node.domain not in ("", "ai.onnx") or node.inputs[0] is None:
        return None
    source = node.inputs[0]
    if source.shape is None:
        return None
    rank = source.shape.rank()
    start = node.attributes.get("start")
    end = node.attributes.get("end")
    first = start.as_int() if start is not None else 0
    last = end.as_int() if end is not None else rank
    first, last = (max(0, min(rank, bound + rank if bound < 0 else bound)) for bound in (first, last))
    return source, first, last


def _static(dims: list[object]) -> bool:
    return all(isinstance(dim, int) for dim in dims)


class FoldStaticDimsPass(ir.passes.InPlacePass):
    """Gather(Shape(x), constant indices) and Shape(x, start, end) of static dims: constants."""

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        folded = 0
        for node in list(model.graph):
            value = self._static_value(node)
            if value is not None and not node.outputs[0].is_graph_output():
                constant = ir.Node("", "Constant", inputs=[], attributes=[ir.AttrTensor("value", ir.tensor(value))])
                constant.outputs[0].type = ir.TensorType(ir.DataType.INT64)
                constant.outputs[0].shape = ir.Shape(value.shape)
                constant.outputs[0].const_value = ir.tensor(value)
                model.graph.insert_before(node, constant)
                node.outputs[0].replace_all_uses_with(constant.outputs[0])
                folded += 1
        if folded:
            ir.passes.common.RemoveUnusedNodesPass()(model)
            logger.debug("FoldStaticDimsPass: %d static dim read(s) made constant", folded)
        return ir.passes.PassResult(model, modified=bool(folded))

    @staticmethod
    def _static_value(node: ir.Node) -> np.ndarray | None:
        if node.op_type not in ("Shape", "Gather") or node.domain not in ("", "ai.onnx") or len(node.outputs) != 1:
            return None
        dims = _symbolic_dims(node.outputs[0])
        if not dims or not _static(dims):
            return None
        scalar = node.op_type == "Gather" and node.inputs[1].const_value.shape.rank() == 0  # type: ignore[union-attr]
        return np.array(dims[0] if scalar else dims, dtype=np.int64)


# Elements a constant may have to count as part of a shape (a rank; ONNX allows far fewer dims).
_SHAPE_CONSTANT_LIMIT = 64


def _symbolic_dims(value: ir.Value | None, depth: int = 0) -> list[object] | None:
    """The dims a shape tensor (1-d, or a 0-d size) holds, as ints and named symbols, where they
    follow from ``Shape``, ``Gather`` of constant indices, ``Concat`` and constants; None
    otherwise."""
    if value is None or depth > 8:
        return None
    constant = value.const_value
    if constant is not None:
        # A shape tensor's constant part: small int64 data only (never a weight's numbers).
        if constant.dtype != ir.DataType.INT64 or constant.size > _SHAPE_CONSTANT_LIMIT or len(constant.shape) > 1:
            return None
        return [int(item) for item in np.asarray(constant.numpy()).reshape(-1)]
    node = value.producer()
    if node is None or node.domain not in ("", "ai.onnx"):
        return None
    if node.op_type == "Shape":
        found = _shape_of(value)
        return list(found[0].shape.dims)[found[1]:found[2]] if found is not None else None  # type: ignore[union-attr]
    if node.op_type == "Gather" and len(node.inputs) == 2 and node.inputs[1] is not None:
        axis = node.attributes.get("axis")
        indices = node.inputs[1].const_value
        dims = _symbolic_dims(node.inputs[0], depth + 1)
        if dims is None or indices is None or (axis is not None and axis.as_int() != 0):
            return None
        positions = np.asarray(indices.numpy()).astype(np.int64)
        if positions.ndim > 1 or not np.all((positions >= -len(dims)) & (positions < len(dims))):
            return None
        return [dims[int(p)] for p in positions.reshape(-1)]
    if node.op_type == "Concat":
        parts = [_symbolic_dims(part, depth + 1) for part in node.inputs]
        return None if any(part is None for part in parts) else [dim for part in parts for dim in part]  # type: ignore[union-attr]
    return None


def _same_dim(a: object, b: object) -> bool:
    if isinstance(a, int) or isinstance(b, int):
        return a == b
    return isinstance(a, ir.SymbolicDim) and isinstance(b, ir.SymbolicDim) and a.value is not None and a.value == b.value


class ExpandToOwnShapePass(ir.passes.InPlacePass):
    """``Expand(x, shape)`` where the shape is x's own, dim for dim (equal sizes or the same
    named symbol): x itself. torchlib's ``index_put`` expands the values to the shape it
    computes at run time, which for ``index_add`` is the values' shape."""

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        removed = 0
        for node in list(model.graph):
            if node.op_type != "Expand" or node.domain not in ("", "ai.onnx") or node.inputs[0] is None:
                continue
            source, output = node.inputs[0], node.outputs[0]
            dims = _symbolic_dims(node.inputs[1])
            if source.shape is None or dims is None or len(dims) != source.shape.rank() or output.is_graph_output():
                continue
            if all(_same_dim(a, b) for a, b in zip(source.shape.dims, dims)):
                output.replace_all_uses_with(source)
                removed += 1
        if removed:
            ir.passes.common.RemoveUnusedNodesPass()(model)
            logger.debug("ExpandToOwnShapePass: %d Expand(s) to the input's own shape removed", removed)
        return ir.passes.PassResult(model, modified=bool(removed))
