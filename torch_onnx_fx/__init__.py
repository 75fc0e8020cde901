"""torch_onnx_fx: a PyTorch → ONNX exporter built on torch.export.

``torch_onnx_fx.export`` is a drop-in replacement for ``torch.onnx.export(..., dynamo=True)``.

The public names are loaded on first use: importing the package (which the command line does
before it reads its arguments) costs no torch import; ``torch_onnx_fx.export`` and the others
import the pipeline when first touched.
"""

from __future__ import annotations

import importlib
import sys
import types
from typing import Any

from torch_onnx_fx import _state
from torch_onnx_fx._state import is_in_onnx_export
from torch_onnx_fx.errors import (
    ArgumentTypeError,
    CaptureError,
    DecompositionError,
    InputMismatchError,
    MissingTranslationError,
    OnnxExporterError,
    OnnxRuntimeError,
    SaveError,
    StateDictMismatchError,
    TranslationError,
    UnsupportedArgumentError,
    VerificationError,
    WeightsFileError,
)

__all__ = [
    "export",
    "ONNXProgram",
    "ExportableModule",
    "complex_translation",
    "is_in_onnx_export",
    "DEFAULT_OPSET",
    "OnnxExporterError",
    "CaptureError",
    "DecompositionError",
    "TranslationError",
    "MissingTranslationError",
    "UnsupportedArgumentError",
    "ArgumentTypeError",
    "InputMismatchError",
    "StateDictMismatchError",
    "WeightsFileError",
    "SaveError",
    "OnnxRuntimeError",
    "VerificationError",
]

# Public name -> the module that defines it (imported on first use).
_LAZY = {
    "export": "torch_onnx_fx.export",
    "DEFAULT_OPSET": "torch_onnx_fx.export",
    "ONNXProgram": "torch_onnx_fx.program",
    "ExportableModule": "torch_onnx_fx.exportable",
    "complex_translation": "torch_onnx_fx.registry",
}
# Public submodules, reachable as attributes as before.
_SUBMODULES = ("testing", "verification")


def __getattr__(name: str) -> Any:
    if name not in _LAZY and name not in _SUBMODULES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    # Loading the pipeline creates objects that all live as long as the process; a collection
    # on the way (a full one over a loaded model's heap: 0.2 s) would find nothing to free.
    with _state.collector_paused():
        if name in _SUBMODULES:
            return importlib.import_module(f"{__name__}.{name}")
        value = getattr(importlib.import_module(_LAZY[name]), name)
    setattr(sys.modules[__name__], name, value)
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY) | set(_SUBMODULES))


class _Package(types.ModuleType):
    """The function ``export`` and the submodule ``torch_onnx_fx.export`` share a name. Importing
    a submodule sets it as an attribute of its package; this keeps the attribute the function
    (``from torch_onnx_fx.export import export`` still finds the submodule in ``sys.modules``)."""

    def __setattr__(self, name: str, value: Any) -> None:
        if name == "export" and isinstance(value, types.ModuleType):
            value = value.export
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package
