"""Reductions and softmaxes on the dtype ATen accumulates in (``dtype=`` arguments, integer sums)."""

from __future__ import annotations

import torch

from torch_onnx_fx.normalize import promotion
from torch_onnx_fx.normalize.conversions import ConvertingPass, dtype_argument, node_name, tensor_example

__all__ = ["IntegralAccumulationPass"]


class IntegralAccumulationPass(ConvertingPass):
    """Reductions and softmaxes compute in the dtype ATen computes them in.

    Contract: an operator with a ``dtype`` argument that means "convert the input first"
    (``sum``, ``cumsum``, ``softmax.int``, ``mean``… — ``promotion.DTYPE_ARGUMENT``) and is given
    one gets its input converted to it (``norm(z, 0)`` sums a bool mask in float); without one,
    a sum or product of a bool or integer input narrower than int64 converts it to int64 (ATen's
    result is int64; ONNX would reduce in the input type, and rejects bool).
    """

    def conversions(self, node: torch.fx.Node) -> list[tuple[int | tuple[int, int], torch.dtype]]:
        name = node_name(node)
        if name not in promotion.DTYPE_ARGUMENT or not node.args:
            return []
        example = tensor_example(node.args[0])
        if example is None:
            return []
        wanted = dtype_argument(node)
        if wanted is None and name in promotion.INTEGRAL_TO_LONG:
            narrow = not example.dtype.is_floating_point and not example.is_complex()
            wanted = torch.int64 if narrow else None
        return [(0, wanted)] if isinstance(wanted, torch.dtype) and wanted != example.dtype else []
