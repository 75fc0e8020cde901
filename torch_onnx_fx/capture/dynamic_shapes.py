"""Dynamic shapes: accept every form torch.export takes, plus ONNX dim names and legacy axes.

torch.export names its symbols ``s0``, ``s17``…; users want the ONNX dims to carry *their* names.
So before capture we replace string entries (``{0: "batch_size"}``) by ``Dim.DYNAMIC`` and remember
which tensor axis the user named; after capture we read which symbol torch.export gave that axis.
The result is a ``symbol -> user name`` map that translation uses for every dim expression.
"""

from __future__ import annotations

import dataclasses
import warnings
from typing import Any, Mapping, Sequence

import torch
import torch.utils._pytree as pytree

from torch_onnx_fx.capture import keywords
from torch_onnx_fx.capture.keywords import forward_signature
from torch_onnx_fx.errors import UnsupportedArgumentError

__all__ = ["DimNames", "prepare_dynamic_shapes", "from_dynamic_axes", "forward_signature"]


@dataclasses.dataclass
class DimNames:
    """User-chosen dim names, keyed by the identity of the example tensor they belong to."""

    by_tensor: dict[int, dict[int, str]] = dataclasses.field(default_factory=dict)

    def record(self, tensor: torch.Tensor, axis: int, name: str) -> None:
        self.by_tensor.setdefault(id(tensor), {})[axis] = name


def _bound_arguments(model: Any, args: Sequence[Any], kwargs: Mapping[str, Any]) -> dict[str, Any]:
    signature = keywords.capture_signature(forward_signature(model), kwargs)
    try:
        bound = signature.bind(*args, **kwargs) if signature is not None else None
    except TypeError:
        bound = None
    if bound is None:
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
    dynamic_shapes = keywords.flatten_shapes(forward_signature(model), args, kwargs, dynamic_shapes)
    if isinstance(dynamic_shapes, Mapping):
        # Keys that name no argument are left for torch.export to report.
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


# What torch.onnx says when it converts dynamic_axes, word for word so that users' warning
# filters and tests written for it keep matching.
_DYNAMIC_AXES_DEPRECATION = (
    "from_dynamic_axes_to_dynamic_shapes is deprecated and will be removed in a future release. "
    "This function converts 'dynamic_axes' format (including custom axis names) to 'dynamic_shapes' format. "
    "Instead of relying on this conversion, provide 'dynamic_shapes' directly with custom names."
)


def _axes_spec(key: str, axes: Any) -> dict[int, Any] | None:
    if axes is None:
        return None
    if isinstance(axes, Mapping):
        if any(isinstance(a, bool) or not isinstance(a, int) for a in axes):
            raise UnsupportedArgumentError(f"dynamic_axes[{key!r}]: axes must be ints, got {list(axes)}.")
        return {int(a): (str(n) if n is not None else torch.export.Dim.DYNAMIC) for a, n in axes.items()}
    if isinstance(axes, (list, tuple)):
        if any(isinstance(a, bool) or not isinstance(a, int) for a in axes):
            raise UnsupportedArgumentError(f"dynamic_axes[{key!r}]: axes must be ints, got {list(axes)}.")
        # The TorchScript exporter's automatic names for the list form.
        return {int(a): f"{key}_dynamic_axes_{i + 1}" for i, a in enumerate(axes)}
    raise UnsupportedArgumentError(
        f"dynamic_axes[{key!r}] must be a dict {{axis: name}} or a list of axes, got {axes!r}."
    )


def from_dynamic_axes(
    model: Any,
    args: Sequence[Any],
    kwargs: Mapping[str, Any],
    dynamic_axes: Mapping[str, Any],
    input_names: Sequence[str] | None,
    output_names: Sequence[str] | None = None,
) -> dict[str, Any]:
    """Convert legacy ``dynamic_axes`` to a ``dynamic_shapes`` dict keyed by argument name.

    A key names an input tensor: an ``input_names`` entry (which name the *flattened* tensor
    inputs in order, nested lists/tuples/dicts included), else a top-level argument's name.
    Output keys are left to :func:`torch_onnx_fx.program.naming.apply_output_axes`. A key that is neither
    takes the next unnamed input tensor in order (torch.onnx pairs keys with inputs by position),
    with a warning. ``{axis: name}`` keeps the name; a list of axes gets
    ``<key>_dynamic_axes_<i>`` names.
    """
    warnings.warn(_DYNAMIC_AXES_DEPRECATION, DeprecationWarning, stacklevel=4)
    warnings.warn(
        "# 'dynamic_axes' is not recommended when dynamo=True, and may lead to "
        "'torch._dynamo.exc.UserError: Constraints violated.' Supply the 'dynamic_shapes' argument "
        "instead if export is unsuccessful.",
        UserWarning,
        stacklevel=4,
    )
    bound = _bound_arguments(model, args, kwargs)
    leaves, tree = pytree.tree_flatten(list(bound.values()))
    tensor_positions = [i for i, leaf in enumerate(leaves) if isinstance(leaf, torch.Tensor)]
    by_name: dict[str, int] = {}
    for name, position in zip(input_names or [], tensor_positions):
        by_name[name] = position
    offset = 0
    for name, value in bound.items():
        count = len(pytree.tree_leaves(value))
        if isinstance(value, torch.Tensor):
            by_name.setdefault(name, offset)
        offset += count
    outputs = set(output_names or [])
    specs: list[Any] = [None] * len(leaves)
    claimed = set()
    unmatched: list[str] = []
    for key, axes in dynamic_axes.items():
        if key in by_name:
            specs[by_name[key]] = _axes_spec(key, axes)
            claimed.add(by_name[key])
        elif key not in outputs:
            unmatched.append(key)
    free = [p for p in tensor_positions if p not in claimed]
    for key in unmatched:
        if not free:
            # Probably an output named without output_names: apply_output_axes handles it or
            # says nothing matched.
            continue
        position = free.pop(0)
        warnings.warn(
            f"dynamic_axes key {key!r} names no input (input_names={list(input_names or [])}, "
            f"arguments={list(bound)}) and no output; it is applied to the next input tensor in order.",
            UserWarning,
            stacklevel=4,
        )
        specs[position] = _axes_spec(key, dynamic_axes[key])
    nested = pytree.tree_unflatten(specs, tree)
    return dict(zip(bound, nested))


