"""Eager-mode quantized models (torch.ao.quantization.convert) export as QDQ graphs whose outputs
are eager's, bit for bit, on inputs in the range they were calibrated on."""

from __future__ import annotations

from typing import Callable

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.ao import quantization

import torch_onnx_fx
from helpers import assert_matches_eager

pytestmark = pytest.mark.skipif(
    "fbgemm" not in torch.backends.quantized.supported_engines, reason="eager quantized kernels need the fbgemm engine"
)


class Block(nn.Module):
    """Every kind of quantized computation torchvision's quantized models use."""

    def __init__(self):
        super().__init__()
        self.quant, self.dequant = quantization.QuantStub(), quantization.DeQuantStub()
        self.conv = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU())
        self.depthwise = nn.Conv2d(8, 8, 3, stride=2, padding=1, groups=8)
        self.pointwise = nn.Conv2d(4, 4, 1)
        self.add, self.cat, self.mul = nn.quantized.FloatFunctional(), nn.quantized.FloatFunctional(), nn.quantized.FloatFunctional()
        self.hardswish, self.hardsigmoid = nn.Hardswish(), nn.Hardsigmoid()
        self.squeeze = nn.Conv2d(8, 8, 1)
        self.fc = nn.Linear(8, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.conv(self.quant(x))
        x = self.add.add_relu(x, F.avg_pool2d(x, 3, 1, 1))
        x = F.max_pool2d(self.depthwise(x), 2, ceil_mode=True)
        left, right = x.chunk(2, dim=1)
        x = self.cat.cat([left, self.pointwise(right)], dim=1)
        batch, channels, height, width = x.shape
        x = x.view(batch, 2, channels // 2, height, width).transpose(1, 2).reshape(batch, channels, height, width)
        x = self.hardswish(x)
        scale = self.hardsigmoid(self.squeeze(F.adaptive_avg_pool2d(x, 1)))
        x = self.mul.mul(x, scale)
        return self.dequant(self.fc(x.mean([2, 3])))


def _quantized(model: nn.Module, qconfig: quantization.QConfig) -> nn.Module:
    torch.backends.quantized.engine = "fbgemm"
    model.eval()
    torch.ao.quantization.fuse_modules(model, [["conv.0", "conv.1", "conv.2"]], inplace=True)
    model.qconfig = qconfig
    quantization.prepare(model, inplace=True)
    torch.manual_seed(1)
    with torch.no_grad():
        for _ in range(4):
            model(torch.rand(4, 3, 48, 48))
    return quantization.convert(model, inplace=True)


@pytest.mark.parametrize(
    "qconfig", [quantization.get_default_qconfig("fbgemm"), quantization.default_qconfig], ids=["per-channel", "per-tensor"]
)
def test_quantized_model_matches_eager_bit_for_bit(qconfig):
    torch.manual_seed(0)
    model = _quantized(Block(), qconfig)
    # 48 x 48 images: the global pools average 12 x 12 values, a count whose reciprocal is inexact
    # in float32, so sums exactly half-way between two integers occur (and must round as ATen does).
    more = [((torch.rand(batch, 3, 48, 48),), {}) for batch in (3, 16, 16, 16)]
    program = assert_matches_eager(
        model, (torch.rand(2, 3, 48, 48),), dynamic_shapes=({0: "batch"},), more_inputs=more, rtol=0, atol=0
    )
    op_types = {node.op_type for node in program.model.graph}
    assert {"QuantizeLinear", "DequantizeLinear"} <= op_types
    # int8 weights stay int8 in the file.
    weights = [value for name, value in program.model.graph.initializers.items() if name.endswith("weight")]
    assert weights and all(value.dtype.name == "INT8" for value in weights)


def test_quantized_modules_are_restored_after_export():
    model = _quantized(Block(), quantization.get_default_qconfig("fbgemm"))
    before = dict(model.named_modules())
    torch_onnx_fx.export(model, (torch.rand(2, 3, 48, 48),), verbose=False)
    assert dict(model.named_modules()) == before
    assert model(torch.rand(1, 3, 48, 48)).shape == (1, 5)


def test_quantize_per_tensor_in_forward():
    class Inline(nn.Module):
        def __init__(self):
            super().__init__()
            self.linear = torch.ao.nn.quantized.Linear(4, 3)
            self.linear.set_weight_bias(torch.quantize_per_tensor(torch.randn(3, 4), 0.05, 0, torch.qint8), torch.randn(3))

        def forward(self, x):
            return self.linear(torch.quantize_per_tensor(x, 0.01, 3, torch.quint8)).dequantize()

    torch.backends.quantized.engine = "fbgemm"
    assert_matches_eager(Inline().eval(), (torch.rand(2, 4),), rtol=0, atol=0)


def test_quantized_module_without_equivalent_is_refused_by_name():
    class Normalized(nn.Module):
        def __init__(self):
            super().__init__()
            self.quant, self.dequant = quantization.QuantStub(), quantization.DeQuantStub()
            self.norm = nn.LayerNorm(6)

        def forward(self, x):
            return self.dequant(self.norm(self.quant(x)))

    model = Normalized().eval()
    model.qconfig = quantization.default_qconfig
    quantization.prepare(model, inplace=True)
    model(torch.rand(2, 6))
    quantization.convert(model, inplace=True)
    with pytest.raises(torch_onnx_fx.CaptureError, match="no QDQ equivalent here: .*LayerNorm"):
        torch_onnx_fx.export(model, (torch.rand(2, 6),), verbose=False)
    assert type(model.norm).__module__.startswith("torch.ao.nn.quantized")


class Activations(nn.Module):
    """Float modules eager runs as quantized kernels on quantized tensors (sigmoid and tanh round
    onto fixed grids), a converted LeakyReLU and a quantized matmul; ``refused`` adds a function
    with no QDQ equivalent."""

    def __init__(self, refused: bool = False):
        super().__init__()
        self.refused = refused
        self.quant, self.dequant = quantization.QuantStub(), quantization.DeQuantStub()
        self.linear = nn.Linear(16, 16)
        self.sigmoid, self.tanh, self.leaky = nn.Sigmoid(), nn.Tanh(), nn.LeakyReLU(0.1)
        self.product = nn.quantized.FloatFunctional()

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        x = self.linear(self.quant(x))
        if self.refused:
            x = F.elu(x)
        gate, leaky = self.sigmoid(x), self.leaky(x)
        scores = self.product.matmul(gate, leaky.transpose(1, 2))
        return self.dequant(scores), self.dequant(self.tanh(x)), self.dequant(leaky)


def _converted(model: nn.Module) -> nn.Module:
    torch.backends.quantized.engine = "fbgemm"
    model.eval().qconfig = quantization.default_qconfig
    quantization.prepare(model, inplace=True)
    torch.manual_seed(1)
    with torch.no_grad():
        for _ in range(3):
            model(torch.randn(4, 8, 16))
    return quantization.convert(model, inplace=True)


def test_activations_on_quantized_tensors_round_as_eager():
    torch.manual_seed(0)
    model = _converted(Activations())
    more = [((torch.randn(4, 8, 16),), {}) for _ in range(5)]
    assert_matches_eager(model, (torch.randn(4, 8, 16),), more_inputs=more, rtol=0, atol=0)


def test_float_function_on_quantized_tensor_is_refused_not_skipped():
    """Eager runs elu on a quantized tensor as a kernel that rounds; without an equivalent, the
    export refuses (naming the function) rather than emit a float elu that does not round."""
    model = _converted(Activations(refused=True))
    with pytest.raises(torch_onnx_fx.CaptureError, match="elu on a quantized tensor has no QDQ equivalent") as caught:
        torch_onnx_fx.export(model, (torch.randn(4, 8, 16),), verbose=False)
    # Not retried with TorchDynamo (strict=True), whose bytecode tracing bypasses the guard and
    # captured the float elu once dynamo was warm.
    assert [strategy for strategy, _ in caught.value.failures] == ["torch.export(strict=False)"]


@pytest.mark.parametrize("convolution, shape", [(nn.Conv1d(4, 6, 3, padding=1), (2, 4, 20)), (nn.Conv3d(4, 6, 3, padding=1), (2, 4, 6, 6, 6))], ids=["1d", "3d"])
def test_quantized_convolutions_of_other_ranks(convolution, shape):
    class Single(nn.Module):
        def __init__(self):
            super().__init__()
            self.quant, self.dequant, self.convolution = quantization.QuantStub(), quantization.DeQuantStub(), convolution

        def forward(self, x):
            return self.dequant(self.convolution(self.quant(x)))

    torch.backends.quantized.engine = "fbgemm"
    model = Single().eval()
    model.qconfig = quantization.get_default_qconfig("fbgemm")
    quantization.prepare(model, inplace=True)
    torch.manual_seed(0)
    with torch.no_grad():
        for _ in range(3):
            model(torch.rand(*shape))
    quantization.convert(model, inplace=True)
    more = [((torch.rand(*shape),), {}) for _ in range(4)]
    assert_matches_eager(model, (torch.rand(*shape),), more_inputs=more, rtol=0, atol=0)


class _Stubbed(nn.Module):
    """QuantStub -> ``body`` -> DeQuantStub, converted with ``qconfig`` under the fbgemm engine."""

    def __init__(self, body: Callable[[nn.Module, torch.Tensor], torch.Tensor]):
        super().__init__()
        self.body = body
        self.quant, self.dequant = quantization.QuantStub(), quantization.DeQuantStub()
        self.linear, self.relu6 = nn.Linear(8, 8), nn.ReLU6()

    def forward(self, x):
        return self.dequant(self.body(self, self.quant(x)))


def _stubbed(body, qconfig=None):
    torch.backends.quantized.engine = "fbgemm"
    torch.manual_seed(0)
    model = _Stubbed(body).eval()
    model.qconfig = qconfig or quantization.default_qconfig
    quantization.prepare(model, inplace=True)
    with torch.no_grad():
        model(torch.linspace(-3, 10, 64).reshape(8, 8))
    return quantization.convert(model, inplace=True)


def test_relu6_rounds_its_bound_onto_the_grid():
    """Quantized relu6 clamps at the grid point nearest 6.0, not at 6.0 (31 of 100 values were off)."""
    model = _stubbed(lambda self, x: self.relu6(x))
    x = torch.linspace(-3, 10, 64).reshape(8, 8)
    assert_matches_eager(model, (x,), more_inputs=[((x * 0.7,), {})], rtol=0, atol=0)


def test_item_assignment_on_a_quantized_tensor_is_refused():
    """Eager rounds the value written into a quantized tensor; a float graph would not."""

    def body(self, x):
        y = self.linear(x)
        y[0] = 0.3337
        return y

    with pytest.raises(torch_onnx_fx.CaptureError, match="on a quantized tensor has no QDQ equivalent"):
        torch_onnx_fx.export(_stubbed(body), (torch.rand(8, 8),), verbose=False)


def test_other_quantized_engines_are_refused():
    model = _stubbed(lambda self, x: self.linear(x))
    torch.backends.quantized.engine = "qnnpack"
    try:
        with pytest.raises(torch_onnx_fx.CaptureError, match="'qnnpack' engine"):
            torch_onnx_fx.export(model, (torch.rand(8, 8),), verbose=False)
    finally:
        torch.backends.quantized.engine = "fbgemm"


def test_float_model_with_float_functional_is_a_float_model():
    """FloatFunctional computes in float (a quantizable model before convert): exported as float,
    with TorchDynamo still tried after the non-strict capture."""

    class Residual(nn.Module):
        def __init__(self):
            super().__init__()
            self.linear, self.add = nn.Linear(8, 8), nn.quantized.FloatFunctional()

        def forward(self, x):
            return self.add.add(self.linear(x), x)

    assert_matches_eager(Residual().eval(), (torch.randn(4, 8),))


def test_apply_weights_with_quantized_tensors_says_what_to_pass():
    model = _stubbed(lambda self, x: self.linear(x))
    program = torch_onnx_fx.export(model, (torch.rand(8, 8),), verbose=False)
    with pytest.raises(torch_onnx_fx.ArgumentTypeError, match=r"are quantized tensors.*int_repr"):
        program.apply_weights(model.state_dict(), strict=False)


def test_activations_of_several_quantized_dtypes_are_refused():
    class TwoStubs(nn.Module):
        def __init__(self):
            super().__init__()
            self.quant, self.signed, self.dequant = quantization.QuantStub(), quantization.QuantStub(), quantization.DeQuantStub()
            self.linear, self.add = nn.Linear(8, 8), nn.quantized.FloatFunctional()

        def forward(self, x):
            return self.dequant(self.add.add(self.signed(x), self.signed(self.dequant(self.linear(self.quant(x))))))

    torch.backends.quantized.engine = "fbgemm"
    model = TwoStubs().eval()
    model.qconfig = quantization.default_qconfig
    model.signed.qconfig = model.add.qconfig = quantization.QConfig(
        activation=quantization.MinMaxObserver.with_args(dtype=torch.qint8), weight=quantization.default_weight_observer
    )
    quantization.prepare(model, inplace=True)
    model(torch.randn(4, 8))
    quantization.convert(model, inplace=True)
    with pytest.raises(torch_onnx_fx.CaptureError, match="several dtypes"):
        torch_onnx_fx.export(model, (torch.randn(4, 8),), verbose=False)
