"""Every dtype is exact or refused (issue 10): integer arithmetic over the whole range, ATen's
promotion of int/bool inputs to float functions, stable sorts, and dtypes ONNX Runtime has no
kernel for. Each case is a cause the operator sweep found, compared with eager PyTorch."""

from __future__ import annotations

import pytest
import torch

from helpers import assert_matches_eager

INTEGER_DTYPES = [torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8]


def _integers(dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    info = torch.iinfo(dtype)
    a = torch.tensor([info.max, info.min + 1, 7, -7, 16777217, 0, 9, info.max - 1])
    b = torch.tensor([1, 3, 2, 2, 1, 5, -2, -3])
    if not info.min:  # unsigned: no negative operands
        a, b = a.abs(), b.abs()
    return a.clamp(info.min, info.max).to(dtype), b.to(dtype)


@pytest.mark.parametrize("dtype", INTEGER_DTYPES, ids=str)
@pytest.mark.parametrize("mode", ["trunc", "floor"])
def test_integer_division_is_exact_over_the_whole_range(dtype, mode):
    # torchlib divides through float32: 16777217 // 1 gave 16777216, int64 max was off by far more.
    a, b = _integers(dtype)
    assert_matches_eager(lambda a, b: torch.div(a, b, rounding_mode=mode), (a, b), rtol=0, atol=0)
    assert_matches_eager(lambda a: torch.div(a, -3 if a.is_signed() else 3, rounding_mode=mode), (a,), rtol=0, atol=0)


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.int8, torch.bool], ids=str)
@pytest.mark.parametrize("name", ["exp", "cos", "atan", "log2", "sigmoid", "rad2deg", "rsqrt", "erf"])
def test_float_functions_promote_integer_and_bool_inputs(dtype, name):
    function = getattr(torch, name)
    x = torch.tensor([0, 1, 2, 3, 1]).to(dtype)
    assert_matches_eager(lambda x: function(x), (x,))


def test_logsumexp_of_integers_is_computed_in_float():
    assert_matches_eager(lambda x: torch.logsumexp(x, 0), (torch.tensor([1, 2, 3]),))


@pytest.mark.parametrize("descending", [False, True])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.int64, torch.int8, torch.bool], ids=str)
def test_stable_sort_keeps_ties_in_order_and_nan_last(descending, dtype):
    values = torch.tensor([[3.0, float("nan"), 1.0, 3.0, float("-inf"), float("nan"), 1.0, float("inf")]])
    x = values.to(dtype) if dtype.is_floating_point else values.nan_to_num(5.0, 9.0, -9.0).to(dtype)
    assert_matches_eager(lambda x: torch.sort(x, stable=True, descending=descending), (x,), rtol=0, atol=0)
    assert_matches_eager(lambda x: torch.argsort(x, stable=True, descending=descending), (x,), rtol=0, atol=0)


def test_bfloat16_linear_runs_in_onnx_runtime():
    torch.manual_seed(0)
    model = torch.nn.Linear(8, 4).to(torch.bfloat16).eval()
    # The product is computed in float32 and rounded to bfloat16 once: bfloat16 precision.
    assert_matches_eager(model, (torch.randn(3, 8, dtype=torch.bfloat16),), rtol=2e-2, atol=2e-2)


@pytest.mark.parametrize("dtype", [torch.int16, torch.int8, torch.uint8], ids=str)
def test_narrow_integer_arithmetic_wraps_as_aten_does(dtype):
    a, b = _integers(dtype)
    fn = lambda a, b: (a * b + a - 3, torch.maximum(a, b), a.sum(dtype=dtype), a.abs())  # noqa: E731
    assert_matches_eager(fn, (a, b), rtol=0, atol=0)


def test_float64_trigonometry_keeps_float64_precision():
    # ONNX Runtime has float32 kernels only for these: they are rewritten, not run in float32.
    torch.manual_seed(0)
    x = torch.randn(64, dtype=torch.float64)
    fn = lambda x: (torch.atan(x), torch.asin(x / 4), torch.acos(x / 4), torch.tan(x), torch.sinh(x), torch.cosh(x))  # noqa: E731
    assert_matches_eager(fn, (x,), rtol=1e-12, atol=1e-14)


def test_float64_inverse_functions_at_the_edges_of_their_domains():
    # Found by tools/sweeps/tails.py against mpmath: acos as pi/2 - asin cancelled near 1 (5e-9
    # off relatively at 1 - 2^-53); acosh below -1.3e154 was 0, not NaN (its product overflowed
    # to +inf); atanh was NaN at 1 and 1e14 ulps off near -1; asinh(-1.8e308) was -inf (2|x|).
    eps = 2.0**-53
    x = torch.tensor([1 - eps, 1 - 4 * eps, -1 + 2 * eps, 0.999, -0.5, 1e-300, 1.0, -1.0, 0.0, -1e-20], dtype=torch.float64)
    big = torch.tensor([-1e154, -1.3e154, -1.8e308, 1.8e308, 1e151, 1 + 2 * eps, 2.0, 0.5, -3.0], dtype=torch.float64)
    inverse = lambda x, big: (torch.acos(x), torch.asin(x), torch.atanh(x), torch.acosh(big), torch.asinh(big))  # noqa: E731
    assert_matches_eager(inverse, (x, big), rtol=1e-15, atol=0)


@pytest.mark.parametrize("dtype", [torch.bool, torch.int8, torch.uint8, torch.int64], ids=str)
def test_cummax_cummin_fill_with_the_dtypes_own_extremes(dtype):
    # int64's extremes wrapped to 0 in int8, and bool's cummax started from True.
    x = (torch.tensor([[3, -5, 7, 1], [-2, 0, -9, 4]]) % (2 if dtype == torch.bool else 256)).to(dtype)
    if dtype.is_signed:
        x = x - 100 if dtype == torch.int8 else x
    assert_matches_eager(lambda x: (torch.cummax(x, 1), torch.cummin(x, 1)), (x,), rtol=0, atol=0)


def test_bool_sort_and_sum_with_dtype():
    x = torch.tensor([True, False, True, False, False])
    assert_matches_eager(lambda x: torch.sort(x, stable=True).values, (x,), rtol=0, atol=0)
    # sum(mask, dtype=float) sums in float (a bool ReduceSum collapsed it to 1 under the kernel pass).
    assert_matches_eager(lambda x: x.sum(dtype=torch.float32), (x,))


@pytest.mark.parametrize("dtype", [torch.int64, torch.bool], ids=str)
def test_xlogy_and_angle_of_integers_are_float(dtype):
    x = torch.tensor([0, 1, 2, -3]).to(dtype)
    assert_matches_eager(lambda x: (torch.xlogy(x, x.abs() + 1 if dtype != torch.bool else x), torch.angle(x)), (x,))


def test_float16_norm_accumulates_in_float32_like_aten():
    # The squares of 400 values of ~3 sum past float16's 65504: computed in float16 that is inf.
    torch.manual_seed(0)
    x = (torch.randn(400) * 20).half()
    assert_matches_eager(lambda x, y: (torch.dist(x, y), torch.linalg.vector_norm(x), x.sum()), (x, x.flip(0)), rtol=1e-2, atol=1e-2)


def test_bfloat16_matmul_and_conv_accumulate_in_float32():
    torch.manual_seed(0)
    conv = torch.nn.Conv2d(3, 4, 3).to(torch.bfloat16).eval()
    x = torch.randn(1, 3, 8, 8, dtype=torch.bfloat16)
    assert_matches_eager(lambda x: (conv(x), x.flatten(1) @ x.flatten(1).T), (x,), rtol=2e-2, atol=5e-2)


@pytest.mark.parametrize("shape", [(0,), (3, 0), (), (2, 3)], ids=str)
def test_any_all_of_empty_and_nonempty_tensors(shape):
    torch.manual_seed(0)
    x = torch.randint(-1, 2, shape).float()
    fn = lambda x: (x.any(), x.all(), x.bool().any(-1) if x.dim() else x.any(), x.all(0, keepdim=True) if x.dim() else x.all())  # noqa: E731
    assert_matches_eager(fn, (x,), rtol=0, atol=0)


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8], ids=str)
def test_integer_linear_relu_and_rounding_run_exactly(dtype):
    # ONNX Runtime has float-only Gemm/Relu/Floor kernels; integer forms are rewritten exactly.
    torch.manual_seed(0)
    a, w, b = torch.randint(-5, 5, (3, 4)), torch.randint(-5, 5, (2, 4)), torch.randint(-5, 5, (2,))
    args = (a.to(dtype), w.to(dtype), b.to(dtype))
    fn = lambda a, w, b: (torch.nn.functional.linear(a, w, b), torch.addmm(b, a, w.T), torch.relu(a), torch.floor(a), torch.round(a))  # noqa: E731
    assert_matches_eager(fn, args, rtol=0, atol=0)


@pytest.mark.parametrize("dtype", [torch.bool, torch.int64, torch.float32], ids=str)
def test_matrix_transposes_and_clamps_of_every_dtype(dtype):
    # torchlib has only complex forms of mT/mH: real nodes now have their own translation.
    x = (torch.arange(24).reshape(2, 3, 4) % 3).to(dtype)
    fn = lambda x: (x.mT, x.mH, x.adjoint(), torch.clamp_min(x, x[0, 0, 1]), torch.clamp_max(x, x[0, 0, 1]))  # noqa: E731
    assert_matches_eager(fn, (x,), rtol=0, atol=0)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.int64], ids=str)
def test_static_linspace_in_every_dtype(dtype):
    # The constant went through numpy, which has no bfloat16.
    assert_matches_eager(lambda x: torch.linspace(-2.0, 3, 7, dtype=dtype) + x, (torch.zeros(7, dtype=dtype),), rtol=0, atol=0)


@pytest.mark.parametrize("mode", ["bilinear", "bicubic"])
@pytest.mark.parametrize("antialias", [False, True])
def test_integer_image_interpolation_is_refused_not_approximated(mode, antialias):
    """ATen interpolates uint8 images in fixed point; Resize differs by one in many pixels, so the
    export refuses (naming the operator, the dtype and the line) instead of shipping them."""
    import torch_onnx_fx
    from torch_onnx_fx.errors import TranslationError

    image = torch.randint(0, 256, (1, 3, 5, 6), dtype=torch.uint8)

    class Resize(torch.nn.Module):
        def forward(self, x):
            return torch.nn.functional.interpolate(x, size=(7, 9), mode=mode, antialias=antialias)

    resize = Resize()
    with pytest.raises(TranslationError, match=r"uint8\[1, 3, 5, 6\].*fixed point(.|\n)*test_dtypes.py"):
        torch_onnx_fx.export(resize, (image,), verbose=False)
    # The same image in float, and nearest on integers, export exactly.
    assert_matches_eager(resize, (image.float(),), rtol=1e-4, atol=1e-4)
    assert_matches_eager(lambda x: torch.nn.functional.interpolate(x, size=(7, 9), mode="nearest"), (image,), rtol=0, atol=0)


@pytest.mark.parametrize("dtype", [torch.uint8, torch.int8], ids=str)
def test_python_ints_outside_the_range_wrap_as_aten_converts_them(dtype):
    # uint8 == -1 compares with 255 in ATen; torchlib refused "-1 as uint8" (index_add with
    # alpha=-1 and cosine_embedding_loss on uint8 targets failed to export).
    info = torch.iinfo(dtype)
    x = torch.tensor([0, 1, info.max, info.min], dtype=dtype)

    def model(x, index, source):
        return torch.eq(x, -1), x * -1, x + 300, torch.lt(x, -1), x.index_add(0, index, source, alpha=-1)

    assert_matches_eager(model, (x, torch.tensor([0, 2]), torch.tensor([3, 5], dtype=dtype)), rtol=0, atol=0)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
def test_reducing_scatters_of_half_floats_run(dtype):
    """ONNX Runtime registers ScatterElements/ScatterND for float16/bfloat16 but fails at run time
    when they reduce; they are computed in float32 and rounded once."""

    def model(x, index, source):
        return x.scatter_reduce(0, index, source, "mean"), x.scatter_add(0, index, source), x.index_add(0, index, source)

    args = (torch.randn(5, dtype=dtype), torch.tensor([0, 0, 3]), torch.randn(3, dtype=dtype))
    # bfloat16 index_add in eager rounds after each addition, float32 once at the end: 1 ulp.
    assert_matches_eager(model, args, rtol=1e-2, atol=1e-2)


_BFLOAT16_CASES = {
    "hstack": (lambda a, b: torch.hstack([a, b]), lambda: (torch.randn(2, 3), torch.randn(2, 1))),
    "vstack": (lambda a, b: torch.vstack([a, b]), lambda: (torch.randn(3), torch.randn(2, 3))),
    "dstack": (lambda a, b: torch.dstack([a, b]), lambda: (torch.randn(3), torch.randn(1, 3))),
    "column_stack": (lambda a, b: torch.column_stack([a, b]), lambda: (torch.randn(3), torch.randn(3, 2))),
    "nll_loss": (lambda a, b: torch.nn.functional.nll_loss(a, b), lambda: (torch.randn(3, 4), torch.tensor([0, 1, 3]))),
    "masked_select": (lambda a, b: torch.masked_select(a, b), lambda: (torch.randn(4), torch.tensor([True, False, True, True]))),
    "atan2": (lambda a, b: torch.atan2(a, b), lambda: (torch.randn(5), torch.randn(5))),
}


@pytest.mark.parametrize("name", sorted(_BFLOAT16_CASES))
def test_bfloat16_graphs_are_valid_onnx_and_run(name):
    """Types outside an operator's schema (Compress, NegativeLogLikelihoodLoss, sequences of
    bfloat16) are invalid ONNX even where ONNX Runtime has a kernel: widened, or built without
    sequences; an untyped IsNaN result no longer hid a bfloat16 Where from the kernel check."""
    import onnx

    function, make = _BFLOAT16_CASES[name]
    args = tuple(a.to(torch.bfloat16) if a.is_floating_point() else a for a in make())
    program = assert_matches_eager(function, args, rtol=1e-2, atol=1e-2)
    onnx.checker.check_model(program.model_proto, full_check=True)


@pytest.mark.parametrize("dtype", [torch.uint8, torch.int8, torch.int64], ids=str)
def test_integer_addmm_with_integer_scales_is_valid_and_exact(dtype):
    # ONNX's Gemm takes no integers: MatMul, then the integer alpha/beta as exact products.
    import onnx

    args = (torch.randint(0, 5, (3, 4), dtype=dtype), torch.randint(0, 5, (3, 2), dtype=dtype), torch.randint(0, 5, (2, 4), dtype=dtype))
    program = assert_matches_eager(lambda c, a, b: torch.addmm(c, a, b, beta=2, alpha=3), args, rtol=0, atol=0)
    onnx.checker.check_model(program.model_proto, full_check=True)


def test_bfloat16_embedding_bag_is_valid_onnx():
    # Sequence values stay untyped by the kernel-gap pass (a sequence typed as a tensor is invalid).
    import onnx

    for mode in ("sum", "mean", "max"):
        args = (torch.randn(5, 4, dtype=torch.bfloat16), torch.tensor([0, 2, 1, 3, 4]), torch.tensor([0, 2]))
        program = assert_matches_eager(
            lambda w, i, o: torch.nn.functional.embedding_bag(i, w, o, mode=mode), args, rtol=1e-2, atol=1e-2
        )
        onnx.checker.check_model(program.model_proto, full_check=True)


@pytest.mark.parametrize("tolerances", [{}, {"atol": 1}, {"rtol": 1}, {"rtol": 0.5, "atol": 0.5}], ids=str)
def test_bool_isclose_and_addr_are_valid_and_exact(tolerances):
    """ATen compares bools as 0/1 (atol=1 makes True and False close) and forms addr logically;
    torchlib subtracted and multiplied bools (invalid ONNX)."""
    import onnx

    a, b = torch.tensor([True, False, True, False]), torch.tensor([True, True, False, False])
    program = assert_matches_eager(lambda a, b: torch.isclose(a, b, **tolerances), (a, b), rtol=0, atol=0)
    onnx.checker.check_model(program.model_proto, full_check=True)
    scales = {"beta": int(tolerances.get("atol", 1)), "alpha": int(tolerances.get("rtol", 1))}
    matrix = torch.tensor([[True, False], [False, False]])
    program = assert_matches_eager(lambda m, x, y: torch.addr(m, x, y, **scales), (matrix, a[:2], b[:2]), rtol=0, atol=0)
    onnx.checker.check_model(program.model_proto, full_check=True)


@pytest.mark.parametrize("case", ["conv", "avg_pool", "max_pool_int32", "max_pool_uint8"])
def test_integer_windows_export_exactly(case):
    """Integer convolutions and pooling, once refused for want of an ONNX form, are computed in
    integer arithmetic (ops/integer_windows.py); 8-bit max pooling is ONNX's own MaxPool."""
    image = torch.randint(0, 9, (1, 1, 4, 4))
    functions = {
        "conv": (lambda x, w: torch.nn.functional.conv2d(x, w), (image, torch.randint(0, 9, (1, 1, 2, 2)))),
        "avg_pool": (lambda x: torch.nn.functional.avg_pool2d(x, 2), (image,)),
        "max_pool_int32": (lambda x: torch.nn.functional.max_pool2d(x, 2), (image.int(),)),
        "max_pool_uint8": (lambda x: torch.nn.functional.max_pool2d(x, 2), (image.to(torch.uint8),)),
    }
    function, args = functions[case]
    assert_matches_eager(function, args, rtol=0, atol=0)


@pytest.mark.parametrize(
    "name",
    ["clamp_float_bounds", "clamp_min_float", "clamp_max_float", "clamp_min_float_tensor", "clamp_mixed_integer_tensors"],
)
def test_clamp_bounds_promote_with_the_tensor(name):
    # An integer tensor clamped between floats is a float clamp in ATen; torchlib cast the bounds
    # to integers (clamp(x, 1.5, 3.5) gave 1.0 for 1.5) and clamped a uint8 tensor by an int32
    # one after wrapping the bounds to uint8.
    x = torch.tensor([-3, 0, 1, 2, 5])
    functions = {
        "clamp_float_bounds": (lambda x: torch.clamp(x, 1.5, 3.5), (x,)),
        "clamp_min_float": (lambda x: torch.clamp_min(x, 1.5), (x,)),
        "clamp_max_float": (lambda x: torch.clamp_max(x, -0.5), (x,)),
        "clamp_min_float_tensor": (lambda x, low: torch.clamp_min(x, low), (x, torch.tensor([1.5, -0.5, 0.5, 2.5, 4.5]))),
        "clamp_mixed_integer_tensors": (
            lambda x, low: torch.clamp(x, low, low + 100),
            (torch.tensor([0, 5, 200, 255], dtype=torch.uint8), torch.tensor([-20, 10, 300, 100], dtype=torch.int32)),
        ),
    }
    function, args = functions[name]
    assert_matches_eager(function, args, rtol=0, atol=0)


@pytest.mark.parametrize("name", ["log2", "log10", "deg2rad", "rad2deg", "sinc"])
def test_float64_constants_keep_float64_precision(name):
    # torchlib made ln 2, ln 10, pi/180, 180/pi and pi float32 constants cast to float64: log2(0.5)
    # was -0.99999999725 and deg2rad 7.8e-9 off relatively.
    function = getattr(torch, name)
    x = torch.cat([torch.tensor([0.5, 1.0, 2.5, 1e-300, 1e300]), torch.rand(64) * 10]).double()
    # (sinc(1) is 3.9e-17: an absolute bound for results that small.)
    assert_matches_eager(lambda t: function(t), (x,), rtol=1e-15, atol=1e-16)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
def test_powers_atens_cpu_kernel_special_cases(dtype):
    # ATen computes x ** 0.5 as sqrt (NaN at -inf, where C's pow gives inf), x ** -0.5 as 1 / sqrt
    # (-inf at -0.0) and x ** -2 as 1 / (x * x): Pow rounded differently in 133-163 of 612 values.
    torch.manual_seed(0)
    x = torch.cat([torch.tensor([0.0, -0.0, 0.5, -1.0, 1e-30, 1e30, float("inf"), float("-inf"), float("nan")]), torch.randn(200) * 10]).to(dtype)
    for exponent in (0.5, -0.5, -1.0, 2.0, 3.0, -2.0):
        # Infinities, signed zeros' reciprocals and NaN where eager has them; values to an ulp.
        assert_matches_eager(lambda t: t ** exponent, (x,), rtol=2e-7 if dtype == torch.float32 else 4e-16, atol=0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
def test_sigmoid_and_silu_keep_their_relative_precision(dtype):
    # ONNX Runtime's Sigmoid is accurate to about 3e-8 absolutely: float32 sigmoid(-16) came out
    # 5.96e-8 for 1.13e-7 and 0 below -19 (log(sigmoid(x)) -inf), silu(-17.8) -1.06e-6 for
    # -3.3e-7; float64 returned 0 for sigmoid(-40) (4.2e-18) and was 3.6e-8 off relatively at -20.
    # ATen's 1 / (1 + exp(-x)) instead: within an ulp or two of eager everywhere.
    torch.manual_seed(0)
    x = torch.cat([torch.tensor([0.0, -16.0, -17.8, -20.0, -30.0, -40.0, -80.0, -700.0, 40.0, float("inf"), float("-inf")]), torch.randn(100) * 20]).to(dtype)
    rtol = 3e-7 if dtype == torch.float32 else 1e-15
    assert_matches_eager(lambda t: (torch.sigmoid(t), torch.nn.functional.silu(t)), (x,), rtol=rtol, atol=0)
