"""``fusion="onnxruntime"``: the products of one input with several weights as one product.

A decoder layer multiplies its normalized hidden state by the q, k and v projections (and the
MLP's gate and up), each ``MatMul(x, W_i)`` with a weight stored transposed ([K, N_i]). At a
decode step each is a matrix-vector product, and with more threads every one is dispatched to the
pool on its own: one ``MatMul(x, [W_1 | W_2 | ...])`` and a ``Split`` of its columns makes one
dispatch of the same dot products (each column is the same sum over K). The packed weight is
stored with its recipe (``cat`` of the permuted weights), so ``apply_weights`` remakes it from a
state dict, and the weights it replaces are read by nothing else (the stored bytes do not grow).
"""

from __future__ import annotations

import json

import numpy as np
import onnx_ir as ir
import torch
from onnx_ir.tensor_adapters import TorchTensor

from torch_onnx_fx.optimize.runtime.rewriting import free_initializer_name, initializer, is_standard
from torch_onnx_fx.optimize.weights.base import plain_data
from torch_onnx_fx.optimize.weights.recipes import RECIPE_KEY, Recipe
from torch_onnx_fx.optimize.weights.transposes import PERM_KEY, WEIGHT_KEY

__all__ = ["PackedProjectionsPass"]


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
        sizes = initializer(graph, name + ".widths", np.array(widths, dtype=np.int64))
        first = nodes[0]
        product = ir.node("MatMul", [x, stored], metadata_props=dict(first.metadata_props))
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
        for weight in weights:
            graph.initializers.pop(weight.name)
