"""Python values as the tracer's ONNX constants: the dtype a Python number or list becomes, what
an ``op.Constant(...)`` call holds, and the numbers cast to float64 that are made in double."""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np
import onnx_ir as ir
from onnxscript import values as onnxscript_values

__all__ = ["TracingError", "python_dtype", "double_number", "constant_literal"]


class TracingError(RuntimeError):
    """A translation called an op or function in a way the tracer cannot record."""


def python_dtype(value: Any) -> ir.DataType:
    if isinstance(value, (list, tuple)):
        kinds = {type(v) for v in value}
        if float in kinds:
            return ir.DataType.FLOAT
        if kinds == {bool}:
            return ir.DataType.BOOL
        return ir.DataType.INT64
    if isinstance(value, bool):
        return ir.DataType.BOOL
    if isinstance(value, int):
        return ir.DataType.INT64
    if isinstance(value, float):
        return ir.DataType.FLOAT
    if isinstance(value, str):
        return ir.DataType.STRING
    raise TracingError(f"Cannot make an ONNX constant from {value!r} ({type(value).__name__}).")


def double_number(op: onnxscript_values.Op, args: Sequence[Any], kwargs: Mapping[str, Any]) -> float | None:
    """The Python float of ``CastLike(number, like)`` when ``like`` is float64, or of
    ``Cast(number, to=DOUBLE)``; else None.

    Translations (ours and torchlib's traced ones) write ``op.CastLike(eps, x)`` for "eps in x's
    dtype", and torchlib's ``pow.Scalar`` ``op.Cast(base, to=exponent.dtype)``. Made the usual way,
    the number is a float32 constant first, so a float64 graph got 0.1 as 0.10000000149 (logit's
    eps and cdist's p 1e-8 relatively off, histc's range counting values in other bins, 1.7 ** x
    1e-7 off). The constant is made in double from the number itself instead."""
    if op.domain not in ("", "ai.onnx"):
        return None
    if op.name == "Cast" and len(args) == 1 and set(kwargs) == {"to"} and type(args[0]) is float:
        return args[0] if int(kwargs["to"]) == ir.DataType.DOUBLE else None
    if op.name != "CastLike" or kwargs or len(args) != 2:
        return None
    number, like = args
    if type(number) is not float or not isinstance(like, ir.Value) or like.dtype != ir.DataType.DOUBLE:
        return None
    return number


# Constant attributes whose value constant() takes as is, with the dtype ONNX gives it.
_CONSTANT_ATTRIBUTES = {
    "value_int": ir.DataType.INT64,
    "value_ints": ir.DataType.INT64,
    "value_float": ir.DataType.FLOAT,
    "value_floats": ir.DataType.FLOAT,
    # Not value_string: constant() cannot yet make a string tensor onnx-ir serializes.
}


def constant_literal(attributes: Mapping[str, Any]) -> tuple[Any, ir.DataType | None] | None:
    """What an ``op.Constant(...)`` call holds, as ``constant()``'s arguments; None for forms left
    to a node of their own (sparse values, strings).

    Translations write ``op.Constant(value_ints=[...])`` for every axis and shape piece (torchlib's
    slice and reshape helpers make several per call). Made through ``constant()`` they are
    shared, typed without ONNX inference and visible to trace folding.
    """
    if len(attributes) != 1:
        return None
    ((name, attr),) = attributes.items()
    if name == "value":
        # Checked by attribute type, not isinstance(TensorProtocol): see constant().
        if isinstance(attr, ir.Attr) and attr.type == ir.AttributeType.TENSOR:
            return attr.value, None
        return (attr, None) if isinstance(attr, np.ndarray) else None
    value = attr.value if isinstance(attr, ir.Attr) else attr
    dtype = _CONSTANT_ATTRIBUTES.get(name)
    if dtype is None:
        return None
    if isinstance(value, (list, tuple)):
        return list(value), dtype
    return value, dtype
