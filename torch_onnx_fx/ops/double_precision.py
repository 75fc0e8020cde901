"""float64 computations torchlib narrows to float32, left to torch's decompositions instead.

Some torchlib translations cast to float32 on the way (ONNX Runtime implements ``Celu`` for float32
only; LayerNormalization keeps its mean and inverse deviation in float32). For a float64 model that is a silent
loss of half the digits, and every value past 3.4e38 becomes an infinity: celu(1e231) was inf.
A sweep of every OpInfo operator in float64 for float32 values in graphs whose program holds none
found these; each is limited here to the nodes it computes exactly, and the others decompose into
operators that stay in float64. (float64 embedding_bag, which torch cannot decompose, is computed
in :mod:`.embedding_bag`.)
"""

from __future__ import annotations

import operator

import torch

from torch_onnx_fx.registry import float32_attribute, float64_input, limit_torchlib

__all__: list[str] = []


def _not_float64(node: torch.fx.Node) -> bool:
    return not float64_input(node)


def _statistics_exact(node: torch.fx.Node) -> bool:
    """native_layer_norm: its normalized output is computed in float64 by ONNX Runtime; only the
    mean and inverse deviation it also returns are float32."""
    if not float64_input(node):
        return True
    return all(user.target is operator.getitem and user.args[1] == 0 for user in node.users)


# torchlib passes a layer norm's eps as a float attribute, rounded for a float64 norm (1e-5
# became 9.99999974738e-06); such nodes go to torch's decomposition, which adds eps in double.
_LAYER_NORM_EPSILON = float32_attribute(4, "eps", 1e-5)

limit_torchlib("aten::celu", _not_float64)
limit_torchlib("aten::native_layer_norm", lambda node: _statistics_exact(node) and _LAYER_NORM_EPSILON(node))
# torchlib's instance norm over running statistics is a BatchNormalization, whose float epsilon
# attribute put a float64 norm 5.6e3 ulps off (7e-13); torch's decomposition is a batch norm,
# ours, which adds eps in double.
limit_torchlib("aten::instance_norm", float32_attribute(7, "eps", 1e-5))


# ONNX Runtime's float64 LogSoftmax kernel mishandles non-finite rows: a NaN gave finite numbers
# (log_softmax([nan, 1, 2, 3, 4]) was [nan, 43.05, 44.05, ...]) and +inf left the other entries
# -inf, where ATen's max-shifted formula gives NaN throughout (its float32 kernel agrees with
# ATen). float64 takes torch's decomposition, the same formula as ATen's, whose max propagates NaN.
def _result_not_float64(node: torch.fx.Node) -> bool:
    result = node.meta.get("val")
    return not (isinstance(result, torch.Tensor) and result.dtype == torch.float64)


limit_torchlib("aten::_log_softmax", _result_not_float64)
limit_torchlib("aten::log_softmax.int", _result_not_float64)
