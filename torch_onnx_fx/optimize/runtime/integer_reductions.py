"""Integer sums and products as ATen computes them: exactly, wrapping around on overflow.

ONNX Runtime's CPU ``ReduceSum`` and ``ReduceProd`` accumulate integers in double precision: an
int64 sum loses its low bits past 2**53 (``[2**62 + 123, 0]`` sums to ``2**62``), and a sum or
product past the type's range saturates at its maximum where ATen's fixed-width arithmetic wraps
around. Its ``CumSum``, ``Mul`` and ``MatMul`` are exact and wrap. :class:`IntegerReductionsPass`
rewrites every integer ``ReduceSum`` as the last element of a ``CumSum`` over the reduced axes
(moved last and flattened into one) and every integer ``ReduceProd`` as a ``Loop`` that multiplies
the two halves of that axis until one element is left (a logarithmic number of ``Mul`` steps).
Integer reductions are rare in models (masks counted, indices summed), so the extra nodes are few.
"""

from __future__ import annotations

import logging

import numpy as np
import onnx_ir as ir

from torch_onnx_fx.ops.windows import int64s
from torch_onnx_fx.optimize.runtime.rewriting import initializer, reduced_axes, replace

__all__ = ["IntegerReductionsPass"]

logger = logging.getLogger(__name__)

_INTEGERS = frozenset({
    ir.DataType.INT8, ir.DataType.INT16, ir.DataType.INT32, ir.DataType.INT64,
    ir.DataType.UINT8, ir.DataType.UINT16, ir.DataType.UINT32, ir.DataType.UINT64,
})


def _flattened(tape: ir.tape.Tape, x: ir.Value, rank: int, reduced: list[int], pad: int) -> ir.Value:
    """``x`` with the reduced axes moved last and flattened into one, led by one ``pad`` element
    (the sum's 0, the product's 1): every reduction then has at least one element."""
    dtype = x.dtype
    kept = [a for a in range(rank) if a not in reduced]
    order = kept + reduced
    if order != list(range(rank)):
        x = tape.op("Transpose", [x], {"perm": order})
    shape = tape.op("Shape", [x])
    leading = tape.op("Slice", [shape, int64s(tape, [0]), int64s(tape, [len(kept)])])
    count = tape.op("ReduceProd", [tape.op("Slice", [shape, int64s(tape, [len(kept)]), int64s(tape, [rank])])], {"keepdims": 1})
    # allowzero: a 0 in the shape is a dim of size 0 (not "as the input's"), for empty reductions.
    x = tape.op("Reshape", [x, tape.op("Concat", [leading, count], {"axis": 0})], {"allowzero": 1})
    one = tape.op("Concat", [leading, int64s(tape, [1])], {"axis": 0})
    filler = tape.op("ConstantOfShape", [one], {"value": ir.tensor(np.array([pad], dtype=dtype.numpy()))})
    return tape.op("Concat", [filler, x], {"axis": -1})


def _restore(tape: ir.tape.Tape, total: ir.Value, node: ir.Node, reduced: list[int]) -> ir.Value:
    """The reduced result (reduced axis dropped) in the node's own layout."""
    keepdims = node.attributes.get("keepdims")
    if (keepdims is None or keepdims.as_int()) and reduced:
        return tape.op("Unsqueeze", [total, int64s(tape, reduced)])
    return total


# Types ONNX's CumSum and ONNX Runtime's Mul lack: computed in int64 and cast back, which keeps the
# low bits, so the result wraps as ATen's does in the narrow type.
_NARROW = frozenset({ir.DataType.INT8, ir.DataType.INT16, ir.DataType.UINT8, ir.DataType.UINT16})


def _widened(tape: ir.tape.Tape, node: ir.Node) -> ir.Value:
    x = node.inputs[0]
    if x.dtype in _NARROW:
        return tape.op("Cast", [x], {"to": ir.DataType.INT64}, output=ir.Value(type=ir.TensorType(ir.DataType.INT64), shape=x.shape))
    return x


def _narrowed(tape: ir.tape.Tape, node: ir.Node, result: ir.Value) -> ir.Value:
    dtype = node.inputs[0].dtype
    return tape.op("Cast", [result], {"to": dtype}) if dtype in _NARROW else result


def _single_axis_sum(tape: ir.tape.Tape, node: ir.Node, rank: int, axis: int) -> ir.Value:
    """The sum over one axis: the last element of its CumSum, led by a 0 where the axis may be
    empty. Gather's index keeps the axis (keepdims) or drops it: 2 or 3 nodes, where flattening
    takes about 15."""
    x = _widened(tape, node)
    size = x.shape[axis] if x.shape is not None else None
    stem = f"{node.outputs[0].name or 'sum'}__exact"
    if not (isinstance(size, int) and size > 0):
        pads = np.zeros(2 * rank, dtype=np.int64)
        pads[axis] = 1
        x = tape.op("Pad", [x, initializer(node.graph, f"{stem}_pads", pads)])
    running = tape.op("CumSum", [x, initializer(node.graph, f"{stem}_axis", np.array(axis, dtype=np.int64))])
    keepdims = node.attributes.get("keepdims")
    keep = keepdims is None or bool(keepdims.as_int())
    last = initializer(node.graph, f"{stem}_last", np.array([-1] if keep else -1, dtype=np.int64))
    return _narrowed(tape, node, tape.op("Gather", [running, last], {"axis": axis}))


def _exact_sum(tape: ir.tape.Tape, node: ir.Node, rank: int, reduced: list[int]) -> ir.Value:
    if len(reduced) == 1:
        return _single_axis_sum(tape, node, rank, reduced[0])
    flat = _flattened(tape, _widened(tape, node), rank, reduced, 0)
    running = tape.op("CumSum", [flat, tape.op("Constant", [], {"value": ir.tensor(np.array(-1, dtype=np.int64))})])
    total = tape.op("Gather", [running, tape.op("Constant", [], {"value": ir.tensor(np.array(-1, dtype=np.int64))})], {"axis": -1})
    return _restore(tape, _narrowed(tape, node, total), node, reduced)


def _halving_body(dtype: ir.DataType, stem: str) -> ir.Graph:
    """One step of the product: pad the last axis to an even length with 1, multiply its halves."""
    body = ir.tape.Tape()
    iteration = ir.Value(type=ir.TensorType(ir.DataType.INT64), shape=ir.Shape([]))
    condition = ir.Value(type=ir.TensorType(ir.DataType.BOOL), shape=ir.Shape([]))
    values = ir.Value(type=ir.TensorType(dtype))
    length = body.op("Gather", [body.op("Shape", [values]), int64s(body, [-1])], {"axis": 0})
    odd = body.op("Mod", [length, int64s(body, [2])])
    rank = body.op("Shape", [body.op("Shape", [values])])
    zero = ir.tensor(np.array([0], dtype=np.int64))
    before = body.op("ConstantOfShape", [rank], {"value": zero})
    after = body.op("Concat", [body.op("ConstantOfShape", [body.op("Sub", [rank, int64s(body, [1])])], {"value": zero}), odd], {"axis": 0})
    one = body.op("Constant", [], {"value": ir.tensor(np.array(1, dtype=dtype.numpy()))})
    even = body.op("Pad", [values, body.op("Concat", [before, after], {"axis": 0}), one])
    leading = body.op("Slice", [body.op("Shape", [even]), int64s(body, [0]), int64s(body, [-1])])
    pairs = body.op("Reshape", [even, body.op("Concat", [leading, int64s(body, [-1, 2])], {"axis": 0})])
    first = body.op("Gather", [pairs, body.op("Constant", [], {"value": ir.tensor(np.array(0, dtype=np.int64))})], {"axis": -1})
    second = body.op("Gather", [pairs, body.op("Constant", [], {"value": ir.tensor(np.array(1, dtype=np.int64))})], {"axis": -1})
    halved = body.op("Mul", [first, second])
    left = body.op("Gather", [body.op("Shape", [halved]), int64s(body, [-1])], {"axis": 0})
    go_on = body.op("Greater", [body.op("ReduceMax", [left], {"keepdims": 0}), body.op("Constant", [], {"value": ir.tensor(np.array(1, dtype=np.int64))})])
    # Names of their own: ONNX Runtime rejects a name given twice across a graph and its bodies.
    iteration.name, condition.name, values.name = f"{stem}__step", f"{stem}__go_on", f"{stem}__values"
    halved.name, go_on.name = f"{stem}__halved", f"{stem}__go_on_next"
    for index, value in enumerate(v for n in body.nodes for v in n.outputs if v.name is None):
        value.name = f"{stem}__halving{index}"
    return ir.Graph([iteration, condition, values], [go_on, halved], nodes=list(body.nodes), name=f"{stem}__halve")


def _exact_product(tape: ir.tape.Tape, node: ir.Node, rank: int, reduced: list[int]) -> ir.Value:
    stem = node.outputs[0].name or node.name or "product"
    x = _widened(tape, node)
    flat = _flattened(tape, x, rank, reduced, 1)
    # At most 64 halvings: a length of 2**63 is beyond any tensor.
    trips = tape.op("Constant", [], {"value": ir.tensor(np.array(64, dtype=np.int64))})
    start = tape.op("Constant", [], {"value": ir.tensor(np.array(True))})
    length = tape.op("Gather", [tape.op("Shape", [flat]), int64s(tape, [-1])], {"axis": 0})
    longer = tape.op("Greater", [tape.op("ReduceMax", [length], {"keepdims": 0}), tape.op("Constant", [], {"value": ir.tensor(np.array(1, dtype=np.int64))})])
    go = tape.op("And", [start, longer])
    (product,) = tape.op_multi_out("Loop", [trips, go, flat], {"body": ir.AttrGraph("body", _halving_body(x.dtype, stem))}, num_outputs=1)
    product.type = ir.TensorType(x.dtype)
    total = tape.op("Squeeze", [product, int64s(tape, [-1])])
    return _restore(tape, _narrowed(tape, node, total), node, reduced)


_REWRITES = {"ReduceSum": _exact_sum, "ReduceProd": _exact_product}

# Sources whose int64 sum ONNX Runtime's double accumulator already gets exactly: |v| <= 255, so
# every partial sum stays below 2**53 for any tensor under 3.5e13 elements (35 TB of bytes). The
# masks models count (``mask.sum()``, ``(ids == k).sum()``) are such casts.
_SMALL = frozenset({ir.DataType.BOOL, ir.DataType.INT8, ir.DataType.UINT8})


def _of_sizes(x: ir.Value) -> bool:
    """Whether ``x`` holds sizes of one tensor (its ``Shape``, or part of it): their product is
    that tensor's element count (or a part's), and their sum is no larger, far below the 2**53
    up to which ONNX Runtime's double accumulator is exact for any tensor that fits in memory."""
    source = x.producer()
    while source is not None and source.domain in ("", "ai.onnx") and source.op_type in ("Slice", "Gather"):
        x = source.inputs[0]
        source = x.producer()
    return source is not None and source.domain in ("", "ai.onnx") and source.op_type == "Shape"


def _exact_already(node: ir.Node) -> bool:
    """An int64 ``ReduceSum`` of a cast from a small type, or a reduction of a tensor's sizes:
    no rewrite needed. (A shape's product, the element count of a reshape or a rotary table, was
    a ``Loop`` that cost a decode step half a millisecond.)"""
    x = node.inputs[0]
    source = x.producer()
    if x.dtype == ir.DataType.INT64 and _of_sizes(x):
        return True
    return (
        node.op_type == "ReduceSum" and x.dtype == ir.DataType.INT64 and source is not None
        and source.op_type == "Cast" and source.inputs[0] is not None and source.inputs[0].dtype in _SMALL
    )


class IntegerReductionsPass(ir.passes.InPlacePass):
    """Integer ``ReduceSum``/``ReduceProd`` rewritten exactly (see the module docstring).

    Left as they are: nodes whose rank or axes are not known when the pass runs (none of ours;
    a custom translation's), and every node of a graph below opset 14, which ONNX Runtime then
    computes as before.
    """

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        count = 0
        if model.graph.opset_imports.get("", 0) < 14:
            # Reshape's allowzero, which empty reductions need, came with opset 14.
            return ir.passes.PassResult(model, modified=False)
        for node in list(ir.traversal.RecursiveGraphIterator(model.graph)):
            rewrite = _REWRITES.get(node.op_type)
            x = node.inputs[0] if node.inputs else None
            if rewrite is None or node.domain not in ("", "ai.onnx") or x is None or x.dtype not in _INTEGERS:
                continue
            if x.shape is None or _exact_already(node):
                continue
            rank = x.shape.rank()
            reduced = reduced_axes(node, rank)
            if reduced is None or not reduced:
                continue
            tape = ir.tape.Tape()
            result = rewrite(tape, node, rank, reduced)
            replace(node, tape.nodes, [result], "exact")
            count += 1
        if count:
            logger.debug("IntegerReductionsPass: %d integer reduction(s) made exact", count)
        return ir.passes.PassResult(model, modified=bool(count))
