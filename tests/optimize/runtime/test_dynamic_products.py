"""A dynamically quantized linear layer runs as ONNX Runtime's integer ``MatMulInteger``."""

from __future__ import annotations

from pathlib import Path

import onnx_ir
import pytest
import torch
import torch.ao.quantization.fx._decomposed  # noqa: F401 - defines torch.ops.quantized_decomposed

from helpers import assert_matches_eager, runtime_op_types

qd = torch.ops.quantized_decomposed


def _pt2e_dynamic(model: torch.nn.Module, x: torch.Tensor, dynamic_shapes: tuple | None = None, **config: bool) -> torch.nn.Module:
    pt2e = pytest.importorskip("torchao.quantization.pt2e.quantize_pt2e", reason="PT2E lives in torchao")
    x86 = pytest.importorskip("torchao.quantization.pt2e.quantizer.x86_inductor_quantizer")
    quantizer = x86.X86InductorQuantizer()
    quantizer.set_global(x86.get_default_x86_inductor_quantization_config(is_dynamic=True, **config))
    prepared = pt2e.prepare_pt2e(torch.export.export(model, (x,), dynamic_shapes=dynamic_shapes).module(), quantizer)
    prepared(x)
    return pt2e.convert_pt2e(prepared)


def _products(program) -> list[onnx_ir.Node]:
    return [node for node in program.model.graph if node.op_type == "MatMulInteger"]


def test_one_linear_layer_sums_integers(tmp_path: Path) -> None:
    torch.manual_seed(0)
    x = torch.randn(2, 7, 48)
    converted = _pt2e_dynamic(torch.nn.Linear(48, 24).eval(), x)
    # PyTorch sums the dequantized products in float32; the integer sums are exact and scaled
    # once, so the two differ by float32 rounding.
    program = assert_matches_eager(converted, (x,), more_inputs=[((x * 30,), {})], rtol=1e-5, atol=1e-5)
    (product,) = _products(program)
    ops = [node.op_type for node in program.model.graph]
    assert "Gemm" not in ops and "DequantizeLinear" not in ops, ops
    # Full-range input: the weight is shifted to uint8, whose products no CPU saturates.
    assert [value.dtype for value in product.inputs] == [onnx_ir.DataType.UINT8] * 4
    # The stored weight is still the model's int8 tensor (apply_weights replaces it).
    int8_weights = [v for v in program.model.graph.initializers.values() if v.dtype == onnx_ir.DataType.INT8 and v.shape.rank() == 2]
    assert len(int8_weights) == 1 and int8_weights[0].uses()
    runtime_ops = runtime_op_types(program, tmp_path)
    assert not {"Gemm", "MatMul", "FusedMatMul"} & set(runtime_ops), runtime_ops
    assert {"MatMulInteger", "MatMulIntegerToFloat"} & set(runtime_ops), runtime_ops


def test_seven_bit_input_keeps_the_signed_weight() -> None:
    torch.manual_seed(0)
    x = torch.randn(5, 32)
    converted = _pt2e_dynamic(torch.nn.Linear(32, 16).eval(), x, reduce_range=True)
    program = assert_matches_eager(converted, (x,), rtol=1e-5, atol=1e-5)
    (product,) = _products(program)
    assert [value.dtype for value in product.inputs] == [onnx_ir.DataType.UINT8, onnx_ir.DataType.INT8, onnx_ir.DataType.UINT8, onnx_ir.DataType.INT8]


class _Stack(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.up, self.down = torch.nn.Linear(32, 64), torch.nn.Linear(64, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down(torch.nn.functional.gelu(self.up(x)))


def test_stack_with_dynamic_sizes() -> None:
    torch.manual_seed(0)
    x = torch.randn(2, 5, 32)
    batch, length = torch.export.Dim("batch"), torch.export.Dim("length")
    converted = _pt2e_dynamic(_Stack().eval(), x, dynamic_shapes=({0: batch, 1: length},))
    # The second layer quantizes the first one's output: a value within float32 rounding of a
    # rounding boundary may land one step apart, which moves the output by about a step's share.
    program = assert_matches_eager(
        converted, (x,), dynamic_shapes=({0: batch, 1: length},), more_inputs=[((torch.randn(3, 9, 32),), {})],
        rtol=0, atol=2e-3,
    )
    assert len(_products(program)) == 2


class _HandWritten(torch.nn.Module):
    """A dequantize of a computed input with a zero point the graph does not bound to uint8, or a
    weight scaled per input channel: neither is a product of two integer operands."""

    def __init__(self, per_input_channel: bool) -> None:
        super().__init__()
        torch.manual_seed(0)
        weight = torch.randn(16, 32)
        self.axis = 1 if per_input_channel else 0
        self.register_buffer("scales", weight.abs().amax(dim=1 - self.axis) / 127)
        self.register_buffer("zero_points", torch.zeros(weight.shape[self.axis], dtype=torch.int64))
        self.register_buffer("weight", qd.quantize_per_channel(weight, self.scales, self.zero_points, self.axis, -128, 127, torch.int8))

    def forward(self, x: torch.Tensor, zero_point: torch.Tensor) -> torch.Tensor:
        scale = x.abs().amax() / 100
        q = qd.quantize_per_tensor.tensor(x, scale, zero_point, 0, 255, torch.uint8)
        dequantized = qd.dequantize_per_tensor.tensor(q, scale, zero_point, 0, 255, torch.uint8)
        weight = qd.dequantize_per_channel(self.weight, self.scales, self.zero_points, self.axis, -128, 127, torch.int8)
        return torch.nn.functional.linear(dequantized, weight)


@pytest.mark.parametrize("per_input_channel", [False, True])
def test_other_products_stay_in_float(per_input_channel: bool) -> None:
    x, zero_point = torch.randn(4, 32), torch.tensor(128)
    program = assert_matches_eager(_HandWritten(per_input_channel).eval(), (x, zero_point), rtol=1e-5, atol=1e-6)
    assert not _products(program)
