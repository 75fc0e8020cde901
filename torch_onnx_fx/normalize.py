"""Normalize: FX passes between decomposition and translation that make ATen's implicit dtype
rules explicit, so every translation sees tensor operands that already agree.

ATen computes ``int_tensor + 0.5`` in float, ``real * 1j`` in complex, ``bool_tensor.sum()`` in
int64 and indexes with any integer type; ONNX operators take one dtype per type parameter and
index with int64. Each pass here inserts ``prims.convert_element_type`` nodes (translated as a
``Cast``, or for complex results by the complex conversion) in front of the operands that need
one. A pass is a ``torch.fx`` ``PassBase`` with its contract in its docstring; it changes the graph
in place and returns a ``PassResult`` saying whether it changed anything, leaving the module's
generated code to its caller: :func:`normalize` runs them over the program's graph and every
subgraph and recompiles each changed module once.

Python numbers and symbolic sizes are not tensors and stay as they are here: the graph walk
retypes them (``promotion.promote_scalars``). One pass simplifies instead: ``ArangeIndexPass``
(``arange_indexing.py``) turns indexing by aranges over whole dimensions into a reshape.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Callable

import torch
from torch.fx.passes.infra.pass_base import PassBase, PassResult

from torch_onnx_fx import inplace, promotion
from torch_onnx_fx.arange_indexing import ArangeIndexPass

if TYPE_CHECKING:
    from torch_onnx_fx.registry import TranslationTable

__all__ = [
    "InPlaceToFunctionalPass", "TypePromotionPass", "JoinPromotionPass", "IntegralAccumulationPass", "IndexDtypePass",
    "HalfPrecisionAccumulationPass", "EffectTokenPass", "normalize",
]

logger = logging.getLogger(__name__)

_CONVERT = torch.ops.prims.convert_element_type.default

# Operators writing a tensor argument into ``self``'s dtype (ATen casts it): argument indices.
_WRITTEN_INTO_SELF = {
    "aten::index_put": (2,), "aten::_unsafe_index_put": (2,), "aten::copy": (1,),
    "aten::masked_fill.Tensor": (2,), "aten::index_copy": (3,), "aten::slice_scatter": (1,),
    "aten::select_scatter": (1,), "aten::diagonal_scatter": (1,), "aten::scatter.src": (3,),
}


def _name(node: torch.fx.Node) -> str | None:
    return node.target.name() if isinstance(node.target, torch._ops.OpOverload) else None


def _tensor_example(arg: Any) -> torch.Tensor | None:
    example = arg.meta.get("val") if isinstance(arg, torch.fx.Node) else None
    return example if isinstance(example, torch.Tensor) else None


def _converted(node: torch.fx.Node, arg: torch.fx.Node, dtype: torch.dtype) -> torch.fx.Node:
    """A ``convert_element_type(arg, dtype)`` node just before ``node``, with ``node``'s source
    location so that errors about it point at the model's line."""
    graph = node.graph
    with graph.inserting_before(node):
        conversion = graph.call_function(_CONVERT, (arg, dtype))
    conversion.meta["val"] = arg.meta["val"].to(dtype)
    for key in ("stack_trace", "nn_module_stack", "source_fn_stack"):
        if key in node.meta:
            conversion.meta[key] = node.meta[key]
    return conversion


class _ConvertingPass(PassBase):
    """Shared walk: ``conversions(node)`` names (argument index, dtype) pairs; list arguments
    are addressed as (index, position in the list)."""

    def conversions(self, node: torch.fx.Node) -> list[tuple[int | tuple[int, int], torch.dtype]]:
        raise NotImplementedError

    def call(self, graph_module: torch.fx.GraphModule) -> PassResult:
        count = 0
        for node in list(graph_module.graph.nodes):
            if node.op != "call_function":
                continue
            wanted = self.conversions(node)
            if not wanted:
                continue
            args = list(node.args)
            for where, dtype in wanted:
                if isinstance(where, tuple):
                    index, position = where
                    items = list(args[index])
                    items[position] = _converted(node, items[position], dtype)
                    args[index] = type(node.args[index])(items)
                else:
                    args[where] = _converted(node, args[where], dtype)
                count += 1
            node.args = tuple(args)
        if count:
            logger.debug("%s: %d conversion(s)", type(self).__name__, count)
        return PassResult(graph_module, bool(count))


class TypePromotionPass(_ConvertingPass):
    """Tensor operands of an element-wise op become the dtype ATen computes it in.

    Contract: for every node with a promotion rule (``promotion.promotion_rule``), each
    participating tensor argument whose dtype differs from the computation dtype (torch's own
    ``elementwise_dtypes``) is converted to it — ``int + float``, ``real * 1j`` and complex64
    with complex128 alike; and a tensor written into ``self`` (``index_put`` values, ``copy``
    source) is converted to ``self``'s dtype.
    """

    def conversions(self, node: torch.fx.Node) -> list[tuple[int | tuple[int, int], torch.dtype]]:
        name = _name(node)
        written = _WRITTEN_INTO_SELF.get(name) if name else None
        if written is not None:
            target = _tensor_example(node.args[0]) if node.args else None
            dtype = target.dtype if target is not None else None
            indices: tuple[int, ...] = written
        else:
            rule = promotion.promotion_rule(node.target)
            if rule is None:
                return []
            examples = [a.meta.get("val") if isinstance(a, torch.fx.Node) else a for a in node.args]
            dtype, indices = promotion.computation_dtype(rule, examples), rule[1]
        if dtype is None:
            return []
        result = []
        for i in indices:
            example = _tensor_example(node.args[i]) if i < len(node.args) else None
            if example is not None and example.dtype != dtype:
                result.append((i, dtype))
        return result


class IntegralAccumulationPass(_ConvertingPass):
    """Reductions and softmaxes compute in the dtype ATen computes them in.

    Contract: an operator with a ``dtype`` argument that means "convert the input first"
    (``sum``, ``cumsum``, ``softmax.int``, ``mean``… — ``promotion.DTYPE_ARGUMENT``) and is given
    one gets its input converted to it (``norm(z, 0)`` sums a bool mask in float); without one,
    a sum or product of a bool or integer input narrower than int64 converts it to int64 (ATen's
    result is int64; ONNX would reduce in the input type, and rejects bool).
    """

    def conversions(self, node: torch.fx.Node) -> list[tuple[int | tuple[int, int], torch.dtype]]:
        name = _name(node)
        if name not in promotion.DTYPE_ARGUMENT or not node.args:
            return []
        example = _tensor_example(node.args[0])
        if example is None:
            return []
        wanted = node.kwargs.get("dtype")
        if wanted is None:
            names = [a.name for a in node.target._schema.arguments]
            position = names.index("dtype") if "dtype" in names else None
            if position is not None and position < len(node.args):
                wanted = node.args[position]
        if wanted is None and name in promotion.INTEGRAL_TO_LONG:
            narrow = not example.dtype.is_floating_point and not example.is_complex()
            wanted = torch.int64 if narrow else None
        return [(0, wanted)] if isinstance(wanted, torch.dtype) and wanted != example.dtype else []


class IndexDtypePass(_ConvertingPass):
    """Index tensors of advanced indexing become int64.

    Contract: in ``index``/``index_put`` (and their unsafe forms) every index tensor of an
    integer type other than int64 is converted to int64 (ScatterND and GatherND take only int64;
    ATen takes any integer type). Boolean masks are left alone.
    """

    def conversions(self, node: torch.fx.Node) -> list[tuple[int | tuple[int, int], torch.dtype]]:
        if _name(node) not in promotion.INDEX_LISTS or len(node.args) < 2 or not isinstance(node.args[1], (list, tuple)):
            return []
        result: list[tuple[int | tuple[int, int], torch.dtype]] = []
        for position, index in enumerate(node.args[1]):
            example = _tensor_example(index)
            if example is not None and example.dtype not in (torch.int64, torch.bool) and not example.dtype.is_floating_point:
                result.append(((1, position), torch.int64))
        return result


_JOINING = frozenset({"aten::cat", "aten::concat", "aten::stack"})


class JoinPromotionPass(_ConvertingPass):
    """Tensors joined by ``cat``/``stack`` are converted to the result's dtype first.

    Contract: every tensor of the list argument whose dtype differs from the node's result
    (ATen promotes ``cat([float64, complex64])`` to complex128) is converted to it; ONNX's Concat
    takes one type, and a real tensor beside complex ones must become complex (a real view).
    """

    def conversions(self, node: torch.fx.Node) -> list[tuple[int | tuple[int, int], torch.dtype]]:
        result = node.meta.get("val")
        if _name(node) not in _JOINING or not isinstance(result, torch.Tensor) or not node.args:
            return []
        tensors = node.args[0]
        if not isinstance(tensors, (list, tuple)):
            return []
        return [
            ((0, position), result.dtype) for position, tensor in enumerate(tensors)
            if (example := _tensor_example(tensor)) is not None and example.dtype != result.dtype
        ]


# Operators ATen's CPU kernels compute on float16/bfloat16 tensors with float32 accumulation
# (``opmath``): sums of many terms, norms, products of matrices, convolutions, attention.
# Computed in half precision they overflow (a norm of a few hundred values exceeds 65504) or
# lose digits eager keeps; computed in float32 and rounded once they round as eager does.
_HALF_ACCUMULATING = frozenset({
    "aten::sum", "aten::sum.dim_IntList", "aten::mean", "aten::mean.dim", "aten::linalg_vector_norm",
    "aten::dist", "aten::norm.Scalar", "aten::norm.ScalarOpt_dim", "aten::var.correction", "aten::std.correction",
    "aten::cumsum", "aten::prod", "aten::prod.dim_int", "aten::mm", "aten::bmm", "aten::addmm", "aten::addbmm",
    "aten::baddbmm", "aten::matmul", "aten::linear", "aten::dot", "aten::mv", "aten::addmv", "aten::convolution",
    "aten::conv1d", "aten::conv2d", "aten::conv3d", "aten::conv_transpose1d", "aten::conv_transpose2d",
    "aten::conv_transpose3d.input", "aten::scaled_dot_product_attention", "aten::linalg_matrix_exp",
    "aten::logsumexp", "aten::_softmax", "aten::_log_softmax", "aten::grid_sampler_2d", "aten::upsample_bilinear2d.vec",
})
_HALF = (torch.float16, torch.bfloat16)


class HalfPrecisionAccumulationPass(PassBase):
    """float16/bfloat16 operators that ATen accumulates in float32 compute in float32 here too.

    Contract: a node of ``_HALF_ACCUMULATING`` with one tensor result of a half dtype gets every
    half-dtype tensor argument converted to float32, computes in float32 (its example value
    says so), and a conversion back to the half dtype takes its place for every user. Nodes
    ``fused`` says become one ONNX operator (``Attention``) are left to that operator's kernel,
    which keeps its intermediates at the precision it chooses.
    """

    def __init__(self, fused: Callable[[torch.fx.Node], bool] = lambda node: False) -> None:
        super().__init__()
        self.fused = fused

    def call(self, graph_module: torch.fx.GraphModule) -> PassResult:
        count = 0
        for node in list(graph_module.graph.nodes):
            if node.op != "call_function" or _name(node) not in _HALF_ACCUMULATING or self.fused(node):
                continue
            result = node.meta.get("val")
            if not isinstance(result, torch.Tensor) or result.dtype not in _HALF:
                continue
            node.args = tuple(_to_float(node, a) for a in node.args)
            node.kwargs = {k: _to_float(node, v) for k, v in node.kwargs.items()}
            node.meta["val"] = result.to(torch.float32)
            graph = graph_module.graph
            with graph.inserting_after(node):
                back = graph.call_function(_CONVERT, (node, result.dtype))
            back.meta["val"] = result
            for key in ("stack_trace", "nn_module_stack", "source_fn_stack"):
                if key in node.meta:
                    back.meta[key] = node.meta[key]
            node.replace_all_uses_with(back, delete_user_cb=lambda user: user is not back)
            count += 1
        if count:
            logger.debug("computing %d half-precision node(s) in float32", count)
        return PassResult(graph_module, bool(count))


def _to_float(node: torch.fx.Node, arg: Any) -> Any:
    example = _tensor_example(arg)
    if example is not None and example.dtype in _HALF:
        return _converted(node, arg, torch.float32)
    if isinstance(arg, (list, tuple)):
        return type(arg)(_to_float(node, a) for a in arg)
    return arg


class InPlaceToFunctionalPass(PassBase):
    """In-place ops on tensors nothing else observes become their functional ops.

    Contract: an in-place node (``aten.add_.Tensor``) that ``table`` cannot translate as it is,
    but whose functional overload it can, and whose tensor :func:`torch_onnx_fx.inplace.same_tensor`
    finds unobserved through aliases, is retargeted to the functional overload; every node after
    it that read the mutated tensor (through any node of its chain) reads the new node instead.
    The graph is then free of that mutation, so translation never rebinds values.
    """

    def __init__(self, table: TranslationTable) -> None:
        super().__init__()
        self.table = table

    def call(self, graph_module: torch.fx.GraphModule) -> PassResult:
        count = 0
        order = {node: i for i, node in enumerate(graph_module.graph.nodes)}
        for node in list(graph_module.graph.nodes):
            if node.op != "call_function" or self.table.has(node.target, node):
                continue
            found = inplace.rebinding(node, self.table)
            if found is None:
                continue
            functional, chain = found
            node.target = functional
            for alias in chain:
                for user in list(alias.users):
                    if user is not node and (user.op == "output" or order[user] > order[node]):
                        user.replace_input_with(alias, node)
            count += 1
        if count:
            logger.debug("%d in-place op(s) made functional", count)
        return PassResult(graph_module, bool(count))


_WITH_EFFECTS = torch.ops.higher_order.with_effects


class EffectTokenPass(PassBase):
    """Side-effecting operators are called directly, without their ordering token.

    Contract: every ``with_effects(token, op, *args)`` becomes ``op(*args)``; its users
    ``getitem(·, 0)`` (the new token) read the incoming token instead, and ``getitem(·, i)``
    read the op's result ``i - 1``. An ONNX graph has no side effects to order, so the token
    chain collapses to the program's token inputs, which the graph walk leaves out of the graph.
    """

    def call(self, graph_module: torch.fx.GraphModule) -> PassResult:
        graph = graph_module.graph
        count = 0
        for node in list(graph.nodes):
            if node.op != "call_function" or node.target is not _WITH_EFFECTS:
                continue
            token, op, *args = node.args
            with graph.inserting_before(node):
                call = graph.call_function(op, tuple(args), dict(node.kwargs))
            call.meta = {**node.meta, "val": _results(node.meta.get("val"))}
            single = not isinstance(call.meta["val"], (list, tuple))
            for user in list(node.users):
                index = user.args[1]
                if index == 0:
                    user.replace_all_uses_with(token)
                elif single:
                    user.replace_all_uses_with(call)
                else:
                    user.args = (call, index - 1)
                    continue
                graph.erase_node(user)
            graph.erase_node(node)
            count += 1
        if count:
            logger.debug("EffectTokenPass: %d effectful call(s) unwrapped", count)
        return PassResult(graph_module, bool(count))


def _results(value: Any) -> Any:
    """The wrapped op's result from ``with_effects``' ``(token, *results)``."""
    if not isinstance(value, (list, tuple)):
        return value
    rest = tuple(value[1:])
    return rest[0] if len(rest) == 1 else rest


def normalize(program: torch.export.ExportedProgram, table: TranslationTable | None = None) -> bool:
    """Run the normalize passes over ``program``'s graph and its subgraphs, in place; whether any
    of them changed something. ``table`` (the export's translations) tells which nodes become
    one fused ONNX operator."""
    fused = table.fused if table is not None else (lambda node: False)
    # A user's own translation of index.Tensor sees every index node as captured.
    own_index = table is not None and "aten::index.Tensor" in table.custom_targets
    passes: tuple[PassBase, ...] = (
        EffectTokenPass(),
        *(() if own_index else (ArangeIndexPass(),)),
        *((InPlaceToFunctionalPass(table),) if table is not None else ()),
        TypePromotionPass(), JoinPromotionPass(), IntegralAccumulationPass(), IndexDtypePass(), HalfPrecisionAccumulationPass(fused),
    )
    modified = False
    for module in list(program.graph_module.modules()):
        if not isinstance(module, torch.fx.GraphModule):
            continue
        changed = False
        for normalize_pass in passes:
            result = normalize_pass(module)
            changed = changed or bool(result and result.modified)
        if changed:
            # Once for all the passes, not after each: regenerating a deep model's Python code
            # costs as much as a pass's own work.
            module.recompile()
        modified = modified or changed
    return modified
