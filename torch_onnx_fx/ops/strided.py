"""``as_strided`` of a tensor whose storage is not its values in row-major order.

``as_strided`` reads storage. torchlib reads its input's values in row-major order from position
0, which is the storage only for a contiguous tensor that starts its storage. The normalize stage
gives ``as_strided`` the tensor that owns the storage (``normalize/storage_base.py``); when that
tensor's recorded layout is anything else — channels-last, a transposed parameter, a slice of a
graph input — the storage positions of its values are known from its strides and offset, and the
positions ``as_strided`` reads are looked up among them, at export time. A position no value of
the tensor holds (the view reads memory outside it) is refused, as is a layout with symbolic sizes.
The graph reproduces eager for inputs laid out as the example's were.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import onnx_ir as ir
import torch
from onnxscript import opset18 as op

from torch_onnx_fx.errors import TranslationError
from torch_onnx_fx.ops._tensors import ints
from torch_onnx_fx.registry import arg_example, register, wants_context
from torch_onnx_fx.translate.op_context import OpContext

__all__ = ["aten_as_strided_of_laid_out_storage", "aten_as_strided_scatter", "scattered_positions", "storage_gather", "starts_its_storage_in_order"]


def starts_its_storage_in_order(example: torch.Tensor) -> bool:
    """Whether the tensor's values in row-major order are its storage from position 0 on."""
    try:
        return bool(example.is_contiguous()) and int(example.storage_offset()) == 0
    except Exception:  # noqa: BLE001 - symbolic strides: contiguity unknown, not known to hold
        return False


def _laid_out(node: Any) -> bool:
    example = arg_example(node)
    return isinstance(example, torch.Tensor) and not example.is_complex() and not starts_its_storage_in_order(example)


def _static(values: Sequence[Any]) -> list[int] | None:
    try:
        return [int(v) for v in values]
    except (TypeError, ValueError):
        return None


def _positions(offset: int, sizes: Sequence[int], strides: Sequence[int]) -> np.ndarray:
    """The storage position of every element of a view, in its row-major order."""
    positions = np.full(1, offset, dtype=np.int64)
    for length, step in zip(sizes, strides):
        positions = (positions[:, None] + np.arange(length, dtype=np.int64)[None, :] * step).reshape(-1)
    return positions


def storage_gather(example: torch.Tensor, size: Sequence[Any], stride: Sequence[Any], offset: Any) -> np.ndarray | str:
    """For each element of ``as_strided(example, size, stride, offset)``, the row-major index of the
    value of ``example`` at the storage position it reads; or why there is none."""
    shape, strides = _static(example.shape), _static(example.stride())
    own_offset = _static([example.storage_offset()])
    wanted, steps, start = _static(size), _static(stride), _static([offset or 0])
    if None in (shape, strides, own_offset, wanted, steps, start):
        return "its sizes, strides or offset are symbolic"
    # Storage position of every value, in row-major order of the tensor (zero strides repeat one).
    held = _positions(own_offset[0], shape, strides)
    read = _positions(start[0], wanted, steps)
    if read.size == 0:
        return np.zeros(wanted, dtype=np.int64)
    if held.size == 0:
        return "the tensor holds no values"
    lookup = np.full(int(max(held.max(), read.max())) + 1, -1, dtype=np.int64)
    lookup[held[::-1]] = np.arange(held.size, dtype=np.int64)[::-1]
    found = lookup[read] if read.min() >= 0 else np.full(read.shape, -1)
    if (found < 0).any():
        return "it reads storage positions no value of the tensor holds (memory outside it)"
    return found.reshape(wanted)


@register("aten::as_strided", supports=_laid_out)
@register("aten::as_strided_copy")
@wants_context
def aten_as_strided_of_laid_out_storage(
    self: ir.Value, size: Sequence[Any], stride: Sequence[Any], storage_offset: Any = None, *, ctx: OpContext
) -> ir.Value:
    """as_strided(Tensor(a) self, SymInt[] size, SymInt[] stride, SymInt? storage_offset=None) -> Tensor(a)

    For an input whose recorded layout is not row-major from storage position 0: one Gather of
    the storage positions read, looked up among the input's own (see the module's docstring).
    """
    example = ctx.inputs[0]
    if starts_its_storage_in_order(example):
        # as_strided_copy of a tensor that is its own storage in order (torchlib has no
        # as_strided_copy; the normalize stage may have given it the base of a view). Imported
        # here: torchlib's translations load only when a graph needs one (ops/deferred_torchlib.py).
        from onnxscript.function_libs.torch_lib.ops import core as torchlib_core

        return torchlib_core.aten_as_strided(self, size, stride, storage_offset)
    indices = storage_gather(example, size, stride, storage_offset)
    if isinstance(indices, str):
        layout = f"shape {list(example.shape)}, strides {list(example.stride())}, storage offset {example.storage_offset()}"
        raise TranslationError(
            f"{ctx.target} reads the storage of a tensor laid out with {layout}, which the graph cannot "
            f"reproduce: {indices}. Make the tensor contiguous first (x.contiguous().as_strided(...)) if "
            "that is what the model means."
        )
    flat = op.Reshape(self, ints(-1))
    return op.Gather(flat, ctx.constant(indices.astype(np.int64)), axis=0)


@register("aten::as_strided_scatter", "prims::as_strided_scatter")
@wants_context
def aten_as_strided_scatter(
    self: ir.Value, src: ir.Value, size: Sequence[Any], stride: Sequence[Any], storage_offset: Any = None, *, ctx: OpContext
) -> ir.Value:
    """as_strided_scatter(Tensor self, Tensor src, SymInt[] size, SymInt[] stride, SymInt? storage_offset=None) -> Tensor

    ATen writes ``src`` into the strided view of a clone of ``self``: for a contiguous ``self``
    the view's storage positions are row-major indices of its values, known at export, and
    ``src`` is scattered there (torch has no decomposition of its prims form, which the export
    lacked). Other layouts, or symbolic sizes, are refused."""
    flat = op.Reshape(self, ints(-1))
    # src converted to self's type, as eager's copy_ into the view converts it.
    written = op.ScatterND(flat, scattered_positions(ctx, size, stride, storage_offset), op.CastLike(op.Reshape(src, ints(-1)), self))
    return op.Reshape(written, op.Shape(self))


def scattered_positions(ctx: OpContext, size: Sequence[Any], stride: Sequence[Any], storage_offset: Any) -> ir.Value:
    """The row-major positions (a column, for ScatterND) of the values of ``ctx``'s first input
    that ``as_strided_scatter`` writes. ATen addresses the storage as the input lays it out (a
    view's own offset and strides included: eager writes nothing visible through a view of
    storage position 0 of ``base[3:4]``); for a tensor that is its storage in row-major order
    from position 0 those are row-major indices. Other layouts are refused, as are symbolic
    sizes and a view past the tensor's values."""
    example = ctx.inputs[0]
    numel, wanted, steps, start = _static([example.numel()]), _static(size), _static(stride), _static([storage_offset or 0])
    reason = None
    if None in (numel, wanted, steps, start):
        reason = "its sizes, strides or offset are symbolic"
    elif not starts_its_storage_in_order(example):
        reason = "the tensor is not contiguous from the start of its storage"
    else:
        written = _positions(start[0], wanted, steps)
        if written.size and (written.min() < 0 or written.max() >= numel[0]):
            reason = "the view reaches past the tensor's values"
        elif np.unique(written).size != written.size:
            reason = "the view overlaps itself (eager refuses to write through it)"
    if reason is not None:
        raise TranslationError(f"{ctx.target} writes through a strided view whose storage positions the graph cannot know: {reason}.")
    return ctx.constant(written.reshape(-1, 1))
