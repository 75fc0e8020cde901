"""Higher-order operators: torch.cond, while_loop, scan, map and subgraph wrappers.

Each receives its branch/body graphs as ``torch.fx.GraphModule`` objects and builds ONNX
subgraphs through the translation context (``ctx.subgraph`` / ``inline`` / ``finish``), so
nodes inside them get the same dispatch and metadata as the main graph.

* ``cond`` → ``If``; branch operands are captured from the enclosing graph.
* ``while_loop`` → ``Loop`` with no trip count: the condition is evaluated once before the loop
  and again at the end of each iteration inside the body.
* ``scan`` → ``Scan`` (carries are Scan states, ``xs`` are scanned along dim 0).
* ``map_impl`` → ``Scan`` with no states.
* ``invoke_subgraph``, ``wrap_with_set_grad_enabled`` → inlined (gradient mode has no meaning in
  an inference graph; repeated subgraphs become repeated nodes).
"""

from __future__ import annotations

from typing import Any, Sequence

import onnx_ir as ir
import torch
from onnxscript import opset18 as op

from torch_onnx_fx.translate.op_context import OpContext
from torch_onnx_fx.registry import register, wants_context

__all__ = [
    "higher_order_cond",
    "higher_order_while_loop",
    "higher_order_scan",
    "higher_order_map_impl",
    "higher_order_inline",
]

_hop = torch.ops.higher_order


def _examples(module: torch.fx.GraphModule) -> list[Any]:
    """FX meta values of a subgraph's outputs."""
    output = next(n for n in reversed(module.graph.nodes) if n.op == "output")
    args = output.args[0]
    args = args if isinstance(args, (list, tuple)) else [args]
    return [a.meta.get("val") if isinstance(a, torch.fx.Node) else a for a in args]


def _placeholder_examples(module: torch.fx.GraphModule) -> list[Any]:
    return [n.meta.get("val") for n in module.graph.nodes if n.op == "placeholder"]


def _control_node(ctx: OpContext, op_type: str, inputs: Sequence[ir.Value | None], attributes: dict[str, Any], count: int) -> list[ir.Value]:
    """Append an If/Loop/Scan node; its output types come from the FX node afterwards."""
    results = ctx.op(op_type, list(inputs), attributes, num_outputs=count, infer=False)
    return list(results) if isinstance(results, tuple) else [results]


def _as_bool_scalar(value: Any) -> ir.Value:
    """A condition as ONNX wants it, recorded into the graph being built."""
    if not isinstance(value, ir.Value):
        return op.Constant(value=ir.tensor(bool(value)))
    if value.dtype != ir.DataType.BOOL:
        value = op.Cast(value, to=ir.DataType.BOOL)
    if value.shape is None or value.shape.rank() != 0:
        value = op.Reshape(value, op.Constant(value=ir.tensor([], dtype=ir.DataType.INT64)))
    return value


@register(_hop.cond)
@wants_context
def higher_order_cond(
    pred: Any, true_graph: torch.fx.GraphModule, false_graph: torch.fx.GraphModule, operands: Sequence[Any], *, ctx: OpContext
) -> Any:
    branches = []
    for module, name in ((true_graph, "then"), (false_graph, "else")):
        branch = ctx.subgraph(name)
        outputs = branch.inline(module, list(operands))
        branches.append(branch.finish(outputs, _examples(module)))
    then_graph, else_graph = branches
    return _control_node(
        ctx,
        "If",
        [_as_bool_scalar(pred)],
        {"then_branch": ir.AttrGraph("then_branch", then_graph), "else_branch": ir.AttrGraph("else_branch", else_graph)},
        len(then_graph.outputs),
    )


@register(_hop.while_loop)
@wants_context
def higher_order_while_loop(
    cond_graph: torch.fx.GraphModule,
    body_graph: torch.fx.GraphModule,
    carried: Sequence[Any],
    additional: Sequence[Any],
    *,
    ctx: OpContext,
) -> Any:
    carried = [v if isinstance(v, ir.Value) else ctx.constant(v) for v in carried]
    additional = list(additional)
    (first,) = ctx.inline(cond_graph, [*carried, *additional])
    body = ctx.subgraph("loop_body")
    body.input(torch.tensor(0), "iteration")
    body.input(torch.tensor(True), "condition")
    examples = _placeholder_examples(body_graph)[: len(carried)]
    state = [body.input(example, "carried") for example in examples]
    updated = body.inline(body_graph, [*state, *additional])
    (again,) = body.inline(cond_graph, [*updated, *additional])
    with body.building():
        again = _as_bool_scalar(again)
    graph = body.finish([again, *updated], [torch.tensor(True), *_examples(body_graph)])
    return _control_node(
        ctx, "Loop", [None, _as_bool_scalar(first), *carried], {"body": ir.AttrGraph("body", graph)}, len(carried)
    )


def _scan(ctx: OpContext, module: torch.fx.GraphModule, states: Sequence[Any], xs: Sequence[Any], additional: Sequence[Any]) -> list[Any]:
    body = ctx.subgraph("scan_body")
    examples = _placeholder_examples(module)
    state_inputs = [body.input(e, "state") for e in examples[: len(states)]]
    slice_inputs = [body.input(e, "slice") for e in examples[len(states) : len(states) + len(xs)]]
    outputs = body.inline(module, [*state_inputs, *slice_inputs, *additional])
    graph = body.finish(outputs, _examples(module))
    return _control_node(
        ctx, "Scan", [*states, *xs], {"body": ir.AttrGraph("body", graph), "num_scan_inputs": len(xs)}, len(graph.outputs)
    )


@register(_hop.scan)
@wants_context
def higher_order_scan(
    combine_graph: torch.fx.GraphModule,
    init: Sequence[Any],
    xs: Sequence[Any],
    additional_inputs: Sequence[Any],
    *,
    ctx: OpContext,
) -> Any:
    return _scan(ctx, combine_graph, list(init), list(xs), list(additional_inputs))


@register(_hop.map_impl)
@wants_context
def higher_order_map_impl(
    body_graph: torch.fx.GraphModule, xs: Sequence[Any], pos_args: Sequence[Any], *, ctx: OpContext
) -> Any:
    return _scan(ctx, body_graph, [], list(xs), list(pos_args))


# Inlining is the same whatever the subgraph computes: complex values (Llama 4's rotary
# frequencies, made under no_grad) are translated by the subgraph's own nodes.
@register(_hop.invoke_subgraph, complex=True)
@register(_hop.invoke_subgraph)
@wants_context
def higher_order_invoke_subgraph(subgraph: torch.fx.GraphModule, identifier: Any, *operands: Any, ctx: OpContext) -> Any:
    return ctx.inline(subgraph, list(operands))


@register(_hop.wrap_with_set_grad_enabled, complex=True)
@register(_hop.wrap_with_set_grad_enabled)
@wants_context
def higher_order_inline(enabled: bool, subgraph: torch.fx.GraphModule, *operands: Any, ctx: OpContext) -> Any:
    return ctx.inline(subgraph, list(operands))
