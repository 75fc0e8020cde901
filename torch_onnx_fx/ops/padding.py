"""Padding: the modes ONNX Runtime rejects (circular, and negative (cropping) replicate/reflect
pads), and constant padding by numbers, the everyday form, so that it does not load torchlib.

``aten::pad`` lists (left, right) pairs from the last dim backwards. Negative amounts crop, which
becomes a Slice; circular padding concatenates the wrapped-around slices; positive
replicate/reflect amounts stay a Pad (``edge``/``reflect``); constant padding is one Pad, which
crops by negative amounts itself.
"""

from __future__ import annotations

from typing import Any, Sequence

import onnx_ir as ir
import torch
from onnxscript import opset18 as op

from torch_onnx_fx.errors import TranslationError
from torch_onnx_fx.ops import _tensors as tx
from torch_onnx_fx.registry import arg_example, register

__all__ = ["aten_pad_circular", "aten_pad_special", "aten_pad_constant", "aten_constant_pad_nd_complex"]



def _onnx_pads(pad: Sequence[int], rank: int) -> list[int]:
    """ATen's (left, right) pairs from the last dim backwards as ONNX's begins then ends over
    all ``rank`` dims."""
    begins = [0] * rank
    ends = [0] * rank
    for offset in range(len(pad) // 2):
        begins[rank - 1 - offset], ends[rank - 1 - offset] = pad[2 * offset], pad[2 * offset + 1]
    return begins + ends


def _needs_own_pad(node: Any) -> bool:
    args = list(node.args) + [None, None, None]
    pad, mode = args[1], node.kwargs.get("mode", args[2]) or "constant"
    if not all(isinstance(p, int) for p in pad):
        return False
    return mode == "circular" or (mode in ("replicate", "reflect") and any(p < 0 for p in pad))


def _circular_growing(node: Any) -> bool:
    """Circular padding by non-negative amounts of a tensor not statically empty (ONNX Runtime's
    wrap-mode Pad fails on an empty input; the slices of aten_pad_special do not)."""
    args = list(node.args) + [None, None, None]
    pad, mode = args[1], node.kwargs.get("mode", args[2]) or "constant"
    example = arg_example(node)
    empty = isinstance(example, torch.Tensor) and any(isinstance(d, int) and d == 0 for d in example.shape)
    return mode == "circular" and not empty and all(isinstance(p, int) and p >= 0 for p in pad)


# Registered ahead of aten_pad_special: one Pad node instead of slices and a Concat per axis.
@register("aten::pad", min_opset=19, supports=_circular_growing)
def aten_pad_circular(self: ir.Value, pad: Sequence[int], mode: str = "circular", value: float | None = None) -> ir.Value:
    """pad(Tensor self, SymInt[] pad, str mode="circular", float? value=None) -> Tensor, as Pad-19's "wrap" mode"""
    return op.Pad(self, op.Constant(value_ints=_onnx_pads(pad, self.shape.rank())), mode="wrap")


def _replicate_by_index(x: ir.Value, pairs: Sequence[tuple[int, int]]) -> ir.Value:
    """Replicate padding as ATen computes it: output j along an axis reads input
    clamp(j - left, 0, size - 1). With a negative amount on one side and a positive one on the
    other, cropping first would leave nothing to replicate (ONNX Runtime's edge Pad then fails on
    the empty axis) while ATen still repeats the border element."""
    rank = x.shape.rank()
    for offset, (left, right) in enumerate(pairs):
        if not left and not right:
            continue
        axis = rank - 1 - offset
        size = op.Squeeze(op.Shape(x, start=axis, end=axis + 1))
        positions = op.Range(op.Constant(value_int=-left), op.Add(size, op.Constant(value_int=right)), op.Constant(value_int=1))
        index = op.Clip(positions, op.Constant(value_int=0), op.Sub(size, op.Constant(value_int=1)))
        x = op.Gather(x, index, axis=axis)
    return x


@register("aten::pad", supports=_needs_own_pad)
def aten_pad_special(self: ir.Value, pad: Sequence[int], mode: str = "constant", value: float | None = None) -> ir.Value:
    """pad(Tensor self, SymInt[] pad, str mode="constant", float? value=None) -> Tensor"""
    rank = self.shape.rank()
    x = self
    pairs = [(pad[i], pad[i + 1]) for i in range(0, len(pad), 2)]
    if mode == "replicate":
        return _replicate_by_index(x, pairs)
    # Crop first: negative amounts remove elements from the ends.
    for offset, (left, right) in enumerate(pairs):
        axis = rank - 1 - offset
        if left < 0 or right < 0:
            x = tx.slice_axis(x, axis, max(-left, 0), right if right < 0 else None)
    grow = [(max(left, 0), max(right, 0)) for left, right in pairs]
    if mode == "circular":
        for offset, (left, right) in enumerate(grow):
            axis = rank - 1 - offset
            pieces = ([tx.slice_axis(x, axis, -left)] if left else []) + [x] + ([tx.slice_axis(x, axis, 0, right)] if right else [])
            if len(pieces) > 1:
                x = op.Concat(*pieces, axis=axis)
        return x
    if not any(left or right for left, right in grow):
        return op.Identity(x)
    amounts = _onnx_pads([amount for pair in grow for amount in pair], rank)
    return op.Pad(x, op.Constant(value_ints=amounts), mode="edge" if mode == "replicate" else "reflect")


def _constant_by_numbers(node: Any) -> bool:
    """Constant padding of a real tensor by numbers, with a fill value its dtype holds as it is
    (a fraction into integers, which ATen truncates, is left to the others)."""
    args = list(node.args) + [None, None, None]
    pad, mode = args[1], node.kwargs.get("mode", args[2]) or "constant"
    value = node.kwargs.get("value", args[3])
    example = arg_example(node)
    if mode != "constant" or not isinstance(example, torch.Tensor) or example.is_complex():
        return False
    if not all(isinstance(p, int) for p in pad) or len(pad) % 2 or len(pad) // 2 > example.dim():
        return False
    if value is None or example.dtype.is_floating_point:
        return True
    return float(value).is_integer() and (example.dtype != torch.bool or value in (0, 1))


@register("aten::pad", supports=_constant_by_numbers)
def aten_pad_constant(self: ir.Value, pad: Sequence[int], mode: str = "constant", value: float | None = None) -> ir.Value:
    """pad(Tensor self, SymInt[] pad, str mode="constant", float? value=None) -> Tensor, as one
    constant Pad (negative amounts crop in it as in ATen)."""
    amounts = _onnx_pads(pad, self.shape.rank())
    if not any(amounts):
        return op.Identity(self)
    return op.Pad(self, op.Constant(value_ints=amounts), tx.constant(float(value or 0), self))


@register("aten::constant_pad_nd", complex=True)
def aten_constant_pad_nd_complex(self: ir.Value, pad: Sequence[int], value: float = 0.0) -> ir.Value:
    """constant_pad_nd(Tensor self, SymInt[] pad, Scalar value=0) -> Tensor

    For complex tensors in their real form (trailing dim 2), which the real translation would pad
    as if it were the last complex dim: torch.fft pads signals to the requested sizes this way.
    """
    if not all(isinstance(p, int) for p in pad):
        raise TranslationError("Padding a complex tensor by symbolic amounts is not supported.")
    rank = self.shape.rank()
    begins = [0] * rank
    ends = [0] * rank
    for offset in range(len(pad) // 2):
        axis = rank - 2 - offset  # the trailing real/imaginary dim is not a tensor dim
        begins[axis], ends[axis] = pad[2 * offset], pad[2 * offset + 1]
    number = complex(value)
    if number == 0:
        return op.Pad(self, op.Constant(value_ints=begins + ends))
    # Each part is padded with its own part of the value.
    pads = op.Constant(value_ints=begins[:-1] + ends[:-1])
    parts = [
        op.Pad(op.Gather(self, op.Constant(value_int=i), axis=-1), pads, tx.constant(part, self))
        for i, part in enumerate((number.real, number.imag))
    ]
    return op.Concat(*(op.Unsqueeze(p, op.Constant(value_ints=[-1])) for p in parts), axis=-1)
