"""Recurrent layers keep their sequence length (and batch) symbolic through capture.

torch.export keeps ``aten.lstm.input`` and ``aten.gru.input`` as single operators, which our
translation turns into ONNX's LSTM and GRU, but it computes their output shapes by running their
ATen decomposition under fake tensors: a Python loop over the time steps, which fixes the sequence
length to the example's. A dynamic sequence was then refused with a constraint violation, and the
suggested fixes that capture applies made it static (a model that could be dynamic presented as
static). torch.onnx swaps in a while_loop decomposition for the shape computation, which keeps the
sequence symbolic but fixes the batch instead when both are dynamic.

While a capture runs, :func:`symbolic_lengths` gives both operators a kernel that returns only
the results' shapes, which follow from the input and hidden states alone: ``output`` is the
input's leading dims and ``directions * hidden`` (``proj_size`` for an LSTM with projections),
the final states have the initial states' shapes. The kernel answers only for fake tensors —
real tensors, and LSTMs with projections (which our translation decomposes, and so need the
loop), go to the original kernel — so no value is ever made up.
"""

from __future__ import annotations

import contextlib
from typing import Any, Callable, Iterator

import torch
from torch._guards import detect_fake_mode

__all__ = ["symbolic_lengths"]

_KEY = torch._C.DispatchKey.CompositeImplicitAutograd


def _output_like(input: torch.Tensor, hidden: torch.Tensor, bidirectional: bool) -> torch.Tensor:
    directions = 2 if bidirectional else 1
    return input.new_empty((*input.shape[:-1], directions * hidden.shape[-1]))


def _lstm_shapes(original: Callable[..., Any]) -> Callable[..., Any]:
    def kernel(input: Any, hx: Any, params: Any, has_biases: bool, num_layers: int, dropout: float,
               train: bool, bidirectional: bool, batch_first: bool) -> Any:
        h0, c0 = hx
        projected = h0.shape[-1] != c0.shape[-1]
        if projected or detect_fake_mode((input, h0, c0, *params)) is None:
            return original(input, hx, params, has_biases, num_layers, dropout, train, bidirectional, batch_first)
        return _output_like(input, h0, bidirectional), torch.empty_like(h0), torch.empty_like(c0)

    return kernel


def _gru_shapes(original: Callable[..., Any]) -> Callable[..., Any]:
    def kernel(input: Any, hx: Any, params: Any, has_biases: bool, num_layers: int, dropout: float,
               train: bool, bidirectional: bool, batch_first: bool) -> Any:
        if detect_fake_mode((input, hx, *params)) is None:
            return original(input, hx, params, has_biases, num_layers, dropout, train, bidirectional, batch_first)
        return _output_like(input, hx, bidirectional), torch.empty_like(hx)

    return kernel


@contextlib.contextmanager
def symbolic_lengths() -> Iterator[None]:
    """Install the shape-only kernels for the duration of a capture, then restore the originals."""
    installed = []
    for op, make in ((torch.ops.aten.lstm.input, _lstm_shapes), (torch.ops.aten.gru.input, _gru_shapes)):
        original = op.py_kernels.get(_KEY)
        if original is None:
            continue
        op.py_kernels[_KEY] = make(original)
        # Dispatch caches the kernel it resolved per key; a stale entry would bypass the swap.
        op._dispatch_cache.clear()
        installed.append((op, original))
    try:
        yield
    finally:
        for op, original in installed:
            op.py_kernels[_KEY] = original
            op._dispatch_cache.clear()
