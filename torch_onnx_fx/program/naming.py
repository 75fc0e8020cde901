"""Naming: the names users asked for, given to graph inputs, outputs and dims.

``input_names``/``output_names`` rename the graph's inputs and outputs in order (``input_names``
names the *flattened* tensor inputs, and — legacy TorchScript semantics — goes on to name
parameters and buffers); ``dynamic_axes`` entries for outputs name output dims; names the user
gave dims in ``dynamic_shapes`` replace torch.export's symbols (``s0``…) everywhere.
"""

from __future__ import annotations

import logging
import re
import warnings
from typing import Any, Mapping, Sequence

import onnx_ir as ir
import torch

from torch_onnx_fx.translate import metadata
from torch_onnx_fx.errors import ArgumentTypeError, UnsupportedArgumentError
from torch_onnx_fx.optimize.distinct_outputs import output_copy
from torch_onnx_fx.program.path_names import apply_path_names
from torch_onnx_fx.signature import ProgramSignature

__all__ = ["name_interface", "rename_inputs", "rename_outputs", "apply_output_axes", "symbol_names", "rename_dims", "renamed_text"]

logger = logging.getLogger(__name__)


def _rename(values: Sequence[ir.Value], names: Sequence[str], kind: str, taken: set[str]) -> None:
    if len(names) > len(values):
        raise UnsupportedArgumentError(
            f"{len(names)} {kind}_names were given but the model has {len(values)} {kind}s "
            f"({[v.name for v in values]})."
        )
    if len(set(names)) != len(names):
        raise UnsupportedArgumentError(f"{kind}_names must be unique, got {list(names)}.")
    for value, name in zip(values, names):
        if value.name == name:
            continue
        if name in taken:
            raise UnsupportedArgumentError(f"{kind} name {name!r} is already used by another value in the graph.")
        value.metadata_props[metadata.ORIGINAL_NAME_KEY] = value.name or ""
        value.name = name


def _taken(graph: ir.Graph) -> set[str]:
    return {v.name for n in graph for v in n.outputs} | set(graph.initializers) | {v.name for v in graph.inputs}


def rename_inputs(graph: ir.Graph, names: Sequence[str] | None, signature: ProgramSignature) -> None:
    """Name user inputs, then (legacy TorchScript semantics) parameters and buffers in order."""
    if not names:
        return
    taken = _taken(graph)
    user_inputs = list(graph.inputs)
    _rename(user_inputs, list(names[: len(user_inputs)]), "input", taken - {v.name for v in user_inputs})
    extra = list(names[len(user_inputs):])
    if not extra:
        return
    lifted = [
        graph.initializers[spec.target]
        for _, spec in signature.lifted
        if spec.kind.name in ("PARAMETER", "BUFFER") and spec.target in graph.initializers
    ]
    if len(extra) > len(lifted):
        raise UnsupportedArgumentError(
            f"{len(names)} input_names were given but the model has {len(user_inputs)} inputs and "
            f"{len(lifted)} parameters/buffers to name."
        )
    _rename(lifted[: len(extra)], extra, "input", taken - {v.name for v in lifted})


def rename_outputs(graph: ir.Graph, names: Sequence[str] | None) -> None:
    """Name the graph outputs in order. An output that is a graph input passed through gets an
    Identity first, so naming the output does not rename the input."""
    if not names:
        return
    for i, value in enumerate(list(graph.outputs)[: len(names)]):
        if value.is_graph_input() and value.name != names[i]:
            output_copy(graph, i, f"{value.name}__output")
    taken = _taken(graph) - {v.name for v in graph.outputs}
    _rename(list(graph.outputs), list(names), "output", taken)


def apply_output_axes(graph: ir.Graph, dynamic_axes: Mapping[str, Any], input_names: Sequence[str]) -> None:
    """Give output dims the names the legacy ``dynamic_axes`` asked for."""
    outputs = {v.name: v for v in graph.outputs}
    for key, axes in dynamic_axes.items():
        value = outputs.get(key)
        if value is None or value.shape is None or value.is_graph_input():
            if key not in outputs and key not in input_names:
                logger.debug("dynamic_axes key %s matches no input or output", key)
            continue
        # List form: automatic names, as the TorchScript exporter wrote them (``sum_dynamic_axes_1``).
        named = axes.items() if isinstance(axes, Mapping) else ((a, f"{key}_dynamic_axes_{i + 1}") for i, a in enumerate(axes))
        dims = list(value.shape)
        for axis, name in named:
            axis = int(axis)
            if not -len(dims) <= axis < len(dims):
                raise UnsupportedArgumentError(f"dynamic_axes[{key!r}]: axis {axis} out of range for rank {len(dims)}.")
            if isinstance(dims[axis], int):
                warnings.warn(
                    f"dynamic_axes[{key!r}] marks axis {axis} dynamic but the exported model computes "
                    f"a static size {dims[axis]} there; it is left static.",
                    stacklevel=4,
                )
                continue
            if name is not None:
                dims[axis] = str(name)
        value.shape = ir.Shape(dims)


def name_interface(
    graph: ir.Graph,
    signature: ProgramSignature,
    *,
    input_names: Sequence[str] | None,
    output_names: Sequence[str] | None,
    dynamic_axes: Mapping[str, Any] | None,
    state_outputs: bool,
    call: tuple[torch.export.ExportedProgram, Any, Sequence[Any], Mapping[str, Any]] | None = None,
) -> None:
    """The graph's interface as the user asked for it: nested inputs and structured outputs named
    by their paths (``call``: the program, model and arguments), then inputs and outputs renamed
    as asked, output dims named from ``dynamic_axes``, and each output's metadata saying what it
    stands for."""
    if call is not None:
        apply_path_names(graph, signature, *call)
    rename_inputs(graph, input_names, signature)
    rename_outputs(graph, output_names)
    if dynamic_axes is not None:
        apply_output_axes(graph, dynamic_axes, input_names or [])
    metadata.annotate_outputs(graph, signature.graph_outputs(state_outputs))


def symbol_names(signature: ProgramSignature, names: Any, args: Sequence[Any], kwargs: Mapping[str, Any]) -> dict[str, str]:
    """Map torch.export's symbols to the names the user gave their dims.

    Two axes torch.export proved equal share one symbol; if the user named them differently the
    first name is kept and a warning says so (as torch.onnx warns).
    """
    if names is None or not names.by_tensor:
        return {}
    flat = signature.flatten(args, kwargs)
    mapping: dict[str, str] = {}
    for (node, _), example in zip(signature.user_inputs, flat):
        axes = names.by_tensor.get(id(example)) if isinstance(example, torch.Tensor) else None
        if not axes:
            continue
        val = node.meta.get("val")
        for axis, name in axes.items():
            size = val.shape[axis] if isinstance(val, torch.Tensor) and axis < val.dim() else None
            if isinstance(size, torch.SymInt) and size.node.expr.is_Symbol:
                symbol = size.node.expr.name
                kept = mapping.setdefault(symbol, name)
                if kept != name:
                    warnings.warn(
                        f"# The axis name: {name} will not be used, since it shares the same shape "
                        f"constraints with another axis: {kept}.",
                        UserWarning,
                        stacklevel=4,
                    )
    return mapping


def _dim_mapping(mapping: Mapping[Any, Any]) -> dict[str, str]:
    if not isinstance(mapping, Mapping):
        raise ArgumentTypeError(f"rename_axes: expected a dict of old axis names to new ones, got {type(mapping).__name__}.")
    names: dict[str, str] = {}
    for old, new in mapping.items():
        key = old.value if isinstance(old, ir.SymbolicDim) else old
        if not isinstance(key, str):
            raise ArgumentTypeError(
                f"rename_axes: {old!r} is not an axis name: keys are names (str) or a graph value's "
                "ir.SymbolicDim with a name."
            )
        if not isinstance(new, str) or not new:
            raise ArgumentTypeError(f"rename_axes: the new name of {key!r} must be a non-empty str, got {new!r}.")
        names[key] = new
    return names


def _values(graph: Any) -> Any:
    """Every value of a graph or function with a shape: its inputs, initializers and node
    outputs, and the inputs of the control-flow bodies inside (their outputs are node outputs)."""
    bodies: list[Any] = []
    nodes = list(ir.traversal.RecursiveGraphIterator(graph, enter_graph=bodies.append))
    yield from graph.inputs
    yield from getattr(graph, "initializers", {}).values()
    for body in bodies:
        yield from body.inputs
    for node in nodes:
        yield from node.outputs


def renamed_text(text: str, names: Mapping[str, str]) -> str:
    """``text`` (a dim, an expression of dims, a size condition) with each whole name in ``names``
    replaced by its new name, in one pass, longest names first."""
    if not names:
        return text
    pattern = re.compile(r"(?<!\w)(" + "|".join(re.escape(n) for n in sorted(names, key=len, reverse=True)) + r")(?!\w)")
    return pattern.sub(lambda match: names[match.group(1)], text)


def rename_dims(model: ir.Model, mapping: Mapping[Any, Any]) -> dict[str, str]:
    """Rename symbolic dims everywhere in ``model`` (main graph, control-flow bodies, functions):
    a dim named by a key takes its value, and a dim written as an expression of names
    (``past + sequence``) has each whole name replaced. Returns the mapping as plain strings.

    One substitution pass, longest names first, so that a new name is never renamed again
    (``{"s1": "s2", "s2": "x"}`` swaps, not chains) and ``s11`` is not read as ``s1``."""
    names = _dim_mapping(mapping)
    if not names:
        return names

    def renamed(dim: Any) -> Any:
        if not isinstance(dim, ir.SymbolicDim) or not isinstance(dim.value, str):
            return None
        new = renamed_text(dim.value, names)
        return new if new != dim.value else None

    done: set[int] = set()  # a value met twice (an outer value a body reads) is renamed once
    for graph in [model.graph, *model.functions.values()]:
        for value in _values(graph):
            if value.shape is None or id(value) in done:
                continue
            done.add(id(value))
            dims = [renamed(dim) for dim in value.shape]
            if any(dim is not None for dim in dims):
                value.shape = ir.Shape([new if new is not None else old for new, old in zip(dims, value.shape)])
    return names
