"""Naming: the names users asked for, given to graph inputs, outputs and dims.

``input_names``/``output_names`` rename the graph's inputs and outputs in order (``input_names``
names the *flattened* tensor inputs, and — legacy TorchScript semantics — goes on to name
parameters and buffers); ``dynamic_axes`` entries for outputs name output dims; names the user
gave dims in ``dynamic_shapes`` replace torch.export's symbols (``s0``…) everywhere.
"""

from __future__ import annotations

import logging
import warnings
from typing import Any, Mapping, Sequence

import onnx_ir as ir
import torch

from torch_onnx_fx.translate import metadata
from torch_onnx_fx.errors import UnsupportedArgumentError
from torch_onnx_fx.optimize.distinct_outputs import output_copy
from torch_onnx_fx.program.path_names import apply_path_names
from torch_onnx_fx.signature import ProgramSignature

__all__ = ["name_interface", "rename_inputs", "rename_outputs", "apply_output_axes", "symbol_names"]

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
