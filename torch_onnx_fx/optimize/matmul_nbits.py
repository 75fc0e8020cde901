"""4-bit weights as ONNX Runtime's ``MatMulNBits``: the ``"onnxruntime"`` fusion.

A weight-only quantized Linear exports as ``DequantizeLinear`` of its integer weight into a
``Gemm`` (``ops/affine_quantized.py``, then ``runtime/dequantized_weights.py``). ONNX Runtime
runs that as float: the weight is dequantized at every call. ``MatMulNBits`` reads the weight
packed two to a byte and dequantizes block by block inside the product.

Its ``accuracy_level`` decides what it computes. Level 1 (set here) dequantizes to float32 and
multiplies in float32: the dequantized weights are the same, only the order of the sums differs,
as between any two float kernels. Level 4, which ONNX Runtime's own ``DequantizeLinear`` →
``MatMul`` fusion uses by default, also quantizes the *activations* to int8 per block: about 4x
faster at decode, but 1-3 % off (docs/quantization.md). It is never chosen here.

Accepted: a float32 ``Gemm(A, DequantizeLinear(W), C?)`` with ``transB=1`` and no scaling, where
``W`` is a constant ``[N, K]`` integer tensor whose values and zero points are 4-bit (-8..7 as
int8, 0..15 as uint8), with one scale per tensor, per output row or per block of K, and a block
length with a power-of-two divisor of at least 16 (``MatMulNBits``'s block). 8-bit weights stay
as they are: level 1 has no 8-bit kernel and runs ~25x slower than float.

The packed weight, scales and zero points are stored with the recipe that remakes them from the
model's weights (``weights/recipes.py``), so ``apply_weights`` replaces them by their state-dict
names, weights exported on the meta device included.
"""

from __future__ import annotations

import json
import logging
import math
from typing import Any

import onnx_ir as ir
import torch
from onnx_ir.tensor_adapters import TorchTensor

from torch_onnx_fx.translate.metadata import QUANTIZED_RANGE_KEY
from torch_onnx_fx.translate.weight_data import without_data
from torch_onnx_fx.optimize.runtime.rewriting import free_initializer_name, is_standard
from torch_onnx_fx.optimize.weights.base import plain_data
from torch_onnx_fx.optimize.weights.recipes import RECIPE_KEY, Recipe, holds_state, remake
from torch_onnx_fx.optimize.weights.transposes import PERM_KEY

__all__ = ["MatMulNBitsPass", "MS_DOMAIN", "store_initializer", "weight_source"]

logger = logging.getLogger(__name__)

MS_DOMAIN = "com.microsoft"
# 4-bit values as each integer type holds them, and what makes them 0..15.
_FOUR_BITS = {ir.DataType.INT8: (-8, 7, 8), ir.DataType.UINT8: (0, 15, 0)}
_SMALLEST_BLOCK = 16
_TORCH_DTYPES = {ir.DataType.INT8: "int8", ir.DataType.UINT8: "uint8", ir.DataType.FLOAT: "float32"}


def weight_source(value: ir.Value) -> Recipe | None:
    """What apply_weights remakes an initializer from: its stored recipe, or the weight itself;
    None for a constant that is not the model's state."""
    # The weights' dtype goes with them: packing changes the stored one, which apply_weights
    # would otherwise check a new weight against.
    dtype = _TORCH_DTYPES.get(value.dtype)  # type: ignore[arg-type]
    if dtype is None:
        return None
    if RECIPE_KEY in value.metadata_props:
        # Stored recipes move and compute within one dtype, their weights have the value's,
        # unless a Cast step in them says the weight's own.
        return _with_dtype(json.loads(value.metadata_props[RECIPE_KEY]), dtype)
    if holds_state(value) and PERM_KEY not in value.metadata_props:
        return {"weight": value.name, "shape": [int(n) for n in value.shape], "dtype": dtype}  # type: ignore[union-attr]
    return None


def _with_dtype(recipe: Recipe, dtype: str) -> Recipe:
    if "weight" in recipe:
        return {"dtype": dtype, **recipe}
    if "op" not in recipe:
        return recipe
    parts = recipe["of"]
    return {**recipe, "of": [_with_dtype(part, dtype) for part in parts] if isinstance(parts, list) else _with_dtype(parts, dtype)}


def _in_four_bits(value: ir.Value, low: int, high: int, declared: str | None) -> bool:
    """Whether the integers are 4-bit: by their values, or for a weight exported without data by
    the range the dequantization declares (apply_weights checks the values it is given)."""
    if without_data(value):
        return declared is not None and low <= int(declared.split(",")[0]) and int(declared.split(",")[1]) <= high
    data = plain_data(value)
    if data is None:
        data = torch.from_numpy(value.const_value.numpy())  # type: ignore[union-attr]
    return bool(data.numel() == 0 or (data.min() >= low and data.max() <= high))


def _block(group: int) -> int | None:
    """MatMulNBits's block: the largest power of two dividing the group, at least 16."""
    block = group & -group
    return block if block >= _SMALLEST_BLOCK else None


def _groups(dequantize: ir.Node, rows: int, columns: int) -> int | None:
    """The length of K sharing one scale (K for per-tensor and per-row scales), or None."""
    scale = dequantize.inputs[1]
    if scale is None or scale.shape is None:
        return None
    shape = [int(n) for n in scale.shape]
    if "block_size" in dequantize.attributes:
        axis = dequantize.attributes.get_int("axis", 1) % 2
        group = dequantize.attributes.get_int("block_size", 0)
        return group if axis == 1 and shape == [rows, columns // group] else None
    if math.prod(shape) == 1:
        return columns
    axis = dequantize.attributes.get_int("axis", 1) % 2
    return columns if axis == 0 and shape == [rows] else None


def store_initializer(graph: ir.Graph, name: str, steps: Any, inputs: list[ir.Value], dtype: ir.DataType) -> ir.Value:
    """A new initializer ``steps(leaves)`` computes from ``inputs`` (initializers), with the
    recipe that remakes it from the model's weights when the inputs are weights (none of them
    is then a plain constant: the caller checks)."""
    local = [{"weight": value.name, "shape": [int(n) for n in value.shape]} for value in inputs]  # type: ignore[union-attr]
    tensors: dict[str, torch.Tensor] = {}
    for value in inputs:
        raw = value.const_value.raw if isinstance(value.const_value, TorchTensor) else None  # type: ignore[union-attr]
        if without_data(value):
            tensors[value.name] = torch.empty(tuple(value.shape), dtype=raw.dtype, device="meta")  # type: ignore[arg-type, union-attr]
        else:
            tensors[value.name] = torch.from_numpy(value.const_value.numpy().copy())  # type: ignore[union-attr]
    with torch.no_grad():
        tensor = remake(steps(local), tensors).contiguous()  # type: ignore[arg-type]
    stored = ir.Value(name=free_initializer_name(graph, name), type=ir.TensorType(dtype), shape=ir.Shape(tensor.shape))
    stored.const_value = TorchTensor(tensor, name=stored.name)
    sources = [weight_source(value) for value in inputs]
    if all(source is not None for source in sources):
        stored.metadata_props[RECIPE_KEY] = json.dumps(steps(sources), separators=(",", ":"))
    graph.register_initializer(stored)
    return stored


def _per_block(recipe: Recipe, shape: list[int], rows: int, blocks: int) -> Recipe:
    """A per-tensor, per-row or per-group parameter as ``[rows, blocks]``, repeated where a
    group spans several MatMulNBits blocks."""
    grid = {"op": "reshape", "shape": [1 if math.prod(shape) == 1 else rows, -1], "of": recipe}
    if math.prod(shape) == 1:
        grid = {"op": "repeat", "axis": 0, "times": rows, "of": grid}
    groups = 1 if len(shape) < 2 else shape[1]
    if blocks != groups:
        grid = {"op": "repeat", "axis": 1, "times": blocks // groups, "of": grid}
    return grid


class MatMulNBitsPass(ir.passes.InPlacePass):
    """See the module docstring."""

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        graph = model.graph
        count = 0
        for node in list(graph):
            fused = self._fused(graph, node)
            if fused is None:
                continue
            dequantize = node.inputs[1].producer()  # type: ignore[union-attr]
            ir.convenience.replace_nodes_and_values(graph, node, [node], [fused], [node.outputs[0]], [fused.outputs[0]])
            if dequantize is not None and not dequantize.outputs[0].uses():
                weights = [value for value in dequantize.inputs if value is not None]
                graph.remove(dequantize, safe=True)
                for value in weights:
                    if value.name in graph.initializers and not value.uses() and not value.is_graph_output():
                        graph.initializers.pop(value.name)
            _drop_flattening(graph, fused)
            _take_bias(fused)
            count += 1
        if count:
            # The shapes of the Reshapes dropped, and any weight nothing reads any more.
            ir.passes.common.RemoveUnusedNodesPass()(model)
            model.opset_imports.setdefault(MS_DOMAIN, 1)
            logger.debug("MatMulNBitsPass: %d product(s) with a 4-bit weight as MatMulNBits", count)
        return ir.passes.PassResult(model, modified=bool(count))

    def _fused(self, graph: ir.Graph, node: ir.Node) -> ir.Node | None:
        found = _four_bit_product(node)
        if found is None:
            return None
        left, weight, scale, zero_point, bias, block = found
        rows, columns = (int(n) for n in weight.shape)  # type: ignore[union-attr]
        offset = _FOUR_BITS[weight.dtype][2]  # type: ignore[index]
        blocks = columns // block
        scale_shape = [int(n) for n in scale.shape]  # type: ignore[union-attr]

        def packed(leaves: list[Recipe]) -> Recipe:
            return {"op": "pack4", "offset": offset, "of": {"op": "reshape", "shape": [rows, blocks, block], "of": leaves[0]}}

        def scales(leaves: list[Recipe]) -> Recipe:
            return {"op": "reshape", "shape": [-1], "of": _per_block(leaves[0], scale_shape, rows, blocks)}

        def points(leaves: list[Recipe]) -> Recipe:
            grid = _per_block(leaves[0], scale_shape, rows, blocks)
            return {"op": "reshape", "shape": [-1], "of": {"op": "pack4", "offset": offset, "of": grid}}

        inputs = [
            left,
            store_initializer(graph, f"{weight.name}.nbits", packed, [weight], ir.DataType.UINT8),
            store_initializer(graph, f"{scale.name}.nbits", scales, [scale], ir.DataType.FLOAT),
        ]
        # Without a zero point MatMulNBits subtracts 8: a signed weight's 0 after the offset.
        if zero_point is not None:
            inputs.append(store_initializer(graph, f"{zero_point.name}.nbits", points, [zero_point], ir.DataType.UINT8))
        if bias is not None:
            inputs += [None] * (5 - len(inputs)) + [bias]
        attributes = {"K": columns, "N": rows, "bits": 4, "block_size": block, "accuracy_level": 1}
        return ir.node("MatMulNBits", inputs, attributes=attributes, domain=MS_DOMAIN)


def _same_dims(first: ir.Shape, second: ir.Shape) -> bool:
    """Whether two shapes' dims are known to be equal (ints, or symbols of the same name)."""
    def known(dim: Any) -> bool:
        return isinstance(dim, int) or getattr(dim, "value", None) is not None

    return len(first) == len(second) and all(known(a) and known(b) and a == b for a, b in zip(first, second))


def _drop_flattening(graph: ir.Graph, fused: ir.Node) -> None:
    """The Reshape to rows in front of the product and the one back after it (laid out for Gemm
    by ``runtime/dequantized_weights.py``) removed: MatMulNBits takes any rank of at least 2, and
    a decode step's 57 products spent 0.3 ms of 6 in the 114 Reshapes."""
    front = fused.inputs[0].producer() if fused.inputs[0] is not None else None
    uses = list(fused.outputs[0].uses())
    if front is None or front.op_type != "Reshape" or len(uses) != 1 or front.inputs[0] is None:
        return
    back, index = uses[0]
    if back.op_type != "Reshape" or index != 0:
        return
    source, result = front.inputs[0], back.outputs[0]
    if source.shape is None or result.shape is None or len(source.shape) < 2:
        return
    if not _same_dims(ir.Shape(list(source.shape)[:-1]), ir.Shape(list(result.shape)[:-1])):
        return
    product = fused.outputs[0]
    fused.replace_input_with(0, source)
    product.shape, product.type = result.shape, result.type
    if result.is_graph_output():
        # The graph's output keeps its name and metadata.
        name, result.name = result.name, None
        product.name = name
        product.metadata_props.update(result.metadata_props)
    result.replace_all_uses_with(product, replace_graph_outputs=True)
    graph.remove(back, safe=True)
    if not front.outputs[0].uses():
        graph.remove(front, safe=True)


def _take_bias(fused: ir.Node) -> None:
    """``Add(MatMulNBits(...), bias)`` with a ``[N]`` float32 bias as the product's own bias
    input (a Linear over 3-D inputs adds its bias after the product)."""
    uses = list(fused.outputs[0].uses())
    if len(fused.inputs) > 5 or len(uses) != 1 or fused.outputs[0].is_graph_output():
        return
    add, index = uses[0]
    if not is_standard(add, "Add"):
        return
    bias = add.inputs[1 - index]
    rows = fused.attributes.get_int("N", 0)
    if bias is None or bias.dtype != ir.DataType.FLOAT or bias.shape is None or list(bias.shape) != [rows]:
        return
    inputs = list(fused.inputs)
    taking = ir.node("MatMulNBits", [*inputs, *([None] * (5 - len(inputs))), bias], attributes={name: attr.value for name, attr in fused.attributes.items()}, domain=MS_DOMAIN)
    ir.convenience.replace_nodes_and_values(fused.graph, fused, [fused, add], [taking], [add.outputs[0]], [taking.outputs[0]])


def _four_bit_product(node: ir.Node) -> tuple[ir.Value, ir.Value, ir.Value, ir.Value | None, ir.Value | None, int] | None:
    """``(A, W, scale, zero point, bias, block)`` of a float32 ``Gemm(A, DequantizeLinear(W), C)``
    MatMulNBits computes (see the module docstring); None otherwise."""
    if not is_standard(node, "Gemm") or len(node.inputs) < 2:
        return None
    attributes = node.attributes
    if attributes.get_int("transB", 0) != 1 or attributes.get_int("transA", 0) != 0:
        return None
    if attributes.get_float("alpha", 1.0) != 1.0 or attributes.get_float("beta", 1.0) != 1.0:
        return None
    left, right = node.inputs[0], node.inputs[1]
    dequantize = right.producer() if right is not None else None
    # Gemm's operands share a type: a float32 scale makes the left one float32 too (the
    # Reshape in front of it, put there after type inference, has none recorded).
    if left is None or left.dtype not in (None, ir.DataType.FLOAT) or not is_standard(dequantize, "DequantizeLinear"):
        return None
    weight, scale = dequantize.inputs[0], dequantize.inputs[1]
    zero_point = dequantize.inputs[2] if len(dequantize.inputs) > 2 else None
    if weight is None or weight.dtype not in _FOUR_BITS or weight.shape is None or weight.shape.rank() != 2:
        return None
    if scale is None or scale.dtype != ir.DataType.FLOAT:
        return None
    parameters = [value for value in (weight, scale, zero_point) if value is not None]
    if any(value.const_value is None or value.is_graph_input() or value.shape is None for value in parameters):
        return None
    # Remade by apply_weights all together or not at all: a weight beside a plain constant would
    # leave a packed copy of the old one.
    if len({weight_source(value) is None for value in parameters}) != 1:
        return None
    low, high, offset = _FOUR_BITS[weight.dtype]
    # Without a zero point MatMulNBits subtracts 8, DequantizeLinear 0: equal for signed weights.
    if zero_point is None and offset != 8:
        return None
    declared = dequantize.metadata_props.get(QUANTIZED_RANGE_KEY)
    if not all(_in_four_bits(value, low, high, declared) for value in parameters if value is not scale):
        return None
    rows, columns = (int(n) for n in weight.shape)
    group = _groups(dequantize, rows, columns)
    block = _block(group) if group else None
    bias = node.inputs[2] if len(node.inputs) > 2 else None
    if bias is not None and (bias.shape is None or list(bias.shape) != [rows] or bias.dtype != ir.DataType.FLOAT):
        return None
    return None if block is None else (left, weight, scale, zero_point, bias, block)
