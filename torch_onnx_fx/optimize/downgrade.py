"""Downgrade: rewrite a graph built at opset 18 to an older opset (13–17), or say why it cannot.

Translations are written for opset 18 (torchlib's) or newer. Hardware toolchains still ask for
opset 13–17, so for those the graph is built at 18 and every node whose operator changed between
the requested opset and 18 is rewritten to the older form here — axes inputs back to attributes,
``Shape(start, end)`` as a ``Slice`` of the shape, ``LayerNormalization`` (17) written out — each by
an entry of :data:`_ADAPTERS`. An operator that changed but has no adapter is kept when the old
schema takes exactly what the node uses (inputs, attributes, input types); otherwise, and for an
operator that does not exist at the requested opset, a :class:`TranslationError` names the node,
the operator and the lowest opset it needs. torch.onnx instead converts with ONNX's version
converter after the fact and keeps opset 18 when that fails; here the requested opset is what
comes out, or the export fails with the reason.
"""

from __future__ import annotations

import functools
import logging
from typing import Callable

import numpy as np
import onnx
import onnx_ir as ir

from torch_onnx_fx.errors import TranslationError

__all__ = ["DowngradeOpsetPass", "LateReductionsPass", "BUILD_OPSET", "lowest_opset"]

logger = logging.getLogger(__name__)

# The opset graphs are built at when an older one is requested.
BUILD_OPSET = 18


@functools.cache
def lowest_opset(op_type: str) -> int | None:
    """The first opset of the standard domain that defines ``op_type``, None if none does."""
    versions = [s.since_version for s in onnx.defs.get_all_schemas_with_history() if s.name == op_type and s.domain == ""]
    return min(versions) if versions else None


@functools.cache
def _schema(op_type: str, opset: int) -> onnx.defs.OpSchema | None:
    try:
        return onnx.defs.get_schema(op_type, opset, "")
    except onnx.defs.SchemaError:
        return None


def _where(node: ir.Node) -> str:
    namespace = node.metadata_props.get("namespace", "")
    return f"node {node.name!r} ({node.op_type})" + (f" from {namespace}" if namespace else "")


def _fail(node: ir.Node, target: int, why: str) -> TranslationError:
    return TranslationError(
        f"Cannot build opset {target}: {_where(node)} {why} Export at a newer opset_version, or "
        "supply a translation that avoids this operator through custom_translation_table."
    )


def _constant_ints(node: ir.Node, index: int, target: int, what: str) -> list[int] | None:
    """The constant int list at input ``index`` (None when the input is absent)."""
    if index >= len(node.inputs) or node.inputs[index] is None:
        return None
    tensor = ir.convenience.get_const_tensor(node.inputs[index])
    if tensor is None:
        raise _fail(node, target, f"takes its {what} as a computed input; opset {target} needs them constant.")
    return [int(v) for v in np.asarray(tensor.numpy()).reshape(-1)]


def _initializer(graph: ir.Graph, name: str, array: np.ndarray) -> ir.Value:
    """A constant the rewritten form needs, as an initializer of ``graph``."""
    value = ir.Value(name=name, shape=ir.Shape(array.shape))
    value.const_value = ir.tensor(array, name=name)
    value.type = ir.TensorType(value.const_value.dtype)
    graph.register_initializer(value)
    return value


# -- adapters: (node, target opset) -> None, rewriting the node in place -------------------------


def _reduce_axes_to_attribute(node: ir.Node, target: int) -> None:
    """Reduce*-18 (ReduceSum-13) take axes as an input; older ones as an attribute."""
    axes = _constant_ints(node, 1, target, "axes")
    noop = node.attributes.pop("noop_with_empty_axes", None)
    node.resize_inputs(1)
    if axes:
        node.attributes["axes"] = ir.AttrInt64s("axes", axes)
    elif noop is not None and noop.as_int():
        # No axes and noop_with_empty_axes: the input unchanged.
        node.op_type = "Identity"
        node.attributes.clear()


def _split_to_older(node: ir.Node, target: int) -> None:
    """Split-18's num_outputs became explicit sizes (older Splits divide evenly, or take sizes);
    below 13 the sizes are an attribute."""
    count = node.attributes.pop("num_outputs", None)
    if count is not None and len(node.inputs) < 2:
        axis = node.attributes["axis"].as_int() if "axis" in node.attributes else 0
        shape = node.inputs[0].shape if node.inputs[0] is not None else None
        size = shape[axis] if shape is not None and -shape.rank() <= axis < shape.rank() else None
        if isinstance(size, int):
            chunk = -(-size // count.as_int())
            sizes = [min(chunk, size - i * chunk) for i in range(count.as_int())]
            if len(set(sizes)) > 1:
                split = _initializer(node.graph, f"{node.name}_split", np.array(sizes, dtype=np.int64))
                node.resize_inputs(2)
                node.replace_input_with(1, split)
        # Otherwise older Splits divide evenly into the outputs, as num_outputs does when the
        # size divides; an uneven dynamic size fails at run time, never silently.
    if target < 13 and len(node.inputs) > 1:
        sizes = _constant_ints(node, 1, target, "split sizes")
        node.resize_inputs(1)
        if sizes is not None:
            node.attributes["split"] = ir.AttrInt64s("split", sizes)


def _axes_input_to_attribute(node: ir.Node, target: int) -> None:
    """Squeeze/Unsqueeze-13 take axes as an input; older ones as an attribute."""
    axes = _constant_ints(node, 1, target, "axes")
    node.resize_inputs(1)
    if axes is not None:
        node.attributes["axes"] = ir.AttrInt64s("axes", axes)


def _shape_slice(node: ir.Node, target: int) -> None:
    """Shape-15's start/end attributes become a Slice of the whole shape."""
    start = node.attributes.pop("start", None)
    end = node.attributes.pop("end", None)
    if start is None and end is None:
        return
    graph = node.graph
    (output,) = node.outputs
    whole = ir.node("Shape", inputs=[node.inputs[0]], metadata_props=dict(node.metadata_props))
    whole.outputs[0].name = f"{output.name}_whole"
    bounds = [start.as_int() if start is not None else 0, end.as_int() if end is not None else np.iinfo(np.int64).max]
    constants = [
        _initializer(graph, f"{output.name}_{label}", np.array([bound], dtype=np.int64))
        for label, bound in zip(("start", "end"), bounds)
    ]
    graph.insert_before(node, whole)
    node.op_type = "Slice"
    node.resize_inputs(3)
    node.replace_input_with(0, whole.outputs[0])
    node.replace_input_with(1, constants[0])
    node.replace_input_with(2, constants[1])


def _layer_norm_written_out(node: ir.Node, target: int) -> None:
    """LayerNormalization (opset 17) as ReduceMean/Sub/Mul/Sqrt/Div, in float32 for 16-bit
    inputs as the operator's default stash_type does."""
    x, scale, bias = (list(node.inputs) + [None, None])[:3]
    if any(o.uses() or o.is_graph_output() for o in node.outputs[1:]):
        raise _fail(node, target, "uses LayerNormalization's mean/inverse-std outputs, which need opset 17.")
    rank = x.shape.rank() if x.shape is not None else None
    if rank is None:
        raise _fail(node, target, "normalizes an input of unknown rank (LayerNormalization needs opset 17).")
    axis = node.attributes["axis"].as_int() if "axis" in node.attributes else -1
    axes = list(range(axis % rank, rank))
    epsilon = node.attributes["epsilon"].as_float() if "epsilon" in node.attributes else 1e-5
    wide = x.dtype in (ir.DataType.FLOAT16, ir.DataType.BFLOAT16)
    compute_type = ir.DataType.FLOAT if wide else x.dtype
    meta = dict(node.metadata_props)
    tape = ir.tape.Tape()

    def const(number: float) -> ir.Value:
        return _initializer(node.graph, f"{node.name}_c{len(tape.nodes)}", np.array(number, dtype=compute_type.numpy()))

    h = tape.op("Cast", [x], {"to": compute_type}, metadata_props=meta) if wide else x
    mean = tape.op("ReduceMean", [h], {"axes": axes, "keepdims": 1}, metadata_props=meta)
    centered = tape.op("Sub", [h, mean], metadata_props=meta)
    variance = tape.op("ReduceMean", [tape.op("Mul", [centered, centered], metadata_props=meta)], {"axes": axes, "keepdims": 1}, metadata_props=meta)
    std = tape.op("Sqrt", [tape.op("Add", [variance, const(epsilon)], metadata_props=meta)], metadata_props=meta)
    y = tape.op("Div", [centered, std], metadata_props=meta)
    if wide:
        y = tape.op("Cast", [y], {"to": x.dtype}, metadata_props=meta)
    if scale is not None:
        y = tape.op("Mul", [y, scale], metadata_props=meta)
    if bias is not None:
        y = tape.op("Add", [y, bias], metadata_props=meta)
    ir.convenience.replace_nodes_and_values(
        node.graph, node, [node], list(tape.nodes), [node.outputs[0]], [y]
    )


def _no_max_min_reduction(node: ir.Node, target: int) -> None:
    """ScatterElements/ScatterND-18 added reduction="max"/"min"; -16 added "add"/"mul"."""
    reduction = node.attributes.get("reduction")
    if reduction is None:
        return
    kind = reduction.as_string()
    if kind == "none":
        del node.attributes["reduction"]
    elif kind in ("max", "min") or target < 16:
        raise _fail(node, target, f"scatters with reduction={kind!r}, which needs opset {18 if kind in ('max', 'min') else 16}.")


def _pad_axes_to_full(node: ir.Node, target: int) -> None:
    """Pad-18's axes input: older Pads take pads for every axis."""
    if len(node.inputs) < 4 or node.inputs[3] is None:
        return
    raise _fail(node, target, "pads selected axes (Pad's axes input needs opset 18).")


def _softmax_last_axis(node: ir.Node, target: int) -> None:
    """Before opset 13, Softmax/LogSoftmax/Hardmax flatten to 2-D at ``axis``: the same as the
    newer operator only when ``axis`` is the last dimension."""
    axis = node.attributes["axis"].as_int() if "axis" in node.attributes else -1
    rank = node.inputs[0].shape.rank() if node.inputs[0] is not None and node.inputs[0].shape is not None else None
    if axis == -1 or (rank is not None and axis % rank == rank - 1):
        node.attributes["axis"] = ir.AttrInt64("axis", -1 if rank is None else rank - 1)
        return
    raise _fail(node, target, f"normalizes over axis {axis}, not the last one, which needs opset 13.")


def _mish_written_out(node: ir.Node, target: int) -> None:
    """Mish (opset 18) as x * tanh(softplus(x))."""
    (x,) = node.inputs
    meta = dict(node.metadata_props)
    tape = ir.tape.Tape()
    result = tape.op("Mul", [x, tape.op("Tanh", [tape.op("Softplus", [x], metadata_props=meta)], metadata_props=meta)], metadata_props=meta)
    ir.convenience.replace_nodes_and_values(node.graph, node, [node], list(tape.nodes), [node.outputs[0]], [result])


def _reshape_without_allowzero(node: ir.Node, target: int) -> None:
    """Reshape-14's allowzero: with it, a 0 in the shape means a zero-sized dim; before 14 a 0
    copies the input's dim. The same whenever the (constant) shape has no 0."""
    allowzero = node.attributes.pop("allowzero", None)
    if allowzero is None or not allowzero.as_int():
        return
    shape = _constant_ints(node, 1, target, "target shape (with allowzero=1)")
    if shape is None or 0 in shape:
        raise _fail(node, target, "reshapes to a shape with a literal 0 dim (allowzero needs opset 14).")


def _hardswish_written_out(node: ir.Node, target: int) -> None:
    """HardSwish (opset 14) as x * HardSigmoid(x, alpha=1/6, beta=0.5)."""
    (x,) = node.inputs
    meta = dict(node.metadata_props)
    tape = ir.tape.Tape()
    gate = tape.op("HardSigmoid", [x], {"alpha": 1.0 / 6.0, "beta": 0.5}, metadata_props=meta)
    result = tape.op("Mul", [x, gate], metadata_props=meta)
    ir.convenience.replace_nodes_and_values(node.graph, node, [node], list(tape.nodes), [node.outputs[0]], [result])


_REDUCTIONS_18 = ("ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare")

# op_type -> [(opset in which the newer form appeared, adapter to the form before it)]; applied
# newest first for a target below that opset.
_ADAPTERS: dict[str, list[tuple[int, Callable[[ir.Node, int], None]]]] = {
    **{name: [(18, _reduce_axes_to_attribute)] for name in _REDUCTIONS_18},
    "ReduceSum": [(13, _reduce_axes_to_attribute)],
    "Split": [(18, _split_to_older)],
    "Squeeze": [(13, _axes_input_to_attribute)],
    "Unsqueeze": [(13, _axes_input_to_attribute)],
    "Shape": [(15, _shape_slice)],
    "LayerNormalization": [(17, _layer_norm_written_out)],
    "Mish": [(18, _mish_written_out)],
    "Reshape": [(14, _reshape_without_allowzero)],
    "HardSwish": [(14, _hardswish_written_out)],
    "ScatterElements": [(18, _no_max_min_reduction)],
    "ScatterND": [(18, _no_max_min_reduction)],
    "Pad": [(18, _pad_axes_to_full)],
    "Softmax": [(13, _softmax_last_axis)],
    "LogSoftmax": [(13, _softmax_last_axis)],
    "Hardmax": [(13, _softmax_last_axis)],
}


def _check_compatible(node: ir.Node, old: onnx.defs.OpSchema, target: int) -> None:
    """An operator whose older version takes the same inputs, attributes and types."""
    max_inputs = len(old.inputs) if not old.inputs or old.inputs[-1].option != onnx.defs.OpSchema.FormalParameterOption.Variadic else 1 << 30
    used = max((i + 1 for i, v in enumerate(node.inputs) if v is not None), default=0)
    if used > max_inputs:
        raise _fail(node, target, f"uses input {used - 1}, which {node.op_type}-{old.since_version} does not have.")
    unknown = sorted(set(node.attributes) - set(old.attributes))
    if unknown:
        raise _fail(node, target, f"sets attribute(s) {unknown}, which {node.op_type}-{old.since_version} does not have.")
    allowed = {c.type_param_str: set(c.allowed_type_strs) for c in old.type_constraints}
    for formal, value in zip(old.inputs, node.inputs):
        if value is None or value.dtype is None:
            continue
        types = allowed.get(formal.type_str)
        if types is not None and _onnx_type_name(value.dtype) not in types:
            raise _fail(node, target, f"takes {value.dtype.name} for input {formal.name!r}, which {node.op_type}-{old.since_version} does not accept.")


def _onnx_type_name(dtype: ir.DataType) -> str:
    return f"tensor({onnx.helper.tensor_dtype_to_string(int(dtype)).split('.')[-1].lower()})"


class DowngradeOpsetPass(ir.passes.InPlacePass):
    """Rewrite a model built at :data:`BUILD_OPSET` to ``target`` (< BUILD_OPSET), in place."""

    def __init__(self, target: int):
        super().__init__()
        self.target = target

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        target = self.target
        rewritten = 0
        for node in list(ir.traversal.RecursiveGraphIterator(model.graph)):
            if node.domain not in ("", "ai.onnx"):
                continue
            newer = _schema(node.op_type, BUILD_OPSET)
            old = _schema(node.op_type, target)
            if newer is not None and old is not None and newer.since_version == old.since_version:
                continue
            adapters = [a for changed_in, a in sorted(_ADAPTERS.get(node.op_type, ()), key=lambda e: -e[0]) if target < changed_in <= BUILD_OPSET]
            for adapter in adapters:
                adapter(node, target)
                rewritten += 1
            if node.graph is None:
                continue  # replaced by other nodes, made in their old forms
            # An adapted node is checked against its operator's old schema like any other.
            old = _schema(node.op_type, target)
            if old is None:
                lowest = lowest_opset(node.op_type)
                raise _fail(node, target, f"needs opset {lowest} or newer ({node.op_type} does not exist at {target}).")
            _check_compatible(node, old, target)
        model.graph.opset_imports[""] = target
        model.opset_imports[""] = target
        logger.debug("DowngradeOpsetPass: %d node(s) rewritten for opset %d", rewritten, target)
        return ir.passes.PassResult(model, modified=True)


class LateReductionsPass(ir.passes.InPlacePass):
    """Reductions written after :class:`DowngradeOpsetPass` (by the runtime passes, which follow
    it) brought to ``target``'s form: those passes write opset 18's axes input, which ReduceMean
    and the others take as an attribute before 18 (ReduceSum before 13). A float64
    InstanceNormalization spelled out in ReduceMean was an invalid model at opset 17."""

    def __init__(self, target: int):
        super().__init__()
        self.target = target

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        count = 0
        for node in list(ir.traversal.RecursiveGraphIterator(model.graph)):
            if node.domain not in ("", "ai.onnx") or len(node.inputs) < 2:
                continue
            for changed_in, adapter in _ADAPTERS.get(node.op_type, ()):
                if adapter is _reduce_axes_to_attribute and self.target < changed_in:
                    adapter(node, self.target)
                    count += 1
        if count:
            # The axes constants the attributes replaced.
            ir.passes.common.RemoveUnusedNodesPass()(model)
        return ir.passes.PassResult(model, modified=bool(count))
