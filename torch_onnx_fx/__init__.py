"""torch_onnx_fx: a PyTorch → ONNX exporter built on torch.export.

``torch_onnx_fx.export`` is a drop-in replacement for ``torch.onnx.export(..., dynamo=True)``.
"""

from __future__ import annotations

from torch_onnx_fx._state import is_in_onnx_export
from torch_onnx_fx.errors import (
    ArgumentTypeError,
    CaptureError,
    DecompositionError,
    MissingTranslationError,
    OnnxExporterError,
    InputMismatchError,
    OnnxRuntimeError,
    SaveError,
    StateDictMismatchError,
    TranslationError,
    WeightsFileError,
    UnsupportedArgumentError,
    VerificationError,
)
from torch_onnx_fx.export import DEFAULT_OPSET, export
from torch_onnx_fx.exportable import ExportableModule
from torch_onnx_fx.program import ONNXProgram
from torch_onnx_fx.registry import complex_translation
from torch_onnx_fx import testing, verification  # noqa: F401  (public submodules)

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
