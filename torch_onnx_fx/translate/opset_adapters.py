"""Calls written for opset 18 rewritten for the opset a graph is built at.

torchlib writes its translations against opset 18; graphs are built directly at the requested
opset. Only the operators below changed meaning since 18; the tracer applies each adapter whose
opset lies between the one a call was written for and the one the graph is built at.
"""

from __future__ import annotations

from typing import Any, Protocol

import onnx_ir as ir

__all__ = ["OPSET_ADAPTERS"]


class _Constants(Protocol):
    """What an adapter needs of the tracer: typed constants."""

    def constant(self, value: Any, dtype: ir.DataType | None = None) -> ir.Value: ...


def _dft_axis_as_input(
    tracer: _Constants, inputs: list[ir.Value | None], attributes: dict[str, ir.Attr]
) -> tuple[list[ir.Value | None], dict[str, ir.Attr]]:
    """DFT-20 takes the axis as its third input instead of an attribute."""
    attributes = dict(attributes)
    axis = attributes.pop("axis").as_int() if "axis" in attributes else 1
    padded = [*inputs, None][:2] if len(inputs) < 2 else list(inputs[:2])
    return [*padded, tracer.constant(axis, ir.DataType.INT64)], attributes


_GRID_SAMPLE_MODES = {"bilinear": "linear", "bicubic": "cubic"}


def _grid_sample_mode_names(
    tracer: _Constants, inputs: list[ir.Value | None], attributes: dict[str, ir.Attr]
) -> tuple[list[ir.Value | None], dict[str, ir.Attr]]:
    """GridSample-20 renamed its interpolation modes."""
    attributes = dict(attributes)
    if "mode" in attributes:
        mode = attributes["mode"].as_string()
        attributes["mode"] = ir.AttrString("mode", _GRID_SAMPLE_MODES.get(mode, mode))
    return inputs, attributes


# op_type -> [(opset in which it changed, adapter)]
OPSET_ADAPTERS: dict[str, list[tuple[int, Any]]] = {
    "DFT": [(20, _dft_axis_as_input)],
    "GridSample": [(20, _grid_sample_mode_names)],
}
