"""Translate: walk the FX graph of an ExportedProgram and build the ONNX graph.

One pass over the nodes, in order. Placeholders become graph inputs (user inputs) or initializers
(parameters, buffers, constants, carrying their state-dict names); ``call_function`` nodes are
dispatched through the :class:`~torch_onnx_fx.registry.TranslationTable` and recorded by the
:class:`~torch_onnx_fx.translate.tracer.GraphTracer`; the output node gives the graph outputs (user
outputs, then mutated buffers/inputs if asked for). Work per node is constant, so the whole stage is
linear in the graph size.
"""

from __future__ import annotations

import dataclasses
import operator
from typing import Any, Callable, Mapping, Sequence

import onnx_ir as ir
import sympy
import torch
from onnx_ir.tensor_adapters import TorchTensor
from torch.export import graph_signature as gs

from torch_onnx_fx.translate import metadata
from torch_onnx_fx.translate import call_adapters
from torch_onnx_fx.dtypes import SUB_BYTE, is_carried, onnx_dims, onnx_dtype
from torch_onnx_fx.errors import MissingTranslationError, TranslationError, UnsupportedArgumentError
from torch_onnx_fx.normalize.eager_constants import EAGER_UNUSED, EAGER_VALUE
from torch_onnx_fx.registry import TranslationTable, choose, target_name
from torch_onnx_fx.signature import OutputEntry, ProgramSignature, lifted_tensor
from torch_onnx_fx.translate.op_context import OpContext
from torch_onnx_fx.translate.tracer import GraphTracer

__all__ = ["TranslationContext", "translate", "untranslatable_nodes", "missing_translation_error"]

# FX targets the graph walk handles itself rather than through the table.
_WALK_HANDLED: set[Any] = {operator.getitem}
_WITH_EFFECTS = torch.ops.higher_order.with_effects


@dataclasses.dataclass
class TranslationContext:
    """State of one translation; passed to translations that need more than their arguments."""

    program: torch.export.ExportedProgram
    table: TranslationTable
    tracer: GraphTracer
    symbol_names: dict[str, str]
    signature: ProgramSignature
    values: dict[torch.fx.Node, Any] = dataclasses.field(default_factory=dict)
    # ONNX value names already standing for an FX node, input or initializer.
    named: set[str] = dataclasses.field(default_factory=set)
    _dim_cache: dict[Any, int | str] = dataclasses.field(default_factory=dict)

    # -- symbolic dims -------------------------------------------------------------------

    def dim(self, size: Any) -> int | str | None:
        """An ONNX dim (int or readable name) for a torch size entry."""
        if isinstance(size, int):
            return size
        if isinstance(size, torch.SymInt):
            expr = size.node.expr
            if expr in self._dim_cache:
                return self._dim_cache[expr]
            if expr.is_number:
                result: int | str = int(expr)
            else:
                rename = {s: sympy.Symbol(self.symbol_names[s.name]) for s in expr.free_symbols if s.name in self.symbol_names}
                result = str(expr.xreplace(rename) if rename else expr)
            self._dim_cache[expr] = result
            return result
        return None

    def shape(self, tensor: torch.Tensor) -> ir.Shape:
        return ir.Shape([self.dim(s) for s in tensor.shape])

    def set_type(self, value: ir.Value, example: Any) -> None:
        """Give ``value`` the dtype and shape of the FX meta value ``example``."""
        if isinstance(example, torch.Tensor):
            if example.is_complex():
                # Complex tensors travel as real tensors with a trailing dim of 2 (real, imag),
                # the representation torchlib's complex translations use.
                value.type = ir.TensorType(onnx_dtype(example.real.dtype))
                value.shape = ir.Shape([*self.shape(example), 2])
            else:
                value.type = ir.TensorType(onnx_dtype(example.dtype))
                value.shape = ir.Shape(onnx_dims(example.dtype, list(self.shape(example))))
        elif isinstance(example, (torch.SymInt, int)) and not isinstance(example, bool):
            value.type = ir.TensorType(ir.DataType.INT64)
            value.shape = ir.Shape([])
        elif isinstance(example, (torch.SymFloat, float)):
            # A Python float is a double: float32 here rounded sqrt(n) for a float64 model.
            value.type = ir.TensorType(ir.DataType.DOUBLE)
            value.shape = ir.Shape([])
        elif isinstance(example, (torch.SymBool, bool)):
            value.type = ir.TensorType(ir.DataType.BOOL)
            value.shape = ir.Shape([])

    # -- helpers for translations ----------------------------------------------------------

    def cast(self, value: ir.Value, dtype: ir.DataType) -> ir.Value:
        return self.tracer.op("Cast", [value], {"to": dtype})

    # -- subgraphs (control flow) ----------------------------------------------------------

    def new_subgraph(self, name: str) -> TranslationContext:
        """A context building a fresh ONNX graph (an If branch or a loop body) nested in this one.

        Values of the enclosing graphs stay visible (ONNX subgraphs capture outer values).
        """
        graph = ir.Graph([], [], nodes=[], name=self.tracer.fresh_name(name))
        return dataclasses.replace(
            self, tracer=self.tracer.child(graph), values={}, named=self.named, _dim_cache=self._dim_cache
        )

    def make_input(self, example: Any, hint: str = "arg") -> ir.Value:
        """Add an input to this context's graph, typed like the FX meta value ``example``."""
        value = ir.Value(name=self.tracer.fresh_name(hint))
        self.set_type(value, example)
        self.tracer.graph.inputs.append(value)
        self.named.add(value.name)
        return value

    def inline(self, module: torch.fx.GraphModule, inputs: Sequence[Any]) -> list[Any]:
        """Translate ``module``'s graph into this context's graph, placeholders bound to ``inputs``."""
        sub = dataclasses.replace(self, values={})
        placeholders = [n for n in module.graph.nodes if n.op == "placeholder"]
        if len(placeholders) != len(inputs):
            raise TranslationError(
                f"Subgraph expects {len(placeholders)} inputs, got {len(inputs)}."
            )
        sub.values.update(zip(placeholders, inputs))
        with self.tracer.active():
            outputs = _walk(sub, module.graph.nodes, module)
        flat = outputs if isinstance(outputs, (list, tuple)) else [outputs]
        return [_convert_argument(sub, o) for o in flat]

    def finish(self, outputs: Sequence[Any], examples: Sequence[Any]) -> ir.Graph:
        """Make ``outputs`` this subgraph's outputs and return the graph.

        A subgraph output must be produced inside the subgraph; values from outside (or inputs
        passed straight through) get an Identity, as do Python constants.
        """
        graph = self.tracer.graph
        inside = {id(n) for n in graph}
        for value, example in zip(outputs, examples):
            if not isinstance(value, ir.Value):
                value = self.tracer.constant(value)
            if value.producer() is None or id(value.producer()) not in inside or value in graph.outputs:
                value = self.tracer.identity(value)
                self.set_type(value, example)
            graph.outputs.append(value)
        return graph


def _meta(arg: Any) -> Any:
    """The FX meta value standing for ``arg`` (fake tensors for nodes)."""
    if isinstance(arg, torch.fx.Node):
        return arg.meta.get("val")
    if isinstance(arg, (list, tuple)):
        return type(arg)(_meta(a) for a in arg)
    return arg


_DROPPED_TYPES = (torch.device, torch.layout, torch.memory_format)


def _convert_argument(ctx: TranslationContext, arg: Any) -> Any:
    if isinstance(arg, torch.fx.Node):
        if arg not in ctx.values:
            raise TranslationError(f"FX node {arg.name} is used before it was translated.")
        return ctx.values[arg]
    if isinstance(arg, (list, tuple)):
        return [_convert_argument(ctx, a) for a in arg]
    if isinstance(arg, torch.dtype):
        return int(onnx_dtype(arg))
    if isinstance(arg, _DROPPED_TYPES):
        return None
    return arg


def untranslatable_nodes(module: torch.fx.GraphModule, table: TranslationTable) -> dict[Any, torch.fx.Node]:
    """Every distinct call_function target with no translation (subgraphs included), with the
    first node of it that has none."""
    missing: dict[Any, torch.fx.Node] = {}
    for submodule in module.modules():
        if not isinstance(submodule, torch.fx.GraphModule):
            continue
        for node in submodule.graph.nodes:
            if node.op != "call_function" or node.target in _WALK_HANDLED:
                continue
            target = node.args[1] if node.target is _WITH_EFFECTS else node.target
            if not table.has(target, node):
                missing.setdefault(target, node)
    return missing


def _complex_decline(target: Any, node: torch.fx.Node, table: TranslationTable) -> str | None:
    """Why ``node`` has no translation when it is only for want of complex support."""
    if not table.declined_for_complex(target, node):
        return None
    inputs = ", ".join(metadata.describe_value(_meta(a)) for a in node.args)
    line = (
        f"{target_name(target)}({inputs}) has translations for real tensors only; none handles "
        "complex inputs exactly, and torch has no decomposition for it."
    )
    where = metadata.source_line(node)
    if where:
        line += f"\n  from the model at {where}"
    return line


def missing_translation_error(
    targets: Sequence[Any] | Mapping[Any, torch.fx.Node], table: TranslationTable | None = None
) -> MissingTranslationError:
    """The error for untranslatable ``targets``; given their nodes (a mapping) and the table,
    it also says which of them fail only for complex inputs, with the source line."""
    names = [target_name(t) for t in targets]
    first = next(iter(targets))
    example_key = f"torch.ops.{first.namespace}.{first._opname}.{first._overloadname}" if isinstance(first, torch._ops.OpOverload) else names[0]
    complex_notes = []
    if isinstance(targets, Mapping) and table is not None:
        complex_notes = [n for n in (_complex_decline(t, node, table) for t, node in targets.items()) if n]
    message = f"{len(names)} operator(s) have no ONNX translation and no decomposition: " + ", ".join(names) + "."
    for note in complex_notes:
        message += "\n" + note
    message += (
        "\nSupply translations through custom_translation_table, for example:\n"
        "    import onnxscript\n"
        "    from onnxscript import opset18 as op\n"
        "    def my_translation(x):\n"
        "        return op.Identity(x)  # build the ONNX equivalent here\n"
        f"    torch_onnx_fx.export(model, args, custom_translation_table={{{example_key}: my_translation}})"
    )
    if complex_notes:
        message += (
            "\nA translation for complex inputs receives the tensor's real view (a trailing dim of 2: "
            "real, imaginary) and is marked with torch_onnx_fx.complex_translation(fn) (see docs/complex.md)."
        )
    return MissingTranslationError(message, names)


# -- placeholders -------------------------------------------------------------------------------


def _fresh_name(ctx: TranslationContext, base: str) -> str:
    name, count = base, 0
    while name in ctx.named or name in ctx.tracer.graph.initializers:
        count += 1
        name = f"{base}_{count}"
    ctx.named.add(name)
    return name


def _initializer(ctx: TranslationContext, name: str, fx_name: str, tensor: torch.Tensor | None, example: Any) -> ir.Value:
    value = ir.Value(name=name)
    ctx.set_type(value, example)
    value.meta["fx_name"] = fx_name
    if tensor is not None:
        tensor = tensor.detach()
        if tensor.is_complex():
            tensor = torch.view_as_real(tensor)
        value.const_value = TorchTensor(tensor, name=name)
    ctx.tracer.graph.register_initializer(value)
    return value


def _placeholders(ctx: TranslationContext) -> list[ir.Value]:
    program = ctx.program
    signature = ctx.signature
    inputs: list[ir.Value] = []
    for node, spec in signature.user_inputs:
        if isinstance(spec.arg, gs.ConstantArgument):
            ctx.values[node] = spec.arg.value
            continue
        value = ir.Value(name=node.name)
        value.meta["fx_name"] = node.name
        ctx.set_type(value, node.meta.get("val"))
        ctx.values[node] = value
        inputs.append(value)
    for node, spec in signature.lifted:
        tensor = lifted_tensor(program, spec)
        ctx.values[node] = _initializer(ctx, spec.target or node.name, node.name, tensor, node.meta.get("val"))
    for node in signature.tokens:
        ctx.values[node] = None
    return inputs


# -- call_function ------------------------------------------------------------------------------


def _bind_result(ctx: TranslationContext, node: torch.fx.Node, result: Any) -> None:
    example = node.meta.get("val")
    tracer = ctx.tracer
    if isinstance(example, (list, tuple)):
        if isinstance(result, ir.Value):
            ctx.values[node] = result  # a tensor sequence; getitem takes it apart
            return
        bound = []
        for i, (item, item_example) in enumerate(zip(result, example)):
            bound.append(_finish_value(ctx, item, item_example, f"{node.name}__{i}") if isinstance(item, ir.Value) else item)
        ctx.values[node] = bound
        return
    if isinstance(result, (list, tuple)) and len(result) == 1 and isinstance(result[0], ir.Value):
        result = result[0]
    if isinstance(result, ir.Value):
        ctx.values[node] = _finish_value(ctx, result, example, node.name)
    elif isinstance(result, (int, float, bool)) and example is not None and not isinstance(example, torch.Tensor):
        # A translation computed a Python constant (e.g. arithmetic on static sizes).
        ctx.values[node] = result
    elif isinstance(result, (int, float, bool)):
        ctx.values[node] = _finish_value(ctx, tracer.constant(result), example, node.name)
    else:
        ctx.values[node] = result


def _finish_value(ctx: TranslationContext, value: ir.Value, example: Any, name: str) -> ir.Value:
    """Name the value after its FX node and give it the FX dtype and shape.

    A translation may return a value that already stands for something else (an input, an
    initializer, a constant or another node's output); renaming it would corrupt that, so an
    Identity is inserted instead. A translation whose result dtype differs from what ATen
    produces gets a Cast, so a wrong dtype can never leak out silently.
    """
    tracer = ctx.tracer
    if tracer.parent is not None:
        # FX names are unique within their own graph only: a scan or loop body's ``exp_1`` may
        # be the main graph's ``exp_1`` too, and ONNX Runtime rejects a model where a name is
        # given twice across a graph and its subgraphs. Body names carry the body's unique name.
        name = f"{tracer.graph.name}__{name}"
    if name in ctx.named:
        # A subgraph inlined into a graph twice (the condition of each of two while_loops, whose
        # FX graphs both name their comparison ``lt``) would define the name twice.
        name = tracer.fresh_name(name)
    # An initializer a translation made for this very node (named after it) is that node's value.
    own_initializer = value.is_initializer() and value.name == name and name not in ctx.named
    if not own_initializer and (value.producer() is None or value.name in ctx.named or value.const_value is not None):
        # Typed as its input, so the dtype check below still sees what the translation produced
        # (a float32 constant for a float16 node gets its Cast).
        value = tracer.identity(value)
    carried = isinstance(example, torch.Tensor) and is_carried(value.dtype, example.dtype)
    if isinstance(example, torch.Tensor) and not carried:
        expected = onnx_dtype(example.real.dtype if example.is_complex() else example.dtype)
        if expected is not None and value.dtype is not None and value.dtype != expected:
            value = ctx.cast(value, expected)
    elif isinstance(example, (torch.SymInt, int)) and not isinstance(example, bool) and value.dtype not in (None, ir.DataType.INT64):
        value = ctx.cast(value, ir.DataType.INT64)
    elif isinstance(example, (torch.SymFloat, float)) and value.dtype not in (None, ir.DataType.DOUBLE):
        value = ctx.cast(value, ir.DataType.DOUBLE)
    value.name = name
    ctx.named.add(name)
    declared = value.dtype
    ctx.set_type(value, example)
    if carried:
        value.dtype = declared
    return value


def _call(ctx: TranslationContext, node: torch.fx.Node) -> None:
    target = node.target
    if target is operator.getitem:
        container, index = node.args
        source = ctx.values[container]
        if isinstance(source, ir.Value):
            # Translations such as split return one ONNX tensor sequence for an ATen list.
            item = ctx.tracer.op("SequenceAt", [source, ctx.tracer.constant(index)])
            ctx.values[node] = _finish_value(ctx, item, node.meta.get("val"), node.name)
        else:
            ctx.values[node] = source[index]
        return
    node_args, node_kwargs = node.args, node.kwargs
    candidates = ctx.table.candidates(target, node)
    if not candidates:
        raise missing_translation_error({target: node}, ctx.table)
    example_args = [_meta(a) for a in node_args]
    example_kwargs = {k: _meta(v) for k, v in node_kwargs.items()}
    translation = choose(candidates, example_args, example_kwargs)
    args = [_convert_argument(ctx, a) for a in node_args]
    kwargs = {k: _convert_argument(ctx, v) for k, v in node_kwargs.items()}
    kwargs = {k: v for k, v in kwargs.items() if v is not None}
    call = call_adapters.Call(target, translation, args, example_args, node.meta.get("val"), ctx.tracer)
    for adapter in call_adapters.ADAPTERS:
        adapter.before(call)
    if getattr(translation.callable, "_torch_onnx_fx_wants_context", False):
        kwargs["ctx"] = _op_context(ctx, node, target, example_args, example_kwargs)
    result = ctx.tracer.call(translation.callable, call.args, kwargs)
    for adapter in reversed(call_adapters.ADAPTERS):
        result = adapter.after(call, result)
    _bind_result(ctx, node, result)


def _op_context(
    ctx: TranslationContext, node: torch.fx.Node, target: Any, example_args: Sequence[Any], example_kwargs: Mapping[str, Any]
) -> OpContext:
    schema = getattr(target, "_schema", None)
    return OpContext(
        target=target_name(target),
        name=node.name,
        inputs=tuple(example_args),
        keyword_inputs=dict(example_kwargs),
        result=node.meta.get("val"),
        argument_names=tuple(a.name for a in schema.arguments) if schema is not None else (),
        results_read=_results_read(node),
        _walk=ctx,
    )


def _results_read(node: torch.fx.Node) -> frozenset[int] | None:
    """The tuple positions of ``node``'s result that its users take apart; None when any user
    reads the whole result."""
    read: set[int] = set()
    for user in node.users:
        if user.target is not operator.getitem or not isinstance(user.args[1], int):
            return None
        if user.users:
            read.add(user.args[1])
    return frozenset(read)


def _translation_error(node: torch.fx.Node, exc: Exception, ctx: TranslationContext) -> TranslationError:
    inputs = ", ".join(metadata.describe_value(_meta(a)) for a in node.args)
    where = metadata.source_line(node)
    translation = ""
    # The translation this node was given (complex or real), not the first one registered.
    candidates = ctx.table.candidates(node.target, node)
    if candidates:
        chosen = candidates[0]
        translation = f" (translation {chosen.name} from {chosen.source})"
    message = (
        f"Failed to translate FX node '{node.name}' = {target_name(node.target)}({inputs}){translation}: "
        f"{type(exc).__name__}: {exc}"
    )
    if where:
        message += f"\n  from the model at {where}"
    message += (
        "\nIf the operator's translation is wrong or missing for these inputs, provide one through "
        "custom_translation_table."
    )
    error = TranslationError(message)
    error.has_node_context = True  # type: ignore[attr-defined]
    return error


# -- outputs -------------------------------------------------------------------------------------


def _outputs(ctx: TranslationContext, entries: Sequence[OutputEntry]) -> list[ir.Value]:
    """The graph outputs for ``entries``: each a value of its own, inputs passed through as-is.

    An input returned unchanged stays the graph input itself, so the output keeps the input's
    name (ONNX allows it and torch.onnx does the same); a value returned twice, an initializer
    or a Python constant gets an Identity, since a graph output must be a distinct value.
    """
    outputs: list[ir.Value] = []
    seen: set[int] = set()
    for entry in entries:
        value = _convert_argument(ctx, entry.arg)
        if not isinstance(value, ir.Value):
            value = ctx.tracer.constant(value)
        if isinstance(entry.example, torch.SymFloat) and value.dtype == ir.DataType.DOUBLE:
            # A Python float returned is float32, torch.onnx's convention (its testing helper
            # compares it with torch.tensor(x)); inside the graph it stays the double it is.
            value = ctx.tracer.op("Cast", [value], {"to": ir.DataType.FLOAT}, infer=False)
            value.name = ctx.tracer.fresh_name(getattr(entry.arg, "name", "output"))
            value.type, value.shape = ir.TensorType(ir.DataType.FLOAT), ir.Shape([])
            seen.add(id(value))
            outputs.append(value)
            continue
        # Sub-byte initializers stay outputs as they are: below opset 23 no Identity takes them.
        passthrough = (value.is_graph_input() or (value.is_initializer() and value.dtype in SUB_BYTE)) and id(value) not in seen
        if not passthrough and (id(value) in seen or value.producer() is None or value.is_initializer()):
            value = ctx.tracer.op("Identity", [value], infer=False)
            value.name = ctx.tracer.fresh_name(getattr(entry.arg, "name", "output"))
            ctx.set_type(value, entry.example)
        seen.add(id(value))
        outputs.append(value)
    return outputs


def translate(
    program: torch.export.ExportedProgram,
    table: TranslationTable,
    *,
    opset_version: int,
    symbol_names: Mapping[str, str],
    signature: ProgramSignature | None = None,
    state_outputs: bool = False,
    progress: Callable[[int, int], None] | None = None,
) -> tuple[ir.Graph, GraphTracer]:
    """Build the ONNX graph for ``program``: the user's outputs, then (``state_outputs``) the new
    values of mutated buffers and inputs."""
    graph = ir.Graph([], [], nodes=[], name="main_graph", opset_imports={"": opset_version})
    tracer = GraphTracer(graph, opset_version)
    signature = signature or ProgramSignature.of(program)
    ctx = TranslationContext(program, table, tracer, dict(symbol_names), signature)
    graph.inputs.extend(_placeholders(ctx))
    ctx.named.update(v.name for v in graph.inputs)
    ctx.named.update(graph.initializers)
    with tracer.active():
        _walk(ctx, program.graph.nodes, program.graph_module, progress=progress)
        tracer.node_metadata, tracer.module_stack = {}, ()
        graph.outputs.extend(_outputs(ctx, signature.graph_outputs(state_outputs)))
    graph.opset_imports.update(tracer.opset_imports)
    return graph, tracer


def _walk(
    ctx: TranslationContext,
    nodes: Any,
    owner: torch.nn.Module,
    *,
    progress: Callable[[int, int], None] | None = None,
) -> Any:
    """Translate FX nodes in order; return the output node's argument (or the node itself)."""
    nodes = list(nodes)
    total = len(nodes)
    tracer = ctx.tracer
    for index, node in enumerate(nodes):
        if node.op == "call_function" and (EAGER_VALUE in node.meta or EAGER_UNUSED in node.meta):
            # Computed by PyTorch at export (normalize/eager_constants.py), or read by nothing the
            # graph computes.
            if EAGER_VALUE in node.meta:
                ctx.values[node] = _initializer(ctx, _fresh_name(ctx, node.name), node.name, node.meta[EAGER_VALUE], node.meta.get("val"))
        elif node.op == "call_function":
            tracer.module_stack = metadata.module_stack(node)
            tracer.node_metadata = metadata.node_metadata(node, tracer.module_stack)
            try:
                _call(ctx, node)
            except (MissingTranslationError, UnsupportedArgumentError):
                raise
            except TranslationError as exc:
                if getattr(exc, "has_node_context", False):
                    raise
                raise _translation_error(node, exc, ctx) from exc
            except Exception as exc:  # noqa: BLE001 - re-raised with the node's context
                raise _translation_error(node, exc, ctx) from exc
        elif node.op == "output":
            return node.args[0]
        elif node.op == "get_attr":
            attr = getattr(owner, node.target)
            if isinstance(attr, torch.Tensor):
                ctx.values[node] = _initializer(ctx, node.target, node.name, attr, node.meta.get("val", attr))
            else:
                ctx.values[node] = attr
        elif node.op != "placeholder":
            raise TranslationError(f"FX node {node.name} has unsupported kind {node.op!r}.")
        if progress is not None:
            progress(index + 1, total)
    raise TranslationError("The FX graph has no output node.")
