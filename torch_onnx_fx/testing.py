"""Testing helpers for users' own test suites."""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from torch_onnx_fx.verification import VerificationInfo, verify

__all__ = ["assert_onnx_program"]


def assert_onnx_program(
    program: Any,
    *,
    rtol: float | None = None,
    atol: float | None = None,
    args: Sequence[Any] | None = None,
    kwargs: Mapping[str, Any] | None = None,
    compare_intermediates: bool = False,
) -> list[VerificationInfo]:
    """Assert that the ONNX model's outputs match its ExportedProgram's.

    Like ``torch.onnx.testing.assert_onnx_program``: inputs default to the program's example
    inputs; tolerances default per dtype. With ``compare_intermediates``, a failure names the
    first diverging node and its source line.
    """
    infos = verify(program, args, kwargs, compare_intermediates=compare_intermediates, rtol=rtol, atol=atol)
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
