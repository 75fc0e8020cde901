"""ExportableModule: a module that carries its own export recipe.

Subclasses say how they want to be exported — example inputs, dynamic shapes, input and output
names — so ``torch_onnx_fx.export(module)`` (or ``module.to_onnx()``) needs no arguments.
Modules written for ``torch.onnx.ExportableModule`` work too: export reads the same methods
(``options.export_recipe`` recognises both by those methods, not by class).
"""

from __future__ import annotations

import abc
from typing import Any, Mapping, Sequence

import torch

from torch_onnx_fx.export import export
from torch_onnx_fx.program import ONNXProgram

__all__ = ["ExportableModule"]


class ExportableModule(torch.nn.Module, abc.ABC):
    """Implement ``forward`` and ``example_arguments``; override the others as needed."""

    @abc.abstractmethod
    def example_arguments(self) -> tuple[tuple[Any, ...], Mapping[str, Any] | None]:
        """``(args, kwargs)`` to trace ``forward`` with; kwargs may be None."""

    def dynamic_shapes(self) -> Any:
        """Dynamic shapes in any form ``export`` accepts; None means all static."""
        return None

    def input_names(self) -> Sequence[str] | None:
        return None

    def output_names(self) -> Sequence[str] | None:
        return None

    def to_onnx(self, **kwargs: Any) -> ONNXProgram:
        """``torch_onnx_fx.export(self, **kwargs)`` with this module's recipe as defaults."""
        return export(self, **kwargs)
