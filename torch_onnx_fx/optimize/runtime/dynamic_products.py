"""A linear layer of a dynamically quantized graph, computed on its integers by ONNX Runtime.

PT2E's dynamic quantization (the X86 quantizer with ``is_dynamic=True``) quantizes each linear
layer's input at run time with a scale and zero point computed from its range, dequantizes it
with PyTorch's arithmetic (``Cast``, ``Sub``, ``Mul``: the parameters are no constants, so there
is no ``DequantizeLinear`` for ONNX Runtime to fuse) and multiplies by the dequantized integer
weight. ONNX Runtime ran every such product in float, slower than the float model (BERT: 1.21x
of the float32 export's latency at one thread, 1.37x at two).

:class:`DynamicIntegerProductPass` rewrites ``Gemm(dq(q), DequantizeLinear(W), bias, transB=1)``, ``q``
the uint8 input and ``W`` the ``[N, K]`` integer weight scaled per tensor or per output channel,
into ``MatMulInteger`` over the integers (their sums, exact in int32) scaled once by the
product of the two scales, then adds the bias. PyTorch sums the dequantized products in float32, so the two differ
by float32 rounding only; a layer whose output is quantized again may land one step apart where
a value is within that rounding of a step's boundary.

Both operands are **unsigned** unless the input is quantized to 7 bits: ONNX Runtime's 8-bit
products of an unsigned input and a signed weight (u8s8) add the products in pairs into 16 bits
on x86 CPUs without VNNI, which saturates when both are large (255 x 127 twice passes 32767), and
a dynamically quantized input spans its whole range by construction. Unsigned pairs are widened
before they are multiplied, exact on every CPU. The int8 weight is shifted by 128 in the graph
(``Cast``, ``Add``, ``Cast`` of the stored weight, folded by ONNX Runtime when it loads the model;
the stored integers stay for ``apply_weights``), its zero point with it. An input quantized to
0..127 (``reduce_range=True``) keeps the signed weight: 127 x 128 twice fits. Measured on BERT
(4 layers, hidden 768, sequence 128; docs/quantization.md): u8u8 0.75x of the float32 export's
latency at one thread and 0.84x at two; u8s8 (the 7-bit case) 0.51x and 0.65x.

The input's zero point must be known to fit uint8: the translation of ``choose_qparams`` clips it
to the quantization range (read off the ``Clip``), or it is a constant that is not the model's
state (``apply_weights`` could replace that one). And the int32 sums must not wrap: at most 33,024
products per output.
"""

from __future__ import annotations

import logging

import numpy as np
import onnx_ir as ir

from torch_onnx_fx.optimize.runtime.rewriting import fixed_array, initializer, is_standard, replace, standard_producer

__all__ = ["DynamicIntegerProductPass"]

logger = logging.getLogger(__name__)

_FLOAT = ir.DataType.FLOAT
_UINT8 = ir.DataType.UINT8
_INT8 = ir.DataType.INT8
_INT32 = ir.DataType.INT32
# Nodes that pass a scalar on without changing its value.
_SAME_VALUE = ("Reshape", "Identity", "Squeeze", "Unsqueeze")



def _one_element(value: ir.Value | None) -> bool:
    if value is None or value.shape is None or not all(isinstance(d, int) for d in value.shape):
        return False
    return int(np.prod(list(value.shape), dtype=np.int64)) == 1


def _fits_uint8(value: ir.Value) -> bool:
    """Whether the integer scalar ``value`` is known to lie in [0, 255]: a constant, or a ``Clip``
    with constant bounds inside that range, reached through nodes that keep the value."""
    while True:
        array = fixed_array(value)
        if array is not None:
            return bool(array.size == 1 and 0 <= int(array.reshape(())) <= 255)
        node = value.producer()
        if node is None:
            return False
        if any(is_standard(node, op) for op in _SAME_VALUE):
            value = node.inputs[0]
            continue
        if not is_standard(node, "Clip") or len(node.inputs) < 3:
            return False
        return _clipped_within(node, 255)


def _clipped_within(clip: ir.Node, high: int) -> bool:
    """Whether the ``Clip`` node's constant bounds lie within [0, ``high``]."""
    bounds = [fixed_array(value) for value in clip.inputs[1:3]]
    if any(bound is None or bound.size != 1 for bound in bounds):
        return False
    low, top = (float(bound.reshape(())) for bound in bounds)
    return low >= 0 and top <= high


def _at_most_127(q: ir.Value) -> bool:
    """Whether the uint8 ``q`` is known to stay below 128: the translation of a quantize to a
    range of 7 bits (``reduce_range=True``) clips to it before its cast."""
    cast = standard_producer(q, "Cast")
    clip = standard_producer(cast.inputs[0], "Clip") if cast is not None else None
    return clip is not None and len(clip.inputs) >= 3 and _clipped_within(clip, 127)


def _dequantized_input(value: ir.Value) -> tuple[ir.Value, ir.Value, ir.Value] | None:
    """``(q, zero_point, scale)`` when ``value`` is ``(float(q) - float(zero_point)) * scale``,
    ``q`` uint8, the zero point an integer scalar that fits uint8 and the scale a float32 scalar:
    the translation of ``dequantize_per_tensor.tensor``."""
    mul = standard_producer(value, "Mul")
    sub = standard_producer(mul.inputs[0], "Sub") if mul is not None else None
    cast = standard_producer(sub.inputs[0], "Cast") if sub is not None else None
    zero_cast = standard_producer(sub.inputs[1], "Cast") if sub is not None else None
    if cast is None or zero_cast is None:
        return None
    q, zero_point, scale = cast.inputs[0], zero_cast.inputs[0], mul.inputs[1]
    if q is None or q.dtype != _UINT8 or cast.attributes.get_int("to") != _FLOAT:
        return None
    if zero_point is None or zero_point.dtype not in (ir.DataType.INT64, ir.DataType.INT32, _UINT8):
        return None
    if not (_one_element(zero_point) and _one_element(scale) and scale.dtype == _FLOAT and _fits_uint8(zero_point)):
        return None
    return q, zero_point, scale


def _sums_fit(weight: ir.Value) -> bool:
    """Whether every int32 sum of the product is exact: K terms, each an 8-bit input less its zero
    point times an 8-bit weight less its own, at most 255 x 255 (K below 33,025). ONNX Runtime's
    sums wrap past 2**31, where PyTorch's float sums do not (a 140,000-wide layer came out with
    the wrong sign)."""
    columns = weight.shape[1] if weight.shape is not None else None
    return isinstance(columns, int) and columns * 255 * 255 < 2**31


def _output_channel_weight(value: ir.Value) -> ir.Node | None:
    """The ``DequantizeLinear`` of a 2-D ``[N, K]`` 8-bit weight whose scale is one number or one
    per output channel (axis 0), which is what makes the scale a factor of each output column."""
    node = standard_producer(value, "DequantizeLinear")
    if node is None or "block_size" in node.attributes:
        return None
    weight, scale = node.inputs[0], node.inputs[1]
    if weight is None or weight.dtype not in (_INT8, _UINT8) or weight.shape is None or weight.shape.rank() != 2:
        return None
    if scale is None or scale.dtype != _FLOAT or scale.shape is None:
        return None
    if _one_element(scale):
        return node
    return node if scale.shape.rank() == 1 and node.attributes.get_int("axis", 1) in (0, -2) else None


class DynamicIntegerProductPass(ir.passes.InPlacePass):
    """See the module docstring."""

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        count = 0
        self._constants: dict[tuple[int, str], ir.Value] = {}
        for node in list(ir.traversal.RecursiveGraphIterator(model.graph)):
            if not is_standard(node, "Gemm") or len(node.inputs) not in (2, 3) or node.attributes.get_int("transB", 0) != 1:
                continue
            if node.attributes.get_int("transA", 0) or node.attributes.get_float("alpha", 1.0) != 1.0 or node.attributes.get_float("beta", 1.0) != 1.0:
                continue
            left, right = node.inputs[:2]
            # DequantizedWeightPass flattens a >2-D input with a Reshape in front of the Gemm.
            flatten = standard_producer(left, "Reshape")
            found = _dequantized_input(flatten.inputs[0] if flatten is not None else left)
            weight_node = _output_channel_weight(right) if found is not None else None
            if weight_node is None:
                continue
            if not _sums_fit(weight_node.inputs[0]):
                continue
            q, zero_point, scale = found
            self._rewrite(node, flatten, q, zero_point, scale, weight_node, _at_most_127(q))
            count += 1
        if count:
            logger.debug("DynamicIntegerProductPass: %d dynamically quantized product(s) as MatMulInteger", count)
        return ir.passes.PassResult(model, modified=bool(count))

    def _constant(self, graph: ir.Graph, stem: str, array: np.ndarray) -> ir.Value:
        """One initializer per graph for each of the pass's constants."""
        key = (id(graph), stem)
        if key not in self._constants:
            self._constants[key] = initializer(graph, stem, array)
        return self._constants[key]

    def _rewrite(
        self, node: ir.Node, flatten: ir.Node | None, q: ir.Value, zero_point: ir.Value, scale: ir.Value, weight_node: ir.Node,
        signed_fits: bool,
    ) -> None:
        graph = node.graph
        new_nodes: list[ir.Node] = []

        def add(op_type: str, inputs: list[ir.Value | None], dtype: ir.DataType | None = None, **attributes: object) -> ir.Value:
            new = ir.node(op_type, inputs, attributes=attributes)
            new_nodes.append(new)
            # Typed for the passes after this one (kernel gaps read each value's type).
            new.outputs[0].dtype = dtype or attributes.get("to") or inputs[0].dtype
            return new.outputs[0]

        # Below 128, no two products of the input and a signed weight pass 16 bits together.
        def unsigned(integers: ir.Value) -> ir.Value:
            if integers.dtype == _UINT8 or signed_fits:
                return integers
            shift = self._constant(graph, "unsigned_weight_shift", np.array(128, dtype=np.int32))
            return add("Cast", [add("Add", [add("Cast", [integers], to=_INT32), shift])], to=_UINT8)

        weight, weight_scale = weight_node.inputs[0], weight_node.inputs[1]
        weight_zero = weight_node.inputs[2] if len(weight_node.inputs) > 2 else None
        rows = add("Reshape", [q, flatten.inputs[1]]) if flatten is not None else q
        columns = add("Transpose", [unsigned(weight)], perm=[1, 0])
        if weight_zero is None:
            weight_zero = self._constant(graph, f"weight_zero_point_{weight.dtype.name.lower()}", np.array(0, dtype=weight.dtype.numpy()))
        if zero_point.shape.rank():
            # A one-element vector would read as one zero point per row when there is one row.
            zero_point = add("Reshape", [zero_point, self._constant(graph, "scalar_shape", np.array([], dtype=np.int64))])
        input_zero = add("Cast", [zero_point], to=_UINT8)
        sums = add("MatMulInteger", [rows, columns, input_zero, unsigned(weight_zero)], _INT32)
        factor = add("Mul", [scale, weight_scale], _FLOAT)
        result = add("Mul", [add("Cast", [sums], to=_FLOAT), factor], _FLOAT)
        if len(node.inputs) == 3 and node.inputs[2] is not None:
            # A 2-D linear layer's bias, which the Gemm added to its sums.
            result = add("Add", [result, node.inputs[2]], _FLOAT)
        former = [value.producer() for value in node.inputs]
        replace(node, new_nodes, [result], "integer_product")
        for producer in former:
            _remove_if_unused(producer)


def _remove_if_unused(node: ir.Node | None) -> None:
    """Remove ``node`` when nothing reads its outputs, then its producers the same way: the float
    dequantization and the weight's ``DequantizeLinear`` the product no longer reads."""
    if node is None or node.graph is None or any(out.uses() or out.is_graph_output() for out in node.outputs):
        return
    producers = [value.producer() for value in node.inputs if value is not None]
    node.graph.remove(node, safe=True)
    for producer in producers:
        _remove_if_unused(producer)
