"""Which targets onnxscript's torchlib translates, known without importing its translations.

Importing torchlib's translations compiles its 47 scripted functions from source and builds 466
signatures: about 0.4 s of every process's first export, more than half of what a small model's
translation and optimization take together. The table needs to know up front which targets
torchlib covers (decomposition keeps an operator whole only where some translation takes it), but
a graph needs torchlib's functions only for nodes none of ours takes. So the table lists
torchlib's entries as :class:`~torch_onnx_fx.registry.Deferred` functions, loaded on first use,
from an index of names and overload counts kept in the user's cache folder (``_state.cache_path``),
keyed by the installed onnxscript's torchlib files and torch's version (torchlib registers some
overloads by torch version): an upgrade rebuilds it by importing torchlib once.
"""

from __future__ import annotations

import hashlib
import importlib.util
import logging
from pathlib import Path
from typing import Any, Callable

import torch

from torch_onnx_fx._state import cache_path, read_json, write_json

__all__ = ["torchlib_index", "torchlib_function"]

logger = logging.getLogger(__name__)

_FORMAT = 1

# target name -> (real overloads, complex overloads)
Index = dict[str, tuple[int, int]]


def _ops_folder() -> Path | None:
    """torchlib's translation modules, found without importing them."""
    spec = importlib.util.find_spec("onnxscript")
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations))) / "function_libs" / "torch_lib"


def _cache_file() -> Path | None:
    folder = _ops_folder()
    if folder is None:
        return None
    parts = [str(_FORMAT), torch.__version__]
    try:
        for path in sorted(folder.rglob("*.py")):
            stat = path.stat()
            parts.append(f"{path.relative_to(folder)}|{stat.st_size}|{stat.st_mtime_ns}")
    except OSError:
        return None
    key = hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]
    return cache_path(f"torchlib_index_{key}.json")


def _registry() -> Any:
    from onnxscript.function_libs.torch_lib import registration
    import onnxscript.function_libs.torch_lib.ops  # noqa: F401 - fills the registry

    return registration.default_registry


def _from_torchlib() -> Index:
    return {name: (len(entry.overloads), len(entry.complex)) for name, entry in _registry().items()}


def _read(path: Path) -> Index | None:
    data = read_json(path)
    try:
        index = {str(name): (int(real), int(complex_)) for name, (real, complex_) in data["targets"].items()}
    except (KeyError, TypeError, ValueError):
        return None
    return index or None


def torchlib_index() -> Index:
    """torchlib's targets with their counts of real and complex overloads."""
    path = _cache_file()
    index = _read(path) if path is not None else None
    if index is None:
        index = _from_torchlib()
        if path is not None and not write_json(path, {"targets": index}):
            logger.debug("torchlib index not cached at %s", path)
    return index


def torchlib_function(name: str, position: int, complex: bool) -> Callable[[], Callable[..., Any]]:
    """A loader of torchlib's ``position``-th (complex) overload of ``name``."""

    def load() -> Callable[..., Any]:
        entry = _registry()[name]
        return (entry.complex if complex else entry.overloads)[position]

    return load
