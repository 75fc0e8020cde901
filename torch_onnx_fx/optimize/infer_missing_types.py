"""Types and shapes for what the optimizer's rewrites add, by ONNX's per-node inference."""

from __future__ import annotations

import logging

import onnx_ir as ir

from torch_onnx_fx.translate.node_inference import infer_node

__all__ = ["InferMissingTypesPass", "RefineUnknownDimsPass"]

logger = logging.getLogger(__name__)


class InferMissingTypesPass(ir.passes.InPlacePass):
    """Type and shape the outputs of standard-domain nodes that lack either, by ONNX's per-node
    inference (with the constants folding made known).

    Translation types every node it makes, so the optimizer's folder runs without a shape
    inference of its own (which re-infers every node: 1.3 of 2 s optimizing a 32-layer Llama);
    what the rewrite rules make, and shapes that only folding made static, are filled in here for
    the passes after the optimizer (``KernelGapPass`` rewrites a float64 convolution by its
    static shape).
    """

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        opset = model.opset_imports.get("", None)
        typed = 0
        if opset is not None:
            for node in ir.traversal.RecursiveGraphIterator(model.graph):
                if node.domain not in ("", "ai.onnx") or all(o.type is not None and o.shape is not None for o in node.outputs):
                    continue
                before = [(o.type, o.shape) for o in node.outputs]
                infer_node(node, opset)
                for output, (type_, shape) in zip(node.outputs, before):
                    # Outputs already typed and shaped keep what they have (translation's named dims).
                    if type_ is not None and shape is not None:
                        output.type, output.shape = type_, shape
                typed += before != [(o.type, o.shape) for o in node.outputs]
        logger.debug("InferMissingTypesPass: typed or shaped the outputs of %d node(s)", typed)
        return ir.passes.PassResult(model, modified=bool(typed))


class RefineUnknownDimsPass(ir.passes.InPlacePass):
    """Give outputs with unknown dims the static sizes ONNX's per-node inference finds for them,
    once folding has made their inputs' shapes or constants known; symbolic dims stay.

    torchlib's functions build shapes at run time (``Shape``, ``Div``, ``Concat``) and their
    intermediate values leave translation with unknown dims. Once a static size is known, the
    next folding round folds that arithmetic away: pixel_unshuffle of a static input is a
    Reshape, Transpose and Reshape, not 10 nodes of shape arithmetic.
    """

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        opset = model.opset_imports.get("", None)
        refined = 0
        if opset is not None:
            for node in ir.traversal.RecursiveGraphIterator(model.graph):
                if node.domain not in ("", "ai.onnx") or not any(_has_unknown_dim(o) for o in node.outputs):
                    continue
                if any(_has_unknown_dim(i) for i in node.inputs if i is not None and i.const_value is None):
                    # Inference cannot know more than the inputs do, except for a constant's data.
                    if node.op_type not in _SHAPE_FROM_DATA:
                        continue
                before = [(o.type, o.shape) for o in node.outputs]
                infer_node(node, opset)
                for output, (type_, shape) in zip(node.outputs, before):
                    output.type = type_ if type_ is not None else output.type
                    output.shape = _merged(shape, output.shape)
                refined += [b[1] for b in before] != [o.shape for o in node.outputs]
        logger.debug("RefineUnknownDimsPass: refined the outputs of %d node(s)", refined)
        return ir.passes.PassResult(model, modified=bool(refined))


# Ops whose output shape can come from a constant input's data even when another input's dims are
# unknown (Reshape's target with no -1 or 0, Expand's, ConstantOfShape's).
_SHAPE_FROM_DATA = frozenset({"Reshape", "Expand", "ConstantOfShape"})


def _has_unknown_dim(value: ir.Value) -> bool:
    return value.shape is None or any(_unknown(d) for d in value.shape.dims)


def _unknown(dim: int | ir.SymbolicDim) -> bool:
    return isinstance(dim, ir.SymbolicDim) and dim.value is None


def _merged(before: ir.Shape | None, inferred: ir.Shape | None) -> ir.Shape | None:
    """``before`` with its unknown dims taken from ``inferred`` where that knows them; a dim
    ``before`` knows (an int or a named symbol) is never replaced."""
    if inferred is None:
        return before
    if before is None:
        return inferred
    if before.rank() != inferred.rank():
        return before
    return ir.Shape([i if _unknown(b) else b for b, i in zip(before.dims, inferred.dims)])
