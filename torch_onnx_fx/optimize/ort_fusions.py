"""``fusion="onnxruntime"``: rewrites into ONNX Runtime's ``com.microsoft`` fused operators that its
session does not make from our graphs itself, and the cache their attention shares.

The attention itself is a translation (``ops/ort_attention.py``): ``GroupQueryAttention`` appends
the new keys and values to the cache and returns the whole (``present``), which the model's own
``cat((past, new), dim=2)`` computed too. :func:`share_present` gives the ``cat``'s readers (the
graph's cache outputs) the kernel's ``present`` instead, so the cache is copied once per step.

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

from torch_onnx_fx.optimize import fusion
from torch_onnx_fx.optimize.fusion import _RmsNormalization
from torch_onnx_fx.optimize.runtime.rewriting import constant_array, is_standard

__all__ = ["fuse_for_onnxruntime", "share_present"]

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


class _PackedRotary(pattern.RewriteRuleClassBase):
    """The rotary embedding of heads split out of a projection and packed back for the attention
    kernel, ``pack(RotaryEmbedding(split(y)))``, as one ``RotaryEmbedding(y, num_heads=N)``.

    The standard's RotaryEmbedding takes [B, S, N * E] with ``num_heads`` and rotates each head
    of it as it rotates [B, N, S, E]: the same products and sums, without the four moves. Taken
    only where the shapes say the split and the pack are exactly that: y [B, S, N * E], the split
    [B, S, N, E] moved to [B, N, S, E] and back, the result [B, S, N * E].
    """

    def __init__(self) -> None:
        super().__init__("PackedRotary")

    def pattern(self, op: Any, y: Any, split_shape: Any, cos: Any, sin: Any, positions: Any, pack_shape: Any) -> Any:
        heads = op.Transpose(op.Reshape(y, split_shape, _outputs=["split"]), perm=[0, 2, 1, 3])
        # The standard rule's caches, expanded to the heads' batch (which the split keeps).
        caches = op.Concat(op.Shape(heads, start=0, end=1), positions, axis=0)
        rotated = op.RotaryEmbedding(heads, op.Expand(cos, caches), op.Expand(sin, caches), _outputs=["rotated"])
        return op.Reshape(op.Transpose(rotated, perm=[0, 2, 1, 3]), pack_shape, _outputs=["packed"])

    def check(self, context: Any, y: ir.Value, split: ir.Value, rotated: ir.Value, packed: ir.Value, **_: Any) -> pattern.MatchResult:
        result = pattern.MatchResult()
        rotary = rotated.producer()
        if len(rotary.inputs) > 3 or any(name in rotary.attributes for name in ("num_heads", "interleaved", "rotary_embedding_dim")):
            return result.fail("only a whole-head, non-interleaved rotary without position ids")
        if any(v.shape is None for v in (y, split, packed)) or split.shape.rank() != 4 or y.shape.rank() != 3:
            return result.fail("shapes unknown")
        batch, length, heads, size = split.shape
        if not (isinstance(heads, int) and isinstance(size, int)):
            return result.fail("the head count and size must be static")
        if list(y.shape) != [batch, length, heads * size] or list(packed.shape) != list(y.shape):
            return result.fail("the split and the pack must be of [B, S, N * E]")
        return result

    def rewrite(self, op: Any, y: ir.Value, cos: ir.Value, sin: ir.Value, positions: ir.Value, split: ir.Value,
                **_: Any) -> Any:
        caches = op.Concat(op.Shape(y, start=0, end=1), positions, axis=0)
        return op.RotaryEmbedding(y, op.Expand(cos, caches), op.Expand(sin, caches), num_heads=split.shape[2])


_RULES = pattern.RewriteRuleSet(
    [_SkipRmsNormalization.rule(x_first, scale_first) for x_first in (True, False) for scale_first in (True, False)]
)
_AFTER_STANDARD = pattern.RewriteRuleSet([_PackedRotary.rule()])


def fuse_for_onnxruntime(model: ir.Model) -> dict[str, int]:
    """Apply the rewrites and the standard's to an optimized model, in place; how many of each
    fused operator the graph has. The residual norms go first (the standard's RMS rule would take
    their norms alone), the rotary embeddings the attention kernel reads after the standard's
    rotary rule has made them."""
    _RULES.apply_to_model(model)
    common_passes.RemoveUnusedNodesPass()(model)
    counts = fusion.fuse(model, fusion.ONNXRUNTIME)
    if counts.get("RotaryEmbedding"):
        _AFTER_STANDARD.apply_to_model(model)
        common_passes.RemoveUnusedNodesPass()(model)
    count = sum(1 for node in model.graph if node.domain == MICROSOFT and node.op_type == "SkipSimplifiedLayerNormalization")
    if count:
        model.opset_imports.setdefault(MICROSOFT, 1)
        counts["SkipSimplifiedLayerNormalization"] = count
    return counts


def _is_standard(node: ir.Node | None, op_type: str, perm: list[int] | None = None) -> bool:
    if not is_standard(node, op_type):
        return False
    attribute = node.attributes.get("perm")
    return perm is None or (attribute is not None and list(attribute.as_ints()) == perm)


def _same_heads(packed: ir.Value, heads: ir.Value) -> bool:
    """Whether the kernel's ``packed`` input [B, S, N * E] is ``heads`` [B, N, S, E] as the
    translation laid it out: ``Reshape(Transpose(heads))``, or the projection ``heads`` was split
    from (``Transpose(Reshape(packed))``)."""
    reshape, transpose = packed.producer(), heads.producer()
    if _is_standard(reshape, "Reshape") and _is_standard(reshape.inputs[0].producer(), "Transpose", [0, 2, 1, 3]):
        return reshape.inputs[0].producer().inputs[0] is heads
    if _is_standard(transpose, "Transpose", [0, 2, 1, 3]) and _is_standard(transpose.inputs[0].producer(), "Reshape"):
        return transpose.inputs[0].producer().inputs[0] is packed
    return False


def share_present(model: ir.Model) -> int:
    """Replace each ``cat((past, new), dim=2)`` that a GroupQueryAttention node also computes by the
    node's ``present`` output; returns how many. Run on the translated graph, whose layout the
    translation made; a ``cat`` read by anything but graph outputs is left (the kernel's output
    comes later in the graph)."""
    graph = model.graph
    common_passes.RemoveUnusedNodesPass()(model)
    shared = 0
    for node in list(graph):
        if node.domain != MICROSOFT or node.op_type != "GroupQueryAttention" or len(node.inputs) < 5:
            continue
        for new, past, present in ((node.inputs[1], node.inputs[3], node.outputs[1]), (node.inputs[2], node.inputs[4], node.outputs[2])):
            if past is None or new is None or present.uses():
                continue
            for concat in list(past.consumers()):
                axis = concat.attributes.get("axis")
                if (not _is_standard(concat, "Concat") or len(concat.inputs) != 2 or concat.inputs[0] is not past
                        or not _same_heads(new, concat.inputs[1]) or axis is None or axis.as_int() not in (2, -2)):
                    continue
                total = concat.outputs[0]
                if total.uses():
                    continue
                outputs = [i for i, output in enumerate(graph.outputs) if output is total]
                name = total.name
                for index in outputs:
                    graph.outputs[index] = present
                graph.remove(concat, safe=True)
                present.name = name
                shared += 1
                break
    return shared
