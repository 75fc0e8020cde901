"""``fusion="onnxruntime"``: scaled_dot_product_attention as ONNX Runtime's ``GroupQueryAttention``.

A decode step's attention is a handful of small nodes per layer in the standard decomposition
(grouping the query heads, two products, the masking around the Softmax, the cache ``Concat``);
ONNX Runtime's ``GroupQueryAttention`` kernel does all of it, K/V heads shared by query groups
included, and appends the new keys and values to the cache itself.

Chosen only where the kernel computes what ATen does (measured against eager in
tests/ops/test_ort_attention.py):

- float32 ``[B, H, S, E]`` query, keys and values of the same head size, a multiple of 8 (the CPU
  kernel's), no dropout;
- K/V heads as the model gives them (``repeat_kv``'s copies, ``enable_gqa``, or one per query
  head), with query head ``h`` reading K/V head ``h // (H / Hkv)`` as both do;
- no mask, or a boolean one the same for every head and spanning queries and keys ([B or 1, 1,
  S, T]): it becomes the kernel's additive bias
  (0 or -inf) with ``causal=0``. A query row with no key left gives NaN in the kernel and zeros in
  ATen, so such rows are set to zero after it;
- ``is_causal`` only without a cache (query and keys of one length, where the kernel's
  bottom-right causal mask is ATen's top-left one);
- a cache appended as ``cat((past, new), dim=2)``: the kernel takes ``past`` and ``new`` apart and
  its ``present`` output replaces the ``cat`` (``optimize/ort_fusions.py``). Its CPU kernel refuses
  several new positions after a cache for a batch of more than one, so a cache is taken only where
  the query is one position or the batch one row, statically.

Everything else goes to the standard translations (``nn.py``), as without the option.
"""

from __future__ import annotations

from typing import Any

import numpy as np

import onnx_ir as ir
import torch
from onnxscript import opset18 as op

from torch_onnx_fx.ops import nn
from torch_onnx_fx.registry import arg_example, arg_value, register, wants_context
from torch_onnx_fx.translate.op_context import OpContext

__all__ = ["aten_sdpa_group_query_attention", "group_query_attention", "MICROSOFT"]

MICROSOFT = "com.microsoft"


def _kernel_types(node: torch.fx.Node) -> bool:
    """float32 [B, H, S, E] query, keys and values, no dropout, no mask or a boolean one."""
    tensors = [arg_example(node, i) for i in range(3)]
    if not all(isinstance(t, torch.Tensor) and t.dim() == 4 and t.dtype == torch.float32 for t in tensors):
        return False
    mask = arg_value(node, 3, "attn_mask")
    return nn._without_dropout(node) and (mask is None or (isinstance(mask, torch.Tensor) and mask.dtype == torch.bool))


def _whole(value: ir.Value) -> ir.Value:
    """``value`` before the Slices that take all of it (``x[:, :]`` in the model's indexing:
    start 0, an end past any size, step 1), which the optimizer removes only later."""
    while True:
        node = value.producer()
        if node is None or node.op_type != "Slice" or node.domain not in ("", "ai.onnx") or len(node.inputs) < 3:
            return value
        bounds = [i.const_value.numpy().reshape(-1) if i is not None and i.const_value is not None else None for i in node.inputs[1:]]
        starts, ends = bounds[0], bounds[1]
        steps = bounds[3] if len(bounds) > 3 else np.ones_like(starts) if starts is not None else None
        if any(b is None for b in (starts, ends, steps)) or (starts != 0).any() or (ends < 2**62).any() or (steps != 1).any():
            return value
        value = node.inputs[0]


def _source_heads(x: ir.Value, heads: int) -> ir.Value | None:
    """x's K/V heads before ``repeat_kv`` copied them for the query groups ([B, Hkv, S, E]): the
    input of its ``[:, :, None]``; x itself when it has one head per query head; None otherwise."""
    grouped = nn._head_repeat_source(x)
    if grouped is None:
        return x if x.shape is not None and x.shape[1] == heads else None
    unsqueeze = _whole(grouped).producer()
    if unsqueeze is None or unsqueeze.op_type != "Unsqueeze" or unsqueeze.domain not in ("", "ai.onnx") or len(unsqueeze.inputs) < 2:
        return None
    axes = unsqueeze.inputs[1].const_value
    return _whole(unsqueeze.inputs[0]) if axes is not None and axes.numpy().reshape(-1).tolist() == [2] else None


def _cache_parts(x: ir.Value) -> tuple[ir.Value, ir.Value] | None:
    """(past, new) of ``x = cat((past, new), dim=2)`` of two [B, Hkv, *, E] tensors, or None."""
    concat = x.producer()
    if concat is None or concat.op_type != "Concat" or concat.domain not in ("", "ai.onnx") or len(concat.inputs) != 2:
        return None
    axis = concat.attributes.get("axis")
    if axis is None or axis.as_int() not in (2, -2) or any(v.shape is None or v.shape.rank() != 4 for v in concat.inputs):
        return None
    return concat.inputs[0], concat.inputs[1]


def _plan(query: ir.Value, key: ir.Value, value: ir.Value, attn_mask: ir.Value | None, is_causal: bool,
          enable_gqa: bool, any_cache_step: bool = False) -> dict[str, Any] | None:
    """What the kernel is given, or None where it would compute something else (module docstring).
    ``any_cache_step``: take a cache whatever the batch and new positions may be (GenAI's graphs,
    whose runner never feeds the steps the kernel refuses)."""
    if any(v.shape is None or v.shape.rank() != 4 for v in (query, key, value)):
        return None
    batch, heads, length, size = query.shape
    # Its CPU kernel refuses other head sizes ("head_size must be a multiple of 8").
    if not (isinstance(heads, int) and isinstance(size, int)) or size % 8:
        return None
    keys, values = (key, value) if enable_gqa else (_source_heads(key, heads), _source_heads(value, heads))
    if keys is None or values is None or keys.shape is None or values.shape is None:
        return None
    kv_heads = keys.shape[1]
    if not isinstance(kv_heads, int) or heads % kv_heads or values.shape[1] != kv_heads:
        return None
    if keys.shape[3] != size or values.shape[3] != size:
        return None
    if attn_mask is not None:
        rank = attn_mask.shape.rank() if attn_mask.shape is not None else None
        if rank not in (2, 4) or (rank == 4 and attn_mask.shape[1] != 1) or (is_causal):
            return None
        # The kernel's bias is [B or 1, H or 1, S, T]: a mask broadcast along S or T is not one.
        if list(attn_mask.shape)[-2:] != [length, keys.shape[2]] or (rank == 4 and attn_mask.shape[0] not in (1, batch)):
            return None
    key_parts, value_parts = _cache_parts(keys), _cache_parts(values)
    if (key_parts is None) != (value_parts is None):
        return None
    if key_parts is None:
        past_key = past_value = None
        new_key, new_value = keys, values
        if keys.shape[2] != length or values.shape[2] != length:
            return None
    else:
        if is_causal or not (any_cache_step or length == 1 or batch == 1):
            return None
        (past_key, new_key), (past_value, new_value) = key_parts, value_parts
        if new_key.shape[2] != length or new_value.shape[2] != length:
            return None
    return {
        "heads": heads, "kv_heads": kv_heads, "size": size, "past_key": past_key, "past_value": past_value,
        "new_key": new_key, "new_value": new_value, "total": keys,
    }


def _total_length(plan: dict[str, Any], attn_mask: ir.Value | None) -> ir.Value:
    """The keys' length [1] (past + new), read where it costs least: from the mask, which spans
    the keys (``_plan`` takes no other; every layer reads the same mask, so one Shape serves them
    all once common subexpressions merge), else from the parts (never from the ``cat``, which
    then stays)."""
    keys = plan["total"]
    if attn_mask is not None:
        return op.Shape(attn_mask, start=-1)
    if plan["past_key"] is None:
        return op.Shape(keys, start=2, end=3)
    return op.Add(op.Shape(plan["past_key"], start=2, end=3), op.Shape(plan["new_key"], start=2, end=3))


def _packed(x: ir.Value, heads: int, size: int) -> ir.Value:
    """[B, N, S, E] -> the kernel's [B, S, N * E]: the projection's own output where x is its heads
    split out (``y.view(B, S, N, E).transpose(1, 2)``), else x moved back."""
    transpose = x.producer()
    if transpose is not None and transpose.op_type == "Transpose" and transpose.domain in ("", "ai.onnx"):
        perm = transpose.attributes.get("perm")
        split = transpose.inputs[0].producer()
        if perm is not None and list(perm.as_ints()) == [0, 2, 1, 3] and split is not None and split.op_type == "Reshape":
            projection = split.inputs[0]
            if projection.shape is not None and list(projection.shape) == [x.shape[0], x.shape[2], heads * size]:
                return projection
    return op.Reshape(op.Transpose(x, perm=[0, 2, 1, 3]), op.Constant(value_ints=[0, 0, heads * size]))


@register("aten::scaled_dot_product_attention", supports=_kernel_types, fused=True, onnxruntime=True)
@wants_context
def aten_sdpa_group_query_attention(
    query: ir.Value,
    key: ir.Value,
    value: ir.Value,
    attn_mask: ir.Value | None = None,
    dropout_p: float = 0.0,
    is_causal: bool = False,
    scale: float | None = None,
    enable_gqa: bool = False,
    *,
    ctx: OpContext,
) -> ir.Value:
    """scaled_dot_product_attention(Tensor query, Tensor key, Tensor value, Tensor? attn_mask=None,
    float dropout_p=0.0, bool is_causal=False, *, float? scale=None, bool enable_gqa=False) -> Tensor

    One GroupQueryAttention node where it computes what ATen does (module docstring); the
    standard translation otherwise."""
    return group_query_attention(query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa, ctx=ctx)


def group_query_attention(
    query: ir.Value, key: ir.Value, value: ir.Value, attn_mask: ir.Value | None, dropout_p: float, is_causal: bool,
    scale: float | None, enable_gqa: bool, *, ctx: OpContext, any_cache_step: bool = False,
) -> ir.Value:
    """The translation's body, for callers that choose ``any_cache_step`` (see :func:`_plan`)."""
    plan = _plan(query, key, value, attn_mask, is_causal, enable_gqa, any_cache_step)
    if plan is None:
        standard = nn.aten_sdpa_opset23 if ctx.opset >= 23 else nn.aten_sdpa
        return standard(query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa)
    heads, kv_heads, size = plan["heads"], plan["kv_heads"], plan["size"]
    total = _total_length(plan, attn_mask)
    packed_query = _packed(query, heads, size)
    # The batch read from the kernel's own input: the heads' other readers keep them from being
    # rotated as packed (ort_fusions._PackedRotary).
    seqlens = op.Expand(op.Cast(op.Sub(total, op.Constant(value_ints=[1])), to=ir.DataType.INT32), op.Shape(packed_query, start=0, end=1))
    total_length = op.Cast(op.Squeeze(total, op.Constant(value_ints=[0])), to=ir.DataType.INT32)
    bias = None
    if attn_mask is not None:
        mask = attn_mask if attn_mask.shape.rank() == 4 else op.Unsqueeze(attn_mask, op.Constant(value_ints=[0, 1]))
        bias = op.Where(mask, op.Constant(value_float=0.0), op.Constant(value_float=float("-inf")))
    attributes = {
        "num_heads": heads, "kv_num_heads": kv_heads, "causal": int(is_causal),
        "scale": float(scale) if scale is not None else 1.0 / float(np.sqrt(size)),
    }
    ctx.import_opset(MICROSOFT, 1)
    inputs = [
        packed_query, _packed(plan["new_key"], kv_heads, size), _packed(plan["new_value"], kv_heads, size),
        plan["past_key"], plan["past_value"], seqlens, total_length, None, None, None, bias,
    ]
    output, present_key, present_value = ctx.op(
        "GroupQueryAttention", inputs, attributes, domain=MICROSOFT, num_outputs=3, infer=False,
    )
    batch, length = query.shape[0], query.shape[2]
    output.dtype, output.shape = ir.DataType.FLOAT, ir.Shape([batch, length, heads * size])
    for present in (present_key, present_value):
        present.dtype, present.shape = ir.DataType.FLOAT, plan["total"].shape
    if attn_mask is not None:
        # Rows with no key allowed: NaN from the kernel, zeros from ATen. [B|1, 1, S, 1] -> [B|1, S, 1].
        allowed = op.ReduceMax(op.Cast(attn_mask, to=ir.DataType.INT32), op.Constant(value_ints=[-1]), keepdims=1)
        if attn_mask.shape.rank() == 4:
            allowed = op.Squeeze(allowed, op.Constant(value_ints=[1]))
        output = op.Where(op.Cast(allowed, to=ir.DataType.BOOL), output, op.Constant(value_float=0.0))
    return op.Transpose(op.Reshape(output, op.Constant(value_ints=[0, 0, heads, size])), perm=[0, 2, 1, 3])
