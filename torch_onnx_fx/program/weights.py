"""Replacing a program's weights: a state dict checked against the model before anything changes.

``ONNXProgram.apply_weights`` is how a model exported with fake, meta or placeholder weights gets
its real ones. A state dict that does not fit (a key missing, a key from another model, a tensor
of another shape or dtype) would otherwise make a model that runs later with some stale weights,
or fails in ONNX Runtime far from the cause. :func:`apply_weights` checks every entry first, names
every offending key in one :class:`StateDictMismatchError`, and replaces nothing unless all fit.
"""

from __future__ import annotations

import json
import logging
import warnings
from typing import Collection, Mapping, Sequence

import onnx_ir as ir
import torch
from onnx_ir.tensor_adapters import TorchTensor
from torch.utils._python_dispatch import is_traceable_wrapper_subclass

from torch_onnx_fx.dtypes import onnx_dtype
from torch_onnx_fx.errors import ArgumentTypeError, StateDictMismatchError
from torch_onnx_fx.optimize.weights.recipes import RECIPE_KEY, recipe_dtypes, recipe_sources, remake
from torch_onnx_fx.translate.weight_data import without_data
from torch_onnx_fx.optimize.weights.transposes import PERM_KEY, WEIGHT_KEY

__all__ = ["apply_weights"]

logger = logging.getLogger(__name__)


_Target = tuple[ir.Value, "list[int] | None"]
# Set on initializers renamed through legacy input_names: their state-dict name.
_ORIGINAL_NAME_KEY = "pkg.torch.onnx.original_node_name"


def _initializers_by_name(model: ir.Model) -> dict[str, _Target]:
    """State-dict name -> the initializer holding it and the permutation it is stored in (None:
    as it is). Weights the optimizer stored transposed say so in their metadata."""
    targets: dict[str, _Target] = {name: (value, None) for name, value in model.graph.initializers.items()}
    for value in list(model.graph.initializers.values()):
        # Initializers renamed through legacy input_names still answer to their state-dict name.
        original = value.metadata_props.get(_ORIGINAL_NAME_KEY)
        if original:
            targets.setdefault(original, (value, None))
        weight = value.metadata_props.get(WEIGHT_KEY)
        if weight:
            perm = [int(axis) for axis in value.metadata_props[PERM_KEY].split(",")]
            targets.setdefault(weight, (value, perm))
    return targets


class _Remade:
    """An initializer the optimizer made from weights (moved, stacked, computed with), its recipe."""

    def __init__(self, value: ir.Value):
        self.value = value
        self.recipe = json.loads(value.metadata_props[RECIPE_KEY])
        self.sources = recipe_sources(self.recipe)


def _remade(model: ir.Model) -> list[_Remade]:
    return [_Remade(value) for value in model.graph.initializers.values() if RECIPE_KEY in value.metadata_props]


def _weight_name(value: ir.Value) -> str:
    """The state-dict name an initializer answers to (its weight's, when stored transposed)."""
    return value.metadata_props.get(WEIGHT_KEY) or value.metadata_props.get(_ORIGINAL_NAME_KEY) or value.name


def _misfit(
    name: str, tensor: torch.Tensor, stored: torch.Tensor, shape: Sequence[int] | None, dtype: ir.DataType | None,
    shown: tuple[int, ...] | None,
) -> str | None:
    """Why ``tensor`` (stored as ``stored``) does not fit where the model keeps ``shape`` and
    ``dtype``; None when it fits. ``shown`` is the shape in the state dict's own terms."""
    if shape is not None and tuple(shape) != tuple(stored.shape):
        return f"{name}: shape {tuple(tensor.shape)}, the model has {shown}"
    if dtype is not None and onnx_dtype(stored.dtype) != dtype:
        return f"{name}: dtype {tensor.dtype}, the model has {dtype.name}"
    return None


def _stored(tensor: torch.Tensor, perm: list[int] | None = None) -> torch.Tensor:
    """The tensor as the graph stores it: permuted as the optimizer stored it, complex values as
    real pairs (trailing dim 2)."""
    tensor = tensor.detach()
    if perm is not None:
        # A view, not a copy: a memory-mapped checkpoint stays on disk until save() writes each
        # weight (a contiguous copy here would hold every transposed weight in memory at once).
        tensor = tensor.permute(perm)
    return torch.view_as_real(tensor) if tensor.is_complex() else tensor


def _flattened(tensor: torch.Tensor) -> list[torch.Tensor]:
    """A tensor subclass's plain tensors, depth first in ``__tensor_flatten__`` order: the order
    torch.export numbers them in when it unwraps the parameter."""
    if not is_traceable_wrapper_subclass(tensor):
        return [tensor]
    names, _ = tensor.__tensor_flatten__()  # type: ignore[attr-defined]
    return [plain for name in names for plain in _flattened(getattr(tensor, name))]


def _unwrapped(state_dict: Mapping[str, torch.Tensor]) -> Mapping[str, torch.Tensor]:
    """The state dict with each tensor subclass (torchao's quantized weights) given as the plain
    tensors the exported graph reads: ``layer.weight`` as ``layer.parametrizations.weight.original0``,
    ``original1``... (torch.export's names for an unwrapped subclass parameter)."""
    if not any(is_traceable_wrapper_subclass(tensor) for tensor in state_dict.values()):
        return state_dict
    plain: dict[str, torch.Tensor] = {}
    for name, tensor in state_dict.items():
        if not is_traceable_wrapper_subclass(tensor):
            plain[name] = tensor
            continue
        owner, _, leaf = name.rpartition(".")
        prefix = f"{owner}.parametrizations.{leaf}" if owner else f"parametrizations.{leaf}"
        plain.update({f"{prefix}.original{index}": part for index, part in enumerate(_flattened(tensor))})
    return plain


def apply_weights(
    model: ir.Model, state_dict: Mapping[str, torch.Tensor], weight_names: Collection[str] | None, *, strict: bool = True
) -> int:
    """Replace the initializers named in ``state_dict``; return how many were replaced.

    ``weight_names`` are the model's replaceable weights (parameters and persistent buffers, by
    state-dict name), None when unknown (a program without its ExportedProgram). With ``strict``,
    every weight the graph uses must be given and every key must be a weight of the model; shapes
    and dtypes must always match. Nothing is replaced when any check fails.
    """
    if not isinstance(state_dict, Mapping):
        raise ArgumentTypeError(
            f"apply_weights(state_dict): expected a dict of name -> tensor (model.state_dict()), got "
            f"{type(state_dict).__name__}."
        )
    # An eager-quantized model's own state dict: packed weights and quantized tensors.
    quantized = [
        name for name, tensor in state_dict.items()
        if "_packed_params" in name or (isinstance(tensor, torch.Tensor) and tensor.is_quantized)
    ]
    if quantized:
        raise ArgumentTypeError(
            f"apply_weights(state_dict): {quantized[:5]} are quantized tensors or packed quantized weights. An "
            "eager-quantized model is exported "
            "with plain tensors: each layer's int8 weight and its scales and zero points as weights of their own "
            "(`<layer>.weight`, `<layer>.weight_scale`, `<layer>.weight_zero_point`, `<layer>.bias`); pass those "
            "(tensor.int_repr(), tensor.q_per_channel_scales(), …) under the names the exported program lists."
        )
    not_tensors = [name for name, tensor in state_dict.items() if not isinstance(tensor, torch.Tensor)]
    if not not_tensors:
        state_dict = _unwrapped(state_dict)
    if not_tensors:
        raise ArgumentTypeError(
            f"apply_weights(state_dict): the values of {not_tensors[:10]} are not tensors; every value "
            "must be a torch.Tensor."
        )
    initializers = _initializers_by_name(model)
    remade = _remade(model)
    # Weights stored only inside remade initializers still answer to their names.
    remade_sources = {name: shape for item in remade for name, shape in item.sources.items() if name not in initializers}
    replaceable = set(initializers) | set(remade_sources)
    known = set(weight_names) if weight_names is not None else replaceable
    missing = sorted(name for name in known if name in replaceable and name not in state_dict) if strict else []
    # Tensors exported without data (meta device, FakeTensorMode) must all be given, buffers too:
    # the model cannot run with any of them left empty, strict or not.
    empty = sorted(
        name for name, (value, _) in initializers.items()
        if name not in state_dict and name not in missing and without_data(value) and name == _weight_name(value)
        and RECIPE_KEY not in value.metadata_props
    )
    empty += sorted(
        {name for item in remade if without_data(item.value) for name in item.sources if name not in state_dict} - set(missing)
    )
    missing += empty
    unexpected = sorted(name for name in state_dict if name not in replaceable and name not in known) if strict else []
    mismatched: list[str] = []
    for item in remade:
        given = [name for name in item.sources if name in state_dict]
        if given and len(given) < len(item.sources):
            others = sorted(name for name in item.sources if name not in state_dict and name not in missing)
            if others:
                mismatched.append(f"{given[0]}: stored combined into one tensor with {others}; give them together")
    for name, shape in remade_sources.items():
        tensor = state_dict.get(name)
        if tensor is None:
            continue
        item = next(item for item in remade if name in item.sources)
        declared = recipe_dtypes(item.recipe).get(name)
        dtype = onnx_dtype(getattr(torch, declared)) if declared else item.value.dtype
        misfit = _misfit(name, tensor, _stored(tensor), shape, dtype, tuple(shape))
        if misfit:
            mismatched.append(misfit)
    for name, tensor in state_dict.items():
        target = initializers.get(name)
        if target is None:
            continue
        value, perm = target
        if perm is not None and tensor.dim() != len(perm):
            mismatched.append(f"{name}: rank {tensor.dim()}, the model stores it permuted by {perm}")
            continue
        shape = tuple(value.shape) if value.shape is not None else None
        shown = shape if perm is None or shape is None else tuple(shape[perm.index(axis)] for axis in range(len(perm)))
        misfit = _misfit(name, tensor, _stored(tensor, perm), shape, value.dtype, shown)
        if misfit:
            mismatched.append(misfit)
    if missing or unexpected or mismatched:
        lines = ["apply_weights: the state dict does not fit the model; nothing was replaced."]
        for label, names in (("missing", missing), ("unexpected", unexpected), ("mismatched", mismatched)):
            if names:
                shown = "; ".join(names[:20]) + (f"; … ({len(names) - 20} more)" if len(names) > 20 else "")
                lines.append(f"  {label} ({len(names)}): {shown}")
        lines.append(
            "Pass the full state dict of the model that was exported (model.state_dict()), converted to its "
            "dtypes, and every tensor exported without data (meta device: non-persistent buffers too); "
            "strict=False allows updating some weights only (other missing and unexpected keys are then ignored)."
        )
        raise StateDictMismatchError("\n".join(lines), missing, unexpected, [m.split(":")[0] for m in mismatched])
    # Remade first: a recipe that refuses its new weights (4-bit packing of values past 4 bits)
    # must fail before anything is replaced.
    remade_tensors = []
    for item in remade:
        if all(name in state_dict for name in item.sources):
            with torch.no_grad():
                try:
                    tensor = remake(item.recipe, {name: _stored(state_dict[name]) for name in item.sources})
                except ValueError as exc:
                    raise StateDictMismatchError(
                        f"apply_weights: {exc}; nothing was replaced.", [], [], sorted(item.sources)
                    ) from None
            remade_tensors.append((item, tensor))
    replaced = 0
    for name, tensor in state_dict.items():
        target = initializers.get(name)
        if target is not None:
            value, perm = target
            value.const_value = TorchTensor(_stored(tensor, perm), name=value.name)
            replaced += 1
    for item, tensor in remade_tensors:
        item.value.const_value = TorchTensor(tensor, name=item.value.name)
    replaced += sum(1 for name in remade_sources if name in state_dict)
    ignored = [name for name in state_dict if name not in replaceable]
    if ignored:
        logger.debug("apply_weights: %d key(s) are not initializers of the graph: %s", len(ignored), ignored[:10])
    if state_dict and not replaced and not strict:
        # strict=False ignores unknown keys; when every key is unknown (a prefix such as "model."
        # too many or too few) that is a call that did nothing, which deserves to be said.
        names = sorted(known & replaceable)[:5]
        warnings.warn(
            f"apply_weights(strict=False): none of the {len(state_dict)} key(s) ({sorted(state_dict)[:5]}) names a "
            f"weight of the model, so nothing was replaced. Its weights are named like {names}.",
            UserWarning,
            stacklevel=3,
        )
    return replaced
