"""Dtypes: torch dtypes as ONNX element types, sub-byte and packed ones included.

onnx-ir maps the common dtypes. This adds what it does not: ``torch.int4``/``torch.uint4`` and
``torch.float4_e2m1fn_x2`` — two FLOAT4E2M1 values per torch element, so the ONNX shape's last
dim is twice torch's. It also knows the *carriers*: ``torch.onnx.ops.symbolic`` ops may declare
INT4/UINT4/FLOAT4E2M1/INT2/UINT2 outputs whose fake tensors are ``uint8``; the declared ONNX type
is the true one and must not be "corrected" to the carrier.
"""

from __future__ import annotations

from typing import Sequence

import onnx_ir as ir
import torch
from onnx_ir.tensor_adapters import from_torch_dtype

__all__ = ["onnx_dtype", "onnx_dims", "is_carried", "ir_version_for", "as_complex", "SUB_BYTE", "DEFAULT_IR_VERSION", "FLOAT_TYPES"]

_EXTRA = {
    torch.float4_e2m1fn_x2: ir.DataType.FLOAT4E2M1,
    torch.int4: ir.DataType.INT4,
    torch.uint4: ir.DataType.UINT4,
}
# torch dtypes of which one element packs several ONNX elements along the last dim.
_PACKED = {torch.float4_e2m1fn_x2: 2}
SUB_BYTE = frozenset({ir.DataType.INT4, ir.DataType.UINT4, ir.DataType.FLOAT4E2M1, ir.DataType.INT2, ir.DataType.UINT2})
_CARRIERS = frozenset({torch.uint8, torch.int8})
# The floating dtypes ATen computes arithmetic in (the float8 ones are storage formats).
FLOAT_TYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)


def onnx_dtype(dtype: torch.dtype) -> ir.DataType:
    """The ONNX element type of ``dtype`` (complex: its real part's, as complex values travel)."""
    if dtype in _EXTRA:
        return _EXTRA[dtype]
    return from_torch_dtype(dtype)


def onnx_dims(dtype: torch.dtype, dims: Sequence[int | str | None]) -> list[int | str | None]:
    """The ONNX shape of a tensor of ``dtype`` and torch shape ``dims``."""
    factor = _PACKED.get(dtype)
    if not factor or not dims:
        return list(dims)
    last = dims[-1]
    return [*dims[:-1], last * factor if isinstance(last, int) else (f"{factor}*({last})" if last is not None else None)]


def is_carried(onnx_type: ir.DataType | None, example_dtype: torch.dtype) -> bool:
    """True when a value declared ``onnx_type`` stands for a torch tensor of ``example_dtype``
    only as its byte carrier (an INT4 output of a symbolic op is uint8 to torch)."""
    return onnx_type in SUB_BYTE and example_dtype in _CARRIERS


# Element types newer than IR version 10 (the version we write by default, as torch.onnx does,
# for the widest back-end support) and the IR version that introduced them.
_IR_VERSION_OF = {ir.DataType.FLOAT4E2M1: 11, ir.DataType.INT2: 12, ir.DataType.UINT2: 12}
DEFAULT_IR_VERSION = 10


def ir_version_for(model: ir.Model) -> int:
    """The oldest IR version that can hold every element type the model uses."""
    needed = DEFAULT_IR_VERSION
    graph = model.graph
    values = [*graph.inputs, *graph.outputs, *graph.initializers.values()]
    values += [v for node in ir.traversal.RecursiveGraphIterator(graph) for v in node.outputs]
    for value in values:
        needed = max(needed, _IR_VERSION_OF.get(value.dtype, DEFAULT_IR_VERSION))
    return needed


def as_complex(real_view: "torch.Tensor") -> "torch.Tensor":
    """The complex tensor whose real view (trailing dim 2) is ``real_view``. An empty tensor
    from ONNX Runtime can have strides ``view_as_complex`` refuses, so it is rebuilt instead."""
    import torch

    if real_view.numel() == 0:
        return torch.empty(real_view.shape[:-1], dtype=torch.complex128 if real_view.dtype == torch.float64 else torch.complex64)
    return torch.view_as_complex(real_view.contiguous())
