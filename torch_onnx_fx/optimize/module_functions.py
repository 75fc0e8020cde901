"""``ModuleFunctionsPass`` turns the nodes each chosen module instance became into a call of an ONNX
function: one function per distinct body, called once per instance (``export_modules_as_functions``).

It runs last, on the optimized graph, so the functions hold exactly the nodes the inlined export
has and ONNX Runtime, which inlines local functions when it loads a model, computes the same
numbers. Which module a node came from is the module stack the translation stamps on each node
(``translate/metadata.MODULE_STACK_KEY``). For each instance, innermost first:

* its nodes are the ones traced inside it, less what it computes for others too (a node reading
  only from outside, or index arithmetic on sizes, that the optimizer computed once for every
  layer), plus nodes a pass made without a stack that only feed it (BatchNorm folded into a
  Conv) and any node on a path from its nodes back into them: a call may not sit on a cycle;
* its body is written in a canonical form (operators, attributes, inputs as positions) so that
  instances with the same code, configuration and input signature share one function, whatever
  their values are called;
* weights, other large initializers and the instance's inputs become function inputs, so every
  weight stays an initializer of the main graph (``apply_weights`` and external data work as
  before); small constants (axes, shapes, epsilons) become ``Constant`` nodes in the body, so a
  toolchain compiling the function sees them.

The functions are named after the module class, in a domain named after its Python module
(``LlamaDecoderLayer`` in ``transformers.models.llama.modeling_llama``); a class whose instances
have different bodies gets one function per body (``LlamaDecoderLayer``, ``LlamaDecoderLayer_2``).
"""

from __future__ import annotations

import collections
import dataclasses
import logging
import re
from typing import Collection, Hashable, Iterable

import onnx_ir as ir

from torch_onnx_fx.optimize.weights.recipes import holds_state
from torch_onnx_fx.translate.metadata import MODULE_STACK_KEY, scope_metadata

__all__ = ["ModuleFunctionsPass"]

logger = logging.getLogger(__name__)

# An initializer that is not a weight and has at most this many elements is a constant of the
# code (axes, shapes, epsilons), written into the body; larger ones are passed in.
_MAX_EMBEDDED_ELEMENTS = 64

Stack = tuple[tuple[str, str], ...]


def _stack(node: ir.Node) -> Stack | None:
    return node.meta.get(MODULE_STACK_KEY) or None


@dataclasses.dataclass(frozen=True)
class _Instance:
    path: str
    cls: str
    depth: int  # position of the instance in its nodes' stacks
    parents: Stack  # the stack above it: what a call of it is tagged with


def _instances(nodes: Iterable[ir.Node], classes: Collection[str] | None, weights: Collection[str]) -> list[_Instance]:
    """The instances to outline, innermost (deepest) first, in graph order within a depth."""
    found: dict[str, _Instance] = {}
    # A module has submodules if a node was traced in one or a weight's name says so (nodes
    # traced inside a torch.cond branch carry no module stack).
    has_children = {name.rpartition(".")[0].rpartition(".")[0] for name in weights}
    for node in nodes:
        stack = _stack(node) or ()
        for depth, (path, cls) in enumerate(stack):
            found.setdefault(path, _Instance(path, cls, depth, stack[:depth]))
            if depth > 0:
                has_children.add(stack[depth - 1][0])
    if classes is None:

        def item_of(inst: _Instance) -> tuple[str, str] | None:
            """(container, class) of an item of a ModuleList or Sequential."""
            parent, _, leaf = inst.path.rpartition(".")
            return (parent, inst.cls) if leaf.isdigit() else None

        siblings = collections.Counter(item_of(inst) for inst in found.values() if inst.path in has_children)
        chosen = [inst for inst in found.values() if item_of(inst) is not None and siblings[item_of(inst)] >= 2]
    else:
        chosen = [inst for inst in found.values() if inst.cls in classes and inst.depth > 0]
    order = {path: i for i, path in enumerate(found)}
    return sorted(chosen, key=lambda inst: (-inst.depth, order[inst.path]))


def _subgraphs(node: ir.Node) -> list[ir.Graph]:
    graphs: list[ir.Graph] = []
    for attr in node.attributes.values():
        if attr.type == ir.AttributeType.GRAPH:
            graphs.append(attr.value)
        elif attr.type == ir.AttributeType.GRAPHS:
            graphs.extend(attr.value)
    return graphs


def _captured(node: ir.Node) -> list[ir.Value]:
    """Values of enclosing scopes that the node's subgraphs read."""
    outer: list[ir.Value] = []
    for graph in _subgraphs(node):
        defined = {*graph.inputs, *graph.initializers.values()}
        for inner in graph:
            outer.extend(v for v in [*inner.inputs, *_captured(inner)] if v is not None and v not in defined)
            defined.update(inner.outputs)
    return outer


def _reads(node: ir.Node) -> list[ir.Value]:
    return [v for v in node.inputs if v is not None] + _captured(node)


def _all_nodes(nodes: Iterable[ir.Node]) -> set[ir.Node]:
    """The nodes and every node of their subgraphs (the users a value's ``uses()`` names)."""
    found: set[ir.Node] = set()
    for node in nodes:
        found.add(node)
        for graph in _subgraphs(node):
            found |= _all_nodes(graph)
    return found


def _owners(nodes: Iterable[ir.Node]) -> dict[ir.Node, ir.Node]:
    """Each node of a subgraph mapped to the top-level node holding it (look up with
    ``.get(user, user)``: a top-level node holds itself)."""
    return {inner: node for node in nodes if _subgraphs(node) for inner in _all_nodes([node]) if inner is not node}


def _cone(node: ir.Node, within: set[ir.Node]) -> set[ir.Node]:
    """``node`` and its ancestors in ``within``."""
    cone, stack = {node}, [node]
    while stack:
        for value in _reads(stack.pop()):
            producer = value.producer()
            if producer in within and producer not in cone:
                cone.add(producer)
                stack.append(producer)
    return cone


def _reads_weights_of(cone: set[ir.Node], path: str) -> bool:
    """Whether the nodes read an initializer of the module at ``path`` (its weights, as they are
    or as stored for it: ``model.layers.0.mlp.up_proj.weight.transposed``)."""
    prefix = path + "."
    return any(v.is_initializer() and (v.name or "").startswith(prefix) for node in cone for v in _reads(node))


def _is_index(value: ir.Value) -> bool:
    return value.dtype is not None and (value.dtype.is_integer() or value.dtype == ir.DataType.BOOL)


def _traced_in(nodes: Iterable[ir.Node]) -> dict[str, list[ir.Node]]:
    """Module path -> the nodes traced in that module or below it."""
    index: dict[str, list[ir.Node]] = {}
    for node in nodes:
        for path, _ in _stack(node) or ():
            index.setdefault(path, []).append(node)
    return index


def _members(graph: ir.Graph, inst: _Instance, traced: list[ir.Node], owner: dict[ir.Node, ir.Node]) -> list[ir.Node]:
    """The instance's nodes in graph order: those ``traced`` in it that are still in the main
    graph, less shared sources, plus the convex hull."""
    nodes = list(graph)
    tagged = {n for n in traced if n.graph is graph}
    if not tagged:
        return []
    position = {n: i for i, n in enumerate(nodes)}
    # A node a pass made without a stack that only feeds the instance is the instance's. In
    # reverse, so chains of them come along.
    for node in reversed(nodes[: max(position[n] for n in tagged)]):
        if node in tagged or _stack(node) is not None:
            continue
        users = [owner.get(user, user) for out in node.outputs for user, _ in out.uses()]
        if users and all(user in tagged for user in users) and not any(out.is_graph_output() for out in node.outputs):
            tagged.add(node)
    # A value the instance computes but others read too is the main graph's: left in the
    # instance, only the first layer's body would produce it for the others (and differ from the
    # rest). Such a value is read inside the instance and outside it, and its cone inside the
    # instance reads none of the instance's weights (the mask every layer reads, GPT-J's rotary
    # tables repeated, a size) or is index arithmetic (MoE's arange over tokens times experts).
    # Moving a cone out keeps the rest convex, since the cone holds all of its own ancestors in
    # the instance.
    changed = True
    while changed:
        changed = False
        for node in [n for n in nodes if n in tagged]:
            if node not in tagged:
                continue
            users = {owner.get(user, user) for out in node.outputs for user, _ in out.uses()}
            # Read inside as well as outside: the instance's own results are read only outside.
            if not (users & tagged) or not (users - tagged or any(out.is_graph_output() for out in node.outputs)):
                continue
            cone = _cone(node, tagged)
            if not _reads_weights_of(cone, inst.path) or all(_is_index(out) for member in cone for out in member.outputs):
                tagged -= cone
                changed = True
    if not tagged:
        return []
    window = nodes[min(position[n] for n in tagged) : max(position[n] for n in tagged) + 1]
    # The hull: a node both reachable from the instance and reaching it must be in the call.
    after: set[ir.Node] = set()
    for node in window:
        if node in tagged or any(v.producer() in after for v in _reads(node)):
            after.add(node)
    before: set[ir.Node] = set()
    for node in reversed(window):
        if node in tagged or any(owner.get(user, user) in before for out in node.outputs for user, _ in out.uses()):
            before.add(node)
    return [n for n in window if n in tagged or (n in after and n in before)]


def _is_embedded(value: ir.Value, weights: Collection[str]) -> bool:
    """Whether an initializer is a constant of the code, written into the body. A weight, or a
    tensor stored for weights (transposed, computed), is passed in, so ``apply_weights`` still
    finds it in the main graph."""
    return (
        value.is_initializer()
        and not value.is_graph_input()
        and value.name not in weights
        and not holds_state(value)
        and value.const_value is not None
        and value.const_value.size <= _MAX_EMBEDDED_ELEMENTS
    )


class _Body:
    """An instance's nodes read in a canonical form: what decides whether two instances can share
    one function, and, position by position, which values a call passes and receives."""

    def __init__(self, members: list[ir.Node], weights: Collection[str]) -> None:
        self.members = members
        self.everything = _all_nodes(members)
        self.inputs: list[ir.Value] = []
        self.constants: list[ir.Value] = []
        self._refs: dict[ir.Value, Hashable] = {}
        self._counts: list[int] = [0]  # nodes seen per scope: the body, then each subgraph
        items = [self._node(node, self._refs, 0, weights) for node in members]
        self.outputs = [
            out for node in members for out in node.outputs
            if out.is_graph_output() or any(user not in self.everything for user, _ in out.uses())
        ]
        # The input signature too: instances of other dtypes or shapes get functions of their own,
        # which a toolchain compiling one function per distinct layer can specialise.
        signature = tuple((v.dtype, str(v.shape)) for v in self.inputs)
        self.key: Hashable = (tuple(items), tuple(self._refs[out] for out in self.outputs), signature)

    def _ref(self, value: ir.Value | None, local: dict[ir.Value, Hashable], weights: Collection[str]) -> Hashable:
        if value is None:
            return None
        if value in local:
            return local[value]
        if value in self._refs:
            return self._refs[value]
        if _is_embedded(value, weights):
            tensor = value.const_value
            ref: Hashable = ("const", tensor.dtype, tuple(tensor.shape), tensor.tobytes())
            self.constants.append(value)
        else:
            ref = ("input", len(self.inputs))
            self.inputs.append(value)
        self._refs[value] = ref
        return ref

    def _node(self, node: ir.Node, local: dict[ir.Value, Hashable], scope: int, weights: Collection[str]) -> Hashable:
        inputs = tuple(self._ref(v, local, weights) for v in node.inputs)
        attributes = tuple(sorted((name, self._attribute(attr, local, weights)) for name, attr in node.attributes.items()))
        index = self._counts[scope]
        self._counts[scope] += 1
        for i, out in enumerate(node.outputs):
            local[out] = ("node", scope, index, i)
        return (node.domain, node.op_type, node.overload, inputs, attributes, len(node.outputs))

    def _attribute(self, attr: ir.Attr, outer: dict[ir.Value, Hashable], weights: Collection[str]) -> Hashable:
        if attr.type == ir.AttributeType.GRAPH:
            return self._graph(attr.value, outer, weights)
        if attr.type == ir.AttributeType.GRAPHS:
            return tuple(self._graph(g, outer, weights) for g in attr.value)
        if attr.type == ir.AttributeType.TENSOR:
            return (attr.value.dtype, tuple(attr.value.shape), attr.value.tobytes())
        if attr.type == ir.AttributeType.TENSORS:
            return tuple((t.dtype, tuple(t.shape), t.tobytes()) for t in attr.value)
        value = attr.value
        # repr, not ==: -0.0 == 0.0, and a body dividing by one is not the body dividing by the other.
        return (attr.type, tuple(map(repr, value)) if isinstance(value, (list, tuple)) else repr(value))

    def _graph(self, graph: ir.Graph, outer: dict[ir.Value, Hashable], weights: Collection[str]) -> Hashable:
        # Values a subgraph defines are named relative to it; what it reads from outside resolves
        # through the enclosing body, so an outer weight becomes a function input like any other.
        local = dict(outer)
        scope = len(self._counts)
        self._counts.append(0)
        for i, value in enumerate(graph.inputs):
            local[value] = ("graph_input", scope, i)
        for value in graph.initializers.values():
            tensor = value.const_value
            local[value] = ("graph_initializer", value.name, tensor.dtype, tuple(tensor.shape), tensor.tobytes())
        items = tuple(self._node(node, local, scope, weights) for node in graph)
        return (len(graph.inputs), items, tuple(self._ref(v, local, weights) for v in graph.outputs))


def _input_name(value: ir.Value, prefix: str, taken: set[str], index: int) -> str:
    """A name in the function for an outer value: the instance's prefix dropped from a weight's
    name (``self_attn.q_proj.weight``), never one in ``taken``."""
    name = value.name or f"input_{index}"
    if name.startswith(prefix):
        name = name[len(prefix) :]
    name = re.sub(r"[^0-9A-Za-z_.]", "_", name) or f"input_{index}"
    unique, n = name, 1
    while unique in taken:
        n += 1
        unique = f"{name}_{n}"
    taken.add(unique)
    return unique


class ModuleFunctionsPass(ir.passes.InPlacePass):
    """Outline module instances as calls of deduplicated ONNX functions (see the module docstring)."""

    def __init__(self, classes: Collection[str] | None, weights: Collection[str] = ()) -> None:
        """``classes``: qualified class names, or None for the repeated blocks (instances of one
        class side by side in a ModuleList or Sequential that have submodules of their own)."""
        super().__init__()
        self.classes = None if classes is None else frozenset(classes)
        self.weights = frozenset(weights)

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        graph = model.graph
        functions: dict[Hashable, tuple[str, str]] = {}
        taken: set[tuple[str, str]] = set(model.functions)  # type: ignore[arg-type]
        calls = 0
        embedded: set[ir.Value] = set()
        traced, owner = _traced_in(graph), _owners(graph)
        # Subgraphs' nodes say which modules a block has (a layer's Linear traced inside a cond).
        for inst in _instances(ir.traversal.RecursiveGraphIterator(graph), self.classes, self.weights):
            members = _members(graph, inst, traced.get(inst.path, []), owner)
            if not members:
                continue
            body = _Body(members, self.weights)
            if not body.outputs:
                continue
            key = (inst.cls, body.key)
            known = key in functions
            if not known:
                functions[key] = self._function_name(inst, taken)
            # The call takes over the body's results first: a result that is also a graph output
            # must leave the main graph's outputs before it can be the function's.
            call = self._call(graph, inst, body, *functions[key])
            sort = self._place(graph, call, body, owner)
            for path, _ in inst.parents:
                traced.setdefault(path, []).append(call)
            if known:
                graph.remove(members, safe=False)
                for node in body.everything:
                    for i in range(len(node.inputs)):
                        node.replace_input_with(i, None)
            else:
                self._define(model, inst, body, *functions[key])
            if sort:
                graph.sort()
            embedded.update(body.constants)
            calls += 1
        for value in embedded:
            # Written into the bodies: an initializer no node reads any more is dropped.
            if not value.uses() and not value.is_graph_output() and value.name in graph.initializers:
                del graph.initializers[value.name]
        logger.debug("ModuleFunctionsPass: %d call(s) of %d function(s)", calls, len(functions))
        return ir.passes.PassResult(model, modified=bool(calls))

    @staticmethod
    def _function_name(inst: _Instance, taken: set[tuple[str, str]]) -> tuple[str, str]:
        """``(domain, name)`` for a new function of ``inst``'s class: its Python module and name,
        numbered from the second body on, never a name already given (a class named
        ``Block_2`` beside ``Block``'s second body): two bodies under one name would both run the
        last one defined."""
        module, _, qualname = inst.cls.rpartition(".")
        domain = module or "torch_onnx_fx.modules"
        base = re.sub(r"[^0-9A-Za-z_]", "_", qualname)
        name, count = base, 1
        while (domain, name) in taken:
            count += 1
            name = f"{base}_{count}"
        taken.add((domain, name))
        return domain, name

    def _define(self, model: ir.Model, inst: _Instance, body: _Body, domain: str, name: str) -> None:
        """Move the first instance's nodes into a new function of the model."""
        graph = model.graph
        prefix = inst.path + "."
        # One name space in a function (SSA): inputs and constants may not take a body value's name.
        taken: set[str] = {v.name for node in body.everything for v in node.outputs if v.name}
        inputs = []
        for index, value in enumerate(body.inputs):
            inputs.append(ir.Value(name=_input_name(value, prefix, taken, index), type=value.type, shape=value.shape))
        constants = []
        for value in body.constants:
            node = ir.node("Constant", [], attributes={"value": value.const_value})
            node.outputs[0].name = _input_name(value, prefix, taken, len(inputs) + len(constants))
            node.outputs[0].type, node.outputs[0].shape = value.type, value.shape
            constants.append(node)
        replacements = {
            **dict(zip(body.inputs, inputs)),
            **{value: node.outputs[0] for value, node in zip(body.constants, constants)},
        }
        for outer, inner in replacements.items():
            for user, index in list(outer.uses()):
                if user in body.everything:
                    user.replace_input_with(index, inner)
        # A branch may return an outer value as it is: an output is no use, so it is replaced too,
        # through an Identity (a value is the output of one graph only).
        for node in body.everything:
            for subgraph in _subgraphs(node):
                for i, output in enumerate(subgraph.outputs):
                    if output in replacements:
                        copy = ir.node("Identity", [replacements[output]])
                        subgraph.append(copy)
                        subgraph.outputs[i] = copy.outputs[0]
        graph.remove(body.members, safe=False)
        opsets = dict(graph.opset_imports)
        function_graph = ir.Graph(inputs, list(body.outputs), nodes=[*constants, *body.members], opset_imports=opsets, name=name)
        function = ir.Function(domain, name, graph=function_graph, attributes=[])
        function.metadata_props["pkg.torch_onnx_fx.module_class"] = inst.cls
        model.functions[function.identifier()] = function
        graph.opset_imports.setdefault(domain, 1)

    @staticmethod
    def _place(graph: ir.Graph, call: ir.Node, body: _Body, owner: dict[ir.Node, ir.Node]) -> bool:
        """Insert ``call`` where the graph stays in topological order; True if only a sort can
        order it (an outside node reads an early result of the body before the body's last input
        is computed). Sorting the whole graph once per instance was most of the pass's time."""
        nodes = list(graph)
        position = {node: i for i, node in enumerate(nodes)}
        first = min(position[node] for node in body.members)
        last_input = max((position[v.producer()] for v in body.inputs if v.producer() in position), default=-1)
        first_use = min((position[owner.get(user, user)] for out in call.outputs for user, _ in out.uses()), default=len(nodes))
        if last_input < first:
            graph.insert_before(nodes[first], call)
        elif last_input < first_use:
            graph.insert_after(nodes[last_input], call)
        else:
            graph.append(call)
            return True
        return False

    def _call(self, graph: ir.Graph, inst: _Instance, body: _Body, domain: str, name: str) -> ir.Node:
        """A call of the function for the instance (not yet in the graph); its results take over
        the body's uses outside it."""
        call = ir.Node(domain, name, inputs=[*body.inputs], num_outputs=len(body.outputs), name=inst.path)
        call.metadata_props.update(scope_metadata((*inst.parents, (inst.path, inst.cls))))
        # Tagged with the modules above the instance, so an enclosing instance takes the call in.
        call.meta[MODULE_STACK_KEY] = inst.parents
        everything = body.everything
        for old, new in zip(body.outputs, call.outputs):
            new.name, new.type, new.shape = old.name, old.type, old.shape
            new.metadata_props.update(old.metadata_props)
            for user, index in list(old.uses()):
                if user not in everything:
                    user.replace_input_with(index, new)
            for i, output in enumerate(graph.outputs):
                if output is old:
                    graph.outputs[i] = new
        return call
