"""A float 1x1 convolution of a quantized graph becomes a product over channels (``Gemm``)."""

from __future__ import annotations

from pathlib import Path

import onnx_ir
import torch
import torch.ao.quantization.fx._decomposed  # noqa: F401 - defines torch.ops.quantized_decomposed

from helpers import assert_matches_eager, runtime_op_types

qd = torch.ops.quantized_decomposed


class _ResidualBlockEnd(torch.nn.Module):
    """The end of a PT2E-quantized ResNet block: a convolution of dequantized integers left in
    float, summed with the dequantized residual, then quantized (the quantizer's conv + add + relu
    pattern)."""

    def __init__(
        self, kernel: int = 1, stride: int = 1, bias: bool = True, per_channel: bool = True, quantize_conv: bool = False,
        residual: bool = True, channel_axis: int = 0, dequantize_axis: int | None = None,
    ):
        super().__init__()
        torch.manual_seed(0)
        weight = torch.randn(8, 4, kernel, kernel)
        self.per_channel, self.stride, self.quantize_conv, self.residual = per_channel, stride, quantize_conv, residual
        # The axis the dequantize names: the same one counted from the end is valid for PyTorch.
        self.axis = channel_axis if dequantize_axis is None else dequantize_axis
        if per_channel:
            other = tuple(d for d in range(4) if d != channel_axis)
            self.register_buffer("scales", weight.abs().amax(dim=other) / 127)
            self.register_buffer("zero_points", torch.zeros(weight.shape[channel_axis], dtype=torch.int64))
            self.register_buffer("weight", qd.quantize_per_channel(weight, self.scales, self.zero_points, channel_axis, -128, 127, torch.int8))
        else:
            self.register_buffer("weight", qd.quantize_per_tensor(weight, 0.02, 0, -128, 127, torch.int8))
        self.register_buffer("bias", torch.randn(8) if bias else None)

    def forward(self, x: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
        if self.per_channel:
            weight = qd.dequantize_per_channel(self.weight, self.scales, self.zero_points, self.axis, -128, 127, torch.int8)
        else:
            weight = qd.dequantize_per_tensor(self.weight, 0.02, 0, -128, 127, torch.int8)
        x = qd.dequantize_per_tensor(qd.quantize_per_tensor(x, 0.05, 3, 0, 255, torch.uint8), 0.05, 3, 0, 255, torch.uint8)
        y = torch.nn.functional.conv2d(x, weight, self.bias, stride=self.stride)
        if self.quantize_conv:
            y = qd.dequantize_per_tensor(qd.quantize_per_tensor(torch.relu(y), 0.1, 0, 0, 255, torch.uint8), 0.1, 0, 0, 255, torch.uint8)
        if not self.residual:
            return torch.tanh(y)
        r = qd.dequantize_per_tensor(qd.quantize_per_tensor(residual, 0.05, 128, 0, 255, torch.uint8), 0.05, 128, 0, 255, torch.uint8)
        out = torch.relu(y + r)
        return qd.dequantize_per_tensor(qd.quantize_per_tensor(out, 0.1, 0, 0, 255, torch.uint8), 0.1, 0, 0, 255, torch.uint8)


def _op_types(program) -> list[str]:
    return [node.op_type for node in program.model.graph]


def _inputs(batch: int = 2, height: int = 5, width: int = 7) -> tuple[torch.Tensor, torch.Tensor]:
    return torch.randn(batch, 4, height, width), torch.randn(batch, 8, height, width)


def _gemm(program) -> onnx_ir.Node:
    (gemm,) = [node for node in program.model.graph if node.op_type == "Gemm"]
    return gemm


def test_float_pointwise_conv_becomes_an_integer_product(tmp_path: Path) -> None:
    for model in (_ResidualBlockEnd(), _ResidualBlockEnd(bias=False), _ResidualBlockEnd(per_channel=False)):
        # One quantization step of the output is 0.1: a product summed in another order may move
        # an element across a rounding boundary, by one step at most.
        program = assert_matches_eager(model.eval(), _inputs(), rtol=0, atol=0.1 + 1e-6)
        ops = _op_types(program)
        assert "Conv" not in ops, ops
        gemm = _gemm(program)
        # Both operands dequantized integers, the weight still stored as its integers: the form
        # ONNX Runtime runs as an integer QGemm. The float bias comes after it.
        assert [value.producer().op_type for value in gemm.inputs] == ["DequantizeLinear", "DequantizeLinear"]
        assert gemm.inputs[0].producer().inputs[0].dtype == onnx_ir.DataType.UINT8
        readers = [reader.op_type for reader, _ in gemm.outputs[0].uses()]
        assert readers == (["Add"] if model.bias is not None else ["Reshape"])
    runtime_ops = runtime_op_types(program, tmp_path)
    assert "QGemm" in runtime_ops and not {"Gemm", "Conv", "FusedConv"} & set(runtime_ops), runtime_ops


def test_negative_channel_axis() -> None:
    # axis -4 of the 4-D weight is axis 0 of the [O, C] matrix (-4 there made ONNX Runtime fail).
    program = assert_matches_eager(_ResidualBlockEnd(dequantize_axis=-4).eval(), _inputs(), rtol=0, atol=0.1 + 1e-6)
    assert _gemm(program).inputs[1].producer().attributes.get_int("axis", 1) == 0


def test_weight_quantized_per_input_channel_stays_a_float_product() -> None:
    # QGemm reads a weight's scales per output channel only: scales along the input channels keep
    # the product in float over the dequantized input, bias inside the Gemm.
    model = _ResidualBlockEnd(channel_axis=1).eval()
    program = assert_matches_eager(model, _inputs(), rtol=0, atol=0.1 + 1e-6)
    gemm = _gemm(program)
    assert gemm.inputs[0].producer().op_type == "Reshape" and len(gemm.inputs) == 3
    assert gemm.inputs[1].producer().attributes.get_int("axis", 1) == 1  # ONNX's default axis


def test_dynamic_sizes_reshape_back_at_run_time() -> None:
    model = _ResidualBlockEnd().eval()
    batch, height = torch.export.Dim("batch"), torch.export.Dim("height")
    program = assert_matches_eager(
        model, _inputs(), rtol=0, atol=0.1 + 1e-6, more_inputs=[(_inputs(3, 9, 7), {})],
        dynamic_shapes=({0: batch, 2: height}, {0: batch, 2: height}),
    )
    assert "Conv" not in _op_types(program)


def test_other_convolutions_stay() -> None:
    # A 3x3 kernel or a stride is no product over channels, a convolution whose output is
    # quantized becomes ONNX Runtime's integer QLinearConv, and one read by a float function has
    # no channels-last neighbours to gain from.
    for model in (_ResidualBlockEnd(kernel=3), _ResidualBlockEnd(stride=2), _ResidualBlockEnd(quantize_conv=True), _ResidualBlockEnd(residual=False)):
        x, residual = _inputs(height=9, width=9)
        if model.stride == 2:
            residual = torch.randn(2, 8, 5, 5)
        elif model.weight.shape[-1] == 3:
            residual = torch.randn(2, 8, 7, 7)
        program = assert_matches_eager(model.eval(), (x, residual), rtol=0, atol=0.1 + 1e-6)
        ops = _op_types(program)
        assert ops.count("Conv") == 1 and "Gemm" not in ops, ops
