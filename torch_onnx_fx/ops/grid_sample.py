"""grid_sampler_3d: sampling a volume at normalized grid coordinates, trilinear or nearest.

torchlib translates grid_sampler_2d but not grid_sampler_3d. From opset 20 ONNX's GridSample takes volumes
directly; below it, the (up to eight) neighbours of each point are gathered from the flattened
volume and blended, with the padding modes' clipping and reflection written out. Both are
registered, the opset-20 one first so it is preferred where the target opset allows it.
Bicubic sampling, which ATen has only in 2-D, is left to torch.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import onnx_ir as ir
from onnxscript import opset18 as op
from onnxscript import opset20

from torch_onnx_fx.ops import _tensors as tx
from torch_onnx_fx.registry import register

__all__ = ["aten_grid_sampler_3d_opset20", "aten_grid_sampler_3d"]

_INTERPOLATION_MODES = {0: "linear", 1: "nearest"}
_PADDING_MODES = {0: "zeros", 1: "border", 2: "reflection"}


def _trilinear_or_nearest(node: Any) -> bool:
    # ATen has no bicubic sampling in 3-D.
    return node.args[2] in _INTERPOLATION_MODES


@register("aten::grid_sampler_3d", min_opset=20, supports=_trilinear_or_nearest)
def aten_grid_sampler_3d_opset20(
    input: ir.Value, grid: ir.Value, interpolation_mode: int, padding_mode: int, align_corners: bool
) -> ir.Value:
    """grid_sampler_3d(Tensor input, Tensor grid, int interpolation_mode, int padding_mode, bool align_corners) -> Tensor"""
    return opset20.GridSample(
        input,
        grid,
        align_corners=int(align_corners),
        mode=_INTERPOLATION_MODES[interpolation_mode],
        padding_mode=_PADDING_MODES[padding_mode],
    )


def _source_coordinate(coordinate: ir.Value, size: ir.Value, padding_mode: int, align_corners: bool) -> ir.Value:
    """A normalized grid coordinate in [-1, 1] as a position along an axis of ``size`` samples,
    reflected or clipped into range as the padding mode says."""
    one, two = op.CastLike(1.0, coordinate), op.CastLike(2.0, coordinate)
    if align_corners:
        position = op.Mul(op.Div(op.Add(coordinate, one), two), op.Sub(size, one))
    else:
        position = op.Div(op.Sub(op.Mul(op.Add(coordinate, one), size), one), two)
    if padding_mode == 0:
        return position
    if padding_mode == 2:
        # Mirror at the first and last sample centres (align_corners) or at the outer borders.
        low = op.CastLike(0.0 if align_corners else -0.5, coordinate)
        span = op.Sub(size, one) if align_corners else size
        distance = op.Abs(op.Sub(position, low))
        flips = op.Floor(op.Div(distance, span))
        extra = op.Sub(distance, op.Mul(flips, span))
        even = op.Equal(op.Mod(flips, two, fmod=1), op.CastLike(0.0, coordinate))
        reflected = op.Where(even, op.Add(extra, low), op.Add(op.Sub(span, extra), low))
        # A single sample with align_corners has nothing to mirror across.
        position = op.Where(op.Equal(span, op.CastLike(0.0, coordinate)), op.CastLike(0.0, coordinate), reflected)
    return op.Min(op.Max(position, op.CastLike(0.0, coordinate)), op.Sub(size, one))


@register("aten::grid_sampler_3d", supports=_trilinear_or_nearest)
def aten_grid_sampler_3d(
    input: ir.Value, grid: ir.Value, interpolation_mode: int, padding_mode: int, align_corners: bool
) -> ir.Value:
    """grid_sampler_3d(Tensor input, Tensor grid, int interpolation_mode, int padding_mode, bool align_corners) -> Tensor

    Below opset 20 GridSample is 2-D only: look the (up to eight) neighbours up with
    GatherElements on the flattened volume and blend them.
    """
    batch_channels = op.Shape(input, start=0, end=2)
    volume = op.Reshape(input, op.Concat(batch_channels, tx.ints(-1), axis=0))  # [N, C, D*H*W]
    out_spatial = op.Shape(grid, start=1, end=4)
    points = op.Reshape(grid, op.Concat(op.Shape(grid, start=0, end=1), tx.ints(-1, 3), axis=0))  # [N, P, 3]
    sizes = [op.CastLike(op.Shape(input, start=axis, end=axis + 1), grid) for axis in (4, 3, 2)]  # W, H, D
    # x samples W, y samples H and z samples D.
    coords = [
        _source_coordinate(op.Gather(points, tx.int64(k), axis=2), sizes[k], padding_mode, align_corners) for k in range(3)
    ]
    width, height = op.Shape(input, start=4, end=5), op.Shape(input, start=3, end=4)
    strides = [tx.int64(1), width, op.Mul(height, width)]

    def sample(corner: Sequence[ir.Value], weight: ir.Value) -> ir.Value:
        inside, flat = None, None
        for k, position in enumerate(corner):
            last = op.Sub(sizes[k], op.CastLike(1.0, grid))
            within = op.And(op.GreaterOrEqual(position, op.CastLike(0.0, grid)), op.LessOrEqual(position, last))
            inside = within if inside is None else op.And(inside, within)
            term = op.Mul(op.Cast(position, to=tx.INT64), strides[k])
            flat = term if flat is None else op.Add(flat, term)
        flat = op.Where(inside, flat, tx.int64(0))  # [N, P]
        per_channel = op.Expand(op.Unsqueeze(flat, tx.ints(1)), op.Concat(batch_channels, op.Shape(flat, start=1), axis=0))
        gathered = op.GatherElements(volume, per_channel, axis=2)
        return op.Mul(gathered, op.Unsqueeze(op.Where(inside, weight, op.CastLike(0.0, grid)), tx.ints(1)))

    if interpolation_mode == 1:
        blended = sample([op.Round(c) for c in coords], op.CastLike(1.0, grid))
    else:
        lows = [op.Floor(c) for c in coords]
        fractions = [op.Sub(c, low) for c, low in zip(coords, lows)]
        blended = None
        for corner in np.ndindex(2, 2, 2):
            positions, weight = [], None
            for k, upper in enumerate(corner):
                positions.append(op.Add(lows[k], op.CastLike(1.0, grid)) if upper else lows[k])
                factor = fractions[k] if upper else op.Sub(op.CastLike(1.0, grid), fractions[k])
                weight = factor if weight is None else op.Mul(weight, factor)
            contribution = sample(positions, weight)
            blended = contribution if blended is None else op.Add(blended, contribution)
    return op.Reshape(blended, op.Concat(batch_channels, out_spatial, axis=0))
