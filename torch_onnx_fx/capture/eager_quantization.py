"""Eager-mode quantized models captured as QuantizeLinear/DequantizeLinear graphs.

A model made by ``torch.ao.quantization.convert`` (torchvision's ``quantized_*`` models) holds
modules whose weights are packed C++ objects and whose tensors are ``quint8`` tensors: torch.export
traces neither (nor does torch.onnx). Each such tensor stands for the float values
``(q - zero_point) * scale`` on a grid; each quantized kernel computes from them and rounds its
result onto a grid. :func:`as_qdq` swaps, for the time of a capture, every quantized module for a
float one replaying its fbgemm arithmetic step by step in float32 (integer accumulation exact
below 2**24, the same float32 requantization, the same half-to-even rounding), with the PT2E
``quantize_per_tensor``/``dequantize_per_tensor`` ops (QuantizeLinear/DequantizeLinear) for the
integer steps and the int8 weights kept as int8. The float functions eager code calls on quantized
tensors (average pools, means, sigmoid, max pool, views) are patched likewise while the swap is in
place (:mod:`torch_onnx_fx.capture.quantized_functions`), for the tensors this capture made
(:mod:`torch_onnx_fx.capture.quantized_grids`); any other computation on them is refused, as is a
quantized module this file does not know.

Outputs equal eager's bit for bit on inputs in the calibrated range. Beyond it fbgemm's 16-bit
pair sums saturate, which the graph does not reproduce (it keeps the exact sums); and averages
exactly half-way between two grid points round as PyTorch 2.13's kernels do (2.14's channels-last
pooling kernels round some of them the other way). See docs/migration.md.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from typing import Any, Callable, Iterator

import torch
import torch.nn.functional as F
from torch import nn

from torch_onnx_fx.capture import quantized_functions
from torch_onnx_fx.capture import quantized_grids
from torch_onnx_fx.errors import CaptureError
from torch_onnx_fx.capture.quantized_grids import (
    INTEGER, as_added, centred, float32, float_again, from_unit, grid_of, internal, round_to,
)

__all__ = ["as_qdq", "failure_hint"]

logger = logging.getLogger(__name__)

_PACKAGES = ("torch.ao.nn.quantized", "torch.ao.nn.intrinsic.quantized", "torch.nn.quantized")
_REPLAYED_ENGINES = frozenset({"fbgemm", "x86", "onednn"})
# One eager-quantized capture at a time: the function patches are process-wide.
_CAPTURE_LOCK = threading.Lock()

def _is_quantized(child: nn.Module) -> bool:
    # FloatFunctional lives among the quantized modules but computes in float (a model before
    # convert, or quantizable with quantize=False): convert replaces it by QFunctional.
    return type(child).__module__.startswith(_PACKAGES) and type(child).__name__ not in ("FloatFunctional", "LinearPackedParams")


def failure_hint(module: nn.Module) -> tuple[str, str] | None:
    """For a model holding eager-mode quantized modules (None otherwise): what a capture error
    adds to its first line, and what to do instead."""
    quantized = sorted({type(child).__name__ for child in module.modules() if _is_quantized(child)})
    if not quantized:
        return None
    return (
        f": the model holds eager-mode quantized modules ({', '.join(quantized[:5])}"
        f"{', …' if len(quantized) > 5 else ''}); those are captured as QuantizeLinear/DequantizeLinear, but "
        "quantized tensors made or used outside them cannot be traced",
        "Keep quantized tensors inside the quantized modules (QuantStub/DeQuantStub, FloatFunctional), or export "
        "the float model and quantize the ONNX model (onnxruntime.quantization), or quantize with PT2E "
        "(torch.ao.quantization.quantize_pt2e) on a torch.export program.",
    )


class _Requantized(nn.Module):
    """A float function of the inputs, rounded onto the module's output grid."""

    def __init__(self, function: Callable[..., torch.Tensor], scale: float, zero_point: int, dtype: torch.dtype):
        super().__init__()
        self.function, self.scale, self.zero_point, self.dtype = function, float(scale), int(zero_point), dtype

    @internal
    def forward(self, *inputs: torch.Tensor) -> torch.Tensor:
        return round_to(self.function(*inputs), self.scale, self.zero_point, self.dtype)


class _WeightedLayer(nn.Module):
    """A quantized convolution or linear layer: int8 weights dequantized in the graph, the float
    layer, its fused ReLU, and the output rounded onto its grid."""

    def __init__(self, original: nn.Module, layer: Callable[..., torch.Tensor], relu: bool, dtype: torch.dtype):
        super().__init__()
        weight = original.weight()
        self.register_buffer("weight", weight.int_repr())
        scheme = weight.qscheme()
        if scheme in (torch.per_channel_affine, torch.per_channel_symmetric):
            self.register_buffer("weight_scale", weight.q_per_channel_scales().to(torch.float32))
            # Stored as the graph reads them (float32 scales, zero points of the weight's integer
            # type): torchlib casts them to those types, and a cast of a kept weight is not folded.
            self.register_buffer("weight_zero_point", weight.q_per_channel_zero_points().to(INTEGER[weight.dtype][0]))
            self.axis: int | None = weight.q_per_channel_axis()
        else:
            # Numbers, not buffers: the per-tensor ops take them as constants.
            self.weight_scale, self.weight_zero_point = float(weight.q_scale()), int(weight.q_zero_point())
            self.axis = None
        self.weight_dtype = weight.dtype
        bias = original.bias()
        self.register_buffer("bias", None if bias is None else bias.detach().clone())
        self.layer, self.relu, self.dtype = layer, relu, dtype
        self.scale, self.zero_point = float(original.scale), int(original.zero_point)

    @internal
    def forward(self, values: torch.Tensor) -> torch.Tensor:
        grid = _input_grid(values, "convolution or linear layer")
        # fbgemm's arithmetic, step by step: the integer accumulation sum((x - zx) * (w - zw))
        # (exact in float32 below 2**24), plus bias / (sx * sw), times (sx * sw) / s_out, rounded
        # half to even, plus the output zero point. Each float32 operation is the one fbgemm
        # does, so the output is eager's, bit for bit.
        scale = grid[0]
        accumulated = self.layer(centred(values, grid), self._integer_weight(), None)
        # per output channel: dim 1 of a convolution's output, the last of a linear layer's
        shape = [-1] if self.layer is F.linear else [-1] + [1] * (accumulated.dim() - 2)
        if self.axis is None:
            # float32 products and quotients of float32 numbers, made exactly in double and
            # rounded once, as fbgemm makes them in float32.
            input_and_weight_scale: Any = float32(float32(self.weight_scale) * float32(scale))
            multiplier: Any = float32(input_and_weight_scale / float32(self.scale))
        else:
            input_and_weight_scale = (self.weight_scale * float32(scale)).reshape(shape)
            multiplier = input_and_weight_scale / float32(self.scale)
        if self.bias is not None:
            bias = self.bias.reshape(shape)
            # fbgemm divides the bias by the scale per channel, multiplies by its reciprocal per tensor.
            if self.axis is None:
                accumulated = accumulated + bias * float32(1.0 / input_and_weight_scale)
            else:
                accumulated = accumulated + bias / input_and_weight_scale
        result = accumulated * multiplier
        if self.relu:
            result = F.relu(result)
        return from_unit(result, self.scale, self.zero_point, self.dtype)

    def _integer_weight(self) -> torch.Tensor:
        """The weights as exact floats ``w - zw``."""
        integer, low, high = INTEGER[self.weight_dtype]
        decomposed = torch.ops.quantized_decomposed
        if self.axis is None:
            return decomposed.dequantize_per_tensor(self.weight, 1.0, self.weight_zero_point, low, high, integer)
        ones = torch.ones_like(self.weight_scale)
        return decomposed.dequantize_per_channel(self.weight, ones, self.weight_zero_point, self.axis, low, high, integer)


class _Functional(nn.Module):
    """``FloatFunctional``/``QFunctional``: each operation's float result rounded onto the grid."""

    def __init__(self, original: nn.Module, dtype: torch.dtype):
        super().__init__()
        self.scale, self.zero_point, self.dtype = float(original.scale), int(original.zero_point), dtype

    def _rounded(self, values: torch.Tensor) -> torch.Tensor:
        return round_to(values, self.scale, self.zero_point, self.dtype)

    @internal
    def add(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return self._rounded(as_added(a) + as_added(b))

    @internal
    def add_relu(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return self._rounded(F.relu(as_added(a) + as_added(b)))

    @internal
    def mul(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return self._rounded(a * b)

    @internal
    def cat(self, tensors: list[torch.Tensor], dim: int = 0) -> torch.Tensor:
        return self._rounded(torch.cat(tensors, dim=dim))

    @internal
    def matmul(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return self._rounded(torch.matmul(a, b))


class _Dequantize(nn.Module):
    @internal
    def forward(self, values: torch.Tensor) -> torch.Tensor:
        return float_again(values)


def _replacement(module: nn.Module, activation: torch.dtype) -> nn.Module | None:
    """The float-with-rounding module for a quantized one; None for one not known here."""
    import torch.ao.nn.intrinsic.quantized as nniq
    import torch.ao.nn.quantized as nnq

    kind = type(module)
    if kind is nnq.Quantize:
        if module.dtype not in INTEGER:
            return None
        return _Requantized(lambda x: x, float(module.scale), int(module.zero_point), module.dtype)
    if kind is nnq.DeQuantize:
        return _Dequantize()
    if kind in (nnq.Dropout,):
        return nn.Identity()
    if kind is nnq.QFunctional:
        return _Functional(module, activation)
    convolutions = {nnq.Conv1d: F.conv1d, nnq.Conv2d: F.conv2d, nnq.Conv3d: F.conv3d}
    fused = {nniq.ConvReLU1d: F.conv1d, nniq.ConvReLU2d: F.conv2d, nniq.ConvReLU3d: F.conv3d}
    if kind in convolutions or kind in fused:
        if module.padding_mode != "zeros":
            return None
        convolution = convolutions.get(kind) or fused[kind]
        stride, padding, dilation, groups = module.stride, module.padding, module.dilation, module.groups

        def layer(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
            return convolution(x, weight, bias, stride, padding, dilation, groups)

        return _WeightedLayer(module, layer, relu=kind in fused, dtype=activation)
    if kind in (nnq.Linear, nniq.LinearReLU):
        return _WeightedLayer(module, F.linear, relu=kind is nniq.LinearReLU, dtype=activation)
    activations: dict[type, Callable[..., torch.Tensor]] = {
        nnq.Hardswish: F.hardswish,
        nnq.Sigmoid: torch.sigmoid,
    }
    if kind in activations:
        scale = getattr(module, "scale", getattr(module, "output_scale", None))
        zero_point = getattr(module, "zero_point", getattr(module, "output_zero_point", None))
        return _Requantized(activations[kind], scale, zero_point, activation)
    if kind is nnq.LeakyReLU:
        slope = module.negative_slope
        return _Requantized(lambda x: F.leaky_relu(x, slope), module.scale, module.zero_point, activation)
    if kind is nnq.ReLU6:
        return _OnInputGrid(F.relu6)
    return None


class _OnInputGrid(nn.Module):
    """A function whose quantized kernel keeps its input's scale and zero point: the float
    result rounded onto that grid (relu6's upper bound 6.0 becomes the grid point nearest it)."""

    def __init__(self, function: Callable[..., torch.Tensor]):
        super().__init__()
        self.function = function

    @internal
    def forward(self, values: torch.Tensor) -> torch.Tensor:
        return round_to(self.function(values), *_input_grid(values, type(self).__name__))


def _input_grid(values: torch.Tensor, what: str) -> tuple[float, int, torch.dtype]:
    """The grid of a quantized module's input; a refusal when the capture lost track of it."""
    grid = grid_of(values)
    if grid is None:
        raise CaptureError(
            f"A quantized module ({what}) received a tensor whose quantization parameters the capture did not "
            "follow (it went through a function not handled here): its result cannot be reproduced exactly.",
            [],
        )
    return grid


@contextlib.contextmanager
def as_qdq(module: nn.Module) -> Iterator[None]:
    """While active, ``module``'s eager-quantized submodules are float modules rounding as they
    do, and float functions given their results round as eager does on quantized tensors."""
    import torch.ao.quantization.fx._decomposed  # noqa: F401 - registers torch.ops.quantized_decomposed

    # The arithmetic replayed is fbgemm's (x86 and onednn run the same for these modules);
    # qnnpack's requantization rounds some values the other way.
    engine = torch.backends.quantized.engine
    if engine not in _REPLAYED_ENGINES:
        raise CaptureError(
            f"The model's quantized kernels run on the {engine!r} engine, whose integer arithmetic this export "
            f"does not reproduce (it replays fbgemm's). Set torch.backends.quantized.engine to one of "
            f"{sorted(_REPLAYED_ENGINES)} before quantizing and exporting.",
            [],
        )
    activation = _activation_dtype(module)
    swaps: list[tuple[nn.Module, str, nn.Module]] = []
    unknown: set[str] = set()
    for parent in module.modules():
        for name, child in parent.named_children():
            if not _is_quantized(child):
                continue
            replacement = _replacement(child, activation)
            if replacement is None:
                unknown.add(type(child).__qualname__)
            else:
                swaps.append((parent, name, replacement))
    if unknown:
        raise CaptureError(
            "The model holds eager-mode quantized modules that have no QDQ equivalent here: "
            f"{', '.join(sorted(unknown))}. Export the float model and quantize the ONNX model "
            "(onnxruntime.quantization), or quantize with PT2E (torch.ao.quantization.quantize_pt2e).",
            [],
        )
    originals = [(parent, name, getattr(parent, name)) for parent, name, _ in swaps]
    with _CAPTURE_LOCK:
        yield from _swapped(swaps, originals)


def _swapped(swaps: list[tuple[nn.Module, str, nn.Module]], originals: list[tuple[nn.Module, str, nn.Module]]) -> Iterator[None]:
    try:
        for parent, name, replacement in swaps:
            parent._modules[name] = replacement
        logger.debug("capturing %d eager-quantized module(s) as QDQ", len(swaps))
        with quantized_grids.tracking(), quantized_functions.patched():
            yield
    finally:
        for parent, name, original in originals:
            parent._modules[name] = original


def _activation_dtype(module: nn.Module) -> torch.dtype:
    """The quantized dtype of the model's activations (what its Quantize stubs make): one for the
    whole model, since the replacement modules round onto that dtype's range."""
    import torch.ao.nn.quantized as nnq

    dtypes = {child.dtype for child in module.modules() if isinstance(child, nnq.Quantize)}
    if len(dtypes) > 1:
        raise CaptureError(
            f"The model quantizes activations to several dtypes ({', '.join(sorted(map(str, dtypes)))}); this "
            "export handles one activation dtype per model.",
            [],
        )
    return dtypes.pop() if dtypes else torch.quint8
