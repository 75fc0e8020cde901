"""Indexing by aranges over whole dimensions (transformers' padding masks) becomes a reshape of
the indexed tensor: exact, also when the arange's length is another symbol than the dimension's,
and failing as eager does when it is longer."""

from __future__ import annotations

import pytest
import torch

import torch_onnx_fx
from helpers import assert_matches_eager


class PaddingMask(torch.nn.Module):
    """masking_utils' form: the mask read at [batch, kv] grids on axes 0 and 3 of a 4-d frame."""

    def forward(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        batch = torch.arange(ids.shape[0])[:, None, None, None]
        kv = (torch.arange(mask.shape[1]) + 0)[None, None, None, :]
        causal = kv <= torch.arange(mask.shape[1])[None, None, :, None]
        return mask.bool()[batch, kv] & causal


class OtherIndexes(torch.nn.Module):
    """Indexes the pass must leave as they are: a step of 2, a start of 1, decreasing axes, and an
    arange shorter than its dimension (kept exact by index_select)."""

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        rows, cols = x.shape
        return (
            x[torch.arange(0, rows, 2)[:, None], torch.arange(cols)[None, :]],
            x[torch.arange(1, rows)[:, None], torch.arange(cols)[None, :]],
            x[torch.arange(rows)[None, :], torch.arange(cols)[:, None]],
            x[torch.arange(rows - 1)[:, None, None], torch.arange(cols)[None, None, :]],
        )


def _op_types(program: torch_onnx_fx.ONNXProgram) -> list[str]:
    return [node.op_type for node in program.model.graph]


def _mask_inputs(batch: int, length: int) -> tuple[torch.Tensor, torch.Tensor]:
    mask = torch.ones(batch, length, dtype=torch.int64)
    mask[0, length // 2:] = 0
    return torch.randint(0, 100, (batch, length)), mask


def test_padding_mask_index_is_a_reshape():
    sizes = ({0: "batch", 1: "sequence"}, {0: "batch", 1: "sequence"})
    program = assert_matches_eager(PaddingMask(), _mask_inputs(2, 6), dynamic_shapes=sizes, more_inputs=[(_mask_inputs(3, 9), {})])
    op_types = _op_types(program)
    assert "GatherND" not in op_types and "Max" not in op_types, op_types


def test_longer_arange_fails_as_eager_does():
    """The two batches are separate symbols: ids with more rows than the mask make eager raise,
    and the exported model fails too instead of returning a smaller result."""
    sizes = ({0: "batch", 1: "sequence"}, {0: "mask_batch", 1: "sequence"})
    program = torch_onnx_fx.export(PaddingMask(), _mask_inputs(2, 6), dynamic_shapes=sizes, verbose=False)
    ids, _ = _mask_inputs(3, 6)
    _, mask = _mask_inputs(2, 6)
    with pytest.raises(IndexError):
        PaddingMask()(ids, mask)
    with pytest.raises(torch_onnx_fx.errors.OnnxRuntimeError, match="out of data bounds|invalid index"):
        program(ids, mask)
    # A shorter arange keeps the first rows, as in eager.
    ids, _ = _mask_inputs(1, 6)
    assert_matches_eager(PaddingMask(), (ids, mask), program=program)


def test_other_indexes_stay_exact():
    sizes = ({0: "rows", 1: "cols"},)
    assert_matches_eager(OtherIndexes(), (torch.randn(6, 5),), dynamic_shapes=sizes, more_inputs=[((torch.randn(9, 4),), {})])


def test_custom_index_translation_sees_the_index():
    """A user's translation of index.Tensor is called for every index the model has."""
    calls = []

    def gather_nd_index(self, indices):
        from onnxscript import opset18 as op

        calls.append(len(indices))
        first, second = indices
        shape = op.Shape(op.Add(first, second))
        last = op.Constant(value_ints=[-1])
        grid = op.Concat(op.Unsqueeze(op.Expand(first, shape), last), op.Unsqueeze(op.Expand(second, shape), last), axis=-1)
        return op.GatherND(self, grid)

    sizes = ({0: "batch", 1: "sequence"}, {0: "batch", 1: "sequence"})
    assert_matches_eager(
        PaddingMask(), _mask_inputs(2, 6), dynamic_shapes=sizes,
        custom_translation_table={torch.ops.aten.index.Tensor: gather_nd_index},
    )
    assert calls == [2]
