"""Products with a dequantized integer weight stay exact under ONNX Runtime's default options
(which would otherwise fuse them into an int8-activation MatMulNBits)."""

from __future__ import annotations

import pytest
import torch
import torch.ao.quantization.fx._decomposed  # noqa: F401 - defines torch.ops.quantized_decomposed

from helpers import assert_matches_eager

qd = torch.ops.quantized_decomposed


class _DequantizedLinear(torch.nn.Module):
    """A PT2E linear layer: a per-channel int8 weight dequantized in the graph."""

    def __init__(self, rows: int, columns: int, form: str):
        super().__init__()
        generator = torch.Generator().manual_seed(0)
        self.register_buffer("weight", torch.randint(-127, 128, (rows, columns), dtype=torch.int8, generator=generator))
        self.register_buffer("scale", torch.rand(rows, generator=generator) * 0.01 + 0.001)
        self.register_buffer("zero_point", torch.zeros(rows, dtype=torch.int64))
        self.bias = torch.nn.Parameter(torch.randn(rows, generator=generator))
        self.form = form

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.form == "columns":
            # A [K, N] weight dequantized per column, multiplied as it is.
            weight = qd.dequantize_per_channel.default(self.weight.t().contiguous(), self.scale, self.zero_point, 1, -128, 127, torch.int8)
            return x @ weight + self.bias
        weight = qd.dequantize_per_channel.default(self.weight, self.scale, self.zero_point, 0, -128, 127, torch.int8)
        return torch.nn.functional.linear(x, weight, self.bias)


@pytest.mark.parametrize("form", ["linear", "columns"])
@pytest.mark.parametrize("shape", [(256,), (64, 256), (2, 32, 256)])
def test_dequantized_weight_product_is_float(form: str, shape: tuple[int, ...]) -> None:
    # Fused into MatMulNBits (accuracy level 4) the outputs were ~0.3 off, with values of ~20.
    x = torch.randn(*shape)
    program = assert_matches_eager(_DequantizedLinear(256, 256, form).eval(), (x,), rtol=1e-5, atol=2e-4)
    for node in program.model.graph:
        if node.op_type == "MatMul":
            producer = node.inputs[1].producer()
            assert producer is None or producer.op_type not in ("DequantizeLinear", "Transpose"), node


def test_dynamic_batch_keeps_its_leading_dims() -> None:
    model = _DequantizedLinear(64, 128, "linear").eval()
    batch = torch.export.Dim("batch")
    assert_matches_eager(
        model, (torch.randn(3, 5, 128),), dynamic_shapes=({0: batch},),
        more_inputs=[((torch.randn(7, 5, 128),), {})], rtol=1e-5, atol=1e-4,
    )


class _TransposedInTheGraph(torch.nn.Module):
    """The [K, N] integer weight made in the graph (a Transpose ONNX Runtime folds later)."""

    def __init__(self) -> None:
        super().__init__()
        self.inner = _DequantizedLinear(128, 128, "linear")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        inner = self.inner
        weight = qd.dequantize_per_channel.default(inner.weight.t().contiguous(), inner.scale, inner.zero_point, 1, -128, 127, torch.int8)
        return x @ weight


def test_weight_transposed_in_the_graph() -> None:
    # Without the optimizer's folding the DequantizeLinear reads a Transpose, not an initializer.
    assert_matches_eager(_TransposedInTheGraph().eval(), (torch.randn(2, 8, 128),), optimize=False, rtol=1e-5, atol=2e-4)


class _Branches(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.rows, self.columns = _DequantizedLinear(128, 128, "linear"), _DequantizedLinear(128, 128, "columns")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cond(x.sum() > 0, lambda t: self.rows(t), lambda t: self.columns(t) * 2, (x,))


def test_products_inside_branches() -> None:
    # The weight of the columns form is transposed inside the branch, where the optimizer leaves
    # it: ONNX Runtime refused the model ("Missing required scale").
    x = torch.randn(2, 8, 128).abs()
    assert_matches_eager(_Branches().eval(), (x,), more_inputs=[((-x,), {})], rtol=1e-5, atol=2e-4)
