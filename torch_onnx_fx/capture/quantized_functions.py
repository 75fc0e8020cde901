"""Float functions eager code calls on quantized tensors, made to round as ATen's quantized kernels do.

Outside the quantized modules, eager-quantized models call float functions on quantized tensors:
torchvision's ``F.adaptive_avg_pool2d``, ``x.mean``, ``F.avg_pool2d``, ``nn.Hardsigmoid``, max pools,
channel shuffles. ATen dispatches them to quantized kernels, which round: an average onto its
input's grid, sigmoid onto 1/256 steps. While :func:`patched` is active these functions, given a
grid value (:mod:`torch_onnx_fx.capture.quantized_grids`), do the same; functions that keep the grid
(max pool, relu, views) pass it on; :class:`QuantizedTensorGuard` refuses any other computation
on a grid value, which a float graph would otherwise do without eager's rounding.
"""

from __future__ import annotations

import contextlib
import importlib
import math
from typing import Any, Callable, Iterator

import torch
import torch.utils._pytree as pytree
from torch.overrides import TorchFunctionMode

from torch_onnx_fx.errors import CaptureError
from torch_onnx_fx.capture.quantized_grids import (
    INTEGER, centred, float_again, from_unit, grid_of, inside_own_code, internal, mark, round_to, stored, tracking_active,
)

__all__ = ["QuantizedTensorGuard", "patched"]


# Float functions eager code calls on quantized tensors. Averaging ones give a result on their
# input's grid (see _averaging); hardsigmoid on quantized tensors rounds to a fixed grid;
# grid-keeping ones (max pool, relu) just pass the grid on.
_KEEPING = (("torch.nn.functional", "max_pool1d"), ("torch.nn.functional", "max_pool2d"),
            ("torch.nn.functional", "max_pool3d"), ("torch.nn.functional", "relu"), ("torch", "flatten"),
            ("torch.nn.functional", "dropout"), ("torch", "chunk"), ("torch", "split"), ("torch", "transpose"),
            *(("torch.Tensor", method) for method in (
                "view", "reshape", "transpose", "permute", "contiguous", "flatten", "chunk", "split", "narrow",
                "__getitem__", "relu")))


def _owner(path: str) -> Any:
    if path == "torch.Tensor":
        return torch.Tensor
    return importlib.import_module(path)


def _pooled_count(spatial: int) -> Callable[..., int | None]:
    """How many values an adaptive average pool averages per output, when every output
    averages the same number: a global pool (output size 1 on every dim)."""

    def count(values: torch.Tensor, args: tuple, kwargs: dict) -> int | None:
        size = args[0] if args else kwargs.get("output_size")
        sizes = list(size) if isinstance(size, (list, tuple)) else [size] * spatial
        dims = values.shape[-spatial:]
        return math.prod(dims) if all(item == 1 for item in sizes) and all(isinstance(dim, int) for dim in dims) else None

    return count


def _pool_arguments(args: tuple, kwargs: dict) -> dict[str, Any]:
    """An average pool's arguments after its input, by name."""
    names = ("kernel_size", "stride", "padding", "ceil_mode", "count_include_pad", "divisor_override")
    return dict(zip(names, args), **kwargs)


def _window_count(spatial: int) -> Callable[..., int | None]:
    """An average pool's divisor when it is the same at every output: the window's size when
    padding counts (the default), or the divisor given."""

    def count(values: torch.Tensor, args: tuple, kwargs: dict) -> int | None:
        given = _pool_arguments(args, kwargs)
        if given.get("divisor_override"):
            return int(given["divisor_override"])
        if given.get("ceil_mode") or not given.get("count_include_pad", True):
            return None
        kernel = given["kernel_size"]
        return math.prod(kernel) if isinstance(kernel, (list, tuple)) else kernel**spatial

    return count


def _mean_count(values: torch.Tensor, args: tuple, kwargs: dict) -> int | None:
    dims = args[0] if args else kwargs.get("dim")
    dims = range(values.dim()) if dims is None else [dims] if isinstance(dims, int) else dims
    sizes = [values.shape[dim] for dim in dims]
    return math.prod(sizes) if all(isinstance(size, int) for size in sizes) else None


def _counts_padding(values: torch.Tensor, args: tuple, kwargs: dict) -> bool:
    """Whether an average pool pads and counts the padding (ATen's quantized pool pads with the
    zero point, i.e. with real zeros)."""
    given = _pool_arguments(args, kwargs)
    padding = given.get("padding", 0)
    return bool(any(padding) if isinstance(padding, (list, tuple)) else padding) and given.get("count_include_pad", True)


def _never(values: torch.Tensor, args: tuple, kwargs: dict) -> bool:
    return False


def _averaging(
    original: Callable[..., Any], count: Callable[..., int | None], pads: Callable[..., bool]
) -> Callable[..., Any]:
    """ATen averages the stored integers ``q`` (padding counted as the zero point) and rounds the
    quotient half to even; the result is on the input's grid. The graph averages the exact
    integers in float; where every output averages the same ``n`` it recovers the exact sum and
    divides it once, so ties round as ATen's do; elsewhere (padding not counted, uneven adaptive
    windows) the float average is rounded, which can differ only on an exact tie."""

    @internal
    def averaged(values: Any, *args: Any, **kwargs: Any) -> Any:
        grid = grid_of(values)
        if grid is None:
            return original(values, *args, **kwargs)
        scale, zero_point, dtype = grid
        # Padding pads with 0: averaged centred (q - zp), padded positions are the zero point.
        padded = pads(values, args, kwargs)
        mean = original(centred(values, grid) if padded else stored(values, grid), *args, **kwargs)
        offset = zero_point if padded else 0
        divisor = count(values, args, kwargs)
        if divisor is not None:
            mean = (torch.round(mean * divisor) + offset * divisor) / divisor
        elif offset:
            mean = mean + offset
        return from_unit(mean, scale, zero_point, dtype, stored=True)

    return averaged


_AVERAGING = [("torch.nn.functional", f"adaptive_avg_pool{n}d", _pooled_count(n), _never) for n in (1, 2, 3)]
_AVERAGING += [("torch.nn.functional", f"avg_pool{n}d", _window_count(n), _counts_padding) for n in (1, 2, 3)]
_AVERAGING += [("torch.Tensor", "mean", _mean_count, _never), ("torch", "mean", _mean_count, _never)]


def _keeping(original: Callable[..., Any]) -> Callable[..., Any]:
    @internal
    def kept(values: Any, *args: Any, **kwargs: Any) -> Any:
        result = original(values, *args, **kwargs)
        grid = grid_of(values)
        if grid is not None and isinstance(result, torch.Tensor):
            mark(result, grid)
        elif grid is not None and isinstance(result, (tuple, list)):
            # chunk and split: every piece; max pool with indices: the values (indices are int64)
            for piece in result:
                if isinstance(piece, torch.Tensor) and piece.is_floating_point():
                    mark(piece, grid)
        return result

    return kept


def _fixed_grid(grids: dict[torch.dtype, tuple[float, int]]) -> Callable[..., Callable[..., Any]]:
    """A function whose quantized version rounds onto a fixed grid per dtype (sigmoid's
    [0, 1] on 1/256 steps), whatever its input's grid."""

    def make(original: Callable[..., Any]) -> Callable[..., Any]:
        @internal
        def fixed(values: Any, *args: Any, **kwargs: Any) -> Any:
            result = original(values, *args, **kwargs)
            grid = grid_of(values)
            if grid is None:
                return result
            scale, zero_point = grids[grid[2]]
            return round_to(result, scale, zero_point, grid[2])

        return fixed

    return make


_UNIT_INTERVAL = {torch.quint8: (1.0 / 256, 0), torch.qint8: (1.0 / 256, -128)}
_SIGNED_UNIT_INTERVAL = {torch.quint8: (2.0 / 256, 128), torch.qint8: (2.0 / 256, 0)}
_FIXED = (
    ("torch.nn.functional", "hardsigmoid", _UNIT_INTERVAL), ("torch", "sigmoid", _UNIT_INTERVAL),
    ("torch.Tensor", "sigmoid", _UNIT_INTERVAL), ("torch", "tanh", _SIGNED_UNIT_INTERVAL),
    ("torch.Tensor", "tanh", _SIGNED_UNIT_INTERVAL),
)


def _quantize_per_tensor(original: Callable[..., Any]) -> Callable[..., Any]:
    """``torch.quantize_per_tensor`` in forward, with constant parameters: grid values."""

    @internal
    def quantize(values: Any, scale: Any, zero_point: Any, dtype: torch.dtype) -> Any:
        if isinstance(scale, (int, float)) and isinstance(zero_point, int) and dtype in INTEGER and tracking_active():
            return round_to(values, float(scale), zero_point, dtype)
        return original(values, scale, zero_point, dtype)

    return quantize


def _dequantize(original: Callable[..., Any]) -> Callable[..., Any]:
    """``Tensor.dequantize`` of grid values: they are the dequantized values already."""

    @internal
    def dequantize(values: Any) -> Any:
        grid = grid_of(values)
        return float_again(values) if grid is not None else original(values)

    return dequantize


class QuantizedTensorGuard(TorchFunctionMode):
    """Refuses float computations on grid values outside this module's own code. Eager runs
    them as quantized kernels that round onto some grid (or refuses them); a float graph would
    skip that rounding silently. Metadata (shapes, dtypes) and functions handled above pass."""

    def __torch_function__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        kwargs = kwargs or {}
        result = func(*args, **kwargs)
        if not tracking_active() or inside_own_code():
            return result
        # A float result, or none at all (``y[0] = 0.3``: eager rounds the value written).
        computed = result is None or any(isinstance(leaf, torch.Tensor) and leaf.is_floating_point() for leaf in pytree.tree_leaves(result))
        if computed and any(grid_of(leaf) is not None for leaf in pytree.tree_leaves((args, kwargs))):
            name = getattr(func, "__qualname__", None) or getattr(func, "__name__", repr(func))
            raise CaptureError(
                f"{name} on a quantized tensor has no QDQ equivalent here (eager PyTorch runs a quantized "
                "kernel that rounds its result; a float graph would not). Dequantize before it (DeQuantStub), "
                "or export the float model and quantize the ONNX model (onnxruntime.quantization).",
                [],
            )
        return result


@contextlib.contextmanager
def patched() -> Iterator[None]:
    """The functions above in place of torch's, and the guard on, until exit."""
    replacements = [
        (path, attribute, lambda original, count=count, pads=pads: _averaging(original, count, pads))
        for path, attribute, count, pads in _AVERAGING
    ]
    replacements += [(path, attribute, _keeping) for path, attribute in _KEEPING]
    replacements += [(path, attribute, _fixed_grid(grids)) for path, attribute, grids in _FIXED]
    replacements += [("torch", "quantize_per_tensor", _quantize_per_tensor), ("torch.Tensor", "dequantize", _dequantize)]
    originals: list[tuple[Any, str, Any]] = []
    try:
        for path, attribute, make in replacements:
            owner = _owner(path)
            original = getattr(owner, attribute)
            originals.append((owner, attribute, original))
            setattr(owner, attribute, make(original))
        with QuantizedTensorGuard():
            yield
    finally:
        for owner, attribute, original in reversed(originals):
            setattr(owner, attribute, original)
