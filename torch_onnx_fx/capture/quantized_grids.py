"""Grid values: the float stand-ins for quantized tensors while an eager-quantized model is captured.

A quantized tensor ``q`` with (scale, zero point) stands for the floats ``(q - zero_point) * scale``
on a grid. While :func:`tracking`, every tensor the capture makes to stand for one is noted with
its grid (:func:`mark`, :func:`grid_of`), so that later code can recover the exact integers
(:func:`stored`, :func:`centred`) and round onto a grid the way ATen does (:func:`round_to`,
:func:`from_unit`). Each step is the PT2E ``quantize_per_tensor``/``dequantize_per_tensor`` op
(QuantizeLinear/DequantizeLinear in the graph) or float32 arithmetic ATen also does, so the
graph's numbers are the kernel's.
"""

from __future__ import annotations

import contextlib
import functools
import threading
import weakref
from typing import Any, Callable, Iterator

import torch

__all__ = [
    "INTEGER", "Grid", "as_added", "centred", "float32", "float_again", "from_unit", "grid_of", "inside_own_code",
    "internal", "mark", "round_to", "stored", "tracking", "tracking_active",
]

# quantized dtype -> (the integer dtype of the QDQ ops, its range)
INTEGER = {torch.quint8: (torch.uint8, 0, 255), torch.qint8: (torch.int8, -128, 127)}
# (scale, zero point, quantized dtype)
Grid = tuple[float, int, torch.dtype]


class _Grids:
    """Which tensors hold values on a quantization grid, and which grid: the tensors the swapped
    modules return, and what grid-keeping functions (max pool, relu) make of them."""

    def __init__(self) -> None:
        self._grids: dict[int, tuple[weakref.ref, Grid]] = {}
        # >0 while the exporter's own code runs: its operations on grid values are the ones the
        # guard (quantized_functions.QuantizedTensorGuard) lets through.
        self.inside = 0

    def mark(self, tensor: torch.Tensor, grid: Grid) -> torch.Tensor:
        self._grids[id(tensor)] = (weakref.ref(tensor), grid)
        return tensor

    def of(self, tensor: Any) -> Grid | None:
        entry = self._grids.get(id(tensor))
        return entry[1] if entry is not None and entry[0]() is tensor else None


# Per thread: the patched functions are process-wide, but only the capturing thread's tensors
# are grid values; in any other thread they behave as torch's own.
_STATE = threading.local()


def _grids() -> _Grids | None:
    return getattr(_STATE, "grids", None)


def grid_of(tensor: Any) -> Grid | None:
    """The grid of a tensor made while tracking, None for any other."""
    grids = _grids()
    return grids.of(tensor) if grids is not None else None


def mark(tensor: torch.Tensor, grid: Grid) -> torch.Tensor:
    """Note that ``tensor`` holds values on ``grid`` (while tracking; otherwise nothing)."""
    grids = _grids()
    return grids.mark(tensor, grid) if grids is not None else tensor


def inside_own_code() -> bool:
    grids = _grids()
    return grids is not None and grids.inside > 0


def tracking_active() -> bool:
    return _grids() is not None


@contextlib.contextmanager
def tracking() -> Iterator[None]:
    """Track grids in this thread for the time of a capture."""
    _STATE.grids = _Grids()
    try:
        yield
    finally:
        _STATE.grids = None


def internal(function: Callable[..., Any]) -> Callable[..., Any]:
    """Runs ``function`` as the exporter's own code, whose operations on grid values the guard
    lets through (see ``_Grids.inside``)."""

    @functools.wraps(function)
    def run(*args: Any, **kwargs: Any) -> Any:
        grids = _grids()
        if grids is None:
            return function(*args, **kwargs)
        grids.inside += 1
        try:
            return function(*args, **kwargs)
        finally:
            grids.inside -= 1

    return run


def round_to(values: torch.Tensor, scale: float, zero_point: int, dtype: torch.dtype) -> torch.Tensor:
    """The values rounded onto the grid (scale, zero_point) of ``dtype``, as floats again."""
    # ATen multiplies by the float32 reciprocal of the scale where QuantizeLinear divides by it;
    # the two differ at a few near-half values per million, so the graph multiplies too.
    return from_unit(values * float32(1.0 / float32(scale)), scale, zero_point, dtype)


def _integers(values: torch.Tensor, grid: Grid) -> torch.Tensor:
    """The stored integers ``q`` of grid values, as the integer tensor (scaled by the float32
    reciprocal of the scale, as ATen quantizes)."""
    scale, zero_point, dtype = grid
    integer, low, high = INTEGER[dtype]
    return torch.ops.quantized_decomposed.quantize_per_tensor(
        values * float32(1.0 / float32(scale)), 1.0, zero_point, low, high, integer
    )


def stored(values: torch.Tensor, grid: Grid) -> torch.Tensor:
    """The stored integers ``q`` of grid values, as exact floats."""
    integer, low, high = INTEGER[grid[2]]
    return torch.ops.quantized_decomposed.dequantize_per_tensor(_integers(values, grid), 1.0, 0, low, high, integer)


def centred(values: torch.Tensor, grid: Grid) -> torch.Tensor:
    """``q - zero_point`` of grid values, as exact floats (the integers ATen computes with)."""
    integer, low, high = INTEGER[grid[2]]
    return torch.ops.quantized_decomposed.dequantize_per_tensor(_integers(values, grid), 1.0, grid[1], low, high, integer)


def from_unit(values: torch.Tensor, scale: float, zero_point: int, dtype: torch.dtype, stored: bool = False) -> torch.Tensor:
    """Values in units of the output grid, rounded half to even onto it, as floats: centred
    values (``q - zp``), or ``stored`` ones (``q``, the zero point included)."""
    integer, low, high = INTEGER[dtype]
    decomposed = torch.ops.quantized_decomposed
    rounded = decomposed.quantize_per_tensor(values, 1.0, 0 if stored else zero_point, low, high, integer)
    result = decomposed.dequantize_per_tensor(rounded, scale, zero_point, low, high, integer)
    return mark(result, (scale, zero_point, dtype))


def float32(value: float) -> float:
    """A Python float rounded to float32, as fbgemm holds its scales."""
    return float(torch.tensor(value, dtype=torch.float32))


def as_added(values: torch.Tensor) -> torch.Tensor:
    """The float ATen's vectorized quantized add reads for grid values: ``q * s + (-zp * s)``
    in one fused multiply-add (one rounding, where dequantizing rounds ``(q - zp) * s``); made
    exactly in float64 and rounded once. (Its scalar loop, for the few elements past the last
    full vector, dequantizes instead: those may still differ by one step.)"""
    grid = grid_of(values)
    if grid is None:
        return values
    scale32, zero_point = float32(grid[0]), grid[1]
    fused = _integers(values, grid).to(torch.float64) * scale32 + float32(-zero_point * scale32)
    return fused.to(torch.float32)


def float_again(values: torch.Tensor) -> torch.Tensor:
    """Dequantized values: the same numbers as a new tensor without a grid, which float code
    may use freely (a view; no node survives in the graph)."""
    return values.view(values.shape)
