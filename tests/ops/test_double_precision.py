"""float64 stays float64: operators whose torchlib translation went through float32 (ops/
double_precision.py, ops/arithmetic.py's isinf, ops/exactness.py's embedding_bag refusal).

Found by exporting every OpInfo operator in float64 and looking for float32 values in graphs whose
program holds none. Each narrowing lost half the digits and turned values past 3.4e38 into
infinities: isinf(1e300) was True, nan_to_num replaced 1e231 by the float64 maximum, celu(1e231)
was inf.
"""

from __future__ import annotations

import copy

import onnx
import onnx_ir as ir
import pytest
import torch
import torch.nn.functional as F

import torch_onnx_fx
from helpers import assert_matches_eager
from torch_onnx_fx.errors import TranslationError
from torch_onnx_fx.signature import ProgramSignature

INF, NAN = float("inf"), float("nan")
LARGE = torch.tensor([1e300, -3e231, 1e39, 0.1234567890123456789, -0.5, INF, -INF, NAN, 0.0], dtype=torch.float64)


def _narrowed(program):
    """The operators of ``program`` that produce float32 values."""
    return [n.op_type for n in program.model.graph for v in n.outputs if v.dtype == ir.DataType.FLOAT]


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.float16, torch.bfloat16])
def test_infinity_tests_keep_the_dtype(dtype):
    x = LARGE.clamp(-1e30, 1e30).to(dtype) if dtype != torch.float64 else LARGE
    program = assert_matches_eager(
        lambda x: (torch.isinf(x), torch.isposinf(x), torch.isneginf(x), torch.isfinite(x), torch.nan_to_num(x)), (x,), rtol=0, atol=0,
    )
    if dtype == torch.float64:
        assert _narrowed(program) == []


def test_celu_of_float64():
    program = assert_matches_eager(lambda x: F.celu(x, alpha=1.5), (LARGE,), rtol=1e-15, atol=0)
    assert _narrowed(program) == []


def test_layer_norm_statistics_of_float64():
    x = torch.tensor([[1e150, -3e150, 2e150, 5e149], [0.1, 0.2, 0.30000001, 0.4]], dtype=torch.float64)
    program = assert_matches_eager(lambda x: torch.ops.aten.native_layer_norm(x, [4], None, None, 1e-5), (x,), rtol=1e-14, atol=0)
    assert _narrowed(program) == []


def test_float64_max_embedding_bag_is_refused_with_the_reason():
    # Sums and means are computed in float64 (tests/ops/test_embedding_bag.py); max bags are not.
    weight, indices, offsets = torch.randn(10, 3, dtype=torch.float64), torch.tensor([1, 2, 4, 5]), torch.tensor([0, 2])
    with pytest.raises(TranslationError, match="float64 weights would be computed in float32"):
        torch_onnx_fx.export(lambda w, i, o: F.embedding_bag(i, w, o, mode="max"), (weight, indices, offsets), verbose=False)
    assert_matches_eager(lambda w, i, o: F.embedding_bag(i, w, o, mode="max"), (weight.float(), indices, offsets))
    assert_matches_eager(lambda w, i, o: F.embedding_bag(i, w, o), (weight, indices, offsets), rtol=1e-15, atol=0)


def test_float64_log_softmax_of_non_finite_rows():
    # ONNX Runtime's float64 LogSoftmax gave [nan, 43.05, 44.05, ...] for a row with a NaN, and
    # left -inf beside +inf, where ATen's rows are NaN throughout.
    inf, nan = float("inf"), float("nan")
    x = torch.tensor(
        [[inf, 1, 2, -inf, 3], [-inf, 1, 2, -inf, 3], [nan, 1, 2, 3, 4], [inf, inf, 1, 2, 3], [1e300, -1e300, 0, 5, 1], [1, 2, 3, 4, 5]],
        dtype=torch.float64,
    )

    def model(x):
        return torch.log_softmax(x, 1), torch.log_softmax(x, 0), F.log_softmax(x.float(), 1, dtype=torch.float64)

    assert_matches_eager(model, (x,), rtol=1e-12, atol=1e-12)


def test_float64_stable_forms_use_float64_constants():
    # ops/stable.py's constants were float32: log(2) rounded to float32 made float64 logaddexp2
    # off by 1.2e-6 relative.
    a, b = torch.randn(200, dtype=torch.float64) * 3, torch.randn(200, dtype=torch.float64) * 3
    assert_matches_eager(lambda a, b: (torch.logaddexp2(a, b), torch.logaddexp(a, b)), (a, b), rtol=1e-13, atol=1e-300)


_SMALL = torch.randn(300, dtype=torch.float64, generator=torch.Generator().manual_seed(0)) * 3
_OTHER = torch.randn(300, dtype=torch.float64, generator=torch.Generator().manual_seed(1))

# Numbers torchlib took as float attributes (0.1 became 0.10000000149: results 1e-9 to 5e-6 off
# relatively), and ONNX Runtime's float64 tanh-GELU, which computes in float precision (6e-9).
FLOAT64_NUMBERS = {
    "clamp_min": lambda x: x.clamp_min(0.1),
    "clamp_max": lambda x: x.clamp_max(0.1),
    "hardtanh": lambda x: F.hardtanh(x, -0.3, 0.7),
    "add_alpha": lambda x: torch.add(x, x.flip(0), alpha=0.1),
    "sub_alpha": lambda x: torch.sub(x, x.flip(0), alpha=0.1),
    "addcdiv": lambda x: torch.addcdiv(x, x.flip(0), x.abs() + 1, value=0.1),
    "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"),
    "full": lambda x: torch.full((300,), 0.1, dtype=torch.float64) + x,
    "new_full": lambda x: x.new_full((300,), 1 / 3) * x,
    # torch decomposes it with scalar_tensor, whose torchlib translation cast a float32 constant.
    "index_fill": lambda x: x.index_fill(0, torch.tensor([0, 2, 7]), 0.1),
}


@pytest.mark.parametrize("name", sorted(FLOAT64_NUMBERS))
def test_float64_numbers_are_not_rounded_to_float32(name):
    function = FLOAT64_NUMBERS[name]
    # Within a few ulps of the largest magnitude: tanh's last bit differs from ATen's, which
    # 1 + tanh(x) near -1 shows (1.3e-15 on a value of 2.5e-6); the float32 numbers were 1e-9 off.
    assert_matches_eager(lambda x: function(x), (_SMALL,), rtol=1e-15, atol=4e-15)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_addcmul_scales_by_the_exact_value(dtype):
    # float32 is ATen's fused multiply-add, bit for bit; float64 keeps two roundings (an ulp).
    x, y, z = (t.to(dtype) for t in (_SMALL, _OTHER, _OTHER.flip(0)))
    program = torch_onnx_fx.export(lambda a, b, c: torch.addcmul(a, b, c, value=0.1), (x, y, z), verbose=False)
    expected, actual = torch.addcmul(x, y, z, value=0.1), program(x, y, z)
    assert len(actual) == 1
    if dtype == torch.float32:
        assert torch.equal(actual[0], expected)
    else:
        torch.testing.assert_close(actual[0], expected, rtol=1e-15, atol=1e-15)


@pytest.mark.parametrize("norm", ["layer_norm", "batch_norm", "instance_norm"])
def test_float64_norm_epsilon_is_not_rounded_to_float32(norm):
    # LayerNormalization's and BatchNormalization's epsilon is a float attribute: eps=1e-5 became
    # 9.99999974738e-06, 1.1e-8 off where the variance is small beside eps.
    torch.manual_seed(0)
    x = torch.randn(8, 64, dtype=torch.float64) * 1e-3
    weight, bias = torch.rand(64, dtype=torch.float64) + 0.5, torch.randn(64, dtype=torch.float64)
    if norm == "layer_norm":
        model = torch.nn.LayerNorm(64, dtype=torch.float64).eval()
    elif norm == "instance_norm":
        # Over running statistics torchlib's instance norm is a BatchNormalization (7e-13 off).
        model = torch.nn.InstanceNorm1d(64, affine=True, track_running_stats=True, dtype=torch.float64).eval()
        model.running_var.fill_(1e-6 + 1e-22)
        x = x.reshape(8, 64, 1).expand(8, 64, 3).contiguous()
    else:
        model = torch.nn.BatchNorm1d(64, dtype=torch.float64).eval()
        model.running_var.fill_(1e-6 + 1e-22)
    with torch.no_grad():
        model.weight.copy_(weight)
        model.bias.copy_(bias)
    program = assert_matches_eager(model, (x,), dynamic_shapes=({0: "batch"},), rtol=1e-15, atol=1e-15)
    assert _narrowed(program) == []


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_alpha_from_a_dynamic_size(dtype):
    # A size as alpha is a graph value (int64, or double when computed in floats): it is cast to
    # the tensor's type, not multiplied as it is (an invalid Mul of float and int64).
    def fn(x, y):
        return torch.add(x, y, alpha=x.shape[0]), torch.sub(x, y, alpha=x.shape[0] * 0.1)

    x, y = torch.randn(3, 4, dtype=dtype), torch.randn(4, dtype=dtype)
    program = assert_matches_eager(
        fn, (x, y), dynamic_shapes=({0: "n"}, None), more_inputs=[((torch.randn(7, 4, dtype=dtype), y), {})], rtol=1e-6, atol=1e-6,
    )
    onnx.checker.check_model(program.model_proto, full_check=True)


@pytest.mark.parametrize("running_stats", [False, True])
def test_float64_batch_statistics_keep_eps_and_momentum_double(running_stats):
    # Batch statistics (no running ones, or training) added eps, and updated the running ones
    # with momentum, through float32 constants: 4.3e-9 off, running_var 2.6e-8 relatively.
    torch.manual_seed(0)
    x = torch.randn(4, 3, dtype=torch.float64) * 1e-3
    model = torch.nn.BatchNorm1d(3, dtype=torch.float64, momentum=0.3, track_running_stats=running_stats)
    model = model.train() if running_stats else model.eval()
    program = torch_onnx_fx.export(copy.deepcopy(model), (x,), verbose=False, state_outputs=True)
    actual, expected = program(x), model(x)
    state = ProgramSignature.of(program.exported_program).state_updates
    assert len(actual) == 1 + len(state) and len(state) == (3 if running_stats else 0)
    torch.testing.assert_close(actual[0], expected, rtol=1e-14, atol=1e-15)
    if running_stats:
        updates = {entry.target: value for entry, value in zip(state, actual[1:])}
        torch.testing.assert_close(updates["running_mean"], model.running_mean, rtol=1e-15, atol=1e-18)
        torch.testing.assert_close(updates["running_var"], model.running_var, rtol=1e-15, atol=0)


_F64 = torch.Generator().manual_seed(2)


def _f64(*shape):
    return torch.randn(*shape, dtype=torch.float64, generator=_F64)


# beta * self + alpha * product: torchlib's float32 numbers scaled float64 results by
# 0.69999998807907 for 0.7 (4e-8 relatively off, as torch.onnx).
SCALED_PRODUCTS = {
    "addmm": (torch.addmm, (_f64(5), _f64(4, 7), _f64(7, 5))),
    "addmv": (torch.addmv, (_f64(4), _f64(4, 7), _f64(7))),
    "addbmm": (torch.addbmm, (_f64(1, 5), _f64(3, 4, 7), _f64(3, 7, 5))),
    "baddbmm": (torch.baddbmm, (_f64(3, 4, 5), _f64(3, 4, 7), _f64(3, 7, 5))),
    "addr": (torch.addr, (_f64(4, 5), _f64(4), _f64(5))),
}


@pytest.mark.parametrize("beta, alpha", [(0.3, 0.7), (0, 0.1), (0.1, 0), (2, -3)])
@pytest.mark.parametrize("name", sorted(SCALED_PRODUCTS))
def test_float64_scaled_products_keep_beta_and_alpha_double(name, beta, alpha):
    function, args = SCALED_PRODUCTS[name]
    # Summation order differs from BLAS's by a few ulps of the largest term.
    assert_matches_eager(lambda s, a, b: function(s, a, b, beta=beta, alpha=alpha), args, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("name", sorted(SCALED_PRODUCTS))
def test_float64_scaled_products_zero_numbers_as_aten(name):
    # beta=0 ignores a NaN self; alpha=0 skips an infinite product in addmm, addmv and addbmm
    # (BLAS does not read the matrices) and multiplies it (NaN) in baddbmm and addr.
    function, (self, a, b) = SCALED_PRODUCTS[name]
    nan_self, inf_a = torch.full_like(self, NAN), a.clone()
    inf_a.view(-1)[0] = INF
    assert_matches_eager(
        lambda s, n, a, i, b: (function(n, a, b, beta=0, alpha=0.5), function(s, i, b, beta=0.5, alpha=0)),
        (self, nan_self, a, inf_a, b), rtol=1e-12, atol=1e-14,
    )


@pytest.mark.parametrize("recurrence", ["lstm", "lstm_projected", "gru"])
def test_float64_recurrences_run_in_float64(recurrence):
    # ONNX Runtime has no float64 LSTM or GRU kernel: the exported model failed when run. torch's
    # decomposition writes the steps out in float64 products for a static sequence length.
    torch.manual_seed(0)
    make = {
        "lstm": lambda: torch.nn.LSTM(4, 5, num_layers=2, bidirectional=True, dtype=torch.float64),
        "lstm_projected": lambda: torch.nn.LSTM(4, 5, proj_size=3, batch_first=True, dtype=torch.float64),
        "gru": lambda: torch.nn.GRU(4, 5, num_layers=2, dtype=torch.float64),
    }[recurrence]
    module = make().eval()

    def run(x):
        output, state = module(x)
        return (output, *state) if isinstance(state, tuple) else (output, state)

    assert_matches_eager(run, (torch.randn(6, 2, 4, dtype=torch.float64),), rtol=1e-13, atol=1e-15)


def test_float64_recurrence_over_a_dynamic_sequence_is_refused_with_the_reason():
    module = torch.nn.GRU(4, 5, dtype=torch.float64).eval()
    with pytest.raises(TranslationError, match="float64 LSTM/GRU over a sequence of dynamic length"):
        torch_onnx_fx.export(lambda x: module(x)[0], (torch.randn(6, 2, 4, dtype=torch.float64),), dynamic_shapes=({0: torch.export.Dim("time")},), verbose=False)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_fold_of_float64_and_unbatched_columns(dtype):
    # ONNX Runtime has no float64 Col2Im (the model did not load), and torchlib's Col2Im takes
    # batched columns only (an unbatched fold was an invalid model); torch.onnx fails both.
    x = torch.randn(2, 3, 8, 8, generator=torch.Generator().manual_seed(0)).to(dtype)
    columns = torch.nn.functional.unfold(x, 3, padding=1, stride=2)
    assert_matches_eager(
        lambda c: (torch.nn.functional.fold(c, (8, 8), 3, padding=1, stride=2), torch.nn.functional.fold(c[0], (8, 8), 3, padding=1, stride=2)),
        (columns,), rtol=0, atol=0,
    )
