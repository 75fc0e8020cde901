"""Values the model computes from constants alone with floating-point arithmetic, computed by PyTorch.

Diffusion models build their timestep embedding's frequencies in every forward call
(``exp(-log(10000) * arange(half) / half)``), rotary embeddings their inverse frequencies, and
so on: arithmetic on constants only. Translated, ONNX Runtime's ``Exp`` (or the optimizer's
folding, numpy's) computes them, and each differs from ATen's in the last bit for some elements
(9 and 57 of 128 for that table). Multiplied by a timestep of 999 scaled by 1000, as AuraFlow
does, an ulp of the frequency is 0.06 of the sine's argument: its output was 8e-4 off eager's,
and torch.onnx's the same.

:class:`EagerConstantPass` runs such computations in PyTorch while exporting and records the
value on the node that the graph reads (``node.meta[EAGER_VALUE]``): the translation makes it an
initializer holding eager's own bits, and skips the constant nodes nothing then reads
(``EAGER_UNUSED``). The FX graph itself is left as it is, so the program stays a valid
ExportedProgram (saved, re-decomposed, run). Only values of at most ``SIZE_LIMIT`` elements that
floating-point arithmetic went into are recorded (integer results of it too: a ``floor`` of a
scaled ``arange``); fills, moves and integer arithmetic ONNX reproduces exactly stay
computations. Random, uninitialized and in-place operators, and anything depending on an input,
a weight or a symbolic size, are not constants here.
"""

from __future__ import annotations

import logging

import torch
import torch.utils._pytree as pytree
from torch.fx.passes.infra.pass_base import PassBase, PassResult

__all__ = ["EAGER_UNUSED", "EAGER_VALUE", "EagerConstantPass", "SIZE_LIMIT"]

logger = logging.getLogger(__name__)

aten, prims = torch.ops.aten, torch.ops.prims

# The records the translation reads.
EAGER_VALUE = "torch_onnx_fx.eager_value"
EAGER_UNUSED = "torch_onnx_fx.eager_unused"

# Tables of frequencies and small positional grids; a larger constant stays a computation
# rather than grow the model file.
SIZE_LIMIT = 1 << 14

# The largest intermediate computed while exporting: a 2048 x 2048 mask costs more than it gives.
_WORK_LIMIT = 1 << 20

# Values ONNX reproduces exactly: fills of one number, views, copies and casts.
_EXACT = frozenset({
    aten.full.default, aten.zeros.default, aten.ones.default, aten.scalar_tensor.default, aten.full_like.default,
    aten.zeros_like.default, aten.ones_like.default, aten.new_full.default, aten.new_zeros.default, aten.new_ones.default,
    aten.lift_fresh_copy.default, aten.clone.default, aten._to_copy.default, prims.convert_element_type.default,
    aten.cat.default, aten.stack.default, aten.expand.default, aten.view.default, aten.reshape.default,
    aten.unsqueeze.default, aten.squeeze.dim, aten.squeeze.dims, aten.permute.default, aten.t.default,
    aten.transpose.int, aten.slice.Tensor, aten.select.int, aten.alias.default, aten.detach.default,
    aten.triu.default, aten.tril.default,
})

# Values that are not the same at every call.
_UNINITIALIZED = frozenset({
    aten.empty.memory_format, aten.empty_like.default, aten.new_empty.default, aten.empty_strided.default,
    aten.new_empty_strided.default,
})


def _is_candidate(node: torch.fx.Node) -> bool:
    target = node.target
    if node.op != "call_function" or not isinstance(target, torch._ops.OpOverload) or target in _UNINITIALIZED:
        return False
    if target._schema.is_mutable or torch.Tag.nondeterministic_seeded in target.tags:
        return False
    value = node.meta.get("val")
    if not isinstance(value, torch.Tensor) or value.is_complex() or value.device.type != "cpu":
        return False
    return all(isinstance(size, int) for size in value.shape) and value.numel() <= _WORK_LIMIT


def _evaluated(node: torch.fx.Node, values: dict[torch.fx.Node, torch.Tensor | None]) -> torch.Tensor | None:
    """The node's value computed by PyTorch from its constant inputs; None when it is not a constant."""
    leaves = pytree.tree_leaves((node.args, node.kwargs))
    if any(isinstance(a, (torch.SymInt, torch.SymFloat, torch.SymBool)) for a in leaves):
        return None
    if any(isinstance(a, torch.fx.Node) and a not in values for a in leaves):
        return None
    args, kwargs = pytree.tree_map_only(torch.fx.Node, values.__getitem__, (node.args, node.kwargs))
    try:
        result = node.target(*args, **kwargs)
    except Exception:  # noqa: BLE001 - left to the graph, which then says what is wrong
        return None
    example = node.meta["val"]
    if not isinstance(result, torch.Tensor) or result.shape != example.shape or result.dtype != example.dtype:
        return None
    return result


class EagerConstantPass(PassBase):
    """Record, on the nodes the graph reads them from, the values computed from constants with
    floating-point arithmetic, as PyTorch computes them."""

    def call(self, graph_module: torch.fx.GraphModule) -> PassResult:
        nodes = list(graph_module.graph.nodes)
        # Every constant's value while a later node may read it; the recordable ones to the end.
        values: dict[torch.fx.Node, torch.Tensor | None] = {}
        inexact: dict[torch.fx.Node, bool] = {}
        remaining = {node: len(node.users) for node in nodes}
        for node in nodes:
            # Each input once: ``users`` counts a node read twice by one reader (``x * x``) once.
            inputs = list(dict.fromkeys(a for a in pytree.tree_leaves((node.args, node.kwargs)) if isinstance(a, torch.fx.Node)))
            result = _evaluated(node, values) if _is_candidate(node) else None
            if result is not None:
                values[node] = result
                floating = result.is_floating_point() or any(values[a].is_floating_point() for a in inputs)
                inexact[node] = (node.target not in _EXACT and floating) or any(inexact[a] for a in inputs)
            for a in inputs:
                remaining[a] -= 1
                if remaining[a] == 0 and a in values and not self._recordable(a, values[a], inexact[a]):
                    values[a] = None  # read by no later node, and not to be recorded
        # Last to first, so each constant's readers are decided first: the graph computes a node
        # that is not a constant, or a constant that is read and not recorded.
        computed: dict[torch.fx.Node, bool] = {}
        recorded = 0
        for node in reversed(nodes):
            if node not in values:
                computed[node] = True
                continue
            node.meta.pop(EAGER_VALUE, None)
            node.meta.pop(EAGER_UNUSED, None)
            read = any(computed[user] for user in node.users)
            value = values[node]
            if read and value is not None and self._recordable(node, value, inexact[node]):
                node.meta[EAGER_VALUE] = value.detach().clone().contiguous()
                recorded += 1
                computed[node] = False
            else:
                computed[node] = read
                if not read:
                    node.meta[EAGER_UNUSED] = True
        if recorded:
            logger.debug("%d constant computation(s) evaluated by PyTorch", recorded)
        # The graph is unchanged: the records are the result.
        return PassResult(graph_module, False)

    @staticmethod
    def _recordable(node: torch.fx.Node, value: torch.Tensor, inexact: bool) -> bool:
        return inexact and value.numel() <= SIZE_LIMIT
