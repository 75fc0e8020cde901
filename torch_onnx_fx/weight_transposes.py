"""Weights used transposed are stored transposed, and say which weight they are.

``F.linear`` on a 3-d input is ``MatMul(x, Transpose(W))``: transposing W at every inference is
waste, which is why optimizers fold it into a transposed copy of W. But onnxscript's folding (what
torch.onnx runs) forgets where the copy came from: ``apply_weights({"W": ...})`` then replaces
nothing the graph reads, silently. The optimizer here keeps every weight unfolded
(``optimize._weights_kept``); :class:`FoldWeightTransposesPass` then folds just these transposes
itself and records on the new initializer the weight it holds and the permutation
(``WEIGHT_KEY``, ``PERM_KEY``), so ``apply_weights`` can store a new weight the same way.
"""

from __future__ import annotations

import logging
from typing import Collection

import onnx_ir as ir
import torch
from onnx_ir.tensor_adapters import TorchTensor
from torch._subclasses.fake_tensor import FakeTensor

__all__ = ["FoldWeightTransposesPass", "WeightsPass", "WEIGHT_KEY", "PERM_KEY", "plain_data", "without_data"]

logger = logging.getLogger(__name__)

WEIGHT_KEY = "pkg.torch_onnx_fx.weight"
PERM_KEY = "pkg.torch_onnx_fx.weight_perm"


def without_data(value: ir.Value) -> bool:
    """Whether an initializer's tensor has no data (meta device, FakeTensorMode): it cannot be
    folded, and apply_weights must give it a value."""
    raw = getattr(value.const_value, "raw", None)
    return isinstance(raw, torch.Tensor) and (raw.device.type == "meta" or isinstance(raw, FakeTensor))


def plain_data(value: ir.Value) -> torch.Tensor | None:
    """The weight's tensor when it holds real data (not meta or fake weights; nor other tensor
    subclasses, whose transposed copy might not be a plain tensor)."""
    raw = getattr(value.const_value, "raw", None)
    if not isinstance(raw, torch.Tensor) or without_data(value):
        return None
    return raw if type(raw) is torch.Tensor or isinstance(raw, torch.nn.Parameter) else None


class WeightsPass(ir.passes.InPlacePass):
    """A pass over the initializers named in ``weights`` (the model's parameters and persistent
    buffers), which must stay replaceable by ``apply_weights``."""

    def __init__(self, weights: Collection[str]):
        super().__init__()
        self.weights = set(weights)


class FoldWeightTransposesPass(WeightsPass):
    """``Transpose(W)`` of a named weight becomes an initializer holding W transposed, marked with
    W's name and the permutation; W itself goes when nothing else reads it."""

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        graph = model.graph
        folded = 0
        for node in list(graph):
            if node.op_type != "Transpose" or node.domain not in ("", "ai.onnx") or node.inputs[0] is None:
                continue
            source = node.inputs[0]
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
                type=output.type or source.type,
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
            output.replace_all_uses_with(stored)
            graph.remove(node, safe=True)
            folded += 1
        if folded:
            ir.passes.common.RemoveUnusedNodesPass()(model)
            logger.debug("stored %d weight(s) transposed", folded)
        return ir.passes.PassResult(model, modified=bool(folded))
