"""int8 activations of a QDQ graph shifted to uint8 (``runtime/unsigned_activations.py``)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnx_ir as ir
import onnxruntime
import torch

from torch_onnx_fx.optimize.runtime.unsigned_activations import UnsignedActivationsPass


def _quantize_pair(zero_points: list[int], *, expose_integers: bool = False) -> ir.Model:
    """x -> QuantizeLinear(int8, scale 0.5, zero point z) -> DequantizeLinear per z; one output each."""
    x = ir.Value(name="x", type=ir.TensorType(ir.DataType.FLOAT), shape=ir.Shape([None]))
    nodes, outputs = [], []
    for index, z in enumerate(zero_points):
        scale = ir.Value(name=f"scale_{index}", type=ir.TensorType(ir.DataType.FLOAT), shape=ir.Shape([]), const_value=ir.tensor(np.array(0.5, np.float32)))
        zero = ir.Value(name=f"zero_{index}", type=ir.TensorType(ir.DataType.INT8), shape=ir.Shape([]), const_value=ir.tensor(np.array(z, np.int8)))
        quantize = ir.node("QuantizeLinear", [x, scale, zero])
        quantize.outputs[0].name, quantize.outputs[0].dtype = f"q_{index}", ir.DataType.INT8
        dequantize = ir.node("DequantizeLinear", [quantize.outputs[0], scale, zero])
        dequantize.outputs[0].name, dequantize.outputs[0].dtype = f"y_{index}", ir.DataType.FLOAT
        nodes += [quantize, dequantize]
        outputs += [dequantize.outputs[0], *([quantize.outputs[0]] if expose_integers else [])]
    initializers = [value for node in nodes for value in node.inputs[1:]]
    graph = ir.Graph([x], outputs, nodes=nodes, initializers=list({id(v): v for v in initializers}.values()), opset_imports={"": 20})
    return ir.Model(graph, ir_version=10)


def _run(model: ir.Model, x: np.ndarray) -> list[np.ndarray]:
    options = onnxruntime.SessionOptions()
    options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_DISABLE_ALL
    proto = ir.serde.serialize_model(model).SerializeToString()
    session = onnxruntime.InferenceSession(proto, options, providers=["CPUExecutionProvider"])
    return session.run(None, {"x": x})


def test_shift_is_exact_on_ties_saturation_and_nan() -> None:
    # Halves of the step (ties, rounded to even), values past both ends, infinities and NaN.
    x = np.concatenate([np.arange(-80, 80, 0.25), [1e9, -1e9, np.inf, -np.inf, np.nan, 0.0, -0.0]]).astype(np.float32)
    zero_points = [-128, -5, 0, 3, 127]
    before = _run(_quantize_pair(zero_points), x)
    model = _quantize_pair(zero_points)
    assert UnsignedActivationsPass()(model).modified
    assert {node.outputs[0].dtype for node in model.graph if node.op_type == "QuantizeLinear"} == {ir.DataType.UINT8}
    after = _run(model, x)
    for old, new in zip(before, after, strict=True):
        np.testing.assert_array_equal(old, new)


def test_integers_the_caller_sees_stay_signed() -> None:
    model = _quantize_pair([0], expose_integers=True)
    assert not UnsignedActivationsPass()(model).modified
    assert model.graph.outputs[1].dtype == ir.DataType.INT8


def test_xnnpack_resnet_block_runs_on_integer_kernels(tmp_path: Path) -> None:
    import torchao.testing.pt2e._xnnpack_quantizer as xnnpack
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    import torch_onnx_fx
    from torch_onnx_fx.verification import verify_onnx_program

    class Block(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.stem, self.first, self.second = torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.Conv2d(8, 8, 3, padding=1), torch.nn.Conv2d(8, 8, 1)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            y = torch.relu(self.stem(x))
            return torch.relu(self.second(torch.relu(self.first(y))) + y)

    torch.manual_seed(0)
    x = torch.randn(1, 3, 16, 16)
    quantizer = xnnpack.XNNPACKQuantizer()
    quantizer.set_global(xnnpack.get_symmetric_quantization_config(is_per_channel=True))
    prepared = prepare_pt2e(torch.export.export(Block().eval(), (x,)).module(), quantizer)
    for _ in range(4):
        prepared(torch.randn(1, 3, 16, 16))
    converted = convert_pt2e(prepared)
    program = torch_onnx_fx.export(converted, (x,), dynamo=True, verbose=False)
    graph = program.model.graph
    assert {n.outputs[0].dtype for n in graph if n.op_type == "QuantizeLinear"} == {ir.DataType.UINT8}
    assert {n.inputs[0].dtype for n in graph if n.op_type == "DequantizeLinear" and n.inputs[0].is_initializer()} == {ir.DataType.INT8}
    # ONNX Runtime's default options: every convolution and the residual sum integer kernels.
    path = tmp_path / "model.onnx"
    program.save(path)
    options = onnxruntime.SessionOptions()
    options.optimized_model_filepath = str(tmp_path / "optimized.onnx")
    onnxruntime.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    ops = [node.op_type for node in onnx.load(options.optimized_model_filepath).graph.node]
    assert ops.count("QLinearConv") == 3 and "QLinearAdd" in ops and not {"Conv", "FusedConv"} & set(ops), ops
    # The output is a dequantized tensor: within a step or two of PyTorch's (rounding midpoints).
    last = next(n for n in reversed(list(graph)) if n.op_type == "DequantizeLinear")
    step = float(last.inputs[1].const_value.numpy())
    (actual,) = program(x)
    expected = converted(x)
    assert (actual - expected).abs().max().item() <= 2 * step + 1e-6
    # Verification compares the shifted integers with PyTorch's int8 ones 128 lower (within the
    # one step a rounding midpoint moves; 128 apart without the offset).
    quantized = [info for info in verify_onnx_program(program, compare_intermediates=True) if info.onnx_op == "QuantizeLinear"]
    assert len(quantized) >= 3 and quantized[0].passed, quantized
    assert all(info.actual_dtype == torch.int8 and info.max_abs_diff <= 1 for info in quantized), quantized
