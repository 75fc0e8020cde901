"""Floating-point values the model computes from constants alone, computed by PyTorch.

Diffusion models build their timestep embedding's frequencies in every forward call
(``exp(-log(10000) * arange(half) / half)``), rotary embeddings their inverse frequencies, and
so on: arithmetic on constants only. Translated, ONNX Runtime's ``Exp`` (or the optimizer's
folding, numpy's) computes them, and each differs from ATen's in the last bit for some elements
(9 and 57 of 128 for that table). Multiplied by a timestep of 999 scaled by 1000, as AuraFlow
does, an ulp of the frequency is 0.06 of the sine's argument: its output was 8e-4 off eager's,
and torch.onnx's the same.

:class:`EagerConstantPass` runs such a computation in PyTorch while exporting, so the graph holds
eager's own bits, and replaces the last node of it by that tensor (a ``get_attr`` of the graph
module, an initializer once translated). Only results of at most ``SIZE_LIMIT`` elements whose
computation is more than filling and moving constants are replaced; random, uninitialized and
in-place operators, and anything depending on an input, a weight or a symbolic size, are not
constants here.
"""

from __future__ import annotations

import logging

import torch
import torch.utils._pytree as pytree
from torch.fx.passes.infra.pass_base import PassBase, PassResult

__all__ = ["EagerConstantPass", "SIZE_LIMIT"]

logger = logging.getLogger(__name__)

aten, prims = torch.ops.aten, torch.ops.prims

# Tables of frequencies and small positional grids; a larger constant stays a computation
# rather than grow the model file.
SIZE_LIMIT = 1 << 14

# The largest intermediate computed while exporting.
_WORK_LIMIT = 1 << 22

# Values ONNX reproduces exactly: fills of one number, views, copies and casts. A constant
# made of these alone is left to the graph.
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
    # Computing a large intermediate (a 4096 x 4096 mask) at every export costs more than it gives.
    return all(isinstance(size, int) for size in value.shape) and value.numel() <= _WORK_LIMIT


class EagerConstantPass(PassBase):
    """Replace floating-point results computed from constants only by their value in PyTorch."""

    def call(self, graph_module: torch.fx.GraphModule) -> PassResult:
        graph = graph_module.graph
        values: dict[torch.fx.Node, torch.Tensor] = {}
        # Whether the constant is more than fills and moves of constants.
        computed: dict[torch.fx.Node, bool] = {}
        for node in graph.nodes:
            if not _is_candidate(node):
                continue
            inputs = [a for a in pytree.tree_leaves((node.args, node.kwargs)) if isinstance(a, torch.fx.Node)]
            if any(a not in values for a in inputs):
                continue
            if any(isinstance(a, (torch.SymInt, torch.SymFloat, torch.SymBool)) for a in pytree.tree_leaves((node.args, node.kwargs))):
                continue
            args, kwargs = pytree.tree_map_only(torch.fx.Node, values.__getitem__, (node.args, node.kwargs))
            try:
                result = node.target(*args, **kwargs)
            except Exception:  # noqa: BLE001 - left to the graph, which then says what is wrong
                continue
            example = node.meta["val"]
            if not isinstance(result, torch.Tensor) or result.shape != example.shape or result.dtype != example.dtype:
                continue
            values[node] = result
            computed[node] = node.target not in _EXACT or any(computed[a] for a in inputs)
        replaced = 0
        for node, value in values.items():
            if not (computed[node] and value.is_floating_point() and value.numel() <= SIZE_LIMIT):
                continue
            # The last constant of a computation: what a node that is not a constant reads.
            if all(user in values for user in node.users):
                continue
            name = f"_eager_constant_{replaced}"
            while hasattr(graph_module, name):
                name += "_"
            # Not persistent: the program's weights (its state dict) are the model's alone.
            graph_module.register_buffer(name, value.detach().clone().contiguous(), persistent=False)
            with graph.inserting_before(node):
                constant = graph.get_attr(name)
            constant.meta = dict(node.meta)
            node.replace_all_uses_with(constant, delete_user_cb=lambda user: user not in values)
            replaced += 1
        if replaced:
            graph.eliminate_dead_code()
            logger.debug("%d constant computation(s) evaluated by PyTorch", replaced)
        return PassResult(graph_module, bool(replaced))
