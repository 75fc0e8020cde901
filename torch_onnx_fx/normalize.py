"""Normalize: FX passes between decomposition and translation that make ATen's implicit rules
explicit, so translations see operands that already agree.

Each pass is a ``torch.fx`` pass (``PassBase``) with a contract in its docstring, changing the
graph module in place and returning a ``PassResult`` that says whether it changed anything;
:func:`normalize` runs them over the program's graph and every subgraph.
"""

from __future__ import annotations

import logging
from typing import Any

import torch
from torch.fx.passes.infra.pass_base import PassBase, PassResult

from torch_onnx_fx import promotion

__all__ = ["ComplexOperandsPass", "normalize"]

logger = logging.getLogger(__name__)

_CONVERT = torch.ops.prims.convert_element_type.default

# Operators writing a tensor argument into ``self``'s dtype (ATen casts it): argument indices.
_WRITTEN_INTO_SELF = {
    "aten::index_put": (2,), "aten::_unsafe_index_put": (2,), "aten::copy": (1,),
    "aten::masked_fill.Tensor": (2,), "aten::index_copy": (3,), "aten::slice_scatter": (1,),
    "aten::select_scatter": (1,), "aten::diagonal_scatter": (1,), "aten::scatter.src": (3,),
}


def _example(arg: Any) -> Any:
    return arg.meta.get("val") if isinstance(arg, torch.fx.Node) else arg


class ComplexOperandsPass(PassBase):
    """Real tensor operands of an element-wise op that computes in a complex dtype become that
    complex dtype first (``real * 1j``, ``where(c, complex, real)``, complex64 with complex128).

    Contract: for every node with an ATen promotion rule whose computation dtype is complex, each
    participating tensor argument of another dtype is replaced by a ``prims.convert_element_type``
    node to the computation dtype, inserted just before it; likewise a real tensor written into
    a complex ``self`` (``index_put`` values, ``copy`` source) becomes ``self``'s dtype. Translations for complex inputs can
    then rely on every tensor operand being in the same real-view form; only Python scalars are
    left for them to convert.
    """

    @staticmethod
    def _target_dtype(node: torch.fx.Node, examples: list[Any]) -> tuple[torch.dtype | None, tuple[int, ...]]:
        name = node.target.name() if isinstance(node.target, torch._ops.OpOverload) else None
        written = _WRITTEN_INTO_SELF.get(name) if name else None
        if written is not None:
            self_example = examples[0] if examples else None
            return (self_example.dtype if isinstance(self_example, torch.Tensor) else None), written
        rule = promotion.promotion_rule(node.target)
        if rule is None:
            return None, ()
        return promotion.computation_dtype(rule, examples), rule[1]

    def call(self, graph_module: torch.fx.GraphModule) -> PassResult:
        graph = graph_module.graph
        converted = 0
        for node in list(graph.nodes):
            if node.op != "call_function":
                continue
            examples = [_example(a) for a in node.args]
            dtype, indices = self._target_dtype(node, examples)
            if dtype is None or not dtype.is_complex:
                continue
            args = list(node.args)
            for i in indices:
                if i >= len(args) or not isinstance(args[i], torch.fx.Node):
                    continue
                example = examples[i]
                if not isinstance(example, torch.Tensor) or example.dtype == dtype:
                    continue
                with graph.inserting_before(node):
                    conversion = graph.call_function(_CONVERT, (args[i], dtype))
                conversion.meta["val"] = example.to(dtype)
                for key in ("stack_trace", "nn_module_stack", "source_fn_stack"):
                    if key in node.meta:
                        conversion.meta[key] = node.meta[key]
                args[i] = conversion
                converted += 1
            node.args = tuple(args)
        if converted:
            graph_module.recompile()
            logger.debug("converted %d real operand(s) of complex computations", converted)
        return PassResult(graph_module, bool(converted))


_PASSES: tuple[PassBase, ...] = (ComplexOperandsPass(),)


def normalize(program: torch.export.ExportedProgram) -> bool:
    """Run the normalize passes over ``program``'s graph and its subgraphs, in place; whether any
    of them changed something."""
    modified = False
    for module in list(program.graph_module.modules()):
        if not isinstance(module, torch.fx.GraphModule):
            continue
        for normalize_pass in _PASSES:
            result = normalize_pass(module)
            modified = modified or bool(result and result.modified)
    return modified
