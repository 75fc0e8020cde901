"""A matrix-vector ``MatMul`` whose vector is made a column, so ONNX Runtime computes it right.

ONNX Runtime's Transpose-into-MatMul fusion (graph optimization level "extended", on by default)
turns ``MatMul(Transpose(A), v)`` with a 1-D ``v`` into a ``FusedMatMul`` that returns wrong
numbers: ``x.t() @ v`` and ``torch.addmv(b, x.t(), v)`` were off by units, silently (found by
the differential fuzzer's view variants; the same graph is exact with the optimizations off).
The fusion is right for a 2-D right operand, so :class:`MatrixVectorPass` gives every
``MatMul`` with a 1-D right operand (and a matrix on the left) a column ``v[:, None]`` and takes
the column of the result back out: two nodes per matrix-vector product, which models rarely have.
"""

from __future__ import annotations

import logging

import numpy as np
import onnx_ir as ir

from torch_onnx_fx.optimize.runtime.rewriting import initializer, rank, replace

__all__ = ["MatrixVectorPass"]

logger = logging.getLogger(__name__)


class MatrixVectorPass(ir.passes.InPlacePass):
    """See the module docstring."""

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        count = 0
        for node in list(ir.traversal.RecursiveGraphIterator(model.graph)):
            if node.op_type != "MatMul" or node.domain not in ("", "ai.onnx") or len(node.inputs) != 2:
                continue
            matrix, vector = node.inputs
            left_rank = rank(matrix)
            if rank(vector) != 1 or left_rank is None or left_rank < 2:
                continue
            last = initializer(node.graph, "matrix_vector_axis", np.array([-1], dtype=np.int64))
            column = ir.node("Unsqueeze", [vector, last])
            product = ir.node("MatMul", [matrix, column.outputs[0]])
            result = ir.node("Squeeze", [product.outputs[0], last])
            replace(node, [column, product, result], result.outputs, "matrix_vector")
            count += 1
        if count:
            logger.debug("MatrixVectorPass: %d matrix-vector MatMul(s) with a column", count)
        return ir.passes.PassResult(model, modified=bool(count))
