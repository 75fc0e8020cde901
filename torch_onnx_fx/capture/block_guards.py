"""What makes a later instance of a block compute exactly what its traced first instance did.

A block's trace depends on its code (its class), what its code reads of the instance (weights,
attributes, submodules), its inputs (their structure, Python values and tensor metadata) and the
global modes torch traces under. ``capture/repeated_blocks`` traces an instance once and lets a
later one stand in for its trace only when all of these agree; this module computes and compares
them:

* :func:`signature` of a call: the input structure with its Python values and, per tensor, dtype,
  device, ``requires_grad`` and sizes and strides as symbolic expressions (comparing the
  expressions adds no guard to the trace, where comparing the sizes would);
* :class:`AttributeReads` records, while the first instance is traced, which instance attributes
  its modules read, and whether any was written. Attributes the code does not read (a decoder
  layer's ``layer_idx`` when no cache is passed) may differ between instances;
* :func:`same_module` compares a later instance with the traced one: the same classes at the same
  submodule paths, weights of the same dtypes and shapes, and equal values of every attribute read.
"""

from __future__ import annotations

import contextlib
import copy
import enum
import functools
from typing import Any, Collection, Iterator

import torch
from torch.utils._python_dispatch import is_traceable_wrapper_subclass

__all__ = ["AttributeReads", "Unsupported", "flatten", "unflatten", "signature", "same_module", "size_expr", "tensor_state", "global_modes"]

# In a recorded module's __dict__ while its block is traced: (names read, writes, path, the
# lookups nn.Module.__getattr__ is in).
_LOG = "_torch_onnx_fx_reads"
_PLAIN = (bool, int, float, complex, str, bytes, type(None), torch.dtype, torch.device, torch.memory_format, torch.layout)


class Unsupported(Exception):
    """A call or module this capture cannot prove equal to another; it is traced as usual."""


def flatten(value: Any, leaves: list[Any]) -> Any:
    """The structure of ``value`` with its tensors moved to ``leaves``; only builtin containers
    and plain Python values, since an object (a KV cache) may be changed by the call."""
    if isinstance(value, torch.Tensor):
        leaves.append(value)
        return "tensor"
    if isinstance(value, (torch.SymInt, torch.SymFloat, torch.SymBool)):
        return ("symbol", type(value).__name__, value.node.expr)
    if isinstance(value, _PLAIN) or isinstance(value, enum.Enum):
        return ("value", type(value), value)
    if type(value) in (tuple, list):
        return (type(value).__name__, tuple(flatten(item, leaves) for item in value))
    if type(value) is dict and all(isinstance(key, str) for key in value):
        return ("dict", tuple((key, flatten(item, leaves)) for key, item in value.items()))
    raise Unsupported(f"an input of type {type(value).__name__}")


def unflatten(structure: Any, leaves: Iterator[Any]) -> Any:
    if structure == "tensor":
        return next(leaves)
    kind = structure[0]
    if kind == "value":
        return structure[2]
    if kind in ("tuple", "list"):
        items = [unflatten(item, leaves) for item in structure[1]]
        return tuple(items) if kind == "tuple" else items
    if kind == "dict":
        return {key: unflatten(item, leaves) for key, item in structure[1]}
    raise Unsupported("a symbolic output")


def size_expr(size: Any) -> Any:
    """A size or stride as a symbolic expression (an int when it is static)."""
    return size.node.expr if isinstance(size, torch.SymInt) else int(size)


def tensor_state(tensor: torch.Tensor) -> tuple[Any, ...]:
    if is_traceable_wrapper_subclass(tensor):
        raise Unsupported(f"a tensor subclass {type(tensor).__name__}")
    return (
        tensor.dtype, tensor.device, tensor.requires_grad, tensor.layout,
        tuple(size_expr(s) for s in tensor.shape), tuple(size_expr(s) for s in tensor.stride()),
    )


def signature(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, list[torch.Tensor]]:
    """A hashable signature of a call and its tensors, in order."""
    leaves: list[torch.Tensor] = []
    structure = flatten((tuple(args), dict(kwargs)), leaves)
    return (structure, tuple(tensor_state(t) for t in leaves)), leaves


def global_modes() -> tuple[Any, ...]:
    """The modes a trace depends on beyond the call itself."""
    return (
        torch.is_grad_enabled(),
        torch.is_inference_mode_enabled(),
        torch.is_autocast_enabled("cpu"),
        torch.get_autocast_dtype("cpu"),
        torch.get_default_dtype(),
    )


class AttributeReads:
    """The attributes each module of an instance reads while it is traced, and whether any is
    written: the instance's modules get, for the trace, a subclass of their class that notes
    every attribute lookup (name and class are the original's, so the module stack and class
    checks see no difference).

    The model's other modules are recorded too: a block may read its parent's state through a
    reference (the index of the layer being run, set by the parent before each call). What they
    read is kept as it was when the trace ended, so that a later instance stands in only while it
    is still so (:meth:`outside_changed`)."""

    def __init__(self) -> None:
        self.reads: dict[str, set[str]] = {}
        self.written: list[str] = []
        self._outside_reads: dict[str, set[str]] = {}
        self._outside: dict[str, tuple[torch.nn.Module, dict[str, Any]]] = {}

    @contextlib.contextmanager
    def recording(self, root: torch.nn.Module, model: torch.nn.Module | None = None) -> Iterator[None]:
        swapped: list[tuple[torch.nn.Module, type]] = []
        inside = {id(m) for m in root.modules()}
        outside = [] if model is None else [(p, m) for p, m in model.named_modules() if id(m) not in inside]
        modules = [(path, module, self.reads) for path, module in root.named_modules(remove_duplicate=False)]
        modules += [(path, module, self._outside_reads) for path, module in outside]
        try:
            for path, module, reads in modules:
                if _LOG in object.__getattribute__(module, "__dict__"):
                    continue  # met twice (shared): recorded once
                names = reads.setdefault(path, set())
                original = type(module)
                object.__setattr__(module, "__class__", _recording_class(original))
                object.__getattribute__(module, "__dict__")[_LOG] = (names, self.written, path, [])
                swapped.append((module, original))
            yield
        finally:
            for module, original in swapped:
                object.__getattribute__(module, "__dict__").pop(_LOG, None)
                object.__setattr__(module, "__class__", original)
            by_path = dict(outside)
            for path, names in self._outside_reads.items():
                module = by_path[path]
                kept = {name: _kept(module.__dict__[name]) for name in names if name in module.__dict__}
                if "__dict__" in names:
                    kept = {name: _kept(value) for name, value in module.__dict__.items()}
                if kept:
                    self._outside[path] = (module, kept)

    def outside_changed(self) -> str | None:
        """Why the other modules no longer hold what the trace read of them, or None."""
        for path, (module, kept) in self._outside.items():
            for name, value in kept.items():
                if not _same_value(value, module.__dict__.get(name, _MISSING)):
                    return f"{path or 'the model'}.{name}, which it reads, has changed"
        return None


def _kept(value: Any) -> Any:
    """What a later comparison needs of ``value`` as it is now: a container's items may change."""
    return copy.copy(value) if type(value) in (list, dict, set) else value


_RECORDING_CLASSES: dict[type, type] = {}


def _recording_class(cls: type) -> type:
    recording = _RECORDING_CLASSES.get(cls)
    if recording is not None:
        return recording

    def __getattribute__(self: Any, name: str) -> Any:
        log = object.__getattribute__(self, "__dict__").get(_LOG)
        # nn.Module.__getattr__ reads __dict__ to find weights and submodules, which are
        # compared whole; any other read of it may read every attribute.
        if log is not None and not (name == "__dict__" and log[3]):
            log[0].add(name)
        return cls.__getattribute__(self, name)

    def __getattr__(self: Any, name: str) -> Any:
        log = object.__getattribute__(self, "__dict__").get(_LOG)
        if log is None:
            return cls.__getattr__(self, name)
        log[0].add(name)
        log[3].append(name)
        try:
            return cls.__getattr__(self, name)
        finally:
            log[3].pop()

    def __setattr__(self: Any, name: str, value: Any) -> None:
        log = object.__getattribute__(self, "__dict__").get(_LOG)
        if log is not None:
            log[1].append(f"{log[2] or 'the block'}.{name}")
        cls.__setattr__(self, name, value)

    recording = type(
        cls.__name__, (cls,),
        {"__getattribute__": __getattribute__, "__getattr__": __getattr__, "__setattr__": __setattr__, "__module__": cls.__module__,
         "__qualname__": cls.__qualname__},
    )
    _RECORDING_CLASSES[cls] = recording
    return recording


_MISSING = object()


def _same_value(a: Any, b: Any) -> bool:
    if a is b:
        return True
    if type(a) is not type(b):
        return False
    if isinstance(a, torch.Tensor):
        return tensor_state(a) == tensor_state(b) and bool(torch.equal(a, b))
    if isinstance(a, _PLAIN) or isinstance(a, enum.Enum):
        return a == b and (not isinstance(a, float) or str(a) == str(b))
    if type(a) in (tuple, list):
        return len(a) == len(b) and all(_same_value(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return list(a) == list(b) and all(_same_value(a[k], b[k]) for k in a)
    if isinstance(a, (set, frozenset)):
        return a == b
    if isinstance(a, functools.partial):
        return a.func is b.func and _same_value(a.args, b.args) and _same_value(a.keywords, b.keywords)
    # Other objects (a shared config, a function) only as themselves: their equality may not
    # cover what the code reads of them.
    return False


def same_module(traced: torch.nn.Module, other: torch.nn.Module, reads: AttributeReads, ignore: Collection[str] = ()) -> str | None:
    """None when ``other`` computes what ``traced`` did for the same inputs, else why not;
    attributes named in ``ignore`` (the capture's own stand-ins) are not compared."""
    ours = list(traced.named_modules(remove_duplicate=False))
    theirs = list(other.named_modules(remove_duplicate=False))
    if [(p, type(m)) for p, m in ours] != [(p, type(m)) for p, m in theirs]:
        return "its submodules differ"
    for (path, a), (_, b) in zip(ours, theirs):
        for kind in ("_parameters", "_buffers"):
            mine, yours = a.__dict__[kind], b.__dict__[kind]
            if list(mine) != list(yours):
                return f"{path or 'it'} has other {kind[1:]}"
            for name, tensor in mine.items():
                if (tensor is None) != (yours[name] is None) or (tensor is not None and tensor_state(tensor) != tensor_state(yours[name])):
                    return f"{path}.{name} differs in dtype or shape"
        names = reads.reads.get(path, set())
        if "__dict__" in names:
            names = set(a.__dict__) | set(b.__dict__)
        for name in names:
            if name in ("_parameters", "_buffers", "_modules", _LOG) or (not path and name in ignore):
                continue
            mine = a.__dict__.get(name, _MISSING)
            yours = b.__dict__.get(name, _MISSING)
            if mine is _MISSING and yours is _MISSING:
                continue  # a class attribute, a weight or a submodule, compared above
            if not _same_value(mine, yours):
                return f"{(path + '.') if path else ''}{name} differs"
    return None
