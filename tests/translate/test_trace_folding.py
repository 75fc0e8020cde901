"""Data movement on small constants computed while tracing: each fold must equal what ONNX's
reference evaluator computes for the node, weights must never be folded into constants, and
anything the folder does not take must stay a node."""

from __future__ import annotations

import numpy as np
import onnx
import onnx.reference
import onnx_ir as ir
import pytest
import torch

import torch_onnx_fx
from torch_onnx_fx.translate import trace_folding
from helpers import assert_matches_eager


def _constant(array: np.ndarray) -> ir.Value:
    tensor = ir.tensor(array)
    node = ir.Node("", "Constant", [], [ir.AttrTensor("value", tensor)])
    node.outputs[0].const_value = tensor
    return node.outputs[0]


def _reference(op_type: str, arrays: list[np.ndarray], attributes: dict) -> np.ndarray:
    names = [f"i{k}" for k in range(len(arrays))]
    node = onnx.helper.make_node(op_type, names, ["out"], **attributes)
    graph = onnx.helper.make_graph(
        [node], "g", [], [onnx.helper.make_tensor_value_info("out", onnx.TensorProto.UNDEFINED, None)],
        initializer=[onnx.numpy_helper.from_array(a, n) for a, n in zip(arrays, names)],
    )
    model = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 20)])
    return onnx.reference.ReferenceEvaluator(model).run(None, {})[0]


CASES = [
    ("Reshape", [np.arange(6, dtype=np.int64), np.array([2, -1], dtype=np.int64)], {}),
    ("Reshape", [np.arange(6, dtype=np.float32).reshape(2, 3), np.array([0, 3, 1], dtype=np.int64)], {}),
    ("Reshape", [np.array(7, dtype=np.int64), np.array([-1], dtype=np.int64)], {}),
    ("Reshape", [np.zeros((0, 3), dtype=np.int64), np.array([0, 3], dtype=np.int64)], {"allowzero": 1}),
    ("Concat", [np.array([1, 2], dtype=np.int64), np.array([3], dtype=np.int64)], {"axis": 0}),
    ("Concat", [np.ones((2, 1), dtype=np.bool_), np.zeros((2, 2), dtype=np.bool_)], {"axis": -1}),
    ("Unsqueeze", [np.array([4, 5], dtype=np.int64), np.array([-1, 0], dtype=np.int64)], {}),
    ("Squeeze", [np.ones((1, 3, 1), dtype=np.int32), np.array([0, -1], dtype=np.int64)], {}),
    ("Cast", [np.array([3, -1, 0], dtype=np.int64)], {"to": onnx.TensorProto.INT32}),
    ("Cast", [np.array([3, 0], dtype=np.int64)], {"to": onnx.TensorProto.BOOL}),
    ("Cast", [np.array([True, False])], {"to": onnx.TensorProto.FLOAT}),
]


@pytest.mark.parametrize("op_type, arrays, attributes", CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_fold_equals_onnx(op_type, arrays, attributes):
    folded = trace_folding.fold(op_type, [_constant(a) for a in arrays], attributes)
    assert folded is not None
    expected = _reference(op_type, arrays, attributes)
    assert folded.dtype == expected.dtype and folded.shape == expected.shape
    np.testing.assert_array_equal(folded, expected)


NOT_FOLDED = [
    # float sources keep ONNX's rounding rules; values a cast cannot hold are left to the node
    ("Cast", [np.array([1.5], dtype=np.float32)], {"to": onnx.TensorProto.INT64}),
    ("Cast", [np.array([300], dtype=np.int64)], {"to": onnx.TensorProto.UINT8}),
    # larger than shape arithmetic: the optimizer's call
    ("Reshape", [np.arange(100, dtype=np.int64), np.array([10, 10], dtype=np.int64)], {}),
    # malformed: left for shape inference to name
    ("Reshape", [np.arange(6, dtype=np.int64), np.array([4, -1], dtype=np.int64)], {}),
    ("Squeeze", [np.ones((2, 3), dtype=np.int64), np.array([0], dtype=np.int64)], {}),
    # empty axes: squeezes every size-1 dimension in ONNX Runtime, nothing in numpy
    ("Squeeze", [np.ones((1, 3, 1), dtype=np.int64), np.zeros((0,), dtype=np.int64)], {}),
    ("Concat", [np.array([1], dtype=np.int64), np.array([1], dtype=np.int32)], {"axis": 0}),
    # computes rather than moves
    ("Add", [np.array([1], dtype=np.int64), np.array([1], dtype=np.int64)], {}),
]


@pytest.mark.parametrize("op_type, arrays, attributes", NOT_FOLDED, ids=[f"{c[0]}-{i}" for i, c in enumerate(NOT_FOLDED)])
def test_not_folded(op_type, arrays, attributes):
    assert trace_folding.fold(op_type, [_constant(a) for a in arrays], attributes) is None


def test_an_initializer_is_never_read():
    weight = ir.Value(name="w", const_value=ir.tensor(np.arange(4, dtype=np.int64)))
    assert trace_folding.fold("Reshape", [weight, _constant(np.array([2, 2], dtype=np.int64))], {}) is None


class SmallWeight(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.scale = torch.nn.Parameter(torch.arange(6, dtype=torch.float32))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * self.scale.view(2, 3).unsqueeze(0)


def test_small_weights_stay_replaceable():
    model = SmallWeight().eval()
    x = torch.randn(4, 2, 3)
    program = torch_onnx_fx.export(model, (x,), verbose=False, optimize=False)
    assert_matches_eager(model, (x,), program=program)
    new = {"scale": torch.linspace(-1, 1, 6)}
    program.apply_weights(new)
    model.load_state_dict(new)
    assert_matches_eager(model, (x,), program=program)


def test_static_shapes_translate_without_folding_nodes():
    class Views(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x.view(2, 12).mean(dim=1, keepdim=True).expand(2, 5)

    x = torch.randn(2, 3, 4)
    program = torch_onnx_fx.export(Views().eval(), (x,), verbose=False, optimize=False)
    ops = [node.op_type for node in program.model.graph]
    # the view's and the expand's sizes and the mean's axes are constants, not Concat/Reshape of constants
    assert "Concat" not in ops, ops
    assert_matches_eager(Views().eval(), (x,), program=program)
