"""``RelevantRulesRewritePass`` applies onnxscript's rewrite rules, but only those whose pattern's
operators all occur in the model. onnxscript tries every rule at every node, so the pattern
matcher was over 80 % of the optimizer's time on a 1,000-node graph, nearly all of it spent on
rules (Conv/BatchNorm fusions, Slice/Scatter rewrites…) that cannot match a model without those
operators. Skipping them changes no result.
"""

from __future__ import annotations

import functools
from typing import Any, Sequence

import numpy as np
import onnx_ir as ir
from onnxscript import rewriter
from onnxscript.rewriter import pattern as rewrite_pattern

# The no-op rules (x*1, x+0, ...) of onnxscript's default set; their tolerant constant matching is
# replaced by exact rules below. A private module: its rule objects are the ones in the defaults.
from onnxscript.rewriter.rules.common import _basic_rules as basic_rules
from onnxscript.rewriter.rules.common import _no_op as no_op_rules

__all__ = ["RelevantRulesRewritePass", "default_rules"]


def _op_types(model: ir.Model) -> frozenset[tuple[str, str]]:
    found = {(node.domain, node.op_type) for node in ir.traversal.RecursiveGraphIterator(model.graph)}
    for function in model.functions.values():
        found.update((node.domain, node.op_type) for node in ir.traversal.RecursiveGraphIterator(function))
    return frozenset(found)


def _required_ops(rule: rewrite_pattern.RewriteRule) -> frozenset[tuple[str, str]] | None:
    """The (domain, op_type) pairs a rule's pattern needs, or None when it matches any op."""
    required = set()
    for node in rule._target_pattern._nodes:
        identifier = node.op_identifier()
        if identifier is None:
            return None
        domain, op_type, _ = identifier
        required.add((domain, op_type))
    return frozenset(required)


def _exactly(target: float, zero_sign: bool | None = None) -> Any:
    """Condition: ``c`` is a constant of one element equal to ``target`` exactly, broadcasting
    to ``x``'s own shape (so removing the op changes neither values nor shape).

    ``zero_sign`` is the sign bit a floating-point zero must have: x + (-0.0) and x - (+0.0) are
    x for every x, but x + 0.0 turns -0.0 into +0.0 (and 1 / x from -inf into inf).
    """

    def condition(context: Any, x: ir.Value, c: ir.Value, **_: Any) -> bool:
        tensor = ir.convenience.get_const_tensor(c)
        if tensor is None or tensor.size != 1:
            return False
        value = tensor.numpy().reshape(())
        if not bool(value == target):
            return False
        if zero_sign is not None and tensor.dtype.is_floating_point() and bool(np.signbit(value)) != zero_sign:
            return False
        rank = len(tensor.shape)
        return rank == 0 or (x.shape is not None and x.shape.rank() >= rank)

    return condition


def _keep_x(op: Any, x: ir.Value, c: ir.Value, **_: Any) -> ir.Value:
    return op.Identity(x)


def _exact_no_op_rules() -> list[rewrite_pattern.RewriteRule]:
    """x*1, 1*x, x+0, 0+x, x-0 and x/1 with the constant compared exactly.

    onnxscript's versions compare with a tolerance (|c| < 1e-8 counts as 0, c within 1e-5 of 1
    counts as 1), which silently turns ``1 / (x*x + 1e-12)`` into ``1 / (x*x)`` and
    ``x * 1.000001`` into ``x``.
    """
    patterns = [
        (lambda op, x, c: op.Mul(x, c), 1.0),
        (lambda op, x, c: op.Mul(c, x), 1.0),
        (lambda op, x, c: op.Div(x, c), 1.0),
    ]
    signed = [
        (lambda op, x, c: op.Add(x, c), True),
        (lambda op, x, c: op.Add(c, x), True),
        (lambda op, x, c: op.Sub(x, c), False),
    ]
    return [rewrite_pattern.RewriteRule(pattern, _keep_x, _exactly(target)) for pattern, target in patterns] + [
        rewrite_pattern.RewriteRule(pattern, _keep_x, _exactly(0.0, sign)) for pattern, sign in signed
    ]


def default_rules() -> list[rewrite_pattern.RewriteRule]:
    """onnxscript's default rewrite rules with its tolerant no-op arithmetic rules made exact,
    and without ``SlicesSplit``: a two-output pattern, which onnxscript matches by walking the
    whole graph for every ``Slice`` (quadratic in depth: 9.7 of 15.7 s exporting a 16-layer
    Llama), and which needs ``end`` equal to the static last dim, never the case in our graphs
    (ATen's open end is INT64_MAX)."""
    exact = {id(no_op_rules.dropout_zero_rule), id(no_op_rules.dropout_inference_rule)}
    tolerant = {id(rule) for rule in no_op_rules.rules.rules} - exact
    dropped = tolerant | {id(basic_rules.slice_split_rule)}
    kept = [rule for rule in rewriter._DEFAULT_REWRITE_RULES if id(rule) not in dropped]
    return [*_exact_no_op_rules(), *kept]


def _root_op(rule: rewrite_pattern.RewriteRule) -> tuple[str, str] | None:
    """The (domain, op_type) of the node a single-output pattern is matched from, if fixed."""
    roots = rule._target_pattern.output_nodes
    identifier = roots[0].op_identifier() if len(roots) == 1 else None
    return None if identifier is None else (identifier[0], identifier[1])


class _RootFiltered:
    """A rule that onnxscript's rule set tries only at nodes of its root op.

    The rule set tries every rule at every node, and a failed match costs ~15 µs even when the
    op type alone rules it out: 45,000 tries and 0.7 s per rewrite round on a 32-layer Llama.
    The op-type check here is the first thing the matcher would check anyway.
    """

    def __init__(self, rule: rewrite_pattern.RewriteRule, root: tuple[str, str]):
        self._rule = rule
        self._root = root

    def __getattr__(self, name: str) -> Any:
        return getattr(self._rule, name)

    def __repr__(self) -> str:
        return repr(self._rule)

    def try_rewrite(self, model: ir.Model, graph: Any, node: ir.Node, **kwargs: Any) -> Any:
        if node.op_type != self._root[1] or (node.domain or "") != self._root[0]:
            return None
        return self._rule.try_rewrite(model, graph, node, **kwargs)


def _filtered(rule: rewrite_pattern.RewriteRule) -> Any:
    root = _root_op(rule)
    return rule if root is None else _RootFiltered(rule, root)


class RelevantRulesRewritePass(ir.passes.InPlacePass):
    """onnxscript's rewrite rules (``default_rules`` unless given), those that can match this model."""

    def __init__(self, rules: Sequence[rewrite_pattern.RewriteRule] | None = None):
        super().__init__()
        self._rules = [(rule, _required_ops(rule)) for rule in (default_rules() if rules is None else rules)]

    @functools.lru_cache(maxsize=32)
    def _rule_set(self, present: frozenset[tuple[str, str]]) -> rewrite_pattern.RewriteRuleSet | None:
        relevant = [_filtered(rule) for rule, required in self._rules if required is None or required <= present]
        return rewrite_pattern.RewriteRuleSet(relevant) if relevant else None

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        rule_set = self._rule_set(_op_types(model))
        count = rule_set.apply_to_model(model) if rule_set is not None else 0
        return ir.passes.PassResult(model, bool(count))
