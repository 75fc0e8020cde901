"""An integer convolution over a few input channels, widened to the count ONNX Runtime's fast
kernel takes.

ONNX Runtime runs a ``DequantizeLinear → Conv → QuantizeLinear`` unit as ``QLinearConv``. With a
symmetric int8 weight (zero points 0) and a constant activation zero point, ``QLinearConv`` runs
MLAS's indirect "symmetric" kernels, which sum whole groups of input channels at once; a layer
whose input channel count is not a multiple of 4 does not fit them and falls back to im2col
plus a general integer GEMM. That layer is the stem of nearly every image network: 3 input
channels (RGB), at the largest resolution. On an int8 MobileNetV2 (X86 quantizer, 224x224, one
thread) its 3x3 stem took 470 us in ``QLinearConv`` against 339 us as a float ``Conv``: the one
layer the integer model ran slower than the float one.

:class:`ConvInputChannelsPass` pads the channel axis to the next multiple of 4, on the
integers: the activation with its zero point (``Pad`` of the uint8 tensor before its dequantize,
which dequantizes to exact zeros) and the weight with zeros (``Pad`` of the int8 initializer,
folded by ONNX Runtime when it loads the model, so ``apply_weights`` still replaces the weight
as the model stores it). The added products are 0 x 0: the integer sums are the same numbers,
and the output is the same bit for bit under every ONNX Runtime optimization level (a float
``Conv`` adds exact zeros). Measured on that MobileNetV2: the stem 470 -> 195 us, the whole int8
model 0.54x -> 0.50x of the float32 export's latency at one thread (both graphs interleaved with
the float one, ``docs/quantization.md``).

Taken only where the symmetric kernel can then run: one group, a 4-D weight, the activation an
8-bit per-tensor dequantize with a constant zero point, the weight an int8 dequantize with zero
points 0, at least 16 output channels in multiples of 8 (what MLAS's AVX2 kernels take), and the
output quantized (otherwise ONNX Runtime keeps the float ``Conv`` and there is nothing to gain).
Those conditions are about speed only: the padded activation dequantizes to exact zeros, so the
added products are 0 whatever the weight's zero points become after ``apply_weights``.
"""

from __future__ import annotations

import logging

import numpy as np
import onnx_ir as ir

from torch_onnx_fx.optimize.runtime.rewriting import constant_array, initializer, is_quantized, is_standard

__all__ = ["ConvInputChannelsPass"]

logger = logging.getLogger(__name__)

_ALIGNMENT = 4
_BYTES = frozenset({ir.DataType.UINT8, ir.DataType.INT8})


def _scalar_scale(dequantize: ir.Node) -> bool:
    scale = dequantize.inputs[1]
    return scale is not None and scale.shape is not None and (scale.shape.rank() == 0 or list(scale.shape) == [1])


def _activation(conv: ir.Node) -> ir.Node | None:
    """The input's per-tensor dequantize of 8-bit integers with a constant zero point, or None."""
    node = conv.inputs[0].producer() if conv.inputs[0] is not None else None
    if not is_standard(node, "DequantizeLinear") or "block_size" in node.attributes or not _scalar_scale(node):
        return None
    source = node.inputs[0]
    zero_point = node.inputs[2] if len(node.inputs) > 2 else None
    if source is None or source.dtype not in _BYTES or source.shape is None or source.shape.rank() != 4:
        return None
    if zero_point is not None and constant_array(zero_point) is None:
        return None
    return node


def _symmetric_weight(conv: ir.Node) -> ir.Node | None:
    """The weight's dequantize of an int8 tensor whose zero points are all 0, per tensor or per
    output channel, or None."""
    node = conv.inputs[1].producer() if conv.inputs[1] is not None else None
    if not is_standard(node, "DequantizeLinear") or "block_size" in node.attributes:
        return None
    source = node.inputs[0]
    if source is None or source.dtype != ir.DataType.INT8:
        return None
    if not _scalar_scale(node) and node.attributes.get_int("axis", 1) % 4 != 0:
        return None
    zero_point = node.inputs[2] if len(node.inputs) > 2 else None
    if zero_point is not None:
        zeros = _folded(zero_point)
        if zeros is None or zeros.any():
            return None
    return node


def _folded(value: ir.Value) -> np.ndarray | None:
    """A constant's data, also through the ``Cast`` that keeps a PT2E weight's int64 zero points
    replaceable (ONNX Runtime folds it at load); None otherwise. Only whether it is zero is read,
    which the cast does not change."""
    cast = value.producer()
    if is_standard(cast, "Cast") and cast.inputs[0] is not None:
        return constant_array(cast.inputs[0])
    return constant_array(value)


def _narrow_channels(conv: ir.Node) -> int | None:
    """How many zero channels bring ``conv``'s input to the aligned count, when it is a one-group
    2-D convolution the symmetric kernel takes once widened; None otherwise."""
    weight = conv.inputs[1]
    if weight is None or weight.shape is None or weight.shape.rank() != 4:
        return None
    outputs, channels = weight.shape[0], weight.shape[1]
    if not isinstance(outputs, int) or not isinstance(channels, int):
        return None
    if conv.attributes.get_int("group", 1) != 1 or channels % _ALIGNMENT == 0:
        return None
    if outputs < 16 or outputs % 8:
        return None
    return -channels % _ALIGNMENT


class ConvInputChannelsPass(ir.passes.InPlacePass):
    """See the module docstring."""

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        count = 0
        for conv in list(model.graph):
            if not is_standard(conv, "Conv"):
                continue
            extra = _narrow_channels(conv)
            if extra is None or not is_quantized(conv.outputs[0]):
                continue
            activation, weight = _activation(conv), _symmetric_weight(conv)
            if activation is None or weight is None:
                continue
            self._widen(model.graph, conv, activation, weight, extra)
            count += 1
        if count:
            logger.debug("ConvInputChannelsPass: %d integer convolution(s) widened to aligned input channels", count)
        return ir.passes.PassResult(model, modified=bool(count))

    @staticmethod
    def _widen(graph: ir.Graph, conv: ir.Node, activation: ir.Node, weight: ir.Node, extra: int) -> None:
        # Zeros after the last channel of axis 1, nothing elsewhere.
        pads = initializer(graph, "conv_channel_pads", np.array([0, 0, 0, 0, 0, extra, 0, 0], dtype=np.int64))
        for index, (dequantize, fill) in enumerate(((activation, activation.inputs[2:3]), (weight, []))):
            source = dequantize.inputs[0]
            padded = ir.node("Pad", [source, pads, *fill])
            widened = list(source.shape)
            widened[1] += extra
            padded.outputs[0].dtype, padded.outputs[0].shape = source.dtype, ir.Shape(widened)
            # A dequantize of its own: another reader of the narrow one keeps it.
            attributes = {name: attr.value for name, attr in dequantize.attributes.items()}
            copy = ir.node("DequantizeLinear", [padded.outputs[0], *dequantize.inputs[1:]], attributes=attributes)
            copy.outputs[0].dtype, copy.outputs[0].shape = dequantize.outputs[0].dtype, ir.Shape(widened)
            stem = conv.outputs[0].name or "conv"
            padded.outputs[0].name = f"{stem}__wide_source{index}"
            copy.outputs[0].name = f"{stem}__wide{index}"
            graph.insert_before(conv, [padded, copy])
            conv.replace_input_with(index, copy.outputs[0])
            if not dequantize.outputs[0].uses() and not dequantize.outputs[0].is_graph_output():
                graph.remove(dequantize, safe=True)
