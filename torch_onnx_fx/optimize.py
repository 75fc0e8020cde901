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
import onnxscript.optimizer

from torch_onnx_fx.passes import TrimUnusedOptionalOutputsPass

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
    """Full optimization, in place."""
    onnxscript.optimizer.optimize_ir(model)

