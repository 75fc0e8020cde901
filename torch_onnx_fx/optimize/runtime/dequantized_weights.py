"""A product with a dequantized integer weight, laid out so that ONNX Runtime computes it in float.

ONNX Runtime's default graph optimizations (level "extended") fuse ``DequantizeLinear`` of a
constant integer weight into the ``MatMul`` (or ``Gemm`` without ``transB``) that takes it as
its right operand: a ``MatMulNBits`` whose accuracy level comes from the session option
``session.qdq_matmulnbits_accuracy_level``, 4 by default, which quantizes the *float left
operand* to int8 in blocks. A PT2E model's linear layers then come out 1-3 % off, silently
(a 768x768 product was 0.47 off where float is 4e-5; the same graph is exact with the
optimizations off). ``Gemm`` with ``transB=1`` over the dequantized ``[N, K]`` weight is not
fused, runs the float kernel, and keeps the QDQ ``Gemm`` unit that ONNX Runtime turns into an
exact integer ``QGemm`` when the output is quantized too.

:class:`DequantizedWeightPass` rewrites ``MatMul(x, Transpose(DequantizeLinear(W)))`` (a
linear layer; a blocked ``DequantizeLinear`` too, which the ``Gemm`` does not fuse either) and
``MatMul(x, DequantizeLinear(W))`` (per tensor or per axis) into that ``Gemm``, with ``x``
flattened to 2-D (a vector made a row) and the result reshaped back.
"""

from __future__ import annotations

import logging

import numpy as np
import onnx_ir as ir

from torch_onnx_fx.optimize.runtime.rewriting import INTEGER_WEIGHTS, initializer, is_standard, leading_shape, rank, replace, standard_producer

__all__ = ["DequantizedWeightPass"]

logger = logging.getLogger(__name__)



def _dequantized_weight(value: ir.Value, *, blocked: bool) -> ir.Node | None:
    """The ``DequantizeLinear`` of a 2-D integer tensor that produces ``value``. Constant or not:
    a Transpose or Identity in front of a constant folds away inside ONNX Runtime, after this
    pass has looked. ``blocked``: whether a blocked one (``block_size``) is taken as it is."""
    node = standard_producer(value, "DequantizeLinear")
    if node is None or ("block_size" in node.attributes and not blocked):
        return None
    weight = node.inputs[0]
    if weight is None or weight.dtype not in INTEGER_WEIGHTS:
        return None
    return node if weight.shape is not None and weight.shape.rank() == 2 else None


def _weight_rows(node: ir.Node) -> tuple[list[ir.Node], ir.Value, tuple[int, int]] | None:
    """Nodes making the ``[N, K]`` dequantized weight of MatMul ``node``'s right operand, that
    weight, and ``(N, K)`` (the operand is ``[K, N]``)."""
    right = node.inputs[1]
    transpose = standard_producer(right, "Transpose")
    if transpose is not None:
        source = _dequantized_weight(transpose.inputs[0], blocked=True)
        perm = transpose.attributes.get_ints("perm", None)
        if source is not None and perm in (None, [1, 0], (1, 0)):
            rows, columns = source.inputs[0].shape
            return [], transpose.inputs[0], (rows, columns)
        return None
    # A blocked one would need its scales transposed too: left to ONNX Runtime.
    source = _dequantized_weight(right, blocked=False)
    if source is None:
        return None
    # The integer weight transposed (a constant ONNX Runtime folds), its scale's axis with it.
    flipped = ir.node("Transpose", [source.inputs[0]], attributes={"perm": [1, 0]})
    attributes = {}
    scale = source.inputs[1]
    if scale is not None and scale.shape is not None and scale.shape.rank() == 1 and scale.shape[0] != 1:
        attributes["axis"] = 1 - source.attributes.get_int("axis", 1) % 2
    dequantize = ir.node("DequantizeLinear", [flipped.outputs[0], *source.inputs[1:]], attributes=attributes)
    columns, rows = source.inputs[0].shape
    return [flipped, dequantize], dequantize.outputs[0], (rows, columns)


class DequantizedWeightPass(ir.passes.InPlacePass):
    """See the module docstring."""

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        count = 0
        for node in list(ir.traversal.RecursiveGraphIterator(model.graph)):
            if not is_standard(node, "MatMul") or len(node.inputs) != 2:
                continue
            left = node.inputs[0]
            left_rank = rank(left)
            found = _weight_rows(node) if left_rank is not None and left_rank >= 1 else None
            if found is None:
                continue
            weight_nodes, rows, (outputs, columns) = found
            if not isinstance(columns, int) or not isinstance(outputs, int):
                continue
            graph = node.graph
            new_nodes = list(weight_nodes)
            if left_rank == 2:
                flat = left
            else:
                # A vector is one row; more dimensions are rows too.
                reshape = ir.node("Reshape", [left, initializer(graph, "dequantized_weight_rows", np.array([-1, columns], dtype=np.int64))])
                new_nodes.append(reshape)
                flat = reshape.outputs[0]
            gemm = ir.node("Gemm", [flat, rows], attributes={"transB": 1})
            new_nodes.append(gemm)
            result = gemm.outputs[0]
            if left_rank != 2:
                shape_nodes, shape = leading_shape(graph, left, outputs, "dequantized_weight")
                back = ir.node("Reshape", [result, shape])
                new_nodes += [*shape_nodes, back]
                result = back.outputs[0]
            former = node.inputs[1].producer()
            replace(node, new_nodes, [result], "dequantized_weight")
            # The Transpose (or the [K, N] DequantizeLinear) nothing else reads.
            if former is not None and not former.outputs[0].uses() and not former.outputs[0].is_graph_output():
                former.graph.remove(former, safe=True)
            count += 1
        if count:
            logger.debug("DequantizedWeightPass: %d product(s) with a dequantized weight as Gemm", count)
        return ir.passes.PassResult(model, modified=bool(count))
