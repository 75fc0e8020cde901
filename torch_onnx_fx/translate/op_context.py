"""What a translation may know and do beyond its arguments: the typed translation context.

Most translations are functions of their inputs, as torchlib's are. Some need more: the example
values torch.export recorded (a result dtype, a static size, whether an input is complex), the
operator's schema names, or ONNX constructs ONNX Script cannot write inline — a ``Loop`` or
``If`` with a body graph, an initializer, a node of another domain. Those are given an
:class:`OpContext` (``@wants_context``, keyword ``ctx``), built for each node by the graph walk.
It holds facts about the node and a few builders, and no handle on the walk's state: a
translation cannot reach the FX graph, the value table or the tracer behind it.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Mapping, Protocol, Sequence

import onnx_ir as ir
import torch
from onnxscript import opset18 as op

from torch_onnx_fx.translate.tracer import GraphTracer

__all__ = ["OpContext", "Subgraph", "WalkState"]


class WalkState(Protocol):
    """What the builders below need of the graph walk: its tracer, symbolic dims and subgraphs.

    The walk's own context (``translate.TranslationContext``) is one; naming the protocol here
    rather than importing it keeps the walk's module, which builds an OpContext for every node
    that asks, the only one of the two that knows the other.
    """

    tracer: GraphTracer

    def dim(self, size: Any) -> int | str | None: ...

    def cast(self, value: ir.Value, dtype: ir.DataType) -> ir.Value: ...

    def make_input(self, example: Any, hint: str = "arg") -> ir.Value: ...

    def new_subgraph(self, name: str) -> WalkState: ...

    def inline(self, module: torch.fx.GraphModule, inputs: Sequence[Any]) -> list[Any]: ...

    def finish(self, outputs: Sequence[Any], examples: Sequence[Any]) -> ir.Graph: ...


@dataclasses.dataclass(frozen=True)
class Subgraph:
    """An ONNX graph under construction (a Loop body, an If branch), nested in the current one.

    Values of the enclosing graphs stay visible inside it, as ONNX subgraphs capture outer values.
    """

    _walk: WalkState = dataclasses.field(repr=False)

    def input(self, example: Any, hint: str = "arg") -> ir.Value:
        """A new input of the subgraph, typed like the FX example value ``example``."""
        return self._walk.make_input(example, hint)

    def typed_input(self, hint: str, dtype: ir.DataType, shape: ir.Shape | None) -> ir.Value:
        """A new input of the subgraph of an ONNX type (a loop counter, a carried state)."""
        value = self._walk.make_input(None, hint)
        value.type, value.shape = ir.TensorType(dtype), shape
        return value

    def building(self) -> Any:
        """A context manager under which ``op.*`` calls record into this subgraph."""
        return self._walk.tracer.active()

    def inline(self, module: torch.fx.GraphModule, inputs: Sequence[Any]) -> list[Any]:
        """Translate ``module``'s FX graph into this subgraph, its placeholders bound to ``inputs``."""
        return self._walk.inline(module, inputs)

    def finish(self, outputs: Sequence[Any], examples: Sequence[Any]) -> ir.Graph:
        """Make ``outputs`` the subgraph's outputs (copied in where made outside) and return it."""
        return self._walk.finish(outputs, examples)


@dataclasses.dataclass(frozen=True)
class OpContext:
    """One FX node's facts and the builders its translation may use."""

    target: str
    """The qualified operator name, ``aten::prod.dim_int``."""
    name: str
    """The FX node's name, for values that should carry it (initializers)."""
    inputs: tuple[Any, ...]
    """Example values of the node's positional arguments (fake tensors, SymInts, Python values)."""
    keyword_inputs: Mapping[str, Any]
    """Example values of its keyword arguments."""
    result: Any
    """Example value of its result."""
    argument_names: tuple[str, ...]
    """The schema's argument names, in order (empty for operators without a schema)."""
    results_read: frozenset[int] | None
    """For an operator returning several tensors, the positions the model reads; None when it
    reads the result as a whole (or returns it). A translation that cannot compute one of its
    results exactly refuses only when that result is read, and may return None for it otherwise."""
    _walk: WalkState = dataclasses.field(repr=False)

    @property
    def opset(self) -> int:
        return self._walk.tracer.opset_version

    def arguments(self, args: Sequence[Any], kwargs: Mapping[str, Any]) -> dict[str, Any]:
        """The translated arguments by schema name (positional and keyword together)."""
        return {**dict(zip(self.argument_names, args)), **kwargs}

    def dim(self, size: Any) -> int | str | None:
        """An ONNX dim (int or readable symbolic name) for a torch size entry."""
        return self._walk.dim(size)

    # -- nodes ONNX Script cannot write inline -------------------------------------------------

    def op(
        self,
        op_type: str,
        inputs: Sequence[ir.Value | None],
        attributes: Mapping[str, Any] | None = None,
        *,
        domain: str = "",
        num_outputs: int = 1,
        infer: bool = True,
    ) -> Any:
        """One node (graph attributes, other domains, ``num_outputs`` known only here); its
        output, or a tuple of them."""
        return self._walk.tracer.op(op_type, inputs, attributes, domain=domain, num_outputs=num_outputs, infer=infer)

    def constant(self, value: Any, dtype: ir.DataType | None = None) -> ir.Value:
        return self._walk.tracer.constant(value, dtype)

    def cast(self, value: ir.Value, dtype: ir.DataType) -> ir.Value:
        return self._walk.cast(value, dtype)

    def import_opset(self, domain: str, version: int) -> None:
        self._walk.tracer.opset_imports.setdefault(domain, version)

    def initializer(self, value: ir.Value) -> ir.Value:
        self._walk.tracer.graph.register_initializer(value)
        return value

    # -- subgraphs -----------------------------------------------------------------------------

    def subgraph(self, name: str) -> Subgraph:
        return Subgraph(self._walk.new_subgraph(name))

    def inline(self, module: torch.fx.GraphModule, inputs: Sequence[Any]) -> list[Any]:
        """Translate ``module``'s FX graph here, its placeholders bound to ``inputs``."""
        return self._walk.inline(module, inputs)

    def loop(
        self,
        count: ir.Value | int,
        states: Sequence[ir.Value],
        body: Callable[..., Sequence[ir.Value]],
        *,
        until: Callable[..., ir.Value] | None = None,
        scanned: int = 0,
    ) -> list[ir.Value]:
        """An ONNX ``Loop`` of ``count`` iterations carrying ``states``: ``body(i, *states)``
        builds one iteration and returns the new states, which keep their dtypes and shapes,
        followed by ``scanned`` values that the loop stacks along a new first axis, one row per
        iteration (returned after the final states); ``until(*new_states)``, if given, is a bool
        scalar ending the loop once true."""
        sub = self.subgraph("loop")
        iteration = sub.typed_input("i", ir.DataType.INT64, ir.Shape([]))
        keep_going = sub.typed_input("cond", ir.DataType.BOOL, ir.Shape([]))
        carried = [sub.typed_input("state", s.dtype, s.shape) for s in states]
        with sub.building():
            produced = list(body(iteration, *carried))
            updated = produced[: len(produced) - scanned]
            go_on = op.Not(until(*updated)) if until is not None else keep_going
        graph = sub.finish([go_on, *produced], [None] * (1 + len(produced)))
        rows = count if isinstance(count, int) else None
        if isinstance(count, int):
            count = self.constant(count, ir.DataType.INT64)
        always = self.constant(True)
        results = self.op("Loop", [count, always, *states], {"body": ir.AttrGraph("body", graph)}, num_outputs=len(produced), infer=False)
        results = [results] if isinstance(results, ir.Value) else list(results)
        for result, state in zip(results, states):
            result.type, result.shape = ir.TensorType(state.dtype), state.shape
        for result, row in zip(results[len(states):], produced[len(states):]):
            result.type = ir.TensorType(row.dtype)
            result.shape = ir.Shape([rows, *row.shape]) if row.shape is not None else None
        return results
