"""Core ATen operators where torch_onnx_fx's translation differs from torchlib's.

Runtime assertions that torch.export leaves in the graph have no ONNX meaning: the ONNX model
cannot raise, and the conditions were checked at export time for the example inputs and are
encoded in the range constraints recorded in the graph metadata.
"""

from __future__ import annotations

from typing import Any

from torch_onnx_fx.registry import register

__all__ = ["aten_assert_noop"]


@register(
    "aten::_assert_scalar",
    "aten::_assert_async",
    "aten::_assert_async.msg",
    "aten::_assert_tensor_metadata",
    "aten::sym_constrain_range",
    "aten::sym_constrain_range_for_size",
    "aten::_functional_sym_constrain_range",
    "aten::_functional_sym_constrain_range_for_size",
)
def aten_assert_noop(*args: Any, **kwargs: Any) -> None:
    """Runtime checks are dropped: ONNX has no way to raise."""
    return None
