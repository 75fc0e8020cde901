"""``DistinctOutputsPass`` gives a graph output that repeats an earlier one an Identity of its own
(a value may stand once in a graph's outputs). Unlike onnx-ir's ``OutputFixPass`` it leaves a
graph input returned unchanged as it is: ONNX allows it, and the alternative renames the *input*
(``x`` → ``x_orig``), which breaks every caller feeding the model by input name.
"""

from __future__ import annotations

import logging

import onnx_ir as ir

__all__ = ["DistinctOutputsPass", "output_copy"]

logger = logging.getLogger(__name__)


def output_copy(graph: ir.Graph, index: int, name: str) -> ir.Value:
    """Make graph output ``index`` an Identity of its value, named ``name`` (type and shape
    carried over), so the output can be named or repeated independently."""
    value = graph.outputs[index]
    node = ir.node("Identity", inputs=[value])
    copy = node.outputs[0]
    copy.name, copy.type, copy.shape = name, value.type, value.shape
    graph.append(node)
    graph.outputs[index] = copy
    return copy


class DistinctOutputsPass(ir.passes.InPlacePass):
    """Repeated graph outputs (main graph and subgraphs) become Identities of the first."""

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        added = 0
        for graph in (model.graph, *model.graph.subgraphs()):
            seen: set[int] = set()
            for i, value in enumerate(list(graph.outputs)):
                if id(value) not in seen:
                    seen.add(id(value))
                    continue
                # A repeat stands for the same output: it keeps the output's metadata.
                output_copy(graph, i, f"{value.name}__{i}").metadata_props.update(value.metadata_props)
                added += 1
        logger.debug("DistinctOutputsPass: %d Identity node(s) added", added)
        return ir.passes.PassResult(model, modified=bool(added))
