"""In-place ops translated without functionalizing the program.

torch.export's graph may keep in-place ops (``x.add_(y)`` as ``aten.add_.Tensor``). Handing the
program to ``run_decompositions`` to functionalize them re-traces the whole model (11 s of a 20 s
T5 export, for one ``add_``). When the mutated tensor is a fresh intermediate that nothing else
can observe through an alias, the mutation is just a new value under an old name: translate the
functional op (``aten.add.Tensor``) and let every later use of the tensor read the result.

The conditions, checked on the FX graph:

* the op is ``<name>_`` with a ``Tensor(a!) self`` first argument that it returns, and the
  functional ``<name>`` overload exists;
* ``self`` is produced by a ``call_function`` whose result aliases nothing (not an input, buffer
  or parameter, not a view);
* no user of ``self`` creates a view of it (a view would see the mutation) or mutates it out of
  FX order.
"""

from __future__ import annotations

import operator
from typing import Any

import torch

from torch_onnx_fx.registry import arg_example

__all__ = ["rebinding", "same_tensor", "is_inert_in_place"]

# In-place ops that, in eval mode, leave their tensor as it was: dropout_(x, p, train=False).
_INERT_WHEN_NOT_TRAINING = frozenset(
    {"aten::dropout_", "aten::feature_dropout_", "aten::alpha_dropout_", "aten::feature_alpha_dropout_"}
)


def is_inert_in_place(node: torch.fx.Node) -> bool:
    """An in-place op whose node leaves its input's values unchanged: detach_ (autograd only),
    dropout with train=False or p=0."""
    target = node.target
    if isinstance(target, torch._ops.OpOverload) and target.name() == "aten::detach_":
        return True
    if not isinstance(target, torch._ops.OpOverload) or target.name() not in _INERT_WHEN_NOT_TRAINING:
        return False
    args = list(node.args) + [None, None]
    p = node.kwargs.get("p", args[1])
    train = node.kwargs.get("train", args[2])
    return train is False or p == 0


# Higher-order ops whose results are new tensors. The others (subgraph wrappers such as
# wrap_with_set_grad_enabled or invoke_subgraph) may return views of their operands.
_FRESH_HIGHER_ORDER = frozenset(
    op
    for op in (
        getattr(torch.ops.higher_order, name, None) for name in ("cond", "while_loop", "scan", "map_impl")
    )
    if op is not None
)


def _aliases(node: torch.fx.Node) -> bool:
    """Whether ``node``'s result may alias a tensor argument (views, in-place, out= variants)."""
    target = node.target
    if isinstance(target, torch._ops.OpOverload):
        return any(r.alias_info is not None for r in target._schema.returns)
    if target is operator.getitem:
        # An item of a result tuple: a split/unbind piece is a view, a topk value is not.
        container = node.args[0]
        return isinstance(container, torch.fx.Node) and container.op == "call_function" and _aliases(container)
    if isinstance(target, torch._ops.HigherOrderOperator):
        return target not in _FRESH_HIGHER_ORDER
    return False  # SymInt arithmetic and other Python callables make no tensors


def _creates_tensor(node: torch.fx.Node) -> bool:
    """Whether ``node``'s result is a new tensor: a non-aliasing op, or a ``to`` that converts
    (``x.float()`` aliases ``x`` only when ``x`` is float already)."""
    if not _aliases(node):
        return True
    if isinstance(node.target, torch._ops.OpOverload) and node.target._schema.name == "aten::to":
        result = node.meta.get("val")
        source = arg_example(node)
        return isinstance(result, torch.Tensor) and isinstance(source, torch.Tensor) and result.dtype != source.dtype
    return False


def _mutates_self(target: torch._ops.OpOverload) -> bool:
    """``<op>_(Tensor(a!) self, ...) -> Tensor(a!)``: writes its first argument and returns it."""
    schema = target._schema
    if not schema.arguments or len(schema.returns) != 1:
        return False
    written, returned = schema.arguments[0].alias_info, schema.returns[0].alias_info
    return bool(written and written.is_write and returned and returned.is_write)


def _functional(target: Any) -> torch._ops.OpOverload | None:
    if not isinstance(target, torch._ops.OpOverload) or target.namespace != "aten" or not _mutates_self(target):
        return None
    name = target._schema.name.split("::")[-1]
    if not name.endswith("_") or name.endswith("__"):
        return None
    packet = getattr(torch.ops.aten, name[:-1], None)
    if packet is None:
        return None
    # The overload taking the same arguments: same-named overloads can differ (pow_.Scalar takes
    # an exponent, pow.Scalar a base), and ldexp_ is no in-place ldexp.
    wanted = _argument_signature(target)
    for overload_name in [target._overloadname, *packet.overloads()]:
        functional = getattr(packet, overload_name, None)
        if functional is not None and not functional._schema.is_mutable and _argument_signature(functional) == wanted:
            return functional
    return None


def _argument_signature(target: torch._ops.OpOverload) -> list[tuple[str, str, bool]]:
    return [(a.name, str(a.type), a.kwarg_only) for a in target._schema.arguments]


def same_tensor(node: torch.fx.Node) -> list[torch.fx.Node] | None:
    """The FX nodes standing for the tensor ``node`` mutates: the node that created it, then the
    earlier in-place ops on it (FX refers to a mutated tensor by the latest of them). None if the
    tensor may be observed through an alias, or comes from outside the graph."""
    chain: list[torch.fx.Node] = []
    current = node.args[0] if node.args else None
    while isinstance(current, torch.fx.Node) and current.op == "call_function" and _functional(current.target):
        chain.append(current)
        current = current.args[0] if current.args else None
    # A view (``t.to(device)``, a transpose...) of a tensor nothing else uses: writing through it
    # changes a base no later node reads, so the view itself can be rebound.
    while (
        isinstance(current, torch.fx.Node)
        and current.op == "call_function"
        and isinstance(current.target, torch._ops.OpOverload)
        and not _creates_tensor(current)
        and current.args
        and isinstance(current.args[0], torch.fx.Node)
        and len(current.args[0].users) == 1
    ):
        chain.append(current)
        base = current.args[0]
        if base.op == "call_function" and _creates_tensor(base):
            return _unobserved(chain[::-1], node)
        current = base
    if not isinstance(current, torch.fx.Node) or current.op != "call_function" or not _creates_tensor(current):
        return None
    chain.append(current)
    return _unobserved(chain[::-1], node)


def _unobserved(chain: list[torch.fx.Node], node: torch.fx.Node) -> list[torch.fx.Node] | None:
    """``chain`` if no user of its nodes could see the tensor change other than through them."""
    members = set(chain) | {node}
    for member in chain:
        for user in member.users:
            if user in members or user.op == "output":
                continue
            if isinstance(user.target, torch._ops.OpOverload) and _mutates_self(user.target) and user.args[0] is member:
                continue  # a later in-place update of the same tensor: checked on its own
            if user.op != "call_function" or _aliases(user):
                return None
    return chain


def rebinding(node: torch.fx.Node, table: Any) -> tuple[torch._ops.OpOverload, list[torch.fx.Node]] | None:
    """For an in-place ``node`` whose mutation can be a rebinding: the functional overload to
    translate it with (one ``table`` translates for this node) and the FX nodes to rebind."""
    functional = _functional(node.target)
    if functional is None or not table.has(functional, node):
        return None
    chain = same_tensor(node)
    return None if chain is None else (functional, chain)
