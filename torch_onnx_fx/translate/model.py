"""The translate stage's entry: a normalized ``ExportedProgram`` in, an onnx-ir ``Model`` out."""

from __future__ import annotations

from typing import Callable, Mapping

import onnx_ir as ir
import torch

from torch_onnx_fx import _state, dtypes
from torch_onnx_fx.registry import TranslationTable
from torch_onnx_fx.signature import ProgramSignature
from torch_onnx_fx.translate import metadata
from torch_onnx_fx.translate.walk import missing_translation_error, translate, untranslatable_nodes

__all__ = ["check_translatable", "translate_program"]


def check_translatable(program: torch.export.ExportedProgram, table: TranslationTable) -> None:
    """Raise a ``MissingTranslationError`` naming every operator of ``program`` (subgraphs
    included) that has no translation, before any is translated."""
    missing = untranslatable_nodes(program.graph_module, table)
    if missing:
        raise missing_translation_error(missing, table)


def translate_program(
    program: torch.export.ExportedProgram,
    table: TranslationTable,
    *,
    opset_version: int,
    symbol_names: Mapping[str, str],
    signature: ProgramSignature,
    state_outputs: bool = False,
    progress: Callable[[int, int], None] | None = None,
) -> ir.Model:
    """The ONNX model of ``program``, built at ``opset_version``, with PyTorch's metadata keys and
    the scripted functions its translations called (inlined by the optimize stage)."""
    graph, tracer = translate(
        program, table, opset_version=opset_version, symbol_names=symbol_names, signature=signature,
        state_outputs=state_outputs, progress=progress,
    )
    metadata.annotate_graph(graph, program)
    return ir.Model(
        graph,
        ir_version=dtypes.DEFAULT_IR_VERSION,
        producer_name="torch_onnx_fx",
        producer_version=_state.version(),
        functions=list(tracer.functions.values()),
    )
