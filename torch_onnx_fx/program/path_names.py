"""Graph inputs and outputs named by where they sit in the call and in the result.

torch.export names a nested input after its argument and its position (``cache_0``, ``extra_a``)
and an output after the FX node that computed it (``linear_14``, ``cat_3``): a caller cannot tell
which tensor is which without reading the graph. Here a tensor inside a structure is named by its
path, dots between the keys: the input ``cache.layers.0.keys`` (the ``keys`` of the cache's first
layer), the outputs ``logits`` and ``past_key_values.0.key`` of a ``ModelOutput``, ``pair.1`` of a
returned dict. Top-level tensor arguments keep their names (the argument's, as before), outputs
reached only through tuple positions keep the node's name (a position says no more than it), and
``input_names``/``output_names`` still win. An output whose path is already an input's name
(a cache the model takes and returns) is ``output.<path>``, as transformers' exporter names it.
"""

from __future__ import annotations

import inspect
import logging
from typing import Any, Mapping, Sequence

import onnx_ir as ir
import torch
import torch.utils._pytree as pytree

from torch_onnx_fx.capture.keywords import forward_signature
from torch_onnx_fx.signature import ProgramSignature

__all__ = ["apply_path_names"]

logger = logging.getLogger(__name__)

def _part(key: Any) -> str:
    if isinstance(key, pytree.MappingKey):
        return str(key.key)
    if isinstance(key, pytree.SequenceKey):
        return str(key.idx)
    if isinstance(key, pytree.GetAttrKey):
        return key.name
    return str(key).strip(".[]'\"")


def _attribute_paths(root: Any, prefix: tuple[str, ...] = ()) -> dict[int, tuple[str, ...]]:
    """id(tensor) -> its path in ``root``, through dict keys, list positions and the public
    attributes of objects (a cache's ``layers.0.keys``, which its pytree flattening numbers only);
    a tensor no public path reaches by its private attribute's name (a sliding-window cache
    layer's ``_sliding_window_tensor``)."""
    found: dict[int, tuple[str, ...]] = {}
    seen: set[int] = set()
    private = False

    def walk(value: Any, path: tuple[str, ...], depth: int) -> None:
        if isinstance(value, torch.Tensor):
            found.setdefault(id(value), path)
            return
        if depth > 8 or id(value) in seen or isinstance(value, (torch.nn.Module, str, bytes, int, float, bool, type(None))):
            return
        seen.add(id(value))
        if isinstance(value, Mapping):
            items = [(str(key), item) for key, item in value.items()]
        elif isinstance(value, (list, tuple)):
            items = [(str(index), item) for index, item in enumerate(value)]
        elif hasattr(value, "__dict__"):
            items = [(key, item) for key, item in vars(value).items() if private or not key.startswith("_")]
        else:
            return
        for key, item in items:
            walk(item, (*path, key), depth + 1)

    walk(root, prefix, 0)
    private = True
    seen.clear()
    walk(root, prefix, 0)
    return found


def _positional_names(model: Any) -> list[str]:
    signature = forward_signature(model)
    if signature is None:
        return []
    kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    return [name for name, parameter in signature.parameters.items() if parameter.kind in kinds]


def _leaves_with_paths(tree: Any) -> list[tuple[tuple[str, ...] | None, Any]]:
    """``tree``'s pytree leaves (None counted, as torch.export counts it) with their key paths;
    paths are None for a registered type without keys (a ``flatten_with_keys_fn``)."""
    is_leaf = lambda x: x is None  # noqa: E731
    try:
        return [(tuple(_part(key) for key in path), leaf) for path, leaf in pytree.tree_flatten_with_path(tree, is_leaf=is_leaf)[0]]
    except ValueError:
        return [(None, leaf) for leaf in pytree.tree_leaves(tree, is_leaf=is_leaf)]


def _path_of(leaf: Any, path: tuple[str, ...] | None, by_identity: dict[int, tuple[str, ...]]) -> tuple[str, ...] | None:
    """The attribute walk's path where it found the tensor (it names a cache's ``layers.0.keys``
    where the pytree numbers them), else the pytree's."""
    return by_identity.get(id(leaf), path)


def input_paths(signature: ProgramSignature, model: Any, args: Sequence[Any], kwargs: Mapping[str, Any]) -> dict[str, str]:
    """Placeholder name -> path name, for the user inputs nested inside an argument."""
    flat_args, flat_kwargs = signature.with_baked_constants(args, kwargs)
    positional = _positional_names(model)
    if len(flat_args) > len(positional):
        return {}
    arguments = {**dict(zip(positional, flat_args)), **dict(flat_kwargs or {})}
    leaves = _leaves_with_paths((tuple(flat_args), dict(flat_kwargs or {})))
    if len(leaves) != len(signature.user_inputs):
        return {}
    by_identity = _attribute_paths(arguments)
    names = {}
    for (path, leaf), (node, _) in zip(leaves, signature.user_inputs):
        if path is not None:
            # (args or kwargs, position or keyword, ...) -> (argument name, ...)
            root = path[1]
            path = (positional[int(root)] if path[0] == "0" else root, *path[2:])
        found = _path_of(leaf, path, by_identity) if isinstance(leaf, torch.Tensor) else path
        if found is not None and len(found) > 1:  # a top-level argument keeps its own name
            names[node.name] = ".".join(found)
    return names


def output_paths(program: torch.export.ExportedProgram, count: int) -> list[str | None]:
    """One name per user output (None: keep the node's name), from the program's output spec."""
    out_spec = program.call_spec.out_spec
    if out_spec is None or out_spec.num_leaves != count:
        return [None] * count
    try:
        # A structure of the right shape to read the keys from (ModelOutput and other registered
        # types rebuild from any leaves).
        rebuilt = pytree.tree_unflatten([torch.empty(0) for _ in range(count)], out_spec)
    except Exception as exc:  # noqa: BLE001 - a structure that cannot be rebuilt keeps the node names
        logger.debug("output paths unavailable: %s", exc)
        return [None] * count
    leaves = _leaves_with_paths(rebuilt)
    if len(leaves) != count:
        return [None] * count
    by_identity = _attribute_paths(rebuilt)
    names: list[str | None] = []
    for path, leaf in leaves:
        found = _path_of(leaf, path, by_identity)
        # Positions alone (a tuple's) say no more than the node's name.
        names.append(".".join(found) if found and not all(part.isdigit() for part in found) else None)
    return names


def apply_path_names(
    graph: ir.Graph, signature: ProgramSignature, program: torch.export.ExportedProgram, model: Any,
    args: Sequence[Any], kwargs: Mapping[str, Any],
) -> None:
    """Rename ``graph``'s inputs and outputs by their paths (see the module docstring)."""
    taken = {v.name for n in graph for v in n.outputs} | set(graph.initializers) | {v.name for v in graph.inputs}
    if not isinstance(model, torch.export.ExportedProgram):
        by_placeholder = input_paths(signature, model, args, kwargs)
        for value in graph.inputs:
            name = by_placeholder.get(value.name or "")
            if name and name not in taken:
                taken.add(name)
                value.name = name
    inputs = {v.name for v in graph.inputs}
    entries = signature.user_outputs
    paths = output_paths(program, len(entries))
    names = [path for entry, path in zip(entries, paths) if entry.arg is not None]
    for value, name in zip(list(graph.outputs), names):
        if name is None or value.is_graph_input() or value.name == name:
            continue
        if name in inputs:
            name = f"output.{name}"
        if name in taken:
            continue
        taken.add(name)
        value.name = name
