"""A float 1x1 convolution inside a quantized graph, laid out as a product over channels.

ONNX Runtime runs the integer convolutions of a QDQ graph (``QLinearConv``) channels-last, and
keeps that layout through the ``QuantizeLinear``/``DequantizeLinear`` around them. A convolution
PT2E leaves in float, because its output is not quantized (the last convolution of a ResNet or
MobileNetV2 block, summed with the residual before the quantize), runs channels-first: ONNX
Runtime puts a ``Transpose`` on each side of it, and dequantizes its integer weight at every run.
On an int8 ResNet-50 those are 2.3 and 1.1 of 41.7 ms at one thread.

A 1x1 convolution with unit strides and no padding is a product over the channel axis, so
:class:`PointwiseConvPass` writes it as one, in the layout its neighbours run in:
``Transpose(xq) → Reshape([-1, C]) → DequantizeLinear → Gemm(·, DequantizeLinear(W[O, C]),
transB=1) → Add(bias) → Reshape → Transpose``. ONNX Runtime cancels the transposes against its
own, and turns the ``Gemm`` between two dequantized integer operands into its ``QGemm`` with a
float output: the integer products summed exactly and scaled once, as the linear layers of the
same graphs already run (and as PyTorch's own int8 kernels compute the pattern). The bias is a
separate ``Add``, since ``QGemm`` takes only an integer one, which would round the float bias onto
the product's scale. ``Gemm`` with ``transB`` is also the form ONNX Runtime neither fuses into an
approximating ``MatMulNBits`` nor turns back (``dequantized_weights``). Measured on an int8
ResNet-50 (X86 quantizer), against the float32 export: 0.53x → 0.37x at one thread, 0.60x →
0.45x at two; the quantized tensors stay within the bench's steps of PyTorch's (``quant_bench``).

Where the product cannot run on integers (the input's dequantize not per tensor, a weight
quantized along its input channels, a signed input with an unsigned weight), the rows are the
dequantized input and the float ``Gemm`` takes the bias: the float32 products the convolution
itself sums.

Taken only where it pays: the input is dequantized, the weight is a per-tensor or per-channel
``DequantizeLinear`` of an integer tensor, and the output is only added to and each sum quantized
(directly or through ``Relu``/``Clip``): a residual block's end between integer convolutions. A
convolution whose own output is quantized becomes ONNX Runtime's ``QLinearConv`` instead, and one
elsewhere in a graph (an eager-quantized model's replayed arithmetic) has no channels-last
neighbours to gain from.
"""

from __future__ import annotations

import logging

import numpy as np
import onnx_ir as ir

from torch_onnx_fx.dtypes import SUB_BYTE
from torch_onnx_fx.optimize.runtime.rewriting import INTEGER_WEIGHTS, initializer, is_quantized, is_standard, leading_shape, replace

__all__ = ["PointwiseConvPass"]

logger = logging.getLogger(__name__)

# Byte-sized ones: PT2E makes no 4-bit convolution weights, and none was tried here.
_INTEGER_WEIGHTS = INTEGER_WEIGHTS - SUB_BYTE
_BYTES = frozenset({ir.DataType.UINT8, ir.DataType.INT8})


def _is_pointwise(conv: ir.Node) -> bool:
    """A 2-D convolution that is a product over channels: a 1x1 kernel, unit strides and
    dilations, no padding, one group."""
    x, weight = conv.inputs[0], conv.inputs[1]
    if x is None or weight is None or x.dtype != ir.DataType.FLOAT or x.shape is None or x.shape.rank() != 4:
        return False
    if weight.shape is None or list(weight.shape)[2:] != [1, 1] or not isinstance(weight.shape[1], int):
        return False
    if not isinstance(weight.shape[0], int):
        return False
    attributes = conv.attributes
    if attributes.get_string("auto_pad", "NOTSET") != "NOTSET" or attributes.get_int("group", 1) != 1:
        return False
    return (
        list(attributes.get_ints("strides", [1, 1])) == [1, 1]
        and list(attributes.get_ints("dilations", [1, 1])) == [1, 1]
        and not any(attributes.get_ints("pads", [0, 0, 0, 0]))
    )


def _summed_then_quantized(value: ir.Value) -> bool:
    """Whether ``value`` is only added to (a residual sum) and each sum is quantized: the block end
    PT2E leaves in float, between integer convolutions that run channels-last."""
    readers = [reader for reader, _ in value.uses()]
    return bool(readers) and not value.is_graph_output() and all(
        is_standard(reader, "Add") and is_quantized(reader.outputs[0]) for reader in readers
    )


def _dequantized_weight(conv: ir.Node) -> ir.Node | None:
    """The conv weight's ``DequantizeLinear`` when it can dequantize the ``[O, C]`` matrix as it
    stands: an integer tensor, per tensor or along the output or input channels, not blocked."""
    node = conv.inputs[1].producer()
    if not is_standard(node, "DequantizeLinear") or "block_size" in node.attributes:
        return None
    source = node.inputs[0]
    if source is None or source.dtype not in _INTEGER_WEIGHTS:
        return None
    scale = node.inputs[1]
    if scale is None or scale.shape is None or scale.shape.rank() > 1:
        return None
    per_axis = scale.shape.rank() == 1 and scale.shape[0] != 1
    if per_axis and node.attributes.get_int("axis", 1) % 4 not in (0, 1):
        return None
    return node


class PointwiseConvPass(ir.passes.InPlacePass):
    """See the module docstring."""

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        count = 0
        for node in list(model.graph):
            if not is_standard(node, "Conv") or not _is_pointwise(node):
                continue
            if not is_standard(node.inputs[0].producer(), "DequantizeLinear") or not _summed_then_quantized(node.outputs[0]):
                continue
            dequantize = _dequantized_weight(node)
            if dequantize is None:
                continue
            self._rewrite(model.graph, node, dequantize)
            count += 1
        if count:
            logger.debug("PointwiseConvPass: %d float 1x1 convolution(s) as a product over channels", count)
        return ir.passes.PassResult(model, modified=bool(count))

    @staticmethod
    def _rewrite(graph: ir.Graph, conv: ir.Node, dequantize: ir.Node) -> None:
        x, weight = conv.inputs[0], conv.inputs[1]
        outputs, channels = weight.shape[0], weight.shape[1]
        # The integer weight's reshape folds inside ONNX Runtime; its axes 0 and 1 keep their
        # meaning, so the scale's axis does too.
        matrix_shape = initializer(graph, "pointwise_conv_matrix_shape", np.array([outputs, channels], dtype=np.int64))
        matrix = ir.node("Reshape", [dequantize.inputs[0], matrix_shape])
        matrix.outputs[0].dtype = dequantize.inputs[0].dtype
        matrix.outputs[0].shape = ir.Shape([outputs, channels])
        # A negative axis counts from the 4-D weight's end: 0 or 1 of the matrix (the only ones
        # _dequantized_weight takes).
        attributes = {"axis": dequantize.attributes.get_int("axis", 1) % 4} if "axis" in dequantize.attributes else {}
        weights = ir.node("DequantizeLinear", [matrix.outputs[0], *dequantize.inputs[1:]], attributes=attributes)
        n, _, h, w = x.shape
        integers = _integer_rows_source(x.producer(), weights)
        # Rows of integers when ONNX Runtime can multiply them as such: moved and reshaped before
        # their (per-tensor) dequantize, which then feeds the Gemm directly.
        last = ir.node("Transpose", [integers.inputs[0] if integers is not None else x], attributes={"perm": [0, 2, 3, 1]})
        last.outputs[0].dtype, last.outputs[0].shape = last.inputs[0].dtype, ir.Shape([n, h, w, channels])
        rows_shape = initializer(graph, "pointwise_conv_rows", np.array([-1, channels], dtype=np.int64))
        rows = ir.node("Reshape", [last.outputs[0], rows_shape])
        steps = [last, rows]
        if integers is not None:
            rows = ir.node("DequantizeLinear", [rows.outputs[0], *integers.inputs[1:]])
            rows.outputs[0].dtype = x.dtype
            steps.append(rows)
        bias = conv.inputs[2] if len(conv.inputs) > 2 else None
        # ONNX Runtime's QGemm takes only an integer bias (a float one would be rounded onto the
        # product's scale): the float bias is added after it, as the convolution adds it.
        with_bias = bias is not None and integers is None
        gemm = ir.node("Gemm", [rows.outputs[0], weights.outputs[0], *([bias] if with_bias else [])], attributes={"transB": 1})
        product = [gemm]
        if bias is not None and not with_bias:
            product.append(ir.node("Add", [gemm.outputs[0], bias]))
        shape_nodes, shape = leading_shape(graph, last.outputs[0], outputs, "pointwise_conv")
        back = ir.node("Reshape", [product[-1].outputs[0], shape])
        first = ir.node("Transpose", [back.outputs[0]], attributes={"perm": [0, 3, 1, 2]})
        new_nodes = [matrix, weights, *steps, *product, *shape_nodes, back, first]
        replace(conv, new_nodes, [first.outputs[0]], "pointwise_conv")
        # The 4-D weight's dequantize nothing else reads, and the input's, when the rows read
        # its integers instead.
        for old in (dequantize, integers):
            if old is not None and not old.outputs[0].uses() and not old.outputs[0].is_graph_output():
                graph.remove(old, safe=True)


def _integer_rows_source(node: ir.Node | None, weights: ir.Node) -> ir.Node | None:
    """The input's ``DequantizeLinear`` when ONNX Runtime can run the product on its integers
    (``QGemm``, integer sums exact, scaled once to float): a per-tensor dequantize of 8-bit
    integers, a signed input only with a signed weight (the kernels ONNX Runtime has), and the
    weight per tensor or per output channel, the one per-channel layout ``QGemm`` reads its
    scales in. Otherwise None, and the product runs in float over the dequantized input."""
    if not is_standard(node, "DequantizeLinear") or "block_size" in node.attributes:
        return None
    source, scale = node.inputs[0], node.inputs[1]
    if source is None or source.dtype not in _BYTES or scale is None or scale.shape is None:
        return None
    if scale.shape.rank() > 1 or (scale.shape.rank() == 1 and scale.shape[0] != 1):
        return None
    weight, weight_scale = weights.inputs[0], weights.inputs[1]
    if weight.dtype not in _BYTES or (source.dtype == ir.DataType.INT8 and weight.dtype != ir.DataType.INT8):
        return None
    per_channel = weight_scale.shape.rank() == 1 and weight_scale.shape[0] != 1
    if per_channel and weights.attributes.get_int("axis", 1) != 0:
        return None
    return node
