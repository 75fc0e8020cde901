"""NaN wins a max or a min, as in ATen.

ONNX Runtime's CPU ``ReduceMax``, ``ReduceMin``, ``ArgMax``, ``ArgMin``, ``MaxPool`` and the max/min
reductions of ``ScatterElements``/``ScatterND`` skip NaN
(a comparison with NaN is false, so it never replaces the running maximum): ``amax([1, nan, 2])``
gave 2, ``argmax`` the 2's index, a max-pooling window holding a NaN its largest number. ATen
propagates it: the maximum and minimum are NaN and their index the first NaN's. A NaN in a model's
activations is a bug its user wants to see, so hiding it is a silent wrong answer.

:class:`NaNPropagationPass` gives every such node of a floating-point input the answer ATen gives:
the same operator applied to the input's NaN mask (0/1 in the input's dtype) says where a NaN
was reduced, and a ``Where`` puts NaN there (for the arg-reductions: the mask's own first maximum,
the first NaN's index; for a max-pooling node's indices, the NaN's position). A float32 max-pooling
node without indices takes a cheaper carrier of the NaN instead (see ``_carries_nan``).

Reductions of one tensor share its NaN mask, and a ``min`` and ``max`` over the same elements (a
dynamic quantization's range, ``aminmax``) the reduction of it too: each guard otherwise reads
the whole tensor twice more.

An input that cannot hold a NaN is left as it is: a ``DequantizeLinear`` of integers with finite
constant scales (``(q - zero point) * scale``). That is every max-pooling of a quantized model,
where the guard cost more than the pooling (ResNet-50's stem: 0.65 ms of a 19 ms int8 inference)
and kept ONNX Runtime from running the pooling on the integers between its ``DequantizeLinear``
and ``QuantizeLinear``.
"""

from __future__ import annotations

import logging
from typing import Callable

import numpy as np
import onnx_ir as ir

from torch_onnx_fx.optimize.runtime.rewriting import fixed_array, initializer, replace

__all__ = ["NaNPropagationPass"]

logger = logging.getLogger(__name__)

_FLOATS = frozenset({ir.DataType.FLOAT, ir.DataType.DOUBLE, ir.DataType.FLOAT16, ir.DataType.BFLOAT16})
_VALUE_REDUCTIONS = frozenset({"ReduceMax", "ReduceMin", "MaxPool"})
_INDEX_REDUCTIONS = frozenset({"ArgMax", "ArgMin"})
_SCATTERS = frozenset({"ScatterElements", "ScatterND"})


def _scatter_extreme(node: ir.Node) -> bool:
    """A scatter that keeps the max or min of what lands on each slot (scatter_reduce and
    index_reduce with amax/amin): ONNX Runtime's keeps a number over a NaN there too."""
    reduction = node.attributes.get("reduction")
    return node.op_type in _SCATTERS and reduction is not None and reduction.as_string() in ("max", "min")


def _never_nan(x: ir.Value) -> bool:
    """Whether ``x`` is a DequantizeLinear of integers with finite constant scales."""
    node = x.producer()
    if node is None or node.op_type != "DequantizeLinear" or node.domain not in ("", "ai.onnx") or len(node.inputs) < 2:
        return False
    data, scale = node.inputs[0], node.inputs[1]
    if data is None or data.dtype is None or not data.dtype.is_integer() or scale is None:
        return False
    return _fixed_without(scale, np.isfinite)


def _fixed_without(value: ir.Value, test: Callable[[np.ndarray], np.ndarray]) -> bool:
    """Whether ``value`` is a constant no one replaces (see ``fixed_array``) that passes ``test``
    everywhere."""
    array = fixed_array(value)
    return array is not None and bool(test(array).all())


def _nan_mask(tape: ir.tape.Tape, x: ir.Value) -> ir.Value:
    return tape.op("Cast", [tape.op("IsNaN", [x])], {"to": x.dtype}, output=ir.Value(type=ir.TensorType(x.dtype), shape=x.shape))


def _attributes(node: ir.Node, *dropped: str) -> dict[str, object]:
    """``node``'s attributes as values for ``tape.op``, less ``dropped``."""
    return {name: attribute.value for name, attribute in node.attributes.items() if name not in dropped}


def _same_reduction(tape: ir.tape.Tape, node: ir.Node, mask: ir.Value, op_type: str | None = None) -> ir.Value:
    """``node``'s operator (or ``op_type``) with ``node``'s attributes and axes, applied to ``mask``."""
    return tape.op(op_type or node.op_type, [mask, *node.inputs[1:]], _attributes(node))


def _carries_nan(node: ir.Node, opset: int) -> bool:
    """Whether a value-only MaxPool can take the NaN carrier: ONNX Runtime's ``Sign`` keeps NaN and
    its ``AveragePool`` runs only in float32 (float16's ``Sign`` of NaN is 0, float64 has no
    ``AveragePool``), and ``AveragePool`` takes ``dilations`` from opset 19."""
    if len(node.outputs) != 1 or node.inputs[0].dtype != ir.DataType.FLOAT:
        return False
    dilations = node.attributes.get("dilations")
    return opset >= 19 or dilations is None or all(d == 1 for d in dilations.as_ints())


def _reduction_key(node: ir.Node) -> tuple[object, ...]:
    """What decides which elements a ReduceMax/ReduceMin takes: its graph, input, axes and
    attributes. Two reductions with one key (a ``min`` and ``max`` of one tensor, as every
    dynamic quantization's ``choose_qparams`` computes) see the same NaNs."""
    axes = node.inputs[1] if len(node.inputs) > 1 else None
    if axes is None:
        axes_key: object = None
    elif axes.const_value is not None:
        axes_key = tuple(int(a) for a in axes.const_value.numpy().reshape(-1))
    else:
        axes_key = id(axes)
    attributes = tuple(sorted((name, str(attribute.value)) for name, attribute in node.attributes.items()))
    return (id(node.graph), id(node.inputs[0]), axes_key, attributes)


def _propagated(tape: ir.tape.Tape, node: ir.Node, opset: int, shared: dict[tuple[object, ...], ir.Value]) -> list[ir.Value]:
    """``node``'s results computed again by a copy of it, with NaN wherever ATen would have one.
    ``shared``: the NaN masks and reduction flags of the nodes rewritten so far, which a later
    reduction of the same tensor (or the same elements) reuses; they come first in the graph,
    so they are defined before it."""
    x = node.inputs[0]
    stem = f"{node.outputs[0].name or node.op_type}__nan"

    def constant(array: np.ndarray) -> ir.Value:
        return initializer(node.graph, stem, array)

    if node.op_type in _SCATTERS:
        # The NaN masks of data and updates scattered with a max (0/1 in float32, which every
        # scatter kernel takes, or float64 for float64 data, which stays float64 throughout): a
        # slot that held or received a NaN is NaN.
        result = _same_reduction(tape, node, x)
        mask_type = ir.DataType.DOUBLE if x.dtype == ir.DataType.DOUBLE else ir.DataType.FLOAT
        flags = []
        for v in (x, node.inputs[2]):
            if not flags and _fixed_without(v, lambda a: ~np.isnan(a)):
                # A constant base without NaN (the -inf or zeros a model scatters into) flags
                # nothing: zeros of its shape, made from the shape (not stored at its size).
                zero = ir.tensor(np.zeros(1, dtype=mask_type.numpy()))
                shape = constant(np.array(v.const_value.shape.numpy(), dtype=np.int64))
                flags.append(tape.op("ConstantOfShape", [shape], {"value": zero}))
                continue
            flag_key = ("scatter flags", id(node.graph), id(v), mask_type)
            if flag_key not in shared:
                shared[flag_key] = tape.op("Cast", [tape.op("IsNaN", [v])], {"to": mask_type})
            flags.append(shared[flag_key])
        attributes = _attributes(node)
        attributes["reduction"] = "max"
        seen = tape.op(node.op_type, [flags[0], node.inputs[1], flags[1]], attributes)
        nan = constant(np.array(np.nan, dtype=x.dtype.numpy()))
        return [tape.op("Where", [tape.op("Cast", [seen], {"to": ir.DataType.BOOL}), nan, result])]
    if node.op_type == "MaxPool" and len(node.outputs) == 2:
        mask = _nan_mask(tape, x)
        # Values and indices: where a window holds a NaN, the mask's own maximum is its position.
        attributes = _attributes(node)
        # ATen's window scan takes every NaN it meets, so its index is the window's last NaN:
        # pool each NaN's flat position + 1 (in float64, exact for any tensor size) and take the
        # largest, in MaxPool's own flat numbering.
        values, indices = tape.op_multi_out("MaxPool", [x], attributes, num_outputs=2)
        double = ir.DataType.DOUBLE
        count = tape.op("Cast", [tape.op("Size", [x])], {"to": double})
        one = constant(np.array(1.0))
        positions = tape.op("Reshape", [tape.op("Range", [one, tape.op("Add", [count, one]), one]), tape.op("Shape", [x])])
        marked = tape.op("Mul", [tape.op("Cast", [mask], {"to": double}), positions])
        last_nan = tape.op("MaxPool", [marked], attributes)
        where = tape.op("Greater", [last_nan, constant(np.array(0.0))])
        nan_index = tape.op("Sub", [tape.op("Cast", [last_nan], {"to": ir.DataType.INT64}), constant(np.array(1, dtype=np.int64))])
        nan = constant(np.array(np.nan, dtype=x.dtype.numpy()))
        return [tape.op("Where", [where, nan, values]), tape.op("Where", [where, nan_index, indices])]
    if node.op_type == "MaxPool" and _carries_nan(node, opset):
        # A NaN carrier instead of a mask: the window average of Sign(x) is finite (|sign| <= 1)
        # unless a NaN is in the window, so ``p - p`` is +0 or NaN, and subtracting +0 leaves every
        # value (-0 included) as it is. Four nodes where the mask and Where take five: pooling
        # networks have many of these.
        attributes = _attributes(node, "storage_order")
        attributes["count_include_pad"] = 1
        if opset < 19:
            attributes.pop("dilations", None)
        average = tape.op("AveragePool", [tape.op("Sign", [x])], attributes)
        return [tape.op("Sub", [_same_reduction(tape, node, x), tape.op("Sub", [average, average])])]
    key = _reduction_key(node) if node.op_type in ("ReduceMax", "ReduceMin") else None
    if key is not None and key in shared:
        result = _same_reduction(tape, node, x)
        return [tape.op("Where", [shared[key], constant(np.array(np.nan, dtype=x.dtype.numpy())), result])]
    mask_key = ("mask", id(node.graph), id(x))
    if mask_key not in shared:
        shared[mask_key] = _nan_mask(tape, x)
    mask = shared[mask_key]
    result = _same_reduction(tape, node, x)
    if node.op_type in _VALUE_REDUCTIONS:
        # Max of the 0/1 mask over the same windows or axes (MaxPool's padding counts as -inf).
        seen = _same_reduction(tape, node, mask, "MaxPool" if node.op_type == "MaxPool" else "ReduceMax")
        nan = constant(np.array(np.nan, dtype=x.dtype.numpy()))
        flags = tape.op("Cast", [seen], {"to": ir.DataType.BOOL})
        if key is not None:
            shared[key] = flags
        return [tape.op("Where", [flags, nan, result])]
    # ArgMax of the mask finds the first NaN (for ArgMin as well: NaN is its minimum in ATen).
    first_nan = _same_reduction(tape, node, mask, "ArgMax")
    axis = node.attributes.get("axis")
    keepdims = node.attributes.get("keepdims")
    axes = constant(np.array([axis.as_int() if axis is not None else 0], dtype=np.int64))
    # Opset 18's form; below 18, downgrade.LateReductionsPass makes the axes an attribute.
    seen = tape.op("ReduceMax", [mask, axes], {"keepdims": keepdims.as_int() if keepdims is not None else 1})
    return [tape.op("Where", [tape.op("Cast", [seen], {"to": ir.DataType.BOOL}), first_nan, result])]


def _typed(nodes: list[ir.Node], dtype: ir.DataType) -> None:
    """Types for the new values, which the kernel-gap pass after this one reads (a bfloat16
    ``Where`` is computed in float32 there)."""
    for node in nodes:
        for index, value in enumerate(node.outputs):
            if node.op_type == "Cast":
                kind = ir.DataType(node.attributes["to"].as_int())
            elif node.op_type == "IsNaN":
                kind = ir.DataType.BOOL
            elif node.op_type in _SCATTERS:
                kind = node.inputs[0].dtype
            elif node.op_type in ("ArgMax", "ArgMin", "Size", "Shape") or (node.op_type == "MaxPool" and index == 1):
                kind = ir.DataType.INT64
            elif node.op_type in ("Greater",):
                kind = ir.DataType.BOOL
            elif node.op_type in ("Range", "Reshape", "Mul", "Add", "Sub") or (node.op_type == "MaxPool" and node.inputs[0].dtype == ir.DataType.DOUBLE):
                kind = node.inputs[0].dtype
            elif node.op_type in ("Constant", "ConstantOfShape"):
                kind = node.attributes["value"].as_tensor().dtype
            elif node.op_type == "Where":
                kind = node.inputs[1].dtype
            else:
                kind = dtype
            value.type = ir.TensorType(kind)


class NaNPropagationPass(ir.passes.InPlacePass):
    """See the module docstring. Nodes whose input dtype is unknown are left as they are."""

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        count = 0
        opset = model.graph.opset_imports.get("", 0)
        shared: dict[tuple[object, ...], ir.Value] = {}
        for node in list(ir.traversal.RecursiveGraphIterator(model.graph)):
            if node.domain not in ("", "ai.onnx") or not (node.op_type in _VALUE_REDUCTIONS | _INDEX_REDUCTIONS or _scatter_extreme(node)):
                continue
            x = node.inputs[0] if node.inputs else None
            if x is None or x.dtype not in _FLOATS or _never_nan(x):
                continue
            tape = ir.tape.Tape()
            results = _propagated(tape, node, opset, shared)
            _typed(list(tape.nodes), x.dtype)
            replace(node, tape.nodes, results, "nan")
            count += 1
        if count:
            logger.debug("NaNPropagationPass: %d max/min node(s) propagate NaN", count)
        return ir.passes.PassResult(model, modified=bool(count))
