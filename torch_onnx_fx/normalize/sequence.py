"""Normalize: the FX passes between decomposition and translation, in the order they run.

Each pass makes one of ATen's implicit rules explicit in the graph, so every translation sees
operands that already agree: side effects without tokens (``effect_tokens``), result shapes as
the real kernels give them where torch's fake kernels do not (``result_shapes``), storage read
through the tensor that owns it (``storage_base``), indexing by
aranges over whole dimensions as a reshape (``arange_indexing``), unobserved in-place ops made
functional (``functional_in_place``), then the dtype passes, which insert
``prims.convert_element_type`` in front of operands (``type_promotion``, ``bool_accumulation``,
which converts the result too, ``integral_accumulation``, ``index_dtype``, ``half_precision``),
and last the floating-point values computed from constants alone, computed by PyTorch
(``eager_constants``).
A pass is a ``torch.fx`` ``PassBase`` with its contract in its docstring; it changes the graph
in place and returns a ``PassResult`` saying whether it changed anything, leaving the module's
generated code to :func:`normalize`, which runs them over the program's graph and every subgraph
and recompiles each changed module once.

Python numbers and symbolic sizes are not tensors and stay as they are here: the graph walk
retypes them (``promotion.promote_scalars``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Sequence

import torch
from torch.fx.passes.infra.pass_base import PassBase

from torch_onnx_fx.normalize.arange_indexing import ArangeIndexPass
from torch_onnx_fx.normalize.bool_accumulation import BoolAccumulationPass
from torch_onnx_fx.normalize.eager_constants import EagerConstantPass
from torch_onnx_fx.normalize.effect_tokens import EffectTokenPass
from torch_onnx_fx.normalize.functional_in_place import InPlaceToFunctionalPass
from torch_onnx_fx.normalize.half_precision import HalfPrecisionAccumulationPass
from torch_onnx_fx.normalize.index_dtype import IndexDtypePass
from torch_onnx_fx.normalize.integral_accumulation import IntegralAccumulationPass
from torch_onnx_fx.normalize.result_shapes import ResultShapePass
from torch_onnx_fx.normalize.storage_base import StorageBasePass
from torch_onnx_fx.normalize.type_promotion import JoinPromotionPass, TypePromotionPass

if TYPE_CHECKING:
    from torch_onnx_fx.registry import TranslationTable

__all__ = ["normalize"]


def normalize(
    program: torch.export.ExportedProgram, table: TranslationTable | None = None, user_passes: Sequence[Callable[[torch.fx.GraphModule], Any]] = (),
) -> bool:
    """Run the normalize passes over ``program``'s graph and its subgraphs, in place; whether any
    of them changed something. ``table`` (the export's translations) tells which nodes become
    one fused ONNX operator. ``user_passes`` (``export(fx_passes=...)``) run first, on the
    top-level graph module as decomposition left it, so ours see what they made."""
    for user_pass in user_passes:
        user_pass(program.graph_module)
        program.graph_module.recompile()
    fused = table.fused if table is not None else (lambda node: False)
    # A user's own translation of index.Tensor sees every index node as captured.
    own_index = table is not None and "aten::index.Tensor" in table.custom_targets
    passes: tuple[PassBase, ...] = (
        EffectTokenPass(),
        ResultShapePass(),
        StorageBasePass(),
        *(() if own_index else (ArangeIndexPass(),)),
        *((InPlaceToFunctionalPass(table),) if table is not None else ()),
        TypePromotionPass(), JoinPromotionPass(), BoolAccumulationPass(), IntegralAccumulationPass(), IndexDtypePass(), HalfPrecisionAccumulationPass(fused),
        EagerConstantPass(),
    )
    modified = bool(user_passes)
    for module in list(program.graph_module.modules()):
        if not isinstance(module, torch.fx.GraphModule):
            continue
        changed = False
        for normalize_pass in passes:
            result = normalize_pass(module)
            changed = changed or bool(result and result.modified)
        if changed:
            # Once for all the passes, not after each: regenerating a deep model's Python code
            # costs as much as a pass's own work.
            module.recompile()
        modified = modified or changed
    return modified
