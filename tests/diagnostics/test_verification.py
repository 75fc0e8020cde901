"""verify_onnx_program, first_divergence and assert_onnx_program."""

from __future__ import annotations

import pytest
import torch
from onnxscript import opset18 as op
from torch import nn

import torch_onnx_fx
from torch_onnx_fx.testing import assert_onnx_program
from torch_onnx_fx.diagnostics.verification import first_divergence, verify_onnx_program


class Deep(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 8), nn.Tanh(), nn.Linear(8, 2))

    def forward(self, x):
        return self.layers(x).softmax(-1)


def test_outputs_match_with_drop_in_fields():
    program = torch_onnx_fx.export(Deep().eval(), (torch.randn(3, 4),), verbose=False)
    (info,) = verify_onnx_program(program)
    assert info.name == program.model.graph.outputs[0].name
    assert info.max_abs_diff < 1e-5 and info.max_rel_diff < 1e-3 and info.passed
    assert info.expected_dtype == info.actual_dtype == torch.float32
    counts, edges = info.abs_diff_hist
    assert int(counts.sum()) == 6 and len(edges) == len(counts) + 1
    assert_onnx_program(program)


def test_injected_bug_is_found_at_the_right_node():
    def wrong_tanh(x):
        return op.Sigmoid(x)  # deliberately wrong

    program = torch_onnx_fx.export(
        Deep().eval(), (torch.randn(3, 4),), custom_translation_table={torch.ops.aten.tanh.default: wrong_tanh},
        verbose=False,
    )
    infos = verify_onnx_program(program, compare_intermediates=True)
    first = first_divergence(infos)
    assert first is not None
    assert first.name == "tanh" and first.onnx_op == "Sigmoid" and first.fx_target == "aten::tanh"
    assert "test_verification.py" in first.source  # the model line, not torch's nn.Tanh
    earlier = infos[: infos.index(first)]
    assert earlier and all(info.passed for info in earlier)
    with pytest.raises(AssertionError, match="tanh"):
        assert_onnx_program(program, compare_intermediates=True)


def test_explicit_inputs_and_tolerances():
    model = Deep().eval()
    program = torch_onnx_fx.export(model, (torch.randn(3, 4),), dynamic_shapes=({0: "n"},), verbose=False)
    infos = verify_onnx_program(program, (torch.randn(7, 4),), compare_intermediates=True)
    assert len(infos) > 3 and all(info.passed for info in infos)
    assert_onnx_program(program, args=(torch.randn(5, 4),), rtol=0.0, atol=1e-4)


def test_a_missing_output_fails_verification_with_a_count_message():
    class Two(torch.nn.Module):
        def forward(self, x):
            return x + 1, x * 2

    program = torch_onnx_fx.export(Two(), (torch.randn(3),), verbose=False)
    assert_onnx_program(program)
    program.model.graph.outputs.pop()
    program.release()
    with pytest.raises(torch_onnx_fx.VerificationError, match="returned 1 output\\(s\\) but PyTorch returned 2"):
        assert_onnx_program(program)


def test_strategy_is_checked_by_torch_onnx_names_and_ours():
    program = torch_onnx_fx.export(torch.nn.ReLU(), (torch.randn(3),), verbose=False)
    assert_onnx_program(program)  # default: TorchExportNonStrictStrategy
    assert_onnx_program(program, strategy="torch.export(strict=False)")
    assert_onnx_program(program, strategy=None)
    with pytest.raises(AssertionError, match="TorchExportStrictStrategy"):
        assert_onnx_program(program, strategy="TorchExportStrictStrategy")
    exported = torch.export.export(torch.nn.ReLU(), (torch.randn(3),))
    from_program = torch_onnx_fx.export(exported, verbose=False)
    assert from_program._capture_strategy is None
    # Captured by the caller: no strategy to check, whichever is asked for.
    assert_onnx_program(from_program)
    assert_onnx_program(from_program, strategy="TorchExportStrictStrategy")


def test_reference_backend_and_bad_backend():
    program = torch_onnx_fx.export(torch.nn.GELU(), (torch.randn(4),), verbose=False)
    assert_onnx_program(program, backend="reference")
    with pytest.raises(torch_onnx_fx.UnsupportedArgumentError, match="backend='tvm'"):
        assert_onnx_program(program, backend="tvm")
