"""Nodes no translation computes exactly, refused at export with the reason.

A translation that would ship approximate numbers for some inputs is worse than none: the model
exports, runs, and is wrong. These entries are registered ahead of every other translation for
the inputs they cover, so such nodes are neither translated nor decomposed (torch's
decompositions are no more exact for them) but raise a ``TranslationError`` naming the operator,
its input types and the model's source line. A ``custom_translation_table`` entry for the
operator still takes precedence, which is how a user who accepts the difference opts in.
"""

from __future__ import annotations

from typing import Any

import torch

from torch_onnx_fx.errors import TranslationError
from torch_onnx_fx.registry import arg_example, arg_value, float64_input, integral_input, register

__all__: list[str] = []


# ATen interpolates integer (uint8) images with fixed-point weights and rounds each separable
# pass; the ONNX Resize operator, and every composition of float operators measured against it
# (truncating, rounding, rounding half up), differ from it by one in 10-40 % of the pixels.
_WEIGHTED_INTERPOLATION = (
    "aten::upsample_linear1d", "aten::upsample_linear1d.vec",
    "aten::upsample_bilinear2d", "aten::upsample_bilinear2d.vec",
    "aten::upsample_trilinear3d", "aten::upsample_trilinear3d.vec",
    "aten::upsample_bicubic2d", "aten::upsample_bicubic2d.vec",
    "aten::_upsample_bilinear2d_aa", "aten::_upsample_bilinear2d_aa.vec",
    "aten::_upsample_bicubic2d_aa", "aten::_upsample_bicubic2d_aa.vec",
)


def _refusal(name: str, reason: str) -> Any:
    """A translation that raises ``reason``: registered for the nodes it covers, it keeps them from
    being translated or decomposed."""

    def refuse(input: Any, *args: Any, **kwargs: Any) -> Any:
        raise TranslationError(reason)

    refuse.__name__ = refuse.__qualname__ = name
    refuse.__doc__ = reason
    return refuse


register(*_WEIGHTED_INTERPOLATION, supports=integral_input)(_refusal(
    "refuse_integer_interpolation",
    "linear and cubic interpolation of an integer image is computed by ATen in fixed point "
    "with a rounding per pass, which ONNX's Resize does not reproduce (results would differ by "
    "one in many pixels). Interpolate a float copy in the model (x.float(), then round and "
    "convert back as your application needs), or use mode='nearest', which is exact.",
))


# torchlib collects the bags in a float32 sequence (after an ONNX Runtime bug with other element
# types), and torch has no decomposition of embedding_bag to fall back to. float64 sums and means
# are computed in float64 (ops/embedding_bag.py); max bags are refused.
def _float64_max_bags(node: Any) -> bool:
    return float64_input(node) and arg_value(node, 4, "mode", 0) == 2


register(
    "aten::embedding_bag", "aten::embedding_bag.padding_idx", "aten::_embedding_bag", "aten::_embedding_bag_forward_only",
    supports=_float64_max_bags,
)(_refusal(
    "refuse_float64_embedding_bag",
    "embedding_bag(mode='max') of float64 weights would be computed in float32 (its translation collects the bags "
    "in a float32 sequence): half the digits lost, values beyond 3.4e38 infinite. Use float32 weights, or "
    "nn.Embedding followed by a max over each bag, which stays in float64.",
))


def _ceil_mode_spatial_dynamic(node: Any) -> bool:
    """With ``ceil_mode`` the end padding is computed from the spatial sizes, so they must be static."""
    args = list(node.args) + [None] * 7
    if node.kwargs.get("divisor_override", args[6]) is None or not node.kwargs.get("ceil_mode", args[4]):
        return False
    example = arg_example(node)
    dims = len(args[1]) if isinstance(args[1], (list, tuple)) else 1
    return isinstance(example, torch.Tensor) and not all(isinstance(s, int) for s in example.shape[example.dim() - dims:])


# torchlib's avg_pool ignores divisor_override; ops/pooling translates every other case with one.
register("aten::avg_pool1d", "aten::avg_pool2d", "aten::avg_pool3d", supports=_ceil_mode_spatial_dynamic)(_refusal(
    "refuse_dynamic_ceil_mode_divisor",
    "avg_pool with divisor_override and ceil_mode=True needs static spatial sizes here (the extra "
    "end padding of the last window is computed from them); export with static spatial dims, or "
    "ceil_mode=False.",
))


def _float64_recurrence_over_dynamic_time(node: Any) -> bool:
    """A float64 LSTM/GRU whose sequence length is dynamic: ONNX Runtime has no float64 kernel
    for them, and torch's decomposition (ops/nn.py takes it for float64) unrolls the example's
    length only."""
    example = arg_example(node)
    batch_first = arg_value(node, 8, "batch_first", False)
    if not float64_input(node) or not isinstance(example, torch.Tensor) or example.dim() < 2:
        return False
    time = 1 if batch_first and example.dim() == 3 else 0
    return not isinstance(example.shape[time], int)


register("aten::lstm.input", "aten::gru.input", supports=_float64_recurrence_over_dynamic_time)(_refusal(
    "refuse_float64_recurrence_over_dynamic_time",
    "a float64 LSTM/GRU over a sequence of dynamic length: ONNX Runtime has no float64 LSTM or GRU "
    "kernel, and the float64 form written out step by step needs a static sequence length. Export "
    "with a static sequence length (the model then takes that length only), or run the recurrence "
    "in float32.",
))


def _float8_target(node: Any) -> bool:
    dtype = arg_value(node, 5, "dtype")
    return isinstance(dtype, torch.dtype) and dtype.is_floating_point


# PT2E "quantizes" to float8 by rounding to an integer and then casting; ONNX's float8
# QuantizeLinear rounds to the nearest float8 value instead (torchlib emitted it anyway).
register(
    "quantized_decomposed::quantize_per_tensor",
    "quantized_decomposed::quantize_per_tensor.tensor",
    "quantized_decomposed::quantize_per_tensor.tensor2",
    supports=_float8_target,
)(_refusal(
    "refuse_float8_quantize_per_tensor",
    "quantize_per_tensor to a float8 type rounds to an integer before the float8 cast in PyTorch, "
    "which ONNX's QuantizeLinear does not (it rounds to the nearest float8 value). Quantize to an "
    "integer type, or give the operator a custom_translation_table entry if the difference is accepted.",
))


def _choose_qparams_not_float32(node: Any) -> bool:
    example = arg_example(node)
    return isinstance(example, torch.Tensor) and example.dtype != torch.float32


# Half-precision ranges and scales are computed in the input's own dtype and then promoted with
# a float32 eps, an order the float32 translation does not follow.
register(
    "quantized_decomposed::choose_qparams.tensor",
    "quantized_decomposed::choose_qparams_symmetric.tensor",
    supports=_choose_qparams_not_float32,
)(_refusal(
    "refuse_half_choose_qparams",
    "choose_qparams of a float16/bfloat16 input computes its range and scale in that dtype before "
    "promoting to float32, which this translation does not reproduce. Quantize dynamically from a "
    "float32 input (x.float()), or give the operator a custom_translation_table entry.",
))
