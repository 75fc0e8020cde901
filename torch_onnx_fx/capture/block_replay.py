"""Replay traced blocks: each ``block`` call becomes a copy of the body its block traced.

The second half of tracing each repeated block once (``capture/repeated_blocks``). In the captured
graph, a traced block's body is the run of nodes between its input markers and its output
markers; a ``block`` call names the instance it stands for (its module stack), its activations and
its weights. Each call is replaced by a copy of the body with the markers' inputs bound to the
call's activations, the traced instance's weights to the call's, and the module stack moved to the
instance's path; then the markers go. The result is the graph a full trace makes, in the same
order, so every later stage (and ``export_modules_as_functions``' outlining) sees no difference.

The replay refuses (:class:`ReplayRefused`, and the capture traces the model in full instead)
when the body is not a closed run: a node of it read after the block other than through an output
marker (a value the block left somewhere), a size the body found in data (an unbacked symbol, two
instances' sizes would share its name), or a traced weight the program does not name.
"""

from __future__ import annotations

import builtins
import collections
import keyword
import logging
import operator
import re
from typing import Any, Callable

import torch
from torch.export import graph_signature as gs
from torch.fx.experimental.symbolic_shapes import free_unbacked_symbols

from torch_onnx_fx.capture import block_ops, repeated_blocks
from torch_onnx_fx.capture.repeated_blocks import RepeatedBlocks

__all__ = ["ReplayRefused", "replay_blocks"]

logger = logging.getLogger(__name__)


class ReplayRefused(Exception):
    """The captured graph cannot be completed by copying traced blocks."""


def _targets() -> dict[Any, str]:
    namespace = block_ops.ops()
    return {namespace.block_input.default: "input", namespace.block_output.default: "output", namespace.block.default: "call"}


def _moved_stack(stack: dict[str, Any], traced_path: str, call_stack: dict[str, Any], path: str) -> dict[str, Any]:
    """A body node's module stack for the instance at ``path``: the call's stack down to the
    instance, then the node's entries inside the traced instance, renamed."""
    moved = dict(call_stack)
    inside = False
    for key, (entry_path, cls) in stack.items():
        if entry_path == traced_path:
            inside = True
            continue
        if inside and entry_path.startswith(traced_path + "."):
            new_path = path + entry_path[len(traced_path):]
            moved[key.replace(traced_path, path, 1) if traced_path in key else f"{key}@{new_path}"] = (new_path, cls)
    return moved


def replay_blocks(program: torch.export.ExportedProgram, blocks: RepeatedBlocks) -> int:
    """Replace every ``block`` call of ``program`` by its body and drop the markers, in place.
    Returns the number of calls replaced."""
    targets = _targets()
    graph = program.graph
    for submodule in program.graph_module.modules():
        # A block run under torch.no_grad() inside the model's forward is traced into the
        # subgraph of a higher-order operator; its copies would have to be made there.
        if submodule is not program.graph_module and isinstance(submodule, torch.fx.GraphModule):
            if any(node.op == "call_function" and node.target in targets for node in submodule.graph.nodes):
                raise ReplayRefused("a traced block is inside a subgraph (a grad-mode or control-flow region)")
    nodes = list(graph.nodes)
    position = {node: i for i, node in enumerate(nodes)}
    inputs: dict[str, dict[int, torch.fx.Node]] = {}
    outputs: dict[str, dict[int, torch.fx.Node]] = {}
    calls: list[torch.fx.Node] = []
    for node in nodes:
        kind = targets.get(node.target) if node.op == "call_function" else None
        if kind == "call":
            calls.append(node)
        elif kind is not None:
            (inputs if kind == "input" else outputs).setdefault(node.args[1], {})[node.args[2]] = node
    if not (inputs or outputs or calls):
        return 0

    weight_nodes = _weight_nodes(program)
    renamed: dict[str, str] = {}
    bodies: dict[str, list[torch.fx.Node]] = {}
    for call in calls:
        key = call.args[0]
        traced = blocks.traced[key]
        if key not in inputs or key not in outputs:
            raise ReplayRefused(f"block {traced.path}'s markers are not in the graph")
        if key not in bodies:  # one body for every call of the block: copies leave it as it is
            bodies[key] = _body(nodes, position, inputs[key], outputs[key], traced.path)
        body = bodies[key]
        bound: dict[torch.fx.Node, Any] = {inputs[key][slot]: arg for slot, arg in enumerate(call.args[1][: traced.inputs])}
        for name, arg in zip(traced.weights, call.args[1][traced.inputs :]):
            traced_weight = weight_nodes.get(f"{traced.path}.{name}")
            if traced_weight is None:
                raise ReplayRefused(f"the program has no input for {traced.path}.{name} (a weight tied to another module's)")
            bound[traced_weight] = arg
        call_stack = call.meta.get("nn_module_stack") or {}
        path = next(reversed(call_stack.values()))[0] if call_stack else ""
        with graph.inserting_before(call):
            for node in body:
                copy = graph.node_copy(node, lambda arg: bound.get(arg, arg))
                copy.meta = dict(node.meta)
                if "nn_module_stack" in node.meta:
                    copy.meta["nn_module_stack"] = _moved_stack(node.meta["nn_module_stack"], traced.path, call_stack, path)
                bound[node] = copy
        results = [bound.get(outputs[key][slot].args[0], outputs[key][slot].args[0]) for slot in range(len(outputs[key]))]
        for user in list(call.users):
            if user.target is not operator.getitem:
                raise ReplayRefused(f"block {path}'s results are read whole")
            renamed[user.name] = results[user.args[1]].name
            user.replace_all_uses_with(results[user.args[1]])
            graph.erase_node(user)
        graph.erase_node(call)
    for marker in [*(n for group in inputs.values() for n in group.values()), *(n for group in outputs.values() for n in group.values())]:
        renamed[marker.name] = marker.args[0].name
        marker.replace_all_uses_with(marker.args[0])
        graph.erase_node(marker)
    _rename_outputs(program, _followed(renamed))
    _rename_outputs(program, _renumber(program).get)
    _drop_own_frames(graph)
    graph.lint()
    program.graph_module.recompile()
    logger.debug("replayed %d block calls", len(calls))
    return len(calls)


def _weight_nodes(program: torch.export.ExportedProgram) -> dict[str, torch.fx.Node]:
    placeholders = {node.name: node for node in program.graph.nodes if node.op == "placeholder"}
    found = {}
    for spec in program.graph_signature.input_specs:
        if spec.kind in (gs.InputKind.PARAMETER, gs.InputKind.BUFFER) and spec.target is not None:
            node = placeholders.get(spec.arg.name)
            if node is not None:
                found[spec.target] = node
    return found


def _body(
    nodes: list[torch.fx.Node], position: dict[torch.fx.Node, int], inputs: dict[int, torch.fx.Node],
    outputs: dict[int, torch.fx.Node], path: str,
) -> list[torch.fx.Node]:
    start = max(position[n] for n in inputs.values())
    end = min(position[n] for n in outputs.values())
    body = [n for n in nodes[start + 1 : end] if n.op not in ("placeholder", "output")]
    inside = set(body) | set(outputs.values())
    for node in body:
        if node.op == "get_attr" or isinstance(node.target, torch._ops.HigherOrderOperator):
            # Copies would share the traced block's subgraph module, and the full trace gives
            # each layer its own (with the sizes it computes): PhiMoE's outlining then differed.
            raise ReplayRefused(f"block {path} holds a subgraph ({node.name})")
        # Arithmetic on sizes is the exception: tracing reuses the node of a size expression it
        # met before, so a later layer may read one the block computed; its value is the same
        # wherever it is computed.
        if not isinstance(node.meta.get("val"), (torch.SymInt, torch.SymFloat, torch.SymBool)) and any(user not in inside for user in node.users):
            raise ReplayRefused(f"block {path} computes {node.name}, which is read after it")
        if node.meta.get("val") is not None and free_unbacked_symbols(node.meta["val"]):
            raise ReplayRefused(f"block {path} has sizes that depend on data ({node.name})")
    return body


_OWN_FRAME = re.compile(r'File "' + re.escape(repeated_blocks.__file__) + r'"')


_NUMBERED = re.compile(r"^(.*?)(?:_\d+)?$")


def _renumber(program: torch.export.ExportedProgram) -> dict[str, str]:
    """Number the nodes' names in graph order, as tracing does: the copies were named after every
    node the trace had named, so a full trace's ``linear_5`` (a graph output's name, when the
    output has no name of its own) would otherwise be ``linear_3``. Names are set directly: FX's
    namespace never frees a name, so renaming through it could not reuse the copies' names.
    Returns the new name of each renamed node, all renamed at once."""
    graph = program.graph
    namespace = graph._graph_namespace
    taken = {n.name for n in graph.nodes if n.op in ("placeholder", "output")}
    counts: collections.Counter[str] = collections.Counter()
    renamed: dict[str, str] = {}
    for node in graph.nodes:
        if node.op in ("placeholder", "output"):
            continue
        base = _NUMBERED.match(node.name).group(1)
        if counts[base] == 0 and (keyword.iskeyword(base) or hasattr(builtins, base)):
            counts[base] = 1  # FX numbers a name Python reserves from 1 (``slice_1``)
        while True:
            name = base if counts[base] == 0 else f"{base}_{counts[base]}"
            counts[base] += 1
            if name not in taken:
                break
        taken.add(name)
        if name != node.name:
            renamed[node.name] = name
            node.name = name
            namespace._obj_to_name[node] = name
            namespace._used_names.add(name)
    return renamed


def _drop_own_frames(graph: torch.fx.Graph) -> None:
    """The stand-in's frame is no line of the model's: drop it from the stack traces."""
    for node in graph.nodes:
        trace = node.meta.get("stack_trace")
        if trace and _OWN_FRAME.search(trace):
            frames = re.split(r"(?m)^(?=\s*File \")", trace)
            node.meta["stack_trace"] = "".join(f for f in frames if not _OWN_FRAME.search(f))


def _followed(replaced: dict[str, str]) -> Callable[[str], str | None]:
    """The last name of a chain of replaced nodes (a node replaced by one replaced later)."""

    def final(name: str) -> str | None:
        if name not in replaced:
            return None
        while name in replaced:
            name = replaced[name]
        return name

    return final


def _rename_outputs(program: torch.export.ExportedProgram, new_name: Callable[[str], str | None]) -> None:
    """Output specs name the nodes they return: give them ``new_name`` of each (None: unchanged)."""
    for spec in program.graph_signature.output_specs:
        if isinstance(spec.arg, gs.TensorArgument) and new_name(spec.arg.name) is not None:
            spec.arg = gs.TensorArgument(name=new_name(spec.arg.name))
