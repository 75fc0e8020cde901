"""Random small op chains for the property-based fuzz test (tests/tooling/test_fuzz.py, tools/sweeps/fuzz.py).

A chain is a few steps — element-wise, reduction, indexing and shape ops — applied to one input
of a random dtype and shape (empty and 0-d included). The property: whatever eager PyTorch
computes, the exported ONNX model computes too (integers and bools exactly), or the export is
refused with a TranslationError or CaptureError. Anything else — a mismatch, an invalid graph, a crash in ONNX
Runtime — is a bug.
"""

from __future__ import annotations

import dataclasses
import warnings
from typing import Any, Callable

import torch
from hypothesis import assume, strategies as st

import torch_onnx_fx
from helpers import assert_close_outputs

__all__ = ["DTYPES", "Chain", "chains", "check_chain"]

DTYPES = [
    torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int64, torch.int32, torch.int16,
    torch.int8, torch.uint8, torch.bool, torch.complex64,
]

# (rtol, atol) per result dtype; integers and bools compare exactly. Half precision rounds each
# step of a chain once, in a different place than eager may: a few units of its last place.
_TOLERANCE = {torch.float16: (2e-2, 2e-2), torch.bfloat16: (5e-2, 5e-2), torch.float32: (1e-4, 1e-5),
              torch.float64: (1e-7, 1e-9), torch.complex64: (1e-4, 1e-5), torch.complex128: (1e-7, 1e-9)}


def _is_float(x: torch.Tensor) -> bool:
    return x.dtype.is_floating_point or x.is_complex()


# Each step: (name, applies to the current tensor?, function).
Step = tuple[str, Callable[[torch.Tensor], bool], Callable[[torch.Tensor], torch.Tensor]]

_ANY = lambda x: True  # noqa: E731
_NUMBER = lambda x: x.dtype != torch.bool  # noqa: E731
_REAL_NUMBER = lambda x: x.dtype != torch.bool and not x.is_complex()  # noqa: E731
_FLOAT = lambda x: x.dtype.is_floating_point  # noqa: E731
_RANKED = lambda x: x.dim() > 0  # noqa: E731

STEPS: list[Step] = [
    # element-wise
    ("neg", lambda x: _NUMBER(x) and x.dtype != torch.uint8, torch.neg),
    ("abs", _NUMBER, torch.abs),
    ("exp", lambda x: _is_float(x) or x.dtype in (torch.int64, torch.bool), lambda x: torch.exp(x * 0.5)),
    ("sin", _ANY, torch.sin),
    ("sigmoid", _ANY, torch.sigmoid),
    ("square", _NUMBER, torch.square),
    ("add_self", _NUMBER, lambda x: x + x),
    ("mul_scalar", _NUMBER, lambda x: x * 3),
    ("sub_scalar", lambda x: _NUMBER(x) and x.dtype != torch.uint8, lambda x: x - 2),
    ("true_div", _NUMBER, lambda x: x / 2),
    ("floor_div", _REAL_NUMBER, lambda x: torch.div(x, 3, rounding_mode="floor")),
    ("remainder", _REAL_NUMBER, lambda x: torch.remainder(x, 3)),
    ("maximum_flip", lambda x: _REAL_NUMBER(x) or x.dtype == torch.bool, lambda x: torch.maximum(x, x.flip(0)) if x.dim() else x),
    ("where_positive", lambda x: not x.is_complex(), lambda x: torch.where(x > 0, x, torch.zeros_like(x))),
    ("clamp", _REAL_NUMBER, lambda x: x.clamp(-3, 3) if x.is_signed() else x.clamp(0, 3)),
    ("to_float", _ANY, lambda x: x.real.float() if x.is_complex() else x.float()),
    ("to_int32", lambda x: not x.is_complex() and not x.dtype.is_floating_point, lambda x: x.to(torch.int32)),
    ("eq_self", _ANY, lambda x: x == x),
    ("logical_not", _ANY, torch.logical_not),
    ("times_1j", _FLOAT, lambda x: x * 1j if not x.is_complex() and x.dtype != torch.bfloat16 and x.dtype != torch.float16 else x),
    # reductions
    ("sum_all", _ANY, lambda x: x.sum()),
    ("sum_dim0", _RANKED, lambda x: x.sum(0)),
    ("amax_last", lambda x: _RANKED(x) and not x.is_complex() and x.shape[-1] > 0, lambda x: x.amax(-1)),
    ("mean_last", lambda x: _RANKED(x) and _is_float(x), lambda x: x.mean(-1)),
    ("cumsum_0", _RANKED, lambda x: x.cumsum(0)),
    ("any_all", _ANY, lambda x: x.any()),
    # indexing
    ("slice_head", _RANKED, lambda x: x[:2]),
    ("slice_step", _RANKED, lambda x: x[..., ::2]),
    ("select_last", lambda x: _RANKED(x) and x.shape[-1] > 0, lambda x: x[..., -1]),
    ("index_select", lambda x: _RANKED(x) and x.shape[0] > 0, lambda x: x[torch.tensor([0, -1])]),
    ("flip", _RANKED, lambda x: x.flip(-1)),
    ("masked", lambda x: not x.is_complex(), lambda x: x[x > 0]),
    # shape
    ("flatten", _ANY, lambda x: x.reshape(-1)),
    ("unsqueeze", _ANY, lambda x: x.unsqueeze(-1)),
    ("transpose", lambda x: x.dim() >= 2, lambda x: x.transpose(0, -1)),
    ("expand", lambda x: x.dim() <= 2, lambda x: x.expand(2, *x.shape)),
    ("cat_self", _RANKED, lambda x: torch.cat([x, x], dim=-1)),
    ("sort", lambda x: _RANKED(x) and not x.is_complex(), lambda x: torch.sort(x, dim=-1, stable=True).values),
]


@dataclasses.dataclass
class Chain:
    dtype: torch.dtype
    shape: tuple[int, ...]
    steps: list[str]
    seed: int

    def input(self) -> torch.Tensor:
        generator = torch.Generator().manual_seed(self.seed)
        if self.dtype.is_floating_point or self.dtype.is_complex:
            return (torch.randn(self.shape, generator=generator, dtype=torch.float64) * 2).to(self.dtype) if not self.dtype.is_complex else torch.randn(self.shape, generator=generator, dtype=self.dtype)
        if self.dtype == torch.bool:
            return torch.randint(0, 2, self.shape, generator=generator).bool()
        low = 0 if self.dtype == torch.uint8 else -9
        return torch.randint(low, 10, self.shape, generator=generator).to(self.dtype)

    def function(self) -> Callable[[torch.Tensor], torch.Tensor]:
        table = {name: fn for name, _, fn in STEPS}
        steps = [table[s] for s in self.steps]

        def run(x: torch.Tensor) -> torch.Tensor:
            for step in steps:
                x = step(x)
            return x

        return run

    def __str__(self) -> str:
        return f"{str(self.dtype).removeprefix('torch.')}{list(self.shape)} -> {' -> '.join(self.steps)} (seed {self.seed})"


@st.composite
def chains(draw: Any, max_steps: int = 4) -> Chain:
    dtype = draw(st.sampled_from(DTYPES))
    shape = tuple(draw(st.lists(st.integers(0, 3), min_size=0, max_size=3)))
    seed = draw(st.integers(0, 2**16))
    example = Chain(dtype, shape, [], seed).input()
    steps: list[str] = []
    for _ in range(draw(st.integers(1, max_steps))):
        usable = [name for name, applies, _ in STEPS if applies(example)]
        if not usable:
            break
        name = draw(st.sampled_from(usable))
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                example = dict((n, f) for n, _, f in STEPS)[name](example)
        except Exception:  # noqa: BLE001 - eager refuses this chain: not a case to test
            assume(False)
        steps.append(name)
    assume(steps)
    return Chain(dtype, shape, steps, seed)


def check_chain(chain: Chain) -> None:
    """Export ``chain`` and compare with eager; a TranslationError is an honest refusal."""
    function = chain.function()
    x = chain.input()

    class Model(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return function(x)

    model = Model()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        expected = model(x)
        try:
            program = torch_onnx_fx.export(model, (x,), verbose=False)
        except (torch_onnx_fx.TranslationError, torch_onnx_fx.CaptureError):
            return  # an honest refusal, naming the op (translation) or the line (capture)
        except Exception as exc:  # noqa: BLE001 - any other failure is a bug; name the chain
            raise AssertionError(f"{chain}: export failed: {type(exc).__name__}: {exc}") from exc
        try:
            actual = program(x)
        except Exception as exc:  # noqa: BLE001
            raise AssertionError(f"{chain}: running failed: {type(exc).__name__}: {exc}") from exc
    rtol, atol = _TOLERANCE.get(expected.dtype, (0.0, 0.0)) if _is_float(expected) else (0.0, 0.0)
    try:
        assert_close_outputs(expected, actual, rtol, atol)
    except AssertionError as exc:
        raise AssertionError(f"{chain}: {exc}") from None
