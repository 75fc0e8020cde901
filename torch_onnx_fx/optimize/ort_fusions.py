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

The attention kernel reads q and k packed ([B, S, N * E]), so the rotation transformers applies to
the split heads between the projection and the kernel becomes ONNX Runtime's ``RotaryEmbedding``
on the packed projection (:class:`_PackedRotary`).
"""

from __future__ import annotations

from typing import Any

import onnx_ir as ir
from onnx_ir.passes import common as common_passes
from onnxscript.rewriter import pattern

from torch_onnx_fx.optimize import fusion
from torch_onnx_fx.optimize.fusion import _RmsNormalization, _RotaryEmbedding
from torch_onnx_fx.optimize.packed_projections import PackedProjectionsPass
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


class _PackedRotary(_RotaryEmbedding):
    """The rotary embedding of heads split from a projection and packed back for the attention
    kernel, ``pack(rotary(split(y)))``, as ONNX Runtime's one ``RotaryEmbedding(y, ...,
    num_heads=N)`` on the projection's [B, S, N * E], at any opset.

    The rotation is the standard rule's (transformers' ``x * cos + rotate_half(x) * sin``, checked
    as there). The kernel reads cos/sin rows from a cache by position: the frequencies' own rows,
    flattened ([b * S, E / 2]), at positions ``s`` (an offset of 0) when the batch shares them, or
    ``b * S + s`` when each row has its own: the same angles, and no split, pack or expansion of
    the caches to the batch.
    """

    def pattern(self, op: Any, y: Any, split_shape: Any, freqs: Any, axes1: Any, axes2: Any, s1: Any, e1: Any, a1: Any,
                t1: Any, s2: Any, e2: Any, a2: Any, t2: Any, pack_shape: Any) -> Any:
        heads = op.Transpose(op.Reshape(y, split_shape, _outputs=["split"]), perm=[0, 2, 1, 3], _outputs=["heads"])
        rotated = super().pattern(op, heads, freqs, axes1, axes2, s1, e1, a1, t1, s2, e2, a2, t2)
        return op.Reshape(op.Transpose(rotated, perm=[0, 2, 1, 3]), pack_shape, _outputs=["packed"])

    def check(self, context: Any, y: ir.Value, split: ir.Value, heads: ir.Value, packed: ir.Value, **values: Any) -> pattern.MatchResult:
        result = super().check(context, x=heads, **values)
        if not result:
            return result
        if any(v.shape is None for v in (y, split, packed)) or split.shape.rank() != 4 or y.shape.rank() != 3:
            return result.fail("shapes unknown")
        batch, length, count, size = split.shape
        if not isinstance(count, int) or list(y.shape) != [batch, length, count * size] or list(packed.shape) != list(y.shape):
            return result.fail("the split and the pack must be of [B, S, N * E]")
        return result

    def rewrite(self, op: Any, y: ir.Value, freqs: ir.Value, split: ir.Value, **_: Any) -> Any:
        flat = op.Constant(value_ints=[-1, freqs.shape[2]])
        cos, sin = op.Reshape(op.Cos(freqs), flat), op.Reshape(op.Sin(freqs), flat)
        if freqs.shape[0] == 1:
            positions = op.Constant(value_ints=[0])
        else:
            rows = op.Shape(freqs, start=0, end=2)
            count = op.ReduceProd(rows, keepdims=0)
            positions = op.Reshape(op.Range(op.Constant(value_int=0), count, op.Constant(value_int=1)), rows)
        return op.RotaryEmbedding(y, positions, cos, sin, num_heads=split.shape[2], _domain=MICROSOFT)


_RULES = pattern.RewriteRuleSet(
    [_SkipRmsNormalization.rule(x_first, scale_first) for x_first in (True, False) for scale_first in (True, False)]
    + [_PackedRotary.rule()]
)


def fuse_for_onnxruntime(model: ir.Model) -> dict[str, int]:
    """Apply the rewrites and then the standard's to an optimized model, in place; how many of
    each fused operator the graph has. Ours go first: the standard's rules would take the norms
    without their residual sums and the rotations without their packing."""
    _RULES.apply_to_model(model)
    PackedProjectionsPass()(model)
    common_passes.CommonSubexpressionEliminationPass()(model)  # one cos/sin cache for every layer
    common_passes.RemoveUnusedNodesPass()(model)
    counts = fusion.fuse(model, fusion.ONNXRUNTIME)
    for op_type in ("GroupQueryAttention", "SkipSimplifiedLayerNormalization", "RotaryEmbedding"):
        count = sum(1 for node in model.graph if node.domain == MICROSOFT and node.op_type == op_type)
        if count:
            model.opset_imports.setdefault(MICROSOFT, 1)
            counts[f"{MICROSOFT}.{op_type}" if op_type in counts else op_type] = count
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
    translation made. The ``cat``'s readers (the graph's cache outputs, a sliding window's Slice
    of them) may come before the kernel in the graph: it is sorted again after. A kernel that
    reads the ``cat`` itself, through any path, keeps it."""
    graph = model.graph
    common_passes.RemoveUnusedNodesPass()(model)
    shared = 0
    for node in list(graph):
        if node.domain != MICROSOFT or node.op_type != "GroupQueryAttention" or len(node.inputs) < 5:
            continue
        ancestors: set[ir.Node] | None = None  # walked once per kernel, when a cat is found
        for new, past, present in ((node.inputs[1], node.inputs[3], node.outputs[1]), (node.inputs[2], node.inputs[4], node.outputs[2])):
            if past is None or new is None or present.uses():
                continue
            for concat in list(past.consumers()):
                axis = concat.attributes.get("axis")
                if (not _is_standard(concat, "Concat") or len(concat.inputs) != 2 or concat.inputs[0] is not past
                        or not _same_heads(new, concat.inputs[1]) or axis is None or axis.as_int() not in (2, -2)):
                    continue
                total = concat.outputs[0]
                ancestors = _ancestors(node) if ancestors is None else ancestors
                if concat in ancestors:
                    continue
                name = total.name
                ir.convenience.replace_all_uses_with(total, present, replace_graph_outputs=True)
                graph.remove(concat, safe=True)
                present.name = name
                shared += 1
                break
    if shared:
        common_passes.TopologicalSortPass()(model)
    return shared


def _ancestors(node: ir.Node) -> set[ir.Node]:
    """The nodes of ``node``'s graph that it depends on."""
    seen: set[ir.Node] = set()
    stack = [node]
    while stack:
        for value in stack.pop().inputs:
            producer = value.producer() if value is not None else None
            if producer is not None and producer not in seen:
                seen.add(producer)
                stack.append(producer)
    return seen
