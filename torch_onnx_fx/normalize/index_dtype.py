"""int64 index tensors for advanced indexing and gather (ONNX's ScatterND and GatherND take no
other; GatherElements takes int32 too, but not the empty uint8 index ATen's gather accepts)."""

from __future__ import annotations

import torch

from torch_onnx_fx.normalize import promotion
from torch_onnx_fx.normalize.conversions import ConvertingPass, node_name, tensor_example

__all__ = ["IndexDtypePass"]


class IndexDtypePass(ConvertingPass):
    """Index tensors of advanced indexing become int64.

    Contract: in ``index``/``index_put`` (and their unsafe forms) every index tensor of an
    integer type other than int64 is converted to int64 (ScatterND and GatherND take only int64;
    ATen takes any integer type). Boolean masks are left alone. ``gather``'s index too.
    """

    def conversions(self, node: torch.fx.Node) -> list[tuple[int | tuple[int, int], torch.dtype]]:
        if node_name(node) == "aten::gather" and len(node.args) > 2:
            example = tensor_example(node.args[2])
            return [(2, torch.int64)] if example is not None and example.dtype != torch.int64 else []
        if node_name(node) not in promotion.INDEX_LISTS or len(node.args) < 2 or not isinstance(node.args[1], (list, tuple)):
            return []
        result: list[tuple[int | tuple[int, int], torch.dtype]] = []
        for position, index in enumerate(node.args[1]):
            example = tensor_example(index)
            if example is not None and example.dtype not in (torch.int64, torch.bool) and not example.dtype.is_floating_point:
                result.append(((1, position), torch.int64))
        return result
