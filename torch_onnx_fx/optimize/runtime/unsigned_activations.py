"""Signed 8-bit activations of a QDQ graph, shifted to unsigned ones for ONNX Runtime's kernels.

PT2E's XNNPACK quantizer (and any symmetric-activation config) quantizes activations to int8.
ONNX Runtime's CPU provider runs its integer kernels on unsigned activations with signed weights
(u8s8) and converts int8 activation pairs itself (its ``QDQS8ToU8`` transformer), but not all of
them: a convolution whose input pair it left signed and whose output pair it converted has mixed
types, fits no integer kernel, and runs in float between a dequantize and a quantize, behind a
``Transpose`` on each side. On the XNNPACK ResNet-50 that was 20 of 53 convolutions (0.70x of the
float32 export at one thread, 0.88x at two; with every pair unsigned 0.28x and 0.33x).

The shift is exact: ``QuantizeLinear`` to int8 with zero point ``z`` saturates to [-128, 127]
and to uint8 with ``z + 128`` to [0, 255], the same rounding plus 128 (a NaN gives -128 and 0,
also 128 apart); a ``DequantizeLinear`` reading the result with its own zero point ``z' + 128``
gives ``(q + 128 - z' - 128) * scale``, its value before. :class:`UnsignedActivationsPass` shifts
a ``QuantizeLinear`` of int8 with a constant per-tensor zero point when every reader of its result
is such a ``DequantizeLinear`` and the result is no graph output (whose type the caller sees).
Weights (integer initializers, dequantized without a quantize) keep their signed type. The
shifted value says so (``metadata.INTEGER_OFFSET_KEY``), so that verification compares it with
PyTorch's int8 tensor 128 lower.
"""

from __future__ import annotations

import logging

import numpy as np
import onnx_ir as ir

from torch_onnx_fx.optimize.runtime.rewriting import constant_array, initializer, is_standard
from torch_onnx_fx.translate.metadata import INTEGER_OFFSET_KEY

__all__ = ["UnsignedActivationsPass"]

logger = logging.getLogger(__name__)


def _signed_zero_point(node: ir.Node) -> np.ndarray | None:
    """The node's zero point (input 2) when it is a constant int8 scalar (one element)."""
    zero_point = node.inputs[2] if len(node.inputs) > 2 else None
    if zero_point is None or zero_point.dtype != ir.DataType.INT8:
        return None
    array = constant_array(zero_point)
    return array if array is not None and array.size == 1 else None


class UnsignedActivationsPass(ir.passes.InPlacePass):
    """See the module docstring."""

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        graph = model.graph
        shifted: dict[tuple[tuple[int, ...], int], ir.Value] = {}

        def unsigned(zero_point: np.ndarray) -> ir.Value:
            key = (zero_point.shape, int(zero_point.reshape(())))
            if key not in shifted:
                array = (zero_point.astype(np.int16) + 128).astype(np.uint8)
                shifted[key] = initializer(graph, "unsigned_zero_point", array)
            return shifted[key]

        count = 0
        for node in list(graph):
            if not is_standard(node, "QuantizeLinear") or "output_dtype" in node.attributes:
                continue
            result = node.outputs[0]
            zero_point = _signed_zero_point(node)
            if zero_point is None or result.is_graph_output():
                continue
            # In use order, once each: the shifted zero points are named in the order first made.
            readers = dict.fromkeys(reader for reader, _ in result.uses())
            reads = [
                (reader, _signed_zero_point(reader) if is_standard(reader, "DequantizeLinear") and reader.inputs[0] is result else None)
                for reader in readers
            ]
            if not reads or any(reader_zero_point is None for _, reader_zero_point in reads):
                continue
            for reader, reader_zero_point in reads:
                reader.replace_input_with(2, unsigned(reader_zero_point))
            node.replace_input_with(2, unsigned(zero_point))
            result.dtype = ir.DataType.UINT8
            result.metadata_props[INTEGER_OFFSET_KEY] = "128"
            count += 1
        if count:
            logger.debug("UnsignedActivationsPass: %d int8 activation(s) shifted to uint8", count)
        return ir.passes.PassResult(model, modified=bool(count))
