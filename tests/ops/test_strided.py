"""ops/strided.py and normalize/storage_base.py: as_strided reads storage, as eager does.

torchlib's translation reads its input's values in row-major order, which is the storage only for
a contiguous tensor that starts it; every other case gave wrong numbers silently (torch.onnx
still does). Each case here fails without the storage-base pass or the laid-out translation.
"""

from __future__ import annotations

import pytest
import torch

import torch_onnx_fx
from helpers import assert_matches_eager
from torch_onnx_fx.errors import TranslationError

CASES = {
    "of-a-permutation": lambda x: x.permute(2, 0, 1).as_strided((3, 4), (1, 3)),
    "of-a-slice-with-its-offset": lambda x: x[:, 1:].as_strided((2, 2), (4, 1)),
    "of-a-slice-reading-before-it": lambda x: x[:, 1:].as_strided((2, 2), (4, 1), 3),
    "of-an-unfold": lambda x: x.unfold(-1, 2, 1).as_strided((2, 5), (3, 2)),
    "of-a-view-of-a-view": lambda x: x.transpose(0, 2)[1:].as_strided((3, 3), (2, 5), 1),
    "of-a-detached-alias": lambda x: x.detach().as_strided((2, 5), (3, 2)),
    "copy-of-a-permutation": lambda x: torch.as_strided_copy(x.permute(1, 0, 2), (4, 3), (2, 1)),
}


@pytest.mark.parametrize("name", CASES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.complex64])
def test_as_strided_of_a_view_reads_the_base_storage(name, dtype):
    x = torch.randn(2, 3, 4, dtype=torch.complex64).to(dtype) if dtype.is_complex else (torch.randn(2, 3, 4) * 10).to(dtype)
    assert_matches_eager(CASES[name], (x,))


def test_as_strided_of_a_channels_last_input_reads_it_as_laid_out():
    x = torch.randn(1, 3, 4, 4).contiguous(memory_format=torch.channels_last)
    program = torch_onnx_fx.export(lambda t: t.as_strided((3, 4), (1, 3)) * 2, (x,), verbose=False)
    assert_matches_eager(lambda t: t.as_strided((3, 4), (1, 3)) * 2, (x,), program=program)


def test_as_strided_of_memory_the_graph_does_not_hold_is_refused():
    # The example input is a slice of a larger buffer: as_strided at offset 0 reads the buffer's
    # first element, which no value of the input holds.
    buffer = torch.randn(3, 5)
    x = buffer[:, 1:]
    with pytest.raises(TranslationError, match=r"as_strided.*strides \[5, 1\], storage offset 1.*memory outside it"):
        torch_onnx_fx.export(lambda t: t.as_strided((2, 2), (1, 1), 0), (x,), verbose=False)


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.bool])
def test_as_strided_scatter_writes_the_views_storage_positions(dtype):
    # torch has no decomposition of prims.as_strided_scatter and there was no translation.
    x = torch.arange(24).reshape(4, 6).to(dtype)
    src = (torch.arange(6).reshape(2, 3) * 7 + 1).to(dtype)

    def model(x, src):
        return (
            torch.as_strided_scatter(x, src, (2, 3), (6, 2), 1), torch.as_strided_scatter(x, src[0], (3,), (7,)),
            torch.as_strided_scatter(x, src[0, 0], (), (), 5),
        )

    assert_matches_eager(model, (x, src))


@pytest.mark.parametrize("dtype", [torch.float32, torch.complex64])
def test_as_strided_scatter_of_a_transposed_tensor_is_refused(dtype):
    # ATen writes at storage positions of the clone, which keeps the transposed layout; the
    # complex translation numbered the values row-major and wrote elsewhere, silently.
    class Model(torch.nn.Module):
        def forward(self, x, src):
            return torch.as_strided_scatter(x.t(), src, (2,), (1,))

    with pytest.raises(TranslationError, match="not contiguous"):
        torch_onnx_fx.export(Model(), (torch.randn(3, 4, dtype=dtype), torch.randn(2, dtype=dtype)), verbose=False)


def test_as_strided_scatter_converts_its_source_and_refuses_overlapping_views():
    # eager's copy_ into the view converts a float64 source (ONNX Runtime refused the model);
    # a stride-0 view eager refuses to write through is refused here too (second review).
    assert_matches_eager(lambda x, s: torch.as_strided_scatter(x, s, (2,), (3,), 1), (torch.randn(3, 4), torch.randn(2, dtype=torch.float64)))

    class Overlapping(torch.nn.Module):
        def forward(self, x, src):
            return torch.as_strided_scatter(x, src, (2,), (0,))

    with pytest.raises(TranslationError, match="overlaps"):
        torch_onnx_fx.export(Overlapping(), (torch.randn(3, 4), torch.randn(2)), verbose=False)



@pytest.mark.parametrize("size", [(2, 6), (3, 4), (12,)])
def test_resize_of_a_permuted_tensor_reads_it_in_storage_order(size):
    # eager's resize_ keeps the storage and lays new sizes over it row-major (the same sizes it
    # leaves alone); the graph took the permuted tensor's values row-major (80 % of them wrong,
    # differential fuzzer). The clone keeps the transposed strides, as in eager.
    class Resize(torch.nn.Module):
        def forward(self, x):
            return x.t().clone().resize_(*size) * 1

    x = torch.arange(12.0).reshape(4, 3)
    (ours,) = torch_onnx_fx.export(Resize(), (x,), verbose=False)(x)
    assert torch.equal(ours, Resize()(x))
