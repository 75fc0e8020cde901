"""ONNX Runtime's CPU kernel table, read from the runtime once per installed build.

:mod:`torch_onnx_fx.optimize.runtime.kernel_gaps` checks every exported node against the kernels ONNX
Runtime's CPU provider registers. Asking the runtime means loading its native library, which
adds some 17 MB to an export's peak memory (a tenth of what the exporter itself adds to
``torch.export``'s) though the export never runs a session. The table depends only on the
installed build, so it is kept in a small JSON file under the user's cache directory
(``$XDG_CACHE_HOME`` or ``~/.cache``, folder ``torch_onnx_fx``), keyed by the native library's
path, size and modification time: a reinstall or upgrade reads the runtime again. A cache that
cannot be read or written is skipped, never trusted half-written (files are replaced atomically).
"""

from __future__ import annotations

import hashlib
import importlib.util
import logging
from pathlib import Path

from torch_onnx_fx._state import cache_path, read_json, write_json

__all__ = ["Kernel", "cpu_kernels", "cache_file"]

logger = logging.getLogger(__name__)

# (first opset, last opset, type parameter -> allowed types such as "tensor(float)")
Kernel = tuple[int, int, dict[str, frozenset[str]]]

_FORMAT = 1


def _native_library() -> Path | None:
    """The runtime's native module, found without importing it."""
    spec = importlib.util.find_spec("onnxruntime")
    if spec is None or not spec.submodule_search_locations:
        return None
    capi = Path(next(iter(spec.submodule_search_locations))) / "capi"
    candidates = sorted(capi.glob("onnxruntime_pybind11_state*"))
    return candidates[0] if candidates else None


def cache_file() -> Path | None:
    """Where the table of the installed runtime is kept; None without a runtime or a place."""
    library = _native_library()
    if library is None:
        return None
    try:
        stat = library.stat()
    except OSError:
        return None
    key = hashlib.sha256(f"{_FORMAT}|{library.resolve()}|{stat.st_size}|{stat.st_mtime_ns}".encode()).hexdigest()[:16]
    return cache_path(f"ort_cpu_kernels_{key}.json")


def _from_runtime() -> dict[str, list[Kernel]]:
    try:
        from onnxruntime.capi import _pybind_state
    except ImportError:  # no runtime installed: nothing to adapt to
        return {}
    table: dict[str, list[Kernel]] = {}
    for kernel in _pybind_state.get_all_opkernel_def():
        if kernel.provider != "CPUExecutionProvider" or kernel.domain not in ("", "ai.onnx"):
            continue
        since, until = kernel.version_range
        constraints = {name: frozenset(types) for name, types in kernel.type_constraints.items()}
        table.setdefault(kernel.op_name, []).append((since, until, constraints))
    return table


def _read(path: Path) -> dict[str, list[Kernel]] | None:
    try:
        data = read_json(path)
        return {
            op: [(int(since), int(until), {name: frozenset(types) for name, types in constraints.items()})
                 for since, until, constraints in kernels]
            for op, kernels in data["kernels"].items()
        }
    except (ValueError, KeyError, TypeError, AttributeError) as error:
        logger.debug("kernel table cache %s unreadable (%s); asking ONNX Runtime", path, error)
        return None


def _write(path: Path, table: dict[str, list[Kernel]]) -> None:
    # The format's version is in the file name's key (cache_file), not repeated in the file.
    data = {
        "kernels": {op: [[since, until, {n: sorted(t) for n, t in c.items()}] for since, until, c in kernels] for op, kernels in table.items()},
    }
    if not write_json(path, data):
        logger.debug("kernel table not cached at %s", path)


def cpu_kernels() -> dict[str, list[Kernel]]:
    """ONNX Runtime's CPU kernels of the default domain: op type -> kernels; empty without a
    runtime."""
    path = cache_file()
    # An empty table is never trusted: it would turn the kernel-gap pass off.
    table = (_read(path) or None) if path is not None else None
    if table is None:
        table = _from_runtime()
        if table and path is not None:
            _write(path, table)
    return table
