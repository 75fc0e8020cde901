"""Operators that take a ``dim`` applied to 0-d tensors.

ATen treats a 0-d tensor as having one dimension for ``dim`` arguments: ``x.sum(0)``,
``x.amax(-1)``, ``x.cumsum(0)`` or ``x.softmax(0)`` on a scalar are valid and return a scalar.
ONNX reductions and axis-taking operators reject an axis on a rank-0 input, and translations
(ours and torchlib's) are written for ranked tensors. Rather than teaching every translation the
rule, the graph walk reshapes the 0-d input to ``[1]`` before dispatch and reshapes each result
back to the static shape FX recorded. The element count is the same on both sides, so the
round trip is exact.
"""

from __future__ import annotations

from typing import Any, Sequence

import onnx_ir as ir
import torch

__all__ = ["needs_rank_one", "lift", "lift_arguments", "restore"]

_DIM_ARGUMENTS = frozenset({"dim", "dims", "dim0", "dim1", "axis"})


def _has_dim_argument(target: Any) -> bool:
    schema = getattr(target, "_schema", None)
    if schema is None:
        return False
    return any(argument.name in _DIM_ARGUMENTS for argument in schema.arguments)


def needs_rank_one(target: Any, example_args: Sequence[Any]) -> bool:
    """True for an op with a dim argument whose first (self) argument is a real 0-d tensor.

    Complex tensors are left alone: their real form already has a trailing dim.
    """
    first = example_args[0] if example_args else None
    if not isinstance(first, torch.Tensor) or first.dim() != 0 or first.is_complex():
        return False
    return _has_dim_argument(target)


def lift_arguments(tracer: Any, args: list[Any], example_args: Sequence[Any]) -> list[Any]:
    """Every 0-d tensor argument to ``[1]``: an index or source beside a 0-d self must keep its
    rank (``scatter_add(x, 0, index, src)`` with all three 0-d)."""
    return [
        lift(tracer, value) if isinstance(example, torch.Tensor) and example.dim() == 0 else value
        for value, example in zip(args, example_args)
    ] + list(args[len(example_args):])


def lift(tracer: Any, value: Any) -> Any:
    if not isinstance(value, ir.Value):
        return value
    return tracer.op("Reshape", [value, tracer.constant([1], ir.DataType.INT64)])


def _static_shape(example: Any) -> list[int] | None:
    if not isinstance(example, torch.Tensor) or example.is_complex():
        return None
    shape = list(example.shape)
    return shape if all(isinstance(d, int) for d in shape) else None


def restore(tracer: Any, result: Any, example: Any) -> Any:
    """Reshape each tensor result to the static shape of its FX example."""
    if isinstance(result, ir.Value):
        shape = _static_shape(example)
        if shape is None:
            return result
        return tracer.op("Reshape", [result, tracer.constant(shape, ir.DataType.INT64)])
    if isinstance(result, (list, tuple)) and isinstance(example, (list, tuple)):
        restored = [restore(tracer, r, e) for r, e in zip(result, example)]
        return type(result)([*restored, *result[len(restored):]])
    return result
