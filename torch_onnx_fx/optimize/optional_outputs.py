"""``TrimUnusedOptionalOutputsPass`` drops trailing outputs that no one uses and that the operator's
schema marks optional. Translations recorded through onnxscript get every declared output (that
is onnxscript's eager convention), but some operators change meaning with their output count:
``BatchNormalization`` with three outputs is the *training* form, which ONNX Runtime rejects in
inference mode.
"""

from __future__ import annotations

import onnx
import onnx_ir as ir

__all__ = ["TrimUnusedOptionalOutputsPass"]


class TrimUnusedOptionalOutputsPass(ir.passes.InPlacePass):
    """Trailing outputs that nothing reads and the schema marks optional are removed."""

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        modified = False
        graph_outputs = {id(v) for v in model.graph.outputs}
        for node in ir.traversal.RecursiveGraphIterator(model.graph):
            if len(node.outputs) < 2:
                continue
            version = model.opset_imports.get(node.domain, 1) if node.domain else model.graph.opset_imports.get("", 18)
            try:
                schema = onnx.defs.get_schema(node.op_type, version, node.domain)
            except onnx.defs.SchemaError:
                continue
            formal = schema.outputs
            keep = len(node.outputs)
            while keep > 1:
                output = node.outputs[keep - 1]
                index = min(keep - 1, len(formal) - 1)
                optional = formal[index].option == onnx.defs.OpSchema.FormalParameterOption.Optional
                if not optional or output.uses() or id(output) in graph_outputs:
                    break
                keep -= 1
            if keep < len(node.outputs):
                node.resize_outputs(keep)
                modified = True
        return ir.passes.PassResult(model, modified)
