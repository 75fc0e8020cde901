"""``torch.multinomial``: samples drawn as ATen draws them.

torchlib's translation ignores ``replacement`` (ONNX's ``Multinomial`` always samples with
replacement: a row of ``multinomial(w, 3)`` could name a category twice, which eager never does)
and squeezes a 1-D result of one sample to a 0-d tensor (eager: shape ``[1]``); torch.onnx the
same. Without replacement ATen samples as the categories with the largest ``w / E``, ``E`` drawn
from an exponential distribution (the order of a weighted draw without replacement): so does
the graph, with ``E = -log(U)`` from ``RandomUniformLike``. With replacement, or for one sample,
it is ONNX's ``Multinomial`` over the weights' logarithms.
"""

from __future__ import annotations

import onnx_ir as ir
import torch
from onnxscript import opset18 as op

from torch_onnx_fx.ops import _tensors as tx
from torch_onnx_fx.registry import arg_example, register

__all__ = ["aten_multinomial"]


def _weights(node: torch.fx.Node) -> bool:
    weights = arg_example(node)
    return isinstance(weights, torch.Tensor) and weights.dtype.is_floating_point and weights.dim() in (1, 2)


@register("aten::multinomial", supports=_weights)
def aten_multinomial(self: ir.Value, num_samples: int, replacement: bool = False, *, generator: object = None) -> ir.Value:
    """multinomial(Tensor self, int num_samples, bool replacement=False, *, Generator? generator=None) -> Tensor"""
    vector = tx.rank(self) == 1
    # float32 draws for every weight type (ONNX Runtime's Multinomial takes float32 and double,
    # its uniform draws no bfloat16): only their order matters.
    rows = op.Cast(op.Unsqueeze(self, tx.ints(0)) if vector else self, to=ir.DataType.FLOAT)
    if replacement or num_samples == 1:
        samples = op.Multinomial(op.Log(rows), dtype=ir.DataType.INT64, sample_size=num_samples)
    else:
        exponential = op.Neg(op.Log(op.RandomUniformLike(rows)))
        keys = op.Div(rows, exponential)
        _, samples = op.TopK(keys, tx.ints(num_samples), axis=-1, largest=1, sorted=1)
    return op.Reshape(samples, tx.ints(num_samples)) if vector else samples
