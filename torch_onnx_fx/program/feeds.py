"""The arguments of a call of an ``ONNXProgram`` checked against the graph's inputs.

ONNX Runtime checks its feeds too, but late and in its own terms ("Unexpected input data type.
Actual: (tensor(double)), expected: (tensor(float))"), and not at all where a mistake still
runs: a Python number where a tensor is expected, or one symbolic size given two values by two
inputs (broadcasting may then accept a wrong batch). :func:`check_feeds` names the input by its
graph name and position and says what was expected, before anything runs.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import onnx_ir as ir
import torch
from onnx_ir.tensor_adapters import to_torch_dtype

from torch_onnx_fx.dtypes import is_carried, onnx_dims, onnx_dtype
from torch_onnx_fx.errors import InputMismatchError

__all__ = ["check_feeds"]

# Python numbers a rank-0 graph input of each element type takes (a SymInt/SymFloat/SymBool
# argument of the model, or a scalar lifted to a 0-d tensor).
_NUMBERS: dict[ir.DataType, tuple[type, ...]] = {
    ir.DataType.INT64: (int,), ir.DataType.INT32: (int,), ir.DataType.BOOL: (bool,),
    ir.DataType.FLOAT: (int, float), ir.DataType.DOUBLE: (int, float),
}


def _describe(expected: ir.Value) -> str:
    dtype = "?"
    if expected.dtype is not None:
        try:
            dtype = str(to_torch_dtype(expected.dtype))
        except (KeyError, ValueError, TypeError):  # ONNX types torch has no dtype for
            dtype = expected.dtype.name
    dims = "?" if expected.shape is None else ", ".join(str(d) for d in expected.shape)
    return f"a {dtype} tensor of shape [{dims}]"


def check_feeds(graph_inputs: Sequence[ir.Value], values: Sequence[Any]) -> None:
    """Raise :class:`InputMismatchError` unless every value fits its graph input: a tensor of its
    dtype, rank and static sizes, or a Python number for a rank-0 input.

    Symbolic sizes are not compared across inputs: torch.onnx runs a call that breaks an
    equality torch.export assumed (an observed batch of 1 broadcast against one of 5), and ONNX
    Runtime computes it when the operators broadcast; a call they cannot run fails in the
    runtime, which names the node.
    """
    for position, (expected, value) in enumerate(zip(graph_inputs, values)):
        where = f"input {position} ('{expected.name}')"
        if isinstance(value, torch.Tensor):
            _check_tensor(where, expected, value)
        elif isinstance(value, np.ndarray):
            raise InputMismatchError(
                f"{where}: got a numpy array; the program takes torch tensors, as the model does: "
                f"pass torch.from_numpy(array) ({_describe(expected)} expected)."
            )
        elif isinstance(value, (bool, int, float)):
            accepted = _NUMBERS.get(expected.dtype, ()) if expected.shape is not None and expected.shape.rank() == 0 else ()
            if not isinstance(value, accepted) or (isinstance(value, bool) and bool not in accepted):
                raise InputMismatchError(
                    f"{where}: got the Python {type(value).__name__} {value!r}, expected {_describe(expected)}. "
                    "Pass a tensor (torch.tensor(...)) where the model took a tensor."
                )
        else:
            raise InputMismatchError(f"{where}: got {type(value).__name__}, expected {_describe(expected)}.")


def _check_tensor(where: str, expected: ir.Value, value: torch.Tensor) -> None:
    # Complex tensors travel as real pairs (trailing dim 2) of their real dtype.
    dtype = value.real.dtype if value.is_complex() else value.dtype
    dims = [*value.shape, 2] if value.is_complex() else onnx_dims(dtype, list(value.shape))
    wanted = expected.dtype
    if wanted is not None and onnx_dtype(dtype) != wanted and not is_carried(wanted, dtype):
        raise InputMismatchError(
            f"{where}: got a tensor of dtype {value.dtype}, expected {_describe(expected)}. Convert it "
            f"(tensor.to(...)) to the dtype the model was exported with."
        )
    if expected.shape is None:
        return
    if len(dims) != expected.shape.rank():
        raise InputMismatchError(
            f"{where}: got a tensor of shape {list(value.shape)} (rank {value.dim()}), expected {_describe(expected)}."
        )
    for axis, (size, dim) in enumerate(zip(dims, expected.shape)):
        if isinstance(dim, int):
            if size != dim:
                raise InputMismatchError(
                    f"{where}: dimension {axis} is {size}, but the model was exported with a static size "
                    f"{dim} there ({_describe(expected)}). Export with dynamic_shapes to accept other sizes."
                )

