"""Neural-network layers torchlib lacks at the level torch.export leaves them.

``adaptive_avg_pool*`` and ``_weight_norm`` appear as such in torch.export's graphs; without a
translation torch re-traces the program to decompose them into several nodes each.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

import onnx_ir as ir
import torch
from onnxscript import opset18 as op
from onnxscript import opset23

from torch_onnx_fx.ops import _tensors as tx
from torch_onnx_fx.ops import windows
from torch_onnx_fx.registry import arg_example, arg_value, float64_input, floating_input, limit_torchlib, register

__all__ = [
    "aten_weight_norm",
    "aten_adaptive_avg_pool",
    "aten_cdist_forward",
    "aten_pdist_forward",
    "transformers_grouped_mm_fallback",
    "aten_im2col",
    "aten_sdpa",
]


@register("aten::_weight_norm")
def aten_weight_norm(v: ir.Value, g: ir.Value, dim: int = 0) -> ir.Value:
    """_weight_norm(Tensor v, Tensor g, int dim=0) -> Tensor"""
    rank = v.shape.rank() if v.shape is not None else None
    if rank is None:
        raise ValueError("_weight_norm needs a weight of known rank")
    if dim < 0 and dim != -1:
        dim += rank
    axes = [a for a in range(rank) if a != dim] if dim != -1 else list(range(rank))
    norm = op.ReduceL2(v, op.Constant(value_ints=axes), keepdims=1)
    return op.Mul(v, op.Div(g, norm))


def _static_divisible_pool(node: Any) -> bool:
    """Every pooled dim static and a multiple of its output size: one (Global)AveragePool."""
    example = node.args[0].meta.get("val")
    output_size = node.args[1]
    if not isinstance(example, torch.Tensor) or not all(isinstance(o, int) and o > 0 for o in output_size):
        return False
    spatial = example.shape[-len(output_size):]
    return all(isinstance(s, int) and s % o == 0 for s, o in zip(spatial, output_size))


@register("aten::adaptive_avg_pool1d", "aten::adaptive_avg_pool2d", "aten::_adaptive_avg_pool2d", supports=_static_divisible_pool)
def aten_adaptive_avg_pool(self: ir.Value, output_size: Sequence[int]) -> ir.Value:
    """adaptive_avg_pool{1,2}d(Tensor self, SymInt[] output_size) -> Tensor"""
    spatial = [int(d) for d in self.shape[-len(output_size):]]
    unbatched = self.shape.rank() == len(output_size) + 1
    x = op.Unsqueeze(self, op.Constant(value_ints=[0])) if unbatched else self
    if all(o == 1 for o in output_size):
        pooled = op.GlobalAveragePool(x)
    else:
        kernel = [s // o for s, o in zip(spatial, output_size)]
        pooled = op.AveragePool(x, kernel_shape=kernel, strides=kernel)
    return op.Squeeze(pooled, op.Constant(value_ints=[0])) if unbatched else pooled


@register("aten::_cdist_forward")
def aten_cdist_forward(x1: ir.Value, x2: ir.Value, p: float, compute_mode: int | None = None) -> ir.Value:
    """_cdist_forward(Tensor x1, Tensor x2, float p, int? compute_mode) -> Tensor

    For p = inf ATen's cdist keeps a running std::max from 0, which never takes a NaN: a NaN
    difference is skipped (the largest of the others, 0 if all are NaN)."""
    return _distances(x1, x2, p, skip_nan_in_max=True)


def _distances(x1: ir.Value, x2: ir.Value, p: float, *, skip_nan_in_max: bool) -> ir.Value:
    """The p-norms of all pairwise row differences of ``x1`` and ``x2``."""
    # [..., P, 1, M] - [..., 1, R, M]: all pairwise differences, reduced over the last dim.
    diff = op.Abs(op.Sub(op.Unsqueeze(x1, op.Constant(value_ints=[-2])), op.Unsqueeze(x2, op.Constant(value_ints=[-3]))))
    last = op.Constant(value_ints=[-1])
    if p == 0:
        # ATen counts min(ceil(|d|), 1): a NaN difference (a NaN coordinate, or inf - inf) makes
        # the count NaN, where a comparison with 0 would count it as 1.
        nonzero = op.CastLike(op.Not(op.Equal(diff, op.CastLike(0, diff))), diff)
        return op.ReduceSum(op.Where(op.IsNaN(diff), diff, nonzero), last, keepdims=0)
    if p == float("inf"):
        if skip_nan_in_max:
            diff = op.Where(op.IsNaN(diff), op.CastLike(0, diff), diff)
        return op.ReduceMax(diff, last, keepdims=0)
    if p == 1:
        return op.ReduceSum(diff, last, keepdims=0)
    if p == 2:
        return op.Sqrt(op.ReduceSumSquare(diff, last, keepdims=0))
    return op.Pow(op.ReduceSum(op.Pow(diff, op.CastLike(p, diff)), last, keepdims=0), op.CastLike(1.0 / p, diff))


@register("aten::_pdist_forward")
def aten_pdist_forward(self: ir.Value, p: float = 2.0) -> ir.Value:
    """_pdist_forward(Tensor self, float p=2.) -> Tensor"""
    # The distances of rows i < j, in row-major order: the strict upper triangle of cdist(x, x).
    # ATen's pdist takes vectorized maxima for p = inf, which keep a NaN.
    distances = _distances(self, self, p, skip_nan_in_max=False)
    rows = op.Range(tx.int64(0), op.Squeeze(op.Shape(self, start=0, end=1)), tx.int64(1))
    upper = op.Less(op.Unsqueeze(rows, tx.ints(1)), op.Unsqueeze(rows, tx.ints(0)))
    return op.Compress(op.Reshape(distances, tx.ints(-1)), op.Reshape(upper, tx.ints(-1)), axis=0)


@register("transformers::grouped_mm_fallback")
def transformers_grouped_mm_fallback(input: ir.Value, weight: ir.Value, offs: ir.Value) -> ir.Value:
    """grouped_mm_fallback(Tensor input, Tensor weight, Tensor offs) -> Tensor

    transformers' mixture-of-experts matmul: rows of ``input`` are sorted by expert and ``offs``
    holds each expert's cumulative row count; row r uses expert #{i : offs[i] <= r}.
    """
    rows = op.Range(op.Constant(value_int=0), op.Squeeze(op.Shape(input, start=0, end=1)), op.Constant(value_int=1))
    boundaries = op.Unsqueeze(op.Cast(offs, to=ir.DataType.INT64), op.Constant(value_ints=[0]))
    passed = op.LessOrEqual(boundaries, op.Unsqueeze(rows, op.Constant(value_ints=[1])))
    expert = op.ReduceSum(op.Cast(passed, to=ir.DataType.INT64), op.Constant(value_ints=[1]), keepdims=0)
    last_expert = op.Sub(op.Squeeze(op.Shape(weight, start=0, end=1)), op.Constant(value_int=1))
    expert = op.Min(expert, last_expert)
    per_row = op.Gather(weight, expert, axis=0)  # [S, input_dim, output_dim]
    product = op.MatMul(op.Unsqueeze(input, op.Constant(value_ints=[1])), per_row)
    return op.Squeeze(product, op.Constant(value_ints=[1]))


def _static_image(node: Any) -> bool:
    example = arg_example(node)
    return isinstance(example, torch.Tensor) and all(isinstance(d, int) for d in example.shape[-3:])


def _patch_table(height: int, width: int, kernel: Sequence[int], dilation: Sequence[int], padding: Sequence[int], stride: Sequence[int]) -> np.ndarray:
    """Flat indices into the padded [H+2p, W+2p] image of every kernel offset at every block: [kh*kw, L]."""
    padded_w = width + 2 * padding[1]
    blocks = [
        (height + 2 * padding[0] - dilation[0] * (kernel[0] - 1) - 1) // stride[0] + 1,
        (width + 2 * padding[1] - dilation[1] * (kernel[1] - 1) - 1) // stride[1] + 1,
    ]
    rows = np.arange(kernel[0])[:, None, None, None] * dilation[0] + np.arange(blocks[0])[None, None, :, None] * stride[0]
    cols = np.arange(kernel[1])[None, :, None, None] * dilation[1] + np.arange(blocks[1])[None, None, None, :] * stride[1]
    return (rows * padded_w + cols).reshape(kernel[0] * kernel[1], blocks[0] * blocks[1]).astype(np.int64)


@register("aten::im2col", supports=_static_image)
def aten_im2col(
    self: ir.Value, kernel_size: Sequence[int], dilation: Sequence[int], padding: Sequence[int], stride: Sequence[int]
) -> ir.Value:
    """im2col(Tensor self, int[2] kernel_size, int[2] dilation, int[2] padding, int[2] stride) -> Tensor

    A Gather of every patch element from the zero-padded image through a static index table:
    exact (no multiplications, so inf/nan stay put) and valid for an empty batch, where
    torchlib's Reshape to -1 cannot infer a size.
    """
    rank = self.shape.rank()
    channels, height, width = (int(d) for d in self.shape[-3:])
    pads = [0] * (rank - 2) + [padding[0], padding[1]]
    x = op.Pad(self, op.Constant(value_ints=pads + pads)) if any(padding) else self
    leading = op.Shape(self, end=rank - 3)
    padded = (height + 2 * padding[0]) * (width + 2 * padding[1])
    flat = op.Reshape(x, op.Concat(leading, op.Constant(value_ints=[channels, padded]), axis=0))
    table = _patch_table(height, width, kernel_size, dilation, padding, stride)
    patches = op.Gather(flat, op.Constant(value=ir.tensor(table)), axis=rank - 2)  # [..., C, kh*kw, L]
    rows = channels * table.shape[0]
    return op.Reshape(patches, op.Concat(leading, op.Constant(value_ints=[rows, table.shape[1]]), axis=0))


def _without_dropout(node: Any) -> bool:
    """Dropout in attention is random: torchlib's translation (torch.onnx's) is kept for it, so an
    export torch.onnx accepts is accepted too; no ONNX graph can match a random eager result."""
    dropout = node.args[4] if len(node.args) > 4 else node.kwargs.get("dropout_p", 0.0)
    return not dropout


def _attention_op_fits(node: Any) -> bool:
    """sdpa that ONNX's Attention (opset 23) computes exactly: [B, H, L, E] inputs other than
    float64, no dropout, a boolean mask or one of the query's dtype."""
    query = arg_example(node)
    if not isinstance(query, torch.Tensor) or query.dim() != 4:
        return False
    mask = arg_example(node, 3)
    if mask is None and isinstance(node.kwargs.get("attn_mask"), torch.fx.Node):
        mask = node.kwargs["attn_mask"].meta.get("val")
    mask_ok = mask is None or mask.dtype in (torch.bool, query.dtype)
    # Its scale is a float32 attribute, and ONNX Runtime's float64 kernel was 6e-8 off eager.
    return _without_dropout(node) and mask_ok and query.dtype != torch.float64


@register("aten::scaled_dot_product_attention", min_opset=23, supports=_attention_op_fits, fused=True)
def aten_sdpa_opset23(
    query: ir.Value,
    key: ir.Value,
    value: ir.Value,
    attn_mask: ir.Value | None = None,
    dropout_p: float = 0.0,
    is_causal: bool = False,
    scale: float | None = None,
    enable_gqa: bool = False,
) -> ir.Value:
    """scaled_dot_product_attention(Tensor query, Tensor key, Tensor value, Tensor? attn_mask=None,
    float dropout_p=0.0, bool is_causal=False, *, float? scale=None, bool enable_gqa=False) -> Tensor

    One standard Attention node: same masks (True attends; float masks add), same top-left
    causal alignment, grouped K/V heads from the shapes (also where the model repeated them
    itself), zeros for a fully masked query row.
    Only non-default attributes are set. Registered first: preferred where the opset has it.
    """
    attributes: dict[str, Any] = {}
    key_source, value_source = _head_repeat_source(key), _head_repeat_source(value)
    if key_source is not None and value_source is not None:
        # K/V repeated for the query heads that share them (repeat_kv): Attention groups the
        # query heads itself from the shapes, so it takes the [B, Hkv, S, E] heads uncopied.
        axis = op.Constant(value_ints=[2])
        key, value = op.Squeeze(key_source, axis), op.Squeeze(value_source, axis)
    if is_causal:
        attributes["is_causal"] = 1
    if scale is not None:
        attributes["scale"] = float(scale)
    output, *_ = opset23.Attention(query, key, value, attn_mask, **attributes)
    return output


def _repeat_heads(x: ir.Value, query: ir.Value) -> ir.Value:
    """enable_gqa: each of x's heads (dim -3) repeated for the query heads that share it, in
    place (ATen's repeat_interleave), as one Expand of a new axis and a Reshape."""
    rank = x.shape.rank()
    heads, kv_heads = query.shape[-3], x.shape[-3]
    if not (isinstance(heads, int) and isinstance(kv_heads, int)):
        raise ValueError("scaled_dot_product_attention with enable_gqa needs static head counts")
    if heads == kv_heads:
        return x
    grouped = op.Unsqueeze(x, op.Constant(value_ints=[rank - 2]))  # [..., Hkv, 1, S, E]
    repeated = op.Expand(grouped, op.Constant(value_ints=[1] * (rank - 2) + [heads // kv_heads, 1, 1]))
    shape = op.Concat(op.Shape(x, end=rank - 3), op.Constant(value_ints=[heads]), op.Shape(x, start=rank - 2), axis=0)
    return op.Reshape(repeated, shape)


def _head_repeat_source(x: ir.Value) -> ir.Value | None:
    """The ``[B, Hkv, 1, S, E]`` tensor that an Expand along its new axis and a Reshape turned into
    ``x`` (``[B, Hkv * G, S, E]``: transformers' ``repeat_kv``), or None. Attention can broadcast
    it over the query groups instead of reading a materialized copy of every head."""
    reshape = x.producer()
    copied = reshape.inputs[0] if reshape is not None and reshape.op_type == "Reshape" and reshape.domain in ("", "ai.onnx") else None
    # A clone between them (``.contiguous()``, or reshape's copy as some decompositions write it).
    while copied is not None and copied.producer() is not None and copied.producer().op_type == "Identity" and copied.producer().domain in ("", "ai.onnx"):
        copied = copied.producer().inputs[0]
    expand = copied.producer() if copied is not None else None
    if expand is None or expand.op_type != "Expand" or expand.domain not in ("", "ai.onnx"):
        return None
    grouped, repeated = expand.inputs[0], expand.outputs[0]
    if any(v.shape is None for v in (grouped, repeated, x)) or grouped.shape.rank() != 5 or x.shape.rank() != 4:
        return None
    source, copies, flat = list(grouped.shape), list(repeated.shape), list(x.shape)
    group = copies[2]
    if source[2] != 1 or not isinstance(group, int) or any(source[i] != copies[i] for i in (0, 1, 3, 4)):
        return None
    heads = source[1] * group if isinstance(source[1], int) else None
    return grouped if flat == [source[0], heads, source[3], source[4]] else None


def _grouped_heads(
    query: ir.Value, key: ir.Value, value: ir.Value, attn_mask: ir.Value | None, enable_gqa: bool
) -> tuple[ir.Value, ir.Value, int, int, int] | None:
    """``(key, value, kv_heads, group, value_dim)`` with K/V as ``[B, Hkv, 1, S, E]``, when the
    query heads share K/V heads (``enable_gqa``, or K/V repeated by ``repeat_kv``), the head counts
    and sizes are static and the mask broadcasts over the groups (none, 2-D, or one for every
    head); None otherwise."""
    if query.shape is None or query.shape.rank() != 4 or not all(isinstance(query.shape[i], int) for i in (1, 3)):
        return None
    if attn_mask is not None and not (
        attn_mask.shape is not None and (attn_mask.shape.rank() <= 2 or (attn_mask.shape.rank() == 4 and attn_mask.shape[1] == 1))
    ):
        return None
    if enable_gqa:
        if any(v.shape is None or v.shape.rank() != 4 or not isinstance(v.shape[1], int) for v in (key, value)):
            return None
        kv_heads, value_dim = key.shape[1], value.shape[3]
    else:
        key, value = _head_repeat_source(key), _head_repeat_source(value)
        if key is None or value is None or key.shape[1] != value.shape[1]:
            return None
        kv_heads, value_dim = key.shape[1], value.shape[4]
    heads = query.shape[1]
    if not isinstance(kv_heads, int) or not isinstance(value_dim, int) or kv_heads == heads or heads % kv_heads:
        return None
    if enable_gqa:
        # Only once the grouping is certain: a declined case leaves no nodes behind.
        axis = op.Constant(value_ints=[2])
        key, value = op.Unsqueeze(key, axis), op.Unsqueeze(value, axis)
    return key, value, kv_heads, heads // kv_heads, value_dim


@register("aten::scaled_dot_product_attention", supports=_without_dropout)
def aten_sdpa(
    query: ir.Value,
    key: ir.Value,
    value: ir.Value,
    attn_mask: ir.Value | None = None,
    dropout_p: float = 0.0,
    is_causal: bool = False,
    scale: float | None = None,
    enable_gqa: bool = False,
) -> ir.Value:
    """scaled_dot_product_attention(Tensor query, Tensor key, Tensor value, Tensor? attn_mask=None,
    float dropout_p=0.0, bool is_causal=False, *, float? scale=None, bool enable_gqa=False) -> Tensor

    softmax(q k^T * scale + mask) v over the last two dims, any leading dims. A query row whose
    keys are all masked out gives zeros, as ATen does: with a boolean mask the weights are
    masked again after the Softmax (torchlib's translation fills masked scores with the lowest
    float instead, so such a row averages every value: silently wrong on padded positions);
    with a float mask a row of -inf gives NaN weights, replaced by zeros.
    """
    head_dim, rank = query.shape[-1], key.shape.rank()
    grouped = _grouped_heads(query, key, value, attn_mask, enable_gqa)
    if grouped is not None:
        # Query heads that share a K/V head as one more axis, [B, Hkv, G, L, E], against K/V of
        # [B, Hkv, 1, S, E]: MatMul broadcasts them instead of copying every K/V head G times
        # (the same products and sums; decode steps read the cache once).
        key, value, kv_heads, group, value_dim = grouped
        heads, rank = query.shape[1], 5
        query = op.Reshape(query, op.Constant(value_ints=[0, kv_heads, group, -1, head_dim]))
        if attn_mask is not None and attn_mask.shape.rank() == 4:
            attn_mask = op.Unsqueeze(attn_mask, op.Constant(value_ints=[1]))
        output = _attention(query, key, value, attn_mask, is_causal, scale, head_dim, rank)
        return op.Reshape(output, op.Constant(value_ints=[0, heads, -1, value_dim]))
    if enable_gqa:
        key, value = _repeat_heads(key, query), _repeat_heads(value, query)
    return _attention(query, key, value, attn_mask, is_causal, scale, head_dim, rank)


def _attention(
    query: ir.Value, key: ir.Value, value: ir.Value, attn_mask: ir.Value | None, is_causal: bool, scale: float | None,
    head_dim: Any, rank: int,
) -> ir.Value:
    """softmax(q k^T * scale + mask) v over the last two dims, for ``rank``-D inputs (see aten_sdpa)."""
    if scale is None and not isinstance(head_dim, int):
        scale_value = op.Div(op.CastLike(1.0, query), op.Sqrt(op.CastLike(op.Shape(query, start=-1), query)))
    else:
        # In the query's own dtype: a Python float goes through float32 in CastLike, which put
        # float64 attention 1.5e-8 off eager.
        factor = 1.0 / float(np.sqrt(head_dim)) if scale is None else scale
        scale_value = op.Constant(value=ir.tensor(np.array(factor, dtype=query.dtype.numpy())))
    perm = list(range(rank - 2)) + [rank - 1, rank - 2]
    scores = op.Mul(op.MatMul(query, op.Transpose(key, perm=perm)), scale_value)
    if is_causal:
        # query i sees keys j <= i (top-left aligned, as ATen does for L != S).
        rows = op.Shape(query, start=-2, end=-1)
        cols = op.Shape(key, start=-2, end=-1)
        ones = op.Expand(op.Constant(value=ir.tensor(np.array(True))), op.Concat(rows, cols, axis=0))
        allowed = op.Cast(op.Trilu(op.Cast(ones, to=ir.DataType.INT64), upper=0), to=ir.DataType.BOOL)
        if attn_mask is None or attn_mask.dtype == ir.DataType.BOOL:
            attn_mask = allowed if attn_mask is None else op.And(allowed, attn_mask)
        else:
            # A float mask with is_causal (ATen accepts both): the keys ahead get -inf added.
            ahead = op.Where(allowed, op.CastLike(0.0, attn_mask), op.CastLike(float("-inf"), attn_mask))
            attn_mask = op.Add(attn_mask, ahead)
    if attn_mask is None:
        weights = op.Softmax(scores, axis=-1)
    elif attn_mask.dtype == ir.DataType.BOOL:
        zero = op.CastLike(0.0, scores)
        weights = op.Where(attn_mask, op.Softmax(op.Where(attn_mask, scores, op.CastLike(float("-inf"), scores)), axis=-1), zero)
    else:
        weights = op.Softmax(op.Add(scores, op.CastLike(attn_mask, scores)), axis=-1)
        weights = op.Where(op.IsNaN(weights), op.CastLike(0.0, weights), weights)
    return op.MatMul(weights, value)


def _lstm_without_projections(node: Any) -> bool:
    """torchlib's LSTM ignores proj_size (its hidden state then has another size than the cell
    state); torch's decomposition unrolls those LSTMs instead."""
    states = node.args[1]
    hidden, cell = (a.meta.get("val") if isinstance(a, torch.fx.Node) else None for a in states)
    return hidden is None or cell is None or hidden.shape[-1] == cell.shape[-1]


# ONNX Runtime has no float64 LSTM or GRU kernel (the model fails when run); torch's
# decomposition unrolls float64 recurrences into float64 products instead.
limit_torchlib("aten::lstm.input", lambda node: _lstm_without_projections(node) and not float64_input(node))
limit_torchlib("aten::gru.input", lambda node: not float64_input(node))


def _batched_float_columns(node: Any) -> bool:
    example = arg_example(node)
    return not float64_input(node) and isinstance(example, torch.Tensor) and example.dim() == 3


# F.fold: ONNX Runtime has no float64 Col2Im kernel (the model did not load), and torchlib's
# Col2Im takes batched columns only (an unbatched fold was an invalid model); torch's
# decomposition, an index_put sum, computes both.
limit_torchlib("aten::col2im", _batched_float_columns)


def _output_padding_past_stride(node: torch.fx.Node) -> bool:
    """A floating transposed convolution whose output padding is as large as its stride on some
    axis (PyTorch allows it below the dilation), which ONNX Runtime's ConvTranspose rejects when
    it runs."""
    if not floating_input(node) or not isinstance(arg_example(node, 1), torch.Tensor):
        return False
    spatial = arg_example(node, 1).dim() - 2
    if node.target == torch.ops.aten.convolution.default:
        if not arg_value(node, 6, "transposed", False):
            return False
        stride, extra = arg_value(node, 3, "stride", 1), arg_value(node, 7, "output_padding", 0)
    else:
        stride, extra = arg_value(node, 3, "stride", 1), arg_value(node, 5, "output_padding", 0)
    strides, extras = windows.per_axis(stride, spatial, [1] * spatial), windows.per_axis(extra, spatial, [0] * spatial)
    if not all(isinstance(i, int) for i in strides + extras):
        return False
    return any(e >= s for s, e in zip(strides, extras))


def _transposed_conv(
    input: ir.Value, weight: ir.Value, bias: ir.Value | None, stride: Any, padding: Any, output_padding: Any, groups: int, dilation: Any,
) -> ir.Value:
    """The output padding moved into the end pads (the rows it adds past the cropped end are rows
    the full transposed product has): ``pads_end = padding - output_padding``; where that is
    negative the rows lie past the full product, which gives them the bias only."""
    spatial = weight.shape.rank() - 2
    strides, dilations = windows.per_axis(stride, spatial, [1] * spatial), windows.per_axis(dilation, spatial, [1] * spatial)
    pads, extras = windows.per_axis(padding, spatial, [0] * spatial), windows.per_axis(output_padding, spatial, [0] * spatial)
    unbatched = input.shape.rank() == spatial + 1
    x = op.Unsqueeze(input, op.Constant(value_ints=[0])) if unbatched else input
    ends = [max(p - e, 0) for p, e in zip(pads, extras)]
    beyond = [max(e - p, 0) for p, e in zip(pads, extras)]
    inputs = [x, weight] + ([bias] if bias is not None and not any(beyond) else [])
    y = op.ConvTranspose(*inputs, strides=strides, pads=pads + ends, dilations=dilations, group=groups)
    if any(beyond):
        y = op.Pad(y, op.Constant(value_ints=[0] * (spatial + 2) + [0, 0] + beyond))
        if bias is not None:
            y = op.Add(y, op.Reshape(bias, op.Constant(value_ints=[-1] + [1] * spatial)))
    return op.Squeeze(y, op.Constant(value_ints=[0])) if unbatched else y


@register("aten::conv_transpose1d", "aten::conv_transpose2d.input", "aten::conv_transpose3d.input", supports=_output_padding_past_stride)
def aten_conv_transpose_output_padding(
    input: ir.Value, weight: ir.Value, bias: ir.Value | None = None, stride: Any = 1, padding: Any = 0,
    output_padding: Any = 0, groups: int = 1, dilation: Any = 1,
) -> ir.Value:
    """conv_transpose{1,2,3}d(Tensor input, Tensor weight, Tensor? bias=None, SymInt[] stride=1, SymInt[] padding=0,
    SymInt[] output_padding=0, SymInt groups=1, SymInt[] dilation=1) -> Tensor, output_padding >= stride"""
    return _transposed_conv(input, weight, bias, stride, padding, output_padding, groups, dilation)


@register("aten::convolution", supports=_output_padding_past_stride)
def aten_convolution_output_padding(
    input: ir.Value, weight: ir.Value, bias: ir.Value | None, stride: Any, padding: Any, dilation: Any,
    transposed: bool, output_padding: Any, groups: int,
) -> ir.Value:
    """convolution(Tensor input, Tensor weight, Tensor? bias, SymInt[] stride, SymInt[] padding, SymInt[] dilation,
    bool transposed, SymInt[] output_padding, SymInt groups) -> Tensor, transposed with output_padding >= stride"""
    return _transposed_conv(input, weight, bias, stride, padding, output_padding, groups, dilation)
