"""KernelGapPass: nodes ONNX Runtime's CPU provider has no kernel for are widened or rewritten."""

from __future__ import annotations

import onnx_ir as ir
import pytest

from torch_onnx_fx.runtime_kernels import KernelGapPass, has_cpu_kernel

pytest.importorskip("onnxruntime", reason="the pass adapts to ONNX Runtime's kernel registry")


def _model(op_type: str, dtype: ir.DataType, inputs: int = 1) -> ir.Model:
    values = [ir.Value(name=f"x{i}", type=ir.TensorType(dtype), shape=ir.Shape([3])) for i in range(inputs)]
    node = ir.Node("", op_type, values, num_outputs=1)
    node.outputs[0].type, node.outputs[0].shape, node.outputs[0].name = ir.TensorType(dtype), ir.Shape([3]), "y"
    graph = ir.Graph(values, node.outputs, nodes=[node], opset_imports={"": 18})
    return ir.Model(graph, ir_version=10)


def test_registry_lookup():
    assert has_cpu_kernel("Gemm", 18, {"T": ir.DataType.FLOAT}) is True
    assert has_cpu_kernel("Gemm", 18, {"T": ir.DataType.BFLOAT16}) is False
    assert has_cpu_kernel("NoSuchOperator", 18, {"T": ir.DataType.FLOAT}) is None


def test_bfloat16_gemm_is_computed_in_float_and_cast_back():
    model = _model("Gemm", ir.DataType.BFLOAT16, inputs=2)
    assert KernelGapPass()(model).modified
    ops = [n.op_type for n in model.graph]
    assert ops == ["Cast", "Cast", "Gemm", "Cast"]
    gemm = next(n for n in model.graph if n.op_type == "Gemm")
    assert gemm.inputs[0].dtype == ir.DataType.FLOAT
    assert model.graph.outputs[0].name == "y" and model.graph.outputs[0].dtype == ir.DataType.BFLOAT16


def test_float64_atan_is_rewritten_not_narrowed_alone():
    model = _model("Atan", ir.DataType.DOUBLE)
    assert KernelGapPass()(model).modified
    # A float32 Atan seeds the Newton step; the result is computed in float64.
    assert "Sin" in [n.op_type for n in model.graph] and model.graph.outputs[0].dtype == ir.DataType.DOUBLE


def test_supported_nodes_are_left_alone():
    model = _model("Add", ir.DataType.FLOAT, inputs=2)
    assert not KernelGapPass()(model).modified


def test_float16_nodes_are_left_to_onnx_runtime():
    """ONNX Runtime computes a float16 node without a kernel in float32 itself, so the graph keeps
    the float16 operator (as torch.onnx's does; PyTorch's own test asserts no Cast around Pow)."""
    import torch

    from helpers import assert_matches_eager

    class Power(torch.nn.Module):
        def forward(self, x):
            return x**2.5

    program = assert_matches_eager(Power(), (torch.rand(5, dtype=torch.float16),), rtol=1e-3, atol=1e-3)
    assert [n.op_type for n in program.model.graph] == ["Pow"]
