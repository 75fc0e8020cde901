"""Capture: turn the user's model into a ``torch.export.ExportedProgram``.

Strategies are tried in order and the first that succeeds wins: an ``ExportedProgram`` is used as
given; otherwise ``torch.export.export(strict=False)`` (which traces real Python and handles most
models), then ``strict=True`` (TorchDynamo, which sometimes copes with code the non-strict tracer
cannot), and last, for dynamic shapes, non-strict with sizes traced from their examples
(``_BACKED``: a size made of two dims that is 1 where it broadcasts). Every failure is kept so the
final error, and the report, can show all of them.

Capture is as lenient as torch.onnx's, so a model that exports there exports here:

* sizes are *backed-size-oblivious*: a dimension the user marked dynamic stays symbolic even when
  the example has size 0 or 1 there (plain torch.export would specialise it);
* shape conditions that can be deferred become run-time asserts in the graph instead of guards
  that fail the capture;
* when torch.export rejects the user's ``Dim`` ranges and suggests fixes (a narrower range, a
  relation between dims, a constant), the fixes are applied and capture is tried once more; what
  was refined is warned about and kept in :attr:`CaptureResult.refinements`;
* keywords a ``**kwargs`` parameter collects are spelled out in ``forward``'s signature while
  tracing (:mod:`torch_onnx_fx.capture.keywords`), so dynamic shapes can name them.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import logging
import traceback
import warnings
from typing import Any, Callable, Collection, Iterator, Mapping

import torch
import torch.fx.experimental._config as fx_config

from torch_onnx_fx.capture import eager_quantization
from torch_onnx_fx.capture import keywords
from torch_onnx_fx.capture import library_patches
from torch_onnx_fx.capture import model_frames
from torch_onnx_fx.capture import recurrent_shapes
from torch_onnx_fx.capture import specializations
from torch_onnx_fx.capture import symbolic_math
from torch_onnx_fx.errors import CaptureError, UnsupportedArgumentError

__all__ = ["CaptureResult", "capture", "size_oblivious", "STRATEGY_NAMES"]

logger = logging.getLogger(__name__)


@dataclasses.dataclass
class CaptureResult:
    """What capture hands to the next stages."""

    exported_program: torch.export.ExportedProgram
    strategy: str
    failures: list[tuple[str, BaseException]] = dataclasses.field(default_factory=list)
    # The suggested fixes torch.export made to the user's dynamic shapes and that were applied
    # (the text after "Suggested fixes:"), empty when the shapes were taken as given.
    refinements: str = ""
    # Repeated blocks copied from one traced instance instead of traced (repeated_blocks).
    blocks_replayed: int = 0

    @property
    def traced_from_examples(self) -> bool:
        """Whether the last strategy made the program (_BACKED): its dims merged through sizes
        derived from the examples must be checked as one (size_conditions)."""
        return self.strategy == _BACKED

    @property
    def strategy_name(self) -> str | None:
        """torch.onnx's name for the strategy (``TorchExportNonStrictStrategy``…), None for a
        given ExportedProgram, as ``torch.onnx.ONNXProgram._capture_strategy`` reports it."""
        return STRATEGY_NAMES.get(self.strategy)


# The last strategy. Size-oblivious tracing (the default, as torch.onnx's) never reads a dynamic
# size's example value, so it cannot tell that a size made of two dims is 1 where it broadcasts:
# diffusers' LTX-Video views its timestep embedding by the image batch, (timestep batch) //
# (image batch) rows, and adds it to every image token. Traced from the examples, torch.export
# finds the two batches equal (the view needs a multiple, the broadcast a quotient of 1) and gives
# them one dim, and the graph computes with that (one row). Such an equality is no broadcast the
# graph could undo, so every dim of one symbol is checked as one size (size_conditions, asked by
# CaptureResult.traced_from_examples): program(...) refuses an image batch of 1 beside 3
# timesteps, which eager accepts (3 rows for 3 tokens). A dim marked dynamic whose example is 0
# or 1 would be specialized this way: torch.export refuses that for ``Dim.DYNAMIC`` (what a named
# dim becomes) and for ``Dim`` objects, so it cannot pass unnoticed.
_BACKED = "torch.export(strict=False) with sizes traced from their examples"

# Our strategy labels and the class names torch.onnx reports for the same strategy.
STRATEGY_NAMES = {
    "torch.export(strict=False)": "TorchExportNonStrictStrategy",
    "torch.export(strict=True)": "TorchExportStrictStrategy",
    _BACKED: "TorchExportNonStrictStrategy",
}


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
    """Where in the model's code ``exc`` was raised (see capture.model_frames), if anywhere."""
    return model_frames.describe_frames(traceback.extract_tb(exc.__traceback__))


def _first_lines(exc: BaseException, count: int = 6) -> str:
    text = f"{type(exc).__name__}: {exc}".strip()
    lines = text.splitlines()
    shown = "\n".join(lines[:count])
    if len(lines) > count:
        shown += f"\n    ... ({len(lines) - count} more lines)"
    return shown


def describe_failures(failures: list[tuple[str, BaseException]]) -> str:
    """One block per strategy: its first error lines and the user's source line if known."""
    blocks: list[str] = []
    seen: dict[str, str] = {}
    for strategy, exc in failures:
        block = _first_lines(exc)
        where = _user_frame(exc)
        if where:
            block += f"\n    at {where}"
        # Both tracers often stop at the same thing: say it once.
        blocks.append(f"[{strategy}] " + (f"the same error as {seen[block]}" if block in seen else block))
        seen.setdefault(block, strategy)
    return "\n".join(blocks)


def _advice(failures: list[tuple[str, BaseException]]) -> str:
    """What to do, in the user's terms: a line of theirs to fix, a ``dynamic_shapes`` that does
    not mirror the inputs, or else a check of the inputs themselves."""
    texts = [str(exc) for _, exc in failures]
    if texts and all("dynamic_shapes" in text for text in texts):
        return (
            "Make dynamic_shapes mirror the inputs: one entry per argument of forward, the same dict "
            "keys, list lengths and nesting as each argument, a {dim: name} (or None) per tensor "
            "and None for a non-tensor. See docs/dynamic_shapes.md."
        )
    if any(_user_frame(exc) for _, exc in failures):
        return (
            "Fix the reported line so torch.export can trace it (see https://pytorch.org/docs/stable/export.html), "
            "or pass a torch.export.ExportedProgram."
        )
    return (
        "No line of the model's own code was reported: check that the model runs in eager with these "
        "inputs (their shapes and dtypes) and, if it does, pass a torch.export.ExportedProgram you "
        "captured yourself (torch.export.export, or draft_export for a report)."
    )


@contextlib.contextmanager
def size_oblivious() -> Iterator[None]:
    """Keep dims of size 0/1 symbolic while tracing (capture and decomposition alike)."""
    with fx_config.patch(backed_size_oblivious=True):
        yield


def _suggested_fixes(exc: BaseException) -> str | None:
    """The "Suggested fixes:" block of a constraint violation, if torch.export made one."""
    text = getattr(exc, "msg", None) or str(exc)
    if "Suggested fixes:" not in text:
        return None
    return text.split("Suggested fixes:", 1)[1].strip()


def _export_once(
    module: torch.nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any], dynamic_shapes: Any, strict: bool,
    oblivious: bool = True,
) -> torch.export.ExportedProgram:
    # Known library functions that branch on data-dependent sizes are replaced while tracing
    # (torch_onnx_fx.capture.library_patches), then restored.
    # Recurrent layers' shapes computed without their time-step loop (capture.recurrent_shapes),
    # which would fix the sequence length. NumPy's sqrt of a symbolic size (capture.symbolic_math).
    with (
        size_oblivious() if oblivious else contextlib.nullcontext(), library_patches.applied(),
        recurrent_shapes.symbolic_lengths(), symbolic_math.numpy_methods(),
    ):
        return torch.export.export(
            module,
            args,
            kwargs=kwargs,
            dynamic_shapes=dynamic_shapes,
            strict=strict,
            prefer_deferred_runtime_asserts_over_guards=True,
        )


def _export_refining(
    module: torch.nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any], dynamic_shapes: Any, strict: bool,
    oblivious: bool = True,
) -> tuple[torch.export.ExportedProgram, str]:
    """Export; if the dynamic shapes conflict with the model and torch.export says how to fix
    them, apply its fixes and export again. Returns the program and the fixes applied."""
    try:
        return _export_once(module, args, kwargs, dynamic_shapes, strict, oblivious), ""
    except torch._dynamo.exc.UserError as exc:
        fixes = _suggested_fixes(exc) if dynamic_shapes is not None else None
        if not fixes:
            raise
        try:
            refined = torch.export.dynamic_shapes.refine_dynamic_shapes_from_suggested_fixes(exc.msg, dynamic_shapes)
        except Exception:  # noqa: BLE001 - fixes we cannot apply: the original error stands
            raise exc from None
        program = _export_once(module, args, kwargs, refined, strict, oblivious)
        return program, fixes


# Loggers through which torch reports, at ERROR, failures it then raises: a fake-tensor kernel's
# whole traceback (40 lines for a wrong input shape) and export's own notes. The raised error
# reaches the user in the CaptureError; the logs only bury it.
_NOISY_LOGGERS = ("torch._subclasses.fake_tensor", "torch.export._trace", "torch._dynamo.convert_frame")


@contextlib.contextmanager
def _torch_logs_quieted(quiet: bool) -> Iterator[None]:
    if not quiet:
        yield
        return
    loggers = [logging.getLogger(name) for name in _NOISY_LOGGERS]
    levels = [each.level for each in loggers]
    for each in loggers:
        each.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        for each, level in zip(loggers, levels):
            each.setLevel(level)


def capture(
    model: Any,
    args: tuple[Any, ...],
    kwargs: Mapping[str, Any] | None,
    dynamic_shapes: Any,
    quiet: bool = True,
    blocks: bool | Collection[str] = False,
) -> CaptureResult:
    """Produce an ExportedProgram, trying each strategy in turn. ``quiet`` keeps torch's error
    logs of failures it raises off the console (``verbose=True`` shows them). ``blocks`` (what
    ``export_modules_as_functions`` chose) traces each distinct repeated block once."""
    if isinstance(model, torch.export.ExportedProgram):
        return CaptureResult(model, "ExportedProgram")
    with _torch_logs_quieted(quiet):
        return _capture_model(model, args, kwargs, dynamic_shapes, blocks)


def _capture_model(
    model: Any, args: tuple[Any, ...], kwargs: Mapping[str, Any] | None, dynamic_shapes: Any, blocks: bool | Collection[str]
) -> CaptureResult:
    module = _as_module(model)
    # Eager-mode quantized modules (packed weights torch.export cannot trace) are captured as the
    # QuantizeLinear/DequantizeLinear computation they stand for.
    # The hint is read before the swap, which hides the quantized modules it names.
    hint = eager_quantization.failure_hint(module)
    with eager_quantization.as_qdq(module) if hint is not None else contextlib.nullcontext():
        return _capture_module(module, args, kwargs, dynamic_shapes, hint, blocks if hint is None else False)


def _export_blocks_once(
    module: torch.nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any], dynamic_shapes: Any, blocks: bool | Collection[str]
) -> tuple[torch.export.ExportedProgram, str, int]:
    """Non-strict export tracing each distinct repeated block once (repeated_blocks), then
    replayed (block_replay); where that cannot give the full trace's program, a full trace."""
    from torch_onnx_fx.capture.block_replay import ReplayRefused, replay_blocks
    from torch_onnx_fx.capture.repeated_blocks import RepeatedBlocks

    recorder = RepeatedBlocks(module, blocks)
    if recorder.instances:
        try:
            with recorder.active():
                program, fixes = _export_refining(module, args, kwargs, dynamic_shapes, False)
            return program, fixes, replay_blocks(program, recorder)
        except ReplayRefused as exc:
            logger.info("repeated blocks traced in full: %s", exc)
        except Exception as exc:  # noqa: BLE001 - the full trace below decides what the user sees
            logger.info("tracing repeated blocks once failed, tracing in full: %s", exc)
    program, fixes = _export_refining(module, args, kwargs, dynamic_shapes, False)
    return program, fixes, 0


def _capture_module(
    module: torch.nn.Module, args: tuple[Any, ...], kwargs: Mapping[str, Any] | None, dynamic_shapes: Any,
    hint: tuple[str, str] | None, blocks: bool | Collection[str] = False,
) -> CaptureResult:
    failures: list[tuple[str, BaseException]] = []
    # Eager-quantized models only non-strict: the QDQ capture follows tensors and function calls
    # in Python (eager_quantization), which TorchDynamo's bytecode tracing would bypass, skipping
    # the rounding it adds and its refusals.
    attempts = [(False, True)] + ([(True, True)] if hint is None else [])
    # Last, and only where sizes are symbolic: non-strict with sizes reasoned about from their
    # examples, as plain torch.export does (see _BACKED).
    attempts += [(False, False)] if dynamic_shapes is not None else []
    for strict, oblivious in attempts:
        strategy = f"torch.export(strict={strict})" if oblivious else _BACKED
        try:
            # Only dynamic shapes need the keywords spelled out; a static capture takes the call as is.
            with keywords.spelled_out(module, kwargs or {}) if dynamic_shapes is not None else contextlib.nullcontext():
                if blocks and not strict and oblivious:
                    program, fixes, replayed = _export_blocks_once(module, args, dict(kwargs or {}), dynamic_shapes, blocks)
                else:
                    program, fixes = _export_refining(module, args, dict(kwargs or {}), dynamic_shapes, strict, oblivious)
                    replayed = 0
        except Exception as exc:  # noqa: BLE001 - every failure is reported below
            logger.info("capture strategy %s failed: %s", strategy, exc)
            failures.append((strategy, exc))
            continue
        if fixes:
            warnings.warn(
                "The dynamic shapes conflicted with the model; torch.export's suggested fixes were "
                f"applied and the model exported with them:\n{fixes}\nPass the refined dims yourself "
                "to silence this warning.",
                UserWarning,
                stacklevel=4,
            )
        return CaptureResult(program, strategy, failures, refinements=fixes, blocks_replayed=replayed)
    located = "" if hint is not None else _located_specializations(module, args, kwargs, dynamic_shapes, failures)
    reason, advice = hint or ("", _SPECIALIZED_ADVICE if located else _advice(failures))
    raise CaptureError(
        f"torch.export could not capture the model with any strategy{reason}.\n" + describe_failures(failures) + "\n"
        + (located + "\n" if located else "") + advice,
        failures,
    ) from failures[-1][1]


_SPECIALIZED_ADVICE = (
    "Keep those sizes symbolic on the reported lines (tensor operations instead of a Python list, "
    "loop or int() of the size), or export the dims as static (None in dynamic_shapes)."
)


def _located_specializations(
    module: torch.nn.Module, args: tuple[Any, ...], kwargs: Mapping[str, Any] | None, dynamic_shapes: Any,
    failures: list[tuple[str, BaseException]],
) -> str:
    """For a capture that failed because tracing made a dynamic dim a constant: the model's lines
    that did it, found by tracing once more with torch's record of specializations on."""
    if dynamic_shapes is None or not any(specializations.is_specialization_failure(exc) for _, exc in failures):
        return ""
    with specializations.recorded() as records:
        try:
            with keywords.spelled_out(module, kwargs or {}):
                _export_once(module, args, dict(kwargs or {}), dynamic_shapes, False)
        except Exception as exc:  # noqa: BLE001 - it fails as before; only the records are wanted
            logger.debug("tracing again to locate specializations: %s", exc)
    return specializations.describe(records)
