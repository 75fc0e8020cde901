"""The operators a capture that traces each repeated block once leaves in the graph for a moment.

``capture/repeated_blocks`` traces the first instance of a block between *markers*
(``block_input``/``block_output``: identities that name the block's inputs and outputs in the
graph) and stands in for each later instance with one ``block`` call whose inputs are the
instance's activations and weights. ``capture/block_replay`` then writes the traced body in place
of every ``block`` call and removes the markers, so no stage after capture ever sees these
operators. Their real kernels only refuse: a program that still holds them was not replayed.

Each ``block`` call's output shapes come from its record (:class:`BlockShapes`): every output
dim is a constant or one dim of one input, as the traced instance's were, so the fake kernel
rebuilds them from the call's own inputs under whatever shape environment traces it.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, Sequence

import torch

__all__ = ["BlockShapes", "ops", "NAMESPACE"]

NAMESPACE = "torch_onnx_fx"

# (input index, dim) of an input dim, or a constant size.
Dim = tuple[int, int] | int


@dataclasses.dataclass(frozen=True)
class BlockShapes:
    """The outputs of one traced block as functions of its inputs."""

    dims: tuple[tuple[Dim, ...], ...]
    dtypes: tuple[torch.dtype, ...]
    devices: tuple[torch.device, ...]


# key -> shapes of the block a ``block`` call stands for; filled while a capture runs.
_SHAPES: dict[str, BlockShapes] = {}


def register_shapes(key: str, shapes: BlockShapes) -> None:
    _SHAPES[key] = shapes


def forget_shapes(keys: Sequence[str]) -> None:
    for key in keys:
        _SHAPES.pop(key, None)


def _not_replayed(*_: Any) -> Any:
    raise RuntimeError(
        "torch_onnx_fx's repeated-block operators stand in for traced code only while a capture runs; "
        "this program was not replayed (capture/block_replay)."
    )


def _identity_backward(ctx: Any, grad: torch.Tensor) -> tuple[Any, ...]:
    return grad, None, None


def _block_backward(ctx: Any, grads: Any) -> Any:
    raise RuntimeError("torch_onnx_fx's block operator has no gradient: it exists only while a capture runs.")


@functools.cache
def ops() -> Any:
    """Define the operators once per process (on first use, so a plain export never does)."""
    library = torch.library.Library(NAMESPACE, "FRAGMENT")
    library.define("block_input(Tensor x, str key, int slot) -> Tensor")
    library.define("block_output(Tensor x, str key, int slot) -> Tensor")
    library.define("block(str key, Tensor[] inputs) -> Tensor[]")
    for name in ("block_input", "block_output"):
        qualified = f"{NAMESPACE}::{name}"
        torch.library.impl(qualified, "CompositeExplicitAutograd", lib=library)(_not_replayed)
        # A marker's output is a fresh tensor shaped as its input (an operator may not return
        # an alias of an input), and carries gradients so the traced code sees requires_grad
        # as it would without the marker.
        torch.library.register_fake(qualified, lib=library)(lambda x, key, slot: torch.empty_like(x))
        torch.library.register_autograd(qualified, _identity_backward, lib=library)
    qualified = f"{NAMESPACE}::block"
    torch.library.impl(qualified, "CompositeExplicitAutograd", lib=library)(_not_replayed)

    def fake_block(key: str, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
        shapes = _SHAPES[key]
        outputs = []
        for dims, dtype, device in zip(shapes.dims, shapes.dtypes, shapes.devices):
            size = [dim if isinstance(dim, int) else inputs[dim[0]].shape[dim[1]] for dim in dims]
            outputs.append(torch.empty(size, dtype=dtype, device=device))
        return outputs

    torch.library.register_fake(qualified, lib=library)(fake_block)
    torch.library.register_autograd(qualified, _block_backward, lib=library)
    # Kept alive with the cache: dropping the Library object would unregister the operators.
    ops.library = library  # type: ignore[attr-defined]
    namespace = getattr(torch.ops, NAMESPACE)
    return namespace
