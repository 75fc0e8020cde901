"""What the passes over weights share: their base class, and a weight's data when it is plain.

Weights are the initializers of the model's parameters and persistent buffers. The optimizer
keeps them unfolded so ``apply_weights`` can replace each by name; the weight passes then fold
what is worth folding (a transpose, a BatchNormalization's factors, a recipe of data movement and
exact arithmetic) and record how, so a replaced weight is stored the same way.
"""

from __future__ import annotations

from typing import Collection

import onnx_ir as ir
import torch

from torch_onnx_fx.translate.weight_data import without_data

__all__ = ["WeightsPass", "plain_data"]


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
