"""onnx-ir passes of our own, written like onnx-ir's: small, in place, reporting ``modified``.

``RelevantRulesRewritePass`` applies onnxscript's rewrite rules, but only those whose pattern's
operators all occur in the model. onnxscript tries every rule at every node, so the pattern
matcher was over 80 % of the optimizer's time on a 1,000-node graph, nearly all of it spent on
rules (Conv/BatchNorm fusions, Slice/Scatter rewrites…) that cannot match a model without those
operators. Skipping them changes no result.

``TrimUnusedOptionalOutputsPass`` drops trailing outputs that no one uses and that the operator's
schema marks optional. Translations recorded through onnxscript get every declared output (that
is onnxscript's eager convention), but some operators change meaning with their output count:
``BatchNormalization`` with three outputs is the *training* form, which ONNX Runtime rejects in
inference mode.
"""

from __future__ import annotations

import logging

import functools
from typing import Sequence

import onnx
import onnx_ir as ir
from onnxscript import rewriter
from onnxscript.rewriter import pattern as rewrite_pattern

__all__ = ["TrimUnusedOptionalOutputsPass", "RelevantRulesRewritePass"]

logger = logging.getLogger(__name__)


class TrimUnusedOptionalOutputsPass(ir.passes.InPlacePass):
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


class RelevantRulesRewritePass(ir.passes.InPlacePass):
    def __init__(self, rules: Sequence[rewrite_pattern.RewriteRule] = rewriter._DEFAULT_REWRITE_RULES):
        super().__init__()
        self._rules = [(rule, _required_ops(rule)) for rule in rules]

    @functools.lru_cache(maxsize=32)
    def _rule_set(self, present: frozenset[tuple[str, str]]) -> rewrite_pattern.RewriteRuleSet | None:
        relevant = [rule for rule, required in self._rules if required is None or required <= present]
        return rewrite_pattern.RewriteRuleSet(relevant) if relevant else None

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        rule_set = self._rule_set(_op_types(model))
        count = rule_set.apply_to_model(model) if rule_set is not None else 0
        return ir.passes.PassResult(model, bool(count))
