"""Operators defined with torch.library export through custom_translation_table."""

from __future__ import annotations

import onnx
import onnxscript
import pytest
import torch
from onnxscript import FLOAT, INT64
from onnxscript import opset18 as op
from torch import nn

import torch_onnx_fx
from helpers import assert_matches_eager


@torch.library.custom_op("tofx_test::scaled_add", mutates_args=())
def scaled_add(x: torch.Tensor, y: torch.Tensor, alpha: float) -> torch.Tensor:
    return x + alpha * y


@scaled_add.register_fake
def _(x, y, alpha):
    return torch.empty_like(x)


torch.library.define("tofx_test::clip_sum", "(Tensor x, float bound) -> Tensor")


@torch.library.impl("tofx_test::clip_sum", "CompositeExplicitAutograd")
def clip_sum(x, bound):
    return x.clamp(-bound, bound).sum(-1)


@torch.library.register_fake("tofx_test::clip_sum")
def _(x, bound):
    return x.new_empty(x.shape[:-1])


class Model(nn.Module):
    def forward(self, x, y):
        return torch.ops.tofx_test.clip_sum(torch.ops.tofx_test.scaled_add(x, y, 0.5), 1.0)


def scaled_add_onnx(x, y, alpha: float):
    return op.Add(x, op.Mul(y, alpha))


def clip_sum_onnx(x, bound: float):
    return op.ReduceSum(op.Clip(x, -bound, bound), [-1], keepdims=0)


def test_custom_ops_with_translations():
    table = {
        torch.ops.tofx_test.scaled_add.default: scaled_add_onnx,
        torch.ops.tofx_test.clip_sum.default: clip_sum_onnx,
    }
    assert_matches_eager(
        Model(), (torch.randn(3, 4), torch.randn(3, 4)), custom_translation_table=table,
        dynamic_shapes=({0: "n"}, {0: "n"}), more_inputs=[((torch.randn(5, 4), torch.randn(5, 4)), {})],
    )


def test_missing_custom_translations_are_all_listed():
    with pytest.raises(torch_onnx_fx.MissingTranslationError) as info:
        torch_onnx_fx.export(Model(), (torch.randn(3, 4), torch.randn(3, 4)), verbose=False)
    assert set(info.value.targets) == {"tofx_test::scaled_add", "tofx_test::clip_sum"}
    assert "torch.ops.tofx_test.scaled_add.default" in str(info.value)


custom = onnxscript.values.Opset("com.example", 1)


@onnxscript.script(custom)
def ScaledAdd(x, y, alpha: float):
    return op.Add(x, op.Mul(y, op.CastLike(alpha, y)))


def test_custom_domain_functions_get_opset_imports():
    table = {
        torch.ops.tofx_test.scaled_add.default: ScaledAdd,
        torch.ops.tofx_test.clip_sum.default: clip_sum_onnx,
    }
    program = torch_onnx_fx.export(
        Model(), (torch.randn(3, 4), torch.randn(3, 4)), custom_translation_table=table, optimize=False, verbose=False
    )
    assert program.model.opset_imports[""] == torch_onnx_fx.DEFAULT_OPSET
    # The scripted function is inlined, and its domain import is dropped as unused.
    assert "com.example" not in program.model.opset_imports
    x, y = torch.randn(3, 4), torch.randn(3, 4)
    with torch.no_grad():
        torch.testing.assert_close(program(x, y)[0], Model()(x, y), rtol=1e-4, atol=1e-5)


@torch.library.custom_op("tofx_test::double", mutates_args=())
def double(x: torch.Tensor) -> torch.Tensor:
    return x * 2


@double.register_fake
def _(x):
    return torch.empty_like(x)


@onnxscript.script()
def double_float(x: FLOAT) -> FLOAT:
    return op.Mul(x, op.Constant(value_float=2.0))


@onnxscript.script()
def double_int(x: INT64) -> INT64:
    return op.Add(x, x)


@pytest.mark.parametrize("dtype, expected_op", [(torch.float32, "Mul"), (torch.int64, "Add")])
def test_dtype_overloads_in_a_list(dtype, expected_op):
    table = {torch.ops.tofx_test.double.default: [double_float, double_int]}
    x = (torch.randn(3) * 10).to(dtype)
    program = assert_matches_eager(lambda x: torch.ops.tofx_test.double(x), (x,), custom_translation_table=table)
    assert expected_op in {n.op_type for n in program.model.graph}


def test_effectful_ops_drop_their_token():
    """linalg.inv decomposes into linalg_inv_ex plus an error check wrapped in with_effects, whose
    token is a graph input and output of the ExportedProgram; neither may reach the ONNX graph."""

    class Inverse(nn.Module):
        def forward(self, x):
            return torch.linalg.inv(x) * 2

    def inv_ex_1x1(x, *, check_errors=False):
        # Enough for 1x1 matrices: this test is about the token, not about inversion.
        return op.Reciprocal(x), op.Cast(op.ReduceMax(op.Constant(value_ints=[0]), keepdims=0), to=6)

    x = torch.tensor([[[4.0]], [[-0.5]]])
    onnx_program = torch_onnx_fx.export(
        Inverse(), (x,), custom_translation_table={torch.ops.aten.linalg_inv_ex.default: inv_ex_1x1}, verbose=False
    )
    assert [v.name for v in onnx_program.model.graph.inputs] == ["x"]
    assert len(onnx_program.model.graph.outputs) == 1
    assert_matches_eager(Inverse(), (x,), program=onnx_program)


# The way vendors write quantization translations for torch.onnx: torch.library ops with fakes,
# plain (trace-only) functions typed with onnxscript's types, Python-float scales, constants made
# with onnx.helper.make_tensor, and operators of the vendor's own domain declared through a schema.
@torch.library.custom_op("tofx_vendor::quantize_int8", mutates_args=[])
def vendor_quantize(x: torch.Tensor, scale: float) -> torch.Tensor:
    return torch.clamp(torch.round(x / scale), -128, 127).to(torch.int8)


@vendor_quantize.register_fake
def _(x, scale):
    return torch.empty(x.shape, dtype=torch.int8)


@torch.library.custom_op("tofx_vendor::dequantize_int8", mutates_args=[])
def vendor_dequantize(q: torch.Tensor, scale: float) -> torch.Tensor:
    return q.to(torch.float32) * scale


@vendor_dequantize.register_fake
def _(q, scale):
    return torch.empty(q.shape, dtype=torch.float32)


def vendor_quantize_onnx(x: onnxscript.onnx_types.TensorType, scale: float) -> onnxscript.onnx_types.INT8:
    zero = onnx.helper.make_tensor("zero", onnx.TensorProto.INT8, [], [0])
    return op.QuantizeLinear(x, op.Constant(value_float=scale), op.Constant(value=zero))


def vendor_dequantize_onnx(q: onnxscript.onnx_types.TensorType, scale: float) -> onnxscript.onnx_types.TensorType:
    return op.DequantizeLinear(q, op.Constant(value_float=scale))


_VENDOR_DOMAIN = onnxscript.values.Opset("tofx.vendor", version=100)
_VENDOR_SCHEMA = onnx.defs.OpSchema(
    name="VendorQuantize",
    domain="tofx.vendor",
    since_version=1,
    doc="A back end's own quantize.",
    inputs=[
        onnx.defs.OpSchema.FormalParameter("x", "tensor(float)", "values"),
        onnx.defs.OpSchema.FormalParameter("inverse_scale", "tensor(float)", "1 / scale"),
    ],
    outputs=[onnx.defs.OpSchema.FormalParameter("q", "tensor(int8)", "quantized values")],
)
VendorQuantize = onnxscript.values.Op(opset=_VENDOR_DOMAIN, name="VendorQuantize", op_schema=_VENDOR_SCHEMA)


def vendor_domain_quantize_onnx(x: onnxscript.onnx_types.TensorType, scale: float) -> onnxscript.onnx_types.INT8:
    return VendorQuantize(x, op.Constant(value_float=1 / scale))


class _VendorQuantized(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.ops.tofx_vendor.dequantize_int8(torch.ops.tofx_vendor.quantize_int8(x, 0.05), 0.05)


def test_vendor_style_quantize_translations_run_unchanged():
    # A TensorProto `value` used to be read as a string tensor ("Bitwidth not available").
    table = {
        torch.ops.tofx_vendor.quantize_int8.default: vendor_quantize_onnx,
        torch.ops.tofx_vendor.dequantize_int8.default: vendor_dequantize_onnx,
    }
    x = torch.randn(4, 16) * 3
    program = assert_matches_eager(_VendorQuantized(), (x,), custom_translation_table=table, rtol=0, atol=0)
    assert [n.op_type for n in program.model.graph] == ["QuantizeLinear", "DequantizeLinear"]


def test_vendor_domain_operator_is_kept_with_its_opset(tmp_path):
    table = {
        torch.ops.tofx_vendor.quantize_int8.default: vendor_domain_quantize_onnx,
        torch.ops.tofx_vendor.dequantize_int8.default: vendor_dequantize_onnx,
    }
    program = torch_onnx_fx.export(_VendorQuantized(), (torch.randn(4, 16),), custom_translation_table=table, verbose=False)
    assert [(n.domain, n.op_type) for n in program.model.graph] == [("tofx.vendor", "VendorQuantize"), ("", "DequantizeLinear")]
    assert program.model.opset_imports["tofx.vendor"] == 100
    program.save(tmp_path / "model.onnx")
    onnx.checker.check_model(str(tmp_path / "model.onnx"))
