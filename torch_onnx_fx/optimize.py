"""Optimize: onnxscript's optimizer and onnx-ir passes over the translated model.

Scripted torchlib functions are always inlined (ONNX Runtime would otherwise run them as function
calls). With ``optimize=True`` the full onnxscript optimizer follows: constant folding, rewrite
rules, dead code, constant lifting, initializer deduplication, common subexpression elimination.
Graph inputs and outputs keep their names, and node metadata is preserved by the passes.
"""

from __future__ import annotations

import logging

import onnx_ir as ir
import onnx_ir.passes.common as common_passes
from onnxscript.optimizer import _constant_folding as constant_folding

from torch_onnx_fx.passes import DistinctOutputsPass, RelevantRulesRewritePass, TrimUnusedOptionalOutputsPass

__all__ = ["finalize", "optimize"]

logger = logging.getLogger(__name__)


def finalize(model: ir.Model) -> None:
    """The passes every export needs, optimized or not: inline functions, drop dead nodes."""
    passes = ir.passes.Sequential(
        common_passes.InlinePass(),
        common_passes.RemoveUnusedNodesPass(),
        common_passes.RemoveUnusedFunctionsPass(),
        common_passes.RemoveUnusedOpsetsPass(),
        TrimUnusedOptionalOutputsPass(),
    )
    passes(model)


def optimize(model: ir.Model) -> None:
    """Full optimization, in place.

    The passes and order of ``onnxscript.optimizer.optimize_ir`` (what torch.onnx runs), with the
    rewrite step restricted to rules that can match this model (see ``RelevantRulesRewritePass``).
    """
    fold_and_rewrite = ir.passes.PassManager(
        [
            constant_folding.FoldConstantsPass(
                shape_inference=True,
                input_size_limit=constant_folding.DEFAULT_CONSTANT_FOLD_INPUT_SIZE_LIMIT,
                output_size_limit=constant_folding.DEFAULT_CONSTANT_FOLD_OUTPUT_SIZE_LIMIT,
            ),
            RelevantRulesRewritePass(),
            common_passes.RemoveUnusedNodesPass(),
            common_passes.RemoveUnusedFunctionsPass(),
            common_passes.RemoveUnusedOpsetsPass(),
        ],
        steps=2,
        early_stop=True,
    )
    ir.passes.Sequential(
        common_passes.InlinePass(),
        fold_and_rewrite,
        common_passes.RemoveUnusedNodesPass(),
        common_passes.LiftConstantsToInitializersPass(lift_all_constants=True, size_limit=0),
        common_passes.LiftSubgraphInitializersToMainGraphPass(),
        common_passes.DeduplicateInitializersPass(),
        common_passes.CommonSubexpressionEliminationPass(),
        DistinctOutputsPass(),
        common_passes.NameFixPass(),
    )(model)

