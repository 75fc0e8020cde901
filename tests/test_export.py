"""End-to-end exports, including the examples of PyTorch's ONNX exporter documentation."""

from __future__ import annotations

import time

import onnx
import onnxruntime
import pytest
import torch
from torch import nn

import torch_onnx_fx
from helpers import assert_matches_eager


class MLPModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc0 = nn.Linear(8, 8, bias=True)
        self.fc1 = nn.Linear(8, 4, bias=True)
        self.fc2 = nn.Linear(4, 2, bias=True)
        self.fc3 = nn.Linear(2, 2, bias=True)
        self.fc_combined = nn.Linear(8 + 8 + 8, 8, bias=True)

    def forward(self, tensor_x: torch.Tensor, input_dict: dict, input_list: list):
        combined = torch.cat([tensor_x, input_dict["tensor_x"], input_list[0]], dim=1)
        combined = torch.sigmoid(self.fc_combined(combined))
        combined = torch.sigmoid(self.fc0(combined))
        combined = torch.sigmoid(self.fc1(combined))
        combined = torch.sigmoid(self.fc2(combined))
        return self.fc3(combined)


def test_documentation_mlp_with_dict_and_list_inputs():
    model = MLPModel().eval()
    args = (torch.rand(97, 8), {"tensor_x": torch.rand(97, 8)}, [torch.rand(97, 8)])
    program = torch_onnx_fx.export(
        model,
        args,
        dynamic_shapes=({0: "batch_size"}, {"tensor_x": {0: "batch_size"}}, [{0: "batch_size"}]),
        input_names=["tensor_input", "tensor_x", "list_input_index_0"],
        output_names=["output"],
        verbose=False,
    )
    assert program.model.graph.inputs[0].shape == ("batch_size", 8)
    assert [v.name for v in program.model.graph.inputs] == ["tensor_input", "tensor_x", "list_input_index_0"]
    assert [v.name for v in program.model.graph.outputs] == ["output"]
    other = (torch.rand(5, 8), {"tensor_x": torch.rand(5, 8)}, [torch.rand(5, 8)])
    assert_matches_eager(model, args, program=program, more_inputs=[(other, {})])


class SumModule(nn.Module):
    def forward(self, x):
        return torch.sum(x, dim=1)


def test_documentation_sum_module_dynamic_axes(tmp_path):
    path = tmp_path / "onnx.pb"
    torch_onnx_fx.export(
        SumModule(),
        (torch.ones(2, 2),),
        str(path),
        input_names=["x"],
        output_names=["sum"],
        dynamic_axes={"x": {0: "my_custom_axis_name"}, "sum": [0]},
        verbose=False,
    )
    model = onnx.load(str(path))
    x_dims = model.graph.input[0].type.tensor_type.shape.dim
    assert x_dims[0].dim_param == "my_custom_axis_name"
    assert x_dims[1].dim_value == 2
    sum_dims = model.graph.output[0].type.tensor_type.shape.dim
    assert model.graph.output[0].name == "sum"
    assert sum_dims[0].dim_param  # dynamic, automatically named
    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    x = torch.rand(5, 2)
    (result,) = session.run(None, {"x": x.numpy()})
    torch.testing.assert_close(torch.from_numpy(result), x.sum(1))


class AlexNet(nn.Module):
    """torchvision's AlexNet architecture, written out so the test needs no torchvision."""

    def __init__(self, num_classes: int = 1000):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 64, kernel_size=11, stride=4, padding=2), nn.ReLU(inplace=True),
            nn.MaxPool2d(kernel_size=3, stride=2),
            nn.Conv2d(64, 192, kernel_size=5, padding=2), nn.ReLU(inplace=True),
            nn.MaxPool2d(kernel_size=3, stride=2),
            nn.Conv2d(192, 384, kernel_size=3, padding=1), nn.ReLU(inplace=True),
            nn.Conv2d(384, 256, kernel_size=3, padding=1), nn.ReLU(inplace=True),
            nn.Conv2d(256, 256, kernel_size=3, padding=1), nn.ReLU(inplace=True),
            nn.MaxPool2d(kernel_size=3, stride=2),
        )
        self.avgpool = nn.AdaptiveAvgPool2d((6, 6))
        self.classifier = nn.Sequential(
            nn.Dropout(), nn.Linear(256 * 6 * 6, 4096), nn.ReLU(inplace=True),
            nn.Dropout(), nn.Linear(4096, 4096), nn.ReLU(inplace=True),
            nn.Linear(4096, num_classes),
        )

    def forward(self, x):
        x = self.avgpool(self.features(x))
        return self.classifier(torch.flatten(x, 1))


def test_documentation_alexnet_legacy_arguments(tmp_path, capsys):
    model = AlexNet().eval()
    dummy_input = torch.randn(2, 3, 224, 224)
    input_names = ["actual_input_1"] + ["learned_%d" % i for i in range(16)]
    path = str(tmp_path / "alexnet.onnx")
    torch_onnx_fx.export(model, dummy_input, path, verbose=True, input_names=input_names, output_names=["output1"])
    assert "actual_input_1" in capsys.readouterr().out  # verbose prints the model
    onnx_model = onnx.load(path)
    onnx.checker.check_model(onnx_model)
    assert [i.name for i in onnx_model.graph.input] == ["actual_input_1"]
    assert {i.name for i in onnx_model.graph.initializer} >= {"learned_%d" % i for i in range(16)}
    session = onnxruntime.InferenceSession(path, providers=["CPUExecutionProvider"])
    (output,) = session.run(["output1"], {"actual_input_1": dummy_input.numpy()})
    with torch.no_grad():
        expected = model(dummy_input)
    torch.testing.assert_close(torch.from_numpy(output), expected, rtol=1e-4, atol=1e-5)


def test_export_records_capture_strategy_and_is_in_onnx_export():
    seen = []

    class Probe(nn.Module):
        def forward(self, x):
            seen.append(torch_onnx_fx.is_in_onnx_export())
            return x + 1

    program = torch_onnx_fx.export(Probe(), (torch.ones(2),), verbose=False)
    assert program.capture_strategy == "torch.export(strict=False)"
    assert seen and all(seen)
    assert not torch_onnx_fx.is_in_onnx_export()


def test_exported_program_is_used_as_is():
    model = MLPModel().eval()
    args = (torch.rand(3, 8), {"tensor_x": torch.rand(3, 8)}, [torch.rand(3, 8)])
    exported = torch.export.export(model, args)
    program = torch_onnx_fx.export(exported, args, verbose=False)
    assert program.capture_strategy == "ExportedProgram"
    assert program.exported_program is not None
    assert_matches_eager(model, args, program=program)


def test_plain_function_is_exported():
    def fn(x, y):
        return torch.where(x > y, x * 2, y - 1)

    assert_matches_eager(fn, (torch.randn(3, 4), torch.randn(3, 4)))


@pytest.mark.parametrize("opset", [18, 19, 20, 21, 22, 23])
def test_opset_versions(opset):
    model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU(), nn.AdaptiveAvgPool2d(1)).eval()
    program = assert_matches_eager(model, (torch.randn(2, 3, 8, 8),), opset_version=opset)
    assert program.model.opset_imports[""] == opset


def test_default_opset_is_stated():
    program = torch_onnx_fx.export(nn.ReLU(), (torch.randn(2),), verbose=False)
    assert program.model.opset_imports[""] == torch_onnx_fx.DEFAULT_OPSET


def test_optimize_false_keeps_a_valid_model():
    model = nn.Sequential(nn.Linear(4, 4), nn.GELU(), nn.LayerNorm(4)).eval()
    optimized = assert_matches_eager(model, (torch.randn(2, 4),))
    plain = assert_matches_eager(model, (torch.randn(2, 4),), optimize=False)
    assert len(optimized.model.graph) <= len(plain.model.graph)
    onnx.checker.check_model(plain.model_proto)


def test_progress_lines_and_silence(capsys):
    torch_onnx_fx.export(nn.ReLU(), (torch.randn(2),))
    err = capsys.readouterr().err
    for phase in ("capture", "decompose", "translate", "optimize"):
        assert f"[torch_onnx_fx] {phase}: ok" in err
    torch_onnx_fx.export(nn.ReLU(), (torch.randn(2),), verbose=False)
    assert "[torch_onnx_fx]" not in capsys.readouterr().err


def test_a_long_phase_says_how_long_it_has_run(capsys, monkeypatch):
    from torch_onnx_fx import progress

    monkeypatch.setattr(progress, "FIRST_NOTICE", 0.0)
    monkeypatch.setattr(progress, "NOTICE_INTERVAL", 0.01)

    class Slow(nn.Module):
        def forward(self, x):
            time.sleep(0.2)  # runs while capture traces it
            return x + 1

    torch_onnx_fx.export(Slow(), (torch.randn(2),))
    assert "[torch_onnx_fx] capture: running for" in capsys.readouterr().err
    torch_onnx_fx.export(Slow(), (torch.randn(2),), verbose=False)
    assert "running for" not in capsys.readouterr().err


def test_translatable_programs_are_not_retraced(capsys):
    """The common transformer operators all translate, so nothing is decomposed."""
    from tools.corpus.models import CORPUS

    case = next(c for c in CORPUS if c.name == "llama")
    model, args, kwargs, dynamic_shapes = case.build()
    program = torch_onnx_fx.export(model, args, kwargs=kwargs, dynamic_shapes=dynamic_shapes)
    assert program.decomposed == []
    assert "decompose: ok" in capsys.readouterr().err.split("(not needed)")[0]


def test_export_leaves_the_garbage_collector_as_it_found_it():
    import gc

    model = torch.nn.Linear(3, 2).eval()
    seen: list[bool] = []
    hook = torch.nn.Linear(3, 2).eval()
    # The collector is off while the model is captured (the forward runs inside the export).
    hook.forward = lambda x: (seen.append(gc.isenabled()), model(x))[1]
    assert gc.isenabled()
    torch_onnx_fx.export(hook, (torch.randn(2, 3),), verbose=False)
    assert seen and not any(seen)
    assert gc.isenabled()
    # A failed export restores it too.
    with pytest.raises(torch_onnx_fx.CaptureError):
        torch_onnx_fx.export(model, (torch.randn(2, 4),), verbose=False)
    assert gc.isenabled()
    # A process that turned the collector off itself keeps it off.
    gc.disable()
    try:
        torch_onnx_fx.export(model, (torch.randn(2, 3),), verbose=False)
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_collector_pauses_nest_and_the_last_one_out_restores():
    import gc
    import threading

    from torch_onnx_fx import _state

    inside = threading.Event()
    release = threading.Event()

    def other_export() -> None:
        with _state.collector_paused():
            inside.set()
            release.wait(10)

    thread = threading.Thread(target=other_export)
    with _state.collector_paused():
        thread.start()
        assert inside.wait(10)
    # This block ended first; the other is still running: the collector stays off.
    assert not gc.isenabled()
    release.set()
    thread.join(10)
    assert gc.isenabled()
