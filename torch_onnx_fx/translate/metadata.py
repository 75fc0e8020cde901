"""Annotate: carry torch.export's knowledge into ONNX metadata.

Keys follow the PyTorch ONNX exporter's so tools built for it (Netron, scripts) keep working:

* nodes: ``namespace``, ``pkg.torch.onnx.class_hierarchy``, ``pkg.torch.onnx.fx_node``,
  ``pkg.torch.onnx.name_scopes``, ``pkg.torch.onnx.stack_trace``;
* graph: ``pkg.torch.export.ExportedProgram.graph_signature`` and ``…range_constraints``;
* inputs: ``pkg.torch.export.graph_signature.InputSpec.kind`` / ``.persistent``;
* outputs: ``pkg.torch.export.graph_signature.OutputSpec.kind``;
* values renamed by ``input_names``/``output_names``: ``pkg.torch.onnx.original_node_name``.

Node metadata is computed per FX node (once) and stamped on every ONNX node made from it.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Sequence

import onnx_ir as ir
import torch
from torch.export import graph_signature as gs

from torch_onnx_fx._state import PACKAGE_DIR

if TYPE_CHECKING:
    from torch_onnx_fx.signature import OutputEntry

__all__ = [
    "class_name", "node_metadata", "module_stack", "scope_metadata", "source_line", "annotate_graph", "annotate_outputs",
    "ORIGINAL_NAME_KEY", "INPUT_KIND_KEY", "MODULE_STACK_KEY", "QUANTIZED_RANGE_KEY", "INTEGER_OFFSET_KEY",
]

ORIGINAL_NAME_KEY = "pkg.torch.onnx.original_node_name"
INPUT_KIND_KEY = "pkg.torch.export.graph_signature.InputSpec.kind"
# On a DequantizeLinear: the integers' declared "min,max" (torchao's quant_min/quant_max), which
# a weight exported without data cannot show.
QUANTIZED_RANGE_KEY = "pkg.torch_onnx_fx.quantized_range"
# On a value: the integers stand this much above the model's own (an int8 activation stored as
# uint8, runtime/unsigned_activations), for whoever compares them with PyTorch's (verification).
INTEGER_OFFSET_KEY = "pkg.torch_onnx_fx.integer_offset"
_INPUT_PERSISTENT_KEY = "pkg.torch.export.graph_signature.InputSpec.persistent"
_OUTPUT_KIND_KEY = "pkg.torch.export.graph_signature.OutputSpec.kind"
# In ``ir.Node.meta`` (not saved): the full module paths, which the saved name scopes shorten to
# their last component and so cannot tell ``blocks.0`` from ``layers.0``.
MODULE_STACK_KEY = "torch_onnx_fx.module_stack"


def class_name(cls: type) -> str:
    """A module class as node metadata names it, and as ``export_modules_as_functions`` matches it."""
    return f"{cls.__module__}.{cls.__qualname__}"


def _module_stack(node: torch.fx.Node) -> list[tuple[str, str]]:
    stack = node.meta.get("nn_module_stack") or {}
    entries = []
    for key, value in stack.items():
        if key.startswith("_empty_nn_module_stack"):
            continue
        path, cls = value
        cls_name = cls if isinstance(cls, str) else class_name(cls)
        entries.append((path, cls_name))
    return entries


def module_stack(node: torch.fx.Node) -> tuple[tuple[str, str], ...]:
    """``(path, qualified class name)`` of each module the node was traced in, outermost first."""
    return tuple(_module_stack(node))


def _scopes(stack: Sequence[tuple[str, str]]) -> list[str]:
    return [path.rpartition(".")[2] for path, _ in stack]


def scope_metadata(stack: Sequence[tuple[str, str]]) -> dict[str, str]:
    """``namespace`` and class hierarchy of a module instance itself (the call of its function,
    ``optimize/module_functions``), in the form its nodes' metadata has them."""
    return {
        "namespace": "/".join(f"{scope}: {cls}" for scope, (_, cls) in zip(_scopes(stack), stack)),
        "pkg.torch.onnx.class_hierarchy": repr([cls for _, cls in stack]),
    }


def node_metadata(node: torch.fx.Node, stack: Sequence[tuple[str, str]]) -> dict[str, str]:
    """The metadata every ONNX node translated from ``node`` carries; ``stack`` is its
    :func:`module_stack`."""
    target = node.target
    target_name = target.name() if isinstance(target, torch._ops.OpOverload) else getattr(target, "__name__", str(target))
    meta = scope_metadata(stack)
    meta["namespace"] = "/".join(filter(None, [meta["namespace"], f"{node.name}: {target_name}"]))
    meta["pkg.torch.onnx.fx_node"] = node.format_node() or str(node)
    meta["pkg.torch.onnx.name_scopes"] = repr([*_scopes(stack), node.name])
    trace = node.meta.get("stack_trace")
    if trace:
        meta["pkg.torch.onnx.stack_trace"] = trace
    return meta


_TORCH_DIR = os.path.dirname(torch.__file__)


def source_line(node: torch.fx.Node) -> str | None:
    """``File …, line N: code`` of the innermost frame of the user's code in the node's stack
    trace (frames inside torch, such as ``nn.Linear.forward``, are skipped), else the innermost."""
    trace = node.meta.get("stack_trace")
    if not trace:
        return None
    lines = [line.strip() for line in trace.strip().splitlines()]
    frames = [
        f"{lines[i]}: {lines[i + 1] if i + 1 < len(lines) else ''}"
        for i in range(len(lines))
        if lines[i].startswith("File ")
    ]
    if not frames:
        return None
    # The wrapper torch_onnx_fx puts around a plain function is no line of the user's.
    frames = [f for f in frames if PACKAGE_DIR not in f]
    if not frames:
        return None
    own = [f for f in frames if _TORCH_DIR not in f]
    return (own or frames)[-1]


def annotate_graph(graph: ir.Graph, program: torch.export.ExportedProgram) -> None:
    """Graph-level metadata and input kinds (output kinds: :func:`annotate_outputs`)."""
    signature = program.graph_signature
    graph.metadata_props["pkg.torch.export.ExportedProgram.graph_signature"] = str(signature)
    graph.metadata_props["pkg.torch.export.ExportedProgram.range_constraints"] = str(program.range_constraints)
    by_name: dict[str, ir.Value] = {}
    for value in [*graph.inputs, *graph.initializers.values()]:
        by_name.setdefault(value.meta.get("fx_name", value.name), value)
    for spec in signature.input_specs:
        arg_name = getattr(spec.arg, "name", None)
        value = by_name.get(arg_name)
        if value is None:
            continue
        value.metadata_props[INPUT_KIND_KEY] = spec.kind.name
        if spec.kind == gs.InputKind.BUFFER:
            value.metadata_props[_INPUT_PERSISTENT_KEY] = str(bool(spec.persistent))



def annotate_outputs(graph: ir.Graph, outputs: Sequence[OutputEntry]) -> None:
    """Output kinds, stamped last: the optimizer may replace an output value (a folded constant)
    and the metadata with it. An input passed through as an output keeps its input kind."""
    for value, entry in zip(graph.outputs, outputs, strict=True):
        if not value.is_graph_input():
            value.metadata_props[_OUTPUT_KIND_KEY] = entry.kind.name


def describe_value(value: Any) -> str:
    """Short ``dtype[shape]`` description of an FX meta value for error messages."""
    if isinstance(value, torch.Tensor):
        return f"{str(value.dtype).replace('torch.', '')}{list(value.shape)}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(describe_value(v) for v in value) + "]"
    return repr(value)
