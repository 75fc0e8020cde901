"""An ``Expand`` to an empty shape, as a constant: ONNX Runtime's optimizer drops it.

At its basic optimization level (on by default) ONNX Runtime removes an ``Expand`` whose input
has a size-1 dim where the target shape has 0, as if 0 broadcast like 1: ``Expand(x[1, 2, 1],
[0, 2, 0])`` read by another node gives ``x`` itself, shape ``[1, 2, 1]``, where ONNX (and
``torch.broadcast_tensors`` / ``expand``) give an empty ``[0, 2, 0]``. Found by the differential
fuzzer on ``broadcast_tensors`` of empty bfloat16 tensors (the widened ``Expand`` sits between
two ``Cast`` nodes); an ``Expand`` that is itself a graph output is left alone by the runtime.

:class:`EmptyExpandPass` replaces an ``Expand`` whose output shape is static and empty, and that
another node reads, with an empty initializer of that shape and type: no element to compute,
nothing for the runtime to remove.
"""

from __future__ import annotations

import logging
import math

import numpy as np
import onnx_ir as ir

from torch_onnx_fx.optimize.runtime.rewriting import initializer, is_standard

__all__ = ["EmptyExpandPass"]

logger = logging.getLogger(__name__)


def _empty_shape(value: ir.Value) -> list[int] | None:
    if value.shape is None or value.dtype is None:
        return None
    dims = list(value.shape)
    if not all(isinstance(d, int) for d in dims) or math.prod(dims) != 0:
        return None
    return dims


class EmptyExpandPass(ir.passes.InPlacePass):
    """See the module docstring."""

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        count = 0
        for node in list(model.graph):
            if not is_standard(node, "Expand"):
                continue
            result = node.outputs[0]
            dims = _empty_shape(result)
            if dims is None or result.is_graph_output() or not result.uses():
                continue
            empty = initializer(model.graph, f"{result.name or 'expand'}__empty", np.zeros(dims, dtype=result.dtype.numpy()))
            ir.convenience.replace_all_uses_with(result, empty)
            model.graph.remove(node, safe=True)
            count += 1
        if count:
            # What computed the expanded input may have no other reader.
            ir.passes.common.RemoveUnusedNodesPass()(model)
            logger.debug("EmptyExpandPass: %d Expand(s) to an empty shape made constants", count)
        return ir.passes.PassResult(model, modified=bool(count))
