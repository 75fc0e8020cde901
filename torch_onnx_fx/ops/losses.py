"""Cross entropy where torchlib's ``SoftmaxCrossEntropyLoss`` cannot express it, the chunked ops
behind ``linear_cross_entropy(options=)``, and ``nll_loss_forward``'s total weight.

SoftmaxCrossEntropyLoss takes only class indices and needs a batch dim, so class probabilities
(plain, weighted or label-smoothed) are written out as ``-sum(target * log_softmax(self))`` and
one unbatched sample gets a batch dim of one. torchlib has no translation of the chunked ops at
all; one pass over the batch computes what their chunks do.

Registration order is dispatch preference: the three ``aten::cross_entropy_loss`` translations
accept disjoint sets of nodes and stay in the order they were written in, ahead of torchlib's.
"""

from __future__ import annotations

from typing import Any

import onnx_ir as ir
import torch
from onnxscript import opset18 as op

from torch_onnx_fx.ops import _tensors as tx
from torch_onnx_fx.registry import arg_example, limit_torchlib, register

__all__ = [
    "aten_cross_entropy_probabilities",
    "aten_cross_entropy_loss_unbatched",
    "aten_cross_entropy_loss_weighted_probabilities",
    "torch_nn_linear_cross_entropy_batch_chunked",
    "torch_nn_linear_cross_entropy_batch_chunked_no_reduction",
    "aten_nll_loss_forward",
    "aten_nll_loss2d_forward",
    "aten_multilabel_margin_loss",
]


def _full_precision_scores(node: Any) -> bool:
    """float16/bfloat16 scores go to PyTorch's decomposition: ATen rounds log_softmax to the half
    type before nll_loss reads it, which a fused SoftmaxCrossEntropyLoss does not (half of the
    losses an ulp off), and ONNX Runtime's bfloat16 SoftmaxCrossEntropyLoss does not run."""
    scores = arg_example(node)
    return not (isinstance(scores, torch.Tensor) and scores.dtype in (torch.float16, torch.bfloat16))


def _label_smoothing(node: Any) -> float:
    args = list(node.args) + [None] * 6
    return node.kwargs.get("label_smoothing", args[5]) or 0.0


def _torchlib_computes(node: Any) -> bool:
    """torchlib's SoftmaxCrossEntropyLoss leaves ``label_smoothing`` out (ONNX's operator has no
    such attribute): a smoothed loss 0.23 off at reduction="none". PyTorch's decomposition
    computes it."""
    return _full_precision_scores(node) and _label_smoothing(node) == 0.0


limit_torchlib("aten::cross_entropy_loss", _torchlib_computes)


def _probability_targets(node: Any) -> bool:
    if not _full_precision_scores(node):
        return False
    target = node.args[1].meta.get("val") if isinstance(node.args[1], torch.fx.Node) else None
    args = list(node.args) + [None] * 6
    weight = node.kwargs.get("weight", args[2])
    return isinstance(target, torch.Tensor) and target.dtype.is_floating_point and weight is None and _label_smoothing(node) == 0.0


@register("aten::cross_entropy_loss", supports=_probability_targets)
def aten_cross_entropy_probabilities(
    self: ir.Value, target: ir.Value, weight: ir.Value | None = None, reduction: int = 1, ignore_index: int = -100, label_smoothing: float = 0.0
) -> ir.Value:
    """cross_entropy_loss with class probabilities as target: -sum(target * log_softmax(self), class dim)"""
    # ONNX SoftmaxCrossEntropyLoss only takes class indices.
    class_axis = 1 if self.shape.rank() > 1 else 0
    losses = op.Neg(op.ReduceSum(op.Mul(target, op.LogSoftmax(self, axis=class_axis)), op.Constant(value_ints=[class_axis]), keepdims=0))
    if reduction == 0:
        return losses
    if reduction == 2:
        return op.ReduceSum(losses, keepdims=0)
    # Mean over the batch and any extra dims: the element count of the per-sample losses.
    return op.ReduceMean(losses, keepdims=0)


def _unbatched_class_indices(node: Any) -> bool:
    if not _full_precision_scores(node):
        return False
    args = list(node.args) + [None] * 6
    scores = args[0].meta.get("val") if isinstance(args[0], torch.fx.Node) else None
    target = args[1].meta.get("val") if isinstance(args[1], torch.fx.Node) else None
    return (
        isinstance(scores, torch.Tensor)
        and scores.dim() == 1
        and isinstance(target, torch.Tensor)
        and not target.dtype.is_floating_point
        and _label_smoothing(node) == 0.0
    )


_REDUCTIONS = {0: "none", 1: "mean", 2: "sum"}


@register("aten::cross_entropy_loss", supports=_unbatched_class_indices)
def aten_cross_entropy_loss_unbatched(
    self: ir.Value,
    target: ir.Value,
    weight: ir.Value | None = None,
    reduction: int = 1,
    ignore_index: int = -100,
    label_smoothing: float = 0.0,
) -> ir.Value:
    """cross_entropy_loss(Tensor self, Tensor target, Tensor? weight=None, int reduction=Mean, SymInt ignore_index=-100, float label_smoothing=0.0) -> Tensor

    For one sample (scores ``[C]``, a 0-d target). SoftmaxCrossEntropyLoss requires a batch
    dim; ONNX Runtime rejects ``[C]`` scores with "Reshape: Invalid position of 0" (its
    function body reshapes them to ``[N, C, -1]`` with a 0 copying a dim the input lacks).
    """
    batch = tx.ints(0)
    loss, _ = op.SoftmaxCrossEntropyLoss(
        op.Unsqueeze(self, batch),
        op.Unsqueeze(op.Cast(target, to=tx.INT64), batch),
        weight,
        reduction=_REDUCTIONS[reduction],
        ignore_index=ignore_index,
    )
    return op.Squeeze(loss, batch) if reduction == 0 else loss


def _weighted_probabilities(node: Any) -> bool:
    if not _full_precision_scores(node):
        return False
    args = list(node.args) + [None] * 6
    target = args[1].meta.get("val") if isinstance(args[1], torch.fx.Node) else None
    weight = node.kwargs.get("weight", args[2])
    return isinstance(target, torch.Tensor) and target.dtype.is_floating_point and (weight is not None or _label_smoothing(node) != 0.0)


@register("aten::cross_entropy_loss", supports=_weighted_probabilities)
def aten_cross_entropy_loss_weighted_probabilities(
    self: ir.Value,
    target: ir.Value,
    weight: ir.Value | None = None,
    reduction: int = 1,
    ignore_index: int = -100,
    label_smoothing: float = 0.0,
) -> ir.Value:
    """cross_entropy_loss(Tensor self, Tensor target, Tensor? weight=None, int reduction=Mean, SymInt ignore_index=-100, float label_smoothing=0.0) -> Tensor

    Class probabilities as target with class weights or label smoothing:
    ``-sum(weight * target * log_softmax(self))`` over the class dim. SoftmaxCrossEntropyLoss
    only takes class indices; the mean divides by the sample count, not by the weights.
    """
    rank = tx.rank(self)
    class_axis = 1 if rank > 1 else 0
    if label_smoothing != 0.0:
        # ATen computes 1 - smoothing and smoothing / classes in double and converts them to the
        # scores' dtype (float32 constants put a float64 loss 5e-8 off).
        count = self.shape[class_axis] if self.shape is not None else None
        if isinstance(count, int):
            uniform = tx.constant(label_smoothing / count, self)
        else:
            uniform = op.Div(tx.constant(label_smoothing, self), op.CastLike(op.Shape(self, start=class_axis, end=class_axis + 1), self))
        target = op.Add(op.Mul(target, tx.constant(1.0 - label_smoothing, self)), uniform)
    terms = op.Mul(target, op.LogSoftmax(self, axis=class_axis))
    if weight is not None:
        terms = op.Mul(terms, op.Reshape(weight, op.Constant(value_ints=[-1] + [1] * (rank - class_axis - 1))))
    losses = op.Neg(op.ReduceSum(terms, tx.ints(class_axis), keepdims=0))
    if reduction == 0:
        return losses
    if reduction == 2:
        return op.ReduceSum(losses, keepdims=0)
    return op.ReduceMean(losses, keepdims=0)


def _chunked_losses(
    input: ir.Value,
    linear_weight: ir.Value,
    target: ir.Value,
    linear_bias: ir.Value | None,
    weight: ir.Value | None,
    ignore_index: int,
    acc_dtype: int | None,
) -> tuple[ir.Value, ir.Value, ir.Value, ir.Value]:
    """Per-sample logits' log-softmax, each sample's class weight (0 where ignored), its
    one-hot target and its loss, all in the accumulation dtype.

    The chunked ops compute, a batch chunk at a time, exactly cross_entropy(input @ W.T + b);
    without the memory pressure the chunking answers, one pass over the batch does.
    """
    if acc_dtype is not None and acc_dtype != input.dtype:
        input, linear_weight = op.Cast(input, to=acc_dtype), op.Cast(linear_weight, to=acc_dtype)
        if linear_bias is not None:
            linear_bias = op.Cast(linear_bias, to=acc_dtype)
    logits = op.MatMul(input, op.Transpose(linear_weight, perm=[1, 0]))
    if linear_bias is not None:
        logits = op.Add(logits, linear_bias)
    log_probabilities = op.LogSoftmax(logits, axis=1)
    target = op.Cast(target, to=tx.INT64)
    ignored = op.Equal(target, tx.int64(ignore_index))
    # Ignored targets may name no class; any valid one keeps the lookups in range.
    classes = op.Where(ignored, tx.int64(0), target)
    if weight is None:
        class_weights = tx.filled_like(logits, 1.0, op.Shape(target))
    else:
        class_weights = op.CastLike(op.Gather(weight, classes), logits)
    class_weights = op.Where(ignored, op.CastLike(0.0, logits), class_weights)
    picked = op.Squeeze(op.GatherElements(log_probabilities, op.Unsqueeze(classes, tx.ints(1)), axis=1), tx.ints(1))
    losses = op.Neg(op.Mul(class_weights, picked))
    every_class = op.Range(tx.int64(0), op.Squeeze(op.Shape(logits, start=1, end=2)), tx.int64(1))
    one_hot = op.Equal(op.Unsqueeze(classes, tx.ints(1)), every_class)
    return log_probabilities, class_weights, one_hot, losses


@register("torch_nn::_linear_cross_entropy_batch_chunked")
def torch_nn_linear_cross_entropy_batch_chunked(
    input: ir.Value,
    linear_weight: ir.Value,
    target: ir.Value,
    linear_bias: ir.Value | None,
    weight: ir.Value | None,
    reduction: str,
    ignore_index: int,
    label_smoothing: float,
    batch_chunk_size: int,
    acc_policy: str,
    acc_dtype: int | None,
    allow_retain_graph: bool,
    compute_input_grad: bool,
    compute_linear_weight_grad: bool,
    compute_linear_bias_grad: bool,
) -> tuple[ir.Value, ir.Value, ir.Value, ir.Value]:
    """_linear_cross_entropy_batch_chunked(Tensor input, Tensor linear_weight, Tensor target, Tensor? linear_bias, Tensor? weight, str reduction, int ignore_index, float label_smoothing, int batch_chunk_size, str acc_policy, ScalarType acc_dtype, bool allow_retain_graph, bool compute_input_grad, bool compute_linear_weight_grad, bool compute_linear_bias_grad) -> (Tensor, Tensor, Tensor, Tensor)

    The scalar loss (mean or sum) and the gradients the op precomputes for its backward, each
    an empty tensor unless asked for: d loss / d logits is the weight-scaled
    ``softmax - one_hot(target)``, pulled back through the linear layer.
    """
    if label_smoothing != 0.0 or reduction not in ("mean", "sum"):
        raise ValueError(
            f"linear_cross_entropy chunked op: reduction={reduction!r}, label_smoothing={label_smoothing} unsupported"
        )
    log_probabilities, class_weights, one_hot, losses = _chunked_losses(
        input, linear_weight, target, linear_bias, weight, ignore_index, acc_dtype
    )
    loss = op.ReduceSum(losses, keepdims=0)
    scale = class_weights
    if reduction == "mean":
        # Normalised by the weight of the counted samples; none counted gives 0 / 0 = NaN.
        total_weight = op.ReduceSum(class_weights, keepdims=0)
        loss = op.Div(loss, total_weight)
        scale = op.Div(class_weights, total_weight)
    logits_grad = op.Mul(
        op.Sub(op.Exp(log_probabilities), op.CastLike(one_hot, log_probabilities)), op.Unsqueeze(scale, tx.ints(1))
    )

    def gradient(wanted: bool, compute: Any, empty_shape: list[int]) -> ir.Value:
        if not wanted:
            return tx.filled_like(input, 0.0, op.Constant(value_ints=empty_shape))
        return op.CastLike(compute(), input)

    grad_input = gradient(compute_input_grad, lambda: op.MatMul(logits_grad, op.CastLike(linear_weight, logits_grad)), [0, 0])
    grad_linear_weight = gradient(
        compute_linear_weight_grad,
        lambda: op.MatMul(op.Transpose(logits_grad, perm=[1, 0]), op.CastLike(input, logits_grad)),
        [0, 0],
    )
    grad_linear_bias = gradient(compute_linear_bias_grad, lambda: op.ReduceSum(logits_grad, tx.ints(0), keepdims=0), [0])
    return op.CastLike(loss, input), grad_input, grad_linear_weight, grad_linear_bias


@register("torch_nn::_linear_cross_entropy_batch_chunked_no_reduction")
def torch_nn_linear_cross_entropy_batch_chunked_no_reduction(
    input: ir.Value,
    linear_weight: ir.Value,
    target: ir.Value,
    linear_bias: ir.Value | None,
    weight: ir.Value | None,
    ignore_index: int,
    batch_chunk_size: int,
    acc_policy: str,
    acc_dtype: int | None,
) -> ir.Value:
    """_linear_cross_entropy_batch_chunked_no_reduction(Tensor input, Tensor linear_weight, Tensor target, Tensor? linear_bias, Tensor? weight, int ignore_index, int batch_chunk_size, str acc_policy, ScalarType acc_dtype) -> Tensor"""
    *_, losses = _chunked_losses(input, linear_weight, target, linear_bias, weight, ignore_index, acc_dtype)
    return op.CastLike(losses, input)


_REDUCTIONS = {0: "none", 1: "mean", 2: "sum"}


def _total_weight(target: ir.Value, weight: ir.Value | None, reduction: int, ignore_index: int, like: ir.Value) -> ir.Value:
    """ATen's second result: the summed weight of the targets that are not ``ignore_index`` (their
    count without class weights); 0 with ``reduction="none"``, which computes none."""
    if reduction == 0:
        return op.CastLike(op.Constant(value_float=0.0), like)
    kept = op.Not(op.Equal(target, op.Constant(value_int=ignore_index)))
    if weight is None:
        counted = op.CastLike(kept, like)
    else:
        # Ignored targets may lie outside the classes (-100): gathered at class 0, then dropped.
        chosen = op.Gather(weight, op.Where(kept, target, op.Constant(value_int=0)), axis=0)
        counted = op.Where(kept, chosen, op.CastLike(op.Constant(value_float=0.0), chosen))
    return op.CastLike(op.ReduceSum(counted, keepdims=0), like)


def _nll(self: ir.Value, target: ir.Value, weight: ir.Value | None, reduction: int, ignore_index: int) -> tuple[ir.Value, ir.Value]:
    unbatched = self.shape is not None and self.shape.rank() == 1
    scores, labels = (op.Unsqueeze(self, [0]), op.Unsqueeze(target, [0])) if unbatched else (self, target)
    loss = op.NegativeLogLikelihoodLoss(scores, labels, weight, ignore_index=ignore_index, reduction=_REDUCTIONS[reduction])
    if unbatched and reduction == 0:
        loss = op.Squeeze(loss, [0])
    return loss, _total_weight(target, weight, reduction, ignore_index, self)


@register("aten::nll_loss_forward")
def aten_nll_loss_forward(
    self: ir.Value, target: ir.Value, weight: ir.Value | None, reduction: int, ignore_index: int
) -> tuple[ir.Value, ir.Value]:
    """nll_loss_forward(Tensor self, Tensor target, Tensor? weight, int reduction, SymInt ignore_index) -> (Tensor output, Tensor total_weight)

    Both results as ATen computes them: torchlib's second result was the loss's element count
    (1.0 for a reduced loss), whatever the weights and ignored targets.
    """
    return _nll(self, target, weight, reduction, ignore_index)


@register("aten::nll_loss2d_forward")
def aten_nll_loss2d_forward(
    self: ir.Value, target: ir.Value, weight: ir.Value | None, reduction: int, ignore_index: int
) -> tuple[ir.Value, ir.Value]:
    """nll_loss2d_forward(Tensor self, Tensor target, Tensor? weight, int reduction, SymInt ignore_index) -> (Tensor output, Tensor total_weight)"""
    return _nll(self, target, weight, reduction, ignore_index)


def _real_scores(node: Any) -> bool:
    """float32/float64 scores (half ones go to PyTorch's decomposition, as cross entropy's), one
    sample or a batch of them."""
    scores = arg_example(node)
    return isinstance(scores, torch.Tensor) and scores.dtype in (torch.float32, torch.float64) and scores.dim() in (1, 2)


@register("aten::multilabel_margin_loss", supports=_real_scores)
def aten_multilabel_margin_loss(self: ir.Value, target: ir.Value, reduction: int = 1) -> ir.Value:
    """multilabel_margin_loss(Tensor self, Tensor target, int reduction=Mean) -> Tensor

    ATen's kernel: a sample's targets are the class indices of its ``target`` row up to the first
    negative one; the loss is the sum, over each listed target j (repeats counted) and each class
    i not listed, of max(0, 1 - x[j] + x[i]), divided by the number of classes. The terms are
    added in double and the sample's sum rounded to the scores' type; a batch's sum (or mean) adds
    those in double again, and a lone sample's result is that sum's. PyTorch's decomposition,
    which this replaces, read the indices after the first negative as class 0 and kept a batch
    dim of one for ``reduction="none"`` of one sample.
    """
    single = tx.rank(self) == 1
    scores = op.Unsqueeze(self, tx.ints(0)) if single else self
    labels = op.Cast(op.Unsqueeze(target, tx.ints(0)) if single else target, to=tx.INT64)
    # listed[n, j]: position j comes before the row's first negative index.
    listed = op.Equal(op.CumSum(op.Cast(op.Less(labels, tx.int64(0)), to=tx.INT64), tx.int64(1)), tx.int64(0))
    indices = op.Where(listed, labels, tx.int64(0))
    classes = op.Range(tx.int64(0), op.Gather(op.Shape(scores), tx.int64(1)), tx.int64(1))
    # is_target[n, i]: class i is listed in row n. [N, j, i] compares each listed index with each class.
    hits = op.And(op.Equal(op.Unsqueeze(indices, tx.ints(2)), classes), op.Unsqueeze(listed, tx.ints(2)))
    is_target = op.ReduceMax(op.Cast(hits, to=tx.INT64), tx.ints(1), keepdims=0)
    # z[n, j, i] = 1 - x[n, target j] + x[n, i], in the scores' type as ATen computes it.
    picked = op.GatherElements(scores, indices, axis=1)
    z = op.Add(op.Sub(tx.constant(1.0, scores), op.Unsqueeze(picked, tx.ints(2))), op.Unsqueeze(scores, tx.ints(1)))
    counted = op.And(
        op.And(op.Unsqueeze(listed, tx.ints(2)), op.Unsqueeze(op.Equal(is_target, tx.int64(0)), tx.ints(1))),
        op.Greater(z, tx.constant(0.0, scores)),
    )
    wide = op.Cast(z, to=ir.DataType.DOUBLE)
    sums = op.ReduceSum(op.Where(counted, wide, tx.double(0.0)), tx.ints(1, 2), keepdims=0)
    sums = op.CastLike(sums, scores)
    count = op.CastLike(op.Gather(op.Shape(scores), tx.int64(1)), scores)
    if reduction == 0 and not single:
        return op.Div(sums, count)
    total = op.ReduceSum(op.Cast(sums, to=ir.DataType.DOUBLE), tx.ints(0), keepdims=0)
    total = op.Div(total, op.Cast(count, to=ir.DataType.DOUBLE))
    if reduction == 1:
        total = op.Div(total, op.Cast(op.Gather(op.Shape(scores), tx.int64(0)), to=ir.DataType.DOUBLE))
    return op.CastLike(total, scores)
