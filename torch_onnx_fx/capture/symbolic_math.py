"""NumPy's math functions on symbolic sizes, while capturing.

Models compute constants from sizes with NumPy: diffusers' Cosmos scales a norm by
``np.sqrt(norm.numel() / emb.numel())``. With dynamic dims that ratio is a ``torch.SymFloat``, and a
NumPy ufunc given an object it does not know calls the object's method of the ufunc's name
(``x.sqrt()``), which SymFloat does not have: torch.export stops with "loop of ufunc does not
support argument 0 of type SymFloat which has no callable sqrt method". :func:`numpy_methods`
gives SymInt and SymFloat that method while a capture runs, as torch's own symbolic square root
(``torch._sym_sqrt``, what ``math.sqrt`` of a SymFloat records under TorchDynamo): the graph
computes it at run time, in float64 as Python would. Only ``sqrt``: the other functions torch
keeps symbolic (``cos``, ``tanh``…) have no model asking for them yet, and ``log2`` would have no
exact ONNX counterpart.
"""

from __future__ import annotations

import contextlib
from typing import Any, Iterator

import torch

__all__ = ["numpy_methods"]


def _sqrt(self: Any) -> Any:
    return torch._sym_sqrt(self)


@contextlib.contextmanager
def numpy_methods() -> Iterator[None]:
    """SymInt and SymFloat answer NumPy's ``sqrt`` while the block runs; restored after."""
    added = [cls for cls in (torch.SymInt, torch.SymFloat) if not hasattr(cls, "sqrt")]
    for cls in added:
        cls.sqrt = _sqrt  # type: ignore[attr-defined]
    try:
        yield
    finally:
        for cls in added:
            del cls.sqrt  # type: ignore[attr-defined]
