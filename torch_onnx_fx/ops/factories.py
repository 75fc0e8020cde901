"""Factories whose every argument is known at export time: constants torch computes.

``linspace``, ``logspace`` and the window functions take only numbers, so their result is fixed
when the model is exported. Computed by the ATen operator the model called, the constant is
eager's bits in every dtype; written as graph arithmetic it is not (ONNX's ``HammingWindow``,
which torchlib uses, has other coefficients than PyTorch's: 7e-3 off; torch's decomposition of
``logspace`` raises the base to a ``linspace`` that ATen's kernel does not compute; a cosine
folded by NumPy is not ATen's). Window lengths and step counts are ints in ATen's schemas, so
torch.export always knows them; a start or end computed from a dynamic size (``linspace(0, n *
0.5, 7)``) is not, and is left to the other translations.
"""

from __future__ import annotations

from typing import Any

import onnx_ir as ir
import torch
from onnx_ir.tensor_adapters import TorchTensor

from torch_onnx_fx.registry import register, wants_context
from torch_onnx_fx.translate.op_context import OpContext

__all__ = ["aten_static_factory"]

_FACTORIES = (
    "aten::linspace", "aten::logspace",
    "aten::hann_window", "aten::hann_window.periodic",
    "aten::hamming_window", "aten::hamming_window.periodic", "aten::hamming_window.periodic_alpha",
    "aten::hamming_window.periodic_alpha_beta",
    "aten::blackman_window", "aten::blackman_window.periodic",
    "aten::bartlett_window", "aten::bartlett_window.periodic",
    "aten::kaiser_window", "aten::kaiser_window.periodic", "aten::kaiser_window.beta",
)


def _static_arguments(node: torch.fx.Node) -> bool:
    return not any(isinstance(a, torch.fx.Node) for a in [*node.args, *node.kwargs.values()])


@register(*_FACTORIES, supports=_static_arguments)
@wants_context
def aten_static_factory(*args: Any, ctx: OpContext, **kwargs: Any) -> ir.Value:
    """linspace, logspace, hann/hamming/blackman/bartlett/kaiser windows: the operator itself, run by torch."""
    namespace, _, name = ctx.target.partition("::")
    packet, _, overload = name.partition(".")
    operator = getattr(getattr(getattr(torch.ops, namespace), packet), overload or "default")
    # On the CPU whatever device the model was exported on (a model built on `meta` included).
    options = {**ctx.keyword_inputs, "device": torch.device("cpu"), "pin_memory": False}
    # TorchTensor keeps dtypes NumPy lacks (bfloat16).
    return ctx.constant(TorchTensor(operator(*ctx.inputs, **options)))
