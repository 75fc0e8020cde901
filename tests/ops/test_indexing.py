"""torch_onnx_fx/ops/indexing.py, histogram.py, grid_sample.py and losses.py, pdist (nn.py) and
the order statistics added to sorting.py (mode, nanmedian), each exported, run in ONNX Runtime
and compared with eager PyTorch.

Cases cover the reductions and flags of each operator, integer and 0-d inputs, empty inputs
where ATen accepts them, and dynamic sizes where the result's shape does not depend on values
(histogram and histogramdd have no fake kernel in torch, so torch.export cannot trace them with
dynamic sizes at all).
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir
import onnxruntime as ort
import pytest
import torch
import torch.nn.functional as F

import torch_onnx_fx
from helpers import assert_matches_eager

NAN = float("nan")


def _index_reduce_all(x, i, s):
    return tuple(x.index_reduce(1, i, s, r, include_self=inc) for r in ("mean", "prod", "amax", "amin") for inc in (True, False))


def _segment_all(data, lengths):
    return tuple(torch.segment_reduce(data, r, lengths=lengths, initial=init) for r in ("sum", "mean", "max", "min", "prod") for init in (None, 2.0))


def _segment_offsets_axis1(data, offsets):
    return tuple(torch.segment_reduce(data, r, offsets=offsets, axis=1) for r in ("sum", "mean", "max", "min", "prod"))


def _histograms(x, w):
    return (
        *torch.histogram(x, 4),
        *torch.histogram(x, 3, range=(-0.5, 0.5), weight=w, density=True),
        *torch.histogram(x, torch.tensor([-1.0, 0.0, 0.0, 0.5, 2.0]), weight=w),
        *torch.histogram(x[:1], 2),  # one value: edges widened by 0.5 either side
    )


def _histogramdds(x, w):
    first = torch.histogramdd(x, [3, 2], weight=w, density=True)
    second = torch.histogramdd(x, [2, 4], range=[-1.0, 1.0, -0.5, 0.5])
    third = torch.histogramdd(x, [torch.tensor([-2.0, 0.0, 2.0]), torch.tensor([-1.0, -0.2, 0.3, 1.0])], weight=w)
    return first.hist, *first.bin_edges, second.hist, *second.bin_edges, third.hist


def _chunked_linear_cross_entropy(x, w, t, b, cw):
    options = torch.nn.LinearCrossEntropyOptions(batch_chunk_size=2)
    return (
        F.linear_cross_entropy(x, w, t, options=options),
        F.linear_cross_entropy(x, w, t, linear_bias=b, weight=cw, reduction="sum", ignore_index=1, options=options),
        F.linear_cross_entropy(x, w, t, weight=cw, reduction="none", options=options),
        F.linear_cross_entropy(x[0], w, t[0], options=options),
    )


def _chunked_gradients(x, w, t, b, cw):
    # The precomputed gradients the op returns for its backward when asked for them.
    return torch.ops.torch_nn._linear_cross_entropy_batch_chunked(
        x, w, t, b, cw, "mean", -100, 0.0, 2, "compact", torch.float32, True, True, True, True
    )


CASES = {
 "index_reduce": (_index_reduce_all, lambda: (torch.randn(3, 5), torch.tensor([0, 4, 2, 0, 4, 4]), torch.randn(3, 6))),
 "index_reduce_int_mean_floors": (lambda x, i, s: (x.index_reduce(0, i, s, "mean"), x.index_reduce(0, i, s, "prod", include_self=False)), lambda: (torch.tensor([5, 7, -3]), torch.tensor([0, 0, 2, 1]), torch.tensor([2, 2, 0, 1]))),
 "index_reduce_0d": (lambda x, i, s: (x.index_reduce(0, i, s, "amax"), x.index_reduce(0, i, s, "mean", include_self=False)), lambda: (torch.tensor(1.5), torch.tensor([0]), torch.tensor(4.0))),
 "put": (lambda x, i, s: (x.put(i, s), x.put(i, s, accumulate=True), x.put(i[:0], s[:0])), lambda: (torch.randn(3, 4), torch.tensor([[0, -1], [5, 11]]), torch.randn(2, 2))),
 "put_bool_accumulate": (lambda x, i, s: x.put(i, s, accumulate=True), lambda: (torch.tensor([True, False, False]), torch.tensor([1, 1, 2]), torch.tensor([False, True, False]))),
 "scatter_reduce_modes": (lambda x, i, s: (x.scatter(0, i, s, reduce="add"), x.scatter(1, i.int(), s, reduce="multiply"), x.scatter(0, i, 2.5, reduce="multiply"), x.scatter(1, i, -1.0, reduce="add")), lambda: (torch.randn(4, 3), torch.tensor([[0, 1], [2, 0], [0, 2]]), torch.randn(3, 3))),
 "scatter_reduce_src_larger_than_index": (lambda x, i, s: (x.scatter_reduce(0, i, s, "sum"), x.scatter_reduce(1, i, s, "amax", include_self=False), x.scatter(0, i, s, reduce="multiply")), lambda: (torch.randn(4, 3), torch.tensor([[0, 1], [2, 0]]), torch.randn(3, 3))),
 "scatter_reduce_int_bool": (lambda x, b, i: (x.scatter(0, i, x[:2], reduce="add"), b.scatter(0, i, b[:2], reduce="multiply")), lambda: (torch.tensor([[1, 2], [3, 4], [5, 6]]), torch.tensor([[True, False], [True, True], [False, True]]), torch.tensor([[2, 2], [2, 0]]))),
 "segment_reduce_lengths": (_segment_all, lambda: (torch.randn(7), torch.tensor([2, 0, 4, 1]))),
 "segment_reduce_offsets_axis1": (_segment_offsets_axis1, lambda: (torch.randn(2, 6, 3), torch.tensor([[0, 2, 2, 6], [0, 1, 5, 6]]))),
 "histogram": (_histograms, lambda: (torch.tensor([-0.7, 0.1, 0.5, 0.5, -0.2, 1.2, 0.0, -2.0]), torch.rand(8))),
 "histogram_empty": (lambda x: (*torch.histogram(x, 3), *torch.histogram(x, torch.tensor([0.0, 1.0]))), lambda: (torch.zeros(0),)),
 "histogramdd": (_histogramdds, lambda: (torch.randn(6, 2), torch.rand(6))),
 "mode": (lambda x, i, b: (*torch.mode(x, 1), *torch.mode(x, 0, keepdim=True), *torch.mode(i), *torch.mode(b, 0), *torch.mode(x[0, 0])), lambda: (torch.tensor([[3.0, 1.0, 3.0, 1.0, 2.0], [2.0, 2.0, 5.0, 5.0, 5.0], [0.5, -1.0, 7.0, 0.5, 9.0]]), torch.tensor([[2, 1, 1, 2, 5, 5], [4, 4, 4, 0, 0, 0]]), torch.tensor([[True, False], [False, False], [True, False]]))),
 # A NaN among distinct numbers: ATen's mode is NaN when the row starts with it, else the
 # smallest number (the first version always said NaN).
 "mode_of_distinct_numbers_and_a_nan": (lambda x: torch.mode(x, 1), lambda: (torch.tensor([
     [NAN, 1.5, -2.0, 7.0, 0.25, 3.0], [1.5, NAN, -2.0, 7.0, 0.25, 3.0], [1.5, -2.0, 7.0, 0.25, 3.0, NAN],
     [0.5, 9.0, -1.0, NAN, -3.0, 2.0], [NAN, 2.0, 2.0, 1.0, 5.0, 6.0], [float("-inf"), NAN, 1.0, 2.0, 3.0, 4.0]]),)),
 "mode_with_nan": (lambda x: torch.mode(x, 1), lambda: (torch.tensor([[4.0, 4.0, 4.0, 4.0, NAN], [NAN, 1.0, 2.0, 5.0, 6.0], [NAN, NAN, 1.0, 3.0, 3.0], [NAN] * 5, [float("inf"), float("inf"), 1.0, 0.0, 0.0]]),)),
 "nanmedian": (lambda x, i: (*torch.nanmedian(x, 1), *torch.nanmedian(x, 0, keepdim=True), torch.nanmedian(x), torch.nanmedian(x[3]), *torch.nanmedian(i, 1), torch.nanmedian(i), torch.nanmedian(x[:0])), lambda: (torch.tensor([[NAN, NAN, NAN], [NAN, 3.0, NAN], [2.0, NAN, 1.0], [NAN, 1.0, 1.0], [4.0, 0.5, -2.0]]), torch.tensor([[3, 1, 2, 2], [0, -5, 7, 1]]))),
 "masked_median": (lambda x, m: torch.masked.median(x, 1, mask=m), lambda: (torch.randn(4, 5), torch.rand(4, 5) > 0.4)),
 "nonzero_static": (lambda x: (torch.nonzero_static(x, size=2), torch.nonzero_static(x, size=9, fill_value=7), torch.nonzero_static(x[0, 0], size=3), torch.nonzero_static(x.sum(), size=2)), lambda: (torch.tensor([[0.0, 1.0, 0.0], [2.0, 0.0, 3.0]]),)),
 "pdist": (lambda x: tuple(F.pdist(x, p) for p in (0.0, 1.0, 2.0, 3.5, float("inf"))) + (F.pdist(x[:1]),), lambda: (torch.randn(5, 3),)),
 "unbatched_cross_entropy": (lambda x, t, w: (F.cross_entropy(x, t), F.cross_entropy(x, t, weight=w, reduction="sum"), F.cross_entropy(x, t, reduction="none"), F.cross_entropy(x, torch.tensor(-100))), lambda: (torch.randn(4), torch.tensor(2), torch.rand(4))),
 "weighted_probability_cross_entropy": (lambda x, p, w: (F.cross_entropy(x, p, weight=w), F.cross_entropy(x, p, weight=w, reduction="none"), F.cross_entropy(x[0], p[0], weight=w, reduction="sum"), F.cross_entropy(x, p, label_smoothing=0.2)), lambda: (torch.randn(3, 4), torch.softmax(torch.randn(3, 4), 1), torch.rand(4))),
 "linear_cross_entropy_unbatched": (lambda x, w, t: F.linear_cross_entropy(x, w, t), lambda: (torch.randn(3), torch.randn(4, 3), torch.tensor(1))),
 "linear_cross_entropy_chunked": (_chunked_linear_cross_entropy, lambda: (torch.randn(5, 3), torch.randn(4, 3), torch.tensor([0, 1, 3, 1, 2]), torch.randn(4), torch.rand(4))),
 "linear_cross_entropy_chunked_gradients": (_chunked_gradients, lambda: (torch.randn(5, 3), torch.randn(4, 3), torch.tensor([0, -100, 3, 1, 2]), torch.randn(4), torch.rand(4))),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_operator_matches_eager(name):
    fn, make_args = CASES[name]
    assert_matches_eager(fn, make_args(), rtol=1e-3)


def test_mode_index_is_last_occurrence_of_smallest_most_frequent():
    # ATen's sort keeps the input order for up to 16 values, so eager is deterministic here.
    torch.manual_seed(0)
    x = torch.randint(0, 4, (20, 16)).float()
    assert_matches_eager(lambda x: torch.mode(x, 1), (x,))


@pytest.mark.parametrize("opset", [20, 18])
@pytest.mark.parametrize("interpolation", [0, 1])
def test_grid_sampler_3d(opset, interpolation):
    # Opset 20 has a 3-D GridSample; below it the translation gathers the neighbours itself.
    torch.manual_seed(0)
    x = torch.randn(2, 3, 4, 5, 6)
    grid = torch.rand(2, 3, 4, 2, 3) * 2.6 - 1.3

    def fn(x, grid):
        return tuple(
            torch.ops.aten.grid_sampler_3d(x, grid, interpolation, padding, align)
            for padding in (0, 1, 2)
            for align in (False, True)
        )

    assert_matches_eager(fn, (x, grid), opset_version=opset)


@pytest.mark.parametrize(
    "x, kwargs",
    [
        (torch.tensor([[2**62 + 3, -7, 5], [0, -1, 2**40]]), {}),
        (torch.tensor([[2**62 + 3, -7, 5], [0, -1, 2**40]]), {"dim": 1, "keepdim": True}),
        (torch.tensor([[-1, 2, 3], [4, -5, 6]], dtype=torch.int8), {"dim": 0}),
        (torch.tensor([True, False, True]), {}),
        (torch.tensor(-5, dtype=torch.int32), {}),
    ],
)
def test_hash_tensor_of_integers(x, kwargs):
    # Compared in ONNX Runtime directly: ONNXProgram cannot yet turn a uint64 output to torch.
    program = torch_onnx_fx.export(lambda x: torch.hash_tensor(x, **kwargs), (x,), verbose=False)
    session = ort.InferenceSession(ir.serde.serialize_model(program.model).SerializeToString())
    (actual,) = session.run(None, {session.get_inputs()[0].name: x.numpy()})
    expected = torch.hash_tensor(x, **kwargs)
    assert actual.shape == tuple(expected.shape)
    assert np.array_equal(actual.view(np.uint64), expected.numpy())


DYNAMIC = {
    "index_reduce": (
        lambda x, i, s: (x.index_reduce(0, i, s, "mean"), x.index_reduce(0, i, s, "amax", include_self=False)),
        (torch.randn(4, 3), torch.tensor([0, 3, 3]), torch.randn(3, 3)),
        (torch.randn(6, 2), torch.tensor([5, 0, 5, 1, 1]), torch.randn(5, 2)),
        ({0: "n", 1: "m"}, {0: "k"}, {0: "k", 1: "m"}),
    ),
    "put": (
        lambda x, i, s: x.put(i, s, accumulate=True),
        (torch.randn(3, 4), torch.tensor([0, -1, 5]), torch.randn(3)),
        (torch.randn(5, 2), torch.tensor([9, 9, 0, -10]), torch.randn(4)),
        ({0: "n", 1: "m"}, {0: "k"}, {0: "k"}),
    ),
    "segment_reduce": (
        lambda d, lengths: (torch.segment_reduce(d, "mean", lengths=lengths), torch.segment_reduce(d, "max", lengths=lengths, initial=0.0)),
        (torch.randn(6, 2), torch.tensor([2, 0, 4])),
        (torch.randn(9, 2), torch.tensor([1, 3, 0, 2, 3])),
        ({0: "n"}, {0: "s"}),
    ),
    "mode_nanmedian": (
        lambda x: (*torch.mode(x.nan_to_num().round(), 1), *torch.nanmedian(x, 1), torch.nanmedian(x)),
        (torch.tensor([[NAN, 1.2, 0.3, 2.0], [0.1, NAN, NAN, -4.0]]),),
        (torch.tensor([[NAN, 1.2, 3.0], [0.1, 2.2, 2.4], [NAN, NAN, NAN]]),),
        ({0: "n", 1: "m"},),
    ),
    "pdist_nonzero_static": (
        lambda x: (F.pdist(x), F.pdist(x, 1.0), torch.nonzero_static(x > 0, size=4)),
        (torch.randn(4, 3),),
        (torch.randn(6, 3),),
        ({0: "n"},),
    ),
    "grid_sampler_3d": (
        lambda x, g: torch.ops.aten.grid_sampler_3d(x, g, 0, 2, False),
        (torch.randn(3, 2, 3, 4, 5), torch.rand(3, 2, 3, 2, 3) * 2 - 1),
        (torch.randn(2, 2, 4, 3, 6), torch.rand(2, 3, 1, 2, 3) * 2 - 1),
        ({0: "n", 2: "d", 3: "h", 4: "w"}, {0: "n", 1: "p", 2: "q", 3: "r"}),
    ),
    "linear_cross_entropy_chunked": (
        lambda x, w, t: F.linear_cross_entropy(x, w, t, options=torch.nn.LinearCrossEntropyOptions(batch_chunk_size=2)),
        (torch.randn(5, 3), torch.randn(4, 3), torch.tensor([0, 1, 3, 1, 2])),
        (torch.randn(7, 3), torch.randn(4, 3), torch.tensor([3, 3, 0, 1, 2, 0, 2])),
        ({0: "n"}, None, {0: "n"}),
    ),
}


@pytest.mark.parametrize("name", sorted(DYNAMIC))
def test_dynamic_sizes(name):
    fn, args, other, dynamic_shapes = DYNAMIC[name]
    opset = {"grid_sampler_3d": 18}.get(name)
    assert_matches_eager(fn, args, dynamic_shapes=dynamic_shapes, more_inputs=[(other, {})], rtol=1e-3, opset_version=opset)


class _WholeAndPartialSliceScatters(torch.nn.Module):
    """Writes over a whole dimension (functionalization's ``h[:, 0] += 1``, default and explicit
    bounds, a dynamic end equal to the size, an integer source ATen casts) beside partial ones."""

    def forward(self, x: torch.Tensor, y: torch.Tensor, z: torch.Tensor) -> tuple[torch.Tensor, ...]:
        h = x * 2.0
        h[:, 0] += 1.0
        return (
            h,
            torch.slice_scatter(x, y, 1),
            torch.slice_scatter(x, y, 1, 0, x.shape[1]),
            torch.slice_scatter(x, z, 0),
            torch.slice_scatter(x, y[:, 1:], 1, 1),
            torch.slice_scatter(x, y[:, :2], 1, 0, 2),
        )


def test_slice_scatter_over_a_whole_dimension_is_its_source():
    def inputs(rows: int, cols: int) -> tuple[torch.Tensor, ...]:
        return torch.randn(rows, cols), torch.randn(rows, cols), torch.randint(-5, 5, (rows, cols))

    model = _WholeAndPartialSliceScatters().eval()
    sizes = {0: "rows", 1: "cols"}
    program = assert_matches_eager(
        model, inputs(3, 5), more_inputs=[(inputs(4, 7), {})], dynamic_shapes=(sizes, sizes, sizes)
    )
    # The whole-dimension writes are their sources: only the partial writes concatenate (the two
    # partial slices, and the two select writes functionalization makes of ``h[:, 0] += 1``).
    op_types = [node.op_type for node in program.model.graph]
    assert op_types.count("Concat") == 4 and not {"ScatterND", "ScatterElements"} & set(op_types), op_types


class _Histc(torch.nn.Module):
    """Every way histc picks its range: given, from the data (the default min == max), widened
    when the data is one value (an MoE router counting tokens of a single expert), empty data."""

    def forward(self, x: torch.Tensor, ids: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return (
            torch.histc(x, 5),
            torch.histc(x, 7, min=-1, max=1),
            torch.histc(x, 3, min=0.1, max=0.7),
            torch.histc(x, 10, min=0.3, max=0.9),
            torch.histc(ids.float(), bins=4, min=0, max=3),
            torch.histc(ids.float() * 0, bins=1, min=0, max=0),
            torch.histc(x[:0], 4),
        )


def test_histc_places_values_as_aten_does():
    # Values on and next to the bin edges of the fixed ranges, where a comparison with
    # precomputed edges and ATen's per-value formula can disagree.
    # (0.78 in [0.3, 0.9] with 10 bins: dividing before multiplying puts it a bin lower.)
    edges = torch.tensor([0.1, 0.3, 0.5, 0.7, 0.29999998, 0.30000001, -1.0, 1.0, 0.1 + 0.6 / 3, 0.7 - 0.6 / 3, 0.7799999713897705])
    inputs = (torch.cat([torch.randn(40), edges]), torch.randint(0, 4, (20,)))
    more = [
        ((torch.rand(17) * 0.6 + 0.1, torch.randint(0, 4, (9,))), {}),
        ((torch.linspace(0.1, 0.7, 1000), torch.zeros(3, dtype=torch.int64)), {}),
    ]
    assert_matches_eager(_Histc(), inputs, dynamic_shapes=({0: "n"}, {0: "m"}), more_inputs=more, rtol=0, atol=0)


def test_histc_of_data_without_a_finite_range_is_nan():
    """ATen raises ("range of [nan, nan] is not finite"); ONNX cannot, so the counts say so."""
    program = torch_onnx_fx.export(_Histc(), (torch.randn(6), torch.randint(0, 4, (5,))), dynamic_shapes=({0: "n"}, {0: "m"}), verbose=False)
    counts = program(torch.tensor([1.0, float("nan")]), torch.randint(0, 4, (5,)))[0]
    assert torch.isnan(counts).all()



class _Bincount(torch.nn.Module):
    def forward(self, ids, weights, integers, flags, halves):
        return (
            torch.bincount(ids, weights), torch.bincount(ids, weights, minlength=12), torch.bincount(ids, integers),
            torch.bincount(ids, flags), torch.bincount(ids, halves), torch.bincount(ids, minlength=3),
        )


def test_bincount_with_weights_sums_as_aten_does():
    """torchlib refused weights. Sums in float32 for float32 weights, double for any other,
    added in input order: the same bits as eager's loop."""
    torch.manual_seed(0)

    def inputs(n):
        return (
            torch.randint(0, 7, (n,)), torch.randn(n) * 1e3, torch.randint(-5, 5, (n,), dtype=torch.int32),
            torch.rand(n) > 0.5, torch.randn(n).half(),
        )

    more = [(inputs(1), {}), (inputs(2000), {})]
    assert_matches_eager(_Bincount(), inputs(40), dynamic_shapes=tuple({0: "n"} for _ in range(5)), more_inputs=more, rtol=0, atol=0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.float64, torch.int64, torch.int32, torch.int16, torch.uint8])
def test_median_of_an_empty_tensor_is_eager_fill(dtype):
    # ONNX Runtime refused the session (TopK's shape inference: no element to take); eager fills NaN
    # (as an integer: the lowest int32/int64 on x86, 0 for narrower types).
    assert_matches_eager(lambda x: (torch.median(x), torch.median(x[0])), (torch.zeros(3, 0, dtype=dtype),))


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.int32, torch.uint8])
def test_median_of_a_dynamic_tensor_that_is_empty_at_run_time(dtype):
    """TopK has no smallest element to take in an empty tensor: ONNX Runtime failed where eager
    fills NaN (floats) or its conversion of NaN (the lowest int64/int32, 0 below)."""

    def make(*shape):
        return (torch.randn(*shape) * 20).to(dtype)

    assert_matches_eager(
        lambda x: torch.median(x), (make(4, 3),), dynamic_shapes=({0: "rows", 1: "cols"},),
        more_inputs=[((make(0, 3),), {}), ((make(5, 7),), {}), ((torch.tensor([[3, 1], [2, 2]]).to(dtype),), {})],
    )
