"""Trace each distinct repeated block once: the capture half of ``export_modules_as_functions``.

torch.export traces every layer of a deep model through Python, and that tracing is most of an
export's time. The layers of a ``ModuleList`` usually run the same code on the same shapes, so
while torch.export runs, each chosen block instance's ``forward`` is replaced:

* the first instance of each (class, input signature, global modes) is traced as usual, between
  marker operators naming its inputs and outputs (``capture/block_ops``), with what its modules
  read of themselves recorded (``capture/block_guards``);
* a later instance whose every read attribute, weight shape and input equals a traced one's is
  not traced: one ``block`` operator stands for it, taking its activations and its weights;
* anything else is traced as usual: an instance that differs in what its code reads (a sliding
  window layer among full-attention ones) becomes a traced block of its own, and a block whose
  trace writes attributes, changes tensors in place, takes objects (a KV cache) or returns
  aliases or sizes no other instance may stand in for.

``capture/block_replay`` then copies the traced body in place of each ``block`` call, so the
program is the one a full trace gives, node for node, at a fraction of the tracing.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import logging
from typing import Any, Collection, Iterator

import sympy
import torch

from torch_onnx_fx.capture import block_ops
from torch_onnx_fx.capture.block_guards import AttributeReads, Unsupported, flatten, global_modes, same_module, signature, size_expr, unflatten

__all__ = ["RepeatedBlocks", "TracedBlock", "select_blocks"]

logger = logging.getLogger(__name__)


def _class_name(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def select_blocks(root: torch.nn.Module, selection: bool | Collection[str]) -> dict[str, torch.nn.Module]:
    """The outermost instances ``export_modules_as_functions`` makes functions of, by path:
    with ``True`` the items of a ``ModuleList`` or ``Sequential`` whose class has another item
    there and which have submodules, else the instances of the named classes."""
    chosen: dict[str, torch.nn.Module] = {}
    if selection is True:
        for path, container in root.named_modules():
            if not isinstance(container, (torch.nn.ModuleList, torch.nn.Sequential)):
                continue
            items = [(name, m) for name, m in container.named_children() if name.isdigit() and next(m.children(), None) is not None]
            counts = collections.Counter(type(m) for _, m in items)
            for name, module in items:
                if counts[type(module)] >= 2:
                    chosen[f"{path}.{name}" if path else name] = module
    elif selection:
        names = set(selection)
        for path, module in root.named_modules():
            if path and _class_name(type(module)) in names:
                chosen[path] = module
    # Only the outermost: an inner one is traced (or stood in for) with its block.
    outermost = {}
    for path in sorted(chosen, key=lambda p: p.count(".")):
        if not any(path.startswith(outer + ".") for outer in outermost):
            outermost[path] = chosen[path]
    return outermost


@dataclasses.dataclass
class TracedBlock:
    """One traced instance that later instances may stand in for."""

    key: str
    path: str
    module: torch.nn.Module
    reads: AttributeReads
    inputs: int  # tensor inputs, first in a ``block`` call's list
    weights: list[str]  # parameters then buffers, by name within the block: the rest of the list
    call: tuple[tuple[Any, ...], dict[str, Any]]  # the traced call's arguments
    outputs: Any = None  # the output structure; None until the trace ends and proves usable


def _contiguous(tensor: torch.Tensor) -> bool:
    expected: Any = sympy.Integer(1)
    for size, stride in reversed(list(zip(tensor.shape, tensor.stride()))):
        size, stride = size_expr(size), size_expr(stride)
        if size != 1 and sympy.expand(stride - expected) != 0:
            return False
        expected = expected * size
    return True


def _output_shapes(outputs: list[torch.Tensor], inputs: list[torch.Tensor]) -> block_ops.BlockShapes:
    """Each output dim as a constant or an input dim: what a ``block`` call's fake kernel needs."""
    where: dict[Any, tuple[int, int]] = {}
    for i, tensor in enumerate(inputs):
        for d, size in enumerate(tensor.shape):
            if isinstance(size, torch.SymInt):
                where.setdefault(size.node.expr, (i, d))
    dims = []
    for tensor in outputs:
        if not _contiguous(tensor):
            raise Unsupported("an output with strides of its own")
        row: list[Any] = []
        for size in tensor.shape:
            if not isinstance(size, torch.SymInt):
                row.append(int(size))
            elif size.node.expr.is_number:
                row.append(int(size.node.expr))
            elif size.node.expr in where:
                row.append(where[size.node.expr])
            else:
                raise Unsupported(f"an output size {size.node.expr} that is no input size")
        dims.append(tuple(row))
    return block_ops.BlockShapes(tuple(dims), tuple(t.dtype for t in outputs), tuple(t.device for t in outputs))


def _weights(module: torch.nn.Module) -> list[tuple[str, torch.Tensor]]:
    return [*module.named_parameters(remove_duplicate=False), *module.named_buffers(remove_duplicate=False)]


class RepeatedBlocks:
    """While active, the chosen instances' ``forward`` traces or stands in (module docstring)."""

    def __init__(self, root: torch.nn.Module, selection: bool | Collection[str]):
        self.root = root
        self.instances = select_blocks(root, selection)
        self.traced: dict[str, TracedBlock] = {}
        self._by_class: dict[Any, list[TracedBlock]] = {}
        self._depth = 0

    @contextlib.contextmanager
    def active(self) -> Iterator[RepeatedBlocks]:
        patched = []
        try:
            for path, module in self.instances.items():
                if "forward" in module.__dict__:
                    continue  # a forward set on the instance: leave it alone
                module.__dict__["forward"] = self._forward(path, module, module.forward)
                patched.append(module)
            yield self
        finally:
            for module in patched:
                module.__dict__.pop("forward", None)
            block_ops.forget_shapes(list(self.traced))

    def _forward(self, path: str, module: torch.nn.Module, original: Any) -> Any:
        def forward(*args: Any, **kwargs: Any) -> Any:
            if self._depth:  # called from inside a traced block
                return original(*args, **kwargs)
            try:
                call, leaves = signature(args, kwargs)
            except Unsupported as exc:
                self._refuse(path, str(exc))
                return original(*args, **kwargs)
            # Candidates are compared on signatures computed now: a size symbol the trace has
            # since found equal to another (a mask's length and the sequence's) reads as that one.
            candidates = self._by_class.setdefault((type(module), global_modes()), [])
            same_call = [traced for traced in candidates if signature(*traced.call)[0] == call]
            for traced in same_call:
                if traced.outputs is None:
                    continue
                difference = same_module(traced.module, module, traced.reads, ignore={"forward"}) or traced.reads.outside_changed()
                if difference is None:
                    return self._stand_in(traced, path, module, leaves)
                logger.debug("block %s is not %s: %s", path, traced.path, difference)
            if not leaves or any(traced.outputs is None for traced in same_call):
                return original(*args, **kwargs)
            traced = TracedBlock(str(len(self.traced)), path, module, AttributeReads(), len(leaves), [n for n, _ in _weights(module)], (args, kwargs))
            self.traced[traced.key] = traced
            candidates.append(traced)
            return self._trace(traced, original, call[0], leaves)

        return forward

    def _refuse(self, path: str, why: str) -> None:
        logger.debug("block %s traced as usual: %s", path, why)

    def _trace(self, traced: TracedBlock, original: Any, structure: Any, leaves: list[torch.Tensor]) -> Any:
        ops = block_ops.ops()
        marked = [ops.block_input(t, traced.key, i) for i, t in enumerate(leaves)]
        args, kwargs = unflatten(structure, iter(marked))
        weights = [t for _, t in _weights(traced.module)]
        before = [t._version for t in [*marked, *weights]]
        modes = global_modes()
        self._depth += 1
        try:
            with traced.reads.recording(traced.module, self.root):
                result = original(*args, **kwargs)
        finally:
            self._depth -= 1
        outputs: list[torch.Tensor] = []
        try:
            structure_out = flatten(result, outputs)
            if traced.reads.written:
                raise Unsupported(f"it sets {', '.join(traced.reads.written[:3])}")
            if [t._version for t in [*marked, *weights]] != before:
                raise Unsupported("it changes a tensor in place")
            if global_modes() != modes:
                raise Unsupported("it changes a global mode")
            if any(o is t for o in outputs for t in [*marked, *weights]) or len({id(o) for o in outputs}) != len(outputs):
                raise Unsupported("it returns an input or a weight")
            if not outputs:
                raise Unsupported("it returns no tensor")
            shapes = _output_shapes(outputs, list(leaves))
        except Unsupported as exc:
            self._refuse(traced.path, str(exc))
            return result
        block_ops.register_shapes(traced.key, shapes)
        traced.outputs = structure_out
        marked_out = [ops.block_output(t, traced.key, i) for i, t in enumerate(outputs)]
        return unflatten(structure_out, iter(marked_out))

    def _stand_in(self, traced: TracedBlock, path: str, module: torch.nn.Module, leaves: list[torch.Tensor]) -> Any:
        weights = dict(_weights(module))
        outputs = block_ops.ops().block(traced.key, [*leaves, *(weights[name] for name in traced.weights)])
        logger.debug("block %s stands in for %s", traced.path, path)
        return unflatten(traced.outputs, iter(outputs))
