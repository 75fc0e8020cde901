"""A ``Clip`` with one bound keeps infinities, as ``clamp_min``/``clamp_max`` do.

ONNX's ``Clip`` leaves a missing bound unbounded, but ONNX Runtime's CPU kernel fills it with the
dtype's largest finite value: ``Clip(inf, min=1e-12)`` is 3.4e38 in float32, where
``torch.clamp_min(inf, 1e-12)`` is inf. F.normalize of a row holding an infinity divided by that
finite norm and returned 3e-39 for 0 and inf for NaN. :class:`OneSidedClipPass` rewrites each
floating-point ``Clip`` with one bound as the ``Max`` (or ``Min``) it stands for, which keeps
infinities, and NaN as ``Clip`` does. Integer clips have no infinities and are left alone.
"""

from __future__ import annotations

import logging

import onnx_ir as ir

from torch_onnx_fx.optimize.runtime.rewriting import replace

__all__ = ["OneSidedClipPass"]

logger = logging.getLogger(__name__)

_FLOATS = frozenset({ir.DataType.FLOAT, ir.DataType.DOUBLE, ir.DataType.FLOAT16, ir.DataType.BFLOAT16})


def _bound(node: ir.Node, index: int) -> ir.Value | None:
    return node.inputs[index] if len(node.inputs) > index else None


class OneSidedClipPass(ir.passes.InPlacePass):
    """See the module docstring; graphs below opset 11 (bounds as attributes) are left alone."""

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        count = 0
        if model.graph.opset_imports.get("", 0) < 11:
            return ir.passes.PassResult(model, modified=False)
        for node in list(ir.traversal.RecursiveGraphIterator(model.graph)):
            if node.op_type != "Clip" or node.domain not in ("", "ai.onnx") or node.inputs[0] is None:
                continue
            if node.inputs[0].dtype not in _FLOATS:
                continue
            low, high = _bound(node, 1), _bound(node, 2)
            if (low is None) == (high is None):
                continue  # both bounds (exact) or none (an identity)
            replacement = ir.node("Max" if low is not None else "Min", [node.inputs[0], low if low is not None else high])
            replace(node, [replacement], replacement.outputs, "bounded")
            count += 1
        if count:
            logger.debug("OneSidedClipPass: %d one-sided Clip(s) as Max/Min", count)
        return ir.passes.PassResult(model, modified=bool(count))
