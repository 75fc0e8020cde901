"""The tracer: per-node inference reused for nodes that read the same things, and the constants
it makes of Python numbers."""

from __future__ import annotations

import numpy as np
import onnx_ir as ir
import torch

from helpers import assert_matches_eager
from torch_onnx_fx.translate.node_inference import infer_node


def _value(name: str, dims: list, dtype: ir.DataType = ir.DataType.FLOAT) -> ir.Value:
    return ir.Value(name=name, type=ir.TensorType(dtype), shape=ir.Shape(dims))


def _transpose(x: ir.Value, perm: list[int]) -> ir.Node:
    return ir.Node("", "Transpose", [x], [ir.AttrInt64s("perm", perm)], outputs=[ir.Value(name=f"{x.name}_t")])


def test_equal_nodes_get_equal_and_independent_shapes():
    first, second = (_transpose(_value(n, ["batch", 3, 5]), [2, 0, 1]) for n in ("a", "b"))
    cache: dict = {}
    infer_node(first, 18, cache)
    infer_node(second, 18, cache)
    assert len(cache) == 1
    assert [str(d) for d in second.outputs[0].shape] == ["5", "batch", "3"]
    assert second.outputs[0].shape is not first.outputs[0].shape
    assert second.outputs[0].dtype == ir.DataType.FLOAT


def test_attributes_and_constant_inputs_are_part_of_what_is_reused():
    cache: dict = {}
    infer_node(_transpose(_value("b", ["batch", 3, 5]), [2, 0, 1]), 18, cache)
    other = _transpose(_value("c", ["batch", 3, 5]), [1, 2, 0])
    infer_node(other, 18, cache)
    assert [str(d) for d in other.outputs[0].shape] == ["3", "5", "batch"]
    shapes = []
    for target in ([2, 15], [30]):
        data = _value("d", [2, 3, 5])
        target_value = _value("shape", [len(target)], ir.DataType.INT64)
        target_value.const_value = ir.tensor(np.array(target, dtype=np.int64))
        node = ir.Node("", "Reshape", [data, target_value], outputs=[ir.Value(name="reshaped")])
        infer_node(node, 18, cache)
        shapes.append([int(d) for d in node.outputs[0].shape])
    assert shapes == [[2, 15], [30]]


def test_reused_types_are_not_shared_between_values():
    cache: dict = {}
    first, second = (_transpose(_value(n, ["batch", 3, 5]), [2, 0, 1]) for n in ("e", "f"))
    infer_node(first, 18, cache)
    infer_node(second, 18, cache)
    # onnx-ir sets a dtype on the value's type object: one value's change must stay its own.
    second.outputs[0].dtype = ir.DataType.DOUBLE
    first.outputs[0].dtype = ir.DataType.INT64
    assert second.outputs[0].dtype == ir.DataType.DOUBLE
    third = _transpose(_value("g", ["batch", 3, 5]), [2, 0, 1])
    infer_node(third, 18, cache)
    assert third.outputs[0].dtype == ir.DataType.FLOAT


def test_constant_calls_become_shared_typed_constants():
    from onnxscript import onnx_opset

    from torch_onnx_fx.translate.tracer import GraphTracer

    op = onnx_opset.opset18
    tracer = GraphTracer(ir.Graph([], [], nodes=[], name="g"), 18)
    with tracer.active():
        ints = op.Constant(value_ints=[2, -1])
        again = op.Constant(value_ints=[2, -1])
        one = op.Constant(value_int=3)
        floats = op.Constant(value_floats=[0.1, 2.0])
        text = op.Constant(value_string="a")
        tensor = op.Constant(value=ir.tensor(np.arange(6, dtype=np.float16).reshape(2, 3)))
        strings = op.Constant(value_strings=["a", "b"])
    assert again is ints
    expected = [
        (ints, ir.DataType.INT64, (2,), np.array([2, -1])),
        (one, ir.DataType.INT64, (), np.array(3)),
        (floats, ir.DataType.FLOAT, (2,), np.array([0.1, 2.0], dtype=np.float32)),
        (tensor, ir.DataType.FLOAT16, (2, 3), np.arange(6, dtype=np.float16).reshape(2, 3)),
    ]
    for value, dtype, shape, data in expected:
        assert value.dtype == dtype and tuple(value.shape) == shape
        np.testing.assert_array_equal(value.const_value.numpy(), data)
        assert value.const_value.numpy().dtype == data.dtype
    # Forms constant() does not make are still nodes of their own, typed by ONNX inference,
    # and serialize (a str in a string tensor does not).
    assert text.const_value is None and text.dtype == ir.DataType.STRING and tuple(text.shape) == ()
    assert strings.const_value is None and strings.dtype == ir.DataType.STRING and tuple(strings.shape) == (2,)
    assert [n.op_type for n in tracer.graph] == ["Constant"] * 6  # the repeated call made none
    tracer.graph.outputs.extend([text, strings])
    ir.serde.serialize_model(ir.Model(tracer.graph, ir_version=10))


def test_a_constant_of_another_dtype_than_the_node_gets_its_cast():
    # The constant's Identity (a shared constant is never renamed) must keep the constant's type,
    # or the dtype check in translation sees none and the model declares float16 for float32 data.
    import torch
    from onnxscript import opset18 as op

    import torch_onnx_fx

    class AddFull(torch.nn.Module):
        def forward(self, x):
            return x + torch.full((3,), 2.5, dtype=torch.float16)

    def full(size, fill_value, dtype=None, layout=None, device=None, pin_memory=None):
        return op.Constant(value_floats=[float(fill_value)] * int(size[0]))  # float32

    def full_as_python_float(size, fill_value, dtype=None, layout=None, device=None, pin_memory=None):
        return float(fill_value)  # becomes a float32 constant too

    x = torch.randn(3).half()
    expected = AddFull()(x)
    for translation in (full, full_as_python_float):
        for optimize in (True, False):
            program = torch_onnx_fx.export(
                AddFull(), (x,), dynamo=True, optimize=optimize, verbose=False,
                custom_translation_table={torch.ops.aten.full.default: translation},
            )
            outputs = program(x)
            assert len(outputs) == 1
            assert outputs[0].dtype == torch.float16
            torch.testing.assert_close(outputs[0], expected)


def test_a_number_cast_like_a_float64_value_is_a_double_constant():
    # op.CastLike(0.1, x) made 0.1 a float32 constant first: logit's eps and cdist's p put float64
    # results 1e-8 off, and histc counted two values near its float32-rounded range in other bins.
    x = torch.tensor([0.1, 0.10000000149011612, 0.1000000001, 0.0999999999, 0.3, 0.30000001192092896, 0.3000000001, -0.1, 0.7], dtype=torch.float64)
    assert_matches_eager(
        lambda x: (torch.logit(x, eps=0.1000000001), torch.cdist(x[None, :, None], x[None, :, None] * 0.5, p=1.5), torch.histc(x, bins=4, min=0.1, max=0.30000001)),
        (x,), rtol=1e-15, atol=1e-15,
    )


def test_a_number_cast_to_float64_is_a_double_constant():
    # torchlib's pow.Scalar writes op.Cast(base, to=exponent's dtype): 1.7 became a float32
    # constant first and every float64 1.7 ** x came out 1e-7 off (torch.onnx too).
    x = torch.linspace(-3, 3, 13, dtype=torch.float64)
    assert_matches_eager(lambda x: (1.7**x, torch.pow(0.3, x), torch.float_power(2.9, x)), (x,), rtol=1e-15, atol=0)
