"""The public surface: what users import and call keeps working as the package's layout changes."""

from __future__ import annotations

import importlib
import inspect

import pytest
import torch

import torch_onnx_fx
from torch_onnx_fx import options


@pytest.mark.parametrize(
    "module, names",
    [
        ("torch_onnx_fx", ["export", "ONNXProgram", "ExportableModule", "complex_translation", "is_in_onnx_export", "DEFAULT_OPSET"]),
        ("torch_onnx_fx.errors", ["OnnxExporterError", "CaptureError", "TranslationError", "InputMismatchError", "SaveError"]),
        ("torch_onnx_fx.testing", ["assert_onnx_program"]),
        ("torch_onnx_fx.verification", ["verify_onnx_program", "VerificationInfo", "first_divergence", "verify"]),
        ("torch_onnx_fx.program", ["ONNXProgram"]),
        ("torch_onnx_fx.export", ["export", "DEFAULT_OPSET"]),
        ("torch_onnx_fx.registry", ["complex_translation", "wants_context", "register"]),
        ("torch_onnx_fx.cli", ["main"]),
    ],
)
def test_import_paths_users_had_keep_working(module, names):
    imported = importlib.import_module(module)
    missing = [name for name in names if not hasattr(imported, name)]
    assert missing == []


def test_the_program_class_is_one_class_whichever_path_names_it():
    import torch_onnx_fx.program

    assert torch_onnx_fx.program.ONNXProgram is torch_onnx_fx.ONNXProgram
    assert torch_onnx_fx.verification.verify_onnx_program is torch_onnx_fx.diagnostics.verification.verify_onnx_program


def test_export_takes_torch_onnx_export_arguments_in_the_same_places():
    ours = inspect.signature(torch_onnx_fx.export).parameters
    theirs = inspect.signature(torch.onnx.export).parameters
    assert [n for n in ours if n in theirs] == list(theirs), "same names, same order"
    assert [n for n in ours if n not in theirs] == ["fusion", "state_outputs", "fx_passes"]
    for name, parameter in theirs.items():
        assert ours[name].kind == parameter.kind, name


def test_the_signature_and_the_docstring_come_from_the_one_declaration():
    declared = [field.name for field in options.arguments()]
    assert list(inspect.signature(torch_onnx_fx.export).parameters) == ["model", *declared]
    doc = torch_onnx_fx.export.__doc__
    assert all(f"\n        {name}" in doc for name in declared)


def test_an_unknown_keyword_is_a_type_error_naming_the_closest_argument():
    with pytest.raises(TypeError, match=r"unexpected keyword argument 'dynamic_shape'; did you mean 'dynamic_shapes'\?"):
        torch_onnx_fx.export(torch.nn.ReLU(), (torch.randn(2),), dynamic_shape=None)
    with pytest.raises(torch_onnx_fx.ArgumentTypeError):
        torch_onnx_fx.export(torch.nn.ReLU(), (torch.randn(2),), zzz=1)
