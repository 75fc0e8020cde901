"""ONNX Runtime's CPU kernel table: the same table from the cache as from the runtime, a broken
cache never trusted, and an export with a warm cache that does not load the runtime."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from torch_onnx_fx.optimize.runtime import kernel_table


@pytest.fixture()
def cache_home(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    return tmp_path


def test_cached_table_is_the_runtimes(cache_home):
    live = kernel_table._from_runtime()
    assert live and "Gemm" in live
    path = kernel_table.cache_file()
    assert path is not None and path.is_relative_to(cache_home) and not path.exists()
    assert kernel_table.cpu_kernels() == live
    assert path.exists()
    assert kernel_table._read(path) == live
    assert kernel_table.cpu_kernels() == live


@pytest.mark.parametrize("content", ["", "{not json", '{"kernels": {"Gemm": [[1]]}}', '{"kernels": 3}', '{"kernels": {}}'])
def test_a_broken_cache_is_replaced(cache_home, content):
    path = kernel_table.cache_file()
    path.parent.mkdir(parents=True)
    path.write_text(content)
    assert kernel_table.cpu_kernels() == kernel_table._from_runtime()
    assert kernel_table._read(path) == kernel_table._from_runtime()


def test_an_unwritable_cache_still_gives_the_table(cache_home):
    (cache_home / "torch_onnx_fx").write_text("a file where the folder would be")
    assert kernel_table.cpu_kernels() == kernel_table._from_runtime()


def test_export_with_a_warm_cache_does_not_load_the_runtime(cache_home):
    script = textwrap.dedent(
        """
        import sys, torch, torch_onnx_fx
        model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU()).eval()
        x = torch.randn(2, 4)
        torch_onnx_fx.export(model, (x,), verbose=False)
        print("loaded" if "onnxruntime" in sys.modules else "not loaded")
        """
    )
    env_script = [sys.executable, "-c", script]
    first = subprocess.run(env_script, capture_output=True, text=True, check=True)
    second = subprocess.run(env_script, capture_output=True, text=True, check=True)
    # The first export on a machine reads the runtime's table; every later one the cache.
    assert first.stdout.strip().splitlines()[-1] == "loaded"
    assert second.stdout.strip().splitlines()[-1] == "not loaded"


def test_an_unreadable_cache_is_skipped(cache_home, monkeypatch):
    # As a user without permission on the folder sees it (root reads anything, so simulated).
    kernel_table.cpu_kernels()
    path = kernel_table.cache_file()
    original = type(path).read_text

    def denied(self, *args, **kwargs):
        if self == path:
            raise PermissionError(13, "Permission denied", str(self))
        return original(self, *args, **kwargs)

    def denied_exists(self, *args, **kwargs):
        if self == path:  # what Python 3.11's exists() does on EACCES
            raise PermissionError(13, "Permission denied", str(self))
        return original_exists(self, *args, **kwargs)

    original_exists = type(path).exists
    monkeypatch.setattr(type(path), "read_text", denied)
    monkeypatch.setattr(type(path), "exists", denied_exists)
    assert kernel_table.cpu_kernels() == kernel_table._from_runtime()
