"""Tensors of sub-byte and packed dtypes created in the model (``torch.empty(…, dtype=torch.int4)``).

torchlib creates them with ``Constant``/``Expand``, which take FLOAT4E2M1 only from opset 23 and
keep torch's shape, though a ``float4_e2m1fn_x2`` element is two ONNX elements (the ONNX shape's
last dim is twice torch's). A statically sized one is an initializer of zeros in its ONNX type —
valid at any opset, and ``empty`` promises no values. A dynamically sized one is declined with a
clear error (no ONNX operator below opset 23 creates these types from a shape).
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import onnx_ir as ir
import torch

from torch_onnx_fx.dtypes import SUB_BYTE, onnx_dims, onnx_dtype
from torch_onnx_fx.errors import TranslationError
from torch_onnx_fx.translate.op_context import OpContext
from torch_onnx_fx.registry import register, wants_context

__all__ = ["aten_empty_packed"]

def _creates_sub_byte(node: torch.fx.Node) -> bool:
    example = node.meta.get("val")
    if not isinstance(example, torch.Tensor):
        return False
    try:
        return onnx_dtype(example.dtype) in SUB_BYTE
    except TypeError:
        return False


@register("aten::empty.memory_format", "aten::zeros.default", supports=_creates_sub_byte)
@wants_context
def aten_empty_packed(size: Sequence[Any], *, ctx: OpContext, **_: Any) -> ir.Value:
    """empty.memory_format(SymInt[] size, *, ScalarType? dtype=None, ...) -> Tensor (and zeros)"""
    example = ctx.result
    element = onnx_dtype(example.dtype)
    dims = onnx_dims(example.dtype, [ctx.dim(s) for s in example.shape])
    if not all(isinstance(d, int) for d in dims):
        raise TranslationError(
            f"{ctx.target}: creating a {example.dtype} tensor of dynamic shape {dims} is not "
            "supported; give it a static size."
        )
    name = ctx.name
    value = ir.Value(name=name, type=ir.TensorType(element), shape=ir.Shape(dims))
    # DataType.numpy() is the ml_dtypes type (float4_e2m1fn, int4, …).
    value.const_value = ir.tensor(np.zeros(dims, dtype=element.numpy()), name=name)
    return ctx.initializer(value)
