"""An inference BatchNormalization after a Conv becomes part of the Conv's weights.

``BatchNormalization(Conv(x, W, b))`` computes ``Conv(x, W * f, (b - mean) * f + beta)`` with
``f = scale / sqrt(var + eps)`` per output channel. torch.onnx folds that into anonymous
constants, and ONNX Runtime does the same when it loads the model; keeping the two nodes costs
every other back end a pass over each activation, and the node count. Here the Conv's weight
and bias become that arithmetic on the named weights, which ``FoldWeightRecipesPass`` then stores
as two initializers with the recipe remaking them, so ``apply_weights`` still replaces the Conv
and BatchNorm weights by name.

The fold regroups the floating-point operations (the product is taken before the convolution's
sum, not after), as ONNX Runtime's own fusion does: results move by a few units in the last
place, not more. It is applied only where the whole computation will be stored: every weight it
reads is a named weight read by nothing else.
"""

from __future__ import annotations

import logging

import numpy as np
import onnx_ir as ir

from torch_onnx_fx.optimize.weights.base import WeightsPass

__all__ = ["BatchNormIntoConvPass"]

logger = logging.getLogger(__name__)

_FLOATS = frozenset({ir.DataType.FLOAT, ir.DataType.DOUBLE, ir.DataType.FLOAT16, ir.DataType.BFLOAT16})


class BatchNormIntoConvPass(WeightsPass):
    """``Conv -> BatchNormalization`` (inference, one output) over named weights becomes one Conv
    whose weight and bias are computed from them (and stored by the recipe fold after it)."""

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        graph = model.graph
        folded = 0
        for norm in list(graph):
            conv = self._foldable(graph, norm)
            if conv is not None:
                self._fold(graph, conv, norm)
                folded += 1
        if folded:
            ir.passes.common.RemoveUnusedNodesPass()(model)
            logger.debug("folded %d BatchNormalization(s) into their Conv", folded)
        return ir.passes.PassResult(model, modified=bool(folded))

    def _only_read_by(self, value: ir.Value | None, node: ir.Node, graph: ir.Graph) -> bool:
        """A named weight with data or a shape, read by ``node`` alone (once)."""
        return (
            value is not None and value.name in self.weights and graph.initializers.get(value.name) is value
            and value.const_value is not None and not value.is_graph_input() and not value.is_graph_output()
            and value.dtype in _FLOATS and len(value.uses()) == 1 and value.uses()[0][0] is node
        )

    def _foldable(self, graph: ir.Graph, norm: ir.Node) -> ir.Node | None:
        if norm.op_type != "BatchNormalization" or norm.domain not in ("", "ai.onnx") or len(norm.outputs) != 1:
            return None
        training = norm.attributes.get("training_mode")
        if (training is not None and training.as_int() != 0) or len(norm.inputs) != 5:
            return None
        conv_output = norm.inputs[0]
        conv = conv_output.producer() if conv_output is not None else None
        if conv is None or conv.op_type != "Conv" or conv.domain not in ("", "ai.onnx"):
            return None
        if conv_output.is_graph_output() or len(conv_output.uses()) != 1:
            return None
        weight = conv.inputs[1]
        bias = conv.inputs[2] if len(conv.inputs) > 2 else None
        if not self._only_read_by(weight, conv, graph) or (bias is not None and not self._only_read_by(bias, conv, graph)):
            return None
        if not all(self._only_read_by(value, norm, graph) for value in norm.inputs[1:]):
            return None
        channels = weight.shape[0] if weight.shape is not None and weight.shape.rank() >= 3 else None  # type: ignore[union-attr]
        if not isinstance(channels, int) or any(
            value.shape is None or tuple(value.shape) != (channels,) or value.dtype != weight.dtype  # type: ignore[union-attr]
            for value in (*norm.inputs[1:], *([bias] if bias is not None else []))
        ):
            return None
        return conv

    def _fold(self, graph: ir.Graph, conv: ir.Node, norm: ir.Node) -> None:
        weight = conv.inputs[1]
        bias = conv.inputs[2] if len(conv.inputs) > 2 else None
        scale, beta, mean, var = norm.inputs[1:]
        dtype = weight.dtype  # type: ignore[union-attr]
        epsilon = norm.attributes.get("epsilon")
        prefix = norm.name or conv.outputs[0].name
        eps = _constant(graph, f"{prefix}.epsilon", np.array(epsilon.as_float() if epsilon is not None else 1e-5), dtype)
        axes = _constant(graph, f"{prefix}.channel_axes", np.arange(1, weight.shape.rank(), dtype=np.int64), ir.DataType.INT64)  # type: ignore[union-attr]
        steps: list[ir.Node] = []

        def step(op_type: str, *inputs: ir.Value | None) -> ir.Value:
            node = ir.node(op_type, list(inputs), metadata_props=dict(norm.metadata_props))
            steps.append(node)
            return node.outputs[0]

        factor = step("Div", scale, step("Sqrt", step("Add", var, eps)))
        new_weight = step("Mul", weight, step("Unsqueeze", factor, axes))
        centred = step("Neg", mean) if bias is None else step("Sub", bias, mean)
        new_bias = step("Add", step("Mul", centred, factor), beta)
        for node in steps:
            node.outputs[0].dtype = dtype
        new_weight.shape = weight.shape  # type: ignore[union-attr]
        new_bias.shape = ir.Shape([weight.shape[0]])  # type: ignore[union-attr,index]
        graph.insert_before(conv, steps)
        conv.replace_input_with(1, new_weight)
        if bias is None:
            conv.resize_inputs(3)
        conv.replace_input_with(2, new_bias)
        conv.outputs[0].dtype = norm.outputs[0].dtype
        norm.outputs[0].replace_all_uses_with(conv.outputs[0], replace_graph_outputs=True)
        # The Conv's result now carries the normalised values under the BatchNorm's name.
        name = norm.outputs[0].name
        graph.remove(norm, safe=True)
        conv.outputs[0].name = name


def _constant(graph: ir.Graph, name: str, array: np.ndarray, dtype: ir.DataType) -> ir.Value:
    while name in graph.initializers:
        name += "_"
    tensor = ir.tensor(array.astype(dtype.numpy()), dtype=dtype, name=name)
    value = ir.Value(name=name, type=ir.TensorType(dtype), shape=ir.Shape(array.shape), const_value=tensor)
    graph.register_initializer(value)
    return value
