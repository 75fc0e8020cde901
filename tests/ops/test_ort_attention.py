"""fusion="onnxruntime": scaled_dot_product_attention as ONNX Runtime's GroupQueryAttention where
the kernel computes what ATen does, the standard translation elsewhere; every case run in ONNX
Runtime with its default session options and compared with eager (all outputs)."""

from __future__ import annotations

import collections

import pytest
import torch
import torch.nn.functional as F

from helpers import assert_matches_eager
from tests.ops.test_attention import _repeat_kv

GQA = "GroupQueryAttention"


def _ops(program) -> collections.Counter:
    return collections.Counter(node.op_type for node in program.model_proto.graph.node)


class _Cached(torch.nn.Module):
    """One attention step over a cache: (q, k_new, v_new, past_k, past_v, mask) -> (out, k, v)."""

    def __init__(self, groups: int = 2, mask_kind: str = "bool", repeat: bool = True) -> None:
        super().__init__()
        self.groups, self.mask_kind, self.repeat = groups, mask_kind, repeat

    def forward(self, q, k, v, past_k, past_v, mask):
        keys, values = torch.cat((past_k, k), dim=2), torch.cat((past_v, v), dim=2)
        attn_mask = mask if self.mask_kind == "bool" else torch.where(mask, 0.0, float("-inf"))
        if self.repeat:
            out = F.scaled_dot_product_attention(q, _repeat_kv(keys, self.groups), _repeat_kv(values, self.groups), attn_mask=attn_mask)
        else:
            out = F.scaled_dot_product_attention(q, keys, values, attn_mask=attn_mask, enable_gqa=self.groups > 1)
        return out, keys, values


def _cached_inputs(batch, heads, kv_heads, new, past, size=16, seed=0):
    generator = torch.Generator().manual_seed(seed)
    q = torch.randn(batch, heads, new, size, generator=generator)
    k, v = (torch.randn(batch, kv_heads, new, size, generator=generator) for _ in range(2))
    past_k, past_v = (torch.randn(batch, kv_heads, past, size, generator=generator) for _ in range(2))
    mask = torch.rand(batch, 1, new, past + new, generator=generator) > 0.3
    mask[-1, :, 0] = False  # a query row with no key: zeros in ATen
    return q, k, v, past_k, past_v, mask


_PAST = torch.export.Dim("past", min=1, max=64)
_TOTAL = _PAST + 1


@pytest.mark.parametrize("repeat", [True, False], ids=["repeat_kv", "enable_gqa"])
def test_decode_step_becomes_one_kernel_sharing_the_cache(repeat):
    inputs = _cached_inputs(2, 8, 4, 1, 5)
    shapes = (None, None, None, {2: _PAST}, {2: _PAST}, {3: _TOTAL})
    program = assert_matches_eager(
        _Cached(2, repeat=repeat).eval(), inputs, dynamic_shapes=shapes, fusion="onnxruntime",
        more_inputs=[(_cached_inputs(2, 8, 4, 1, 9, seed=1), {})],
    )
    ops = _ops(program)
    # The kernel appends to the cache and returns it: the model's cat is gone.
    assert ops[GQA] == 1 and ops["Concat"] == 0


def test_a_window_of_the_cache_is_read_from_the_kernel_too():
    # A sliding-window cache keeps the last positions of cat((past, new)): that Slice reads the
    # kernel's present instead, and the cat is gone.
    class Windowed(_Cached):
        def forward(self, q, k, v, past_k, past_v, mask):
            out, keys, values = super().forward(q, k, v, past_k, past_v, mask)
            return out, keys[:, :, -4:], values[:, :, -4:]

    inputs = _cached_inputs(2, 8, 4, 1, 5)
    shapes = (None, None, None, {2: _PAST}, {2: _PAST}, {3: _TOTAL})
    program = assert_matches_eager(
        Windowed().eval(), inputs, dynamic_shapes=shapes, fusion="onnxruntime", more_inputs=[(_cached_inputs(2, 8, 4, 1, 9, seed=1), {})],
    )
    assert _ops(program)[GQA] == 1 and _ops(program)["Concat"] == 0


def test_one_kv_head_per_query_head():
    inputs = _cached_inputs(2, 4, 4, 1, 5)
    program = assert_matches_eager(_Cached(1, repeat=False).eval(), inputs, fusion="onnxruntime")
    assert _ops(program)[GQA] == 1


def test_several_new_positions_after_a_cache_in_one_row():
    program = assert_matches_eager(_Cached().eval(), _cached_inputs(1, 8, 4, 3, 5), fusion="onnxruntime")
    assert _ops(program)[GQA] == 1


@pytest.mark.parametrize(
    "inputs, module",
    [
        # The kernel refuses several new positions after a cache for more than one row.
        (_cached_inputs(2, 8, 4, 3, 5), _Cached()),
        # An additive mask: -inf rows give NaN in ATen, which only the standard translation keeps.
        (_cached_inputs(2, 8, 4, 1, 5), _Cached(mask_kind="float")),
    ],
    ids=["several-new-positions-in-a-batch", "float-mask"],
)
def test_standard_translation_where_the_kernel_differs(inputs, module):
    program = assert_matches_eager(module.eval(), inputs, fusion="onnxruntime")
    assert GQA not in _ops(program)


class _Prompt(torch.nn.Module):
    """Attention without a cache: queries and keys of one length."""

    def __init__(self, causal: bool, masked: bool, per_head_mask: bool = False) -> None:
        super().__init__()
        self.causal, self.masked, self.per_head_mask = causal, masked, per_head_mask

    def forward(self, q, k, v):
        mask = None
        if self.masked:
            length = q.shape[2]
            mask = torch.ones(length, length, dtype=torch.bool).tril()
            mask = mask.expand(q.shape[0], q.shape[1] if self.per_head_mask else 1, length, length).clone()
            mask[:, :, :, 0] = False
            mask[:, :, 0] = False  # row 0 sees no key
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=self.causal, enable_gqa=True)


@pytest.mark.parametrize(
    "causal, masked, per_head_mask, fused",
    [(True, False, False, True), (False, True, False, True), (False, False, False, True), (False, True, True, False)],
    ids=["is_causal", "boolean-mask", "no-mask", "mask-per-head"],
)
def test_prompt_attention(causal, masked, per_head_mask, fused):
    generator = torch.Generator().manual_seed(3)
    q, k, v = torch.randn(2, 8, 6, 8, generator=generator), torch.randn(2, 2, 6, 8, generator=generator), torch.randn(2, 2, 6, 8, generator=generator)
    program = assert_matches_eager(
        _Prompt(causal, masked, per_head_mask).eval(), (q, k, v), fusion="onnxruntime",
        dynamic_shapes=({0: "batch", 2: "length"}, {0: "batch", 2: "length"}, {0: "batch", 2: "length"}),
        more_inputs=[((torch.randn(3, 8, 4, 8), torch.randn(3, 2, 4, 8), torch.randn(3, 2, 4, 8)), {})],
    )
    assert (GQA in _ops(program)) == fused


def test_a_mask_broadcast_over_the_queries_keeps_the_standard_translation():
    # [B, 1, 1, T] (an encoder's padding mask) is no bias of [B, 1, S, T] for the kernel.
    class Padded(torch.nn.Module):
        def forward(self, q, k, v, keep):
            return F.scaled_dot_product_attention(q, k, v, attn_mask=keep[:, None, None, :])

    q, k, v = (torch.randn(2, 4, 5, 8) for _ in range(3))
    keep = torch.tensor([[True] * 5, [False, False, True, True, True]])
    program = assert_matches_eager(Padded().eval(), (q, k, v, keep), fusion="onnxruntime")
    assert GQA not in _ops(program)


def test_causal_after_a_cache_keeps_the_standard_translation():
    # ATen aligns is_causal top-left, the kernel bottom-right: they differ once keys outnumber queries.
    class CausalCached(torch.nn.Module):
        def forward(self, q, k, v, past_k, past_v):
            keys, values = torch.cat((past_k, k), dim=2), torch.cat((past_v, v), dim=2)
            return F.scaled_dot_product_attention(q, keys, values, is_causal=True, enable_gqa=True)

    q, k, v, past_k, past_v, _ = _cached_inputs(1, 8, 4, 3, 5)
    program = assert_matches_eager(CausalCached().eval(), (q, k, v, past_k, past_v), fusion="onnxruntime")
    assert GQA not in _ops(program)


def test_a_head_size_the_kernel_refuses_keeps_the_standard_translation():
    q, k, v = torch.randn(1, 4, 5, 12), torch.randn(1, 2, 5, 12), torch.randn(1, 2, 5, 12)
    program = assert_matches_eager(_Prompt(False, False).eval(), (q, k, v), fusion="onnxruntime")
    assert GQA not in _ops(program)


def test_float64_keeps_the_standard_translation():
    q, k, v = (torch.randn(1, 4, 5, 8, dtype=torch.float64) for _ in range(3))
    program = assert_matches_eager(_Prompt(False, False).eval(), (q, k, v), fusion="onnxruntime")
    assert GQA not in _ops(program)


def test_standard_fusion_never_chooses_the_kernel():
    program = assert_matches_eager(_Cached().eval(), _cached_inputs(2, 8, 4, 1, 5))
    assert GQA not in _ops(program)
