"""``torch.onnx.ops``: operators that name their ONNX translation themselves.

``torch.onnx.ops.symbolic``/``symbolic_multi_out`` record an arbitrary ONNX operator (domain,
type, attributes, output dtypes and shapes) in the FX graph; we emit exactly that node.
``torch.onnx.ops.attention``/``rotary_embedding`` become the standard ``Attention`` /
``RotaryEmbedding`` operators from opset 23; below it they have no translation here and are
decomposed with ``torch.onnx.ops.aten_decompositions()`` (see ``normalize/decomposition.py``).
"""

from __future__ import annotations

from typing import Any, Sequence

import onnx_ir as ir
from onnxscript import opset23

from torch_onnx_fx.translate.op_context import OpContext
from torch_onnx_fx.registry import register, wants_context

__all__ = ["onnx_symbolic", "onnx_symbolic_multi_out", "onnx_attention_opset23", "onnx_rotary_embedding_opset23"]

# attr_types codes of torch.onnx.ops: which flat array holds the value, and whether it is a list.
_ATTRIBUTE_SOURCES = {
    "i": ("ints", False), "is": ("ints", True),
    "f": ("floats", False), "fs": ("floats", True),
    "s": ("strs", False), "ss": ("strs", True),
}


def _attributes(kwargs: dict[str, Any]) -> dict[str, Any]:
    arrays = {"ints": kwargs["attr_ints"], "floats": kwargs["attr_floats"], "strs": kwargs["attr_strs"]}
    attributes: dict[str, Any] = {}
    for key, code, (start, end) in zip(kwargs["attr_keys"], kwargs["attr_types"], kwargs["attr_pos"]):
        source, is_list = _ATTRIBUTE_SOURCES[code]
        values = list(arrays[source][start:end])
        attributes[key] = values if is_list else values[0]
    return attributes


def _emit(ctx: OpContext, inputs: Sequence[ir.Value | None], op_type: str, dtypes: Sequence[int], kwargs: dict[str, Any]) -> Any:
    domain = kwargs.get("domain", "") or ""
    version = kwargs.get("version")
    if domain not in ("", "ai.onnx"):
        ctx.import_opset(domain, version if version is not None else 1)
    result = ctx.op(op_type, list(inputs), _attributes(kwargs), domain=domain, num_outputs=len(dtypes), infer=False)
    outputs = result if isinstance(result, tuple) else (result,)
    # The declared ONNX types are the outputs' true types (INT4 travels as uint8 in torch).
    for output, dtype in zip(outputs, dtypes):
        output.dtype = ir.DataType(dtype)
    outputs[0].producer().metadata_props.update(zip(kwargs.get("metadata_props_keys", []), kwargs.get("metadata_props_values", [])))
    return result


@register("onnx_symbolic::_symbolic")
@wants_context
def onnx_symbolic(inputs: Sequence[ir.Value | None], op_type: str, onnx_dtype: int, *, ctx: OpContext, **kwargs: Any) -> Any:
    """_symbolic(Tensor?[] inputs, str op_type, int onnx_dtype, *, SymInt[] shape, str[] attr_keys, ...) -> Tensor"""
    return _emit(ctx, inputs, op_type, [onnx_dtype], kwargs)


@register("onnx_symbolic::_symbolic_multi_out")
@wants_context
def onnx_symbolic_multi_out(
    inputs: Sequence[ir.Value | None], op_type: str, onnx_dtypes: Sequence[int], *, ctx: OpContext, **kwargs: Any
) -> Any:
    """_symbolic_multi_out(Tensor?[] inputs, str op_type, int[] onnx_dtypes, *, SymInt[][] shapes, ...) -> Tensor[]"""
    result = _emit(ctx, inputs, op_type, list(onnx_dtypes), kwargs)
    return list(result) if isinstance(result, tuple) else [result]


@register("onnx::Attention.opset23", min_opset=23)
def onnx_attention_opset23(
    Q: ir.Value,
    K: ir.Value,
    V: ir.Value,
    attn_mask: ir.Value | None = None,
    past_key: ir.Value | None = None,
    past_value: ir.Value | None = None,
    *,
    is_causal: bool = False,
    kv_num_heads: int = 0,
    q_num_heads: int = 0,
    qk_matmul_output_mode: int = 0,
    scale: float | None = None,
    softcap: float = 0.0,
    softmax_precision: int | None = None,
) -> Any:
    """Attention.opset23(Tensor Q, Tensor K, Tensor V, Tensor? attn_mask=None, Tensor? past_key=None, Tensor? past_value=None, *, ...) -> (Tensor, Tensor, Tensor, Tensor)"""
    # torch.onnx.ops uses 0 for "not given" head counts; ONNX has no default for them, so they
    # are left out rather than set to 0 (attributes equal to ONNX's defaults are dropped by the
    # tracer).
    attributes: dict[str, Any] = dict(
        is_causal=int(is_causal), qk_matmul_output_mode=qk_matmul_output_mode, softcap=softcap,
    )
    if kv_num_heads:
        attributes["kv_num_heads"] = kv_num_heads
    if q_num_heads:
        attributes["q_num_heads"] = q_num_heads
    if scale is not None:
        attributes["scale"] = scale
    if softmax_precision is not None:
        attributes["softmax_precision"] = softmax_precision
    return opset23.Attention(Q, K, V, attn_mask, past_key, past_value, **attributes)


@register("onnx::RotaryEmbedding.opset23", min_opset=23)
def onnx_rotary_embedding_opset23(
    x: ir.Value,
    cos_cache: ir.Value,
    sin_cache: ir.Value,
    position_ids: ir.Value | None = None,
    *,
    interleaved: bool = False,
    num_heads: int = 0,
    rotary_embedding_dim: int = 0,
) -> ir.Value:
    """RotaryEmbedding.opset23(Tensor x, Tensor cos_cache, Tensor sin_cache, Tensor? position_ids=None, *, bool interleaved=False, SymInt num_heads=0, SymInt rotary_embedding_dim=0) -> Tensor"""
    # num_heads=0 means "not given" (3-D inputs need it; ONNX has no default for it).
    extra = {"num_heads": num_heads} if num_heads else {}
    return opset23.RotaryEmbedding(
        x, cos_cache, sin_cache, position_ids,
        interleaved=int(interleaved), rotary_embedding_dim=rotary_embedding_dim, **extra,
    )
