"""The everyday operators' own translations (ops/elementwise.py, layout.py, layers.py): each case
runs in ONNX Runtime against eager PyTorch and must be translated by torch_onnx_fx, not torchlib."""

from __future__ import annotations

import collections
from typing import Any, Callable, Iterator

import pytest
import torch

from helpers import Fn, assert_matches_eager
from torch_onnx_fx.registry import OURS, TORCHLIB
from torch_onnx_fx.translate import walk


@pytest.fixture
def sources(monkeypatch: pytest.MonkeyPatch) -> Iterator[collections.Counter]:
    """Which table layer each translated node's translation came from, by target."""
    chosen: collections.Counter = collections.Counter()
    choose = walk.choose

    def spy(candidates: Any, args: Any, kwargs: Any) -> Any:
        translation = choose(candidates, args, kwargs)
        chosen[translation.source] += 1
        return translation

    monkeypatch.setattr(walk, "choose", spy)
    yield chosen


f32 = lambda *shape: torch.randn(*shape)  # noqa: E731


def _written(x: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
    y = x.clone()
    y[:, 1:3] = s[:, :2]
    y[-1, ::2] += 1
    return y

f16 = lambda *shape: torch.randn(*shape).half()  # noqa: E731
i64 = lambda *shape: torch.randint(-5, 6, shape)  # noqa: E731

CASES: dict[str, tuple[Callable[..., Any], tuple[Any, ...]]] = {
    "add_alpha": (lambda x, y: torch.add(x, y, alpha=3), (f32(2, 3), f32(3))),
    "add_scalar_int": (lambda x: x + 7, (i64(4),)),
    "add_bool": (lambda x, y: torch.add(x, y), (i64(5) > 0, i64(5) < 0)),
    "sub_alpha_int": (lambda x, y: torch.sub(x, y, alpha=2), (i64(4), i64(4))),
    # A number as other with alpha: both were int64/float32 constants, an Add ONNX Runtime refused
    # for int32 and float64 tensors.
    "add_number_alpha": (
        lambda a, b, c, u: (torch.add(a, 3, alpha=2), torch.sub(b, 0.3, alpha=2), torch.add(c, 0.3, alpha=-3), torch.add(u, 3, alpha=-1), torch.add(a, 2**33 + 1, alpha=3)),
        (i64(4).int(), torch.randn(5, dtype=torch.float64), f32(5), torch.arange(6, dtype=torch.uint8)),
    ),
    "mul_bool": (lambda x, y: x * y, (i64(6) > 0, i64(6) > -2)),
    "mul_half_scalar": (lambda x: x * 0.5, (f16(3, 2),)),
    "neg_int": (lambda x: -x, (i64(5),)),
    "float_functions": (lambda x: (x.cos(), x.sin(), x.tanh(), (x * x + 0.1).rsqrt()), (f32(3, 4),)),
    "silu_half": (torch.nn.functional.silu, (f16(4, 4),)),
    "pow_scalar": (lambda x: (x.pow(2), (x * x).pow(0.5), x.pow(-1)), (f32(5),)),
    "comparisons": (lambda x, y: (x == y, x != y, x <= y, x >= y, x < 0.5, x > -1), (f32(6), f32(6))),
    "comparisons_int": (lambda x: (x == 2, x != 2, x <= 1, x >= -1), (i64(7),)),
    "eq_bool": (lambda x, y: x == y, (i64(5) > 0, i64(5) < 2)),
    "view_reshape": (lambda x: (x.view(3, -1), x.reshape(-1), x.view(12, 1)), (f32(3, 4),)),
    "view_empty": (lambda x: x.view(0, 4), (f32(0, 2, 2),)),
    "expand": (lambda x: x.expand(3, -1, 4), (f32(1, 2, 1),)),
    "unsqueeze_transpose": (lambda x: x.unsqueeze(-1).transpose(0, -2), (f32(2, 3),)),
    "slices": (lambda x: (x[1:], x[:, ::2], x[-3:-1], x[:, 5:]), (f32(4, 5),)),
    "select": (lambda x: (x[1], x[:, -1]), (f32(3, 4),)),
    "cat": (lambda x, y: torch.cat([x, y, x], dim=-1), (f32(2, 3), f32(2, 1))),
    "new_ones_and_cast": (lambda x: (x.new_ones(2, 3, dtype=torch.int64), x.to(torch.int32), (x > 0).long()), (f32(2, 2),)),
    "arange": (lambda x: torch.arange(x.shape[0]) + torch.arange(2, 2 + x.shape[0]) * torch.arange(1, 3 * x.shape[0], 3), (f32(5),)),
    "gather": (lambda x, i: torch.gather(x, 1, i), (f32(3, 4), torch.randint(0, 4, (3, 2)))),
    "relu_abs_log_div": (lambda x, y: (torch.relu(x), x.abs(), (x * x + 1).log(), x / y, x / 4), (f32(3, 3), f32(3, 3))),
    "abs_int": (lambda x: x.abs(), (i64(6),)),
    "where": (lambda c, x, y: (torch.where(c, x, y), torch.where(c, x, 0.5), torch.where(c, 2, y)), (i64(4) > 0, f32(4), f32(4))),
    "permute_contiguous_type_as": (lambda x, i: (x.permute(2, -3, 1).contiguous(), i.type_as(x)), (f32(2, 3, 4), i64(5))),
    "split_chunk": (lambda x: (*x.split(2, dim=-1), *x.chunk(2), *x.split([1, 4], dim=1)), (f32(4, 5),)),
    "addmm": (lambda b, m1, m2: (torch.addmm(b, m1, m2), torch.addmm(b, m1, m2, beta=0.5, alpha=2)), (f32(4), f32(3, 5), f32(5, 4))),
    "fills": (lambda x, b: (torch.zeros(2, 3), torch.zeros_like(x), torch.ones_like(b), torch.full_like(x, 2.5), torch.full_like(b, True), torch.zeros(2, dtype=torch.int64)), (f32(2, 2), i64(3) > 0)),
    "fills_wrap_as_in_torch": (lambda x: (torch.full_like(x, -9), x.masked_fill(x > 3, -2)), (torch.arange(6, dtype=torch.uint8),)),
    "clone_new_zeros_masked_fill": (lambda x, m: (x.clone(), x.new_zeros(2, 2), x.masked_fill(m, -1.5), (x > 0).masked_fill(m, True)), (f32(3, 4), i64(3, 4) > 1)),
    "matmul": (lambda a, b, v: (a @ b, v @ b, a @ b[:, 0], torch.matmul(a.expand(2, 3, 4), b)), (f32(3, 4), f32(4, 5), f32(4))),
    "convolutions": (
        lambda x, w1, w2: (
            torch.nn.functional.conv1d(x, w1, stride=2, padding=1),
            torch.nn.functional.conv2d(x.unsqueeze(-1).expand(1, 4, 9, 3), w2, padding=(1, 0), dilation=(2, 1), groups=2),
        ),
        (f32(1, 4, 9), f32(6, 4, 3), f32(4, 2, 3, 2)),
    ),
    "max_pools": (
        lambda x: (
            torch.nn.functional.max_pool1d(x, 3, stride=2, padding=1),
            torch.nn.functional.max_pool2d(x.unsqueeze(-1).expand(1, 2, 9, 5), (3, 2), ceil_mode=True),
            torch.nn.functional.max_pool2d((x * 10).to(torch.uint8).unsqueeze(-1).expand(1, 2, 9, 4), 2, dilation=(2, 1)),
        ),
        (f32(1, 2, 9),),
    ),
    "third_batch": (
        lambda x, i, b, j: (
            x.sigmoid(), torch.multiply(x, x), ~b, ~i, x.detach(), x.to(torch.float64), i.to(torch.float32),
            x[:1].expand_as(x), x.index_select(1, j), x.index_select(0, j[1]),
            torch.stack([x, x * 2], dim=-1), torch.bmm(x.unsqueeze(0), x.transpose(0, 1).unsqueeze(0)),
            torch.mm(x, x.transpose(0, 1)), x.softmax(-1), x.sum([0]), x.sum([-1, 0], keepdim=True),
        ),
        (f32(3, 4), i64(5), i64(3) > 0, torch.tensor([2, 0, 3, 3])),
    ),
    "cumsum_mean": (lambda x: (x.cumsum(1), x.mean(-1), x.mean([0, 1], keepdim=True), torch.arange(6).cumsum(0)), (f32(3, 4),)),
    # NaN is the extreme in ATen, the first of ties wins; without a dim the kept dims are all 1.
    "argmax_argmin": (
        lambda x, i: (x.argmax(1), x.argmin(-1, keepdim=True), x.argmax(keepdim=True), i.argmin(), x[0, 0].argmax(0)),
        (torch.tensor([[1.0, float("nan"), 3.0, float("nan")], [5.0, 2.0, 7.0, 7.0], [0.0, -1.0, -1.0, 2.0]]), i64(2, 5)),
    ),
    "unbind": (lambda x: (*x.unbind(1), *x.unbind(-1), *x[:1].unbind(0)), (f32(2, 3, 2),)),
    "repeat_interleave": (
        lambda x, i: (x.repeat_interleave(3, dim=1), x.repeat_interleave(2), i.repeat_interleave(2, dim=-1), x[:0].repeat_interleave(2, dim=0)),
        (f32(2, 3), i64(2, 2)),
    ),
    # Softmax asked in float32 of float32 or float16, half precision computed in float32 and
    # rounded once; integers and bools summed in int64; empty_like (unset values) then filled.
    "softmax_dtypes": (
        lambda x: (x.softmax(-1, dtype=torch.float32), x.half().softmax(0, dtype=torch.float32), x.half().softmax(1), x.bfloat16().softmax(1), x.softmax(1, dtype=torch.float64)),
        (f32(3, 5) * 4,),
    ),
    "cumsum_to_int64_and_fills": (
        lambda i, x: (i.to(torch.int32).cumsum(0), (i > 0).cumsum(-1), i.to(torch.uint8).cumsum(1), i.to(torch.int32).cumsum(0, dtype=torch.int32), torch.empty_like(x).fill_(2.5) + x),
        (i64(4, 3), f32(3)),
    ),
    # Clamp keeps NaN, ``min > max`` gives max, float64 bounds stay float64; topk with NaN the largest.
    "clamp_topk": (
        lambda x, i: (
            x.clamp(-0.5, 0.5), x.clamp(min=0.2), x.clamp(max=-0.1), x.clamp(1.0, 0.0), x.double().clamp(1e-300, 1e-299),
            i.clamp(-2, 3), i.to(torch.int8).clamp(max=0), *torch.topk(x, 2), *torch.topk(i, 3, dim=0, largest=False),
        ),
        (torch.tensor([[0.1, float("nan"), -3.0, 0.7], [2.0, -0.2, 0.3, float("inf")], [1e-3, -1.0, 0.0, 5.0]]), torch.tensor([[4, -2, 0], [1, 3, -5], [2, -1, 6], [-3, 5, 1]])),
    ),
    # One index tensor anywhere (a Gather), several from the first dim on (a GatherND), negative
    # indices and int32 ones; CLIP's pooled output reads hidden[arange(batch), ids.argmax(-1)].
    "index_tensor": (
        lambda x, i, j, ids: (x[:, i], x[j, i[0]], x[i[1].to(torch.int32)], x[torch.arange(2), ids.argmax(-1)]),
        (f32(3, 5, 2), torch.tensor([[0, -1], [2, 2]]), torch.tensor([[2], [-3]]), torch.randint(0, 9, (2, 5))),
    ),
    # Rows of the first dims overwritten (negative, int32, 2-D and 0-d indices, values broadcast),
    # a permutation inverted as mixture-of-experts routing does, and integer and bool sums with
    # duplicate indices.
    "index_put": (
        lambda x, i, j, m, p, k, rows, big: (
            x.index_put((i,), x[:3] * 2), x.index_put((i,), x[0, :1]), x.index_put((i, m), -x[0, :3]),
            x.index_put((i.to(torch.int32),), x[1:4]), x.index_put((rows,), x[:4].view(2, 2, 3)),
            x.index_put((i[0],), x[5]), torch.empty_like(p).index_put_((p,), torch.arange(p.numel())),
            k.to(torch.int8).index_put((j,), big, accumulate=True),
            (k > 0).index_put((j,), k[:3] < 0, accumulate=True),
        ),
        (
            f32(6, 3), torch.tensor([4, -1, 0]), torch.tensor([1, 1, -5]), torch.tensor([2, 0, -1]), torch.randperm(9),
            i64(6, 3), torch.tensor([[0, 1], [5, 4]]), torch.full((3, 3), 120, dtype=torch.int8),
        ),
    ),
    # What the generated transformers corpus still sent to torchlib: single-operator float
    # functions, ones, constants made in forward, triangles, repeats and constant padding (negative
    # amounts crop; fills of the tensor's dtype).
    "exp_sqrt_reciprocal_erf": (
        lambda x, h: (
            x.exp(), x.abs().sqrt(), x.reciprocal(), x.erf(), h.exp(), h.erf(), x.double().exp(),
            torch.nn.functional.softplus(x * 30), torch.nn.functional.softplus(x, beta=2, threshold=1), torch.nn.functional.softplus(x.double() * 30, beta=0.5),
        ),
        (f32(3, 4), f16(5)),
    ),
    "ones_constants_triangles": (
        lambda x, b: (
            torch.ones(2, 3), torch.ones(2, dtype=torch.int64), torch.ones(3, dtype=torch.bool), x + torch.tensor([1.0, 2.0, 3.0, 4.0]),
            x.tril(), x.triu(1), x.tril(-1), b.triu(), x.long().tril(2), x.unsqueeze(0).expand(2, 3, 4).triu(-2),
        ),
        (f32(3, 4), i64(4, 4) > 0),
    ),
    "repeat_tile": (
        lambda x, i: (x.repeat(2, 3), x.repeat(2, 1, 2), i.repeat(3), x.tile(2), x.tile(2, 1, 1), i.tile((2, 2)), x.repeat(0, 1), x[0, 0].tile((0, 2)), x[0, 0].repeat(3)),
        (f32(2, 3), i64(4)),
    ),
    "pad_constant": (
        lambda x, i: (
            torch.nn.functional.pad(x, (1, 2)), torch.nn.functional.pad(x, (0, 1, 2, 0), value=-1.5),
            torch.nn.functional.pad(x, (-1, 1, 0, -1)), torch.nn.functional.pad(i, (2, 0), value=7),
            torch.nn.functional.pad(x, (0, 0)), torch.nn.functional.pad(x.half(), (1, 1), value=0.1),
        ),
        (f32(3, 4), i64(2, 3)),
    ),
    # Writes into slices and selects by numbers: negative and clamped bounds, strides, an end
    # below the start, and an in-place write as functionalization records it.
    "slice_select_scatter": (
        lambda x, s: (
            torch.slice_scatter(x, s[:, :2], 1, 1, 3), torch.slice_scatter(x, s[:, :2], 1, -2), torch.slice_scatter(x, s[:, :2], 1, 3, 99),
            torch.slice_scatter(x, s[:, :2], 1, 0, 5, 3), torch.slice_scatter(x, s[:, :0], 1, 3, 1), torch.slice_scatter(x, s[:2], 0, -5, -1),
            torch.select_scatter(x, s[0], 0, 1), torch.select_scatter(x, s[:, 0], 1, -1), torch.select_scatter(x, s[:, 1], 1, 0),
            torch.select_scatter(x, s[:, 2], 1, -3), _written(x, s),
        ),
        (f32(3, 5), f32(3, 5)),
    ),
}


def test_index_put_of_float_sums_and_masks_stays_with_torchlib(monkeypatch: pytest.MonkeyPatch) -> None:
    """Float sums over duplicate indices depend on the order they are added in, and boolean masks
    are a different operation: those keep torchlib's translation, still matching eager."""
    chosen = []
    choose = walk.choose

    def spy(candidates: Any, args: Any, kwargs: Any) -> Any:
        translation = choose(candidates, args, kwargs)
        chosen.append((getattr(translation.function, "__name__", str(translation.function)), translation.source))
        return translation

    monkeypatch.setattr(walk, "choose", spy)
    torch.manual_seed(0)
    x = f32(6, 3)
    assert_matches_eager(Fn(lambda x, i: x.index_put((i,), x[:3], accumulate=True)), (x, torch.tensor([1, 1, 2])))
    assert_matches_eager(Fn(lambda x: x.index_put((x > 0,), torch.tensor(0.0))), (x,))
    assert ("aten_index_put", OURS) not in chosen and sum(source == TORCHLIB for _, source in chosen) >= 2, chosen


@pytest.mark.parametrize("name", sorted(CASES))
def test_function_matches_eager_with_our_translations(name: str, sources: collections.Counter) -> None:
    fn, args = CASES[name]
    torch.manual_seed(0)
    assert_matches_eager(Fn(fn), args)
    assert sources[OURS] and not sources[TORCHLIB], dict(sources)


class _Block(torch.nn.Module):
    """An embedding, linear layers with and without bias over 2-D and 3-D inputs, layer norms with
    and without a scale, and inference dropout."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = torch.nn.Embedding(10, 8, padding_idx=0)
        self.up = torch.nn.Linear(8, 16)
        self.down = torch.nn.Linear(16, 8, bias=False)
        self.norm = torch.nn.LayerNorm(8)
        self.bare_norm = torch.nn.LayerNorm(8, elementwise_affine=False)
        self.drop = torch.nn.Dropout(0.3)

    def forward(self, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        hidden = self.drop(self.norm(self.embed(ids)))
        hidden = self.bare_norm(hidden + self.down(torch.nn.functional.silu(self.up(hidden))))
        return hidden, self.up(hidden[:, 0])


def test_layers_match_eager_with_our_translations(sources: collections.Counter) -> None:
    torch.manual_seed(0)
    assert_matches_eager(_Block().eval(), (torch.randint(0, 10, (2, 5)),))
    assert sources[OURS] and not sources[TORCHLIB], dict(sources)


def test_dynamic_sizes_reach_views_slices_aranges_and_indexing(sources: collections.Counter) -> None:
    def fn(x: torch.Tensor) -> Any:
        n = x.shape[1]
        positions = torch.arange(n).unsqueeze(0).expand(x.shape[0], -1)
        last = x.argmax(-1)
        return (
            x.reshape(x.shape[0], n, 1)[:, 1 : n - 1], positions, x.new_ones(x.shape[0], n),
            x[torch.arange(x.shape[0]), last], x.repeat_interleave(2, dim=1), x[:, positions[0]],
            x.index_put((torch.arange(x.shape[0] - 1, -1, -1),), x[:, :1] * 2),
            torch.slice_scatter(x, x[:, :2] * 3, 1, 1, 3), torch.select_scatter(x, x[:, 0] * 2, 1, -1),
        )

    batch, length = torch.export.Dim("batch"), torch.export.Dim("length", min=3)
    torch.manual_seed(0)
    assert_matches_eager(
        Fn(fn), (f32(2, 6),), dynamic_shapes=(({0: batch, 1: length},),), more_inputs=[((f32(3, 9),), {})],
    )
    assert sources[OURS] and not sources[TORCHLIB], dict(sources)
