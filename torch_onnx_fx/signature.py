"""Signature: one record of what an ExportedProgram takes and returns, built once after capture.

torch.export's ``graph_signature`` mixes what the user passes and gets back with what the program
needs internally: lifted parameters, buffers and constants among the inputs; updated buffers and
mutated inputs ahead of the user's outputs; effect tokens on both sides. Every later stage needs
the user's view of it — translate (which outputs the ONNX graph has), annotate (input/output
kinds), ``ONNXProgram`` (how ``program(*args)`` maps onto graph inputs and what it returns) and
verification (which eager values to compare). Reading the specs in each of them is how the
stages came to disagree; they read this record instead.

The ONNX graph's outputs are the user's outputs, in the user's order, without ``None`` (as
torch.onnx's). State updates — new values of mutated buffers, parameters (``nn.Embedding(max_norm=)``
renormalizes its weight) and inputs — are appended after them only when the caller opts in
(``export(..., state_outputs=True)``).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping, Sequence

import torch
import torch.utils._pytree as pytree
from torch.export import graph_signature as gs

from torch_onnx_fx.errors import InputMismatchError, UnsupportedArgumentError

__all__ = ["ProgramSignature", "OutputEntry", "flatten_user_inputs", "lifted_tensor"]

_LIFTED_KINDS = (gs.InputKind.PARAMETER, gs.InputKind.BUFFER, gs.InputKind.CONSTANT_TENSOR)
_STATE_KINDS = (gs.OutputKind.BUFFER_MUTATION, gs.OutputKind.PARAMETER_MUTATION, gs.OutputKind.USER_INPUT_MUTATION)


@dataclasses.dataclass(frozen=True)
class OutputEntry:
    """One output of the program as the user sees it.

    ``arg`` is the FX output argument (a node, or a Python constant such as ``None`` or an int);
    ``kind`` the spec's kind; ``target`` the mutated buffer or input name for state updates.
    """

    arg: Any
    kind: gs.OutputKind
    target: str | None = None

    @property
    def example(self) -> Any:
        return self.arg.meta.get("val") if isinstance(self.arg, torch.fx.Node) else self.arg

    @property
    def is_complex(self) -> bool:
        example = self.example
        return isinstance(example, torch.Tensor) and example.is_complex()


@dataclasses.dataclass(frozen=True)
class ProgramSignature:
    """The user's view of a program's inputs and outputs, and where the rest went."""

    # (placeholder, spec) for every user input, constant ones included, in call order.
    user_inputs: tuple[tuple[torch.fx.Node, gs.InputSpec], ...]
    # (placeholder, spec) for lifted parameters, buffers and constant tensors.
    lifted: tuple[tuple[torch.fx.Node, gs.InputSpec], ...]
    # Placeholders of effect tokens.
    tokens: tuple[torch.fx.Node, ...]
    # The user's outputs in order (None included: the graph leaves them out).
    user_outputs: tuple[OutputEntry, ...]
    # New values of mutated buffers, parameters and inputs.
    state_updates: tuple[OutputEntry, ...]
    in_spec: Any = None

    @classmethod
    def of(cls, program: torch.export.ExportedProgram) -> ProgramSignature:
        placeholders = [n for n in program.graph.nodes if n.op == "placeholder"]
        specs = program.graph_signature.input_specs
        if len(placeholders) != len(specs):
            raise UnsupportedArgumentError("The ExportedProgram's placeholders do not match its input specs.")
        user_inputs, lifted, tokens = [], [], []
        for node, spec in zip(placeholders, specs):
            if spec.kind == gs.InputKind.USER_INPUT:
                user_inputs.append((node, spec))
            elif spec.kind in _LIFTED_KINDS:
                lifted.append((node, spec))
            elif spec.kind == gs.InputKind.TOKEN:
                tokens.append(node)
            else:
                raise UnsupportedArgumentError(
                    f"Input {node.name} of kind {spec.kind.name} cannot be exported to ONNX "
                    "(custom objects have no ONNX representation)."
                )
        output_node = next(n for n in reversed(program.graph.nodes) if n.op == "output")
        user_outputs, state_updates = [], []
        for arg, spec in zip(output_node.args[0], program.graph_signature.output_specs, strict=True):
            if spec.kind == gs.OutputKind.TOKEN:
                continue
            entry = OutputEntry(arg, spec.kind, spec.target)
            (state_updates if spec.kind in _STATE_KINDS else user_outputs).append(entry)
        return cls(
            tuple(user_inputs), tuple(lifted), tuple(tokens), tuple(user_outputs), tuple(state_updates),
            program.call_spec.in_spec,
        )

    @property
    def state_names(self) -> list[str]:
        """State-dict names of the lifted parameters and persistent buffers: the weights a user
        can replace (``apply_weights``), which must stay initializers of their own."""
        return [
            spec.target for _, spec in self.lifted
            if spec.target is not None and (
                spec.kind == gs.InputKind.PARAMETER or (spec.kind == gs.InputKind.BUFFER and spec.persistent is not False)
            )
        ]

    # -- inputs -------------------------------------------------------------------------------

    @property
    def tensor_inputs(self) -> list[tuple[torch.fx.Node, gs.InputSpec]]:
        """User inputs that become ONNX graph inputs (constant arguments are baked in)."""
        return [(n, s) for n, s in self.user_inputs if not isinstance(s.arg, gs.ConstantArgument)]

    @property
    def keyword_names(self) -> list[str]:
        """The keyword arguments the program was exported with, in its order."""
        return _keyword_order(self.in_spec)

    def flatten(self, args: Sequence[Any], kwargs: Mapping[str, Any] | None) -> list[Any]:
        """``(args, kwargs)`` flattened in the order of the user inputs, one entry each.

        Arguments left out of the call that the export baked in as constants (``use_cache=False``,
        ``mask=None``) take their baked values: the graph has no input for them."""
        args, kwargs = self.with_baked_constants(args, kwargs)
        _check_containers(self.in_spec, args, kwargs)
        return flatten_user_inputs(self.in_spec, args, kwargs)

    def with_baked_constants(self, args: Sequence[Any], kwargs: Mapping[str, Any] | None) -> tuple[Sequence[Any], Mapping[str, Any] | None]:
        """``(args, kwargs)`` with the left-out arguments the export baked in as constants filled in."""
        spec = self.in_spec
        if spec is None or spec.num_children != 2:
            return args, kwargs
        positional, keywords = spec.child(0), spec.child(1)
        starts, start = [], 0
        for child in (*positional.children(), *keywords.children()):
            starts.append((start, child))
            start += child.num_leaves

        def baked(index: int) -> tuple[bool, Any]:
            first, child = starts[index]
            entries = self.user_inputs[first:first + child.num_leaves]
            if not all(isinstance(entry.arg, gs.ConstantArgument) for _, entry in entries):
                return False, None
            return True, pytree.tree_unflatten([entry.arg.value for _, entry in entries], child)

        args = list(args)
        for index in range(len(args), positional.num_children):
            found, value = baked(index)
            if not found:
                break  # a tensor argument is missing: the count check names it
            args.append(value)
        kwargs = dict(kwargs or {})
        for offset, name in enumerate(keywords.context or []):
            if name not in kwargs:
                found, value = baked(positional.num_children + offset)
                if found:
                    kwargs[name] = value
        return args, kwargs

    def graph_feeds(self, args: Sequence[Any], kwargs: Mapping[str, Any] | None) -> list[Any]:
        """The values for the ONNX graph inputs: ``flatten`` less the constant arguments."""
        flat = self.flatten(args, kwargs)
        if len(flat) != len(self.user_inputs):
            tensors = [node.name for node, spec in self.user_inputs if not isinstance(spec.arg, gs.ConstantArgument)]
            constants = [node.name for node, spec in self.user_inputs if isinstance(spec.arg, gs.ConstantArgument)]
            baked = f" (and the constant(s) {constants} baked in at export, which may be left out)" if constants else ""
            raise InputMismatchError(
                f"The program takes the graph input(s) {tensors}{baked}; the call gave {len(flat)} value(s) "
                f"after flattening, {len(self.user_inputs)} expected. Call it with the arguments the model "
                "was exported with."
            )
        for position, (value, (node, spec)) in enumerate(zip(flat, self.user_inputs)):
            # A non-tensor argument was baked into the graph: another value cannot take effect.
            if isinstance(spec.arg, gs.ConstantArgument) and not _same_constant(value, spec.arg.value):
                raise InputMismatchError(
                    f"input {position} ('{node.name}') was exported as the constant {spec.arg.value!r} and is "
                    f"part of the graph; got {value!r}. Export again with that value to change it."
                )
        return [v for v, (_, s) in zip(flat, self.user_inputs) if not isinstance(s.arg, gs.ConstantArgument)]

    def placeholder_values(self, program: torch.export.ExportedProgram, args: Sequence[Any], kwargs: Mapping[str, Any] | None) -> dict[torch.fx.Node, Any]:
        """What every placeholder holds for a call: the user's values, the lifted tensors, None
        for tokens (to run the FX graph itself)."""
        values: dict[torch.fx.Node, Any] = {node: None for node in self.tokens}
        values.update((node, value) for (node, _), value in zip(self.user_inputs, self.flatten(args, kwargs), strict=True))
        values.update((node, lifted_tensor(program, spec)) for node, spec in self.lifted)
        return values

    # -- outputs ------------------------------------------------------------------------------

    def graph_outputs(self, state_outputs: bool = False) -> list[OutputEntry]:
        """The entries that become ONNX graph outputs, in order."""
        entries = [e for e in self.user_outputs if e.arg is not None]
        if state_outputs:
            entries += self.state_updates
        return entries


def _same_constant(given: Any, baked: Any) -> bool:
    try:
        return bool(given == baked) and isinstance(given, bool) == isinstance(baked, bool)
    except Exception:  # noqa: BLE001 - values that cannot be compared are not the same
        return given is baked


def _keyword_order(in_spec: Any) -> list[str]:
    """The keyword names of an ``(args, kwargs)`` spec. ``child(i)``, not ``children_specs``:
    torch warns on every read of the latter (deprecated), which every keyword export did."""
    if in_spec is None or in_spec.num_children != 2:
        return []
    return list(in_spec.child(1).context or [])


_PLAIN_CONTAINERS = (list, tuple, dict)


def _check_containers(in_spec: Any, args: Sequence[Any], kwargs: Mapping[str, Any] | None) -> None:
    """Refuse an argument of a registered container type (a transformers cache) whose structure
    differs from the export's: what its flattening keeps beside the tensors (a sliding-window
    cache's count of tokens seen) is a constant of the graph, and another value there would be
    computed with the export's (Gemma 3's logits 0.04 off at another past length)."""
    if in_spec is None or in_spec.num_children != 2:
        return
    positional, keywords = in_spec.child(0), in_spec.child(1)
    named = [(f"argument {i}", value, positional.child(i)) for i, value in enumerate(args) if i < positional.num_children]
    order = _keyword_order(in_spec)
    named += [(repr(name), kwargs[name], keywords.child(order.index(name))) for name in (kwargs or {}) if name in order]
    for label, value, expected in named:
        if value is None or isinstance(value, (torch.Tensor, *_PLAIN_CONTAINERS)) or type(value) not in pytree.SUPPORTED_NODES:
            continue
        given = pytree.tree_structure(value)
        if given != expected:
            raise InputMismatchError(
                f"Input {label} ({type(value).__name__}) differs in structure from the one the model was exported "
                f"with: {_spec_text(given)} against {_spec_text(expected)}. What its flattening keeps beside the "
                "tensors is a constant of the exported graph; export with an example that has these values."
            )


def _spec_text(spec: Any, limit: int = 300) -> str:
    text = str(spec)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def flatten_user_inputs(in_spec: Any, args: Sequence[Any], kwargs: Mapping[str, Any] | None) -> list[Any]:
    """Flatten ``(args, kwargs)`` as the program's input spec orders them.

    torch.export orders keyword arguments as its input spec records them, which need not be the
    order the caller wrote them in.
    """
    kwargs = dict(kwargs or {})
    if in_spec is not None and kwargs and in_spec.num_children == 2:
        order = _keyword_order(in_spec)
        extra = [k for k in kwargs if k not in order]
        if extra:
            raise InputMismatchError(
                f"Unexpected keyword arguments {extra}; the model was exported with {order}."
            )
        kwargs = {k: kwargs[k] for k in order if k in kwargs}
    return pytree.tree_leaves((tuple(args), kwargs), is_leaf=lambda x: x is None)


def lifted_tensor(program: torch.export.ExportedProgram, spec: gs.InputSpec) -> torch.Tensor | None:
    """The tensor a lifted parameter, buffer or constant stands for (non-persistent buffers live
    among the constants)."""
    target = spec.target
    if spec.kind == gs.InputKind.PARAMETER:
        return program.state_dict[target]
    if spec.kind == gs.InputKind.BUFFER:
        if target in program.state_dict:
            return program.state_dict[target]
        return program.constants.get(target)
    if spec.kind == gs.InputKind.CONSTANT_TENSOR:
        found = program.constants.get(target)
        return found if isinstance(found, torch.Tensor) else None
    return None
