"""Capture: turn the user's model into a ``torch.export.ExportedProgram``.

Strategies are tried in order and the first that succeeds wins: an ``ExportedProgram`` is used as
given; otherwise ``torch.export.export(strict=False)`` (which traces real Python and handles most
models), then ``strict=True`` (TorchDynamo, which sometimes copes with code the non-strict tracer
cannot). Every failure is kept so the final error, and the report, can show all of them.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import os
import traceback
from typing import Any, Callable, Mapping

import torch

from torch_onnx_fx.errors import CaptureError, UnsupportedArgumentError

__all__ = ["CaptureResult", "capture"]

logger = logging.getLogger(__name__)

_TORCH_DIR = os.path.dirname(torch.__file__)


@dataclasses.dataclass
class CaptureResult:
    """What capture hands to the next stages."""

    exported_program: torch.export.ExportedProgram
    strategy: str
    failures: list[tuple[str, BaseException]] = dataclasses.field(default_factory=list)


class _FunctionModule(torch.nn.Module):
    """Lets a plain callable go through ``torch.export``, which only accepts modules.

    ``forward`` takes the callable's own signature, so ``dynamic_shapes`` given per argument
    (or by argument name) line up as they would for the function itself.
    """

    def __init__(self, fn: Callable[..., Any]):
        super().__init__()
        self._fn = fn

        @functools.wraps(fn)
        def forward(*args: Any, **kwargs: Any) -> Any:
            return fn(*args, **kwargs)

        self.forward = forward  # type: ignore[method-assign]


def _as_module(model: Any) -> torch.nn.Module:
    if isinstance(model, (torch.jit.ScriptModule, torch.jit.ScriptFunction)):
        raise UnsupportedArgumentError(
            "TorchScript models (torch.jit.ScriptModule / ScriptFunction) are not supported: "
            "torch_onnx_fx exports through torch.export. Export the original nn.Module instead."
        )
    if isinstance(model, torch.nn.Module):
        return model
    if callable(model):
        return _FunctionModule(model)
    raise UnsupportedArgumentError(
        f"model must be a torch.nn.Module, a callable or a torch.export.ExportedProgram, "
        f"got {type(model).__name__}."
    )


def _user_frame(exc: BaseException) -> str | None:
    """Return ``file:line: code`` of the innermost frame outside torch, if there is one.

    torch.export failures surface deep inside the tracer; the line the user can act on is the
    last frame of their own code in the traceback.
    """
    frames = traceback.extract_tb(exc.__traceback__)
    candidates = [
        f
        for f in frames
        if not f.filename.startswith(_TORCH_DIR)
        and "site-packages" not in f.filename
        and not f.filename.startswith(os.path.dirname(__file__))
        and "<frozen" not in f.filename
    ]
    if not candidates:
        return None
    f = candidates[-1]
    return f"{f.filename}:{f.lineno}: {(f.line or '').strip()}"


def _first_lines(exc: BaseException, count: int = 6) -> str:
    text = f"{type(exc).__name__}: {exc}".strip()
    lines = text.splitlines()
    shown = "\n".join(lines[:count])
    if len(lines) > count:
        shown += f"\n    ... ({len(lines) - count} more lines)"
    return shown


def describe_failures(failures: list[tuple[str, BaseException]]) -> str:
    """One block per strategy: its first error lines and the user's source line if known."""
    blocks = []
    for strategy, exc in failures:
        block = f"[{strategy}] {_first_lines(exc)}"
        where = _user_frame(exc)
        if where:
            block += f"\n    at {where}"
        blocks.append(block)
    return "\n".join(blocks)


def capture(
    model: Any,
    args: tuple[Any, ...],
    kwargs: Mapping[str, Any] | None,
    dynamic_shapes: Any,
) -> CaptureResult:
    """Produce an ExportedProgram, trying each strategy in turn."""
    if isinstance(model, torch.export.ExportedProgram):
        return CaptureResult(model, "ExportedProgram")
    module = _as_module(model)
    failures: list[tuple[str, BaseException]] = []
    for strict in (False, True):
        strategy = f"torch.export(strict={strict})"
        try:
            program = torch.export.export(
                module, args, kwargs=dict(kwargs or {}), dynamic_shapes=dynamic_shapes, strict=strict
            )
        except Exception as exc:  # noqa: BLE001 - every failure is reported below
            logger.info("capture strategy %s failed: %s", strategy, exc)
            failures.append((strategy, exc))
            continue
        return CaptureResult(program, strategy, failures)
    raise CaptureError(
        "torch.export could not capture the model with any strategy.\n"
        + describe_failures(failures)
        + "\nFix the reported line so torch.export can trace it (see "
        "https://pytorch.org/docs/stable/export.html), or pass a torch.export.ExportedProgram.",
        failures,
    ) from failures[-1][1]
