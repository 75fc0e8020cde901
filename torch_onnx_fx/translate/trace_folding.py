"""Data movement on small constants, done while tracing instead of in the optimizer.

Translations build shapes, axes and index lists from constants (``Concat`` of a view's sizes,
``Reshape`` of a reduction's ``dim`` to 1-D, ``Unsqueeze`` of a scalar size), and with static
sizes every input of such a node is a constant. The optimizer's constant folding would evaluate
each one with ONNX's reference evaluator — about a quarter of a millisecond a node, a third of the
whole optimization time of a 32-layer Llama, for some 40 nodes a layer. Here the tracer computes
them with numpy instead of recording them.

Only operators that move data without computing (so numpy's result is ONNX's, bit for bit), and
casts of integers that every target value holds exactly, on inputs of at most ``SIZE_LIMIT``
elements, are folded; anything else, or anything malformed (which
ONNX shape inference will then name), is recorded as a node as before.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping, Sequence

import numpy as np
import onnx_ir as ir

__all__ = ["SIZE_LIMIT", "fold"]

# Shape arithmetic is a handful of elements; a larger constant may be a weight, whose folding
# (and storage size) is the optimizer's to decide.
SIZE_LIMIT = 64

# Types numpy holds as they are (sub-byte and 8-bit float types come through ml_dtypes).
_NUMPY_NATIVE = frozenset({
    ir.DataType.BOOL, ir.DataType.INT8, ir.DataType.INT16, ir.DataType.INT32, ir.DataType.INT64,
    ir.DataType.UINT8, ir.DataType.UINT16, ir.DataType.UINT32, ir.DataType.UINT64,
    ir.DataType.FLOAT16, ir.DataType.FLOAT, ir.DataType.DOUBLE,
})

_Folder = Callable[[list[np.ndarray], Mapping[str, Any]], "np.ndarray | None"]


def _normalized_axes(axes: np.ndarray, rank: int) -> list[int] | None:
    normalized = [int(a) + rank if int(a) < 0 else int(a) for a in axes.reshape(-1)]
    if any(not 0 <= a < rank for a in normalized) or len(set(normalized)) != len(normalized):
        return None
    return sorted(normalized)


def _reshape(arrays: list[np.ndarray], attributes: Mapping[str, Any]) -> np.ndarray | None:
    data, shape = arrays
    if shape.ndim != 1 or shape.dtype != np.int64:
        return None
    target = [int(s) for s in shape]
    if not attributes.get("allowzero", 0):
        # 0 copies the input's dimension at that position (ONNX's default).
        if any(s == 0 and i >= data.ndim for i, s in enumerate(target)):
            return None
        target = [data.shape[i] if s == 0 else s for i, s in enumerate(target)]
    if target.count(-1) > 1:
        return None
    try:
        return data.reshape(target)
    except ValueError:
        return None


def _concat(arrays: list[np.ndarray], attributes: Mapping[str, Any]) -> np.ndarray | None:
    if "axis" not in attributes or len({a.dtype for a in arrays}) != 1 or len({a.ndim for a in arrays}) != 1:
        return None
    rank = arrays[0].ndim
    axis = int(attributes["axis"])
    if rank == 0 or not -rank <= axis < rank:
        return None
    try:
        return np.concatenate(arrays, axis=axis)
    except ValueError:
        return None


def _unsqueeze(arrays: list[np.ndarray], attributes: Mapping[str, Any]) -> np.ndarray | None:
    if len(arrays) != 2 or "axes" in attributes:
        return None
    data, axes = arrays
    normalized = _normalized_axes(axes, data.ndim + axes.size)
    if normalized is None:
        return None
    return np.expand_dims(data, tuple(normalized))


def _squeeze(arrays: list[np.ndarray], attributes: Mapping[str, Any]) -> np.ndarray | None:
    if len(arrays) != 2 or "axes" in attributes:
        return None
    data, axes = arrays
    if axes.size == 0:
        return None  # empty axes: ONNX Runtime squeezes every size-1 dimension
    normalized = _normalized_axes(axes, data.ndim)
    if normalized is None or any(data.shape[a] != 1 for a in normalized):
        return None
    return np.squeeze(data, tuple(normalized))


_INTEGERS = frozenset({np.dtype(t) for t in (np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64)})


def _cast(arrays: list[np.ndarray], attributes: Mapping[str, Any]) -> np.ndarray | None:
    """Integer and bool constants (sizes, indices, axes) cast where every value is exact in the
    target type; float sources are left to the node (ONNX's rounding and saturation rules)."""
    (data,) = arrays
    to = attributes.get("to")
    if to is None or data.dtype not in _INTEGERS:
        return None
    target = ir.DataType(int(to))
    if target not in _NUMPY_NATIVE:
        return None
    result = data.astype(target.numpy())
    if target != ir.DataType.BOOL and not np.array_equal(result.astype(data.dtype), data):
        return None
    return result


_FOLDERS: dict[str, _Folder] = {
    "Cast": _cast,
    "Reshape": _reshape,
    "Concat": _concat,
    "Unsqueeze": _unsqueeze,
    "Squeeze": _squeeze,
}


def _attribute_value(attribute: Any) -> Any:
    return attribute.value if isinstance(attribute, ir.Attr) else attribute


def _constant(value: ir.Value | None) -> ir.TensorProtocol | None:
    """The tensor of a ``Constant`` node's output. Initializers are never read: a weight, however
    small, must stay a weight that ``apply_weights`` can replace."""
    producer = value.producer() if value is not None else None
    # An FX node whose result is a constant is named through an Identity (translate._finish_value).
    while producer is not None and producer.op_type == "Identity" and producer.domain in ("", "ai.onnx"):
        value = producer.inputs[0]
        producer = value.producer() if value is not None else None
    if producer is None or producer.op_type != "Constant" or producer.domain not in ("", "ai.onnx"):
        return None
    return ir.convenience.get_const_tensor(value)  # type: ignore[arg-type]


def fold(op_type: str, inputs: Sequence[ir.Value | None], attributes: Mapping[str, Any]) -> np.ndarray | None:
    """The result of the default-domain ``op_type`` on these inputs if all are small constants
    and the operator only moves data; None otherwise (the node is then recorded)."""
    folder = _FOLDERS.get(op_type)
    if folder is None or not inputs:
        return None
    arrays = []
    for value in inputs:
        tensor = _constant(value)
        if tensor is None or tensor.size > SIZE_LIMIT or tensor.dtype not in _NUMPY_NATIVE:
            return None
        arrays.append(tensor.numpy())
    result = folder(arrays, {name: _attribute_value(a) for name, a in attributes.items()})
    if result is not None and result.size > SIZE_LIMIT:
        return None
    return result
