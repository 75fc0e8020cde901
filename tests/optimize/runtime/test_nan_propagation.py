"""optimize/runtime/nan_propagation.py and the order statistics: a NaN wins a max or a min, as in ATen.

ONNX Runtime's ReduceMax, ReduceMin, ArgMax, ArgMin and MaxPool skip NaN: amax([1, nan, 2]) was 2,
argmax the 2's index, a pooling window with a NaN its largest number; median picked a number,
cummax's index was -1. Every case here failed before.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import torch_onnx_fx
from helpers import assert_matches_eager

NAN = float("nan")
X = torch.tensor([[1.0, NAN, 2.0, NAN], [NAN, 1.0, NAN, -1.0], [0.0, 1.0, 2.0, 3.0], [3.0, 2.0, 1.0, 5.0]])
FLOATS = [torch.float32, torch.float64, torch.float16, torch.bfloat16]


@pytest.mark.parametrize("dtype", FLOATS)
def test_reductions_and_their_indices(dtype):
    def model(x):
        return (
            torch.amax(x, 1), torch.amin(x, 0), *torch.max(x, 1), *torch.min(x, 0, keepdim=True), torch.max(x), torch.min(x),
            torch.argmax(x, 1), torch.argmin(x, 0), torch.argmax(x), *torch.aminmax(x, dim=1),
            torch.linalg.vector_norm(x, float("inf"), dim=1),
        )

    assert_matches_eager(model, (X.to(dtype),), rtol=0, atol=0)


@pytest.mark.parametrize("dtype", FLOATS)
def test_max_pooling_values_and_indices(dtype):
    x = X.to(dtype)[None, None]

    def model(x):
        return (
            F.max_pool2d(x, 2), F.max_pool1d(x[0], 2),
            *F.max_pool2d(x, 2, stride=1, padding=1, return_indices=True),  # windows with two NaNs: the last one's index
            *F.max_pool2d(x.expand(2, 3, 4, 4), 3, stride=2, ceil_mode=True, return_indices=True),
        )

    assert_matches_eager(model, (x,), rtol=0, atol=0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16])
def test_median_and_running_extremes(dtype):
    def model(x):
        return (*torch.median(x, 1), *torch.median(x, 0, keepdim=True), torch.median(x), *torch.cummax(x, 1), *torch.cummin(x, 0))

    assert_matches_eager(model, (X.to(dtype),), rtol=0, atol=0)


def test_without_nan_nothing_changes():
    x = torch.randn(3, 5)
    assert_matches_eager(lambda x: (torch.amax(x, 1), torch.argmin(x, 0), F.max_pool1d(x[None], 2), torch.median(x, 1)), (x,), rtol=0, atol=0)
    assert_matches_eager(lambda x: (torch.amax(x, 1), torch.argmax(x, 0)), (torch.randint(-5, 5, (3, 4)),), rtol=0, atol=0)


@pytest.mark.parametrize("dtype", FLOATS)
def test_scatter_and_index_reductions_of_extremes(dtype):
    # A slot that held or received a NaN is NaN in ATen; ONNX Runtime's scatter kept a number.
    x = torch.tensor([1.0, NAN, 3.0, 4.0], dtype=dtype)
    source = torch.tensor([NAN, 0.5, 7.0, -2.0], dtype=dtype)
    index = torch.tensor([0, 0, 2, 3])

    def model(x, source):
        return (
            x.index_reduce(0, index, source, "amin"), x.index_reduce(0, index, source, "amax", include_self=False),
            x.scatter_reduce(0, index, source, "amax"), x.scatter_reduce(0, index, source, "amin", include_self=False),
        )

    assert_matches_eager(model, (x, source), rtol=0, atol=0)


class _ScatterIntoFixedBases(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("base", torch.zeros(3, 4))

    def forward(self, x, index):
        made = torch.full((3, 4), -1e9).scatter_reduce(0, index, x, "amax")
        return made, self.base.scatter_reduce(0, index, x, "amin")


def test_scatter_into_a_constant_without_nan_flags_only_the_sources():
    # A base made in the model (torch.full) cannot hold a NaN: only the sources' NaN mask is
    # scattered. A buffer can, once apply_weights replaces it: its mask stays.
    x = torch.tensor([[1.0, NAN, 3.0, 4.0], [2.0, 0.5, NAN, -1.0]])
    index = torch.tensor([[0, 0, 2, 1], [2, 1, 2, 1]])
    model = _ScatterIntoFixedBases()
    program = assert_matches_eager(model, (x, index), rtol=0, atol=0)
    masked = [n.inputs[0].name for n in program.model.graph if n.op_type == "IsNaN"]
    assert sorted(masked) == ["base", "x"], masked
    model.base[1, 2] = NAN
    program.apply_weights({"base": model.base})
    for ours, eager in zip(program(x, index), model(x, index)):
        torch.testing.assert_close(ours, eager, rtol=0, atol=0, equal_nan=True)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_adaptive_pooling_of_uneven_bins_with_nan_and_inf(dtype):
    # Bins of 7 into 3 overlap and differ in size: a short bin's padding (its last element
    # repeated, weighted 0) made an inf into NaN for the mean, and the max's index was the first
    # NaN where ATen's scan keeps the last.
    x = torch.arange(2 * 7 * 7, dtype=dtype).reshape(1, 2, 7, 7)
    x[0, 0, 2, 2] = x[0, 0, 3, 3] = NAN
    x[0, 1, 6, 6] = float("inf")
    x[0, 1, 0, 1] = NAN

    def model(x):
        return (*F.adaptive_max_pool2d(x, 3, return_indices=True), F.adaptive_avg_pool2d(x, 3), F.adaptive_avg_pool1d(x[0], 3))

    assert_matches_eager(model, (x,), rtol=1e-6, atol=0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_scatter_extremes_without_self_ignore_a_nan_of_self_where_sources_land(dtype):
    # torchlib put float32's lowest value in the touched slots with a min-scatter, relying on
    # ONNX Runtime skipping self's NaN there: with NaN propagated that slot came out NaN.
    x = torch.tensor([[NAN, 1.7, NAN, -0.7, -float("inf")]], dtype=dtype)
    source = torch.tensor([[-0.2, -1.1, -0.8, 0.97, 0.2]], dtype=dtype)
    index = torch.tensor([[4, 4, 3, 2, 1]])

    def model(x, source):
        return (
            x.scatter_reduce(1, index, source, "amax", include_self=False),
            x.scatter_reduce(1, index, source, "amin", include_self=False),
            x.scatter_reduce(1, index, source, "amax"),
            (x * 0 - 1e300).scatter_reduce(1, index, source * 1e300, "amax", include_self=False),
        )

    assert_matches_eager(model, (x, source), rtol=0, atol=0)


@pytest.mark.parametrize("opset", [18, 20])
def test_float32_max_pooling_keeps_nan_inf_and_signed_zeros(opset):
    """float32 value-only pools carry NaN through a Sign average rather than a mask: every window
    shape (padding, ceil mode, dilation, 1-D to 3-D) keeps NaN, both infinities and -0 as eager."""
    torch.manual_seed(0)
    x = torch.randn(2, 3, 7, 9) * 1e30
    x[0, 0, 1, 2] = NAN
    x[0, 1, 3:5, 3:6] = float("inf")
    x[1, 2, :, 4] = -float("inf")
    x[1, 0] = -0.0
    x[1, 1, 5, 8] = NAN

    def model(x):
        return (
            F.max_pool2d(x, 2), F.max_pool2d(x, 3, stride=2, padding=1, ceil_mode=True),
            F.max_pool2d(x, 2, stride=1, dilation=2, padding=1), F.max_pool1d(x[0], 3, stride=2, ceil_mode=True),
            F.max_pool3d(x[None], (2, 3, 2), stride=(1, 2, 2), padding=(1, 1, 0)), F.max_pool2d(-x.abs(), 2),
        )

    program = torch_onnx_fx.export(model, (x,), opset_version=opset)
    # Below opset 19 AveragePool has no dilations: the dilated pool keeps the mask.
    assert sum(n.op_type == "Sign" for n in program.model.graph) == (6 if opset >= 19 else 5)
    for actual, expected in zip(program(x), model(x), strict=True):
        torch.testing.assert_close(actual, expected, rtol=0, atol=0, equal_nan=True)
        assert torch.equal(actual.signbit(), expected.signbit())


def test_pooling_of_dequantized_integers_needs_no_guard():
    # (q - zero point) * scale is never NaN: a quantized model's max pooling is left bare, so
    # ONNX Runtime can pool the integers between DequantizeLinear and QuantizeLinear.
    import torch.ao.quantization.fx._decomposed  # noqa: F401 - defines torch.ops.quantized_decomposed

    qd = torch.ops.quantized_decomposed

    def model(x, y):
        q = qd.quantize_per_tensor.default(x, 0.05, 3, 0, 255, torch.uint8)
        pooled = F.max_pool2d(qd.dequantize_per_tensor.default(q, 0.05, 3, 0, 255, torch.uint8), 3, 2, 1)
        return qd.quantize_per_tensor.default(pooled, 0.05, 3, 0, 255, torch.uint8), F.max_pool2d(y, 2)

    y = X[None, None].clone()  # a float input keeps its guard
    program = assert_matches_eager(model, (torch.randn(1, 2, 9, 9) * 4, y), rtol=0, atol=0)
    nodes = list(program.model.graph)
    guarded = [n for n in nodes if n.op_type in ("IsNaN", "Sign")]
    assert len(guarded) == 1 and guarded[0].inputs[0].name == "y", [n.op_type for n in nodes]


class _PoolDequantizedByAScaleBuffer(torch.nn.Module):
    """PT2E's frozen weight form: int8 data, scales and zero points all buffers."""

    def __init__(self):
        super().__init__()
        self.register_buffer("scale", torch.tensor([0.05, 0.1]))
        self.register_buffer("zero_point", torch.zeros(2, dtype=torch.int64))
        self.register_buffer("weight", torch.randint(-128, 128, (2, 1, 4, 4), dtype=torch.int8))

    def forward(self, x):
        w = torch.ops.quantized_decomposed.dequantize_per_channel.default(self.weight, self.scale, self.zero_point, 0, -128, 127, torch.int8)
        return F.max_pool2d(w, 2) + x


def test_pooling_of_integers_dequantized_by_model_state_keeps_its_guard():
    # A scale that is a buffer is finite at export, but apply_weights can make it anything: the
    # pooling after it keeps ATen's NaN rule.
    import torch.ao.quantization.fx._decomposed  # noqa: F401 - defines torch.ops.quantized_decomposed

    model = _PoolDequantizedByAScaleBuffer()
    x = torch.randn(2, 1, 2, 2)
    program = assert_matches_eager(model, (x,), rtol=0, atol=0)
    assert "DequantizeLinear" in [n.op_type for n in program.model.graph]
    # An infinite scale: inf where the integer is not its zero point, NaN (0 * inf) where it is.
    model.weight[0, 0, 0, 0] = 0
    model.scale[0] = float("inf")
    program.apply_weights(model.state_dict())
    torch.testing.assert_close(program(x)[0], model(x), rtol=0, atol=0, equal_nan=True)


@pytest.mark.parametrize("opset", [13, 17])
def test_arg_reductions_below_opset_18(opset):
    # The pass runs after the graph is brought down to the requested opset: its ReduceMax took
    # the axes as an input, which ReduceMax has only from opset 18 (an invalid model before).
    def model(x):
        return torch.argmax(x, 1), torch.argmin(x, 0, keepdim=True), *torch.max(x, 1), F.adaptive_max_pool1d(x[None], 2)

    assert_matches_eager(model, (X,), rtol=0, atol=0, opset_version=opset)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_min_and_max_of_one_tensor_share_their_nan_flags(dtype):
    # A min and a max over the same elements (aminmax, every dynamic quantization's range) see
    # the same NaNs: one reduction of the NaN mask, not one each; and one mask for all.
    x = torch.randn(4, 6, dtype=dtype)
    x[1, 2] = float("nan")
    x[3] = float("nan")

    def ranges(x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        low, high = torch.aminmax(x)
        return low, high, x.amin(1), x.amax(1), x.amax(1, keepdim=True), x.amin(0)

    program = assert_matches_eager(ranges, (x,), more_inputs=[((torch.randn(4, 6, dtype=dtype),), {})])
    op_types = [node.op_type for node in program.model.graph]
    # Three maxima of the values, and one reduction of the mask per distinct set of elements
    # (all, rows, rows kept, columns).
    assert op_types.count("IsNaN") == 1 and op_types.count("ReduceMax") == 3 + 4, op_types
