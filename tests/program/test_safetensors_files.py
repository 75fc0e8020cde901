"""apply_weights from safetensors files: one file, shards, a folder, a sharded checkpoint's index."""

from __future__ import annotations

import hashlib
import json

import pytest
import torch

import torch_onnx_fx
from helpers import assert_matches_eager

save_file = pytest.importorskip("safetensors.torch", reason="the files are written with the safetensors package").save_file


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(8, 16)
        self.b = torch.nn.Linear(16, 4)
        self.register_buffer("scale", torch.ones(4))

    def forward(self, x):
        return self.b(torch.relu(self.a(x))) * self.scale


def _meta_program() -> torch_onnx_fx.ONNXProgram:
    with torch.device("meta"):
        model = Net()
    return torch_onnx_fx.export(model, (torch.randn(2, 8, device="meta"),), verbose=False)


def _shards(folder, state):
    """Two shards and the index Hugging Face writes beside them."""
    keys = sorted(state)
    files = {"model-00001-of-00002.safetensors": keys[:3], "model-00002-of-00002.safetensors": keys[3:]}
    for name, names in files.items():
        save_file({k: state[k].contiguous() for k in names}, str(folder / name))
    index = {"metadata": {}, "weight_map": {k: name for name, names in files.items() for k in names}}
    (folder / "model.safetensors.index.json").write_text(json.dumps(index))
    return [folder / name for name in files]


@pytest.mark.parametrize("form", ["index", "folder", "list", "single_file"])
def test_weights_from_files_match_eager(tmp_path, form):
    real = Net()
    state = real.state_dict()
    shards = _shards(tmp_path, state)
    if form == "single_file":
        save_file({k: v.contiguous() for k, v in state.items()}, str(tmp_path / "all.safetensors"))
    source = {
        "index": tmp_path / "model.safetensors.index.json",
        "folder": tmp_path,
        "list": [str(p) for p in shards],
        "single_file": tmp_path / "all.safetensors",
    }[form]
    program = _meta_program()
    program.apply_weights(source)
    assert_matches_eager(real, (torch.randn(2, 8),), program=program)


def test_files_are_mapped_not_changed(tmp_path):
    real = Net()
    shards = _shards(tmp_path, real.state_dict())
    digests = [hashlib.sha256(p.read_bytes()).hexdigest() for p in shards]
    program = _meta_program()
    program.apply_weights(tmp_path)
    program.save(tmp_path / "out" / "model.onnx", external_data=True)
    # The saved model, run from disk, has the file's weights.
    import onnxruntime

    x = torch.randn(2, 8)
    session = onnxruntime.InferenceSession(str(tmp_path / "out" / "model.onnx"), providers=["CPUExecutionProvider"])
    (saved,) = session.run(None, {session.get_inputs()[0].name: x.numpy()})
    torch.testing.assert_close(torch.from_numpy(saved), real(x).detach())
    assert [hashlib.sha256(p.read_bytes()).hexdigest() for p in shards] == digests


def test_bad_files_are_refused_before_anything_changes(tmp_path):
    program = _meta_program()
    with pytest.raises(torch_onnx_fx.WeightsFileError, match="does not exist"):
        program.apply_weights(tmp_path / "missing.safetensors")
    (tmp_path / "junk.safetensors").write_bytes(b"not a safetensors file at all")
    with pytest.raises(torch_onnx_fx.WeightsFileError, match="not a safetensors file"):
        program.apply_weights(tmp_path / "junk.safetensors")
    state = Net().state_dict()
    save_file({"a.weight": state["a.weight"]}, str(tmp_path / "one.safetensors"))
    save_file({"a.weight": state["a.weight"]}, str(tmp_path / "two.safetensors"))
    with pytest.raises(torch_onnx_fx.WeightsFileError, match="in both"):
        program.apply_weights([tmp_path / "one.safetensors", tmp_path / "two.safetensors"])
    wrong = {k: v.contiguous() for k, v in state.items()}
    wrong["b.bias"] = torch.zeros(5)
    save_file(wrong, str(tmp_path / "wrong.safetensors"))
    with pytest.raises(torch_onnx_fx.StateDictMismatchError, match="b.bias"):
        program.apply_weights(tmp_path / "wrong.safetensors")


def test_files_and_a_dict_together(tmp_path):
    # A checkpoint lacks non-persistent buffers; the list form adds them from a dict.
    real = Net()
    state = real.state_dict()
    save_file({k: v.contiguous() for k, v in state.items() if k != "scale"}, str(tmp_path / "model.safetensors"))
    program = _meta_program()
    with pytest.raises(torch_onnx_fx.StateDictMismatchError, match="scale"):
        program.apply_weights(tmp_path / "model.safetensors")
    program.apply_weights([tmp_path / "model.safetensors", {"scale": state["scale"]}])
    assert_matches_eager(real, (torch.randn(2, 8),), program=program)
