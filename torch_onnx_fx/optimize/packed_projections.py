"""``fusion="onnxruntime"``: the products of one input with several weights as one product.

A decoder layer multiplies its normalized hidden state by the q, k and v projections (and the
MLP's gate and up), each ``MatMul(x, W_i)`` with a weight stored transposed ([K, N_i]). At a
decode step each is a matrix-vector product, and with more threads every one is dispatched to the
pool on its own: one ``MatMul(x, [W_1 | W_2 | ...])`` and a ``Split`` of its columns makes one
dispatch of the same dot products (each column is the same sum over K). The packed weight is
stored with its recipe (``cat`` of the permuted weights), so ``apply_weights`` remakes it from a
state dict, and the weights it replaces are read by nothing else (the stored bytes do not grow).

The same holds for 4-bit products (``MatMulNBits``, after ``matmul_nbits.py``): its packed weight,
scales and zero points are laid out row by row of N, so the rows of several products with one K
and block are one product's. Each output column is the same block-wise dot product as before, so
the results are bit for bit those of the separate products (measured on a decode step). At one
thread this saves 4 % of a ~60 M-parameter Llama's int4 step (q/k/v and gate/up: 57 products
become 33).
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import onnx_ir as ir
import torch
from onnx_ir.tensor_adapters import TorchTensor

from torch_onnx_fx.optimize.matmul_nbits import MS_DOMAIN, store_initializer, weight_source
from torch_onnx_fx.optimize.runtime.rewriting import free_initializer_name, initializer, is_standard
from torch_onnx_fx.optimize.weights.base import plain_data
from torch_onnx_fx.optimize.weights.recipes import RECIPE_KEY, Recipe
from torch_onnx_fx.optimize.weights.transposes import PERM_KEY, WEIGHT_KEY

__all__ = ["PackedNBitsPass", "PackedProjectionsPass"]


def _recipe(weight: ir.Value) -> Recipe | None:
    """How apply_weights remakes a weight stored transposed, or None for any other initializer."""
    name, perm = weight.metadata_props.get(WEIGHT_KEY), weight.metadata_props.get(PERM_KEY)
    if not name or perm != "1,0" or weight.shape is None or weight.shape.rank() != 2:
        return None
    rows, columns = (int(n) for n in weight.shape)
    return {"op": "permute", "perm": [1, 0], "of": {"weight": name, "shape": [columns, rows]}}


class PackedProjectionsPass(ir.passes.InPlacePass):
    """See the module docstring. Taken for float32 products of one input with two or more weights
    stored transposed, each read by that product only."""

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        graph = model.graph
        products: dict[ir.Value, list[ir.Node]] = {}
        for node in graph:
            if not is_standard(node, "MatMul") or len(node.inputs) != 2:
                continue
            x, weight = node.inputs
            if (x is None or x.dtype != ir.DataType.FLOAT or weight.name not in graph.initializers
                    or len(weight.uses()) != 1 or _recipe(weight) is None or plain_data(weight) is None):
                continue
            products.setdefault(x, []).append(node)
        packed = 0
        for x, nodes in products.items():
            rows = {int(node.inputs[1].shape[0]) for node in nodes}
            if len(nodes) < 2 or len(rows) != 1 or x.shape is None or x.shape.rank() < 2 or x.shape[-1] != next(iter(rows)):
                continue
            self._pack(graph, x, nodes)
            packed += 1
        return ir.passes.PassResult(model, modified=bool(packed))

    @staticmethod
    def _pack(graph: ir.Graph, x: ir.Value, nodes: list[ir.Node]) -> None:
        weights = [node.inputs[1] for node in nodes]
        widths = [int(weight.shape[1]) for weight in weights]
        with torch.no_grad():
            data = torch.cat([plain_data(weight) for weight in weights], dim=1)
        name = free_initializer_name(graph, weights[0].name + ".packed")
        stored = ir.Value(name=name, type=weights[0].type, shape=ir.Shape(data.shape))
        stored.const_value = TorchTensor(data, name=name)
        stored.metadata_props[RECIPE_KEY] = json.dumps(
            {"op": "cat", "axis": 1, "of": [_recipe(weight) for weight in weights]}, separators=(",", ":"),
        )
        graph.register_initializer(stored)
        product = ir.node("MatMul", [x, stored], metadata_props=dict(nodes[0].metadata_props))
        _split_product(graph, product, nodes, widths, name)
        for weight in weights:
            graph.initializers.pop(weight.name)


def _split_product(graph: ir.Graph, product: ir.Node, nodes: list[ir.Node], widths: list[int], name: str) -> None:
    """``product`` (of the columns of ``nodes``' products side by side) and a Split of it in place
    of ``nodes``, each of whose results the Split's part replaces."""
    first = nodes[0]
    sizes = initializer(graph, name + ".widths", np.array(widths, dtype=np.int64))
    split = ir.node("Split", [product.outputs[0], sizes], attributes={"axis": -1}, num_outputs=len(nodes),
                    metadata_props=dict(first.metadata_props))
    product.outputs[0].name = name + ".product"
    product.outputs[0].dtype = ir.DataType.FLOAT
    graph.insert_before(first, [product, split])
    for node, output in zip(nodes, split.outputs):
        old = node.outputs[0]
        output.name, output.type, output.shape = f"{old.name}.split", old.type, old.shape
        old.replace_all_uses_with(output, replace_graph_outputs=True)
        graph.remove(node, safe=True)


class PackedNBitsPass(ir.passes.InPlacePass):
    """See the module docstring. Taken for ``MatMulNBits`` products of one input whose attributes
    other than N agree, each with its own initializers (weight, scales, and zero points and bias
    if any, in all of them or in none), all remade by ``apply_weights`` or none of them."""

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        graph = model.graph
        groups: dict[tuple[Any, ...], list[ir.Node]] = {}
        for node in graph:
            key = _nbits_key(graph, node)
            if key is not None:
                groups.setdefault(key, []).append(node)
        packed = 0
        for nodes in groups.values():
            if len(nodes) > 1:
                self._pack(graph, nodes)
                packed += 1
        return ir.passes.PassResult(model, modified=bool(packed))

    @staticmethod
    def _pack(graph: ir.Graph, nodes: list[ir.Node]) -> None:
        first = nodes[0]
        widths = [node.attributes.get_int("N", 0) for node in nodes]
        name = free_initializer_name(graph, first.inputs[1].name + ".packed")  # type: ignore[union-attr]
        inputs: list[ir.Value | None] = [first.inputs[0]]
        for index in range(1, len(first.inputs)):
            parts = [node.inputs[index] for node in nodes]
            if parts[0] is None:
                inputs.append(None)
                continue
            # Rows of N one after another, with the parts' recipes joined the same way.
            inputs.append(store_initializer(graph, f"{name}.{index}", _rows_joined, parts, parts[0].dtype))  # type: ignore[arg-type]
            for part in parts:
                graph.initializers.pop(part.name)  # type: ignore[union-attr]
        attributes = {key: attr.value for key, attr in first.attributes.items()}
        attributes["N"] = sum(widths)
        product = ir.node("MatMulNBits", inputs, attributes=attributes, domain=MS_DOMAIN,
                          metadata_props=dict(first.metadata_props))
        _split_product(graph, product, nodes, widths, name)


def _rows_joined(parts: list[Recipe]) -> Recipe:
    return {"op": "cat", "axis": 0, "of": parts}


def _nbits_key(graph: ir.Graph, node: ir.Node) -> tuple[Any, ...] | None:
    """What a MatMulNBits must share with others to be packed with them, or None if it cannot be."""
    if node.op_type != "MatMulNBits" or node.domain != MS_DOMAIN or len(node.outputs) != 1 or node.inputs[0] is None:
        return None
    if len(node.inputs) > 4 and node.inputs[4] is not None:
        return None  # g_idx reorders K per product
    parameters = [value for value in node.inputs[1:] if value is not None]
    if any(value.name not in graph.initializers or len(value.uses()) != 1 or value.is_graph_output()
           or value.shape is None for value in parameters):
        return None
    sources = {weight_source(value) is None for value in parameters}
    if len(sources) != 1:
        return None
    attributes = tuple(sorted((key, repr(attr.value)) for key, attr in node.attributes.items() if key != "N"))
    present = tuple(value is not None for value in node.inputs)
    return (node.inputs[0], attributes, present, sources.pop())
