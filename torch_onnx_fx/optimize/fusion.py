"""Operator fusion: the ``fusion`` option of ``export``.

``"standard"`` (the default) uses the fused operators of the ONNX standard where the target
opset has them, and nothing else: ``scaled_dot_product_attention`` becomes one ``Attention``
node at opset 23 and later (a translation, ``ops/nn.py``), and after optimization the written-out
RMS normalization and rotary embedding of the model's Python code are rewritten into
``RMSNormalization`` and ``RotaryEmbedding`` (opset 23). Below opset 23 the graph is the
decomposition, which every back end runs.

``"onnxruntime"`` adds ONNX Runtime's own fused operators (``com.microsoft``) that its session
does not make from our graphs itself, or makes less exactly: ``GroupQueryAttention`` for
attention, sharing the KV cache it appends to (a translation, ``ops/ort_attention.py``, and
``ort_fusions.share_present``); ``SkipSimplifiedLayerNormalization`` for a residual sum and its
RMS norm and ``RotaryEmbedding`` for the rotation of the heads that attention reads packed
(``ort_fusions.py``); ``MatMulNBits`` for 4-bit weights (``matmul_nbits.py``; the
session's own fusion of that pattern quantizes the activations). The session applies the others
it has (FusedMatMul, QuickGelu...) to any graph it loads; onnxscript's ``optimize_for_ort`` fused
only rotary embeddings in our Llama graphs and ran 1.5x slower (docs/fusion.md).

``"none"`` keeps every operator as translated: no fused translation is chosen, no rewrite runs
(for back ends without kernels for the fused operators).

Every rewrite is exact for what it accepts and leaves everything else as it was: a pattern whose
shapes or dtypes the fused operator would treat differently is not rewritten.
"""

from __future__ import annotations

import collections
from typing import Any

import onnx_ir as ir
from onnx_ir.passes import common as common_passes
from onnxscript.rewriter import pattern

from torch_onnx_fx.optimize.runtime.rewriting import constant_array

__all__ = ["FUSIONS", "DEFAULT_FUSION", "ONNXRUNTIME", "FUSED_OPERATORS", "FUSED_OPSET", "fuse"]

ONNXRUNTIME = "onnxruntime"
FUSIONS = ("none", "standard", ONNXRUNTIME)
DEFAULT_FUSION = "standard"
# The standard's fused operators, and the opset that defines them.
FUSED_OPERATORS = ("Attention", "RMSNormalization", "RotaryEmbedding")
FUSED_OPSET = 23


class _RmsNormalization(pattern.RewriteRuleClassBase):
    """x * (1 / sqrt(mean(x^2, last axis) + eps)) * scale -> RMSNormalization(x, scale).

    The operand orders of both products vary with the model's code, hence one rule per order.
    Accepted only where RMSNormalization computes the same thing: a float32/float64 ``x`` (the
    operator's stash type is then ``x``'s own), a constant exponent 2, the mean over the last
    axis kept, a scalar constant epsilon, and a 1-D scale as long as the last axis.
    """

    def __init__(self, x_first: bool, scale_first: bool) -> None:
        super().__init__(f"{type(self).__name__.lstrip('_')}{int(x_first)}{int(scale_first)}")
        self.x_first, self.scale_first = x_first, scale_first

    def pattern(self, op: Any, x: Any, exponent: Any, axes: Any, epsilon: Any, scale: Any) -> Any:
        return self.normalized(op, x, exponent, axes, epsilon, scale)

    def normalized(self, op: Any, x: Any, exponent: Any, axes: Any, epsilon: Any, scale: Any) -> Any:
        """The norm's pattern over ``x`` (for rules that match more around it)."""
        mean = op.ReduceMean(op.Pow(x, exponent), axes, _outputs=["mean"])
        inverse = op.Reciprocal(op.Sqrt(op.Add(mean, epsilon)))
        normalized = op.Mul(x, inverse) if self.x_first else op.Mul(inverse, x)
        return op.Mul(scale, normalized) if self.scale_first else op.Mul(normalized, scale)

    def check(self, context: Any, x: ir.Value, exponent: ir.Value, axes: ir.Value, epsilon: ir.Value,
              scale: ir.Value, mean: ir.Value, **_: Any) -> pattern.MatchResult:
        result = pattern.MatchResult()
        if x.dtype not in (ir.DataType.FLOAT, ir.DataType.DOUBLE) or scale.dtype != x.dtype:
            return result.fail("x and scale must both be float32 or both float64")
        rank = x.shape.rank() if x.shape is not None else None
        if rank is None or scale.shape is None or scale.shape.rank() != 1 or scale.shape[0] != x.shape[-1]:
            return result.fail("scale must be 1-D, as long as x's last axis")
        if not isinstance(scale.shape[0], int):
            return result.fail("scale's length must be static")
        power, axis, eps = constant_array(exponent), constant_array(axes), constant_array(epsilon)
        if power is None or power.size != 1 or float(power.reshape(())) != 2.0:
            return result.fail("exponent must be the constant 2")
        if axis is None or axis.size != 1 or int(axis.reshape(())) not in (-1, rank - 1):
            return result.fail("the mean must be over the last axis")
        reduce = mean.producer()
        keepdims = reduce.attributes.get("keepdims")
        if keepdims is not None and keepdims.as_int() != 1:
            return result.fail("the mean must keep its axis")
        if eps is None or eps.size != 1:
            return result.fail("epsilon must be a scalar constant")
        return result

    def rewrite(self, op: Any, x: ir.Value, epsilon: ir.Value, scale: ir.Value, **_: Any) -> Any:
        return op.RMSNormalization(
            x, scale, axis=-1, epsilon=float(constant_array(epsilon).reshape(())), stash_type=int(x.dtype),
        )


def _ints(value: ir.Value) -> list[int] | None:
    array = constant_array(value)
    return None if array is None else [int(v) for v in array.reshape(-1)]


class _RotaryEmbedding(pattern.RewriteRuleClassBase):
    """x * cos + rotate_half(x) * sin -> RotaryEmbedding(x, cos_cache, sin_cache), as transformers
    writes it: rotate_half(x) = cat(-x[..., D/2:], x[..., :D/2]), cos = cos(cat(f, f)) and
    sin = sin(cat(f, f)) of the same frequencies f [b, S, D/2], unsqueezed at the head axis.

    RotaryEmbedding rotates the pairs (x[i], x[i + D/2]) by the angle f[i]: the same products and
    sums. Its caches must have x's batch size while transformers' position frequencies usually
    have batch 1 and broadcast, so they are expanded to x's batch. Accepted only for 4-D float32
    x [B, H, S, D] with a static even D, the slices exactly the two halves, and f's shape [b, S, D/2].
    """

    def __init__(self) -> None:
        # cos and sin serve every rotated tensor of every layer: the matched nodes stay, and go
        # once nothing reads them.
        super().__init__("RotaryEmbedding", remove_nodes=False)

    def pattern(self, op: Any, x: Any, freqs: Any, axes1: Any, axes2: Any, s1: Any, e1: Any, a1: Any, t1: Any,
                s2: Any, e2: Any, a2: Any, t2: Any) -> Any:
        cos = op.Unsqueeze(op.Cos(op.Concat(freqs, freqs, _outputs=["cos_cat"])), axes1)
        sin = op.Unsqueeze(op.Sin(op.Concat(freqs, freqs, _outputs=["sin_cat"])), axes2)
        first = op.Slice(x, s1, e1, a1, t1)
        second = op.Slice(x, s2, e2, a2, t2)
        rotated = op.Concat(op.Neg(second), first, _outputs=["rotated"])
        return op.Add(op.Mul(x, cos), op.Mul(rotated, sin))

    def check(self, context: Any, x: ir.Value, freqs: ir.Value, axes1: ir.Value, axes2: ir.Value, s1: ir.Value,
              e1: ir.Value, a1: ir.Value, t1: ir.Value, s2: ir.Value, e2: ir.Value, a2: ir.Value, t2: ir.Value,
              **values: ir.Value) -> pattern.MatchResult:
        result = pattern.MatchResult()
        if x.dtype != ir.DataType.FLOAT or freqs.dtype != ir.DataType.FLOAT:
            return result.fail("x and the frequencies must be float32")
        if x.shape is None or x.shape.rank() != 4 or freqs.shape is None or freqs.shape.rank() != 3:
            return result.fail("x must be [B, H, S, D] and the frequencies [b, S, D/2]")
        dim = x.shape[3]
        if not isinstance(dim, int) or dim % 2 or freqs.shape[2] != dim // 2:
            return result.fail("the head size must be static and even, the frequencies half of it")
        # The caches are [B, S, D/2]: one frequency row per position of x, shared by the batch or
        # given per batch row (not broadcast along the sequence).
        if freqs.shape[1] != x.shape[2] or freqs.shape[0] not in (1, x.shape[0]):
            return result.fail("the frequencies must be [1 or B, S, D/2] for x [B, H, S, D]")
        for name in ("cos_cat", "sin_cat", "rotated"):
            axis = values[name].producer().attributes.get("axis")
            if axis is None or axis.as_int() not in (-1, 2 if name != "rotated" else 3):
                return result.fail("the concatenations must be along the last axis")
        if _ints(axes1) != [1] or _ints(axes2) != [1]:
            return result.fail("cos and sin must be unsqueezed at the head axis")
        half = dim // 2
        first = (_ints(s1), _ints(e1), _ints(a1), _ints(t1))
        second = (_ints(s2), _ints(e2), _ints(a2), _ints(t2))
        if first[0] != [0] or first[1] != [half] or second[0] != [half] or second[1] is None or second[1][0] < dim:
            return result.fail("the slices must be the two halves of the head")
        if any(axes not in ([-1], [3]) for axes in (first[2], second[2])) or any(step != [1] for step in (first[3], second[3])):
            return result.fail("the slices must be along the last axis, step 1")
        return result

    def rewrite(self, op: Any, x: ir.Value, freqs: ir.Value, **_: Any) -> Any:
        # [b, S, D/2] caches expanded to x's batch (b is 1 or B).
        shape = op.Concat(op.Shape(x, start=0, end=1), op.Shape(freqs, start=1, end=3), axis=0)
        return op.RotaryEmbedding(x, op.Expand(op.Cos(freqs), shape), op.Expand(op.Sin(freqs), shape))


_STANDARD_RULES = pattern.RewriteRuleSet(
    [_RmsNormalization.rule(x_first, scale_first) for x_first in (True, False) for scale_first in (True, False)]
    + [_RotaryEmbedding.rule()]
)


def _opset(model: ir.Model) -> int:
    return model.opset_imports.get("", model.opset_imports.get("ai.onnx", 0))


def fuse(model: ir.Model, fusion: str) -> dict[str, int]:
    """Apply the rewrites of ``fusion`` to an optimized model, in place; returns how many of each
    fused operator the graph has (the Attention nodes come from the translation)."""
    if fusion == "none" or _opset(model) < FUSED_OPSET:
        return {}
    _STANDARD_RULES.apply_to_model(model)
    # Each rewrite builds its own caches; layers share them once common subexpressions merge.
    common_passes.CommonSubexpressionEliminationPass()(model)
    common_passes.RemoveUnusedNodesPass()(model)
    counts = collections.Counter(node.op_type for node in model.graph if node.domain in ("", "ai.onnx"))
    return {name: counts[name] for name in FUSED_OPERATORS if counts[name]}
