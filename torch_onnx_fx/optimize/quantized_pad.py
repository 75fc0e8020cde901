"""Zero padding in front of a quantized convolution, moved into the convolution's ``pads``.

A PT2E model quantizes a padded tensor: ``Pad(y, 0) → QuantizeLinear → DequantizeLinear →
Conv`` (MobileNetV2's explicit "same" padding under the XNNPACK quantizer: 52 ``Pad`` nodes,
0.9 of 5.9 ms at one thread). onnxscript's rule folds a ``Pad`` into the ``Conv`` right behind
it, not across the quantize pair, and ONNX Runtime's integer convolution cannot take it either.

Moving it is exact: a padded zero quantizes to the zero point (``round(0 / scale) + zero point``)
and dequantizes back to exactly 0 when the dequantize has the same zero point, which is what the
convolution's own zero padding adds. :class:`QuantizedPadPass` does so when the ``Pad`` is
constant with value 0 on spatial axes only, its only reader is the ``QuantizeLinear`` (per
tensor, or per channel on the batch or channel axis), every reader of that is a
``DequantizeLinear`` with the same zero point, and every reader of those is a ``Conv`` without
``auto_pad``.
"""

from __future__ import annotations

import logging

import numpy as np
import onnx_ir as ir

from torch_onnx_fx.optimize.runtime.rewriting import constant_array, is_standard

__all__ = ["QuantizedPadPass"]

logger = logging.getLogger(__name__)


def _spatial_pads(pad: ir.Node) -> list[int] | None:
    """The Pad's amounts for the spatial axes, ``[begins..., ends...]``; None unless it is a
    constant zero padding of those axes only."""
    if pad.attributes.get_string("mode", "constant") != "constant":
        return None
    data = pad.inputs[0]
    amounts = constant_array(pad.inputs[1] if len(pad.inputs) > 1 else None)
    if data is None or data.shape is None or amounts is None:
        return None
    if len(pad.inputs) > 2 and pad.inputs[2] is not None:
        fill = constant_array(pad.inputs[2])
        if fill is None or fill.size != 1 or float(fill.reshape(())) != 0.0:
            return None
    if len(pad.inputs) > 3 and pad.inputs[3] is not None:
        return None  # an axes input: rare, left alone
    rank = data.shape.rank()
    amounts = [int(a) for a in amounts.reshape(-1)]
    if rank < 3 or len(amounts) != 2 * rank or any(a < 0 for a in amounts):
        return None
    begins, ends = amounts[:rank], amounts[rank:]
    if begins[:2] != [0, 0] or ends[:2] != [0, 0]:
        return None
    return begins[2:] + ends[2:]


def _same(a: ir.Value | None, b: ir.Value | None) -> bool:
    if a is b:
        return True
    left, right = constant_array(a), constant_array(b)
    return left is not None and right is not None and left.dtype == right.dtype and np.array_equal(left, right)


def _quantize_keeps_zero(quantize: ir.Node, rank: int) -> bool:
    """A zero quantizes to the zero point: a nonzero constant scale, per tensor or along an axis
    the padding leaves alone."""
    scale = constant_array(quantize.inputs[1])
    if scale is None or not np.all(scale != 0):
        return False
    if scale.size == 1:
        return True
    return quantize.attributes.get_int("axis", 1) % rank in (0, 1)


def _readers(value: ir.Value) -> list[ir.Node]:
    return [user for user, _ in value.uses()]


def _zero_point(node: ir.Node) -> ir.Value | None:
    return node.inputs[2] if len(node.inputs) > 2 else None


def _dequantizes_to_zero(quantize: ir.Node) -> list[ir.Node] | None:
    """Every reader of ``quantize``: each a ``DequantizeLinear`` with its zero point, so that the
    zero point dequantizes to exactly 0; None otherwise."""
    quantized = quantize.outputs[0]
    dequantizes = _readers(quantized)
    if quantized.is_graph_output() or not dequantizes:
        return None
    for dequantize in dequantizes:
        if not (is_standard(dequantize, "DequantizeLinear") and dequantize.inputs[0] is quantized):
            return None
        if not _same(_zero_point(dequantize), _zero_point(quantize)) or dequantize.outputs[0].is_graph_output():
            return None
    return dequantizes


def _padding_convs(dequantizes: list[ir.Node]) -> list[ir.Node] | None:
    """Every reader of the dequantized values: each a ``Conv`` reading one as its input (not its
    weight) and padding explicitly; None otherwise."""
    dequantized = [d.outputs[0] for d in dequantizes]
    convs = [conv for value in dequantized for conv in _readers(value)]
    for conv in convs:
        if not (is_standard(conv, "Conv") and conv.inputs[0] in dequantized and conv.inputs[0] not in conv.inputs[1:]):
            return None
        if conv.attributes.get_string("auto_pad", "NOTSET") != "NOTSET":
            return None
    return convs or None


class QuantizedPadPass(ir.passes.InPlacePass):
    """See the module docstring."""

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        count = 0
        for pad in list(ir.traversal.RecursiveGraphIterator(model.graph)):
            if not is_standard(pad, "Pad"):
                continue
            spatial = _spatial_pads(pad)
            output = pad.outputs[0]
            readers = _readers(output)
            if spatial is None or output.is_graph_output() or len(readers) != 1:
                continue
            quantize = readers[0]
            rank = pad.inputs[0].shape.rank()
            if not is_standard(quantize, "QuantizeLinear") or quantize.inputs[0] is not output or not _quantize_keeps_zero(quantize, rank):
                continue
            dequantizes = _dequantizes_to_zero(quantize)
            convs = _padding_convs(dequantizes) if dequantizes is not None else None
            if convs is None:
                continue
            for conv in convs:
                own = list(conv.attributes.get_ints("pads", [0] * len(spatial)))
                conv.attributes["pads"] = ir.AttrInt64s("pads", [a + b for a, b in zip(own, spatial)])
            quantize.replace_input_with(0, pad.inputs[0])
            # The quantized tensors are the unpadded size now.
            for value in [quantize.outputs[0], *(d.outputs[0] for d in dequantizes)]:
                value.shape = ir.Shape(pad.inputs[0].shape.dims)
            pad.graph.remove(pad, safe=True)
            count += 1
        if count:
            logger.debug("QuantizedPadPass: %d Pad(s) moved into quantized Conv pads", count)
        return ir.passes.PassResult(model, modified=bool(count))
