"""Pooling cases ONNX's pooling operators do not express directly.

* Adaptive pooling whose input size is not a multiple of the output size: PyTorch's bins
  ``[floor(i*L/out), ceil((i+1)*L/out))`` overlap and differ in size. With static sizes we gather
  every bin's elements through a precomputed index table (short bins repeat their last element
  for max, and are weighted out for mean), then reduce; max pooling also returns PyTorch's
  indices (flat over the spatial dims).
* ``avg_pool`` with ``divisor_override``: a sum over each window (a depthwise convolution with a
  kernel of ones, padded as ATen pads, ``ceil_mode`` included) divided by the given divisor.
"""

from __future__ import annotations

import itertools
import math
from typing import Any, Sequence

import numpy as np
import onnx_ir as ir
import torch
from onnxscript import opset18 as op

from torch_onnx_fx.ops.windows import per_axis
from torch_onnx_fx.registry import arg_example, register

__all__ = ["aten_adaptive_max_pool", "aten_adaptive_avg_pool_general", "aten_avg_pool_divisor_override"]


def _static_spatial(node: Any) -> bool:
    example = arg_example(node)
    output_size = node.args[1]
    if not isinstance(example, torch.Tensor) or not all(isinstance(o, int) and o > 0 for o in output_size):
        return False
    return all(isinstance(s, int) for s in example.shape[-len(output_size):])


def _bins(length: int, out: int) -> list[range]:
    return [range((i * length) // out, -((-(i + 1) * length) // out)) for i in range(out)]


def _bin_table(spatial: Sequence[int], output_size: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
    """For every output position, the flat spatial indices of its bin (padded by repeating the
    last one) and a 0/1 mask of which entries are real: shapes [*output_size, K]."""
    per_dim = [_bins(length, out) for length, out in zip(spatial, output_size)]
    widest = [max(len(b) for b in bins) for bins in per_dim]
    strides = [int(np.prod(spatial[i + 1:])) for i in range(len(spatial))]
    index = np.zeros([*output_size, int(np.prod(widest))], dtype=np.int64)
    mask = np.zeros_like(index, dtype=np.float32)
    for position in itertools.product(*(range(o) for o in output_size)):
        entries = []
        for offsets in itertools.product(*(range(w) for w in widest)):
            coords = []
            real = True
            for d, (i, k) in enumerate(zip(position, offsets)):
                bin_ = per_dim[d][i]
                real = real and k < len(bin_)
                coords.append(bin_[min(k, len(bin_) - 1)])
            entries.append((sum(c * s for c, s in zip(coords, strides)), real))
        index[position] = [e for e, _ in entries]
        mask[position] = [1.0 if r else 0.0 for _, r in entries]
    return index, mask


def _gathered(self: ir.Value, output_size: Sequence[int]) -> tuple[ir.Value, np.ndarray, np.ndarray, bool]:
    """``self``'s bins as [N?, C, *output_size, K] plus the tables; batch dim added if missing."""
    dims = len(output_size)
    spatial = [int(d) for d in self.shape[-dims:]]
    unbatched = self.shape.rank() == dims + 1
    x = op.Unsqueeze(self, op.Constant(value_ints=[0])) if unbatched else self
    index, mask = _bin_table(spatial, output_size)
    # [N, C, prod(spatial)], spelled out: a -1 cannot be inferred when the batch is empty.
    flat_shape = op.Concat(op.Shape(x, end=2), op.Constant(value_ints=[int(np.prod(spatial))]), axis=0)
    flat = op.Reshape(x, flat_shape) if dims > 1 else x
    gathered = op.Gather(flat, op.Constant(value=ir.tensor(index)), axis=2)
    return gathered, index, mask, unbatched


@register("aten::adaptive_max_pool1d", "aten::adaptive_max_pool2d", "aten::adaptive_max_pool3d", supports=_static_spatial)
def aten_adaptive_max_pool(self: ir.Value, output_size: Sequence[int]) -> tuple[ir.Value, ir.Value]:
    """adaptive_max_pool{1,2,3}d(Tensor self, int[] output_size) -> (Tensor, Tensor)"""
    gathered, index, _, _ = _gathered(self, output_size)  # the Reshape below restores any batch dim
    last = op.Constant(value_ints=[-1])
    values = op.ReduceMax(gathered, last, keepdims=1)
    # ArgMax takes the first maximum, as ATen does; map the bin position back to the flat index.
    position = op.ArgMax(gathered, axis=-1, keepdims=1, select_last_index=0)
    if gathered.dtype is not None and gathered.dtype.is_floating_point():
        # ATen's scan takes every NaN it meets (val > max || isnan(val)): a bin's last NaN.
        nans = op.Cast(op.IsNaN(gathered), to=ir.DataType.INT32)
        last_nan = op.ArgMax(nans, axis=-1, keepdims=1, select_last_index=1)
        position = op.Where(op.Cast(op.ReduceMax(nans, last, keepdims=1), to=ir.DataType.BOOL), last_nan, position)
    table = op.Constant(value=ir.tensor(index))
    indices = op.GatherElements(op.Expand(table, op.Shape(gathered)), position, axis=-1)
    # Reshape to the result's shape rather than squeeze the bin axis: ONNX Runtime's reductions
    # drop it inconsistently on an empty batch.
    leading = op.Shape(self, end=self.shape.rank() - len(output_size))
    shape = op.Concat(leading, op.Constant(value_ints=list(output_size)), axis=0)
    return op.Reshape(values, shape), op.Reshape(indices, shape)


def _not_uniform(node: Any) -> bool:
    """Static sizes that some output size does not divide (the uniform case uses AveragePool)."""
    if not _static_spatial(node):
        return False
    example = node.args[0].meta["val"]
    output_size = node.args[1]
    return any(s % o for s, o in zip(example.shape[-len(output_size):], output_size))


@register("aten::_adaptive_avg_pool2d", "aten::_adaptive_avg_pool3d", supports=_static_spatial)
@register("aten::adaptive_avg_pool1d", "aten::adaptive_avg_pool2d", "aten::adaptive_avg_pool3d", supports=_not_uniform)
def aten_adaptive_avg_pool_general(self: ir.Value, output_size: Sequence[int]) -> ir.Value:
    """adaptive_avg_pool{1,2,3}d(Tensor self, SymInt[] output_size) -> Tensor, for uneven bins

    ATen's arithmetic: a bin's sum divided by its length along each axis in turn (sum / kh / kw).
    Multiplying by 1 / count instead rounded twice, and the weights were float32: a float64
    pool 5e-9 off (torch.onnx's decomposition is exact)."""
    gathered, _, mask, unbatched = _gathered(self, output_size)
    # The sum is a MatMul with a ones column rather than a ReduceSum, which ONNX Runtime
    # mis-shapes on an empty batch; padding entries are zeros, not their repeated element (a
    # repeated inf times a zero weight would be NaN).
    ones = op.CastLike(op.Constant(value=ir.tensor(np.ones([mask.shape[-1], 1], dtype=np.float32))), gathered)
    members = op.Where(op.Constant(value=ir.tensor(mask > 0)), gathered, op.CastLike(0, gathered))
    result = op.Squeeze(op.MatMul(members, ones), op.Constant(value_ints=[-1]))
    spatial = [int(d) for d in self.shape[-len(output_size):]]
    for axis, (length, out) in enumerate(zip(spatial, output_size)):
        counts = np.array([len(b) for b in _bins(length, out)], dtype=np.float32)
        shape = [1] * len(output_size)
        shape[axis] = out
        result = op.Div(result, op.CastLike(op.Constant(value=ir.tensor(counts.reshape(shape))), result))
    return op.Squeeze(result, op.Constant(value_ints=[0])) if unbatched else result


def _divisor_override(node: Any) -> bool:
    # torchlib's avg_pool ignores divisor_override (it divides by the window): every node with a
    # divisor is translated here, or refused by ops/exactness (ceil_mode with dynamic sizes).
    args = list(node.args) + [None] * 7
    return node.kwargs.get("divisor_override", args[6]) is not None


@register("aten::avg_pool1d", "aten::avg_pool2d", "aten::avg_pool3d", supports=_divisor_override)
def aten_avg_pool_divisor_override(
    self: ir.Value,
    kernel_size: Sequence[int],
    stride: Sequence[int] = (),
    padding: Any = 0,
    ceil_mode: bool = False,
    count_include_pad: bool = True,
    divisor_override: int | None = None,
) -> ir.Value:
    """avg_pool{1,2,3}d(..., int? divisor_override) with a divisor: window sums / divisor"""
    dims = len(kernel_size) if isinstance(kernel_size, (list, tuple)) else 1
    kernel = per_axis(kernel_size, dims, [])
    strides = per_axis(stride, dims, kernel)
    pads = per_axis(padding, dims, [0] * dims)
    rank = self.shape.rank()
    ends = list(pads)
    if ceil_mode:
        ends = []
        for length, k, s, p in zip([int(d) for d in self.shape[rank - dims:]], kernel, strides, pads):
            out = math.ceil((length + 2 * p - k) / s) + 1
            if (out - 1) * s >= length + p:
                out -= 1  # ATen drops a last window that would start in the right padding
            ends.append(max((out - 1) * s + k - length - p, 0))
    # Every channel as an image of one channel, so the kernel of ones needs no channel count
    # (which may be dynamic): [..., *spatial] -> [-1, 1, *spatial], and back after the sums.
    shape = op.Shape(self)
    spatial = op.Shape(self, start=rank - dims)
    x = op.Reshape(self, op.Concat(op.Constant(value_ints=[-1, 1]), spatial, axis=0))
    ones = op.CastLike(op.Constant(value=ir.tensor(np.ones([1, 1, *kernel], dtype=np.float32))), x)
    sums = op.Conv(x, ones, kernel_shape=kernel, strides=strides, pads=[*pads, *ends])
    leading = op.Slice(shape, op.Constant(value_ints=[0]), op.Constant(value_ints=[rank - dims]))
    sums = op.Reshape(sums, op.Concat(leading, op.Shape(sums, start=2), axis=0))
    return op.Div(sums, op.CastLike(float(divisor_override), sums))
