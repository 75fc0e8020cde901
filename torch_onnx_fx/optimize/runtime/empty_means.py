"""A mean over dims that may be empty at run time is NaN there, as in ATen.

ONNX Runtime's ``ReduceMean`` of an empty reduction returns 0 (or the empty input), where ATen
divides a sum of nothing by a count of nothing: NaN. A dim exported as dynamic takes 0 at run
time (``torch.export.Dim`` ranges start at 0): ``x.mean(0)``, ``F.mse_loss`` or
``F.l1_loss`` of an empty batch returned 0, silently, for both exporters; so did a static empty
input to translations that reach ``ReduceMean`` through torchlib (``mse_loss``).

:class:`EmptyMeansPass` rewrites each ``ReduceMean`` whose reduced dims are not all static and
positive as what ATen's CPU mean computes: the sum divided by the element count read from the
input's shape (``ReduceSum``, ``Div`` and four nodes of shape arithmetic); float16 and bfloat16
are summed and divided in float32 and rounded once, as ATen does (a float16 sum or count past
65504 is inf). A mean over static, non-empty dims (the norms of every transformer) keeps ONNX
Runtime's kernel.
"""

from __future__ import annotations

import logging

import numpy as np
import onnx_ir as ir

from torch_onnx_fx.optimize.runtime.rewriting import initializer, is_standard, reduced_axes, replace

__all__ = ["EmptyMeansPass"]

logger = logging.getLogger(__name__)


def _may_be_empty(node: ir.Node) -> list[int] | None:
    """The axes of a ``ReduceMean`` that may reduce nothing at run time; None if it never does
    (or its axes are not known here)."""
    x = node.inputs[0]
    if x is None or x.shape is None or x.dtype is None or not x.dtype.is_floating_point():
        return None
    axes = reduced_axes(node, x.shape.rank())
    if not axes:
        return None
    if all(isinstance(x.shape[a], int) and x.shape[a] > 0 for a in axes):
        return None
    return axes


# ATen sums and divides 16-bit floats in float32 and rounds once: a float16 sum past 65504 (or a
# count past it, cast to float16) is inf, where the mean is not.
_SUMMED_IN_FLOAT32 = frozenset({ir.DataType.FLOAT16, ir.DataType.BFLOAT16})


def _sum_by_count(graph: ir.Graph, node: ir.Node, axes: list[int]) -> tuple[list[ir.Node], ir.Value]:
    x = node.inputs[0]
    dtype = x.dtype
    keepdims = node.attributes.get("keepdims")
    keep = {"keepdims": 1 if keepdims is None else keepdims.as_int()}
    stem = f"{node.outputs[0].name or 'mean'}__axes"
    listed = initializer(graph, stem, np.array(axes, dtype=np.int64))
    nodes: list[ir.Node] = []
    summed = x
    if dtype in _SUMMED_IN_FLOAT32:
        nodes.append(ir.node("Cast", [x], attributes={"to": ir.DataType.FLOAT}))
        summed = nodes[-1].outputs[0]
    computed = ir.DataType.FLOAT if dtype in _SUMMED_IN_FLOAT32 else dtype
    # Every opset we build (13 up) takes ReduceSum's axes as an input.
    total = ir.node("ReduceSum", [summed, listed], attributes=keep)
    shape = ir.node("Shape", [x])
    sizes = ir.node("Gather", [shape.outputs[0], listed])
    # ReduceProd without axes reduces every axis at any opset: the count as a scalar.
    count = ir.node("ReduceProd", [sizes.outputs[0]], attributes={"keepdims": 0})
    as_float = ir.node("Cast", [count.outputs[0]], attributes={"to": computed})
    as_float.outputs[0].dtype = computed
    mean = ir.node("Div", [total.outputs[0], as_float.outputs[0]])
    nodes += [total, shape, sizes, count, as_float, mean]
    if computed != dtype:
        nodes.append(ir.node("Cast", [mean.outputs[0]], attributes={"to": dtype}))
    return nodes, nodes[-1].outputs[0]


class EmptyMeansPass(ir.passes.InPlacePass):
    """See the module docstring."""

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        count = 0
        for node in list(ir.traversal.RecursiveGraphIterator(model.graph)):
            if not is_standard(node, "ReduceMean"):
                continue
            axes = _may_be_empty(node)
            if axes is None:
                continue
            # Constants are main-graph initializers, which a Loop or If body may read.
            new_nodes, result = _sum_by_count(model.graph, node, axes)
            replace(node, new_nodes, [result], "counted")
            count += 1
        if count:
            logger.debug("EmptyMeansPass: %d ReduceMean(s) over dims that may be empty as sum / count", count)
        return ir.passes.PassResult(model, modified=bool(count))
