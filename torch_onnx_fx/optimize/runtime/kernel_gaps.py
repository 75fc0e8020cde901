"""Fill ONNX Runtime's kernel gaps: compute in a wider type, or rewrite, where the CPU runtime
has no kernel for a node's input types.

ONNX allows ``Exp`` on bfloat16 or ``Add`` on int16 at any opset, but ONNX Runtime's CPU provider
implements many operators for a few types only (``Gemm`` has no bfloat16 kernel, ``Atan`` only
float), and a session refuses the whole model (NOT_IMPLEMENTED). ATen computes those cases, so
the exported graph must run too. :class:`KernelGapPass` finds every node whose types have no
kernel in the installed ONNX Runtime (its own kernel registry is the table) and

- computes it in a wider type of the same kind and casts the results back — bfloat16 in
  float32 (what ATen's CPU kernels do internally), 8/16-bit integers and bool in int32 or int64
  (integer results cast back wrap exactly as ATen's fixed-width arithmetic does);
- computes float32 ``Sinh`` and ``Cosh`` in float64, whose float32 kernels overflow before the
  result does;
- rewrites integer ``Gemm`` (MatMul + Add), ``Relu`` (Max with 0) and ``DepthToSpace``/
  ``SpaceToDepth`` (the Reshape, Transpose, Reshape of their definitions) exactly, and float64
  operators the runtime has only for float32 (trigonometry, ``Elu``, ``Softplus``,
  ``InstanceNormalization``…, see :mod:`torch_onnx_fx.optimize.runtime.float64_kernels`) in operators that have
  float64 kernels. Computing those in float32 would be an approximation, which this pass never
  makes. float64 ``Sin`` and ``Cos`` have kernels that lose up to 800 ulps next to their zeros:
  they are rewritten as well, on an exactly reduced argument.

Nodes that no widening fixes are left as they are: ONNX Runtime then names them at session
creation, which is loud, not wrong.
"""

from __future__ import annotations

import functools
import logging
from typing import Callable

import numpy as np
import onnx
import onnx_ir as ir

from torch_onnx_fx.ops.windows import int64s
from torch_onnx_fx.optimize.runtime import float64_kernels
from torch_onnx_fx.optimize.runtime.kernel_table import Kernel, cpu_kernels
from torch_onnx_fx.optimize.runtime.rewriting import initializer, replace

__all__ = ["KernelGapPass", "has_cpu_kernel"]

logger = logging.getLogger(__name__)


@functools.lru_cache(maxsize=1)
def _cpu_kernels() -> dict[str, list[Kernel]]:
    """ONNX Runtime's CPU kernels of the default domain (:mod:`torch_onnx_fx.optimize.runtime.kernel_table`)."""
    return cpu_kernels()


def _type_name(dtype: ir.DataType) -> str:
    return f"tensor({_ONNX_NAMES[dtype]})"


_ONNX_NAMES = {
    ir.DataType.FLOAT: "float", ir.DataType.DOUBLE: "double", ir.DataType.FLOAT16: "float16",
    ir.DataType.BFLOAT16: "bfloat16", ir.DataType.INT8: "int8", ir.DataType.INT16: "int16",
    ir.DataType.INT32: "int32", ir.DataType.INT64: "int64", ir.DataType.UINT8: "uint8",
    ir.DataType.UINT16: "uint16", ir.DataType.UINT32: "uint32", ir.DataType.UINT64: "uint64",
    ir.DataType.BOOL: "bool", ir.DataType.STRING: "string",
}

# Wider types that compute the same results, nearest first. ONNX Runtime computes a float16 node
# that has no kernel in float32 itself (its InsertCastTransformer), and rounds it once, as ATen
# does; but it drops the Casts between two such nodes, so a chain of them rounds once at its end
# where ATen rounds after every operator (x / (x + 1): a quarter of the results off by an ulp).
# float16 nodes in such chains, or next to a Cast (which it removes with its own), are widened
# here with explicit Casts back after each, which the runtime keeps; a lone one is left as
# torch.onnx emits it (``_float16_chains``).
_WIDER: dict[ir.DataType, tuple[ir.DataType, ...]] = {
    ir.DataType.FLOAT16: (ir.DataType.FLOAT,),
    ir.DataType.BFLOAT16: (ir.DataType.FLOAT,),
    ir.DataType.BOOL: (ir.DataType.UINT8, ir.DataType.INT32, ir.DataType.INT64),
    ir.DataType.INT8: (ir.DataType.INT32, ir.DataType.INT64),
    ir.DataType.UINT8: (ir.DataType.INT32, ir.DataType.INT64),
    ir.DataType.INT16: (ir.DataType.INT32, ir.DataType.INT64),
    ir.DataType.UINT16: (ir.DataType.INT32, ir.DataType.INT64),
    ir.DataType.INT32: (ir.DataType.INT64,),
    ir.DataType.UINT32: (ir.DataType.INT64,),
}


def _schema(node: ir.Node, version: int) -> onnx.defs.OpSchema | None:
    try:
        return onnx.defs.get_schema(node.op_type, version, "")
    except onnx.defs.SchemaError:
        return None


def _formal_types(schema: onnx.defs.OpSchema, count: int, formals: list[onnx.defs.OpSchema.FormalParameter]) -> list[str | None]:
    """The type parameter of each of ``count`` actual inputs/outputs (variadic ones repeat)."""
    names: list[str | None] = []
    for i in range(count):
        formal = formals[min(i, len(formals) - 1)] if formals else None
        if formal is None or (i >= len(formals) and formal.option != onnx.defs.OpSchema.FormalParameterOption.Variadic):
            names.append(None)
        else:
            names.append(formal.type_str)
    return names


def _known_bindings(node: ir.Node, schema: onnx.defs.OpSchema) -> dict[str, ir.DataType]:
    """Type parameter -> the dtype bound to it by the node's inputs whose types are known (inputs
    sharing a parameter share its type in a valid graph)."""
    bound: dict[str, ir.DataType] = {}
    for value, param in zip(node.inputs, _formal_types(schema, len(node.inputs), list(schema.inputs))):
        if value is not None and param is not None and value.dtype is not None:
            bound.setdefault(param, value.dtype)
    return bound


def _bindings(node: ir.Node, schema: onnx.defs.OpSchema) -> dict[str, ir.DataType] | None:
    """:func:`_known_bindings`, or None if a parameter has no input of known type."""
    bound = _known_bindings(node, schema)
    params = _formal_types(schema, len(node.inputs), list(schema.inputs))
    if any(p is not None and p not in bound for v, p in zip(node.inputs, params) if v is not None):
        return None
    return bound


def has_cpu_kernel(op_type: str, version: int, bound: dict[str, ir.DataType]) -> bool | None:
    """Whether ONNX Runtime's CPU provider runs ``op_type`` at ``version`` with these type
    parameters; None when it does not know the operator at all (nothing to adapt)."""
    kernels = _cpu_kernels().get(op_type)
    if not kernels:
        return None
    names = {param: _type_name(dtype) for param, dtype in bound.items() if dtype in _ONNX_NAMES}
    for since, until, constraints in kernels:
        if since <= version <= until and all(
            names[param] in allowed for param, allowed in constraints.items() if param in names
        ):
            return True
    return False


def _widening(node: ir.Node, schema: onnx.defs.OpSchema, version: int, bound: dict[str, ir.DataType]) -> dict[str, ir.DataType] | None:
    """Type parameters to widen and the types to widen them to: one parameter if that finds a
    kernel the schema admits, else all widenable ones together (``Pow(int16, int16)`` needs both)."""

    def works(types: dict[str, ir.DataType]) -> bool:
        # None: an operator the runtime expands as a function (NegativeLogLikelihoodLoss); the
        # schema's types are then what it accepts.
        return has_cpu_kernel(node.op_type, version, types) is not False and all(
            _schema_allows(schema, param, dtype) for param, dtype in types.items()
        )

    for param, dtype in bound.items():
        for wider in _wider(node.op_type, dtype):
            if works({**bound, param: wider}):
                return {param: wider}
    options = {p: _wider(node.op_type, d) for p, d in bound.items() if _wider(node.op_type, d)}
    for step in range(max((len(o) for o in options.values()), default=0)):
        choice = {p: o[min(step, len(o) - 1)] for p, o in options.items()}
        if works({**bound, **choice}):
            return choice
    return None


# Integer forms of operators ONNX Runtime implements for floats only, written in operators it
# implements for integers: exact, since nothing is rounded.


def _integer_relu(tape: ir.tape.Tape, node: ir.Node) -> ir.Value | None:
    zero = tape.op("CastLike", [tape.op("Constant", [], {"value": ir.tensor(0, dtype=ir.DataType.INT64)}), node.inputs[0]])
    return tape.op("Max", [node.inputs[0], zero])


def _integer_gemm(tape: ir.tape.Tape, node: ir.Node) -> ir.Value | None:
    attributes = {name: attr.value for name, attr in node.attributes.items()}
    alpha, beta = attributes.get("alpha", 1.0), attributes.get("beta", 1.0)
    if alpha != int(alpha) or beta != int(beta):
        return None  # a fractional scale of integers has no exact integer form

    def scaled(value: ir.Value, factor: float) -> ir.Value:
        if factor == 1:
            return value
        constant = tape.op("Constant", [], {"value": ir.tensor(int(factor), dtype=ir.DataType.INT64)})
        return tape.op("Mul", [value, tape.op("CastLike", [constant, value])])

    a, b = node.inputs[0], node.inputs[1]
    if attributes.get("transA", 0):
        a = tape.op("Transpose", [a], {"perm": [1, 0]})
    if attributes.get("transB", 0):
        b = tape.op("Transpose", [b], {"perm": [1, 0]})
    product = scaled(tape.op("MatMul", [a, b]), alpha)
    bias = node.inputs[2] if len(node.inputs) > 2 else None
    return tape.op("Add", [product, scaled(bias, beta)]) if bias is not None else product


def _blocks(tape: ir.tape.Tape, x: ir.Value, block: int) -> tuple[ir.Value, ...]:
    """N, C, H, W of a 4-d value, each a 1-element vector, and the block size as one."""
    shape = tape.op("Shape", [x])
    dims = [tape.op("Slice", [shape, int64s(tape, [i]), int64s(tape, [i + 1])]) for i in range(4)]
    return (*dims, int64s(tape, [block]))


def _static_dims(x: ir.Value) -> list[int] | None:
    """N, C, H, W of a 4-d value whose sizes are all known."""
    if x.shape is None or x.shape.rank() != 4 or not all(isinstance(d, int) for d in x.shape):
        return None
    return [int(d) for d in x.shape]


def _moved(tape: ir.tape.Tape, node: ir.Node, split: list, order: list[int], joined: list) -> ir.Value:
    """``x`` reshaped to ``split``, transposed by ``order`` and reshaped to ``joined``: with
    sizes all known, the shapes are initializers (no shape arithmetic at run time, and none
    left for a folder, which has already run); otherwise Concats of the sizes read at run time."""
    def shape(dims: list) -> ir.Value:
        if all(isinstance(d, int) for d in dims):
            return initializer(node.graph, f"{node.outputs[0].name or node.op_type}_shape", np.array(dims, dtype=np.int64))
        return tape.op("Concat", dims, {"axis": 0})

    moved = tape.op("Transpose", [tape.op("Reshape", [node.inputs[0], shape(split)])], {"perm": order})
    return tape.op("Reshape", [moved, shape(joined)])


def _depth_to_space(tape: ir.tape.Tape, node: ir.Node) -> ir.Value | None:
    """DepthToSpace is data movement: the Reshape, Transpose, Reshape of its definition."""
    x, block = node.inputs[0], node.attributes["blocksize"].as_int()
    mode = node.attributes["mode"].as_string() if "mode" in node.attributes else "DCR"
    static = _static_dims(x)
    if static is not None:
        n, c, h, w = static
        b, depth, high, wide = block, c // (block * block), h * block, w * block
    else:
        n, c, h, w, b = _blocks(tape, x, block)
        depth = tape.op("Div", [c, tape.op("Mul", [b, b])])
        high, wide = tape.op("Mul", [h, b]), tape.op("Mul", [w, b])
    if mode == "DCR":
        split, order = [n, b, b, depth, h, w], [0, 3, 4, 1, 5, 2]
    else:
        split, order = [n, depth, b, b, h, w], [0, 1, 4, 2, 5, 3]
    return _moved(tape, node, split, order, [n, depth, high, wide])


def _space_to_depth(tape: ir.tape.Tape, node: ir.Node) -> ir.Value | None:
    x, block = node.inputs[0], node.attributes["blocksize"].as_int()
    static = _static_dims(x)
    if static is not None:
        n, c, h, w = static
        b, rows, columns, depth = block, h // block, w // block, c * block * block
    else:
        n, c, h, w, b = _blocks(tape, x, block)
        rows, columns = tape.op("Div", [h, b]), tape.op("Div", [w, b])
        depth = tape.op("Mul", [c, tape.op("Mul", [b, b])])
    return _moved(tape, node, [n, c, rows, b, columns, b], [0, 3, 5, 1, 2, 4], [n, depth, rows, columns])


_INTEGER_REWRITES: dict[str, Callable[[ir.tape.Tape, ir.Node], ir.Value | None]] = {
    "Relu": _integer_relu, "Gemm": _integer_gemm, "DepthToSpace": _depth_to_space, "SpaceToDepth": _space_to_depth,
}

# float32 operators ONNX Runtime computes through an intermediate that overflows before the
# result does: Sinh and Cosh as (exp(x) -/+ exp(-x)) / 2, infinite for 88.7 < |x| <= 89.4 where
# the result is finite (ATen's is). Computed in float64 and rounded once.
_OVERFLOWING_IN_FLOAT32 = frozenset({"Sinh", "Cosh"})
_INTEGERS = frozenset({ir.DataType.INT8, ir.DataType.INT16, ir.DataType.INT32, ir.DataType.INT64,
                       ir.DataType.UINT8, ir.DataType.UINT16, ir.DataType.UINT32, ir.DataType.UINT64})


# Kernels ONNX Runtime registers for half-precision types that then fail at run time ("MLFloat16
# data type is not supported with ScatterElements when reduction is 'add'"): a reducing scatter
# on float16/bfloat16 data. Computed in float32 and rounded once, as ATen's CPU kernel sums.
_REDUCING_SCATTERS = frozenset({"ScatterElements", "ScatterND"})
_HALF_FLOATS = frozenset({ir.DataType.FLOAT16, ir.DataType.BFLOAT16})


def _half_reducing_scatter(node: ir.Node, bound: dict[str, ir.DataType]) -> dict[str, ir.DataType] | None:
    reduction = node.attributes.get("reduction")
    if node.op_type not in _REDUCING_SCATTERS or reduction is None or reduction.value == "none":
        return None
    half = {param: ir.DataType.FLOAT for param, dtype in bound.items() if dtype in _HALF_FLOATS}
    return half or None


# A boolean matrix product is an OR of ANDs: an integer MatMul of 0/1 values, cast back to bool,
# gives it as long as the counts fit; uint8 would wrap at 256 terms to a false 0.
_BOOL_PRODUCT_WIDER = (ir.DataType.INT32, ir.DataType.INT64)


def _wider(op_type: str, dtype: ir.DataType) -> tuple[ir.DataType, ...]:
    if dtype == ir.DataType.BOOL and op_type in ("MatMul", "Gemm"):
        return _BOOL_PRODUCT_WIDER
    return _WIDER.get(dtype, ())


# -- the pass -----------------------------------------------------------------------------------


def _widen(node: ir.Node, schema: onnx.defs.OpSchema, widened: dict[str, ir.DataType], bound: dict[str, ir.DataType]) -> None:
    """Compute ``node`` with the type parameters in ``widened`` bound to wider types: Cast their
    inputs up and their outputs back down to the types they had (``bound``)."""
    tape = ir.tape.Tape()
    inputs = []
    for value, formal in zip(node.inputs, _formal_types(schema, len(node.inputs), list(schema.inputs))):
        if value is not None and formal in widened:
            wider = widened[formal]
            value = tape.op("Cast", [value], {"to": wider}, output=ir.Value(type=ir.TensorType(wider), shape=value.shape))
        inputs.append(value)
    outputs = tape.op_multi_out(node.op_type, inputs, dict(node.attributes), num_outputs=len(node.outputs))
    results = []
    for out, new, formal in zip(node.outputs, outputs, _formal_types(schema, len(node.outputs), list(schema.outputs))):
        new.shape = out.shape
        if formal in widened:
            new.type = ir.TensorType(widened[formal])
            back = out.dtype or bound[formal]
            results.append(tape.op("Cast", [new], {"to": back}, output=ir.Value(type=ir.TensorType(back), shape=out.shape)))
        else:
            new.type = out.type or _known_type(schema, formal, bound)
            results.append(new)
    replace(node, tape.nodes, results, node.op_type.lower())


def _type_outputs(node: ir.Node, schema: onnx.defs.OpSchema) -> None:
    """Give outputs a translation left untyped the type their schema fixes (``IsNaN`` gives bool),
    so the nodes reading them can be checked in turn."""
    if all(output.type is not None for output in node.outputs) or _takes_containers(schema):
        return
    bound = _known_bindings(node, schema)
    for output, param in zip(node.outputs, _formal_types(schema, len(node.outputs), list(schema.outputs))):
        if output.type is None:
            known = _known_type(schema, param, bound)
            if known is not None:
                output.type = known


_DTYPE_OF_NAME = {f"tensor({name})": dtype for dtype, name in _ONNX_NAMES.items()}


def _known_type(schema: onnx.defs.OpSchema, param: str | None, bound: dict[str, ir.DataType]) -> ir.TensorType | None:
    """An output's type when the node left it unset: its parameter's bound type, or the one type
    the schema allows (``Less`` gives bool), so nodes reading it can be checked in turn."""
    if param is None:
        return None
    if param in bound:
        return ir.TensorType(bound[param])
    allowed = next((c.allowed_type_strs for c in schema.type_constraints if c.type_param_str == param), ())
    return ir.TensorType(_DTYPE_OF_NAME[allowed[0]]) if len(allowed) == 1 and allowed[0] in _DTYPE_OF_NAME else None


# Operators whose result in a wider type, cast back, is the result ATen's fixed-width arithmetic
# gives, even for a type the ONNX schema leaves out (``Pow`` on int16): integer results wrap modulo
# the narrow type's range either way. Others are widened only for types their schema allows:
# widening gives no meaning to a graph that has none (a ``ReduceSum`` of bools is a translation
# bug, which ONNX Runtime should report rather than this pass hide).
_WRAPPING_ARITHMETIC = frozenset({
    "Add", "Sub", "Mul", "Div", "Neg", "Abs", "Pow", "Max", "Min", "Mod", "Sum", "Sign",
    "Equal", "Less", "LessOrEqual", "Greater", "GreaterOrEqual", "ReduceMax", "ReduceMin",
    "ReduceSum", "ReduceProd", "CumSum", "MatMul", "Gemm", "Clip", "TopK",
})


# Operators that order, select or move values: on bools (False < True) a wider integer type gives
# the same answer, whether or not the schema admits bool. MatMul too, in int32 (see _wider).
_BOOL_EXACT = frozenset({
    "MatMul",
    "Equal", "Less", "LessOrEqual", "Greater", "GreaterOrEqual", "Max", "Min", "ReduceMax", "ReduceMin",
    "TopK", "Where", "Clip", "DepthToSpace", "SpaceToDepth", "Transpose", "Gather", "GatherElements", "GatherND",
    "ScatterElements", "ScatterND", "Pad", "Tile", "Expand", "Concat", "Slice", "Reshape", "ArgMax", "ArgMin",
})


def _schema_allows(schema: onnx.defs.OpSchema, param: str, dtype: ir.DataType) -> bool:
    allowed = next((c.allowed_type_strs for c in schema.type_constraints if c.type_param_str == param), None)
    return allowed is None or (dtype in _ONNX_NAMES and _type_name(dtype) in allowed)


def _takes_containers(schema: onnx.defs.OpSchema) -> bool:
    """Whether the operator takes or makes sequences or optionals: widening one such node would
    change the element type its consumers expect (a SequenceAt downstream), so none is widened."""
    return any(
        allowed.startswith(("seq(", "optional(")) for constraint in schema.type_constraints for allowed in constraint.allowed_type_strs
    )


def _may_widen(node: ir.Node, schema: onnx.defs.OpSchema, bound: dict[str, ir.DataType]) -> bool:
    if _takes_containers(schema):
        return False
    for param, dtype in bound.items():
        if _schema_allows(schema, param, dtype) or dtype in _HALF_FLOATS:
            # A half type means the same computed in float32 and rounded once (what ATen's CPU
            # kernels do), whether or not the schema lists it (Sin has no bfloat16).
            continue
        exact = _BOOL_EXACT if dtype == ir.DataType.BOOL else _WRAPPING_ARITHMETIC
        if node.op_type not in exact:
            return False
    return True


def _typed_nodes(model: ir.Model, version: int) -> dict[ir.Node, tuple[onnx.defs.OpSchema, dict[str, ir.DataType]]]:
    """Every standard-domain node with type parameters, in graph order, with its schema and the
    types bound to them (its outputs typed by the schema on the way)."""
    typed = {}
    for node in list(ir.traversal.RecursiveGraphIterator(model.graph)):
        if node.domain not in ("", "ai.onnx"):
            continue
        schema = _schema(node, version)
        if schema is None:
            continue
        _type_outputs(node, schema)
        bound = _bindings(node, schema)
        if bound:
            typed[node] = (schema, bound)
    return typed


def _float16_chains(typed: dict[ir.Node, tuple[onnx.defs.OpSchema, dict[str, ir.DataType]]], version: int) -> set[ir.Node]:
    """The float16 gaps (nodes ONNX Runtime runs by casting them to float32, having no float16
    kernel) next to another gap or to a Cast: where it would drop a rounding, since it removes
    the Casts it inserts around a gap together with any Cast they undo (a float32 result cast to
    float16 and back, unrounded)."""
    # An operator the runtime knows no kernel of at all (None) is a function it expands into
    # others, which lack float16 kernels in turn: Mish after a division ran unrounded between the
    # two (a quarter of mish(x / 10)'s float16 results an ulp off).
    gaps = {
        node for node, (_, bound) in typed.items()
        if ir.DataType.FLOAT16 in bound.values() and has_cpu_kernel(node.op_type, version, bound) is not True
    }
    chained = set()
    for node in gaps:
        neighbours = {value.producer() for value in node.inputs if value is not None}
        neighbours |= {user for value in node.outputs for user, _ in value.uses()}
        neighbours.discard(node)
        if any(other in gaps or (other is not None and other.op_type == "Cast") for other in neighbours):
            chained.add(node)
    return chained


class KernelGapPass(ir.passes.InPlacePass):
    """Make every node runnable by ONNX Runtime's CPU provider without changing what it computes
    (see the module docstring); reports the count of nodes it changed."""

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        if not _cpu_kernels():
            return ir.passes.PassResult(model, modified=False)
        total = 0
        # A rewrite can leave nodes that need widening in turn (an int8 Gemm becomes an int8 MatMul).
        for _ in range(3):
            changed = self._adapt(model)
            total += changed
            if not changed:
                break
        if total:
            logger.debug("adapted %d node(s) to ONNX Runtime's CPU kernels", total)
        return ir.passes.PassResult(model, modified=bool(total))

    def _adapt(self, model: ir.Model) -> int:
        version = model.opset_imports.get("", 18)
        changed = 0
        # Typed once for the whole round: widening a node keeps its neighbours' types (it casts
        # its results back), so what is bound here holds for every node until the next round.
        typed = _typed_nodes(model, version)
        chained = _float16_chains(typed, version)
        for node, (schema, bound) in typed.items():
            refused_at_run_time = _half_reducing_scatter(node, bound)
            if refused_at_run_time is not None:
                _widen(node, schema, refused_at_run_time, bound)
                changed += 1
                continue
            if ir.DataType.FLOAT16 in bound.values() and node not in chained:
                continue
            if node.op_type in _OVERFLOWING_IN_FLOAT32 and set(bound.values()) == {ir.DataType.FLOAT}:
                _widen(node, schema, dict.fromkeys(bound, ir.DataType.DOUBLE), bound)
                changed += 1
                continue
            kernel = has_cpu_kernel(node.op_type, version, bound)
            # A type outside the operator's schema is invalid ONNX even where ONNX Runtime's kernel
            # would take it (Compress and NegativeLogLikelihoodLoss of bfloat16): the graph must
            # pass onnx.checker, so such nodes are widened too.
            outside = not all(_schema_allows(schema, param, dtype) for param, dtype in bound.items())
            inexact = node.op_type in float64_kernels.INEXACT and set(bound.values()) == {ir.DataType.DOUBLE}
            if kernel is True and not outside and not inexact:
                continue
            rewrite = float64_kernels.REWRITES.get(node.op_type)
            # An operator the runtime has no kernel of at all (None) is a function it expands
            # into others (Mish into Softplus...), which may lack float64 kernels in turn.
            # Keyed on the data input: Resize's scales stay float32 beside a float64 image.
            if rewrite is not None and node.inputs[0] is not None and node.inputs[0].dtype == ir.DataType.DOUBLE:
                tape = ir.tape.Tape()
                result = rewrite(tape, node)
                if result is not None:
                    replace(node, tape.nodes, [result], node.op_type.lower())
                    changed += 1
                    continue
            if kernel is None and not outside and node not in chained:
                continue
            integer_rewrite = _INTEGER_REWRITES.get(node.op_type)
            if integer_rewrite is not None and set(bound.values()) <= _INTEGERS:
                tape = ir.tape.Tape()
                result = integer_rewrite(tape, node)
                if result is not None:
                    replace(node, tape.nodes, [result], node.op_type.lower())
                    changed += 1
                    continue
            widened = _widening(node, schema, version, bound) if _may_widen(node, schema, bound) else None
            if widened is not None:
                _widen(node, schema, widened, bound)
                changed += 1
        return changed
