"""ExportableModule: a module that carries its own export recipe.

Subclasses say how they want to be exported — example inputs, dynamic shapes, input and output
names — so ``torch_onnx_fx.export(module)`` (or ``module.to_onnx()``) needs no arguments.
Modules written for ``torch.onnx.ExportableModule`` work too: export reads the same methods.
"""

from __future__ import annotations

import abc
from typing import TYPE_CHECKING, Any, Mapping, Sequence

import torch

if TYPE_CHECKING:
    from torch_onnx_fx.program import ONNXProgram

__all__ = ["ExportableModule", "export_recipe"]


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
        from torch_onnx_fx.export import export

        return export(self, **kwargs)


def export_recipe(model: Any) -> dict[str, Any] | None:
    """The export defaults an exportable module declares, or None for other models."""
    is_exportable = isinstance(model, ExportableModule) or (
        isinstance(model, torch.nn.Module)
        and type(model).__name__ != "ExportedProgram"
        and all(callable(getattr(model, name, None)) for name in ("example_arguments", "to_onnx"))
    )
    if not is_exportable:
        return None
    args, kwargs = model.example_arguments()
    return {
        "args": tuple(args),
        "kwargs": dict(kwargs or {}),
        "dynamic_shapes": model.dynamic_shapes(),
        "input_names": model.input_names(),
        "output_names": model.output_names(),
    }
