"""Weights read only through slices, concatenations and reshapes are stored rearranged, with the
recipe that remakes them.

torchlib's LSTM and GRU reorder PyTorch's gates (input, forget, cell, output) into ONNX's order
and stack both directions: 5-9 Slice/Concat/Unsqueeze nodes per weight, run at every inference
because the optimizer keeps weights unfolded (``optimize._weights_kept``) so that
``apply_weights`` can replace them by name. torch.onnx folds them into anonymous constants, and
its ``apply_weights`` then silently changes nothing those constants hold.

:class:`FoldWeightArrangementsPass` folds each such region of pure data movement into the
initializers it ends in, when that costs no memory (the weights it reads are read by nothing
else), and records on each a JSON recipe (``RECIPE_KEY``) naming the weights it is made of, their
shapes, and the moves. :func:`remake` runs a recipe on new weights: ``apply_weights`` uses it.
Data movement is exact in every dtype, so the folded graph computes the same numbers.
"""

from __future__ import annotations

import json
import logging
import math
from typing import Any, Collection, Mapping

import onnx_ir as ir
import torch
from onnx_ir.tensor_adapters import TorchTensor

from torch_onnx_fx.weight_transposes import plain_data, without_data

__all__ = ["FoldWeightArrangementsPass", "RECIPE_KEY", "recipe_sources", "remake"]

logger = logging.getLogger(__name__)

RECIPE_KEY = "pkg.torch_onnx_fx.weight_recipe"

# A recipe is JSON: {"weight": name, "shape": [...]} for a weight as the model has it, or
# {"op": ..., "of": recipe | [recipes], ...} for one move applied to recipes.
Recipe = dict[str, Any]

_MOVES = frozenset({"Slice", "Concat", "Unsqueeze", "Squeeze", "Reshape", "Transpose", "Identity"})


def _constant_ints(value: ir.Value | None) -> list[int] | None:
    """A small integer constant's values (Slice bounds, axes, shapes); None when not constant."""
    if value is None:
        return None
    tensor = value.const_value
    if tensor is None or tensor.dtype not in (ir.DataType.INT64, ir.DataType.INT32) or tensor.size > 64:
        return None
    return [int(item) for item in tensor.numpy().reshape(-1)]


def remake(recipe: Recipe, weights: Mapping[str, torch.Tensor]) -> torch.Tensor:
    """The stored tensor a recipe makes from the named weights (views where the moves allow)."""
    if "weight" in recipe:
        return weights[recipe["weight"]]
    op = recipe["op"]
    if op == "cat":
        return torch.cat([remake(part, weights) for part in recipe["of"]], dim=recipe["axis"])
    tensor = remake(recipe["of"], weights)
    if op == "slice":
        start, stop, step = recipe["range"]
        index = [slice(None)] * tensor.dim()
        index[recipe["axis"]] = slice(start, stop, step)
        return tensor[tuple(index)]
    if op == "reshape":
        return tensor.reshape(recipe["shape"])
    if op == "permute":
        return tensor.permute(recipe["perm"])
    raise ValueError(f"unknown weight recipe move {op!r}")


def recipe_sources(recipe: Recipe) -> dict[str, list[int]]:
    """The weights a recipe reads, with the shape each must have."""
    if "weight" in recipe:
        return {recipe["weight"]: list(recipe["shape"])}
    parts = recipe["of"] if isinstance(recipe["of"], list) else [recipe["of"]]
    sources: dict[str, list[int]] = {}
    for part in parts:
        sources.update(recipe_sources(part))
    return sources


def _moved(node: ir.Node, recipes: Mapping[ir.Value, Recipe], shapes: Mapping[ir.Value, tuple[int, ...]]) -> Recipe | None:
    """The recipe of the node's output when it is a move of recipes by constant amounts."""
    op = node.op_type
    inputs = node.inputs
    if op == "Concat":
        if not inputs or any(value not in recipes for value in inputs):
            return None
        rank = len(shapes[inputs[0]])  # type: ignore[index]
        axis = node.attributes["axis"].as_int() % rank
        return {"op": "cat", "axis": axis, "of": [recipes[value] for value in inputs]}  # type: ignore[index]
    data = inputs[0] if inputs else None
    if data is None or data not in recipes:
        return None
    recipe, shape = recipes[data], shapes[data]
    if op == "Identity":
        return recipe
    if op == "Transpose":
        perm_attribute = node.attributes.get("perm")
        perm = list(perm_attribute.as_ints()) if perm_attribute is not None else list(reversed(range(len(shape))))
        return {"op": "permute", "perm": perm, "of": recipe}
    if op == "Slice":
        starts, ends = _constant_ints(inputs[1]), _constant_ints(inputs[2])
        axes = _constant_ints(inputs[3]) if len(inputs) > 3 and inputs[3] is not None else list(range(len(starts or [])))
        steps = _constant_ints(inputs[4]) if len(inputs) > 4 and inputs[4] is not None else [1] * len(starts or [])
        if starts is None or ends is None or axes is None or steps is None or any(step <= 0 for step in steps):
            return None
        for start, end, axis, step in zip(starts, ends, axes, steps):
            axis %= len(shape)
            recipe = {"op": "slice", "axis": axis, "range": list(slice(start, end, step).indices(shape[axis])), "of": recipe}
        return recipe
    shape_out = _reshaped(node, shape)
    return None if shape_out is None else {"op": "reshape", "shape": shape_out, "of": recipe}


def _reshaped(node: ir.Node, shape: tuple[int, ...]) -> list[int] | None:
    """The output shape of an Unsqueeze, Squeeze or Reshape by constant amounts (None: not)."""
    op, inputs = node.op_type, node.inputs
    if op == "Reshape":
        target = _constant_ints(inputs[1] if len(inputs) > 1 else None)
        if target is None:
            return None
        allowzero = node.attributes.get("allowzero")
        if allowzero is None or allowzero.as_int() == 0:
            target = [shape[axis] if dim == 0 else dim for axis, dim in enumerate(target)]
        if target.count(-1) == 1:
            known = -math.prod(target)
            target[target.index(-1)] = math.prod(shape) // known if known else 0
        return target
    axes_attribute = node.attributes.get("axes")
    axes = list(axes_attribute.as_ints()) if axes_attribute is not None else _constant_ints(inputs[1] if len(inputs) > 1 else None)
    if op == "Unsqueeze":
        if axes is None:
            return None
        rank = len(shape) + len(axes)
        inserted = {axis % rank for axis in axes}
        dims = iter(shape)
        return [1 if axis in inserted else next(dims) for axis in range(rank)]
    if axes is None:
        if len(inputs) > 1 and inputs[1] is not None:
            return None
        return [dim for dim in shape if dim != 1]
    removed = {axis % len(shape) for axis in axes}
    return [dim for axis, dim in enumerate(shape) if axis not in removed]


class FoldWeightArrangementsPass(ir.passes.InPlacePass):
    """Regions of Slice/Concat/Unsqueeze/Squeeze/Reshape/Transpose/Identity reading only named
    weights and constants become the initializers they compute, each with its recipe, when the
    weights they read are read by nothing else (so the stored bytes do not grow)."""

    def __init__(self, weights: Collection[str]):
        super().__init__()
        self.weights = set(weights)

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        graph = model.graph
        recipes: dict[ir.Value, Recipe] = {}
        shapes: dict[ir.Value, tuple[int, ...]] = {}
        for name, value in graph.initializers.items():
            tensor = value.const_value
            if name in self.weights and tensor is not None and not value.is_graph_input() and value.shape is not None:
                recipes[value] = {"weight": name, "shape": [int(dim) for dim in tensor.shape]}
                shapes[value] = tuple(recipes[value]["shape"])
        if not recipes:
            return ir.passes.PassResult(model, modified=False)
        # The moves, in graph order, and the weight each region started from (union-find by id).
        region_of: dict[ir.Value | ir.Node, Any] = {value: value for value in recipes}

        def root(item: Any) -> Any:
            while region_of[item] is not item:
                region_of[item] = region_of[region_of[item]]
                item = region_of[item]
            return item

        moves: list[ir.Node] = []
        for node in graph:
            if node.op_type not in _MOVES or node.domain not in ("", "ai.onnx") or len(node.outputs) != 1:
                continue
            recipe = _moved(node, recipes, shapes)
            if recipe is None:
                continue
            output = node.outputs[0]
            try:
                shape = tuple(_meta(recipe).shape)
            except (RuntimeError, IndexError, ValueError) as exc:
                logger.debug("not folding %s: %s", node.name, exc)
                continue
            if output.shape is not None and output.shape.is_static() and tuple(output.shape) != shape:
                continue
            recipes[output], shapes[output] = recipe, shape
            moves.append(node)
            region_of[node] = node
            region_of[output] = node
            for value in node.inputs:
                if value in recipes:
                    region_of[root(value)] = root(node)
        regions: dict[int, list[ir.Node]] = {}
        for node in moves:
            regions.setdefault(id(root(node)), []).append(node)
        folded = sum(self._fold(graph, region, recipes, shapes) for region in regions.values())
        if folded:
            ir.passes.common.RemoveUnusedNodesPass()(model)
            logger.debug("stored %d rearranged weight(s) with their recipes", folded)
        return ir.passes.PassResult(model, modified=bool(folded))

    def _fold(
        self, graph: ir.Graph, region: list[ir.Node], recipes: Mapping[ir.Value, Recipe], shapes: Mapping[ir.Value, tuple[int, ...]]
    ) -> int:
        inside = set(region)
        ends = [
            node.outputs[0] for node in region
            if any(user not in inside for user, _ in node.outputs[0].uses())
        ]
        # A graph output inside the region would keep its nodes, and the weights they read, alive.
        if not ends or any(node.outputs[0].is_graph_output() for node in region):
            return 0
        # The weights the moves move (a Concat's inputs, the others' first): a weight given as a
        # Slice bound or a shape would not be in the recipe, and could not be replaced.
        moved = [value for node in region for value in (node.inputs if node.op_type == "Concat" else node.inputs[:1])]
        if any(value is not None and "weight" in recipes.get(value, {}) for node in region
               for value in (node.inputs[1:] if node.op_type != "Concat" else ())):
            return 0
        sources = {value for value in moved if value is not None and "weight" in recipes.get(value, {})}
        # Stored bytes may not grow: every weight read must be read by this region only, and the
        # region's results (a slice of a weight read twice would be a copy beside it) no larger.
        if any(user not in inside for value in sources for user, _ in value.uses()):
            return 0
        if sum(math.prod(shapes[value]) for value in ends) > sum(math.prod(shapes[value]) for value in sources):
            return 0
        empty = any(without_data(value) for value in sources)
        tensors = {value.name: value.const_value.raw if empty else plain_data(value) for value in sources}  # type: ignore[union-attr]
        if any(tensor is None for tensor in tensors.values()):
            return 0
        for number, end in enumerate(ends):
            recipe = recipes[end]
            first = next(iter(recipe_sources(recipe)))
            if empty:
                tensor = _meta(recipe, next(iter(tensors.values())).dtype)
            else:
                with torch.no_grad():
                    tensor = remake(recipe, tensors)  # type: ignore[arg-type]
            stored = ir.Value(name=f"{first}.arranged{number if len(ends) > 1 else ''}", type=end.type, shape=ir.Shape(tensor.shape))
            stored.const_value = TorchTensor(tensor.detach(), name=stored.name)
            stored.metadata_props[RECIPE_KEY] = json.dumps(recipe, separators=(",", ":"))
            graph.register_initializer(stored)
            end.replace_all_uses_with(stored)
        return len(ends)


def _meta(recipe: Recipe, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """The recipe run on meta tensors of its weights' shapes: its result's shape, checked."""
    weights = {name: torch.empty(shape, dtype=dtype, device="meta") for name, shape in recipe_sources(recipe).items()}
    return remake(recipe, weights)
