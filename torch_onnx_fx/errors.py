"""Exception types raised by torch_onnx_fx.

Every error a user can meet derives from :class:`OnnxExporterError`, so one ``except`` clause is
enough for callers that only want to know whether the export worked. Subclasses say which stage
failed; their messages carry the context (node, target, shapes, source line) and a next step.
"""

from __future__ import annotations

__all__ = [
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
    "VerificationError",
    "OnnxRuntimeError",
]


class OnnxExporterError(RuntimeError):
    """Base class of every error raised by torch_onnx_fx."""


class UnsupportedArgumentError(OnnxExporterError, ValueError):
    """An argument of ``export`` (or of an ``ONNXProgram`` method) has a value this exporter
    cannot honour."""


class ArgumentTypeError(UnsupportedArgumentError, TypeError):
    """An argument has the wrong type (``opset_version="18"``, ``input_names=5``). A
    ``TypeError`` too, as Python's own errors for wrong types are."""


class InputMismatchError(UnsupportedArgumentError):
    """The inputs given to a call of an ``ONNXProgram`` do not match the graph's inputs (count,
    tensor or not, dtype, rank, a static size). The message names the input by its graph name
    and position and says what was expected."""


class StateDictMismatchError(UnsupportedArgumentError):
    """``ONNXProgram.apply_weights`` was given a state dict that does not fit the model.

    ``missing``, ``unexpected`` and ``mismatched`` list the offending names.
    """

    def __init__(self, message: str, missing: list[str] | None = None, unexpected: list[str] | None = None,
                 mismatched: list[str] | None = None):
        super().__init__(message)
        self.missing = list(missing or [])
        self.unexpected = list(unexpected or [])
        self.mismatched = list(mismatched or [])


class WeightsFileError(UnsupportedArgumentError):
    """``ONNXProgram.apply_weights`` was given weight files it cannot read: a missing path, a
    folder without ``.safetensors`` files, a file that is not safetensors, a tensor in two shards."""


class SaveError(OnnxExporterError, OSError):
    """Saving the model failed. Nothing was replaced: the files that were at the destination
    before the save are unchanged, and no temporary file is left behind. The ``OSError`` that
    caused it (disk full, permission denied…) is chained as ``__cause__``."""


class CaptureError(OnnxExporterError):
    """torch.export could not capture the model with any strategy.

    ``failures`` keeps one ``(strategy, exception)`` pair per strategy that was tried.
    """

    def __init__(self, message: str, failures: list[tuple[str, BaseException]] | None = None):
        super().__init__(message)
        self.failures = list(failures or [])


class DecompositionError(OnnxExporterError):
    """Decomposing the operators that have no ONNX translation failed."""


class TranslationError(OnnxExporterError):
    """Translating one FX node into ONNX failed."""


class MissingTranslationError(TranslationError):
    """Some operators have neither an ONNX translation nor a decomposition.

    ``targets`` lists every untranslatable target found in the graph, not just the first.
    """

    def __init__(self, message: str, targets: list[str] | None = None):
        super().__init__(message)
        self.targets = list(targets or [])


class OnnxRuntimeError(OnnxExporterError):
    """Running the exported model in ONNX Runtime failed."""


class VerificationError(OnnxExporterError, AssertionError):
    """The ONNX model's outputs cannot be compared with PyTorch's (their counts differ).

    An ``AssertionError`` too, so test suites report it as a failed check.
    """
