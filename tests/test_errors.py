"""Every bad input gets a clear error; legacy arguments warn or refuse, never pass silently."""

from __future__ import annotations

import warnings

import pytest
import torch
from torch import nn

import torch_onnx_fx
from helpers import assert_matches_eager, no_translation


def test_dynamo_false_is_refused():
    with pytest.raises(torch_onnx_fx.UnsupportedArgumentError, match="dynamo=False"):
        torch_onnx_fx.export(nn.ReLU(), (torch.randn(2),), dynamo=False)


def test_old_opset_is_refused():
    with pytest.raises(torch_onnx_fx.UnsupportedArgumentError, match="opset_version=12"):
        torch_onnx_fx.export(nn.ReLU(), (torch.randn(2),), opset_version=12)


def test_capture_failure_lists_every_strategy_with_user_line():
    class Bad(nn.Module):
        def forward(self, x):
            if x.sum() > 0:  # data-dependent control flow: torch.export cannot capture it
                return x + 1
            return x - 1

    with pytest.raises(torch_onnx_fx.CaptureError) as info:
        torch_onnx_fx.export(Bad(), (torch.randn(3),), verbose=False)
    message = str(info.value)
    assert "torch.export(strict=False)" in message and "torch.export(strict=True)" in message
    assert "test_errors.py" in message
    assert len(info.value.failures) == 2


def test_missing_translations_are_listed_together_with_an_example():
    class Model(nn.Module):
        def forward(self, x):
            return no_translation(x, 2.0) + no_translation(x + 1, 3.0)

    with pytest.raises(torch_onnx_fx.MissingTranslationError) as info:
        torch_onnx_fx.export(Model(), (torch.rand(3) + 1,), verbose=False)
    assert info.value.targets
    assert "custom_translation_table" in str(info.value)


def test_translation_failure_names_node_target_shapes_and_source_line():
    def broken(x):
        raise ValueError("deliberately broken translation")

    class Model(nn.Module):
        def forward(self, x):
            return torch.relu(x)

    with pytest.raises(torch_onnx_fx.TranslationError) as info:
        torch_onnx_fx.export(
            Model(), (torch.randn(2, 3),), custom_translation_table={torch.ops.aten.relu.default: broken}, verbose=False
        )
    message = str(info.value)
    assert "relu" in message and "float32[2, 3]" in message
    assert "test_errors.py" in message and "deliberately broken" in message


def test_custom_translation_table_is_used_first():
    from onnxscript import opset18 as op

    def relu_as_identity(x):
        return op.Identity(x)

    program = torch_onnx_fx.export(
        nn.ReLU(), (torch.randn(4),), custom_translation_table={torch.ops.aten.relu.default: relu_as_identity}, verbose=False
    )
    x = torch.randn(4)
    torch.testing.assert_close(program(x)[0], x)


def test_overload_packet_key_is_refused_with_the_overload_to_use():
    with pytest.raises(torch_onnx_fx.UnsupportedArgumentError, match="aten.relu.default"):
        torch_onnx_fx.export(nn.ReLU(), (torch.randn(2),), custom_translation_table={torch.ops.aten.relu: lambda x: x})


@pytest.mark.parametrize(
    "name, value",
    [("do_constant_folding", False), ("autograd_inlining", False), ("custom_opsets", {"my.domain": 2}), ("export_modules_as_functions", False)],
)
def test_deprecated_arguments_warn(name, value):
    with pytest.warns(DeprecationWarning, match=name):
        program = torch_onnx_fx.export(nn.ReLU(), (torch.randn(2),), verbose=False, **{name: value})
    if name == "custom_opsets":
        assert program.model.opset_imports["my.domain"] == 2


def test_unhonourable_legacy_arguments_raise():
    with pytest.raises(torch_onnx_fx.UnsupportedArgumentError, match="export_modules_as_functions"):
        torch_onnx_fx.export(nn.ReLU(), (torch.randn(2),), export_modules_as_functions=True)
    with pytest.raises(torch_onnx_fx.UnsupportedArgumentError, match="training"):
        torch_onnx_fx.export(nn.ReLU(), (torch.randn(2),), training=torch.onnx.TrainingMode.TRAINING)
    with pytest.raises(torch_onnx_fx.UnsupportedArgumentError, match="operator_export_type"):
        torch_onnx_fx.export(
            nn.ReLU(), (torch.randn(2),), operator_export_type=torch.onnx.OperatorExportTypes.ONNX_ATEN_FALLBACK
        )


def test_export_params_without_f_warns():
    with pytest.warns(UserWarning, match="only apply when f is given"):
        torch_onnx_fx.export(nn.ReLU(), (torch.randn(2),), export_params=False, verbose=False)


def test_too_many_names_and_both_dynamic_forms_are_refused():
    with pytest.raises(torch_onnx_fx.UnsupportedArgumentError, match="output_names"):
        torch_onnx_fx.export(nn.ReLU(), (torch.randn(2),), output_names=["a", "b"], verbose=False)
    with pytest.raises(torch_onnx_fx.UnsupportedArgumentError, match="dynamic_shapes or the legacy dynamic_axes"):
        torch_onnx_fx.export(nn.ReLU(), (torch.randn(2),), dynamic_shapes=({0: "n"},), dynamic_axes={"x": [0]})


def test_bad_dynamic_shapes_entry_is_explained():
    with pytest.raises(torch_onnx_fx.UnsupportedArgumentError, match="out of range"):
        torch_onnx_fx.export(nn.ReLU(), (torch.randn(2),), dynamic_shapes=({3: "n"},), verbose=False)


def test_torchscript_models_get_a_clear_error():
    scripted = torch.jit.script(nn.ReLU())
    with pytest.raises(torch_onnx_fx.OnnxExporterError, match="TorchScript"):
        torch_onnx_fx.export(scripted, (torch.randn(2),), verbose=False)


def test_type_promotion_matches_eager():
    class Model(nn.Module):
        def forward(self, i, f):
            return i + 0.5, i / 2, i * f, (i > 1.5), torch.where(i > 1, i, f)

    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        assert_matches_eager(Model().eval(), (torch.tensor([1, 2, 3]), torch.tensor([0.5, 1.5, 2.5])))
