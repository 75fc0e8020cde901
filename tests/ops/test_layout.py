"""ops/layout.py: layout operators where torchlib's translation fails or differs."""

from __future__ import annotations

import pytest
import torch

from helpers import assert_matches_eager


@pytest.mark.parametrize("shifts, dims", [((2,), (0,)), ((-1, 3), (1, 0)), ((5,), ())], ids=["one-dim", "two-dims", "flattened"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.bool])
def test_roll_of_a_dynamic_dim_that_is_empty_at_run_time(shifts, dims, dtype):
    """torchlib's roll takes the shift modulo the run-time length: ONNX Runtime failed with an
    integer modulo by zero on an empty batch, which eager rolls to itself."""

    def make(*shape):
        return (torch.randn(*shape) > 0).to(dtype) if dtype == torch.bool else (torch.randn(*shape) * 10).to(dtype)

    assert_matches_eager(
        lambda x: torch.roll(x, shifts, dims), (make(4, 3),), dynamic_shapes=({0: "batch", 1: "width"},),
        more_inputs=[((make(0, 3),), {}), ((make(5, 0),), {}), ((make(7, 2),), {})],
    )


@pytest.mark.parametrize("split", [
    lambda x: torch.unsafe_chunk(x, 2, 1), lambda x: torch.unsafe_split(x, 2, 1), lambda x: torch.chunk(x, 2, 1),
], ids=["unsafe_chunk", "unsafe_split", "chunk"])
def test_unsafe_splits_of_a_dynamic_dim(split):
    """torchlib's unsafe_chunk is a SplitToSequence with a size computed at run time, on which
    onnxscript's constant folder crashed at export; it takes chunk's path now (unsafe_split by a
    constant size and chunk, which worked, alongside)."""
    automatic = torch.export.Dim.AUTO
    assert_matches_eager(
        split, (torch.randn(5, 6, 5),), dynamic_shapes=({0: automatic, 1: automatic, 2: automatic},),
        more_inputs=[((torch.randn(3, 5, 2),), {})],
    )
