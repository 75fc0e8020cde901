"""torch.onnx.ops: symbolic operators, Attention and RotaryEmbedding."""

from __future__ import annotations

import pytest
import torch
import torch.onnx.ops as onnx_ops
from torch import nn

import torch_onnx_fx
from helpers import assert_matches_eager


class Symbolic(nn.Module):
    def forward(self, x):
        y = onnx_ops.symbolic(
            "custom.domain::Foo", (x, None), {"alpha": 0.5, "mode": "fast", "ints": [1, 2], "flag": True},
            dtype=x.dtype, shape=x.shape, version=3, metadata_props={"origin": "test"},
        )
        return onnx_ops.symbolic_multi_out(
            "Split", (y,), {"axis": 0, "num_outputs": 2}, dtypes=(x.dtype, x.dtype), shapes=((1, 3), (1, 3))
        )


def test_symbolic_ops_produce_the_named_nodes():
    program = torch_onnx_fx.export(Symbolic(), (torch.randn(2, 3),), verbose=False)
    model = program.model
    (foo,) = [n for n in model.graph if n.op_type == "Foo"]
    assert foo.domain == "custom.domain"
    assert model.opset_imports["custom.domain"] == 3
    assert foo.attributes["alpha"].as_float() == 0.5
    assert foo.attributes["mode"].as_string() == "fast"
    assert list(foo.attributes["ints"].as_ints()) == [1, 2]
    assert foo.attributes["flag"].as_int() == 1
    assert len(foo.inputs) == 1 or foo.inputs[1] is None  # trailing optional input omitted
    assert foo.metadata_props["origin"] == "test"
    (split,) = [n for n in model.graph if n.op_type == "Split"]
    assert len(split.outputs) == 2 and split.attributes["num_outputs"].as_int() == 2
    assert [tuple(o.shape) for o in model.graph.outputs] == [(1, 3), (1, 3)]


class AttentionModel(nn.Module):
    def forward(self, q, k, v, mask):
        out, present_key, present_value, _ = onnx_ops.attention(q, k, v, mask, scale=0.25)
        return out


class RotaryModel(nn.Module):
    def forward(self, x, cos, sin, position_ids):
        return onnx_ops.rotary_embedding(x, cos, sin, position_ids)


@pytest.mark.parametrize("opset", [20, 23])
def test_attention(opset):
    q, k, v = torch.randn(2, 4, 5, 8), torch.randn(2, 4, 6, 8), torch.randn(2, 4, 6, 8)
    mask = torch.randn(5, 6)
    program = assert_matches_eager(AttentionModel(), (q, k, v, mask), opset_version=opset)
    assert ("Attention" in {n.op_type for n in program.model.graph}) == (opset >= 23)


@pytest.mark.parametrize("opset", [20, 23])
def test_rotary_embedding(opset):
    x = torch.randn(2, 3, 4, 8)  # batch, heads, sequence, head size
    cos, sin = torch.randn(10, 4), torch.randn(10, 4)
    position_ids = torch.tensor([[0, 1, 2, 3], [4, 5, 6, 7]])
    program = assert_matches_eager(RotaryModel(), (x, cos, sin, position_ids), opset_version=opset)
    assert ("RotaryEmbedding" in {n.op_type for n in program.model.graph}) == (opset >= 23)
