"""Optimize: onnxscript's optimizer and onnx-ir passes over the translated model.

Scripted torchlib functions are always inlined (ONNX Runtime would otherwise run them as function
calls). With ``optimize=True`` the full onnxscript optimizer follows: constant folding, rewrite
rules, dead code, constant lifting, initializer deduplication, common subexpression elimination.
Graph inputs and outputs keep their names, and node metadata is preserved by the passes.
"""

from __future__ import annotations

import contextlib
import json
import logging
from typing import Collection, Iterator

import onnx_ir as ir
import onnx_ir.passes.common as common_passes
from onnxscript.optimizer import _constant_folding as constant_folding

from torch_onnx_fx.optimize.weights.batchnorm_into_conv import BatchNormIntoConvPass
from torch_onnx_fx.optimize.distinct_outputs import DistinctOutputsPass
from torch_onnx_fx.optimize.infer_missing_types import InferMissingTypesPass, RefineUnknownDimsPass
from torch_onnx_fx.optimize.static_dims import ExpandToOwnShapePass, FoldStaticDimsPass
from torch_onnx_fx.optimize.optional_outputs import TrimUnusedOptionalOutputsPass
from torch_onnx_fx.optimize.rewrite_rules import RelevantRulesRewritePass
from torch_onnx_fx.optimize.weights.recipes import FoldWeightRecipesPass
from torch_onnx_fx.translate.weight_data import without_data
from torch_onnx_fx.optimize.weights.transposes import FoldWeightTransposesPass
from torch_onnx_fx.translate.metadata import MODULE_STACK_KEY

__all__ = ["finalize", "module_stacks_carried", "optimize"]

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


# onnx-ir's inliner and onnxscript's rewriter copy a node's metadata_props onto the nodes they
# make from it (an inlined torchlib body, a Conv with a BatchNorm fused in), but not node.meta.
_STACK_PROP = "torch_onnx_fx.module_stack.json"


@contextlib.contextmanager
def module_stacks_carried(model: ir.Model) -> Iterator[None]:
    """Keep each node's module stack (translate/metadata.MODULE_STACK_KEY, what
    export_modules_as_functions outlines by) on the nodes passes make from it, through metadata."""
    for node in model.graph:
        if node.meta.get(MODULE_STACK_KEY):
            node.metadata_props[_STACK_PROP] = json.dumps(node.meta[MODULE_STACK_KEY])
    try:
        yield
    finally:
        for node in model.graph:
            carried = node.metadata_props.pop(_STACK_PROP, None)
            if carried is not None and not node.meta.get(MODULE_STACK_KEY):
                node.meta[MODULE_STACK_KEY] = tuple(tuple(entry) for entry in json.loads(carried))


# Warnings of two passes the optimizer runs are about choices made here on purpose, not news for
# the user: onnx-ir warns for every initializer it does not deduplicate because it is a graph input
# or output (the weights kept replaceable, and outputs), and onnxscript's folder when ONNX's
# reference implementation cannot evaluate a constant node (its GatherElements fails on BERT's
# token-type buffer; the node is then simply not folded and runs in the model). While our
# optimizer runs, what those two loggers say below ERROR goes to our log at debug level instead.
_QUIETED_LOGGERS = ("onnx_ir.passes.common.initializer_deduplication", "onnxscript.optimizer._constant_folding")


class _BelowErrorToDebug(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno >= logging.ERROR:
            return True
        logger.debug("%s: %s", record.name, record.getMessage())
        return False


@contextlib.contextmanager
def _third_party_warnings_quieted() -> Iterator[None]:
    quieted = [logging.getLogger(name) for name in _QUIETED_LOGGERS]
    only_errors = _BelowErrorToDebug()
    for third_party in quieted:
        third_party.addFilter(only_errors)
    try:
        yield
    finally:
        for third_party in quieted:
            third_party.removeFilter(only_errors)


@contextlib.contextmanager
def _weights_kept(model: ir.Model, weights: Collection[str]) -> Iterator[None]:
    """Let the passes see the named initializers as graph inputs, which they neither fold into
    derived constants nor merge with equal ones. A weight folded (``w.t()`` stored transposed) or
    merged (two LayerNorms' equal initial biases) is no longer replaceable by name: replacing it
    (``apply_weights``, an external tool) would silently leave the folded copy or its twin stale."""
    graph = model.graph
    kept = [graph.initializers[name] for name in weights if name in graph.initializers]
    # Tensors without data (a model built on the meta device or under FakeTensorMode) cannot be
    # folded either: the folder would read their bytes. Their values come with apply_weights.
    empty = [value for value in graph.initializers.values() if without_data(value)]
    named = {id(value) for value in kept}
    kept += [value for value in empty if id(value) not in named]
    # Rewrite rules and the folder read a graph input's value when it has one (a 0-d buffer as a
    # clamp bound became a new constant, shared by every module with an equal bound, and an
    # invalid graph in timm's Gemma 4 ViT): every kept weight hides its value while they run.
    hidden = {value: value.const_value for value in kept}
    if not kept:
        yield
        return
    original_inputs = list(graph.inputs)
    graph.inputs.extend(kept)
    for value in hidden:
        value.const_value = None
    try:
        yield
    finally:
        for value, tensor in hidden.items():
            value.const_value = tensor
        graph.inputs.clear()
        graph.inputs.extend(original_inputs)
        # A weight the graph no longer reads goes, as any unused initializer does.
        common_passes.RemoveUnusedNodesPass()(model)


def optimize(model: ir.Model, weights: Collection[str] = (), *, keep_functions: bool = False) -> None:
    """Full optimization, in place; the initializers named in ``weights`` stay as they are.

    ``keep_functions``: leave the model's functions as they are rather than inlining them (the
    module functions ``export_modules_as_functions`` made, which hold optimized nodes already).

    The passes and order of ``onnxscript.optimizer.optimize_ir`` (what torch.onnx runs), with the
    rewrite step restricted to rules that can match this model (see ``RelevantRulesRewritePass``).
    """
    with _third_party_warnings_quieted(), _weights_kept(model, weights):
        _optimize(model, inline=not keep_functions)
    # The folds kept weights need, each noting which weights the stored tensor is made of: used
    # transposed (stored so), or only moved and computed with (torchlib's LSTM/GRU gate
    # reordering, Gemma's 1 + weight, a BatchNormalization's factors taken into its Conv).
    BatchNormIntoConvPass(weights)(model)
    FoldWeightTransposesPass(weights)(model)
    FoldWeightRecipesPass(weights)(model)


def tidy(model: ir.Model, weights: Collection[str] = ()) -> None:
    """Folding and rewriting again (up to three rounds, each undoing what the last one exposed),
    in place, after passes that leave what the optimizer would have removed: the attention kernel
    of ``fusion="onnxruntime"`` gives its output back in heads, which the model's own moves undo
    (a Transpose pair, an Identity once folded, then two Reshapes that cancel): three nodes per
    layer of a decode step, 1 % of its time at one thread."""
    with _third_party_warnings_quieted(), _weights_kept(model, weights):
        _fold_and_rewrite(steps=3)(model)


def _fold_and_rewrite(steps: int) -> ir.passes.PassManager:
    return ir.passes.PassManager(
        [
            # No shape inference of the folder's own: translation typed every node already, and
            # re-inferring each one was two thirds of the folding time (InferMissingTypesPass
            # types what the rewrite rules add).
            constant_folding.FoldConstantsPass(
                shape_inference=False,
                input_size_limit=constant_folding.DEFAULT_CONSTANT_FOLD_INPUT_SIZE_LIMIT,
                output_size_limit=constant_folding.DEFAULT_CONSTANT_FOLD_OUTPUT_SIZE_LIMIT,
            ),
            RelevantRulesRewritePass(),
            common_passes.RemoveUnusedNodesPass(),
            common_passes.RemoveUnusedFunctionsPass(),
            common_passes.RemoveUnusedOpsetsPass(),
            # Static sizes folding made known, and static dims read from partly dynamic shapes,
            # for the next round to fold the shape arithmetic on them.
            RefineUnknownDimsPass(),
            FoldStaticDimsPass(),
            ExpandToOwnShapePass(),
        ],
        steps=steps,
        early_stop=True,
    )


def _optimize(model: ir.Model, *, inline: bool = True) -> None:
    ir.passes.Sequential(
        *([common_passes.InlinePass()] if inline else []),
        # No RemoveUnusedNodesPass after it: each of its rounds ends with one, and what follows
        # it there (unused functions and opsets) leaves no node dead.
        _fold_and_rewrite(steps=2),
        common_passes.LiftConstantsToInitializersPass(lift_all_constants=True, size_limit=0),
        common_passes.LiftSubgraphInitializersToMainGraphPass(),
        common_passes.DeduplicateInitializersPass(),
        common_passes.CommonSubexpressionEliminationPass(),
        DistinctOutputsPass(),
        common_passes.NameFixPass(),
        InferMissingTypesPass(),
    )(model)

