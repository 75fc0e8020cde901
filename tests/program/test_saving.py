"""Saves are atomic: on any failure the files at the destination are as they were, and nothing is
left behind (issue 11). Faults are injected into the writes of the model and its external data."""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

import onnx
import onnx_ir.external_data
import pytest
import torch

import torch_onnx_fx
from helpers import assert_matches_eager


class _Weights(torch.nn.Module):
    def __init__(self, seed: int):
        super().__init__()
        torch.manual_seed(seed)
        self.first, self.second = torch.nn.Linear(16, 32), torch.nn.Linear(32, 4)

    def forward(self, x):
        return self.second(self.first(x).relu())


_X = torch.randn(2, 16)


def _program(seed: int) -> torch_onnx_fx.ONNXProgram:
    return torch_onnx_fx.export(_Weights(seed).eval(), (_X,), verbose=False)


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture
def saved(tmp_path) -> tuple[Path, dict[str, bytes]]:
    """A good model with external data already at the destination, and the folder's bytes."""
    path = tmp_path / "model.onnx"
    _program(0).save(path, external_data=True)
    return path, _snapshot(tmp_path)


def _runs_as(path: Path, seed: int) -> None:
    import onnxruntime as ort

    onnx.checker.check_model(str(path), full_check=True)
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    (result,) = session.run(None, {session.get_inputs()[0].name: _X.numpy()})
    with torch.no_grad():
        torch.testing.assert_close(torch.from_numpy(result), _Weights(seed).eval()(_X), rtol=1e-4, atol=1e-5)


def test_a_save_replaces_model_and_data_together_and_leaves_no_temporary_files(saved):
    path, _ = saved
    _program(1).save(path, external_data=True)
    assert sorted(p.name for p in path.parent.iterdir()) == ["model.onnx", "model.onnx.data"]
    _runs_as(path, 1)


def test_data_file_write_failing_halfway_keeps_the_previous_files(saved, monkeypatch):
    """The second tensor's bytes are half written when the disk fills up."""
    path, before = saved
    real_write = onnx_ir.external_data._write_tensor_at
    written = []

    def half_write(tensor, file, offset):
        written.append(tensor)
        if len(written) < 2:
            return real_write(tensor, file, offset)
        file.seek(offset)
        file.write(tensor.tobytes()[: tensor.nbytes // 2])
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(onnx_ir.external_data, "_write_tensor_at", half_write)
    with pytest.raises(torch_onnx_fx.SaveError, match="No space left on device.*as they were") as raised:
        _program(1).save(path, external_data=True)
    assert len(written) == 2
    assert isinstance(raised.value, OSError) and isinstance(raised.value.__cause__, OSError)
    assert _snapshot(path.parent) == before
    monkeypatch.undo()
    _runs_as(path, 0)


def test_model_file_write_failing_halfway_keeps_the_previous_files(saved, monkeypatch):
    path, before = saved

    def half_save(proto, target, **kwargs):
        Path(target).write_bytes(proto.SerializeToString()[:100])
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(onnx, "save", half_save)
    with pytest.raises(torch_onnx_fx.SaveError, match="Input/output error"):
        _program(1).save(path, external_data=True)
    assert _snapshot(path.parent) == before


def test_moving_the_model_into_place_failing_puts_the_previous_data_back(saved, monkeypatch):
    path, before = saved
    real_replace = os.replace

    def replace(source, target):
        if Path(target) == path:
            raise OSError(errno.EXDEV, "Invalid cross-device link")
        return real_replace(source, target)

    monkeypatch.setattr(os, "replace", replace)
    with pytest.raises(torch_onnx_fx.SaveError):
        _program(1).save(path, external_data=True)
    assert _snapshot(path.parent) == before


def test_an_exception_while_streaming_weights_keeps_the_previous_files(saved, monkeypatch):
    path, before = saved

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(torch_onnx_fx.program.onnx_program, "SaveProgress", lambda enabled: interrupted)
    with pytest.raises(KeyboardInterrupt):
        _program(1).save(path, external_data=True)
    assert _snapshot(path.parent) == before


def test_read_only_model_or_data_file_is_not_replaced(saved):
    path, before = saved
    for target in (path, path.with_name("model.onnx.data")):
        mode = target.stat().st_mode
        target.chmod(mode & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))
        try:
            with pytest.raises(torch_onnx_fx.SaveError, match="read-only"):
                _program(1).save(path, external_data=True)
        finally:
            target.chmod(mode)
        assert _snapshot(path.parent) == before


def test_a_folder_that_cannot_be_written_leaves_nothing(saved, monkeypatch):
    path, before = saved

    def denied(*args, **kwargs):
        raise PermissionError(errno.EACCES, "Permission denied")

    monkeypatch.setattr(torch_onnx_fx.program.saving.tempfile, "mkdtemp", denied)
    with pytest.raises(torch_onnx_fx.SaveError, match="Permission denied"):
        _program(1).save(path, external_data=True)
    assert _snapshot(path.parent) == before


def test_a_folder_as_destination_is_refused(tmp_path):
    with pytest.raises(torch_onnx_fx.UnsupportedArgumentError, match="this is a folder"):
        _program(0).save(tmp_path)
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize("name", ["../escaped.data", "/tmp/escaped.data", "", "model.onnx", "sub/../../escaped.data"])
def test_external_data_names_outside_the_folder_are_refused(tmp_path, name):
    folder = tmp_path / "out"
    folder.mkdir()
    with pytest.raises(torch_onnx_fx.UnsupportedArgumentError, match="inside the model's folder"):
        _program(0).save(folder / "model.onnx", external_data=True, external_data_name=name)
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["out"]


def test_external_data_name_inside_the_folder(tmp_path):
    path = tmp_path / "model.onnx"
    _program(0).save(path, external_data=True, external_data_name="weights/all.bin")
    assert (tmp_path / "weights" / "all.bin").stat().st_size > 0
    _runs_as(path, 0)


def test_missing_folders_are_created_and_removed_again_on_failure(tmp_path, monkeypatch):
    path = tmp_path / "a" / "b" / "model.onnx"
    _program(0).save(path, external_data=True)
    _runs_as(path, 0)

    other = tmp_path / "c" / "d" / "model.onnx"
    monkeypatch.setattr(onnx, "save", lambda *a, **k: (_ for _ in ()).throw(OSError(errno.ENOSPC, "No space left on device")))
    with pytest.raises(torch_onnx_fx.SaveError):
        _program(0).save(other, external_data=True)
    assert not (tmp_path / "c").exists()


def test_export_with_f_saves_through_the_same_path(tmp_path):
    path = tmp_path / "new" / "model.onnx"
    program = torch_onnx_fx.export(_Weights(2).eval(), (_X,), f=path, verbose=False)
    assert sorted(p.name for p in path.parent.iterdir()) == ["model.onnx", "model.onnx.data"]
    _runs_as(path, 2)
    assert_matches_eager(_Weights(2).eval(), (_X,), program=program)


_REEXPORT = """
import sys, warnings
import torch, torch_onnx_fx
warnings.simplefilter("ignore")
torch.manual_seed(0)

class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.layer = torch.nn.TransformerEncoderLayer(16, 2, 32, batch_first=True)
        self.conv = torch.nn.Conv1d(16, 16, 3)

    def forward(self, x):
        return self.conv(self.layer(x).transpose(1, 2)).sum(-1)

torch_onnx_fx.export(Model().eval(), (torch.randn(2, 5, 16),), f=sys.argv[1],
                     dynamic_shapes=({0: "batch", 1: "sequence"},), verbose=False)
"""


def test_reexport_in_a_new_process_gives_byte_identical_files(tmp_path):
    """Names, node order, metadata and weights do not depend on the process (hash seeds, ids)."""
    import subprocess
    import sys

    outputs = []
    for run, seed in ((1, "1"), (2, "2")):
        path = tmp_path / f"run{run}" / "model.onnx"
        env = {**os.environ, "PYTHONHASHSEED": seed}
        subprocess.run([sys.executable, "-c", _REEXPORT, str(path)], check=True, env=env, timeout=300)
        outputs.append((path.read_bytes(), path.with_name("model.onnx.data").read_bytes()))
    assert outputs[0] == outputs[1]
