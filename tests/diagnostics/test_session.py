"""report, verify, profile, dump_exported_program and artifacts_dir."""

from __future__ import annotations

import glob
import os

import pytest
import torch
from torch import nn

import torch_onnx_fx
from helpers import no_translation


def _model() -> nn.Module:
    return nn.Sequential(nn.Linear(4, 4), nn.Tanh()).eval()


def test_report_on_success_has_every_section(tmp_path):
    torch_onnx_fx.export(_model(), (torch.randn(2, 4),), report=True, verify=True, profile=True, artifacts_dir=tmp_path, verbose=False)
    (path,) = glob.glob(str(tmp_path / "onnx_export_*_success.md"))
    text = open(path).read()
    for section in ("## Phases", "## Capture strategies", "## Model", "## Operators", "## Verification", "## Profile"):
        assert section in text, section
    assert "| `aten::linear` | 1 | torch_onnx_fx |" in text  # each operator with its translation's source
    assert "Inputs:" in text and "FLOAT[2, 4]" in text
    assert "| True |" in text  # verification passed


def test_report_on_failure_names_untranslatable_operator(tmp_path):
    class Model(nn.Module):
        def forward(self, x):
            return no_translation(x, 2.0)

    with pytest.raises(torch_onnx_fx.MissingTranslationError):
        torch_onnx_fx.export(Model(), (torch.rand(3) + 1,), report=True, artifacts_dir=tmp_path, verbose=False)
    (path,) = glob.glob(str(tmp_path / "onnx_export_*_failure.md"))
    text = open(path).read()
    assert "## Error" in text and "no translation" in text
    assert "Inputs:" in text and "`x`" in text


def test_reports_do_not_overwrite_each_other(tmp_path):
    for _ in range(2):
        torch_onnx_fx.export(_model(), (torch.randn(2, 4),), report=True, artifacts_dir=tmp_path, verbose=False)
    assert len(glob.glob(str(tmp_path / "onnx_export_*.md"))) == 2


def test_dump_exported_program(tmp_path):
    torch_onnx_fx.export(_model(), (torch.randn(2, 4),), dump_exported_program=True, artifacts_dir=tmp_path, verbose=False)
    (pt2,) = glob.glob(str(tmp_path / "*.pt2"))
    loaded = torch.export.load(pt2)
    x = torch.randn(2, 4)
    torch.testing.assert_close(loaded.module()(x), _model_from(loaded)(x))
    assert glob.glob(str(tmp_path / "*_exported_program.txt"))


def _model_from(program: torch.export.ExportedProgram) -> nn.Module:
    model = _model()
    model.load_state_dict(program.state_dict)
    return model


def test_profile_without_report_writes_a_profile(tmp_path):
    torch_onnx_fx.export(_model(), (torch.randn(2, 4),), profile=True, artifacts_dir=tmp_path, verbose=False)
    (path,) = glob.glob(str(tmp_path / "*_profile.txt"))
    text = open(path).read()
    assert "export" in text  # the profiled call, in cProfile's or pyinstrument's format


def test_verify_detects_a_wrong_translation(tmp_path, capsys):
    from onnxscript import opset18 as op

    def wrong_tanh(x):
        return op.Sigmoid(x)

    torch_onnx_fx.export(
        _model(), (torch.randn(2, 4),), verify=True, report=True, artifacts_dir=tmp_path,
        custom_translation_table={torch.ops.aten.tanh.default: wrong_tanh},
    )
    assert "0/1 outputs match" in capsys.readouterr().err
    (path,) = glob.glob(str(tmp_path / "*.md"))
    assert "| False |" in open(path).read()
    assert os.path.getsize(path) > 0
