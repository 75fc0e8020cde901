"""PT2E's quantize/dequantize/choose_qparams operators, run in ONNX Runtime with its default
session options against the PyTorch model (integer results compared exactly)."""

from __future__ import annotations

import onnx_ir
import pytest
import torch
import torch.ao.quantization.fx._decomposed  # noqa: F401 - defines torch.ops.quantized_decomposed

import torch_onnx_fx
from helpers import assert_matches_eager

qd = torch.ops.quantized_decomposed


class _QuantizeRoundTrip(torch.nn.Module):
    """quantize then dequantize with fixed parameters, the integers returned too."""

    def __init__(self, scale: float, zero_point: int, low: int, high: int, dtype: torch.dtype):
        super().__init__()
        self.params = (scale, zero_point, low, high, dtype)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        q = qd.quantize_per_tensor.default(x, *self.params)
        return q, qd.dequantize_per_tensor.default(q, *self.params)


def test_narrow_range_is_clamped() -> None:
    # reduce_range=True quantizes activations to 0..127: QuantizeLinear alone saturates at 255.
    x = torch.linspace(-2, 8, 200)
    program = assert_matches_eager(_QuantizeRoundTrip(0.02, 10, 0, 127, torch.uint8), (x,), rtol=0, atol=0)
    assert program(x)[0].max().item() == 127


def test_sixteen_bit_follows_pytorch_arithmetic() -> None:
    # No 16-bit QuantizeLinear before opset 21: PyTorch's own formula, bit for bit.
    x = torch.randn(1000) * 50
    assert_matches_eager(_QuantizeRoundTrip(0.003, -7, -32768, 32767, torch.int16), (x,), rtol=0, atol=0)


def test_half_precision_input_is_quantized_from_float32() -> None:
    x = (torch.randn(300) * 3).half()
    assert_matches_eager(_QuantizeRoundTrip(0.05, 3, -128, 127, torch.int8), (x,), rtol=0, atol=0)


@pytest.mark.parametrize(
    ("zero_point", "low", "high", "dtype"),
    [(-10, 0, 255, torch.uint8), (300, 0, 255, torch.uint8), (130, -128, 127, torch.int8)],
)
def test_zero_point_outside_the_type(zero_point: int, low: int, high: int, dtype: torch.dtype) -> None:
    # Cast to the 8-bit type it wrapped around (-10 as uint8 is 246): every value was off.
    x = torch.randn(500) * 3
    assert_matches_eager(_QuantizeRoundTrip(0.1, zero_point, low, high, dtype), (x,), rtol=0, atol=0)


class _PerChannelRoundTrip(torch.nn.Module):
    """quantize_per_channel then dequantize_per_channel along axis 1, parameters as buffers (as
    PT2E stores them)."""

    def __init__(self, scales: torch.Tensor, zero_points: torch.Tensor, low: int, high: int, dtype: torch.dtype):
        super().__init__()
        self.register_buffer("scales", scales)
        self.register_buffer("zero_points", zero_points)
        self.bounds = (low, high, dtype)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        q = qd.quantize_per_channel.default(x, self.scales, self.zero_points, 1, *self.bounds)
        half = qd.dequantize_per_channel.default(q, self.scales, self.zero_points, 1, *self.bounds, out_dtype=torch.float16)
        return q, qd.dequantize_per_channel.default(q, self.scales, self.zero_points, 1, *self.bounds), half


@pytest.mark.parametrize(
    ("zero_points", "low", "high", "dtype", "scale_dtype", "linear"),
    [
        ([0, 0, 0, 0], -127, 127, torch.int8, torch.float32, True),  # XNNPACK's weights: a Clip at -127
        ([0, 10, 200, 255], 0, 127, torch.uint8, torch.float32, True),
        # torchlib cast these to uint8/int8: -10 became 246, 130 became -126 (248 and 256 steps off).
        ([-10, 130, 0, 5], 0, 255, torch.uint8, torch.float32, False),
        ([130, 0, -3, 1], -128, 127, torch.int8, torch.float32, False),
        # float64 scales: PyTorch's product is in float64, rounded to float32 at the end.
        ([0, 3, 7, 1], 0, 255, torch.uint8, torch.float64, False),
    ],
)
def test_per_channel(zero_points, low, high, dtype, scale_dtype, linear) -> None:
    generator = torch.Generator().manual_seed(len(zero_points) + low)
    scales = (torch.rand(4, generator=generator) * 0.05 + 0.01).to(scale_dtype)
    model = _PerChannelRoundTrip(scales, torch.tensor(zero_points), low, high, dtype).eval()
    x = torch.randn(3, 4, 20, generator=generator) * 5
    program = assert_matches_eager(model, (x,), rtol=0, atol=0)
    ops = {node.op_type for node in program.model.graph}
    assert ("QuantizeLinear" in ops and "DequantizeLinear" in ops) == linear, ops


def test_per_channel_exported_without_data() -> None:
    # Under FakeTensorMode the zero points cannot be read (numpy() raised in the translation):
    # PyTorch's arithmetic, exact for the zero points apply_weights gives later.
    from torch._subclasses.fake_tensor import FakeTensorMode

    def model() -> torch.nn.Module:
        generator = torch.Generator().manual_seed(5)
        scales = torch.rand(4, generator=generator) * 0.05 + 0.01
        return _PerChannelRoundTrip(scales, torch.tensor([-10, 130, 0, 5]), 0, 255, torch.uint8).eval()

    with FakeTensorMode():
        program = torch_onnx_fx.export(model(), (torch.randn(3, 4, 20),), verbose=False)
    real = model()
    program.apply_weights(real.state_dict())
    assert_matches_eager(real, (torch.randn(3, 4, 20) * 5,), program=program, rtol=0, atol=0)


class _TensorParameters(torch.nn.Module):
    """quantize/dequantize ``.tensor`` with float32 parameters, into a 16-bit type, and a
    half-precision result."""

    def forward(self, x: torch.Tensor, scale: torch.Tensor, zero_point: torch.Tensor) -> tuple[torch.Tensor, ...]:
        q = qd.quantize_per_tensor.tensor(x, scale, zero_point, -32768, 32767, torch.int16)
        half = qd.dequantize_per_tensor.tensor(q, scale, zero_point, -32768, 32767, torch.int16, out_dtype=torch.float16)
        return q, half


def test_tensor_parameters_of_sixteen_bits() -> None:
    # A float32 scale made an invalid model (a Div of float64 by float32); the float16 result
    # rounds the integer to float16 first, as PyTorch does.
    x = torch.randn(400) * 30
    args = (x, torch.tensor(0.0007), torch.tensor([3]))
    assert_matches_eager(_TensorParameters(), args, rtol=0, atol=0)


class _Dynamic(torch.nn.Module):
    """Dynamic quantization's computed parameters, as PT2E's dynamic configurations emit them."""

    def __init__(self, symmetric: bool, dtype: torch.dtype, low: int, high: int):
        super().__init__()
        self.symmetric, self.bounds = symmetric, (low, high, dtype)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        choose = qd.choose_qparams_symmetric.tensor if self.symmetric else qd.choose_qparams.tensor
        low, high, dtype = self.bounds
        scale, zero_point = choose(x, low, high, 2.0**-12, dtype)
        q = qd.quantize_per_tensor.tensor(x, scale, zero_point, low, high, dtype)
        return scale, zero_point, q, qd.dequantize_per_tensor.tensor(q, scale, zero_point, low, high, dtype)


@pytest.mark.parametrize(
    ("symmetric", "dtype", "low", "high"),
    [(False, torch.uint8, 0, 255), (True, torch.int8, -128, 127), (True, torch.uint8, 0, 255), (False, torch.int8, -128, 127)],
)
def test_dynamic_parameters_are_computed_as_pytorch_does(symmetric: bool, dtype: torch.dtype, low: int, high: int) -> None:
    model = _Dynamic(symmetric, dtype, low, high)
    x = torch.randn(4, 33) * 2 + 0.5
    others = [((torch.rand(4, 33) * 7,), {}), ((-torch.rand(4, 33),), {}), ((torch.zeros(4, 33),), {})]
    assert_matches_eager(model, (x,), more_inputs=others, rtol=0, atol=0)


def test_float8_target_is_refused() -> None:
    # PyTorch rounds to integers before its float8 cast; ONNX's float8 QuantizeLinear does not.
    model = _QuantizeRoundTrip(0.1, 0, -448, 448, torch.float8_e4m3fn)
    with pytest.raises(torch_onnx_fx.TranslationError, match=r"(?s)quantize_per_tensor.*rounds to an integer before the float8 cast.*test_quantized.py"):
        torch_onnx_fx.export(model, (torch.randn(8),), verbose=False)


def test_float8_source_is_dequantized() -> None:
    class Dequantize(torch.nn.Module):
        def forward(self, q: torch.Tensor) -> torch.Tensor:
            return qd.dequantize_per_tensor.default(q, 0.25, 3, -448, 448, torch.float8_e4m3fn)

    q = (torch.randn(64) * 40).to(torch.float8_e4m3fn)
    assert_matches_eager(Dequantize(), (q,), rtol=0, atol=0)


def test_half_precision_dynamic_parameters_are_refused() -> None:
    model = _Dynamic(False, torch.uint8, 0, 255)
    with pytest.raises(torch_onnx_fx.TranslationError, match=r"(?s)choose_qparams.*float16/bfloat16.*test_quantized.py"):
        torch_onnx_fx.export(model, (torch.randn(4, 8).half(),), verbose=False)


def _pt2e(model: torch.nn.Module, x: torch.Tensor, config: dict) -> torch.nn.Module:
    pt2e = pytest.importorskip("torchao.quantization.pt2e.quantize_pt2e", reason="PT2E lives in torchao")
    x86 = pytest.importorskip("torchao.quantization.pt2e.quantizer.x86_inductor_quantizer")
    quantizer = x86.X86InductorQuantizer()
    quantizer.set_global(x86.get_default_x86_inductor_quantization_config(**config))
    prepared = pt2e.prepare_pt2e(torch.export.export(model, (x,)).module(), quantizer)
    for _ in range(4):
        prepared(torch.randn_like(x))
    return pt2e.convert_pt2e(prepared)


class _ConvNet(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.fc = torch.nn.Linear(8 * 6 * 6, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(torch.relu(self.conv(x)).flatten(1))


def test_pt2e_reduce_range_beyond_calibration() -> None:
    torch.manual_seed(0)
    x = torch.randn(2, 3, 6, 6)
    converted = _pt2e(_ConvNet().eval(), x, {"reduce_range": True})
    # Four times the calibrated range: PyTorch clamps at 127 steps, torchlib's form did not
    # (0.2 off). A quantized value one step apart, where ONNX Runtime's convolution rounds a sum
    # differently, moves the output by less than 1e-3.
    assert_matches_eager(converted, (x * 4,), rtol=0, atol=2e-3)


def test_pt2e_dynamic_linear() -> None:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(32, 32), torch.nn.ReLU(), torch.nn.Linear(32, 8)).eval()
    x = torch.randn(4, 32)
    converted = _pt2e(model, x, {"is_dynamic": True})
    assert_matches_eager(converted, (x,), more_inputs=[((x * 5,), {})], rtol=0, atol=1e-6)


_BOUNDS = {torch.uint8: (0, 255), torch.int8: (-128, 127), torch.int16: (-32768, 32767), torch.int32: (-(2**31), 2**31 - 1)}


class _Generated(torch.nn.Module):
    """Many quantize/dequantize round trips with generated parameters, one export for all."""

    def __init__(self, cases: list[tuple]) -> None:
        super().__init__()
        self.cases = cases

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        results = []
        for form, scale, zero_point, low, high, dtype, out_dtype in self.cases:
            if form == "tensor":
                scale, zero_point = torch.tensor([scale], dtype=torch.float64), torch.tensor([zero_point])
                q = qd.quantize_per_tensor.tensor(x, scale, zero_point, low, high, dtype)
                d = qd.dequantize_per_tensor.tensor(q, scale, zero_point, low, high, dtype, out_dtype=out_dtype)
            else:
                q = qd.quantize_per_tensor.default(x, scale, zero_point, low, high, dtype)
                d = qd.dequantize_per_tensor.default(q, scale, zero_point, low, high, dtype, out_dtype=out_dtype)
            results += [q, d]
        return tuple(results)


def _generated_cases(seed: int, count: int) -> list[tuple]:
    generator = torch.Generator().manual_seed(seed)

    def pick(options: list) -> object:
        return options[int(torch.randint(len(options), (1,), generator=generator))]

    cases = []
    for _ in range(count):
        dtype = pick(list(_BOUNDS))
        low, high = _BOUNDS[dtype]
        if pick([True, False]):  # a narrowed range
            span = high - low
            low, high = low + int(span * 0.25), high - int(span * 0.25)
        scale = float(10 ** (torch.rand((), generator=generator) * 6 - 4))
        zero_point = int(torch.randint(low - 20, high + 21, (), generator=generator)) if dtype in (torch.uint8, torch.int8) else int(torch.randint(-50, 51, (), generator=generator))
        cases.append((pick(["default", "tensor"]), scale, zero_point, low, high, dtype, pick([None, torch.float16, torch.bfloat16])))
    return cases


@pytest.mark.parametrize("seed", [0, 1])
def test_generated_parameters(seed: int) -> None:
    # Generated scales over six decades, zero points past the type's range, narrowed ranges, every
    # integer type, both forms and half-precision results: exact, except where QuantizeLinear
    # divides by a scale that PyTorch multiplies by the reciprocal of (one step, at midpoints).
    cases = _generated_cases(seed, 24)
    model = _Generated(cases)
    x = torch.cat([torch.randn(2000) * 10 ** (k - 2) for k in range(5)])
    program = torch_onnx_fx.export(model, (x,), verbose=False)
    expected, actual = model(x), program(x)
    assert len(actual) == len(expected)
    for index, case in enumerate(cases):
        q_expected, q_actual = expected[2 * index], actual[2 * index]
        steps = (q_expected.long() - q_actual.long()).abs()
        form, scale, zero_point, low, high, dtype, out_dtype = case
        full = _BOUNDS[dtype]
        if form == "default" and dtype in (torch.uint8, torch.int8) and full[0] <= zero_point <= full[1]:
            assert steps.max() <= 1 and (steps > 0).float().mean() < 1e-3, (case, steps.max())
            # Dequantizing is exact: PyTorch's dequantize of the ONNX integers.
            again = qd.dequantize_per_tensor.default(q_actual, scale, zero_point, low, high, dtype, out_dtype=out_dtype)
            torch.testing.assert_close(actual[2 * index + 1], again, rtol=0, atol=0, msg=str(case))
        else:
            assert steps.max() == 0, (case, steps.max())
            torch.testing.assert_close(actual[2 * index + 1], expected[2 * index + 1], rtol=0, atol=0, msg=str(case))


class _IntMatMul(torch.nn.Module):
    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch._int_mm(a, b)


def test_int_mm_sums_exactly() -> None:
    # Extremes: -128 * -128 pairs sum past what 16-bit pair sums (MatMulInteger on CPUs without
    # VNNI) hold, and past float32's exact integers (2**24) at this K.
    a = torch.full((17, 1056), -128, dtype=torch.int8)
    b = torch.full((1056, 24), -128, dtype=torch.int8)
    a[1::2] = torch.randint(-128, 128, (8, 1056), dtype=torch.int8)
    b[:, 1::3] = 127
    program = assert_matches_eager(_IntMatMul().eval(), (a, b), rtol=0, atol=0)
    # ONNX Runtime's integer kernel, over unsigned operands: an int32 MatMul is exact too but ran
    # 11x slower than float, and u8s8 products saturate on CPUs without VNNI.
    (product,) = [node for node in program.model.graph if node.op_type == "MatMulInteger"]
    assert [value.dtype for value in product.inputs] == [onnx_ir.DataType.UINT8] * 4
    assert "MatMul" not in [node.op_type for node in program.model.graph]


def test_int_mm_of_unsigned_activations() -> None:
    # torchao's int8 dynamic configuration shifts its activations to uint8 before the product.
    torch.manual_seed(0)
    a = torch.randint(0, 256, (9, 320), dtype=torch.uint8)
    a[0] = 255
    b = torch.randint(-128, 128, (320, 12), dtype=torch.int8)
    b[:, 0] = -128
    assert_matches_eager(_IntMatMul().eval(), (a, b), rtol=0, atol=0)
