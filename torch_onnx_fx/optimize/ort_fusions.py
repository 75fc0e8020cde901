"""``fusion="onnxruntime"``: rewrites into ONNX Runtime's ``com.microsoft`` fused operators that its
session does not make from our graphs itself.

A decoder layer adds its residual and normalizes the sum at once (``h = r + f(x); norm(h)``, with
``h`` kept for the next residual). ONNX Runtime's ``SkipSimplifiedLayerNormalization`` does both in
one kernel and returns the sum too. Its session fuses only the ``x / sqrt(...)`` spelling of the RMS
norm, not the ``x * (1 / sqrt(...))`` one transformers' code translates to, so without this rewrite a
decode step runs the eight nodes of every norm apart (measured in docs/fusion.md).

The kernel computes, in float32, the sum, the mean of its squares, ``sum / sqrt(mean + eps)`` and
the product with the scale: the same operations as the model's, with a division where the model
multiplies by a reciprocal (at most an ulp apart). Accepted only for float32 operands of one shape
(rank 2 or 3, the kernel's layouts) and what the standard RMS rule accepts; anything else is left
as it was.
"""

from __future__ import annotations

from typing import Any

import onnx_ir as ir
from onnx_ir.passes import common as common_passes
from onnxscript.rewriter import pattern

from torch_onnx_fx.optimize.fusion import _RmsNormalization
from torch_onnx_fx.optimize.runtime.rewriting import constant_array

__all__ = ["fuse_for_onnxruntime"]

MICROSOFT = "com.microsoft"


class _SkipRmsNormalization(_RmsNormalization):
    """a + b, then the RMS norm of the sum -> SkipSimplifiedLayerNormalization(a, b, scale), with the
    sum as its fourth output for the sum's other readers."""

    def pattern(self, op: Any, a: Any, b: Any, exponent: Any, axes: Any, epsilon: Any, scale: Any) -> Any:
        total = op.Add(a, b, _outputs=["x"])
        return self.normalized(op, total, exponent, axes, epsilon, scale), total

    def check(self, context: Any, a: ir.Value, b: ir.Value, x: ir.Value, **values: Any) -> pattern.MatchResult:
        result = super().check(context, x=x, **values)
        if not result:
            return result
        if x.dtype != ir.DataType.FLOAT or a.dtype != x.dtype or b.dtype != x.dtype:
            return result.fail("the operands must be float32")
        if a.shape is None or b.shape is None or a.shape.rank() not in (2, 3) or list(a.shape) != list(b.shape):
            return result.fail("the operands must have one shape of rank 2 or 3 (no broadcasting)")
        return result

    def rewrite(self, op: Any, a: ir.Value, b: ir.Value, epsilon: ir.Value, scale: ir.Value, **_: Any) -> Any:
        normalized, _mean, _inverse, total = op.SkipSimplifiedLayerNormalization(
            a, b, scale, epsilon=float(constant_array(epsilon).reshape(())), _domain=MICROSOFT, _outputs=4,
        )
        return normalized, total


_RULES = pattern.RewriteRuleSet(
    [_SkipRmsNormalization.rule(x_first, scale_first) for x_first in (True, False) for scale_first in (True, False)]
)


def fuse_for_onnxruntime(model: ir.Model) -> dict[str, int]:
    """Apply the rewrites to an optimized model, in place (before the standard fusions, which
    then take the norms without a residual sum); how many of each fused operator the graph has."""
    _RULES.apply_to_model(model)
    common_passes.RemoveUnusedNodesPass()(model)
    count = sum(1 for node in model.graph if node.domain == MICROSOFT and node.op_type == "SkipSimplifiedLayerNormalization")
    if count:
        model.opset_imports.setdefault(MICROSOFT, 1)
    return {"SkipSimplifiedLayerNormalization": count} if count else {}
