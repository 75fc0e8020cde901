"""OpContext: what a translation may know and do beyond its arguments, and nothing else."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from onnxscript import opset18 as op

import torch_onnx_fx
from torch_onnx_fx.translate.op_context import OpContext
from torch_onnx_fx.registry import wants_context

from helpers import assert_matches_eager


class Cumulative(torch.nn.Module):
    def forward(self, x):
        return torch.cumsum(x, 0) * 2


def test_context_carries_the_nodes_facts_and_a_loop_builder():
    seen: list[OpContext] = []

    @wants_context
    def cumsum_by_loop(x, dim, *, ctx: OpContext, **kwargs):
        # A running sum built with ctx.loop, from the example's static length.
        seen.append(ctx)
        length = ctx.inputs[0].shape[dim]
        zero = op.Mul(op.Gather(x, [0], axis=0), 0.0)

        def step(i, total, out):
            total = op.Add(total, op.Gather(x, op.Reshape(i, [1]), axis=0))
            rows = op.Reshape(op.Range(0, length, 1), [-1, 1])
            return [total, op.Where(op.Equal(rows, i), total, out)]

        return ctx.loop(length, [zero, op.Mul(x, 0.0)], step)[1]

    x = torch.randn(5, 3)
    program = assert_matches_eager(Cumulative(), (x,), custom_translation_table={torch.ops.aten.cumsum.default: cumsum_by_loop})
    assert any(node.op_type == "Loop" for node in program.model.graph)
    (ctx,) = seen
    assert ctx.target == "aten::cumsum"
    assert ctx.argument_names[:2] == ("self", "dim")
    assert tuple(ctx.result.shape) == (5, 3) and ctx.inputs[1] == 0
    assert ctx.opset == program.model.opset_imports[""]


def test_context_exposes_no_walk_state():
    public = {f.name for f in dataclasses.fields(OpContext) if not f.name.startswith("_")}
    assert public == {"target", "name", "inputs", "keyword_inputs", "result", "argument_names", "results_read"}
    with pytest.raises(dataclasses.FrozenInstanceError):
        OpContext("t", "n", (), {}, None, (), None, None).target = "other"  # type: ignore[arg-type, misc]


@pytest.mark.parametrize(
    "forward, read",
    [
        (lambda x: torch.topk(x, 2, dim=0)[0] * 2, frozenset({0})),
        (lambda x: torch.topk(x, 2, dim=0)[1] + 1, frozenset({1})),
        (lambda x: torch.topk(x, 2, dim=0), frozenset({0, 1})),
        (lambda x: (lambda top: top[0].sum() + top[1].sum())(torch.topk(x, 2, dim=0)), frozenset({0, 1})),
    ],
    ids=["values", "indices", "returned", "both"],
)
def test_context_says_which_results_the_model_reads(forward, read):
    seen: list[OpContext] = []

    @wants_context
    def topk_watched(x, k, dim=-1, largest=True, sorted=True, *, ctx: OpContext):
        seen.append(ctx)
        values, indices = op.TopK(x, op.Constant(value_ints=[k]), axis=dim, largest=int(largest), sorted=int(sorted))
        return values, indices

    class Model(torch.nn.Module):
        def forward(self, x):
            return forward(x)

    x = torch.randn(5, 3)
    assert_matches_eager(Model(), (x,), custom_translation_table={torch.ops.aten.topk.default: topk_watched})
    assert [ctx.results_read for ctx in seen] == [read]
