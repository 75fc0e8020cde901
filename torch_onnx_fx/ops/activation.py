"""Activations that newer opsets express as a single operator, float64 GELU and scaled ELU.

Registered with ``min_opset``: below it, dispatch falls through to torchlib's translation, which
spells the same function out of elementary ops. float64 GELU is spelled out at every opset, with
the float64 ``erf`` of ``special/error.py``.
"""

from __future__ import annotations

import math
from typing import Any

import onnx_ir as ir
from onnxscript import opset18 as op
from onnxscript import opset20

from torch_onnx_fx.ops.special._series import elementwise
from torch_onnx_fx.ops.special.error import erf
from torch_onnx_fx.registry import arg_value, float64_input, floating_input, register

__all__ = ["aten_gelu_float64", "aten_gelu_tanh_float64", "aten_gelu_opset20", "aten_elu_scaled", "aten_rrelu_inference"]


def _exact_float64(node: Any) -> bool:
    return float64_input(node) and arg_value(node, 1, "approximate", "none") == "none"


# First, so that float64 never reaches ONNX's Gelu, which is Erf inside: ONNX Runtime has no
# float64 Erf, and a float64 model's session could not be created.
@register("aten::gelu", supports=_exact_float64)
def aten_gelu_float64(self: ir.Value, approximate: str = "none") -> ir.Value:
    """gelu(Tensor self, *, str approximate="none") -> Tensor

    ATen's float64 arithmetic: x * 0.5 * (1 + erf(x * sqrt(1/2)))."""
    return elementwise(lambda x: op.Mul(op.Mul(x, 0.5), op.Add(1.0, erf(op.Mul(x, math.sqrt(0.5))))), self)


# <math.h>'s M_SQRT2 and M_2_SQRTPI, multiplied in ATen's order, in double.
_TANH_GELU_BETA = 1.41421356237309504880 * 1.12837916709551257390 * 0.5
_TANH_GELU_KAPPA = 0.044715


def _tanh_float64(node: Any) -> bool:
    return float64_input(node) and arg_value(node, 1, "approximate", "none") == "tanh"


# ONNX Runtime's float64 Gelu(approximate="tanh") computes in float precision: 6e-9 off.
@register("aten::gelu", supports=_tanh_float64)
def aten_gelu_tanh_float64(self: ir.Value, approximate: str = "none") -> ir.Value:
    """gelu(Tensor self, *, str approximate="tanh") -> Tensor

    ATen's float64 arithmetic: 0.5 * x * (1 + tanh(beta * (x + kappa * x * x * x)))."""
    inner = op.Mul(op.Add(self, op.Mul(op.Mul(op.Mul(self, self), self), _TANH_GELU_KAPPA)), _TANH_GELU_BETA)
    return op.Mul(op.Mul(self, 0.5), op.Add(op.Tanh(inner), 1.0))


@register("aten::gelu", min_opset=20)
def aten_gelu_opset20(self: ir.Value, approximate: str = "none") -> ir.Value:
    """gelu(Tensor self, *, str approximate="none") -> Tensor"""
    return opset20.Gelu(self, approximate=approximate)


def _scaled_elu(node: Any) -> bool:
    numbers = [arg_value(node, index, name, 1) for index, name in ((1, "alpha"), (2, "scale"), (3, "input_scale"))]
    return (
        floating_input(node) and all(isinstance(n, (int, float)) and not isinstance(n, bool) for n in numbers)
        and (numbers[1] != 1 or numbers[2] != 1)
    )


# torchlib scales the input on both sides (Elu(x * input_scale) * scale): where x > 0 that is
# x * input_scale * scale, not ATen's x * scale. elu(x, input_scale=0.7) was 0.26 off, silently,
# as with torch.onnx. (F.celu and F.selu are their own operators; this is aten::elu called directly.)
@register("aten::elu", supports=_scaled_elu)
def aten_elu_scaled(self: ir.Value, alpha: float = 1.0, scale: float = 1.0, input_scale: float = 1.0) -> ir.Value:
    """elu(Tensor self, Scalar alpha=1, Scalar scale=1, Scalar input_scale=1) -> Tensor

    ATen's x * scale where x > 0, expm1(x * input_scale) * alpha * scale elsewhere (NaN too)."""
    alpha, scale, input_scale = float(alpha), float(scale), float(input_scale)
    if input_scale == 1:
        # Elu's positive side is x itself.
        return op.Mul(op.Elu(self, alpha=alpha), scale)
    inner = op.Mul(self, input_scale)
    if input_scale > 0:
        # inner <= 0 wherever x <= 0, the side Elu computes alpha * (exp(inner) - 1) on.
        negative = op.Elu(inner, alpha=alpha)
    else:
        # expm1(inner) for inner >= 0 as -Elu(-inner) * exp(inner): exp(inner) - 1 cancelled near
        # 0 (float64 268 ulps off at x = -1e-8), and float64 Elu is an exact expm1 here.
        negative = op.Mul(op.Mul(op.Neg(op.Elu(op.Neg(inner), alpha=1.0)), op.Exp(inner)), alpha)
    positive, negative = (self, negative) if scale == 1 else (op.Mul(self, scale), op.Mul(negative, scale))
    return op.Where(op.Greater(self, 0.0), positive, negative)


def _rrelu_inference(node: Any) -> bool:
    bounds = [arg_value(node, 1, "lower", 0.125), arg_value(node, 2, "upper", 1 / 3)]
    return (
        floating_input(node) and not arg_value(node, 3, "training", False)
        and all(isinstance(n, (int, float)) and not isinstance(n, bool) for n in bounds)
    )


# Without a translation torch decomposed it to rrelu_with_noise_functional, which nothing
# translates: F.rrelu and nn.RReLU in eval mode failed to export (torch.onnx too).
@register("aten::rrelu", supports=_rrelu_inference)
def aten_rrelu_inference(self: ir.Value, lower: float = 0.125, upper: float = 1 / 3, training: bool = False, generator: Any = None) -> ir.Value:
    """rrelu(Tensor self, Scalar lower=0.125, Scalar upper=0.3333333333333333, bool training=False, Generator? generator=None) -> Tensor

    Outside training ATen's leaky_relu with the mean slope, (lower + upper) / 2 in double."""
    return op.LeakyRelu(self, alpha=(float(lower) + float(upper)) / 2)
