"""Whether an initializer made from the model's state holds data.

The translation stores each parameter and buffer as the tensor the program holds
(``walk._initializer``). A model built on the meta device, or exported under FakeTensorMode,
holds none: its values cannot be read (``numpy()`` raises for fake tensors) until
``apply_weights`` gives them. Translations that look at a constant's values (a per-channel zero
point) and the passes over weights ask here first.
"""

from __future__ import annotations

import onnx_ir as ir
import torch
from torch._subclasses.fake_tensor import FakeTensor

__all__ = ["without_data"]


def without_data(value: ir.Value) -> bool:
    """Whether an initializer's tensor has no data (meta device, FakeTensorMode): it cannot be
    read or folded, and apply_weights must give it a value."""
    raw = getattr(value.const_value, "raw", None)
    return isinstance(raw, torch.Tensor) and (raw.device.type == "meta" or isinstance(raw, FakeTensor))
