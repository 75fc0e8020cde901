"""Types and shapes for what the optimizer's rewrites add, by ONNX's per-node inference."""

from __future__ import annotations

import logging

import onnx_ir as ir

from torch_onnx_fx.translate.node_inference import infer_node

__all__ = ["InferMissingTypesPass"]

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
