"""Round trips to half precision that round nothing are skipped.

:class:`~torch_onnx_fx.optimize.runtime.kernel_gaps.KernelGapPass` computes float16 and
bfloat16 nodes in float32, each followed by a Cast back to its type: that Cast is ATen's rounding
after the operator. Where the float32 value is already a half-precision number, the Cast and the
Cast to float32 that the next widened node starts with change nothing: ``Relu``, ``Max``,
``Where`` or a ``Transpose`` of values cast from float16 only pick or move such numbers.
:class:`ExactRoundTripsPass` lets the reader of such a pair read the float32 value itself (a
small convolutional net in float16: 3 of its 30 nodes).
"""

from __future__ import annotations

import logging

import onnx_ir as ir

from torch_onnx_fx.optimize.runtime.rewriting import is_standard

__all__ = ["ExactRoundTripsPass"]

logger = logging.getLogger(__name__)

_HALF = frozenset({ir.DataType.FLOAT16, ir.DataType.BFLOAT16})
# Operators whose float results are some of their float inputs' values (or zeros), moved or picked.
_PICKING = frozenset({
    "Relu", "Max", "Min", "Abs", "Neg", "Where", "Identity", "Transpose", "Reshape", "Flatten", "Squeeze",
    "Unsqueeze", "Slice", "Gather", "GatherElements", "GatherND", "Concat", "Split", "Expand", "Tile", "MaxPool",
    "ReduceMax", "ReduceMin", "DepthToSpace", "SpaceToDepth", "Pad",
})


def _cast_to(node: ir.Node | None) -> ir.DataType | None:
    return ir.DataType(node.attributes["to"].as_int()) if is_standard(node, "Cast") else None  # type: ignore[union-attr]


class ExactRoundTripsPass(ir.passes.InPlacePass):
    """A float32 value known to hold half-precision numbers, cast to that type and back, is read
    as it is; the Casts go when nothing else reads them."""

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        holds: dict[ir.Value, ir.DataType] = {}  # float32 values known to hold numbers of a half type
        skipped = 0
        for node in model.graph:
            half = self._holds(node, holds)
            if half is not None:
                holds[node.outputs[0]] = half
            to = _cast_to(node)
            source = node.inputs[0] if to in _HALF and node.inputs else None
            if source is None or holds.get(source) != to:
                continue
            # Cast(half) of a value already holding such numbers: readers that cast it back to
            # float32 read the value itself.
            for user, _ in list(node.outputs[0].uses()):
                if _cast_to(user) == source.dtype and not user.outputs[0].is_graph_output():
                    user.outputs[0].replace_all_uses_with(source)
                    skipped += 1
        if skipped:
            ir.passes.common.RemoveUnusedNodesPass()(model)
            logger.debug("ExactRoundTripsPass: skipped %d round trip(s) through half precision", skipped)
        return ir.passes.PassResult(model, modified=bool(skipped))

    @staticmethod
    def _holds(node: ir.Node, holds: dict[ir.Value, ir.DataType]) -> ir.DataType | None:
        if len(node.outputs) != 1 or node.outputs[0].dtype not in (ir.DataType.FLOAT, ir.DataType.DOUBLE):
            return None
        if _cast_to(node) is not None:
            source = node.inputs[0]
            return source.dtype if source is not None and source.dtype in _HALF else None
        if node.op_type not in _PICKING or node.domain not in ("", "ai.onnx"):
            return None
        floats = [value for value in node.inputs if value is not None and value.dtype == node.outputs[0].dtype]
        kinds = {holds.get(value) for value in floats}
        return kinds.pop() if len(kinds) == 1 and None not in kinds else None
