"""Verification: compare an exported ONNX model with the PyTorch program it came from.

``verify_onnx_program`` is a drop-in for ``torch.onnx.verification.verify_onnx_program``: one
:class:`VerificationInfo` per output (and, with ``compare_intermediates=True``, per intermediate
value the ONNX model still has under its FX node's name). Intermediates are computed by running
the ExportedProgram's FX graph node by node and the ONNX model with those values exposed as
outputs, so :func:`first_divergence` can name the first node whose result drifts — the way to
find a numeric bug in a graph of thousands of nodes.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping, Sequence

import torch

from torch_onnx_fx.dtypes import as_complex
from torch_onnx_fx.errors import UnsupportedArgumentError, VerificationError
from torch_onnx_fx.registry import target_name
from torch_onnx_fx.signature import ProgramSignature
from torch_onnx_fx.translate import metadata

__all__ = ["VerificationInfo", "verify_onnx_program", "verify", "first_divergence", "tolerance_for", "check_output_count"]

# (rtol, atol) by dtype: float16/bfloat16 keep ~3 and ~2 significant digits.
_TOLERANCES = {
    torch.float16: (1e-2, 1e-3),
    torch.bfloat16: (5e-2, 1e-2),
    torch.float32: (1e-4, 1e-5),
    torch.float64: (1e-7, 1e-7),
    torch.complex64: (1e-4, 1e-5),
    torch.complex128: (1e-7, 1e-7),
}


def tolerance_for(dtype: torch.dtype) -> tuple[float, float]:
    """(rtol, atol) used to judge a value of ``dtype``; exact for integers and bool."""
    return _TOLERANCES.get(dtype, (0.0, 0.0))


@dataclasses.dataclass(frozen=True)
class VerificationInfo:
    """How one value of the ONNX model compares with PyTorch.

    The first seven fields are those of ``torch.onnx.verification.VerificationInfo``; the rest
    say where the value comes from and whether it is within :func:`tolerance_for` its dtype.
    """

    name: str
    max_abs_diff: float
    max_rel_diff: float
    abs_diff_hist: tuple[torch.Tensor, torch.Tensor]
    rel_diff_hist: tuple[torch.Tensor, torch.Tensor]
    expected_dtype: torch.dtype
    actual_dtype: torch.dtype
    passed: bool = True
    onnx_op: str | None = None
    fx_target: str | None = None
    source: str | None = None

    @classmethod
    def from_tensors(
        cls, name: str, expected: Any, actual: Any, *, rtol: float | None = None, atol: float | None = None, **where: Any
    ) -> VerificationInfo:
        expected_t = torch.as_tensor(expected).detach().cpu()
        actual_t = torch.as_tensor(actual).detach().cpu()
        if expected_t.is_complex():
            expected_t = torch.view_as_real(expected_t)
        if actual_t.is_complex():
            actual_t = torch.view_as_real(actual_t)
        same_shape = tuple(expected_t.shape) == tuple(actual_t.shape)
        if same_shape and expected_t.numel():
            abs_diff = (expected_t.double() - actual_t.double()).abs()
            rel_diff = abs_diff / expected_t.double().abs().clamp_min(1e-12)
            # NaNs in the same places are equal for our purpose.
            both_nan = expected_t.double().isnan() & actual_t.double().isnan()
            abs_diff = abs_diff.masked_fill(both_nan, 0.0)
            rel_diff = rel_diff.masked_fill(both_nan, 0.0)
            max_abs, max_rel = float(abs_diff.max()), float(rel_diff.max())
        else:
            abs_diff = rel_diff = torch.zeros(1, dtype=torch.float64)
            max_abs = max_rel = 0.0 if same_shape else float("inf")
        default_rtol, default_atol = tolerance_for(torch.as_tensor(expected).dtype)
        rtol = default_rtol if rtol is None else rtol
        atol = default_atol if atol is None else atol
        passed = (
            same_shape
            and torch.as_tensor(expected).dtype == torch.as_tensor(actual).dtype
            and bool(torch.allclose(actual_t.double(), expected_t.double(), rtol=rtol, atol=atol, equal_nan=True))
        )
        return cls(
            name=name,
            max_abs_diff=max_abs,
            max_rel_diff=max_rel,
            abs_diff_hist=_histogram(abs_diff),
            rel_diff_hist=_histogram(rel_diff),
            expected_dtype=torch.as_tensor(expected).dtype,
            actual_dtype=torch.as_tensor(actual).dtype,
            passed=passed,
            **where,
        )


def _histogram(diff: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    finite = diff[torch.isfinite(diff)].float()
    edges = torch.tensor([0.0, 1e-10, 1e-8, 1e-6, 1e-4, 1e-2, 1e0, 1e2, 1e4, 1e6])
    if not finite.numel():
        return torch.zeros(len(edges) - 1), edges
    counts = torch.histogram(finite.clamp(max=float(edges[-1])), bins=edges).hist
    return counts, edges


def _fx_values(program: torch.export.ExportedProgram, args: Sequence[Any], kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """Every FX node's value for the given inputs, by node name."""
    by_node = ProgramSignature.of(program).placeholder_values(program, args, kwargs)
    placeholders = [by_node[n] for n in program.graph.nodes if n.op == "placeholder"]

    values: dict[str, Any] = {}

    class Recorder(torch.fx.Interpreter):
        def run_node(self, node: torch.fx.Node) -> Any:
            result = super().run_node(node)
            values[node.name] = result
            return result

    with torch.no_grad():
        Recorder(program.graph_module).run(*placeholders)
    return values


def verify_onnx_program(
    onnx_program: Any,
    args: Sequence[Any] | None = None,
    kwargs: Mapping[str, Any] | None = None,
    compare_intermediates: bool = False,
) -> list[VerificationInfo]:
    """Compare ``onnx_program`` with its ExportedProgram on ``args``/``kwargs``.

    Without arguments the ExportedProgram's example inputs are used. Outputs are named as in the
    ONNX model; intermediates (in FX order, outputs excluded) carry the ONNX operator producing
    them, the FX target and the user's source line.
    """
    return verify(onnx_program, args, kwargs, compare_intermediates=compare_intermediates)


def verify(
    onnx_program: Any,
    args: Sequence[Any] | None = None,
    kwargs: Mapping[str, Any] | None = None,
    *,
    compare_intermediates: bool = False,
    rtol: float | None = None,
    atol: float | None = None,
    backend: str = "onnxruntime",
) -> list[VerificationInfo]:
    """``verify_onnx_program`` with tolerances other than :func:`tolerance_for`'s, run on
    ``backend``: ``"onnxruntime"`` or ``"reference"`` (ONNX's reference evaluator)."""
    runners = {"onnxruntime": "__call__", "reference": "call_reference"}
    if backend not in runners:
        raise UnsupportedArgumentError(f"backend={backend!r} is not supported; use one of {sorted(runners)}.")
    program = onnx_program.exported_program
    if program is None:
        raise UnsupportedArgumentError("verify_onnx_program needs an ONNXProgram that keeps its ExportedProgram.")
    if args is None and kwargs is None:
        example = getattr(program, "example_inputs", None)
        if example is None:
            raise UnsupportedArgumentError("No example inputs are stored in the ExportedProgram; pass args.")
        args, kwargs = example
    args, kwargs = tuple(args or ()), dict(kwargs or {})
    fx_values = _fx_values(program, args, kwargs)
    entries = onnx_program.output_entries
    expected_outputs = [fx_values[e.arg.name] if isinstance(e.arg, torch.fx.Node) else e.arg for e in entries]
    actual_outputs = list(getattr(onnx_program, runners[backend])(*args, **kwargs))
    graph = onnx_program.model.graph
    check_output_count(len(expected_outputs), len(actual_outputs), [v.name for v in graph.outputs])
    infos = [
        VerificationInfo.from_tensors(value.name, expected, actual, rtol=rtol, atol=atol)
        for value, expected, actual in zip(graph.outputs, expected_outputs, actual_outputs, strict=True)
    ]
    if compare_intermediates:
        infos = _intermediates(onnx_program, program, fx_values, args, kwargs, rtol, atol) + infos
    return infos


def check_output_count(expected: int, actual: int, names: Sequence[str] = ()) -> None:
    """Raise when the ONNX model returned another number of outputs than PyTorch: comparing
    the common prefix would pass a model that lost (or gained) an output."""
    if expected != actual:
        shown = f" (graph outputs: {list(names)})" if names else ""
        raise VerificationError(
            f"The ONNX model returned {actual} output(s) but PyTorch returned {expected}{shown}. "
            "Outputs are compared one to one, in order; None outputs are left out on both sides."
        )


def _intermediates(
    onnx_program: Any,
    program: torch.export.ExportedProgram,
    fx_values: dict[str, Any],
    args: Sequence[Any],
    kwargs: Mapping[str, Any],
    rtol: float | None,
    atol: float | None,
) -> list[VerificationInfo]:
    values = {out.name: out for node in onnx_program.model.graph for out in node.outputs}
    output_names = {v.name for v in onnx_program.model.graph.outputs}
    candidates = [
        node
        for node in program.graph.nodes
        if node.op == "call_function"
        and node.name in values
        and node.name not in output_names
        and isinstance(fx_values.get(node.name), torch.Tensor)
    ]
    if not candidates:
        return []
    actual = onnx_program.compute_values([n.name for n in candidates], args, kwargs)
    infos = []
    for node, value in zip(candidates, actual):
        expected = fx_values[node.name]
        if expected.is_complex() and not value.is_complex():
            value = as_complex(value)
        offset = values[node.name].metadata_props.get(metadata.INTEGER_OFFSET_KEY)
        if offset is not None:
            # Stored shifted into another integer type (an int8 activation as uint8).
            value = (value.to(torch.int32) - int(offset)).to(expected.dtype)
        infos.append(
            VerificationInfo.from_tensors(
                node.name, expected, value, rtol=rtol, atol=atol,
                onnx_op=values[node.name].producer().op_type, fx_target=target_name(node.target), source=metadata.source_line(node),
            )
        )
    return infos


def first_divergence(infos: Sequence[VerificationInfo]) -> VerificationInfo | None:
    """The first value (in graph order) outside its dtype's tolerance, or None."""
    return next((info for info in infos if not info.passed), None)


