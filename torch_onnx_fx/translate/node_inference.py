"""ONNX's own type and shape inference for one node at a time, with a cache per export.

Trace-only translations branch on ``x.dtype`` and ``x.shape`` of the values they create, so the
tracer types every node as it records it; the optimizer's passes type what their rewrites add
(``InferMissingTypesPass``) with the same function.
"""

from __future__ import annotations

import copy
import logging
from typing import Any

import onnx
import onnx_ir as ir

__all__ = ["InferenceCache", "infer_node"]

logger = logging.getLogger(__name__)

# What ONNX inference gave for a node, by everything it reads (op, attributes, input types, shapes
# and small constant inputs). A deep model repeats its layers: a 32-layer Llama's 5,600 nodes make
# about 200 distinct inference calls, and one call (serialising the node, its inputs' types and
# constants to protobuf) costs more than translating the node. One cache per export (the tracer
# holds it), so nothing of one model stays alive for the next.
InferenceCache = dict[tuple[Any, ...], list[tuple[Any, Any]]]
_PLAIN_ATTRIBUTES = (int, float, str, bytes)
# Constant inputs up to this many elements are shown to inference (a shape, an axis list), so
# they are part of the cache key too.
_KNOWN_CONSTANT_SIZE = 64


def _inference_key(node: ir.Node, opset_version: int) -> tuple[Any, ...] | None:
    """A hashable key of what inference reads, or None when the node has attributes (tensors,
    graphs) that are not worth hashing."""
    attributes = []
    for name, attr in node.attributes.items():
        value = attr.value
        if isinstance(value, (list, tuple)):
            if not all(isinstance(v, _PLAIN_ATTRIBUTES) for v in value):
                return None
            value = tuple(value)
        elif not isinstance(value, _PLAIN_ATTRIBUTES):
            return None
        attributes.append((name, attr.type, value))
    inputs = []
    for value in node.inputs:
        if value is None:
            inputs.append(None)
            continue
        const = value.const_value
        data = None
        if const is not None and const.size <= _KNOWN_CONSTANT_SIZE:
            try:
                data = (const.dtype, tuple(const.shape), const.tobytes())
            except Exception:  # noqa: BLE001 - a tensor without data (meta, fake): not cached
                return None
        inputs.append((value.type, None if value.shape is None else tuple(value.shape), data))
    return (node.domain, node.op_type, opset_version, len(node.outputs), tuple(attributes), tuple(inputs))


def infer_node(node: ir.Node, opset_version: int, cache: InferenceCache | None = None) -> None:
    """ONNX type and shape inference for one node of the standard domain; best effort, never fatal.
    With ``cache``, the results of earlier nodes that read the same things are reused."""
    if any(i is not None and i.type is None for i in node.inputs):
        return
    key = _inference_key(node, opset_version) if cache is not None else None
    known = cache.get(key) if key is not None else None
    if known is None:
        _infer_with_onnx(node, opset_version)
        if key is not None:
            cache[key] = [(copy.copy(o.type), None if o.shape is None else tuple(o.shape)) for o in node.outputs]
        return
    for output, (type_, dims) in zip(node.outputs, known):
        if type_ is not None:
            # A copy: onnx-ir changes a value's dtype in place on its type object, which would
            # otherwise retype every value that shares it.
            output.type = copy.copy(type_)
        if dims is not None:
            output.shape = ir.Shape(dims)


def _infer_with_onnx(node: ir.Node, opset_version: int) -> None:
    try:
        schema = onnx.defs.get_schema(node.op_type, opset_version, node.domain)
        input_types = {}
        input_data = {}
        for value in node.inputs:
            if value is None:
                continue
            type_proto = ir.serde.serialize_type(value.type)
            if value.shape is not None:
                ir.serde.serialize_shape_into(type_proto, value.shape)
            input_types[value.name] = type_proto
            const = value.const_value
            if const is not None and const.size <= _KNOWN_CONSTANT_SIZE:
                input_data[value.name] = ir.serde.serialize_tensor(const)
        inferred = onnx.shape_inference.infer_node_outputs(
            schema, ir.serde.serialize_node(node), input_types, input_data
        )
    except Exception as exc:  # noqa: BLE001 - inference only refines types
        logger.debug("shape inference failed for %s: %s", node.op_type, exc)
        return
    for output in node.outputs:
        type_proto = inferred.get(output.name)
        if type_proto is None:
            continue
        output.type = ir.serde.deserialize_type_proto_for_type(type_proto)
        shape = ir.serde.deserialize_type_proto_for_shape(type_proto)
        if shape is not None:
            output.shape = shape
