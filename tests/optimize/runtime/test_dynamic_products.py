"""A dynamically quantized linear layer runs as ONNX Runtime's integer ``MatMulInteger``."""

from __future__ import annotations

from pathlib import Path

import onnx_ir
import pytest
import torch
import torch.ao.quantization.fx._decomposed  # noqa: F401 - defines torch.ops.quantized_decomposed

import torch_onnx_fx

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


def test_wide_layer_whose_int32_sums_could_wrap_stays_in_float() -> None:
    # 40,000 products of up to 255 x 255 pass 2**31: ONNX Runtime's int32 sums would wrap (a
    # 140,000-wide sum came out with the wrong sign), PyTorch's float sums do not.
    torch.manual_seed(0)
    x = torch.rand(1, 40000) * 4
    model = torch.nn.Linear(40000, 2, bias=False).eval()
    torch.nn.init.constant_(model.weight, 0.01)
    converted = _pt2e_dynamic(model, x)
    program = assert_matches_eager(converted, (x,), rtol=1e-4, atol=1e-3)
    assert not _products(program)


class _BufferZeroPoint(_HandWritten):
    """The input's zero point is a buffer: apply_weights may replace it after export."""

    def __init__(self) -> None:
        super().__init__(per_input_channel=False)
        self.register_buffer("zero_point", torch.tensor([128]))

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        return super().forward(x, self.zero_point)


def test_zero_point_that_is_state_is_not_read_at_export() -> None:
    torch.manual_seed(0)
    x = torch.randn(4, 32)
    model = _BufferZeroPoint().eval()
    program = torch_onnx_fx.export(model, (x,), verbose=False)
    # A zero point of 300 has no uint8: the product must stay as PyTorch computes it.
    model.zero_point.fill_(300)
    program.apply_weights({"zero_point": model.zero_point.clone()}, strict=False)
    torch.testing.assert_close(program(x)[0], model(x), rtol=1e-5, atol=1e-5)
    # Exported on the meta device, where the buffer has no data to read.
    with torch.device("meta"):
        on_meta = _BufferZeroPoint().eval()
    torch_onnx_fx.export(on_meta, (torch.randn(4, 32, device="meta"),), verbose=False)
