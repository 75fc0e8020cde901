"""Dynamic shapes: accept every form torch.export takes, plus ONNX dim names and legacy axes.

torch.export names its symbols ``s0``, ``s17``…; users want the ONNX dims to carry *their* names.
So before capture we replace string entries (``{0: "batch_size"}``) by ``Dim.DYNAMIC`` and remember
which tensor axis the user named; after capture we read which symbol torch.export gave that axis.
The result is a ``symbol -> user name`` map that translation uses for every dim expression.
"""

from __future__ import annotations

import dataclasses
import inspect
import logging
from typing import Any, Mapping, Sequence

import torch
import torch.utils._pytree as pytree

from torch_onnx_fx.errors import UnsupportedArgumentError

__all__ = ["DimNames", "prepare_dynamic_shapes", "from_dynamic_axes", "flatten_user_inputs"]

logger = logging.getLogger(__name__)


@dataclasses.dataclass
class DimNames:
    """User-chosen dim names, keyed by the identity of the example tensor they belong to."""

    by_tensor: dict[int, dict[int, str]] = dataclasses.field(default_factory=dict)

    def record(self, tensor: torch.Tensor, axis: int, name: str) -> None:
        self.by_tensor.setdefault(id(tensor), {})[axis] = name


def _bound_arguments(model: Any, args: Sequence[Any], kwargs: Mapping[str, Any]) -> dict[str, Any]:
    forward = model.forward if isinstance(model, torch.nn.Module) else model
    try:
        bound = inspect.signature(forward).bind(*args, **kwargs)
    except (TypeError, ValueError):
        # Signature unavailable or not matching: fall back to positional order.
        return {f"arg{i}": a for i, a in enumerate([*args, *kwargs.values()])}
    return dict(bound.arguments)


def _convert_axis_spec(spec: Any, value: Any, names: DimNames, path: str) -> Any:
    """Replace string dims by Dim.DYNAMIC, recording the name for the tensor ``value``."""
    if isinstance(value, torch.Tensor):
        if spec is None:
            return None
        items: list[tuple[int, Any]]
        if isinstance(spec, Mapping):
            items = list(spec.items())
        elif isinstance(spec, (list, tuple)):
            items = list(enumerate(spec))
        else:
            raise UnsupportedArgumentError(
                f"dynamic_shapes entry for tensor input {path!r} must be a dict "
                f"{{axis: name_or_Dim}} or a list of them, got {spec!r}."
            )
        converted: dict[int, Any] = {}
        for axis, dim in items:
            if not isinstance(axis, int) or not -value.dim() <= axis < max(value.dim(), 1):
                raise UnsupportedArgumentError(
                    f"dynamic_shapes for input {path!r}: axis {axis!r} is out of range for a "
                    f"tensor of shape {tuple(value.shape)}."
                )
            axis %= max(value.dim(), 1)
            if isinstance(dim, str):
                names.record(value, axis, dim)
                dim = torch.export.Dim.DYNAMIC
            elif isinstance(dim, torch.export.Dim) and not dim.__name__.startswith("_"):
                names.record(value, axis, dim.__name__)
            converted[axis] = dim
        if isinstance(spec, (list, tuple)):
            return type(spec)(converted[i] for i in range(len(spec)))
        return converted
    if isinstance(value, (list, tuple)) and isinstance(spec, (list, tuple)):
        return type(spec)(
            _convert_axis_spec(s, v, names, f"{path}[{i}]") for i, (s, v) in enumerate(zip(spec, value))
        )
    if isinstance(value, Mapping) and isinstance(spec, Mapping):
        return {k: _convert_axis_spec(s, value.get(k), names, f"{path}[{k!r}]") for k, s in spec.items()}
    node = pytree.SUPPORTED_NODES.get(type(value))
    if node is not None and isinstance(spec, (list, tuple)):
        # A registered container (a transformers cache, a dataclass): its spec lists the
        # children in flatten order.
        children, _ = node.flatten_fn(value)
        return type(spec)(
            _convert_axis_spec(s, v, names, f"{path}[{i}]") for i, (s, v) in enumerate(zip(spec, children))
        )
    # Non-tensor leaves or structures torch.export itself will validate.
    return spec


def prepare_dynamic_shapes(
    model: Any, args: Sequence[Any], kwargs: Mapping[str, Any], dynamic_shapes: Any
) -> tuple[Any, DimNames]:
    """Return ``dynamic_shapes`` with names replaced by ``Dim.DYNAMIC``, and the names."""
    names = DimNames()
    if dynamic_shapes is None:
        return None, names
    bound = _bound_arguments(model, args, kwargs)
    if isinstance(dynamic_shapes, Mapping):
        unknown = [k for k in dynamic_shapes if k not in bound]
        if unknown and len(dynamic_shapes) == len(bound):
            # torch.export also accepts a dict whose keys do not match when counts agree
            # positionally is *not* allowed; let it report the mismatch itself.
            pass
        converted = {
            k: _convert_axis_spec(spec, bound.get(k), names, k) for k, spec in dynamic_shapes.items()
        }
        return converted, names
    if isinstance(dynamic_shapes, (list, tuple)):
        values = list(bound.values())
        converted_list = [
            _convert_axis_spec(spec, values[i] if i < len(values) else None, names, f"input {i}")
            for i, spec in enumerate(dynamic_shapes)
        ]
        return type(dynamic_shapes)(converted_list), names
    raise UnsupportedArgumentError(
        f"dynamic_shapes must be a dict, tuple or list, got {type(dynamic_shapes).__name__}."
    )


def from_dynamic_axes(
    model: Any,
    args: Sequence[Any],
    kwargs: Mapping[str, Any],
    dynamic_axes: Mapping[str, Any],
    input_names: Sequence[str] | None,
) -> dict[str, Any]:
    """Convert legacy ``dynamic_axes`` (inputs only) to a ``dynamic_shapes`` dict by arg name.

    Keys are ``input_names`` entries (mapped to arguments in order) or argument names; values are
    ``{axis: name}`` or a list of axes, which get names ``<input>_dim_<axis>``. Output entries are
    handled after translation by renaming the output dims.
    """
    bound = _bound_arguments(model, args, kwargs)
    arg_names = list(bound)
    alias: dict[str, str] = {}
    for i, name in enumerate(input_names or []):
        if i < len(arg_names):
            alias[name] = arg_names[i]
    shapes: dict[str, Any] = {name: None for name in arg_names}
    for key, axes in dynamic_axes.items():
        arg = alias.get(key, key if key in bound else None)
        if arg is None:
            continue  # an output name; applied to the ONNX outputs later
        if isinstance(axes, Mapping):
            spec = {int(a): str(n) for a, n in axes.items()}
        elif isinstance(axes, (list, tuple)):
            spec = {int(a): f"{key}_dynamic_axes_{i + 1}" for i, a in enumerate(axes)}
        else:
            raise UnsupportedArgumentError(
                f"dynamic_axes[{key!r}] must be a dict {{axis: name}} or a list of axes, got {axes!r}."
            )
        shapes[arg] = spec
    return shapes


def flatten_user_inputs(
    program: torch.export.ExportedProgram, args: Sequence[Any], kwargs: Mapping[str, Any] | None
) -> list[Any]:
    """Flatten ``(args, kwargs)`` in the order of the program's user inputs.

    torch.export orders keyword arguments as its input spec records them, which need not be the
    order the caller wrote them in.
    """
    kwargs = dict(kwargs or {})
    in_spec = program.call_spec.in_spec
    if in_spec is not None and kwargs and in_spec.num_children == 2:
        kw_spec = in_spec.children_specs[1]
        order = list(kw_spec.context or [])
        missing = [k for k in order if k not in kwargs]
        extra = [k for k in kwargs if k not in order]
        if extra:
            raise UnsupportedArgumentError(
                f"Unexpected keyword arguments {extra}; the model was exported with {order}."
            )
        kwargs = {k: kwargs[k] for k in order if k not in missing}
    return pytree.tree_leaves((tuple(args), kwargs), is_leaf=lambda x: x is None)
