"""GenAI's shared cache buffer: the past and present of every layer are one buffer.

With ``past_present_share_buffer``, ONNX Runtime GenAI allocates each layer's cache once, at the
search's maximum length, passes it as ``past_key_values.<i>.*`` and binds ``present.<i>.*`` to the
same memory: the graph must write the new keys and values into the buffer in place, as
``GroupQueryAttention`` does, instead of concatenating a longer copy each step. Two things change
against the concatenating export:

- every layer's attention must be one ``GroupQueryAttention`` taking the cache: :func:`attention`
  is the translation GenAI's export uses for ``scaled_dot_product_attention``. It takes the cache
  whatever the batch and new positions are, as the graph lets both vary; the kernel refuses (at
  run time, loudly) several new positions after a cache in a batch of more than one row, a step
  GenAI's runner does not take. Everything else is the built-in translation's.
- the past's length axis is now the buffer's: the number of positions already filled is the
  attention mask's length less the new positions. :class:`PastLengthFromMaskPass` replaces every
  read of the past's length with that, and refuses a graph that reads the past in any way the
  buffer would change (a ``Concat`` the kernel did not take over, a shape read spanning the
  length).
"""

from __future__ import annotations

import logging

import onnx_ir as ir

from torch_onnx_fx.errors import UnsupportedArgumentError
from torch_onnx_fx.ops import nn, ort_attention
from torch_onnx_fx.registry import wants_context
from torch_onnx_fx.translate.op_context import OpContext

__all__ = ["attention", "PastLengthFromMaskPass"]

logger = logging.getLogger(__name__)


@wants_context
def attention(
    query: ir.Value, key: ir.Value, value: ir.Value, attn_mask: ir.Value | None = None, dropout_p: float = 0.0,
    is_causal: bool = False, scale: float | None = None, enable_gqa: bool = False, *, ctx: OpContext,
) -> ir.Value:
    """scaled_dot_product_attention as ``GroupQueryAttention`` with its cache, for any step; the
    built-in standard translation where the kernel's types do not fit (its float32 kernel, no
    dropout, no mask or a boolean one)."""
    tensors_fit = all(v.dtype == ir.DataType.FLOAT for v in (query, key, value))
    mask_fits = attn_mask is None or attn_mask.dtype == ir.DataType.BOOL
    if tensors_fit and mask_fits and not dropout_p:
        return ort_attention.group_query_attention(
            query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa, ctx=ctx, any_cache_step=True,
        )
    standard = nn.aten_sdpa_opset23 if ctx.opset >= 23 else nn.aten_sdpa
    return standard(query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa)


def _length_read(node: ir.Node) -> bool | None:
    """For a ``Shape`` of a [B, H, L, E] cache: True where it reads exactly the length L, False
    where it reads none of it (the batch), None where it reads L among other sizes."""
    start = node.attributes.get("start")
    end = node.attributes.get("end")
    first = start.as_int() % 4 if start is not None else 0
    last = (end.as_int() if end is not None else 4)
    last = last % 4 if last < 0 else min(last, 4)
    if (first, last) == (2, 3):
        return True
    return False if last <= 2 or first >= 3 else None


class PastLengthFromMaskPass(ir.passes.InPlacePass):
    """Reads of the past's length become ``attention_mask``'s length less ``input_ids``'s; every
    other reader of a past input must be a ``GroupQueryAttention`` taking it as its cache."""

    def __init__(self, past_names: list[str], mask_name: str = "attention_mask", ids_name: str = "input_ids"):
        super().__init__()
        self.past_names, self.mask_name, self.ids_name = past_names, mask_name, ids_name

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        graph = model.graph
        inputs = {value.name: value for value in graph.inputs}
        mask, ids = inputs[self.mask_name], inputs[self.ids_name]
        tape = ir.tape.Tape()
        filled = tape.op("Sub", [tape.op("Shape", [mask], {"start": 1, "end": 2}), tape.op("Shape", [ids], {"start": 1, "end": 2})])
        filled.name = "past_sequence_length"
        replaced = 0
        for name in self.past_names:
            for user, index in list(inputs[name].uses()):
                if user.op_type == "GroupQueryAttention" and user.domain == ort_attention.MICROSOFT and index in (3, 4):
                    continue
                reads = _length_read(user) if user.op_type == "Shape" and user.domain in ("", "ai.onnx") else None
                if reads is None:
                    raise UnsupportedArgumentError(
                        f"{name} is read by {user.op_type} node {user.name!r} in a way a shared cache buffer changes: "
                        "its attention did not become GroupQueryAttention (float32, a head size that is a multiple "
                        "of 8, no dropout, no mask or a boolean one). Export without shared_buffer."
                    )
                if reads:
                    ir.convenience.replace_all_uses_with(user.outputs[0], filled)
                    replaced += 1
        if replaced:
            graph.insert_before(next(iter(graph)), tape.nodes)
            ir.passes.common.RemoveUnusedNodesPass()(model)
        logger.debug("%d read(s) of the past's length now read the attention mask", replaced)
        return ir.passes.PassResult(model, modified=bool(replaced))
