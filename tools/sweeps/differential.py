"""Differential fuzzer: single operators against eager PyTorch across layouts, magnitudes and sizes.

The operator sweep (``opsweep``) exports each OpInfo sample as OpInfo made it: contiguous tensors of
moderate values at one size. Models are not so kind. This fuzzer takes the same samples and
changes what they are made of, one *variant* at a time:

- **layouts**: the operator's tensors reach it as views made inside the model — permuted,
  sliced with a storage offset, expanded with a zero stride, views of views — or as a
  channels-last graph input; the values are the sample's (but for ``expanded``, which repeats a
  slice);
- **magnitudes**: a large common offset on floating inputs, values near the dtype's limits
  (integer overflow), denormals, infinities and NaN;
- **sizes**: a first dim of 0 or 1, and an export with every dim dynamic that then runs at other
  sizes than the example's.

Each case is captured once with ``torch.export`` and exported by torch_onnx_fx (and torch.onnx
with ``--exporters both``), run in ONNX Runtime and compared with eager: dtype and shape exactly,
integers and bools exactly, floating results within tolerance or at least as close to a float64
computation as eager is. An export refused with a clear error (``TranslationError``,
``UnsupportedArgumentError``) is a refusal, not a failure; a result that differs is a *silent
mismatch*, the worst outcome; a model that ONNX Runtime rejects or fails on is a loud failure.

    python tools/sweeps/differential.py --cases 300 --seed 0          # a random selection
    python tools/sweeps/differential.py --ops as_strided,pow --all-variants --dtypes int32,float32
    python tools/sweeps/differential.py --cases 2000 --jobs 2 --exporters both --json tools/results/differential.jsonl --out docs/differential.md

``tests/tooling/test_differential.py`` runs a short selection in CI, and the regression cases of
:data:`REGRESSIONS` — one per class of failure this fuzzer found — in process.
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import json
import logging
import multiprocessing
import random
import sys
import tempfile
import time
import traceback
import warnings
import zlib
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

REPO = Path(__file__).resolve().parents[2]
for _path in (REPO, REPO / "tests"):
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

import torch  # noqa: E402
import torch.utils._pytree as pytree  # noqa: E402

from helpers import flat_tensors  # noqa: E402
from tools._common import machine_info, read_entries  # noqa: E402
from tools.sweeps.opsweep import DTYPES, OURS, THEIRS, _comparison, _first_samples, compare, draws_random, describe_exception, op_infos, skip_reason  # noqa: E402

__all__ = ["Case", "Result", "VARIANTS", "EXTRAS", "MODELS", "REGRESSIONS", "operators", "run_case", "select_cases", "render", "main"]

# "narrowed": a float64 program whose graph computes in float32 somewhere (half the digits lost,
# values past 3.4e38 infinite), even where this sample's numbers happen to agree.
SILENT = ("mismatch", "other_size_mismatch", "narrowed")
# Outcomes that are loud failures (a bug, but nobody is misled) and outcomes that say nothing.
LOUD = ("ort_failed", "other_size_failed", "export_crashed", "crashed", "timeout")
NEUTRAL = ("capture_failed", "eager_failed", "not_applicable", "random")


@dataclasses.dataclass(frozen=True)
class Case:
    """One operator sample in one variant."""

    op: str
    dtype: str
    variant: str
    sample: int = 0


@dataclasses.dataclass
class Result:
    case: Case
    exporter: str
    status: str
    detail: str | None = None
    inputs: str | None = None


# -- variants: how a sample's tensors reach the operator -----------------------------------------------

# A leaf transform takes the sample's tensor and returns (the graph input, the view made of it inside
# the model), or None where the variant does not apply to that tensor.
Leaf = Callable[[torch.Tensor, torch.Generator], "tuple[torch.Tensor, Callable[[torch.Tensor], torch.Tensor]] | None"]


def _permuted(t: torch.Tensor, _: torch.Generator) -> Any:
    if t.dim() < 2:
        return None
    order = list(reversed(range(t.dim())))
    inverse = [order.index(i) for i in range(t.dim())]
    return t.permute(order).contiguous(), lambda u: u.permute(inverse)


def _offset(t: torch.Tensor, g: torch.Generator) -> Any:
    if t.dim() < 1:
        return None
    # One more slice in front of the last dim: the view starts one element into its storage and
    # (for rank >= 2) its rows are not contiguous.
    extra = t.narrow(-1, 0, 1) if t.shape[-1] else torch.zeros(*t.shape[:-1], 1, dtype=t.dtype)
    padded = torch.cat([extra, t], dim=-1)
    return padded, lambda u: u[..., 1:]


def _expanded(t: torch.Tensor, _: torch.Generator) -> Any:
    dims = [d for d in range(t.dim()) if t.shape[d] >= 2]
    if not dims:
        return None
    d = dims[0]
    shape = tuple(t.shape)
    return t.narrow(d, 0, 1).contiguous(), lambda u: u.expand(shape)


def _view_of_view(t: torch.Tensor, g: torch.Generator) -> Any:
    first = _permuted(t, g)
    if first is None:
        return None
    base, view = first
    second = _offset(base, g)
    if second is None:
        return None
    padded, slice_view = second
    return padded, lambda u: view(slice_view(u))


def _channels_last(t: torch.Tensor, _: torch.Generator) -> Any:
    if t.dim() == 4:
        return t.contiguous(memory_format=torch.channels_last), lambda u: u
    if t.dim() == 5:
        return t.contiguous(memory_format=torch.channels_last_3d), lambda u: u
    return None


def _large_offset(t: torch.Tensor, _: torch.Generator) -> Any:
    if not t.dtype.is_floating_point:
        return None
    offset = {torch.float16: 500.0, torch.bfloat16: 500.0}.get(t.dtype, 1e4)
    return (t + offset).to(t.dtype), lambda u: u


def _extremes(t: torch.Tensor, g: torch.Generator) -> Any:
    if t.dtype == torch.bool or t.is_complex() or t.numel() == 0:
        return None
    if t.dtype.is_floating_point:
        # Where squares and products overflow, but the values themselves are finite.
        scale = torch.finfo(t.dtype).max ** 0.75
        return (t.double().sign() * scale * (0.5 + torch.rand(t.shape, generator=g, dtype=torch.float64))).to(t.dtype), lambda u: u
    info = torch.iinfo(t.dtype)
    near = torch.randint(0, 64, t.shape, generator=g)
    top = (torch.rand(t.shape, generator=g) < 0.5)
    values = torch.where(top, info.max - near, info.min + near) if info.min < 0 else info.max - near
    return values.to(t.dtype), lambda u: u


def _tiny(t: torch.Tensor, g: torch.Generator) -> Any:
    if not t.dtype.is_floating_point:
        return None
    tiny = torch.finfo(t.dtype).tiny
    return (t.double().sign() * tiny * torch.rand(t.shape, generator=g, dtype=torch.float64)).to(t.dtype), lambda u: u


def _nonfinite(t: torch.Tensor, g: torch.Generator) -> Any:
    """About one value in four replaced by inf, -inf or NaN (at least one NaN): what a model's
    activations hold after an overflow, and what reductions, comparisons and masks must keep."""
    if not t.dtype.is_floating_point or t.numel() == 0:
        return None
    picks = torch.randint(0, 12, t.shape, generator=g)
    specials = torch.tensor([float("inf"), float("-inf"), float("nan")], dtype=torch.float64)
    values = t.double().clone()
    hit = picks < 3
    values[hit] = specials[picks[hit]]
    # By index, not through view(-1): the clone keeps a permuted input's strides.
    values[torch.unravel_index(torch.randint(0, t.numel(), (1,), generator=g), t.shape)] = float("nan")
    return values.to(t.dtype), lambda u: u


def _first_dim(size: int) -> Leaf:
    def resize(t: torch.Tensor, _: torch.Generator) -> Any:
        if t.dim() < 1 or t.shape[0] < 2:
            return None
        return t.narrow(0, 0, size).contiguous(), lambda u: u
    return resize


@dataclasses.dataclass(frozen=True)
class Variant:
    leaf: Leaf | None
    # Which leaves it changes: every tensor ("all") or the sample's input only ("input": values
    # that must stay valid — indices, weights — are left alone).
    scope: str = "all"
    kind: str = "layout"


VARIANTS: dict[str, Variant] = {
    "contiguous": Variant(None),
    "permuted": Variant(_permuted),
    "offset": Variant(_offset),
    "expanded": Variant(_expanded, "input"),
    "view_of_view": Variant(_view_of_view),
    "channels_last": Variant(_channels_last),
    "large_offset": Variant(_large_offset, "input", "magnitude"),
    "extremes": Variant(_extremes, "input", "magnitude"),
    "tiny": Variant(_tiny, "input", "magnitude"),
    "nonfinite": Variant(_nonfinite, "input", "magnitude"),
    "empty": Variant(_first_dim(0), "all", "size"),
    "size_one": Variant(_first_dim(1), "all", "size"),
    "other_sizes": Variant(None, "all", "size"),
    # A dynamic export run where one of its dims is 0 (torch.export's dims range from 0): the
    # empty-batch case a static "empty" sample never reaches.
    "emptied_at_run": Variant(None, "all", "size"),
}
_DYNAMIC_VARIANTS = ("other_sizes", "emptied_at_run")


class ViewedCall(torch.nn.Module):
    """``op(input, *args, **kwargs)`` of a sample whose tensors are the module's inputs, each passed
    through its view (made inside the model, so the exported program sees it)."""

    def __init__(self, op: Callable[..., Any], structure: Any, inputs: Sequence[torch.Tensor | None], views: Sequence[Callable[[torch.Tensor], torch.Tensor]], constants: Sequence[Any]):
        super().__init__()
        self.op, self.structure, self.views, self.constants = op, structure, list(views), list(constants)
        self.is_input = [tensor is not None for tensor in inputs]
        self.example = tuple(t for t in inputs if t is not None)

    def arguments(self, tensors: Sequence[torch.Tensor]) -> Any:
        """The operator's ``(input, args, kwargs)`` made of ``tensors``, viewed."""
        given = iter(tensors)
        leaves = []
        for is_input, view, constant in zip(self.is_input, self.views, self.constants):
            leaves.append(view(next(given)) if is_input else constant)
        return pytree.tree_unflatten(leaves, self.structure)

    def forward(self, *tensors: torch.Tensor) -> Any:
        sample_input, args, kwargs = self.arguments(tensors)
        return self.op(sample_input, *args, **kwargs)

    def fresh(self, tensors: Sequence[torch.Tensor] | None = None) -> tuple[torch.Tensor, ...]:
        """Copies that keep each tensor's layout (channels-last stays channels-last)."""
        return tuple(_copy(t) for t in (tensors if tensors is not None else self.example))


def _copy(t: torch.Tensor) -> torch.Tensor:
    copy = torch.empty_strided(t.shape, t.stride(), dtype=t.dtype)
    copy.copy_(t)
    return copy


def build(opinfo: Any, sample: Any, variant: Variant, seed: int) -> ViewedCall | None:
    """The module of ``sample`` in ``variant``; None when the variant changes none of its tensors."""
    generator = torch.Generator().manual_seed(seed)
    leaves, structure = pytree.tree_flatten((sample.input, sample.args, sample.kwargs))
    input_leaves = len(pytree.tree_leaves(sample.input))
    inputs: list[torch.Tensor | None] = []
    views: list[Callable[[torch.Tensor], torch.Tensor]] = []
    constants: list[Any] = []
    changed = variant.leaf is None
    for index, leaf in enumerate(leaves):
        if not isinstance(leaf, torch.Tensor):
            inputs.append(None)
            views.append(lambda u: u)
            constants.append(leaf)
            continue
        made = None
        if variant.leaf is not None and (variant.scope == "all" or index < input_leaves):
            made = variant.leaf(leaf, generator)
        if made is None:
            inputs.append(leaf.detach().clone())
            views.append(lambda u: u)
        else:
            inputs.append(made[0])
            views.append(made[1])
            changed = True
        constants.append(None)
    if not changed:
        return None
    return ViewedCall(opinfo.op, structure, inputs, views, constants)


def _other_sizes(module: ViewedCall, generator: torch.Generator, grow: Callable[[int, int, int], bool], to: Callable[[int], int] = lambda s: s + 1) -> tuple[torch.Tensor, ...]:
    """Inputs where the sizes ``grow(input, dim, size)`` picks become ``to(size)`` (one larger by
    default; equal sizes stay equal), with values of the same kind: a run of a dynamic export at
    sizes it was not traced with."""
    grown = []
    for index, t in enumerate(module.example):
        shape = [to(s) if grow(index, d, s) else s for d, s in enumerate(t.shape)]
        if t.dtype == torch.bool:
            grown.append(torch.rand(shape, generator=generator) < 0.5)
        elif t.dtype.is_floating_point or t.is_complex():
            grown.append(torch.randn(shape, generator=generator, dtype=t.dtype))
        else:
            low = int(t.min()) if t.numel() else 0
            high = int(t.max()) + 1 if t.numel() else 1
            grown.append(torch.randint(low, max(high, low + 1), shape, generator=generator, dtype=t.dtype))
    return tuple(grown)


def describe(tensors: Sequence[torch.Tensor]) -> str:
    parts = []
    for t in tensors:
        # Sparse tensors have no strides: their layout is the description.
        if t.layout != torch.strided:
            layout = f" {str(t.layout).removeprefix('torch.')}"
        else:
            layout = "" if t.is_contiguous() else f" strides {tuple(t.stride())}"
        parts.append(f"{str(t.dtype).removeprefix('torch.')}{list(t.shape)}{layout}")
    return ", ".join(parts)


# -- operators: OpInfo's, and how models call some of them that OpInfo does not ----------------------


@dataclasses.dataclass
class _Sample:
    input: Any
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass
class Extra:
    """An operator as a model calls it, with samples of its own (the subset of the OpInfo protocol
    the fuzzer reads): ATen overloads whose second result OpInfo's functional form drops, sizes
    given as -1, results written into views."""

    name: str
    op: Callable[..., Any]
    samples: Callable[[torch.dtype], list[_Sample]]
    dtypes: tuple[torch.dtype, ...] = (torch.float32, torch.float64, torch.float16, torch.bfloat16)
    variant_test_name: str = ""
    # For a model: which (input, dim, size) may run at another size (default: the sizes eager accepts).
    grows: Callable[[int, int, int], bool] | None = None

    def sample_inputs(self, device: str, dtype: torch.dtype, requires_grad: bool = False) -> Iterator[_Sample]:
        return iter(self.samples(dtype))

    def supported_dtypes(self, device: str) -> set[torch.dtype]:
        return set(self.dtypes)


def _t(*shape: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    return torch.randn(shape).to(dtype)


def _nll_samples(dtype: torch.dtype) -> list[_Sample]:
    logits = torch.randn(6, 5).log_softmax(-1).to(dtype)
    target = torch.tensor([0, 1, 2, 3, 4, 1])
    weight = (torch.rand(5) + 0.5).to(dtype)
    return [
        _Sample(logits, (target, weight, 1, -100)),
        _Sample(logits, (target, None, 1, 7)),  # ignore_index outside the classes
        _Sample(logits, (target, weight, 1, 2)),
        _Sample(logits, (target, weight, 2, 1)),
        _Sample(logits, (target, weight, 0, 3)),
        _Sample(logits[0], (target[0], weight, 1, -100)),
    ]


def _nll2d(x: torch.Tensor, target: torch.Tensor, weight: Any, reduction: int, ignore_index: int) -> Any:
    images = x.reshape(2, 3, 5).permute(0, 2, 1).reshape(2, 5, 3, 1)
    return torch.ops.aten.nll_loss2d_forward(images, target.reshape(2, 3, 1), weight, reduction, ignore_index)


def _arange_into_view(like: torch.Tensor) -> torch.Tensor:
    buffer = torch.zeros(like.numel(), dtype=like.dtype)
    view = buffer.view(like.shape)
    torch.arange(like.numel(), out=view)
    # The view itself: torch.export's fake arange.out resizes its out to 1-d, so any op of it
    # with a (3, 4) tensor fails at capture, loudly, for both exporters.
    return view


def _int_pow_samples(dtype: torch.dtype) -> list[_Sample]:
    low = 0 if dtype == torch.uint8 else -50
    return [_Sample(torch.randint(low, 50, (40,), dtype=dtype), (torch.randint(0, 12, (40,), dtype=dtype),))]


EXTRAS: tuple[Extra, ...] = (
    Extra("aten.broadcast_to.minus_one", torch.broadcast_to,
          lambda d: [_Sample(_t(2, 1, 3, dtype=d), ((-1, 4, 3),)), _Sample(_t(1, 3, dtype=d), ((2, -1, 3),))]),
    Extra("aten.expand.minus_one", lambda x, size: x.expand(*size),
          lambda d: [_Sample(_t(2, 1, 3, dtype=d), ((-1, 4, -1),)), _Sample(_t(3, 1, dtype=d), ((2, -1, 5),))]),
    Extra("aten.nll_loss_forward", lambda x, *a: torch.ops.aten.nll_loss_forward(x, *a), _nll_samples),
    Extra("aten.nll_loss2d_forward", _nll2d, lambda d: [s for s in _nll_samples(d) if s.input.dim() == 2]),
    Extra("aten.pow.int_tensors", torch.pow, _int_pow_samples, dtypes=(torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8)),
    Extra("aten.arange.out_view", _arange_into_view, lambda d: [_Sample(_t(3, 4, dtype=d))], dtypes=(torch.float32, torch.int64)),
    Extra("aten.as_strided.of_images", lambda x: x.as_strided((3, 4), (1, 3)), lambda d: [_Sample(_t(1, 3, 4, 4, dtype=d))]),
    Extra("aten.as_strided.of_unfold", lambda x: x.unfold(-1, 2, 1).as_strided((2, 5), (3, 2)), lambda d: [_Sample(_t(2, 3, 4, dtype=d))]),
    Extra("aten.as_strided.of_slice", lambda x: x[:, 1:].as_strided((2, 2), (4, 1), 3), lambda d: [_Sample(_t(2, 3, 4, dtype=d))]),
    Extra("aten.as_strided.of_detach", lambda x: x.detach().as_strided((2, 5), (3, 2)), lambda d: [_Sample(_t(2, 3, 4, dtype=d))]),
)


def _pad_to_skip(skip: torch.Tensor) -> torch.Tensor:
    """A U-Net step: pool, upsample, and pad to the skip connection only when their sizes differ
    (an odd length): a Python branch on sizes."""
    up = torch.nn.functional.interpolate(torch.nn.functional.max_pool1d(skip, 2), scale_factor=2.0)
    if up.shape[-1] != skip.shape[-1]:
        up = torch.nn.functional.pad(up, (0, skip.shape[-1] - up.shape[-1]))
    return up + skip


def _windows(x: torch.Tensor) -> torch.Tensor:
    """Swin-style: pad the length to a multiple of the window only when it is not one already."""
    pad = (4 - x.shape[-1] % 4) % 4
    if pad > 0:
        x = torch.nn.functional.pad(x, (0, pad))
    return x.reshape(*x.shape[:-1], -1, 4).sum(-1)


def _long_sequences_doubled(x: torch.Tensor) -> torch.Tensor:
    """A branch on a size that changes values, not shapes."""
    return x * 2 if x.shape[-1] > 8 else x - 1


_LSTM: list[torch.nn.Module] = []


def _bidirectional_lstm(x: torch.Tensor) -> torch.Tensor:
    """A 2-layer bidirectional LSTM over a sequence that should stay dynamic."""
    if not _LSTM:
        generator_state = torch.random.get_rng_state()
        torch.manual_seed(0)
        _LSTM.append(torch.nn.LSTM(4, 3, num_layers=2, bidirectional=True, batch_first=True).eval())
        torch.random.set_rng_state(generator_state)
    return _LSTM[0](x)[0]


MODELS: tuple[Extra, ...] = (
    Extra("model.unet_pad", _pad_to_skip, lambda d: [_Sample(_t(1, 2, 8, dtype=d))], dtypes=(torch.float32,)),
    Extra("model.window_pad", _windows, lambda d: [_Sample(_t(2, 8, dtype=d))], dtypes=(torch.float32,)),
    Extra("model.size_branch", _long_sequences_doubled, lambda d: [_Sample(_t(2, 8, dtype=d))], dtypes=(torch.float32,)),
    Extra("model.bidirectional_lstm", _bidirectional_lstm, lambda d: [_Sample(_t(2, 5, 4, dtype=d))], dtypes=(torch.float32,),
          grows=lambda i, d, s: d < 2),
)


def operators() -> dict[str, Any]:
    """OpInfo's operators by ``name[.variant]``, then the :data:`EXTRAS` and :data:`MODELS`."""
    return {**op_infos(), **{extra.name: extra for extra in (*EXTRAS, *MODELS)}}


# -- one case ------------------------------------------------------------------------------------------

# How many samples from a case's own on are tried for one the variant applies to.
_SAMPLES_TRIED = 8

_REFUSALS = ("TranslationError", "MissingTranslationError", "UnsupportedArgumentError", "DecompositionError", "ArgumentTypeError")
_DOUBLE = {torch.float16: torch.float64, torch.bfloat16: torch.float64, torch.float32: torch.float64, torch.complex64: torch.complex128}


def _double(t: torch.Tensor) -> torch.Tensor:
    if t.dtype not in _DOUBLE:
        return t
    copy = torch.empty_strided(t.shape, t.stride(), dtype=_DOUBLE[t.dtype])
    copy.copy_(t)
    return copy


# Operators whose results other than the last (info) are undefined where info is nonzero.
_UNDEFINED_WHEN_INFO = frozenset({"linalg.cholesky_ex", "linalg.ldl_factor_ex", "linalg.lu_factor_ex", "linalg.inv_ex", "linalg.solve_ex"})


def _verdict(module: ViewedCall, inputs: Sequence[torch.Tensor], expected: Any, actual: Sequence[torch.Tensor], opinfo: Any = None) -> str | None:
    """None when ``actual`` matches eager (or is at least as close to float64 as eager is), else why not.

    Order statistics' indices are checked by what they select (ties may pick any position), as
    the operator sweep checks them."""
    chosen = compare
    if opinfo is not None:
        sample_input, args, kwargs = module.arguments(inputs)
        chosen = _comparison(opinfo, _Sample(sample_input, tuple(args), dict(kwargs)))
    flat_expected = flat_tensors(expected)
    name = getattr(opinfo, "name", "") + ("." + opinfo.variant_test_name if getattr(opinfo, "variant_test_name", "") else "")
    if name in _UNDEFINED_WHEN_INFO and flat_expected and len(actual) == len(flat_expected) and bool(flat_expected[-1].ne(0).any()):
        # A factorization that failed (info > 0): its other results are documented as not
        # computed ("the decomposition could not be completed"); only info is compared.
        try:
            compare(flat_expected[-1], [actual[-1]])
            return None
        except AssertionError as exc:
            return f"info: {exc}"
    try:
        chosen(expected, actual)
        return None
    # assert_close raises RuntimeError, not AssertionError, for some complex values with a NaN part.
    except (AssertionError, RuntimeError) as exc:
        plain = str(exc)
    flat = flat_tensors(expected)
    if len(flat) != len(actual) or not any(e.dtype in _DOUBLE for e in flat):
        return plain
    try:
        with torch.no_grad():
            reference = flat_tensors(module(*[_double(t) for t in inputs]))
            if all(e.dtype.is_floating_point or e.is_complex() for e in flat) and any(
                not (t.dtype.is_floating_point or t.is_complex()) and t.dtype != torch.bool for t in inputs
            ):
                # Integers in, floats out (sinh of int8, an FFT of int16): the exact result is the
                # float64 computation on the same integers.
                try:
                    reference = flat_tensors(module(*[_double(t) if t.dtype in _DOUBLE else t.to(torch.float64) if t.dtype != torch.bool else t for t in inputs]))
                except Exception:  # noqa: BLE001 - the operator takes only integers there
                    pass
    except Exception:  # noqa: BLE001 - no float64 reference: the plain verdict stands
        return plain
    if chosen is not compare and len(reference) == len(flat):
        # An operator with its own comparison (eigenvectors up to sign, order statistics) matches
        # when it matches the float64 computation, rounded to eager's dtype, by that comparison.
        try:
            chosen(pytree.tree_unflatten([r.to(e.dtype) for r, e in zip(reference, flat)], pytree.tree_flatten(expected)[1]), actual)
            return None
        except Exception:  # noqa: BLE001 - not a match: the per-result checks below decide
            pass
    for exp, act, ref in zip(flat, actual, reference):
        if exp.dtype not in _DOUBLE or act.shape != exp.shape or act.dtype != exp.dtype or ref.shape != exp.shape:
            if chosen is not compare:
                return plain  # the order statistics' own check failed
            try:
                compare(exp, [act])
            except AssertionError as exc:
                return str(exc)
            continue
        rtol, atol = {torch.float16: (1e-2, 1e-3), torch.bfloat16: (5e-2, 1e-2)}.get(exp.dtype, (1e-3, 1e-5))
        # Equal infinities (and NaN where float64 is NaN too) are no error: inf - inf is NaN.
        same = (act.to(ref.dtype) == ref) | (act.isnan() & ref.isnan())
        ours = torch.where(same, 0.0, (act.to(ref.dtype) - ref).abs()).nan_to_num(nan=float("inf"))
        theirs = (exp.to(ref.dtype) - ref).abs().nan_to_num(nan=float("inf"), posinf=float("inf"))
        # Where float64 is NaN only a NaN matches (``same`` above), so nothing more is allowed.
        allowed = (theirs + atol + rtol * ref.abs()).nan_to_num(nan=0.0)
        if bool((ours <= allowed).all()):
            continue
        # Transforms and long reductions round by another algorithm than eager's: their error is
        # a few units in the last place of the result's scale, not of each element (an FFT's near-
        # zero outputs). Accepted when the largest error is of eager's order on that scale.
        finite = ref.isfinite() & exp.isfinite()
        if not bool(finite.any()) or bool((act.isfinite() != exp.isfinite()).any()):
            return plain
        scale = float(ref[finite].abs().max())
        eps = torch.finfo(exp.real.dtype if exp.is_complex() else exp.dtype).eps
        if float(ours[finite].max()) > 4 * float(theirs[finite].max()) + 64 * eps * scale + atol:
            return plain
    return None


def _export(exporter: str, program: Any, args: tuple[torch.Tensor, ...]) -> Any:
    """``program`` is a captured ExportedProgram, or a (module, dynamic shapes) pair that each
    exporter captures its own way (a model's size decisions depend on how it is captured)."""
    dynamic_shapes = None
    if isinstance(program, tuple):
        program, dynamic_shapes = program
    if exporter == OURS:
        import torch_onnx_fx

        return torch_onnx_fx.export(program, args, dynamic_shapes=dynamic_shapes, verbose=False)
    return torch.onnx.export(program, args, dynamic_shapes=dynamic_shapes, dynamo=True, verbose=False)


def run_case(case: Case, exporters: Sequence[str] = (OURS,), opinfo: Any = None) -> list[Result]:
    """Every exporter's result on ``case``, in process."""
    opinfo = opinfo or operators()[case.op]
    dtype = DTYPES[case.dtype]
    variant = VARIANTS[case.variant]
    reason = skip_reason(opinfo, dtype)
    if reason is not None:
        return [Result(case, e, "not_applicable", reason) for e in exporters]
    samples, reason = _first_samples(opinfo, dtype, case.sample + _SAMPLES_TRIED)
    if reason is not None:
        return [Result(case, e, "not_applicable", reason) for e in exporters]
    # A stable seed (str hashes change with every process): the same case makes the same tensors.
    seed = zlib.crc32(f"{case.op}/{case.dtype}/{case.variant}/{case.sample}".encode()) & 0xFFFF
    # The first sample from ``case.sample`` on that the variant changes (OpInfo's first samples are
    # often 0-d or 1-d, which a permutation leaves as they are).
    # Sparse inputs are not ONNX graph inputs (an exporter takes dense tensors): such samples
    # have no case, and their views (permuted, offset...) do not exist.
    candidates = [sample for sample in samples[case.sample:] if all(
        t.layout == torch.strided for t in pytree.tree_leaves((sample.input, sample.args, sample.kwargs)) if isinstance(t, torch.Tensor))]
    if not candidates:
        return [Result(case, e, "not_applicable", "sparse inputs only (ONNX graph inputs are dense)") for e in exporters]
    if case.variant == "emptied_at_run":
        # A sample with a dim that can be dynamic (OpInfo's first samples are often 0-d).
        candidates = [sample for sample in candidates if any(
            isinstance(t, torch.Tensor) and any(s >= 2 for s in t.shape) for t in pytree.tree_leaves((sample.input, sample.args, sample.kwargs)))]
    module = next((m for m in (build(opinfo, sample, variant, seed) for sample in candidates) if m is not None), None)
    if module is None:
        return [Result(case, e, "not_applicable", f"{case.variant} changes no tensor of the first samples") for e in exporters]
    inputs = describe(module.example)
    try:
        with torch.no_grad():
            expected = module(*module.fresh())
    except Exception as exc:  # noqa: BLE001
        return [Result(case, e, "eager_failed", describe_exception(exc)[0], inputs) for e in exporters]
    dynamic = case.variant in _DYNAMIC_VARIANTS
    # forward(*tensors): one entry, for the varargs, holding each tensor's dims.
    shapes = (tuple({d: torch.export.Dim.AUTO for d in range(t.dim())} for t in module.example),) if dynamic else None

    def capture() -> torch.export.ExportedProgram:
        return torch.export.export(module, module.fresh(), dynamic_shapes=shapes, strict=False)

    try:
        program = capture()
    except Exception as exc:  # noqa: BLE001
        return [Result(case, e, "capture_failed", describe_exception(exc)[0], inputs) for e in exporters]
    if draws_random(program):
        return [Result(case, e, "random", None, inputs) for e in exporters]
    second = second_expected = None
    if dynamic:
        # Every size >= 2 grown first; where eager refuses that (a feature size a weight fixes),
        # only the sizes the captured program kept symbolic.
        kept = [[not isinstance(s, int) for s in n.meta["val"].shape] for n in program.graph.nodes
                if n.op == "placeholder" and n.name in program.graph_signature.user_inputs]
        choices = [lambda i, d, s: s >= 2, lambda i, d, s: s >= 2 and i < len(kept) and kept[i][d]]
        to = lambda s: s + 1  # noqa: E731
        if case.variant == "emptied_at_run":
            # The sizes kept symbolic, smallest first: the first one eager accepts at 0 is made 0
            # (every dim of that size, as they may share a symbol).
            sizes = sorted({s for i, t in enumerate(module.example) for d, s in enumerate(t.shape) if i < len(kept) and kept[i][d]})
            choices = [(lambda size: lambda i, d, s: s == size and i < len(kept) and kept[i][d])(size) for size in sizes]
            to = lambda s: 0  # noqa: E731
        elif getattr(opinfo, "grows", None) is not None:
            choices.insert(0, opinfo.grows)
        for grow in choices:
            candidate = _other_sizes(module, torch.Generator().manual_seed(seed), grow, to)
            try:
                with torch.no_grad():
                    second_expected = module(*module.fresh(candidate))
                second = candidate
                break
            except Exception:  # noqa: BLE001 - eager refuses these sizes: try the next choice
                continue
        if second is None or all(a.shape == b.shape for a, b in zip(second, module.example)):
            reason = "eager rejects other sizes" if choices else "no dim stayed dynamic"
            return [Result(case, e, "not_applicable", reason, inputs) for e in exporters]
    results = []
    for position, exporter in enumerate(exporters):
        # Each exporter gets a program of its own: torch_onnx_fx's normalize stage rewrites the
        # program it is given in place, which would hand torch.onnx a normalized graph.
        own = program if position == 0 else capture()
        if case.op.startswith("model."):
            # Models are exported as users export them: each exporter captures the module itself.
            own = (module, shapes)
        status, detail = _one_exporter(exporter, module, own, expected, second, second_expected, opinfo)
        results.append(Result(case, exporter, status, detail, inputs))
    return results


_FLOAT32_OR_LESS = (torch.float32, torch.float16, torch.bfloat16, torch.complex64)


def _narrowing(program: Any, onnx_program: Any) -> str | None:
    """The ONNX operators producing float32 (or narrower) values in a graph whose translated
    program holds only float64 floating-point tensors; None where there are none or the program has some."""
    import onnx_ir as ir

    # The program that was translated: a decomposition may compute in float32 on purpose
    # (special_entr's where(x == 0, 0, -inf) is a float32 constant choice, exact).
    program = getattr(onnx_program, "exported_program", None) or program
    if isinstance(program, tuple) or not isinstance(program, torch.export.ExportedProgram):
        return None
    kinds = set()
    for node in program.graph.nodes:
        value = node.meta.get("val")
        for t in value if isinstance(value, (list, tuple)) else (value,):
            if isinstance(t, torch.Tensor) and (t.dtype.is_floating_point or t.is_complex()):
                kinds.add(t.dtype)
    if not kinds or kinds & set(_FLOAT32_OR_LESS):
        return None
    narrow = {ir.DataType.FLOAT, ir.DataType.FLOAT16, ir.DataType.BFLOAT16}
    found = sorted({
        node.op_type for node in ir.traversal.RecursiveGraphIterator(onnx_program.model.graph)
        for value in node.outputs if value.dtype in narrow
    })
    return f"float32 values from {', '.join(found)} in a float64 program" if found else None


def _one_exporter(exporter: str, module: ViewedCall, program: Any, expected: Any, second: Any, second_expected: Any, opinfo: Any = None) -> tuple[str, str | None]:
    from torch_onnx_fx.errors import InputMismatchError

    try:
        onnx_program = _export(exporter, program, module.fresh())
    except Exception as exc:  # noqa: BLE001
        name = type(exc).__name__
        status = "refused" if name in _REFUSALS else "export_crashed"
        return status, describe_exception(exc)[0]
    try:
        actual = onnx_program(*module.fresh())
    except Exception as exc:  # noqa: BLE001
        return "ort_failed", describe_exception(exc)[0]
    why = _verdict(module, module.fresh(), expected, actual, opinfo)
    if why is not None:
        return "mismatch", why[:400]
    narrowing = _narrowing(program, onnx_program)
    if narrowing:
        return "narrowed", narrowing
    if second is None:
        return "pass", None
    try:
        actual = onnx_program(*module.fresh(second))
    except InputMismatchError as exc:
        return "specialized", str(exc).splitlines()[0][:300]
    except Exception as exc:  # noqa: BLE001
        return "other_size_failed", describe_exception(exc)[0]
    why = _verdict(module, module.fresh(second), second_expected, actual, opinfo)
    return ("other_size_mismatch", why[:400]) if why is not None else ("pass", None)


# -- selections --------------------------------------------------------------------------------------

def select_cases(count: int, seed: int, ops: Sequence[str] | None = None, dtypes: Sequence[str] | None = None,
                 variants: Sequence[str] | None = None, all_variants: bool = False) -> list[Case]:
    """``count`` random cases (every combination with ``all_variants``), reproducible by seed."""
    keys = list(ops) if ops else list(operators())
    dtype_names = list(dtypes) if dtypes else list(DTYPES)
    variant_names = list(variants) if variants else [v for v in VARIANTS if v != "contiguous"]
    if all_variants:
        return [Case(k, d, v) for k in keys for d in dtype_names for v in variant_names]
    rng = random.Random(seed)
    return [Case(rng.choice(keys), rng.choice(dtype_names), rng.choice(variant_names)) for _ in range(count)]


# The classes of failure this fuzzer found on e6900ba, one case each; they must now pass or be refused.
REGRESSIONS: tuple[Case, ...] = (
    Case("as_strided", "float32", "permuted"),
    Case("as_strided", "float32", "offset"),
    Case("as_strided", "float32", "view_of_view"),
    Case("aten.as_strided.of_images", "float32", "channels_last"),
    Case("aten.as_strided.of_unfold", "float32", "contiguous"),
    Case("aten.as_strided.of_slice", "float32", "contiguous"),
    Case("aten.arange.out_view", "float32", "contiguous"),
    Case("aten.pow.int_tensors", "int32", "contiguous"),
    Case("pow", "int32", "extremes"),
    Case("aten.nll_loss_forward", "float32", "contiguous"),
    Case("aten.nll_loss_forward", "float32", "contiguous", 1),
    Case("aten.nll_loss_forward", "float32", "contiguous", 2),
    Case("aten.broadcast_to.minus_one", "float32", "contiguous"),
    Case("aten.expand.minus_one", "float32", "contiguous"),
    Case("model.unet_pad", "float32", "other_sizes"),
    Case("model.window_pad", "float32", "other_sizes"),
    Case("model.size_branch", "float32", "other_sizes"),
    Case("model.bidirectional_lstm", "float32", "other_sizes"),
)


# -- many cases, each in a worker process ------------------------------------------------------------

_PRELOAD = ["torch", "torch.testing._internal.common_methods_invocations", "onnxruntime", "onnxscript", "torch_onnx_fx", "tools.sweeps.differential"]


def _worker(case: Case, exporters: Sequence[str], out: str) -> None:
    warnings.simplefilter("ignore")
    logging.disable(logging.WARNING)
    torch.set_num_threads(1)
    try:
        results = run_case(case, exporters)
    except Exception as exc:  # noqa: BLE001 - a bug of the fuzzer's own, kept as a result
        results = [Result(case, e, "fuzzer_error", traceback.format_exc(limit=3)[-300:]) for e in exporters]
        del exc
    Path(out).write_text(json.dumps([_as_dict(r) for r in results]))


def _as_dict(result: Result) -> dict[str, Any]:
    return {"kind": "result", **dataclasses.asdict(result.case), **{k: v for k, v in dataclasses.asdict(result).items() if k != "case"}}


def run_many(cases: Sequence[Case], exporters: Sequence[str], jobs: int, timeout_s: float) -> Iterator[list[dict[str, Any]]]:
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(_PRELOAD)
    pending = collections.deque(cases)
    running: list[tuple[Case, Any, float, Path]] = []
    with tempfile.TemporaryDirectory(prefix="differential-") as scratch:
        counter = 0
        while pending or running:
            while pending and len(running) < jobs:
                case = pending.popleft()
                counter += 1
                out = Path(scratch, f"{counter}.json")
                process = context.Process(target=_worker, args=(case, tuple(exporters), str(out)))
                process.start()
                running.append((case, process, time.monotonic(), out))
            time.sleep(0.02)
            for item in list(running):
                case, process, started, out = item
                if process.is_alive() and time.monotonic() - started < timeout_s:
                    continue
                status = None
                if process.is_alive():
                    process.kill()
                    status = "timeout"
                process.join()
                running.remove(item)
                if status is None and out.exists():
                    yield json.loads(out.read_text())
                    continue
                status = status or "crashed"
                yield [_as_dict(Result(case, e, status, f"exit code {process.exitcode}")) for e in exporters]


# -- the page ----------------------------------------------------------------------------------------

def _render_command(header: dict[str, Any]) -> str:
    """``--render-only`` with the run's own ``--json``/``--out`` (the defaults are differential.md's)."""
    words = str(header.get("command", "")).split()
    kept = [f"{flag} {words[i + 1]}" for i, flag in enumerate(words[:-1]) if flag in ("--json", "--out")]
    return " ".join(["python tools/sweeps/differential.py --render-only", *kept])


def render(header: dict[str, Any], rows: Sequence[dict[str, Any]]) -> str:
    exporters = list(dict.fromkeys(r["exporter"] for r in rows))
    lines = [
        "# Differential fuzzing: layouts, magnitudes and sizes",
        "",
        "Generated by `tools/sweeps/differential.py`; do not edit by hand. Regenerate with "
        f"`{header.get('regenerate', 'python tools/sweeps/differential.py')}`, or rewrite it from the committed results with "
        f"`{_render_command(header)}`.",
        "",
        f"Run: {header.get('date', '?')}, commit {header.get('commit', '?')}, torch {header.get('torch', '?')}, "
        f"`{header.get('command', '')}`.",
        "",
        "Each case is one OpInfo sample of one operator in one dtype, its tensors changed by one variant (see the "
        "tool's docstring), exported by each exporter from the same captured program and compared with eager. "
        "*silent* results differ from eager with no error; *loud* ones fail in ONNX Runtime (or crash); "
        "*refused* exports stop with a clear error naming the operator.",
        "",
        "| variant | " + " | ".join(f"{e}: cases, pass, refused, loud, **silent**" for e in exporters) + " |",
        "|---|" + "---|" * len(exporters),
    ]
    by_variant: dict[str, dict[str, collections.Counter[str]]] = collections.defaultdict(lambda: collections.defaultdict(collections.Counter))
    for r in rows:
        by_variant[r["variant"]][r["exporter"]][r["status"]] += 1
    for variant in VARIANTS:
        if variant not in by_variant:
            continue
        cells = []
        for e in exporters:
            c = by_variant[variant][e]
            counted = sum(v for k, v in c.items() if k not in NEUTRAL)
            cells.append(
                f"{counted}, {c['pass'] + c['specialized']}, {c['refused']}, {sum(c[k] for k in LOUD)}, **{sum(c[k] for k in SILENT)}**"
            )
        lines.append(f"| {variant} | " + " | ".join(cells) + " |")
    for e in exporters:
        bad = [r for r in rows if r["exporter"] == e and r["status"] in SILENT + LOUD]
        lines += ["", f"## {e}: silent and loud failures ({len(bad)})", ""]
        if not bad:
            lines.append("None.")
            continue
        lines += ["| op | dtype | variant | status | inputs | detail |", "|---|---|---|---|---|---|"]
        for r in sorted(bad, key=lambda r: (r["status"] not in SILENT, r["op"], r["dtype"], r["variant"])):
            detail = (r.get("detail") or "").replace("|", "\\|").replace("\n", " ")[:200]
            lines.append(f"| {r['op']} | {r['dtype']} | {r['variant']} | {r['status']} | {r.get('inputs') or ''} | {detail} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", type=int, default=200, help="random cases to run")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--ops", type=lambda s: s.split(","), help="OpInfo names (default: all)")
    parser.add_argument("--dtypes", type=lambda s: s.split(","), help="dtype names (default: all 12)")
    parser.add_argument("--variants", type=lambda s: s.split(","), help=f"of {', '.join(VARIANTS)}")
    parser.add_argument("--all-variants", action="store_true", help="every op x dtype x variant instead of a random selection")
    parser.add_argument("--regressions", action="store_true", help="only the REGRESSIONS cases")
    parser.add_argument("--exporters", choices=("ours", "both"), default="ours")
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds per case")
    parser.add_argument("--json", type=Path, help="JSON-lines results")
    parser.add_argument("--out", type=Path, help="Markdown page")
    parser.add_argument("--render-only", action="store_true", help="rewrite --out from --json")
    options = parser.parse_args(argv)
    json_path = options.json or REPO / "tools" / "results" / "differential.jsonl"
    if options.render_only:
        header, rows = {}, []
        for kind, entry in read_entries(json_path):
            if kind in ("header", "machine"):  # the results file's first line says "machine"
                header = entry
            else:
                rows.append(entry)
        (options.out or REPO / "docs" / "differential.md").write_text(render(header, rows))
        return 0
    exporters = (OURS, THEIRS) if options.exporters == "both" else (OURS,)
    unknown = sorted(set(options.ops or ()) - set(operators()))
    if unknown:
        parser.error(f"unknown operators: {', '.join(unknown)} (names as OpInfo spells them, or of EXTRAS and MODELS)")
    if options.regressions:
        cases = list(REGRESSIONS)
    else:
        cases = select_cases(options.cases, options.seed, options.ops, options.dtypes, options.variants, options.all_variants)
    command = " ".join(["python", "tools/sweeps/differential.py", *(sys.argv[1:] if argv is None else argv)])
    header = {"kind": "header", **machine_info(command), "regenerate": command}
    rows: list[dict[str, Any]] = []
    sink = json_path.open("w") if options.json else None
    if sink:
        sink.write(json.dumps(header) + "\n")
    counts: collections.Counter[str] = collections.Counter()
    for results in run_many(cases, exporters, options.jobs, options.timeout):
        for row in results:
            rows.append(row)
            counts[(row["exporter"], row["status"])] += 1
            if sink:
                sink.write(json.dumps(row) + "\n")
                sink.flush()
            if row["status"] in SILENT + LOUD:
                print(f"{row['status']}: {row['exporter']} {row['op']} {row['dtype']} {row['variant']}: {(row.get('detail') or '')[:160]}", flush=True)
    if sink:
        sink.close()
    if options.out:
        options.out.write_text(render(header, rows))
    print(dict(counts))
    return 1 if any(status in SILENT for (_, status) in counts) else 0


if __name__ == "__main__":
    sys.exit(main())
