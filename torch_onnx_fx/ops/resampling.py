"""Linear and cubic resizing as ATen computes it: one weighted sum per axis, with ATen's own taps
and weights. Antialiased (``F.interpolate(..., antialias=True)``) in float32 and float64, plain
(linear, bilinear, bicubic, trilinear) in float64 by scale factors.

torchlib writes ``Resize(antialias=1)``. ONNX Runtime's kernel follows the ONNX formula, which
is ATen's only for the plain case: with ``align_corners=True`` or explicit scales that differ
from the size ratio, an OpInfo sample was 1.86 off (of values near 2) in 99 % of its pixels.
ONNX Runtime has no float64 ``Resize`` kernel at all: a float64 model failed to load. torch.onnx
exports the same ``Resize``. Plain float32 interpolation stays ``Resize``, which matches ATen.

ATen resamples separably: a pass along the last axis, rounded to the input's type, then one along
each axis before it; each output element is the sum, in order, of a short window of input elements ("taps")
times weights. Both depend only on the sizes, ``align_corners`` and the scale of their axis, so
the translation asks ATen for them at export: resizing an identity basis gives the weights,
resizing a basis of NaNs the windows (every tap ATen reads, a zero weight too: its 0 x inf is NaN
in ATen as well). The graph gathers each output's taps, multiplies them by the weights, zeroes
the padding of shorter windows and sums over the taps: ATen's products in ATen's order, within
an ulp of its values (a border pixel bicubic reads twice, clamped, is one tap here). Taken for
static spatial sizes.

One difference is left: ATen also reads pixels it weighs 0 twice over (a clamped border index,
an axis it does not resize), and 0 x inf is NaN. Next to an infinite input pixel a few outputs
can therefore be NaN in eager and +-inf here (the differential fuzzer's nonfinite inputs, float64
bilinear 4 -> 3 with align_corners: 5 of 54 values). NaN inputs give eager's NaNs: the windows
are read off a NaN basis.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import onnx_ir as ir
import torch
from onnxscript import opset18 as op

from torch_onnx_fx.registry import arg_example, register

__all__: list[str] = []

# name -> (ATen's kernel, spatial rank)
_KERNELS = {
    "bilinear_aa": (torch.ops.aten._upsample_bilinear2d_aa.default, 2),
    "bicubic_aa": (torch.ops.aten._upsample_bicubic2d_aa.default, 2),
    "linear": (torch.ops.aten.upsample_linear1d.default, 1),
    "bilinear": (torch.ops.aten.upsample_bilinear2d.default, 2),
    "bicubic": (torch.ops.aten.upsample_bicubic2d.default, 2),
    "trilinear": (torch.ops.aten.upsample_trilinear3d.default, 3),
}


def _static_sizes(node: torch.fx.Node, dtypes: tuple[torch.dtype, ...]) -> bool:
    example, result = arg_example(node), node.meta.get("val")
    if not isinstance(example, torch.Tensor) or not isinstance(result, torch.Tensor) or example.dim() < 3:
        return False
    if example.dtype not in dtypes:
        return False
    return all(isinstance(d, int) for d in (*example.shape[2:], *result.shape[2:]))


def _float_input(node: torch.fx.Node) -> bool:
    return _static_sizes(node, (torch.float32, torch.float64))


def _float64_scaled(node: torch.fx.Node) -> bool:
    """float64 plain interpolation by scale factors: torchlib's Resize, for which ONNX Runtime has
    no float64 kernel. float32 stays Resize, which computes ATen's values, and float64 by output
    size is decomposed by torch into gathers that match ATen for infinite inputs too."""
    if not _static_sizes(node, (torch.float64,)):
        return False
    scales = node.args[3:] if not str(node.target).endswith(".vec") else node.args[3:4]
    return any(scale is not None for scale in scales) or any(
        node.kwargs.get(name) is not None for name in ("scale_factors", "scales", "scales_d", "scales_h", "scales_w")
    )


def _taps(kind: str, size: int, out: int, align_corners: bool, scale: float | None, dtype: torch.dtype) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For one axis resized from ``size`` to ``out``: each output's input indices, weights and
    which of them are real taps (the rest pad shorter windows), each ``[out, taps]``."""
    kernel, rank = _KERNELS[kind]
    # The basis runs along the first spatial axis; along the others two elements stay two (with
    # one element, an [N, 1, H, 1] tensor is also channels-last by its strides, and ATen's 2-D
    # kernel read the basis wrongly). Element k is set in the first of those only.
    others = [2] * (rank - 1)
    corner = (*[0] * (rank - 1),)

    def resized(value: float) -> torch.Tensor:
        basis = torch.zeros(size, 1, size, *others, dtype=dtype)
        for k in range(size):
            basis[(k, 0, k, *corner)] = value
        return kernel(basis, [out, *others], align_corners, scale, *[None] * (rank - 1))[(slice(None), 0, slice(None), *corner)].T

    weights = resized(1.0).numpy()  # [out, size]
    window = resized(float("nan")).isnan().numpy()
    firsts = window.argmax(axis=1)
    counts = window.sum(axis=1)
    if not (window.any(axis=1).all() and all(window[r, f:f + c].all() for r, (f, c) in enumerate(zip(firsts, counts)))):
        raise ValueError(f"{kind} resize: ATen read a window that is not contiguous")
    width = int(counts.max())
    steps = np.arange(width)
    indices = np.minimum(firsts[:, None] + steps, firsts[:, None] + counts[:, None] - 1)
    real = steps < counts[:, None]
    taken = np.where(real, np.take_along_axis(weights, indices, axis=1), 0).astype(weights.dtype)
    indices = indices.astype(np.int64)
    return indices, taken, real


def _resample(x: ir.Value, axis: int, rank: int, taps: tuple[np.ndarray, np.ndarray, np.ndarray]) -> ir.Value:
    """The weighted window sums along ``axis`` of a ``rank``-D tensor."""
    indices, weights, real = taps
    if indices.shape[1] == 1 and (weights == 1).all() and (indices[:, 0] == np.arange(len(indices))).all():
        return x  # an axis ATen leaves as it is
    gathered = op.Gather(x, op.Constant(value=ir.tensor(indices)), axis=axis)  # [..., out, taps, ...]
    shaped = [*weights.shape, *[1] * (rank - axis - 1)]
    products = op.Mul(gathered, op.Constant(value=ir.tensor(weights.reshape(shaped))))
    products = op.Where(op.Constant(value=ir.tensor(real.reshape(shaped))), products, op.CastLike(0, products))
    return op.ReduceSum(products, op.Constant(value_ints=[axis + 1]), keepdims=0)


def _resize(kind: str, x: ir.Value, output_size: Sequence[int], align_corners: bool, scales: Sequence[float | None]) -> ir.Value:
    dtype = {ir.DataType.FLOAT: torch.float32, ir.DataType.DOUBLE: torch.float64}[x.dtype]
    rank = x.shape.rank()
    for axis in reversed(range(2, rank)):
        size, out = int(x.shape[axis]), int(output_size[axis - 2])
        x = _resample(x, axis, rank, _taps(kind, size, out, align_corners, scales[axis - 2], dtype))
    return x


def _output_size(x: ir.Value, output_size: Sequence[int] | None, scale_factors: Sequence[float] | None) -> list[int]:
    spatial = [int(d) for d in x.shape[2:]]
    if output_size is not None:
        return [int(s) for s in output_size]
    return [int(float(size) * float(factor) // 1) for size, factor in zip(spatial, scale_factors)]


def _translations(kind: str, name: str, supports: Any) -> None:
    """Register ``name`` (with its per-axis scales) and ``name.vec`` (scale factors) for ``kind``."""
    rank = _KERNELS[kind][1]

    def translation(self: ir.Value, output_size: Sequence[int], align_corners: bool, *scales: float | None) -> ir.Value:
        return _resize(kind, self, output_size, align_corners, list(scales) + [None] * (rank - len(scales)))

    def vec(input: ir.Value, output_size: Sequence[int] | None, align_corners: bool, scale_factors: Sequence[float] | None) -> ir.Value:
        scales = list(scale_factors) if scale_factors is not None else [None] * rank
        return _resize(kind, input, _output_size(input, output_size, scale_factors), align_corners, scales)

    for function, overload in ((translation, name), (vec, f"{name}.vec")):
        function.__name__ = function.__qualname__ = "aten_" + overload.replace(".", "_").lstrip("_")
        function.__doc__ = f"{overload}: {kind} resampling with ATen's taps and weights"
        register(f"aten::{overload}", supports=supports)(function)


_translations("bilinear_aa", "_upsample_bilinear2d_aa", _float_input)
_translations("bicubic_aa", "_upsample_bicubic2d_aa", _float_input)
_translations("linear", "upsample_linear1d", _float64_scaled)
_translations("bilinear", "upsample_bilinear2d", _float64_scaled)
_translations("bicubic", "upsample_bicubic2d", _float64_scaled)
_translations("trilinear", "upsample_trilinear3d", _float64_scaled)
