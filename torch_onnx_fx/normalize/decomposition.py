"""Decompose only what has no ONNX translation.

torch.export hands over a graph of high-level ATen operators (``linear``, ``layer_norm``,
``scaled_dot_product_attention``…) that ONNX expresses compactly. Decomposing them, as a blanket
core-ATen lowering would, makes graphs larger and slower to export and run, and re-tracing is the
slowest and most fragile part of an export. So the table given to ``run_decompositions`` is
PyTorch's default one minus every operator our translation table covers, and when nothing needs
decomposing (all operators translatable, no in-place or out= ops left to functionalize) the program
is not re-traced at all.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
from typing import Any

import torch

from torch_onnx_fx.capture.strategies import size_oblivious
from torch_onnx_fx.errors import DecompositionError
from torch_onnx_fx.normalize.inplace import is_inert_in_place, rebinding
from torch_onnx_fx.registry import TranslationTable

__all__ = ["DecomposeResult", "decompose"]

logger = logging.getLogger(__name__)


@dataclasses.dataclass
class DecomposeResult:
    exported_program: torch.export.ExportedProgram
    # Targets that were decomposed (had no translation), for the report.
    decomposed: list[str]
    retraced: bool


def _needs_functionalization(target: Any) -> bool:
    if not isinstance(target, torch._ops.OpOverload):
        return False
    return target._schema.is_mutable


def _call_nodes(program: torch.export.ExportedProgram) -> list[torch.fx.Node]:
    return [
        node
        for module in program.graph_module.modules()
        if isinstance(module, torch.fx.GraphModule)
        for node in module.graph.nodes
        if node.op == "call_function"
    ]


def _is_transform(target: Any) -> bool:
    return getattr(target, "__module__", "") == "torch._functorch.predispatch" or target is getattr(
        torch.ops.higher_order, "flat_apply", None
    )


def _targets(program: torch.export.ExportedProgram) -> set[Any]:
    return {node.target for node in _call_nodes(program)}


@functools.lru_cache(maxsize=1)
def _extra_decompositions() -> dict[Any, Any]:
    import torch.onnx.ops
    from torch._decomp import decomposition_table

    table = {k: v for k, v in decomposition_table.items() if isinstance(k, torch._ops.OpOverload)}
    # torch.onnx.ops.attention/rotary_embedding below opset 23, where ONNX lacks the operators.
    table.update(torch.onnx.ops.aten_decompositions())
    return table


def _declined(program: torch.export.ExportedProgram, table: TranslationTable) -> list[Any]:
    """Operators some node of which has no translation that accepts it."""
    return list(
        {
            n.target: None
            for n in _call_nodes(program)
            if isinstance(n.target, torch._ops.OpOverload) and not table.has(n.target, n) and rebinding(n, table) is None
        }
    )


def _decomposition_table(table: TranslationTable, declined: set[Any]) -> Any:
    decomp_table = torch.export.default_decompositions()
    for op_overload in list(decomp_table.keys()):
        if table.has(op_overload) and op_overload not in declined:
            del decomp_table[op_overload]
    # Core ATen operators (``_adaptive_avg_pool2d``…) are not in the default table, but torch has
    # decompositions for many; use them for whatever we cannot translate.
    for op_overload, fn in _extra_decompositions().items():
        if (not table.has(op_overload) or op_overload in declined) and op_overload not in decomp_table:
            decomp_table[op_overload] = fn
    return decomp_table


# A decomposition can produce nodes that a translation declines in turn (adaptive_avg_pool2d
# becomes _adaptive_avg_pool2d with the same sizes); those are decomposed in another round.
_MAX_ROUNDS = 3


def decompose(program: torch.export.ExportedProgram, table: TranslationTable) -> DecomposeResult:
    targets = _targets(program)
    untranslatable = _declined(program, table)
    mutating = list(
        {
            n.target: None
            for n in _call_nodes(program)
            if _needs_functionalization(n.target) and not is_inert_in_place(n) and rebinding(n, table) is None
        }
    )
    # Autocast regions only get their casts when torch re-traces them; pre-dispatch transforms
    # (``torch.vmap`` levels and batch dims, ``flat_apply``; transformers builds masks with vmap)
    # are run by the re-trace and leave plain ATen operators.
    retrace_only = [t for t in targets if t is torch.ops.higher_order.wrap_with_autocast or _is_transform(t)]
    if not untranslatable and not mutating and not retrace_only:
        logger.info("every operator has a translation: no decomposition needed")
        return DecomposeResult(program, [], retraced=False)
    declined = set(untranslatable)
    decomposed = program
    for _ in range(_MAX_ROUNDS):
        try:
            # Re-tracing must keep size-1 dims symbolic as capture did.
            with size_oblivious():
                decomposed = decomposed.run_decompositions(_decomposition_table(table, declined))
        except Exception as exc:  # noqa: BLE001 - wrapped with context below
            names = sorted(t.name() for t in declined)
            raise DecompositionError(
                f"Decomposing operators without an ONNX translation failed ({type(exc).__name__}: {exc}).\n"
                f"Operators needing decomposition: {names or 'none'}; in-place ops to functionalize: "
                f"{sorted(t.name() for t in mutating) or 'none'}.\n"
                "Provide translations for these operators through custom_translation_table to avoid "
                "the decomposition."
            ) from exc
        newly = [t for t in _declined(decomposed, table) if t not in declined]
        if not newly:
            break
        declined.update(newly)
    return DecomposeResult(decomposed, sorted(t.name() for t in declined), retraced=True)
