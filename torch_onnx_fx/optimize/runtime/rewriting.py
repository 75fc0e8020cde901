"""What the runtime passes share to rewrite a node: its replacement spliced in with every new value
named, and the constants they add as initializers.

These passes run after the optimizer, which folds Constant nodes into initializers: a Constant
node added after it stays a node, one per constant, in every graph the pass touches.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import onnx_ir as ir

from torch_onnx_fx.optimize.weights.recipes import holds_state
from torch_onnx_fx.translate.weight_data import without_data

__all__ = [
    "INTEGER_WEIGHTS", "constant_array", "free_initializer_name", "initializer", "is_quantized", "is_standard", "leading_shape",
    "rank", "reduced_axes", "replace", "standard_producer",
]

# The integer types whose DequantizeLinear the runtime passes read as a dequantized weight.
INTEGER_WEIGHTS = frozenset({
    ir.DataType.INT8, ir.DataType.UINT8, ir.DataType.INT4, ir.DataType.UINT4, ir.DataType.INT16, ir.DataType.UINT16,
})


def free_initializer_name(graph: ir.Graph, stem: str) -> str:
    """``stem``, or ``stem_<n>`` with the first ``n`` no initializer of ``graph`` is named."""
    name, index = stem, 0
    while name in graph.initializers:
        index += 1
        name = f"{stem}_{index}"
    return name


def initializer(graph: ir.Graph, stem: str, array: np.ndarray) -> ir.Value:
    """A new initializer of ``graph`` holding ``array``, named after ``stem`` (made unique)."""
    value = ir.Value(name=free_initializer_name(graph, stem), const_value=ir.tensor(array))
    value.type, value.shape = ir.TensorType(value.const_value.dtype), ir.Shape(array.shape)
    graph.register_initializer(value)
    return value


def constant_array(value: ir.Value | None) -> np.ndarray | None:
    """A constant value's data (an initializer, or a Constant folded into one); None otherwise."""
    if value is None or value.const_value is None:
        return None
    return value.const_value.numpy()


def fixed_array(value: ir.Value | None) -> np.ndarray | None:
    """``value``'s data when it is a constant no one replaces: not the model's state or a tensor
    stored for it, which ``apply_weights`` may change after export (and which has no data when
    the model was exported on the ``meta`` device)."""
    if value is None or holds_state(value) or without_data(value):
        return None
    return constant_array(value)


def leading_shape(graph: ir.Graph, left: ir.Value, outputs: int, stem: str) -> tuple[list[ir.Node], ir.Value]:
    """The shape of a product over ``left``'s last axis: ``left``'s leading dims and ``outputs``.
    A constant when those dims are static; else nodes reading them from ``left`` at run time, and
    their result. New initializers are named after ``stem``."""
    leading = list(left.shape)[:-1]
    if all(isinstance(d, int) for d in leading):
        return [], initializer(graph, f"{stem}_shape", np.array([*leading, outputs], dtype=np.int64))
    # Slice rather than Shape's end attribute, which opsets below 15 lack.
    size = ir.node("Shape", [left])
    bounds = [initializer(graph, f"{stem}_bound", np.array([b], dtype=np.int64)) for b in (0, -1)]
    leading_size = ir.node("Slice", [size.outputs[0], *bounds])
    width = initializer(graph, f"{stem}_width", np.array([outputs], dtype=np.int64))
    joined = ir.node("Concat", [leading_size.outputs[0], width], attributes={"axis": 0})
    return [size, leading_size, joined], joined.outputs[0]


def is_standard(node: ir.Node | None, op_type: str) -> bool:
    """Whether ``node`` is the ONNX standard's ``op_type`` (not a same-named operator of another
    domain)."""
    return node is not None and node.op_type == op_type and node.domain in ("", "ai.onnx")


def standard_producer(value: ir.Value | None, op_type: str) -> ir.Node | None:
    """The node making ``value`` when it is the ONNX standard's ``op_type``; None otherwise."""
    node = value.producer() if value is not None else None
    return node if is_standard(node, op_type) else None


def is_quantized(value: ir.Value) -> bool:
    """Whether some reader quantizes ``value``, directly or after an activation ONNX Runtime folds
    into its integer kernels (``Relu``, ``Clip``): what makes ONNX Runtime run the operator that
    computes ``value`` as one of them."""
    for reader, _ in value.uses():
        if is_standard(reader, "QuantizeLinear"):
            return True
        if (is_standard(reader, "Relu") or is_standard(reader, "Clip")) and is_quantized(reader.outputs[0]):
            return True
    return False


def rank(value: ir.Value | None) -> int | None:
    """``value``'s rank, None when it is absent or its shape unknown."""
    return None if value is None or value.shape is None else len(value.shape)


def reduced_axes(node: ir.Node, rank: int) -> list[int] | None:
    """The axes the node reduces (sorted, non-negative); None when they are not known here."""
    attribute = node.attributes.get("axes")
    if attribute is not None:
        # Before opset 18 (13 for ReduceSum) the axes are an attribute; none listed means all.
        listed = sorted({a % rank for a in attribute.as_ints()}) if rank else []
        return listed or list(range(rank))
    axes = node.inputs[1] if len(node.inputs) > 1 else None
    if axes is None:
        noop = node.attributes.get("noop_with_empty_axes")
        return [] if noop is not None and noop.as_int() else list(range(rank))
    if axes.const_value is None:
        return None
    listed = [int(a) % rank for a in axes.const_value.numpy().reshape(-1)] if rank else []
    if not listed:
        noop = node.attributes.get("noop_with_empty_axes")
        return [] if noop is not None and noop.as_int() else list(range(rank))
    return sorted(set(listed))


def replace(node: ir.Node, new_nodes: Sequence[ir.Node], results: Sequence[ir.Value], tag: str) -> None:
    """Put ``new_nodes`` in ``node``'s place, ``results`` standing for its first outputs (each
    takes the output's name, type and shape).

    The new values are named after the output they replace (unique in the model). Left unnamed,
    onnx-ir's NameFixPass names them from a counter that does not see the names in Loop and If
    bodies, and a body value and a main-graph value may end up sharing a name, which ONNX Runtime
    rejects as not SSA."""
    stem = node.outputs[0].name or node.name or node.op_type
    for index, value in enumerate(v for new in new_nodes for v in new.outputs if v.name is None):
        value.name = f"{stem}__{tag}{index}"
    olds = list(node.outputs[: len(results)])
    ir.convenience.replace_nodes_and_values(node.graph, node, [node], list(new_nodes), olds, list(results))
