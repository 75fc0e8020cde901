"""Element-wise operands in the dtype ATen computes in, written into ``self``'s dtype where ATen
casts, and joined tensors in the joined result's dtype."""

from __future__ import annotations

import torch

from torch_onnx_fx.normalize import promotion
from torch_onnx_fx.normalize.conversions import ConvertingPass, node_name, tensor_example

__all__ = ["TypePromotionPass", "JoinPromotionPass"]

# Operators writing a tensor argument into ``self``'s dtype (ATen casts it): argument indices.
_WRITTEN_INTO_SELF = {
    "aten::index_put": (2,), "aten::_unsafe_index_put": (2,), "aten::copy": (1,),
    "aten::masked_fill.Tensor": (2,), "aten::index_copy": (3,), "aten::slice_scatter": (1,),
    "aten::select_scatter": (1,), "aten::diagonal_scatter": (1,), "aten::scatter.src": (3,),
}


class TypePromotionPass(ConvertingPass):
    """Tensor operands of an element-wise op become the dtype ATen computes it in.

    Contract: for every node with a promotion rule (``promotion.promotion_rule``), each
    participating tensor argument whose dtype differs from the computation dtype (torch's own
    ``elementwise_dtypes``) is converted to it — ``int + float``, ``real * 1j`` and complex64
    with complex128 alike; and a tensor written into ``self`` (``index_put`` values, ``copy``
    source) is converted to ``self``'s dtype.
    """

    def conversions(self, node: torch.fx.Node) -> list[tuple[int | tuple[int, int], torch.dtype]]:
        name = node_name(node)
        written = _WRITTEN_INTO_SELF.get(name) if name else None
        if written is not None:
            target = tensor_example(node.args[0]) if node.args else None
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
            example = tensor_example(node.args[i]) if i < len(node.args) else None
            if example is not None and example.dtype != dtype:
                result.append((i, dtype))
        return result


_JOINING = frozenset({"aten::cat", "aten::concat", "aten::stack"})


class JoinPromotionPass(ConvertingPass):
    """Tensors joined by ``cat``/``stack`` are converted to the result's dtype first.

    Contract: every tensor of the list argument whose dtype differs from the node's result
    (ATen promotes ``cat([float64, complex64])`` to complex128) is converted to it; ONNX's Concat
    takes one type, and a real tensor beside complex ones must become complex (a real view).
    """

    def conversions(self, node: torch.fx.Node) -> list[tuple[int | tuple[int, int], torch.dtype]]:
        result = node.meta.get("val")
        if node_name(node) not in _JOINING or not isinstance(result, torch.Tensor) or not node.args:
            return []
        tensors = node.args[0]
        if not isinstance(tensors, (list, tuple)):
            return []
        return [
            ((0, position), result.dtype) for position, tensor in enumerate(tensors)
            if (example := tensor_example(tensor)) is not None and example.dtype != result.dtype
        ]
