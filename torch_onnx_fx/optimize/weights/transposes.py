"""Weights used transposed are stored transposed, and say which weight they are.

``F.linear`` on a 3-d input is ``MatMul(x, Transpose(W))``: transposing W at every inference is
waste, which is why optimizers fold it into a transposed copy of W. But onnxscript's folding (what
torch.onnx runs) forgets where the copy came from: ``apply_weights({"W": ...})`` then replaces
nothing the graph reads, silently. The optimizer here keeps every weight unfolded
(``optimizer._weights_kept``); :class:`FoldWeightTransposesPass` then folds just these transposes
itself and records on the new initializer the weight it holds and the permutation
(``WEIGHT_KEY``, ``PERM_KEY``), so ``apply_weights`` can store a new weight the same way.
"""

from __future__ import annotations

import logging

import onnx_ir as ir
import torch
from onnx_ir.tensor_adapters import TorchTensor

from torch_onnx_fx.optimize.weights.base import WeightsPass, plain_data
from torch_onnx_fx.translate.weight_data import without_data

__all__ = ["FoldWeightTransposesPass", "WEIGHT_KEY", "PERM_KEY"]

logger = logging.getLogger(__name__)

WEIGHT_KEY = "pkg.torch_onnx_fx.weight"
PERM_KEY = "pkg.torch_onnx_fx.weight_perm"


class FoldWeightTransposesPass(WeightsPass):
    """``Transpose(W)`` of a named weight becomes an initializer holding W transposed, marked with
    W's name and the permutation; W itself goes when nothing else reads it."""

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        graph = model.graph
        folded = 0
        for node in list(graph):
            if node.op_type != "Transpose" or node.domain not in ("", "ai.onnx") or node.inputs[0] is None:
                continue
            source, cast = _weight_under_cast(node.inputs[0])
            name = source.name
            if name not in self.weights or graph.initializers.get(name) is not source or source.is_graph_input():
                continue
            # Only a weight read by nothing else: a copy beside a weight still in use (a tied
            # embedding) would double its memory. onnxscript's folder has the same rule.
            if len(source.uses()) != 1:
                continue
            # A weight without data (meta, fake) is stored transposed without data too: its
            # Transpose would otherwise run at every inference once apply_weights fills it.
            empty = without_data(source)
            tensor = source.const_value.raw if empty else plain_data(source)  # type: ignore[union-attr]
            if tensor is None:
                continue
            perm_attribute = node.attributes.get("perm")
            perm = list(perm_attribute.value) if perm_attribute is not None else list(reversed(range(tensor.dim())))
            output = node.outputs[0]
            if output.is_graph_output():
                continue
            shape = [tensor.shape[axis] for axis in perm]
            stored = ir.Value(
                name=f"{name}.transposed" if perm == [1, 0] else f"{name}.permuted_{'_'.join(map(str, perm))}",
                type=source.type if cast is not None else output.type or source.type,
                shape=ir.Shape(shape),
            )
            if empty:
                permuted = torch.empty(shape, dtype=tensor.dtype, device="meta")
            else:
                # A view, as apply_weights stores one: the transposed bytes are made one weight
                # at a time when the model is serialised, instead of a copy of every weight used
                # transposed held from here on (+170 MB, 20 % of the peak, at 64 Llama layers).
                permuted = tensor.detach().permute(perm)
            stored.const_value = TorchTensor(permuted, name=stored.name)
            stored.metadata_props[WEIGHT_KEY] = name
            stored.metadata_props[PERM_KEY] = ",".join(map(str, perm))
            graph.register_initializer(stored)
            if cast is None:
                output.replace_all_uses_with(stored)
            else:
                # Cast and Transpose commute: the Cast now reads the stored copy.
                cast.replace_input_with(0, stored)
                cast.outputs[0].shape = ir.Shape(shape)
                output.replace_all_uses_with(cast.outputs[0])
            graph.remove(node, safe=True)
            folded += 1
        if folded:
            ir.passes.common.RemoveUnusedNodesPass()(model)
            logger.debug("stored %d weight(s) transposed", folded)
        return ir.passes.PassResult(model, modified=bool(folded))


def _weight_under_cast(value: ir.Value) -> tuple[ir.Value, ir.Node | None]:
    """The value a Transpose reads, or the weight under a Cast only that Transpose reads.

    A half-precision Linear computed in float32 (``normalize.half_precision``) transposes
    ``Cast(W)``: transposing W itself, stored so, leaves the Cast and saves the Transpose
    at every inference.
    """
    producer = value.producer()
    if (
        producer is not None and producer.op_type == "Cast" and producer.domain in ("", "ai.onnx")
        and producer.inputs[0] is not None and len(value.uses()) == 1 and not value.is_graph_output()
    ):
        return producer.inputs[0], producer
    return value, None
