"""scaled_dot_product_attention against eager, at the default opset (written out) and at
opset 23 (one Attention node): masks that leave a query row nothing to attend to, grouped K/V
heads, float masks with -inf rows, causal and scaled variants.

A fully masked query row is what left-padded batches give every causal language model on its
padding positions: ATen returns zeros there. Filling masked scores with the lowest float (as
torchlib does) averages every value instead, a silently wrong number.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from helpers import assert_matches_eager


class Attention(torch.nn.Module):
    def __init__(self, **options):
        super().__init__()
        self.options = options

    def forward(self, q, k, v, mask=None):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, **self.options)


def _qkv(heads=4, kv_heads=4, rows=5, cols=6):
    generator = torch.Generator().manual_seed(0)
    return (
        torch.randn(2, heads, rows, 8, generator=generator),
        torch.randn(2, kv_heads, cols, 8, generator=generator),
        torch.randn(2, kv_heads, cols, 8, generator=generator),
    )


def _bool_mask(rows=5, cols=6):
    mask = torch.rand(2, 1, rows, cols, generator=torch.Generator().manual_seed(1)) > 0.3
    mask[0, :, 0, :] = False  # a query row with nothing to attend to
    mask[1, :, 2:4, :] = False
    return mask


def _float_mask(rows=5, cols=6):
    mask = torch.zeros(2, 1, rows, cols)
    mask[0, :, 1, :] = float("-inf")  # every key masked out
    mask[1, :, :, 3] = float("-inf")
    return mask + torch.randn(2, 1, rows, cols, generator=torch.Generator().manual_seed(2))


_BEFORE_2_15 = tuple(int(part) for part in torch.__version__.split(".")[:2]) < (2, 15)

CASES = {
    "bool-mask-fully-masked-rows": (Attention().eval(), lambda: (*_qkv(), _bool_mask())),
    "float-mask-inf-rows": (Attention().eval(), lambda: (*_qkv(), _float_mask())),
    "gqa-bool-mask": (Attention(enable_gqa=True).eval(), lambda: (*_qkv(heads=4, kv_heads=2), _bool_mask())),
    "gqa-causal": (Attention(enable_gqa=True, is_causal=True).eval(), lambda: _qkv(heads=6, kv_heads=2, rows=6)),
    "causal-scaled": (Attention(is_causal=True, scale=0.2).eval(), lambda: _qkv(rows=4)),
    # ATen (before 2.15) accepts a float mask together with is_causal; And of a float mask was an
    # invalid graph. torch 2.15 refuses the combination in eager ("Explicit attn_mask should not be
    # set when is_causal=True"), so there is nothing to export or compare with.
    **({"causal-float-mask": (Attention(is_causal=True).eval(), lambda: (*_qkv(), _float_mask()))} if _BEFORE_2_15 else {}),
    "no-mask": (Attention().eval(), lambda: _qkv()),
}


@pytest.mark.parametrize("opset", [None, 23], ids=["default-opset", "opset23"])
@pytest.mark.parametrize("name", list(CASES))
def test_attention_matches_eager(name, opset):
    module, inputs = CASES[name]
    options = {} if opset is None else {"opset_version": opset}
    program = assert_matches_eager(module, inputs(), **options)
    ops = {node.op_type for node in program.model_proto.graph.node}
    # Both translations are exercised: the written-out one below opset 23, the Attention node at it.
    assert ("Attention" in ops) == (opset == 23)


def test_fully_masked_row_is_zero():
    """The property itself, not only agreement: nothing to attend to gives exactly zeros."""
    q, k, v = _qkv()
    mask = _bool_mask()
    program = assert_matches_eager(Attention().eval(), (q, k, v, mask))
    (out,) = program(q, k, v, mask)
    assert torch.equal(out[0, :, 0], torch.zeros_like(out[0, :, 0]))


@pytest.mark.parametrize("opset", [None, 23], ids=["default-opset", "opset23"])
def test_float64_attention_is_exact(opset):
    """The scale in float64 (a Python float cast through float32 put it 1.5e-8 off), and no
    Attention node for float64 (its scale attribute is float32)."""
    q, k, v = (t.double() for t in _qkv())
    program = assert_matches_eager(Attention().eval(), (q, k, v, _bool_mask()), opset_version=opset, rtol=1e-12, atol=1e-12)
    assert "Attention" not in {node.op_type for node in program.model_proto.graph.node}


@pytest.mark.parametrize("name", ["bool-mask-fully-masked-rows", "gqa-causal", "float-mask-inf-rows"])
def test_onnxruntime_symbolic_shape_inference_types_every_output(name):
    """ONNX Runtime's transformer tools run its symbolic shape inference first; it types the
    written-out attention (default opset) with symbolic batch and lengths. (It knows no
    ReduceMax with axes as an input: a flag computed so left the output untyped.)"""
    from onnxruntime.tools.symbolic_shape_infer import SymbolicShapeInference

    module, inputs = CASES[name]
    batch, rows = torch.export.Dim("batch"), torch.export.Dim("rows")
    args = inputs()
    shapes = [{0: batch, 2: rows} if i == 0 else {0: batch} for i in range(len(args))]
    if name == "bool-mask-fully-masked-rows":
        shapes[3] = {0: batch, 2: rows}
    program = assert_matches_eager(module, args, dynamic_shapes=tuple(shapes))
    inferred = SymbolicShapeInference.infer_shapes(program.model_proto, auto_merge=True)
    output = inferred.graph.output[0].type.tensor_type.shape
    assert len(output.dim) == 4


@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
def test_a_query_without_keys_keeps_non_finite_values_as_aten_does(bad):
    """ATen gives a query row without keys 0 * value summed over the keys: zeros, but NaN in each
    column where a value is NaN or infinite. Only that column: the others stay 0."""
    q, k, v = _qkv()
    v[0, :, 2, 1] = bad
    mask = _bool_mask()
    program = assert_matches_eager(Attention().eval(), (q, k, v, mask))
    (out,) = program(q, k, v, mask)
    assert torch.isnan(out[0, :, 0, 1]).all() and torch.equal(out[0, :, 0, 0], torch.zeros_like(out[0, :, 0, 0]))


def _repeat_kv(x: torch.Tensor, group: int) -> torch.Tensor:
    """transformers' repeat_kv: each K/V head copied for the query heads that share it."""
    batch, heads, length, dim = x.shape
    return x[:, :, None].expand(batch, heads, group, length, dim).reshape(batch, heads * group, length, dim)


class RepeatedKV(torch.nn.Module):
    def __init__(self, mask_kind: str, **options):
        super().__init__()
        self.mask_kind, self.options = mask_kind, options

    def forward(self, q, k, v, padding):
        k, v = _repeat_kv(k, q.shape[1] // k.shape[1]), _repeat_kv(v, q.shape[1] // k.shape[1])
        rows, cols = q.shape[-2], k.shape[-2]
        keep = padding[:, None, None, :].expand(-1, 1, rows, cols)  # [B, 1, L, S], every row sees a key
        mask = {
            "none": None, "bool": keep, "float": torch.zeros_like(keep, dtype=q.dtype).masked_fill(~keep, float("-inf")),
            "two-d": torch.ones(rows, cols, dtype=torch.bool).tril(cols - rows), "per-head": keep.expand(-1, q.shape[1], -1, -1),
        }[self.mask_kind]
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, **self.options)


@pytest.mark.parametrize("opset", [20, 23])
@pytest.mark.parametrize("mask_kind", ["none", "bool", "float", "two-d", "per-head"])
def test_repeated_kv_heads_are_broadcast_not_copied(mask_kind, opset):
    """K/V heads repeated for grouped queries (transformers' repeat_kv) are read through one more
    axis that MatMul broadcasts: no Expand copies them; the numbers are eager's at any batch and
    length. A mask that differs per head keeps the repeated copies below opset 23; opset 23's
    Attention takes the uncopied heads with any mask."""
    torch.manual_seed(0)
    q, k, v = torch.randn(2, 8, 5, 16), torch.randn(2, 2, 7, 16), torch.randn(2, 2, 7, 12)
    padding = torch.ones(2, 7, dtype=torch.bool)
    padding[1, :3] = False
    batch, length = torch.export.Dim("batch"), torch.export.Dim("length")
    shapes = ({0: batch}, {0: batch, 2: length}, {0: batch, 2: length}, {0: batch, 1: length})
    other = (torch.randn(3, 8, 5, 16), torch.randn(3, 2, 9, 16), torch.randn(3, 2, 9, 12), torch.rand(3, 9) > 0.3)
    other[3][:, -1] = True
    model = RepeatedKV(mask_kind, is_causal=mask_kind == "none")
    program = assert_matches_eager(
        model, (q, k, v, padding), dynamic_shapes=shapes, more_inputs=[(other, {})], rtol=1e-5, atol=1e-6, opset_version=opset,
    )
    # repeat_kv's Expand makes [B, Hkv, G, S, E]: the only 5-D expansions in the graph.
    copies = [n for n in program.model.graph if n.op_type == "Expand" and n.outputs[0].shape is not None and n.outputs[0].shape.rank() == 5]
    assert len(copies) == (2 if mask_kind == "per-head" and opset < 23 else 0)
    assert ("Attention" in [n.op_type for n in program.model.graph]) == (opset >= 23)


def test_repeated_kv_through_a_copy_is_broadcast_too():
    # expand().contiguous().reshape(): a clone between the Expand and the Reshape (torchao's
    # quantized models export repeat_kv so).
    class CopiedKV(torch.nn.Module):
        def forward(self, q, k, v):
            group = q.shape[1] // k.shape[1]
            k, v = (x[:, :, None].expand(-1, -1, group, -1, -1).contiguous().flatten(1, 2) for x in (k, v))
            return F.scaled_dot_product_attention(q, k, v)

    q, k, v = torch.randn(2, 8, 5, 16), torch.randn(2, 2, 7, 16), torch.randn(2, 2, 7, 16)
    program = assert_matches_eager(CopiedKV().eval(), (q, k, v), rtol=1e-5, atol=1e-6)
    assert "Expand" not in [n.op_type for n in program.model.graph]


def test_enable_gqa_broadcasts_the_shared_heads():
    q, k, v = torch.randn(2, 6, 4, 8), torch.randn(2, 3, 5, 8), torch.randn(2, 3, 5, 8)
    program = assert_matches_eager(Attention(enable_gqa=True, is_causal=True), (q, k, v), rtol=1e-5, atol=1e-6)
    assert "Expand" not in [n.op_type for n in program.model.graph]
