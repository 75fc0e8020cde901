"""Common operators, each exported, run in ONNX Runtime and compared with eager PyTorch.

Regression cases for dispatch details: attributes typed as Python ints, ATen lists returned as
ONNX tensor sequences, integer accumulation of bool reductions, scripted torchlib functions
inlined at the model's opset, multi-output operators, RNNs and attention.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from helpers import assert_matches_eager

import torch_onnx_fx

CASES = {
 "embedding": (lambda x: F.embedding(x, torch.arange(40.).reshape(10, 4)), lambda: (torch.randint(0, 10, (3, 5)),)),
 "index": (lambda x, i: x[i, :, i], lambda: (torch.randn(5, 4, 5), torch.tensor([0, 2]))),
 "index_put": (lambda x, i, v: x.index_put((i,), v), lambda: (torch.randn(5, 4), torch.tensor([0, 2]), torch.randn(2, 4))),
 "scatter": (lambda x, i, s: x.scatter(1, i, s), lambda: (torch.zeros(3, 5), torch.tensor([[0, 1], [2, 3], [4, 0]]), torch.randn(3, 2))),
 "topk": (lambda x: torch.topk(x, 2, dim=-1), lambda: (torch.randn(3, 6),)),
 "sort": (lambda x: torch.sort(x, dim=-1, descending=True), lambda: (torch.randn(3, 6),)),
 "argmax": (lambda x: x.argmax(-1), lambda: (torch.randn(3, 6),)),
 "log_softmax": (lambda x: F.log_softmax(x, -1), lambda: (torch.randn(3, 6),)),
 "interp_bilinear": (lambda x: F.interpolate(x, scale_factor=2, mode="bilinear", align_corners=False), lambda: (torch.randn(1, 2, 4, 4),)),
 "interp_nearest": (lambda x: F.interpolate(x, size=(7, 9), mode="nearest"), lambda: (torch.randn(1, 2, 4, 4),)),
 "conv_transpose": (torch.nn.ConvTranspose2d(2, 3, 3, stride=2).eval(), lambda: (torch.randn(1, 2, 5, 5),)),
 "maxpool_idx": (lambda x: F.max_pool2d(x, 2, return_indices=True), lambda: (torch.randn(1, 2, 6, 6),)),
 "avgpool_pad": (lambda x: F.avg_pool2d(x, 3, stride=2, padding=1, count_include_pad=False), lambda: (torch.randn(1, 2, 7, 7),)),
 "pad_reflect": (lambda x: F.pad(x, (1, 2, 2, 1), mode="reflect"), lambda: (torch.randn(1, 2, 5, 5),)),
 "pad_replicate": (lambda x: F.pad(x, (1, 2, 2, 1), mode="replicate"), lambda: (torch.randn(1, 2, 5, 5),)),
 "cumsum": (lambda x: x.cumsum(1), lambda: (torch.randn(3, 6),)),
 "einsum": (lambda a, b: torch.einsum("bij,bjk->bik", a, b), lambda: (torch.randn(2, 3, 4), torch.randn(2, 4, 5))),
 "baddbmm": (lambda c, a, b: torch.baddbmm(c, a, b, beta=0.5, alpha=2), lambda: (torch.randn(2, 3, 5), torch.randn(2, 3, 4), torch.randn(2, 4, 5))),
 "masked_fill": (lambda x, m: x.masked_fill(m, float("-inf")).softmax(-1), lambda: (torch.randn(3, 6), torch.rand(3, 6) > 0.7)),
 "clamp": (lambda x: x.clamp(-0.5, 0.5), lambda: (torch.randn(3, 6),)),
 "triu": (lambda x: torch.triu(x, 1), lambda: (torch.randn(4, 4),)),
 "arange_dyn": (lambda x: x + torch.arange(x.shape[1]), lambda: (torch.randn(3, 6),)),
 "expand_repeat": (lambda x: (x.expand(2, 3, 6), x.repeat(2, 1)), lambda: (torch.randn(3, 6),)),
 "gather": (lambda x, i: torch.gather(x, 1, i), lambda: (torch.randn(3, 6), torch.tensor([[0, 1], [2, 3], [4, 5]]))),
 "split_chunk": (lambda x: (*x.split(2, dim=1), *x.chunk(3, dim=1)), lambda: (torch.randn(3, 6),)),
 "unbind_stack": (lambda x: torch.stack(x.unbind(1)[::-1], 0), lambda: (torch.randn(3, 4),)),
 "mean_var": (lambda x: (x.mean((0, 1)), x.var(1, unbiased=True), x.std(0)), lambda: (torch.randn(3, 6),)),
 "lstm": (torch.nn.LSTM(4, 5, num_layers=2, batch_first=True).eval(), lambda: (torch.randn(2, 3, 4),)),
 "gru": (torch.nn.GRU(4, 5, batch_first=True).eval(), lambda: (torch.randn(2, 3, 4),)),
 "mha_mask": (torch.nn.MultiheadAttention(8, 2, batch_first=True).eval(), lambda: (torch.randn(2, 3, 8), torch.randn(2, 3, 8), torch.randn(2, 3, 8))),
 # squeeze of a dim that is not 1 returns the tensor (diffusers' PixArt): no Squeeze node may be emitted.
 "is_all_true": (lambda x: (torch.ops.aten._is_all_true(x > -2), torch.ops.aten._is_all_true(x > 0), torch.ops.aten._is_all_true(x[:0] > 0)), lambda: (torch.randn(3, 4),)),
 "squeeze_not_one": (lambda x: (x.squeeze(1) * 2, x.squeeze(0), x.squeeze(-1)), lambda: (torch.randn(1, 4, 3),)),
 "sdpa_causal": (lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True), lambda: (torch.randn(1, 2, 5, 4), torch.randn(1, 2, 5, 4), torch.randn(1, 2, 5, 4))),
 "adaptive_max": (lambda x: F.adaptive_max_pool2d(x, (2, 3)), lambda: (torch.randn(1, 2, 6, 6),)),
 "adaptive_avg": (lambda x: F.adaptive_avg_pool2d(x, (2, 3)), lambda: (torch.randn(1, 2, 6, 7),)),
 "nonzero": (lambda x: torch.nonzero(x > 0), lambda: (torch.randn(3, 4),)),
 "int_div": (lambda x: (x // 3, x % 3, torch.div(x, 3, rounding_mode="floor")), lambda: (torch.tensor([-7, -3, 4, 9]),)),
 "bool_ops": (lambda x: (x.any(), x.all(1), ~x, x.sum()), lambda: (torch.rand(3, 4) > 0.5,)),
 "fp16_linear": (torch.nn.Linear(4, 3).half().eval(), lambda: (torch.randn(2, 4).half(),)),
 "new_ones_like": (lambda x: (torch.ones_like(x), x.new_full((2,), 3.0), torch.zeros(x.shape[0], dtype=torch.long)), lambda: (torch.randn(3, 4),)),
 "roll_flip": (lambda x: (torch.roll(x, 1, 0), x.flip(1)), lambda: (torch.randn(3, 4),)),
 "pixel_shuffle": (torch.nn.PixelShuffle(2), lambda: (torch.randn(1, 8, 3, 3),)),
 "unfold": (lambda x: F.unfold(x, 2), lambda: (torch.randn(1, 2, 4, 4),)),
 "instance_norm": (torch.nn.InstanceNorm2d(3, affine=True).eval(), lambda: (torch.randn(2, 3, 4, 4),)),
 "to_dtype_and_device": (lambda x: (x.to(torch.float16), x.to("cpu", torch.int32), x.to(dtype=torch.float64), x.to(x)), lambda: (torch.randn(3, 4) * 5,)),
 "and_or_xor": (lambda a, b: (a & b, a | b, a ^ b, (a > 0) & (b > 0)), lambda: (torch.tensor([1, 2, 3]), torch.tensor([3, 1, 2]))),
 "min_max_other": (lambda a, b: (torch.min(a, b), torch.max(a, b)), lambda: (torch.randn(3, 4), torch.randn(3, 4))),
 "diff": (lambda x, b: (torch.diff(x), torch.diff(x, n=2, dim=0, prepend=x[:1]), torch.diff(b)), lambda: (torch.randn(4, 5), torch.rand(6) > 0.5)),
 "batch_norm_no_affine": (torch.nn.BatchNorm2d(3, affine=False).eval(), lambda: (torch.randn(2, 3, 4, 4),)),
 "weight_norm": (torch.nn.utils.parametrizations.weight_norm(torch.nn.Conv1d(2, 3, 3)).eval(), lambda: (torch.randn(1, 2, 8),)),
 "weight_norm_legacy": (torch.nn.utils.weight_norm(torch.nn.Linear(4, 3), dim=None).eval(), lambda: (torch.randn(2, 4),)),
 "adaptive_avg_global": (lambda x: F.adaptive_avg_pool2d(x, 1), lambda: (torch.randn(2, 3, 5, 7),)),
 "adaptive_avg_divisible": (lambda x: F.adaptive_avg_pool2d(x, (2, 3)), lambda: (torch.randn(2, 3, 4, 9),)),
 "adaptive_avg_1d_unbatched": (lambda x: F.adaptive_avg_pool1d(x, 2), lambda: (torch.randn(3, 8),)),
 "masked_select": (lambda x, m: torch.masked_select(x, m), lambda: (torch.randn(3, 4), torch.rand(4) > 0.3)),
 "cdist": (lambda a, b: tuple(torch.cdist(a, b, p=p) for p in (0.0, 1.0, 2.0, 3.0, float("inf"))), lambda: (torch.randn(2, 5, 3), torch.randn(2, 4, 3))),
 # A NaN difference (a NaN coordinate, or inf - inf): ATen's cdist and pdist count it as NaN for
 # p = 0; for p = inf cdist's running std::max skips it and pdist's vectorized max keeps it.
 "cdist_pdist_nonfinite": (
     lambda a, b: tuple(f for p in (0.0, float("inf")) for f in (torch.cdist(a, b, p=p), F.pdist(a[0], p=p))),
     lambda: (
         torch.tensor([[[1.0, float("nan"), 0.0], [float("inf"), 2.0, 1.0], [0.5, 0.0, -1.0]]]),
         torch.tensor([[[1.0, 0.0, 0.0], [float("inf"), 2.0, 3.0], [0.0, float("-inf"), 0.0], [float("nan"), float("nan"), 0.0]]]),
     ),
 ),
 # PyTorch allows an output padding up to the dilation; ONNX Runtime's ConvTranspose rejects one
 # as large as the stride when it runs.
 "conv_transpose_output_padding_past_stride": (
     lambda x, w, b: (
         F.conv_transpose2d(x, w, b, stride=(3, 2), padding=(1, 2), output_padding=(2, 3), groups=2, dilation=(4, 4)),
         F.conv_transpose2d(x[0], w, None, stride=(1, 2), padding=(0, 4), output_padding=(0, 3), groups=2, dilation=(2, 4)),
     ),
     lambda: (torch.randn(2, 2, 4, 4), torch.randn(2, 2, 4, 5), torch.randn(4)),
 ),
 "linspace": (lambda x: (x + torch.linspace(-2.0, -3, 6), torch.linspace(0, 10, 6, dtype=torch.int64)), lambda: (torch.randn(6),)),
 "var_std_mean": (lambda x: (*torch.var_mean(x, 1), *torch.std_mean(x, (0, 1), correction=0), torch.var(x[:1], 0), x.std(), x.var(1, keepdim=True)), lambda: (torch.randn(3, 4),)),
 "kthvalue_median": (lambda x: (*torch.kthvalue(x, 2, 1), *torch.kthvalue(x, 3, 0, keepdim=True), *torch.median(x, 1), torch.median(x)), lambda: (torch.randn(5, 4),)),
 "searchsorted": (lambda s, v: (torch.searchsorted(s, v), torch.searchsorted(s, v, right=True, out_int32=True), torch.searchsorted(s[0], v)), lambda: (torch.sort(torch.randn(2, 6)).values, torch.tensor([[0.0, 1.0, -1.0], [0.5, -0.5, 2.0]]))),
 # A sorter reorders the boundaries; the count of boundaries before a value is the same in any order.
 "searchsorted_with_sorter": (lambda s, o, v: (torch.searchsorted(s, v, sorter=o), torch.searchsorted(s, v, side="right", sorter=o), torch.searchsorted(s[1], v[0], sorter=o[1])), lambda: (torch.tensor([[2.0, -1.0, 0.5, 0.5, 3.0, float("nan")], [1.0, 0.0, -2.0, 4.0, 1.0, -1.0]]), torch.tensor([[1, 2, 3, 0, 4, 5], [2, 5, 1, 0, 4, 3]]), torch.tensor([[0.5, 2.5, float("nan"), 9.0], [1.0, -3.0, 0.0, 4.0]]))),
 "signbit_fmax_fmin_prod_frexp": (lambda x, y: (torch.signbit(x), torch.fmax(x, y), torch.fmin(x, y), torch.prod(x, 1), *torch.frexp(x)), lambda: (torch.tensor([[-0.0, 0.0, 1.5, -3.0], [8.0, float("nan"), 0.3, -1e-3]]), torch.tensor([[1.0, float("nan"), -2.0, 0.5], [0.0, 1.0, float("nan"), 2.0]]))),
 "adaptive_max_uneven_with_indices": (lambda x: (*F.adaptive_max_pool2d(x, (2, 3), return_indices=True), *F.adaptive_max_pool1d(x[0], 3, return_indices=True)), lambda: (torch.randn(1, 4, 4, 4),)),
 "adaptive_max_unbatched_3d": (lambda x: (F.adaptive_max_pool2d(x, (3, 2)), F.adaptive_max_pool3d(x[None], (2, 2, 3))), lambda: (torch.randn(4, 5, 7),)),
 "adaptive_avg_uneven": (lambda x: (F.adaptive_avg_pool2d(x, (3, 5)), F.adaptive_avg_pool3d(x[:, None], (2, 2, 3)), F.adaptive_avg_pool1d(x[0], 3)), lambda: (torch.randn(2, 7, 9),)),
 "avg_pool_divisor_override": (lambda x: (F.avg_pool2d(x, 3, 1, 1, True, False, 2), F.avg_pool2d(x, (6, 6), (3, 3), (2, 3), True, True, 2), F.avg_pool3d(x[None], 2, 1, 1, True, False, 2)), lambda: (torch.randn(1, 3, 9, 9),)),
 "batch_norm_training_stats": (lambda x, w, b, rm, rv: (*torch.ops.aten.native_batch_norm(x, w, b, rm, rv, True, 0.5, 0.6), *torch.ops.aten.native_batch_norm(x, w, b, rm, rv, False, 0.5, 1e-5)), lambda: (torch.randn(5, 5, 5), torch.randn(5), torch.randn(5), torch.randn(5), torch.rand(5) + 0.5)),
 "batch_norm_train_module": (torch.nn.BatchNorm2d(3).train(), lambda: (torch.randn(4, 3, 2, 2),)),
 "pad_circular_empty_batch": (lambda x: (F.pad(x, (1, 2), mode="circular"), F.pad(x, (0, 1), mode="circular")), lambda: (torch.randn(0, 3, 3),)),
 "pad_circular_and_cropping": (lambda x: (F.pad(x, (1, 2, 2, 1), mode="circular"), F.pad(x, (-1, 2, 1, -2), mode="replicate"), F.pad(x, (-1, -1, 1, 1), mode="reflect")), lambda: (torch.randn(1, 2, 5, 5),)),
 "cross_entropy_probabilities": (lambda x, t: (F.cross_entropy(x, t), F.cross_entropy(x, t, reduction="sum"), F.cross_entropy(x, t, reduction="none")), lambda: (torch.randn(2, 3), torch.softmax(torch.randn(2, 3), 1))),
 "cummax_cummin": (lambda x, i: (*torch.cummax(x, 1), *torch.cummin(x, 0), *torch.cummax(i, 0)), lambda: (torch.randn(4, 5), torch.tensor([1, 3, 3, 2, 5, 5]))),
 "scatter_reduce_mean": (lambda x, i, s: (x.scatter_reduce(1, i, s, "mean"), x.scatter_reduce(1, i, s, "mean", include_self=False), x.scatter_reduce(1, i, s, "amax")), lambda: (torch.randn(2, 5), torch.tensor([[0, 1, 1, 4], [2, 2, 2, 0]]), torch.randn(2, 4))),
 "avg_pool_divisor_dynamic": (lambda x: F.avg_pool2d(x, 3, 2, 1, divisor_override=3), lambda: (torch.randn(2, 3, 9, 8),)),
 # every dim dynamic, channels too: torchlib's fallback divided by the window, not the divisor (off by 3.4)
 "avg_pool_divisor_all_dynamic": (lambda x: (F.avg_pool2d(x, 3, 1, 1, False, False, 2), F.avg_pool2d(x[0], 2, divisor_override=3)), lambda: (torch.randn(1, 3, 9, 9),)),
 "int_tensor_divided_by_size": (lambda ids: (ids / ids.shape[1], ids * (ids.shape[0] + 0.5)), lambda: (torch.tensor([[1, 2, 3], [4, 5, 6]]),)),
 "logit": (lambda x: (torch.logit(x, 0.2), torch.logit(x)), lambda: (torch.rand(5, 5) * 0.98 + 0.01,)),
 "zero_dim_dim_ops": (lambda x: (x.sum(0), x.prod(0), x.argmax(0), torch.logsumexp(x, 0), x.var(0), torch.max(x, 0)[1], x.cumsum(0), x.softmax(0), torch.amax(x, (0,)), torch.all(x, 0), torch.any(x, 0, keepdim=True)), lambda: (torch.tensor(3.0),)),
 "masked_var_aliases": (lambda x, m: (torch.masked._ops.var(x, 1, unbiased=True, mask=m), torch.masked._ops.std(x, 0, mask=m)), lambda: (torch.randn(3, 4), torch.tensor([[1, 0, 1, 1], [1, 1, 0, 1], [0, 1, 1, 1]]) > 0)),
 "fftn_padded": (lambda x: (torch.view_as_real(torch.fft.fftn(x, s=(3, 6))), torch.view_as_real(torch.fft.ihfft2(x[0])), torch.view_as_real(torch.fft.fft2(x, s=(5, 4)))), lambda: (torch.randn(3, 4, 5),)),
 "adaptive_pools_empty_batch": (lambda x: (F.adaptive_avg_pool1d(x[:, 0], 3), F.adaptive_avg_pool3d(x[:, None], (1, 2, 2)), *F.adaptive_max_pool2d(x, (2, 3), return_indices=True)), lambda: (torch.randn(0, 3, 4, 5),)),
 "unfold_variants": (lambda x: (F.unfold(x, 2, padding=1, stride=2), F.unfold(x[0], (2, 3), dilation=(2, 1), padding=(0, 1), stride=(1, 2)), F.unfold(x[:0], 3), F.unfold(x * float("inf"), 3)), lambda: (torch.randn(2, 3, 5, 6),)),
 "sdpa_other_ranks": (lambda q, k, v, m: (F.scaled_dot_product_attention(q[0], k[0], v[0], attn_mask=m), F.scaled_dot_product_attention(q[0, 0], k[0, 0], v[0, 0], scale=0.3), F.scaled_dot_product_attention(q[None], k[None], v[None], is_causal=True)), lambda: (torch.randn(2, 2, 5, 4), torch.randn(2, 2, 6, 4), torch.randn(2, 2, 6, 3), torch.rand(5, 6) > 0.2)),
 "nonzero_scalar": (lambda x: (torch.nonzero(x), torch.nonzero(x - 2)), lambda: (torch.tensor(2.0),)),
 # By slices along a dim (torchlib's refuses a dim), and an empty input's inverse (was [-1]).
 "unique_consecutive_by_dim": (lambda x: (*torch.unique_consecutive(x, return_inverse=True, return_counts=True, dim=1), *torch.unique_consecutive(x, return_inverse=True, return_counts=True, dim=0), *torch.unique_consecutive(x[0], return_inverse=True, dim=-1), *torch.unique_consecutive(x[0, :0], return_inverse=True, return_counts=True)), lambda: (torch.tensor([[1.0, 1.0, 2.0, 2.0, float("nan"), float("nan")], [3.0, 3.0, 3.0, 4.0, 4.0, 4.0], [3.0, 3.0, 3.0, 4.0, 4.0, 4.0]]),)),
 # A 0-d index: torch's decomposition guards on a data-dependent size.
 "take": (lambda x, i: (torch.take(x, i), torch.take(x, i[0, 0]), torch.take(x[0, 0], i[:1, :1] * 0)), lambda: (torch.randn(3, 2), torch.tensor([[0, 5], [-1, 2]]))),
 "unique_consecutive_any_dtype": (lambda x, i: (*torch.unique_consecutive(x, return_inverse=True, return_counts=True), torch.unique_consecutive(i), *torch.unique_consecutive(x[:0], return_counts=True)), lambda: (torch.tensor([[1.0, 1.0, 2.0], [2.0, 3.0, float("nan")]]), torch.tensor([3, 3, 1, 1, 1, 3]))),
 "pad_replicate_crossing_crop": (lambda x: (F.pad(x, (-4, 5, 0, 0), mode="replicate"), F.pad(x, (0, 0, 2, -4), mode="replicate"), F.pad(x[None], (-1, 2, 1, -2, 1, 0), mode="replicate")), lambda: (torch.randn(5, 3, 4, 4),)),
 "no_outputs": (lambda: torch.broadcast_shapes((), ()), lambda: ()),
 "squeeze_dims": (lambda x: (torch.squeeze(x, ()), torch.squeeze(x, (0, 2, -1)), torch.view_as_real(torch.squeeze(torch.complex(x, x), (1, -1)))), lambda: (torch.randn(1, 3, 1, 1),)),
 "diagonal_scatter": (lambda x, s, t: (torch.diagonal_scatter(x, s), torch.diagonal_scatter(x, t, 2), torch.diagonal_scatter(x, t, -2), torch.diagonal_scatter(x[None].expand(3, 10, 10), t[None].expand(3, 8), 2, 1, 2), torch.diagonal_scatter(x[:, :0], x[:0, 0])), lambda: (torch.randn(10, 10), torch.randn(10), torch.randn(8))),
 "lstm_projections": (torch.nn.LSTM(4, 6, num_layers=2, proj_size=3, bidirectional=True, batch_first=True).eval(), lambda: (torch.randn(2, 5, 4),)),
 "flatten_forms": (lambda x: (x.flatten(), x.flatten(1), x.flatten(0, 1), x.flatten(1, 2), x.flatten(-2), x[0, 0, 0, 0].flatten(), x.flatten(2, 2)), lambda: (torch.randn(2, 3, 4, 5),)),
 "bucketize_and_empty_searchsorted": (lambda x, b: (torch.bucketize(x, b), torch.bucketize(x, b, right=True, out_int32=True), torch.bucketize(x[0, 0], b), torch.searchsorted(b[:0], x[0]), torch.searchsorted(b, x[:0, 0])), lambda: (torch.randn(3, 4), torch.tensor([-1.0, 0.0, 0.5, 1.0]))),
 "mean_of_empty": (lambda x: (x.mean(), x.mean(-1), x.mean(0), x.mean((0, 1), keepdim=True), x.mean(1, dtype=torch.float64)), lambda: (torch.randn(0, 4),)),
 "resize_same_numel": (lambda x, y, z: (x.clone().resize_as_(y), x[0, 0, 0].clone().resize_as_(z), x.clone().resize_(25, 5)), lambda: (torch.randn(5, 5, 5), torch.randn(25, 5), torch.tensor(1.0))),
 "zero_dim_complex_and_indices": (lambda x, i, v: (torch.view_as_real(torch.complex(x, x * 2).sum(0)), torch.scatter_add(x, 0, i, v), torch.gather(x, 0, i)), lambda: (torch.tensor(2.5), torch.tensor(0), torch.tensor(7.0))),
 "prelu_silu": (lambda x: (F.silu(x), F.hardswish(x), F.mish(x), F.elu(x), F.leaky_relu(x, 0.1), F.softplus(x)), lambda: (torch.randn(3, 4),)),
}


# Cases whose sizes are exported dynamic: declined-versus-translated paths differ with them.
DYNAMIC = {"flatten_forms": ({0: "n", 2: "h"},), "avg_pool_divisor_dynamic": ({0: "n", 2: "h", 3: "w"},), "avg_pool_divisor_all_dynamic": ({0: "n", 1: "c", 2: "h", 3: "w"},), "int_tensor_divided_by_size": ({0: "rows", 1: "cols"},)}


@pytest.mark.parametrize("name", sorted(CASES))
def test_operator_matches_eager(name):
    fn, make_args = CASES[name]
    assert_matches_eager(fn, make_args(), dynamic_shapes=DYNAMIC.get(name))


def test_split_with_dynamic_sizes():
    def fn(x):
        first, second = x.split([2, x.shape[1] - 2], dim=1)
        return first * 2, second.sum(1)

    assert_matches_eager(
        fn, (torch.randn(3, 6),), dynamic_shapes=({0: "n", 1: "m"},), more_inputs=[((torch.randn(4, 9),), {})]
    )


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.int8, torch.uint8, torch.int64, torch.bool])
def test_cummax_and_cummin_of_dynamic_lengths(dtype):
    # Scanned dims of dynamic length (and static ones past the mask's limit) had no translation;
    # ties keep moving the index, a NaN wins until the next NaN, an empty dim stays empty.
    def values(*shape):
        x = torch.randint(-3, 4, shape).to(dtype) if dtype != torch.bool else torch.randint(0, 2, shape).bool()
        if dtype.is_floating_point:
            x.view(-1)[::7] = float("nan")
            x.view(-1)[::11] = float("-inf")
        return x

    def fn(x):
        return (*torch.cummax(x, 1), *torch.cummin(x, 0), *torch.cummax(x, -1), *torch.cummin(x[0, :, 0], 0))

    more = [((values(2, 30, 5),), {}), ((values(1, 1, 1),), {}), ((values(3, 0, 2),), {})]
    assert_matches_eager(fn, (values(4, 9, 3),), dynamic_shapes=({0: "a", 1: "b", 2: "c"},), more_inputs=more, rtol=0, atol=0)


def test_cummax_past_the_static_mask_limit():
    x = torch.randn(2, 3000)
    x[0, 100] = float("nan")
    x[1, 2000] = 99.0
    program = assert_matches_eager(lambda x: (*torch.cummax(x, 1), *torch.cummin(x, 1)), (x,), rtol=0, atol=0)
    assert [n.op_type for n in program.model.graph].count("Loop") == 2


def test_transformers_grouped_mm_fallback():
    pytest.importorskip("transformers")
    import transformers.integrations.moe  # noqa: F401 - registers torch.ops.transformers.grouped_mm_fallback

    def fn(x, weight, offs):
        return torch.ops.transformers.grouped_mm_fallback(x, weight, offs)

    # 7 rows: 3 for expert 0, none for expert 1, 4 for expert 2.
    args = (torch.randn(7, 4), torch.randn(3, 4, 5), torch.tensor([3, 3, 7], dtype=torch.int32))
    assert_matches_eager(fn, args)


def test_avg_pool_divisor_with_ceil_mode_and_dynamic_sizes_is_refused():
    # Its last window's end padding depends on the sizes; torchlib's fallback ignored the divisor.
    x = torch.randn(1, 3, 9, 9)
    with pytest.raises(torch_onnx_fx.TranslationError, match="divisor_override and ceil_mode=True needs static spatial sizes"):
        torch_onnx_fx.export(lambda x: F.avg_pool2d(x, 3, 1, 1, True, False, 2), (x,), dynamic_shapes=({2: "h", 3: "w"},), verbose=False)

