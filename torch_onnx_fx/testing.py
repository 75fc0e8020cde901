"""Testing helpers for users' own test suites."""

from __future__ import annotations

from typing import Any, Literal, Mapping, Sequence

from torch_onnx_fx.capture.strategies import STRATEGY_NAMES
from torch_onnx_fx.errors import UnsupportedArgumentError
from torch_onnx_fx.diagnostics.verification import VerificationInfo, verify

__all__ = ["assert_onnx_program"]

_DEFAULT_STRATEGY = "TorchExportNonStrictStrategy"


def _check_strategy(program: Any, strategy: str) -> None:
    """Accept torch.onnx's strategy class names and our own labels alike. A program exported from
    an ``ExportedProgram`` was captured by the caller, in a way nobody recorded: nothing to check
    (torch 2.13's torch.onnx fails every strategy there; later versions accept it)."""
    used = getattr(program, "capture_strategy", None)
    if used == "ExportedProgram":
        return
    names = {used, STRATEGY_NAMES.get(used or "")} - {None}
    if strategy not in names:
        shown = STRATEGY_NAMES.get(used or "", used)
        raise AssertionError(
            f"Expected the program to be captured with strategy {strategy!r}, but it was captured "
            f"with {shown!r}" + (f" ({used})" if shown != used else "") + "."
        )


def assert_onnx_program(
    program: Any,
    *,
    rtol: float | None = None,
    atol: float | None = None,
    args: Sequence[Any] | None = None,
    kwargs: Mapping[str, Any] | None = None,
    strategy: str | None = _DEFAULT_STRATEGY,
    backend: Literal["onnxruntime", "reference"] = "onnxruntime",
    compare_intermediates: bool = False,
) -> list[VerificationInfo]:
    """Assert that the ONNX model's outputs match its ExportedProgram's.

    Takes what ``torch.onnx.testing.assert_onnx_program`` takes, with the same meaning: inputs
    default to the program's example inputs; tolerances default per dtype; ``strategy`` asserts
    how the program was captured (torch.onnx's names such as ``"TorchExportNonStrictStrategy"`` /
    ``"TorchExportStrictStrategy"``, or ours such as ``"torch.export(strict=False)"``; None skips
    the check); ``backend`` runs the model in ONNX Runtime or ONNX's reference evaluator. Every
    output is compared, and a different number of outputs fails. With ``compare_intermediates``,
    a failure names the first diverging node and its source line.
    """
    if strategy is not None:
        if not isinstance(strategy, str):
            raise UnsupportedArgumentError(f"strategy must be a strategy name or None, got {strategy!r}.")
        _check_strategy(program, strategy)
    infos = verify(
        program, args, kwargs, compare_intermediates=compare_intermediates, rtol=rtol, atol=atol, backend=backend
    )
    failures = [info for info in infos if not info.passed]
    if failures:
        first = failures[0]
        where = f" ({first.onnx_op} from {first.fx_target} at {first.source})" if first.onnx_op else ""
        raise AssertionError(
            f"{len(failures)} value(s) differ from PyTorch. First: {first.name}{where}: max abs diff "
            f"{first.max_abs_diff:.3g}, max rel diff {first.max_rel_diff:.3g}, dtype {first.actual_dtype} "
            f"(expected {first.expected_dtype})."
        )
    return infos
