"""KernelGapPass: nodes ONNX Runtime's CPU provider has no kernel for are widened or rewritten."""

from __future__ import annotations

import collections

import onnx_ir as ir
import pytest
import torch

from torch_onnx_fx.optimize.runtime.kernel_gaps import KernelGapPass, has_cpu_kernel

from helpers import assert_matches_eager

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
    from helpers import assert_matches_eager

    class Power(torch.nn.Module):
        def forward(self, x):
            return x**2.5

    program = assert_matches_eager(Power(), (torch.rand(5, dtype=torch.float16),), rtol=1e-3, atol=1e-3)
    assert [n.op_type for n in program.model.graph] == ["Pow"]


_FLOAT64_FUNCTIONS = {
    "elu": lambda x: torch.nn.functional.elu(x, alpha=1.5),
    "selu": torch.nn.functional.selu,
    "leaky_relu": lambda x: torch.nn.functional.leaky_relu(x, 0.25),
    "prelu": lambda x: torch.nn.functional.prelu(x, torch.tensor([0.25], dtype=torch.float64)),
    "hardsigmoid": torch.nn.functional.hardsigmoid,
    "hardswish": torch.nn.functional.hardswish,
    "softplus": torch.nn.functional.softplus,
    "softsign": torch.nn.functional.softsign,
    "mish": torch.nn.functional.mish,
    "asinh": torch.asinh,
    "acosh": lambda x: torch.acosh(x.abs() + 1),
    "atanh": lambda x: torch.atanh(x / (x.abs().max() * 1.01)),
    "nonzero": lambda x: torch.nonzero(torch.where(x.abs() < 0.5, 0.0, x)),
}


@pytest.mark.parametrize("name", sorted(_FLOAT64_FUNCTIONS))
def test_float64_operators_without_runtime_kernels_keep_float64_precision(name):
    """Written in float64 operators, not computed in float32: relative error near float64's own,
    including tiny arguments (log1p/expm1 corrections) and large ones (no overflow)."""
    from helpers import assert_matches_eager

    x = torch.cat([
        torch.linspace(-30, 30, 61, dtype=torch.float64),
        torch.tensor([1e-12, -1e-12, 3e-9, -3e-9, 1e-5, -1e-5, 0.0], dtype=torch.float64),
    ])
    function = _FLOAT64_FUNCTIONS[name]
    assert_matches_eager(lambda x: function(x), (x,), rtol=1e-13, atol=1e-300)


def test_float64_instance_and_group_norm_keep_float64_precision():
    from helpers import assert_matches_eager

    x = torch.randn(2, 4, 5, 3, dtype=torch.float64) * 1e3 + 1e4
    norm = torch.nn.InstanceNorm2d(4, affine=True).double().eval()
    groups = torch.nn.GroupNorm(2, 4).double().eval()
    assert_matches_eager(lambda x: (norm(x), groups(x)), (x,), rtol=1e-10, atol=1e-10)


def test_float64_global_average_pooling_runs():
    # ONNX Runtime has no float64 GlobalAveragePool: the session failed to load (an OpInfo sample
    # of adaptive_avg_pool1d at 20 samples).
    from helpers import assert_matches_eager

    x = torch.randn(3, 8, 8, dtype=torch.float64) * 1e3
    assert_matches_eager(
        lambda x: (torch.nn.functional.adaptive_avg_pool1d(x, 1), torch.nn.functional.adaptive_avg_pool2d(x[None], 1)), (x,), rtol=1e-13, atol=0
    )


def test_rewritten_values_do_not_share_names_with_loop_bodies():
    # A float64 Atan rewrite in the main graph beside a Loop (complex128 logdet): its values once
    # took names the Loop body already used, which ONNX Runtime rejects as not SSA.
    a = torch.randn(1, 1, dtype=torch.complex128)
    program = assert_matches_eager(lambda a: torch.logdet(a), (a,), rtol=1e-10, atol=1e-12)
    producers = collections.Counter(
        value.name for node in ir.traversal.RecursiveGraphIterator(program.model.graph) for value in node.outputs
    )
    assert [name for name, count in producers.items() if count > 1] == []


CONV_CASES = {
    "conv1d_groups_dilation": (
        lambda x, w, b: torch.nn.functional.conv1d(x, w, b, stride=2, padding=1, dilation=2, groups=2),
        lambda dtype: (torch.randn(2, 4, 9, dtype=dtype), torch.randn(6, 2, 3, dtype=dtype), torch.randn(6, dtype=dtype)),
    ),
    "conv2d_asymmetric": (
        lambda x, w: torch.nn.functional.conv2d(x, w, padding=(1, 2), stride=(2, 1)),
        lambda dtype: (torch.randn(1, 3, 7, 6, dtype=dtype), torch.randn(4, 3, 3, 2, dtype=dtype)),
    ),
    "conv3d_unbatched": (
        lambda x, w: torch.nn.functional.conv3d(x, w),
        lambda dtype: (torch.randn(3, 4, 4, 4, dtype=dtype), torch.randn(2, 3, 1, 2, 3, dtype=dtype)),
    ),
}


@pytest.mark.parametrize("dtype", [torch.float64, torch.complex128])
@pytest.mark.parametrize("name", sorted(CONV_CASES))
def test_float64_conv_runs_as_matmul_of_patches(name, dtype):
    # ONNX Runtime has no float64 Conv; narrowing to float32 would lose precision, so the
    # convolution is rewritten into float64 MatMul (complex128 convolutions are float64 ones).
    fn, make_args = CONV_CASES[name]
    program = assert_matches_eager(fn, make_args(dtype), rtol=1e-10, atol=1e-12)
    assert "Conv" not in [node.op_type for node in program.model.graph]
