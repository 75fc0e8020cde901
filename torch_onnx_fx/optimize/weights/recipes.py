"""Weights read only through data movement and exact arithmetic are stored as the result, with
the recipe that remakes them.

torchlib's LSTM and GRU reorder PyTorch's gates (input, forget, cell, output) into ONNX's order
and stack both directions: 5-9 Slice/Concat/Unsqueeze nodes per weight; Gemma's norms scale by
``1 + weight``; a BatchNormalization folded into its Conv (``batchnorm_into_conv.py``) scales the
Conv's weight by ``scale / sqrt(var + eps)``. All of it runs at every inference because the
optimizer keeps weights unfolded (``optimizer._weights_kept``) so that ``apply_weights`` can replace
them by name. torch.onnx folds them into anonymous constants, and its ``apply_weights`` then
silently changes nothing those constants hold.

:class:`FoldWeightRecipesPass` folds each region of such nodes reading only weights and small
constants into the initializers it ends in, when that costs no memory (the weights it reads are
read by nothing else) or little (results of at most ``_SMALL_COPY`` elements), and records on
each a JSON recipe (``RECIPE_KEY``) naming the weights it is made of, their shapes, the
constants and the steps. :func:`remake` runs a recipe on new
weights: ``apply_weights`` uses it. The steps are data movement, exact in every dtype, and the
floating-point operations IEEE 754 rounds correctly (add, subtract, multiply, divide, square root,
negation, casts between float16, float32 and float64), which PyTorch computes to the same bits as
ONNX Runtime would in the weight's dtype.
"""

from __future__ import annotations

import json
import logging
import math
from typing import Any, Mapping, Sequence

import numpy as np
import onnx_ir as ir
import torch
from onnx_ir.tensor_adapters import TorchTensor

from torch_onnx_fx.translate.metadata import INPUT_KIND_KEY
from torch_onnx_fx.optimize.weights.base import WeightsPass, plain_data
from torch_onnx_fx.translate.weight_data import without_data
from torch_onnx_fx.optimize.weights.transposes import PERM_KEY

__all__ = ["FoldWeightRecipesPass", "RECIPE_KEY", "holds_state", "recipe_dtypes", "recipe_sources", "remake"]

logger = logging.getLogger(__name__)

RECIPE_KEY = "pkg.torch_onnx_fx.weight_recipe"

# A recipe is JSON: {"weight": name, "shape": [...]} for a weight as the model has it,
# {"constant": [values], "shape": [...], "dtype": name} for a small constant, or
# {"op": ..., "of": recipe | [recipes], ...} for one step applied to recipes.
Recipe = dict[str, Any]

_MOVES = frozenset({"Slice", "Concat", "Unsqueeze", "Squeeze", "Reshape", "Transpose", "Identity"})
# Correctly rounded in IEEE 754: torch gives the bits ONNX Runtime would, in the same dtype.
_BINARY = {"Add": "add", "Sub": "sub", "Mul": "mul", "Div": "div"}
_UNARY = {"Sqrt": "sqrt", "Neg": "neg"}
_FOLDABLE = _MOVES | set(_BINARY) | set(_UNARY) | {"Cast"}
_CASTS = frozenset({ir.DataType.FLOAT, ir.DataType.DOUBLE, ir.DataType.FLOAT16})
# Constants larger than this stay in the graph (a recipe carries its constants as JSON).
_CONSTANT_LIMIT = 64
# Elements a fold may store beside weights that stay (a per-channel vector of a wide layer).
_SMALL_COPY = 4096


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
    if "constant" in recipe:
        return torch.tensor(recipe["constant"], dtype=getattr(torch, recipe["dtype"])).reshape(recipe["shape"])
    op = recipe["op"]
    if op == "cat":
        return torch.cat([remake(part, weights) for part in recipe["of"]], dim=recipe["axis"])
    if op in _BINARY.values():
        left, right = (remake(part, weights) for part in recipe["of"])
        # A constant is made on the CPU: it goes where the weights are (meta: shapes only).
        if "constant" in recipe["of"][0]:
            left = left.to(right.device)
        elif "constant" in recipe["of"][1]:
            right = right.to(left.device)
        return getattr(torch, op)(left, right)
    tensor = remake(recipe["of"], weights)
    if op in _UNARY.values():
        return getattr(torch, op)(tensor)
    if op == "cast":
        return tensor.to(getattr(torch, recipe["dtype"]))
    if op == "slice":
        start, stop, step = recipe["range"]
        index = [slice(None)] * tensor.dim()
        index[recipe["axis"]] = slice(start, stop, step)
        return tensor[tuple(index)]
    if op == "reshape":
        return tensor.reshape(recipe["shape"])
    if op == "permute":
        return tensor.permute(recipe["perm"])
    if op == "repeat":
        return torch.repeat_interleave(tensor, recipe["times"], dim=recipe["axis"])
    if op == "pack4":
        return _pack4(tensor, recipe["offset"])
    raise ValueError(f"unknown weight recipe move {op!r}")


def _pack4(tensor: torch.Tensor, offset: int) -> torch.Tensor:
    """4-bit integers (plus ``offset``, making them 0..15) two to a byte along the last axis,
    the first in the low half: ONNX Runtime's ``MatMulNBits`` layout. An odd last axis is padded
    with a zero."""
    shifted = tensor.to(torch.int16) + offset
    if shifted.device.type != "meta" and shifted.numel() and (shifted.min() < 0 or shifted.max() > 15):
        raise ValueError(
            f"a weight stored as 4-bit integers holds values from {int(shifted.min()) - offset} to "
            f"{int(shifted.max()) - offset}, past {-offset}..{15 - offset}"
        )
    unsigned = shifted.to(torch.uint8)
    if unsigned.shape[-1] % 2:
        unsigned = torch.nn.functional.pad(unsigned, (0, 1))
    return unsigned[..., 0::2] | (unsigned[..., 1::2] << 4)


def recipe_dtypes(recipe: Recipe) -> dict[str, str]:
    """The dtype each weight a recipe reads must have, where the recipe says (a recipe that
    changes the dtype, such as 4-bit packing, says; the others keep their weights' dtype)."""
    if "weight" in recipe:
        return {recipe["weight"]: recipe["dtype"]} if "dtype" in recipe else {}
    if "constant" in recipe:
        return {}
    parts = recipe["of"] if isinstance(recipe["of"], list) else [recipe["of"]]
    return {name: dtype for part in parts for name, dtype in recipe_dtypes(part).items()}


def recipe_sources(recipe: Recipe) -> dict[str, list[int]]:
    """The weights a recipe reads, with the shape each must have."""
    if "weight" in recipe:
        return {recipe["weight"]: list(recipe["shape"])}
    if "constant" in recipe:
        return {}
    parts = recipe["of"] if isinstance(recipe["of"], list) else [recipe["of"]]
    sources: dict[str, list[int]] = {}
    for part in parts:
        sources.update(recipe_sources(part))
    return sources


_TORCH_FLOATS = {ir.DataType.FLOAT: "float32", ir.DataType.DOUBLE: "float64", ir.DataType.FLOAT16: "float16", ir.DataType.BFLOAT16: "bfloat16"}


def holds_state(value: ir.Value) -> bool:
    """Whether an initializer is the model's state (parameters, buffers, lifted tensor constants)
    or a tensor the optimizer stored for it (transposed, computed): what apply_weights replaces."""
    return any(key in value.metadata_props for key in (INPUT_KIND_KEY, PERM_KEY, RECIPE_KEY))


def _constant_recipe(value: ir.Value) -> Recipe | None:
    """A small floating-point constant of the graph as a recipe leaf (its values exact as JSON
    doubles); None for anything else. The model's state (parameters, buffers persistent or not,
    lifted tensor constants) and tensors the optimizer stored for weights (transposed, computed)
    are not constants: apply_weights replaces them, and a recipe must not keep their old values."""
    if holds_state(value):
        return None
    tensor = value.const_value
    if tensor is None or tensor.dtype not in _TORCH_FLOATS or tensor.size > _CONSTANT_LIMIT or without_data(value):
        return None
    values = np.asarray(tensor.numpy()).astype(np.float64)
    return {"constant": values.reshape(-1).tolist(), "shape": list(values.shape), "dtype": _TORCH_FLOATS[tensor.dtype]}


def _data_inputs(node: ir.Node) -> Sequence[ir.Value | None]:
    """The inputs a step computes on (the others are its constant amounts: bounds, shapes)."""
    if node.op_type == "Concat" or node.op_type in _BINARY:
        return node.inputs
    return node.inputs[:1]


def _computed(node: ir.Node, recipes: Mapping[ir.Value, Recipe], shapes: Mapping[ir.Value, tuple[int, ...]]) -> Recipe | None:
    """The recipe of the node's output when it is a step on recipes by constant amounts."""
    op = node.op_type
    inputs = node.inputs
    if op in _BINARY or op in _UNARY:
        # The arithmetic is exact only in floating point (ONNX's integer Div truncates).
        if node.outputs[0].dtype not in _TORCH_FLOATS or any(value not in recipes for value in inputs):
            return None
        if op in _UNARY:
            return {"op": _UNARY[op], "of": recipes[inputs[0]]}  # type: ignore[index]
        return {"op": _BINARY[op], "of": [recipes[value] for value in inputs]}  # type: ignore[index]
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
    if op == "Cast":
        # Between float32, float64 and float16 both libraries round to nearest even (bfloat16,
        # which ONNX Runtime has rounded differently across versions, is left to run).
        to = node.outputs[0].dtype
        if to not in _CASTS or data.dtype not in _CASTS:
            return None
        return {"op": "cast", "dtype": _TORCH_FLOATS[to], "of": recipe}
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


class FoldWeightRecipesPass(WeightsPass):
    """Regions of data movement (Slice/Concat/Unsqueeze/Squeeze/Reshape/Transpose/Identity) and
    exact floating-point arithmetic (Add/Sub/Mul/Div/Sqrt/Neg, float Casts) reading only named
    weights and small constants become the initializers they compute, each with its recipe, when
    the weights they read are read by nothing else (so the stored bytes do not grow) or the
    results are small."""

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        graph = model.graph
        recipes: dict[ir.Value, Recipe] = {}
        shapes: dict[ir.Value, tuple[int, ...]] = {}
        # The weights' values and everything computed from them, in regions (union-find by id);
        # constants take part in steps but join no region (one shared 1.0 would merge them all).
        region_of: dict[ir.Value | ir.Node, Any] = {}
        for name, value in graph.initializers.items():
            tensor = value.const_value
            if tensor is None or value.is_graph_input() or value.shape is None:
                continue
            if name in self.weights:
                recipes[value] = {"weight": name, "shape": [int(dim) for dim in tensor.shape]}
                if tensor.dtype in _TORCH_FLOATS:
                    # A Cast step may store the result in another dtype: apply_weights checks
                    # new weights against this one.
                    recipes[value]["dtype"] = _TORCH_FLOATS[tensor.dtype]
                region_of[value] = value
            else:
                constant = _constant_recipe(value)
                if constant is None:
                    continue
                recipes[value] = constant
            shapes[value] = tuple(int(dim) for dim in tensor.shape)
        if not region_of:
            return ir.passes.PassResult(model, modified=False)

        def root(item: Any) -> Any:
            while region_of[item] is not item:
                region_of[item] = region_of[region_of[item]]
                item = region_of[item]
            return item

        steps: list[ir.Node] = []
        for node in graph:
            if node.op_type not in _FOLDABLE or node.domain not in ("", "ai.onnx") or len(node.outputs) != 1:
                continue
            if not any(value in region_of for value in _data_inputs(node)):
                continue
            recipe = _computed(node, recipes, shapes)
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
            steps.append(node)
            region_of[node] = node
            region_of[output] = node
            for value in node.inputs:
                if value in region_of:
                    region_of[root(value)] = root(node)
        regions: dict[int, list[ir.Node]] = {}
        for node in steps:
            regions.setdefault(id(root(node)), []).append(node)
        folded = sum(self._fold(graph, region, recipes, shapes) for region in regions.values())
        if folded:
            ir.passes.common.RemoveUnusedNodesPass()(model)
            logger.debug("stored %d weight(s) computed from weights, with their recipes", folded)
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
        # The weights the steps compute on: a weight given as a Slice bound or a shape would not
        # be in the recipe, and could not be replaced.
        computed = [value for node in region for value in _data_inputs(node)]
        if any(value is not None and "weight" in recipes.get(value, {}) for node in region
               for value in node.inputs[len(_data_inputs(node)):]):
            return 0
        sources = {value for value in computed if value is not None and "weight" in recipes.get(value, {})}
        # Stored bytes may not grow past a small copy: every weight read must be read by this
        # region only, and the region's results (a slice of a weight read twice would be a copy
        # beside it) no larger; or the results are a few thousand numbers (RWKV's ``1 - mix``
        # beside ``mix``: a vector per layer kept, a node per layer and inference saved).
        stored = sum(math.prod(shapes[value]) for value in ends)
        if stored > _SMALL_COPY and (
            any(user not in inside for value in sources for user, _ in value.uses())
            or _bytes(ends, shapes) > _bytes(sources, shapes)
        ):
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
            stored = ir.Value(name=f"{first}.computed{number if len(ends) > 1 else ''}", type=end.type, shape=ir.Shape(tensor.shape))
            stored.const_value = TorchTensor(tensor.detach(), name=stored.name)
            stored.metadata_props[RECIPE_KEY] = json.dumps(recipe, separators=(",", ":"))
            graph.register_initializer(stored)
            end.replace_all_uses_with(stored)
        return len(ends)


def _bytes(values: Any, shapes: Mapping[ir.Value, tuple[int, ...]]) -> float:
    """What the values take stored (a Cast to float32 of a float16 weight doubles it)."""
    return sum(math.prod(shapes[value]) * (value.dtype.itemsize if value.dtype is not None else 4) for value in values)


def _meta(recipe: Recipe, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """The recipe run on meta tensors of its weights' shapes: its result's shape, checked."""
    weights = {name: torch.empty(shape, dtype=dtype, device="meta") for name, shape in recipe_sources(recipe).items()}
    return remake(recipe, weights)
