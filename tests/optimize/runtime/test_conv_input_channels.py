"""An integer convolution over 3 input channels is widened with zero channels to 4, the count ONNX
Runtime's symmetric ``QLinearConv`` kernels take, without changing a bit of its output."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnx_ir
import onnxruntime
import pytest
import torch
import torch.ao.quantization.fx._decomposed  # noqa: F401 - defines torch.ops.quantized_decomposed

from helpers import assert_matches_eager
from torch_onnx_fx.optimize.runtime.conv_input_channels import ConvInputChannelsPass

qd = torch.ops.quantized_decomposed


class _QuantizedStem(torch.nn.Module):
    """A PT2E-quantized image stem: the input quantized per tensor, a strided 3x3 convolution with
    a symmetric int8 weight per output channel, ReLU, the output quantized."""

    def __init__(self, channels: int = 3, outputs: int = 16, weight_zero_point: int = 0, quantize_output: bool = True):
        super().__init__()
        torch.manual_seed(0)
        weight = torch.randn(outputs, channels, 3, 3)
        self.quantize_output = quantize_output
        self.register_buffer("scales", weight.abs().amax(dim=(1, 2, 3)) / 100)
        self.register_buffer("zero_points", torch.full((outputs,), weight_zero_point, dtype=torch.int64))
        self.register_buffer("weight", qd.quantize_per_channel(weight, self.scales, self.zero_points, 0, -128, 127, torch.int8))
        self.register_buffer("bias", torch.randn(outputs))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        weight = qd.dequantize_per_channel(self.weight, self.scales, self.zero_points, 0, -128, 127, torch.int8)
        x = qd.dequantize_per_tensor(qd.quantize_per_tensor(x, 0.03, 114, 0, 255, torch.uint8), 0.03, 114, 0, 255, torch.uint8)
        y = torch.relu(torch.nn.functional.conv2d(x, weight, self.bias, stride=2, padding=1))
        if not self.quantize_output:
            return torch.tanh(y)
        return qd.dequantize_per_tensor(qd.quantize_per_tensor(y, 0.05, 0, 0, 255, torch.uint8), 0.05, 0, 0, 255, torch.uint8)


def _run(model: onnx.ModelProto, x: torch.Tensor, level: onnxruntime.GraphOptimizationLevel, tmp_path: Path) -> tuple[np.ndarray, list[str]]:
    """The output under ONNX Runtime at ``level`` and the operators it ran."""
    path = tmp_path / "model.onnx"
    onnx.save(model, path)
    options = onnxruntime.SessionOptions()
    options.graph_optimization_level = level
    options.optimized_model_filepath = str(tmp_path / "optimized.onnx")
    session = onnxruntime.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    (output,) = session.run(None, {session.get_inputs()[0].name: x.numpy()})
    return output, [node.op_type for node in onnx.load(options.optimized_model_filepath).graph.node]


def _conv(program) -> onnx_ir.Node:
    (conv,) = [node for node in program.model.graph if node.op_type == "Conv"]
    return conv


def test_stem_widened_to_four_channels_bit_for_bit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    model, x = _QuantizedStem().eval(), torch.randn(2, 3, 17, 19)
    # One output step is 0.05; the integer sums may round an element to the next step.
    program = assert_matches_eager(model, (x,), rtol=0, atol=0.05 + 1e-6)
    conv = _conv(program)
    activation, weight = (value.producer() for value in conv.inputs[:2])
    assert [activation.op_type, weight.op_type] == ["DequantizeLinear", "DequantizeLinear"]
    # Both widened on the integers: the activation with its zero point, the weight with zeros;
    # the stored weight keeps its shape, so apply_weights replaces it as before.
    (x_pad, w_pad) = (value.producer() for value in (activation.inputs[0], weight.inputs[0]))
    assert [x_pad.op_type, w_pad.op_type] == ["Pad", "Pad"]
    assert x_pad.inputs[2] is activation.inputs[2]
    assert list(activation.outputs[0].shape)[1] == 4 and list(weight.outputs[0].shape)[1] == 4
    assert w_pad.inputs[0].is_initializer() and list(w_pad.inputs[0].shape) == [16, 3, 3, 3]

    monkeypatch.setattr(ConvInputChannelsPass, "call", lambda self, model: onnx_ir.passes.PassResult(model, modified=False))
    narrow = assert_matches_eager(model, (x,), rtol=0, atol=0.05 + 1e-6)
    assert "Pad" not in [node.op_type for node in narrow.model.graph]
    for level in (onnxruntime.GraphOptimizationLevel.ORT_DISABLE_ALL, onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL):
        wide_out, wide_ops = _run(program.model_proto, x, level, tmp_path)
        narrow_out, _ = _run(narrow.model_proto, x, level, tmp_path)
        np.testing.assert_array_equal(wide_out, narrow_out)
    # ONNX Runtime folds the weight's Pad and runs the unit as one integer convolution.
    assert wide_ops.count("QLinearConv") == 1 and "Conv" not in wide_ops and wide_ops.count("Pad") == 1, wide_ops


def test_asymmetric_weight_stays_narrow() -> None:
    # An asymmetric weight does not reach the symmetric kernel, so nothing is widened; the pass's
    # exactness does not rest on it either (the padded activation dequantizes to exact zeros).
    program = assert_matches_eager(_QuantizedStem(weight_zero_point=3).eval(), (torch.randn(1, 3, 9, 9),), rtol=0, atol=0.05 + 1e-6)
    assert list(_conv(program).inputs[1].shape)[1] == 3


@pytest.mark.parametrize(
    "kwargs", [{"channels": 4}, {"channels": 8}, {"outputs": 8}, {"outputs": 20}, {"quantize_output": False}],
    ids=["aligned", "aligned_8", "few_outputs", "outputs_not_multiple_of_8", "float_output"],
)
def test_other_convolutions_stay(kwargs: dict) -> None:
    # Aligned already, too few or unaligned output channels for the kernel, or an output left in
    # float (ONNX Runtime keeps a float Conv): a Pad would cost without a faster kernel.
    model = _QuantizedStem(**kwargs).eval()
    x = torch.randn(1, kwargs.get("channels", 3), 9, 9)
    program = assert_matches_eager(model, (x,), rtol=0, atol=0.05 + 1e-6)
    assert "Pad" not in [node.op_type for node in program.model.graph]
