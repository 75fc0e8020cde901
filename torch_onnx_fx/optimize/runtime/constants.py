"""Constants the runtime passes add, as initializers of the graph they go into.

These passes run after the optimizer, which folds Constant nodes into initializers: a Constant
node added after it stays a node, one per constant, in every graph the pass touches.
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir

__all__ = ["initializer"]


def initializer(graph: ir.Graph, stem: str, array: np.ndarray) -> ir.Value:
    """A new initializer of ``graph`` holding ``array``, named after ``stem`` (made unique)."""
    name, index = stem, 0
    while name in graph.initializers:
        index += 1
        name = f"{stem}_{index}"
    value = ir.Value(name=name, const_value=ir.tensor(array))
    value.type, value.shape = ir.TensorType(value.const_value.dtype), ir.Shape(array.shape)
    graph.register_initializer(value)
    return value
