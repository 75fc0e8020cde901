"""torchlib's translations are listed from a cached index and loaded only by a node that needs one."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from torch_onnx_fx.ops import deferred_torchlib as index_module

REPO = Path(__file__).resolve().parents[2]


def test_index_lists_what_torchlib_registers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    built = index_module.torchlib_index()
    assert built == index_module._from_torchlib()
    assert built["aten::add.Tensor"][0] >= 1
    (cached,) = (tmp_path / "torch_onnx_fx").glob("torchlib_index_*.json")
    # A second process reads the file instead of importing torchlib: what it holds is the index.
    assert {k: tuple(v) for k, v in json.loads(cached.read_text())["targets"].items()} == built


def test_unreadable_index_is_rebuilt(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    path = index_module._cache_file()
    assert path is not None
    path.parent.mkdir(parents=True)
    path.write_text('{"targets": {"aten::add.Tensor": [1')  # a file cut short
    assert index_module.torchlib_index() == index_module._from_torchlib()
    assert json.loads(path.read_text())["targets"]


_EXPORT = textwrap.dedent(
    """
    import sys, torch, torch_onnx_fx
    loaded = lambda: "onnxscript.function_libs.torch_lib.ops" in sys.modules

    class Ours(torch.nn.Module):  # isinf of floats: a translation of ours
        def forward(self, x):
            return torch.isinf(x)

    class Theirs(torch.nn.Module):  # einsum: only torchlib translates it (pick another op if ours ever does)
        def forward(self, x):
            return torch.einsum("i,i->i", x, x)

    x = torch.tensor([1.0, float("inf"), -2.0])
    program = torch_onnx_fx.export(Ours(), (x,), dynamo=True, verbose=False)
    assert program(x)[0].tolist() == [False, True, False]
    print("after ours", loaded())
    program = torch_onnx_fx.export(Theirs(), (x,), dynamo=True, verbose=False)
    assert program(x)[0].tolist() == [1.0, float("inf"), 4.0]
    print("after theirs", loaded())
    """
)


@pytest.mark.parametrize("cache", ["cold", "warm"])
def test_torchlib_loads_only_for_a_node_that_needs_it(tmp_path: Path, cache: str) -> None:
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path), "PYTHONPATH": str(REPO)}
    runs = 2 if cache == "warm" else 1
    for _ in range(runs):  # the warm case's second process reads the index the first one wrote
        result = subprocess.run([sys.executable, "-c", _EXPORT], env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    expected = "after ours False\nafter theirs True" if cache == "warm" else "after ours True\nafter theirs True"
    assert result.stdout.strip() == expected


_COMPLEX = textwrap.dedent(
    """
    import torch, torch_onnx_fx

    class Complex(torch.nn.Module):  # complex translations built on torchlib's real ones
        def forward(self, z):
            return torch.diagonal(z) * 2, torch.fft.fft(z, dim=0), z[torch.tensor([1, 0])]

    z = torch.randn(3, 3, dtype=torch.complex64)
    program = torch_onnx_fx.export(Complex(), (z,), dynamo=True, verbose=False)
    assert all(torch.allclose(a, b, atol=1e-5) for a, b in zip(program(z), Complex()(z)))
    print("ok")
    """
)


def test_complex_translations_load_torchlib_they_build_on(tmp_path: Path) -> None:
    """The complex diagonal, FFT and index wrap torchlib's real translations and read them from
    torchlib's registry, which is empty in a process whose cached index spared it the import:
    such a process failed (KeyError) on its first complex model."""
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path), "PYTHONPATH": str(REPO)}
    for _ in range(2):  # the second process reads the index the first one wrote
        result = subprocess.run([sys.executable, "-c", _COMPLEX], env=env, capture_output=True, text=True, timeout=300)
        assert result.returncode == 0, result.stderr[-2000:]
        assert result.stdout.strip() == "ok"
