"""torchao's ``dequantize_affine``: the weights of ``quantize_(model, IntxWeightOnlyConfig(...))``.

torchao stores a weight-only quantized Linear's weight as integers with a scale (and zero point)
per block of ``block_size`` elements and dequantizes it in the graph. PyTorch's decomposition of
the operator is Cast, Sub and Mul, which ONNX Runtime folds into a float weight: exact, but float
memory and float speed, and nothing a runtime can recognise as a quantized weight.

Where ``DequantizeLinear`` computes what torchao computes it is used instead: 8-bit integers, a
float32 scale and result, a zero point of the integers' own type (or none). torchao subtracts the
zero point and multiplies in float32; the difference of two 8-bit integers is exact there, so
``(q - zero_point) * scale`` rounds once in both. The layout decides the form:

- one scale for the whole tensor: per-tensor;
- one scale per index of one axis: per-axis (``axis``), any opset;
- one scale per block of one axis, every other axis per element (a Linear weight's
  ``PerGroup``): blocked (``block_size``), opset 21 and later.

Anything else (other dtypes, float zero points, several blocked axes, a blocked weight below opset
21) declines, and PyTorch's decomposition is translated as before.

Also here: ``aten::_int_mm``, the integer product of torchao's dynamic int8 configurations.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np
import onnx_ir as ir
import torch
from onnxscript import opset18 as op
from onnxscript import opset21

from torch_onnx_fx.translate.metadata import QUANTIZED_RANGE_KEY
from torch_onnx_fx.registry import arg_example, arg_value, register

__all__ = ["torchao_dequantize_affine", "affine_layout", "aten_int_mm"]

_INTEGERS = (torch.int8, torch.uint8)
_EIGHT_BIT_TYPES = (ir.DataType.INT8, ir.DataType.UINT8)


def affine_layout(shape: Sequence[Any], block_size: Sequence[Any]) -> tuple[str, int | None] | None:
    """How ``block_size`` shares scales over a tensor of ``shape``: ``("tensor", None)``,
    ``("axis", a)`` or ``("blocked", a)``, or None for a layout DequantizeLinear has no form of."""
    if len(shape) != len(block_size) or not all(isinstance(n, int) for n in (*shape, *block_size)):
        return None
    # A block of 1 keeps an axis per element, a block of the whole axis shares one scale along
    # it; an axis of length 1 is both.
    kept = [i for i, (n, b) in enumerate(zip(shape, block_size)) if b == 1 and n > 1]
    grouped = [i for i, (n, b) in enumerate(zip(shape, block_size)) if 1 < b < n]
    shared = [i for i, (n, b) in enumerate(zip(shape, block_size)) if b == n and n > 1]
    if any(n % b for n, b in zip(shape, block_size) if b > 0) or any(b < 1 for b in block_size):
        return None
    if not kept and not grouped:
        return "tensor", None
    if len(kept) == 1 and not grouped:
        return "axis", kept[0]
    if len(grouped) == 1 and not shared:
        return "blocked", grouped[0]
    return None


def _dequantize_linear_form(node: torch.fx.Node) -> tuple[str, int | None] | None:
    """The node's layout when DequantizeLinear computes exactly what torchao computes."""
    data, scale, zero_point = arg_example(node, 0), arg_example(node, 2), arg_example(node, 3)
    if not isinstance(data, torch.Tensor) or data.dtype not in _INTEGERS:
        return None
    if not isinstance(scale, torch.Tensor) or scale.dtype != torch.float32:
        return None
    if arg_value(node, 7, "output_dtype", torch.float32) != torch.float32:
        return None
    block_size = arg_value(node, 1, "block_size") or ()
    layout = affine_layout(tuple(data.shape), block_size)
    if layout is None or not isinstance(scale.numel(), int):
        return None
    shared = math.prod(_parameter_shape(tuple(data.shape), block_size, layout))
    if scale.numel() != shared:
        return None
    if zero_point is not None and (zero_point.dtype != data.dtype or zero_point.numel() != shared):
        return None
    return layout


def _parameter_shape(shape: Sequence[int], block_size: Sequence[int], layout: tuple[str, int | None]) -> list[int]:
    """The shape DequantizeLinear wants its scale and zero point in."""
    kind, axis = layout
    if kind == "tensor":
        return []
    assert axis is not None
    if kind == "axis":
        return [shape[axis]]
    return [n // b if i == axis else n for i, (n, b) in enumerate(zip(shape, block_size))]


def _blocked(node: torch.fx.Node) -> bool:
    return _dequantize_linear_form(node) is not None


def _unblocked(node: torch.fx.Node) -> bool:
    layout = _dequantize_linear_form(node)
    return layout is not None and layout[0] != "blocked"


# Blocked layouts from opset 21, the others at any opset; ``supports`` decides which.
@register("torchao::dequantize_affine", min_opset=21, supports=_blocked)
@register("torchao::dequantize_affine", supports=_unblocked)
def torchao_dequantize_affine(
    input: ir.Value,
    block_size: Sequence[int],
    scale: ir.Value,
    zero_point: ir.Value | None,
    input_dtype: int,
    quant_min: Any = None,
    quant_max: Any = None,
    output_dtype: int = int(ir.DataType.FLOAT),
) -> ir.Value:
    """dequantize_affine(Tensor input, SymInt[] block_size, Tensor scale, Tensor? zero_point, ScalarType input_dtype, Scalar? quant_min=None, Scalar? quant_max=None, ScalarType output_dtype=6) -> Tensor

    ``(input - zero_point) * scale`` with one scale per block, as DequantizeLinear."""
    shape = [int(n) for n in input.shape]  # type: ignore[union-attr]
    layout = affine_layout(shape, block_size)
    assert layout is not None
    target = op.Constant(value_ints=_parameter_shape(shape, block_size, layout))
    scale = op.Reshape(scale, target)
    if zero_point is not None:
        zero_point = op.Reshape(zero_point, target)
    kind, axis = layout
    if kind == "blocked":
        result = opset21.DequantizeLinear(input, scale, zero_point, axis=axis, block_size=block_size[axis])  # type: ignore[index]
    elif kind == "axis":
        result = op.DequantizeLinear(input, scale, zero_point, axis=axis)
    else:
        result = op.DequantizeLinear(input, scale, zero_point)
    producer = result.producer()
    if producer is not None and isinstance(quant_min, int) and isinstance(quant_max, int):
        # The integers' declared range: how a pass packs weights exported without data (meta).
        producer.metadata_props[QUANTIZED_RANGE_KEY] = f"{quant_min},{quant_max}"
    return result


def _as_unsigned(value: ir.Value) -> tuple[ir.Value, int]:
    """An 8-bit integer tensor as uint8 and the zero point that gives its values back: int8 is
    shifted by 128 (exact in int32, then in range)."""
    if value.dtype == ir.DataType.UINT8:
        return value, 0
    shifted = op.Add(op.Cast(value, to=ir.DataType.INT32), op.Constant(value=ir.tensor(np.int32(128))))
    return op.Cast(shifted, to=ir.DataType.UINT8), 128


@register("aten::_int_mm")
def aten_int_mm(self: ir.Value, mat2: ir.Value) -> ir.Value:
    """_int_mm(Tensor self, Tensor mat2) -> Tensor

    The 8-bit product with int32 sums torchao's dynamic int8 configurations compute, as
    ``MatMulInteger`` over **unsigned** operands with zero points that give their values back:
    ONNX Runtime's 8-bit kernels for an unsigned and a signed operand add the products in pairs
    into 16 bits on CPUs without VNNI, which saturates (-128 x -128 twice passes 32767; a test on
    a VNNI machine proves nothing about the others), while unsigned pairs are widened first and
    sum exactly everywhere. The int32 sums wrap as ATen's do. (An int32 ``MatMul``, exact too, ran
    11x slower than the float model: ONNX Runtime has no fast integer kernel for it.)"""
    if self.dtype not in _EIGHT_BIT_TYPES or mat2.dtype not in _EIGHT_BIT_TYPES:
        return op.MatMul(op.Cast(self, to=ir.DataType.INT32), op.Cast(mat2, to=ir.DataType.INT32))
    left, left_zero = _as_unsigned(self)
    right, right_zero = _as_unsigned(mat2)

    def zero_point(value: int) -> ir.Value:
        return op.Constant(value=ir.tensor(np.uint8(value)))

    return op.MatMulInteger(left, right, zero_point(left_zero), zero_point(right_zero))
