"""Operator sweep: every OpInfo of PyTorch's test database through both ONNX exporters.

For each OpInfo of ``torch.testing._internal.common_methods_invocations.op_db`` and its first
``--samples`` sample inputs of one dtype, the call ``op(sample.input, *sample.args, **sample.kwargs)``
is wrapped in a tiny module whose inputs are the sample's tensors (wherever they sit: inside lists
of ``args`` too) and whose other arguments are baked in. The module is captured once with
``torch.export.export(strict=False)`` and that same ExportedProgram is exported by
``torch_onnx_fx.export`` and by ``torch.onnx.export(dynamo=True)``; both models run in ONNX Runtime
and are compared with eager PyTorch (dtype, shape, then values; see ``tolerance``).

Every op runs in a worker process forked from a server that has already imported torch and the
exporters, with a timeout, so a crash or a hang costs one op, not the sweep. Records are written
per (op, sample, exporter) to a JSON-lines file (first line: the run's settings and versions), and
a Markdown page is generated from it.

Regenerate the page (about an hour on two shared cores; the default ``--samples 3`` takes half as
long again)::

    python tools/sweeps/opsweep.py --jobs 2 --samples 2 --json tools/results/opsweep_float32.jsonl --out docs/coverage.md

``--render-only`` rewrites the page from the JSON-lines file; ``--quick`` runs the ~40 common ops of
``QUICK_OPS`` with one sample (``tests/tooling/test_opsweep.py`` runs them in process with ``sweep_op``).
Writing the page keeps the model-corpus section ``tools/sweeps/modelsweep.py`` appends to it; the charts
the page shows are drawn by ``tools/pages/plots.py`` from the same JSON-lines file.
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import itertools
import json
import logging
import multiprocessing
import os
import re
import shlex
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Sequence

REPO = Path(__file__).resolve().parents[2]
for _path in (REPO, REPO / "tests"):
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

import onnx  # noqa: E402
import torch  # noqa: E402
import torch.utils._pytree as pytree  # noqa: E402
from helpers import assert_close_outputs, flat_tensors  # noqa: E402

from tools._common import (  # noqa: E402
    OPSWEEP_CAUSES_PNG, OPSWEEP_STATUS_PNG, PLOTS_COMMAND, describe_machine, describe_versions, image, machine_info,
    read_entries,
)
from tools.benchmarks.bench_worker import EXPORTERS, OURS, THEIRS  # noqa: E402

__all__ = [
    "Record", "EXPORTERS", "QUICK_OPS", "STATUSES", "DTYPES", "op_infos", "skip_reason", "sweep_op", "compare",
    "run_sweep", "canonical_paths", "regeneration_command", "cause_key", "missing_operators", "in_page_order", "status_counts", "failures_of", "failures_by_cause",
    "render_markdown", "read_results", "main",
]

logger = logging.getLogger(__name__)

DEFAULT_SAMPLES = 3

# Per (op, sample, exporter). The first four are results on a captured sample; capture_failed,
# eager_failed and random (the program draws random numbers: dropout in training mode) are
# properties of the sample (counted apart); skipped covers a whole op.
STATUSES = ("pass", "mismatch", "export_failed", "invalid_model", "ort_failed", "timeout", "crashed")
APART = ("capture_failed", "eager_failed", "random", "skipped")

# Every dtype OpInfo samples on CPU.
DTYPES = {
    "float32": torch.float32,
    "float64": torch.float64,
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
    "int64": torch.int64,
    "int32": torch.int32,
    "int16": torch.int16,
    "int8": torch.int8,
    "uint8": torch.uint8,
    "bool": torch.bool,
    "complex64": torch.complex64,
    "complex128": torch.complex128,
}

# (rtol, atol) by the dtype of each eager output; integer and bool outputs are compared exactly.
_TOLERANCES = {
    torch.float16: (1e-2, 1e-3),
    torch.bfloat16: (5e-2, 1e-2),
    torch.complex32: (1e-2, 1e-3),
}
_DEFAULT_FLOAT_TOLERANCE = (1e-3, 1e-5)

# OpInfo names whose results are not determined by their inputs: random draws or uninitialised
# memory. Comparing them with eager would only measure chance.
_NONDETERMINISTIC: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"^(rand|randn|randint)(_like)?$"), "random: draws random numbers"),
    (re.compile(r"^(bernoulli|multinomial|uniform|cauchy|exponential|geometric|log_normal|normal)(\.|$)"),
     "random: draws random numbers"),
    (re.compile(r"dropout(?!_backward)"), "random: dropout mask"),
    (re.compile(r"rrelu|fractional_max_pool|(svd|pca)_lowrank"), "random: draws random numbers"),
    (re.compile(r"^(new_)?empty"), "nondeterministic: uninitialised memory"),
)

# Common operators of real models, one sample each: the sweep's smoke test.
QUICK_OPS = (
    "add", "sub", "mul", "div.no_rounding_mode", "pow", "neg", "abs", "exp", "log", "sqrt", "rsqrt",
    "sigmoid", "tanh", "where", "clamp", "matmul", "mm", "bmm", "nn.functional.linear",
    "nn.functional.conv2d", "nn.functional.relu", "nn.functional.gelu", "nn.functional.silu",
    "softmax", "log_softmax", "nn.functional.layer_norm", "nn.functional.embedding",
    "nn.functional.max_pool2d", "nn.functional.avg_pool2d", "sum", "mean", "amax", "cumsum", "cat",
    "stack", "reshape", "transpose", "permute", "unsqueeze", "squeeze", "expand", "index_select",
    "gather",
    # Families torch_onnx_fx translates beyond torchlib, one each, so CI catches their regressions.
    "linalg.solve", "linalg.svdvals", "index_reduce.amax", "bucketize", "diagonal_scatter",
    "nn.functional.unfold", "squeeze.multiple", "nn.functional.pad.replicate_negative", "fft.fftn",
    "masked.var", "histogram", "nanmedian", "amin", "linalg.inv", "lgamma", "special.i0e",
    "special.chebyshev_polynomial_t", "nn.functional.pad.circular",
)


@dataclasses.dataclass
class Record:
    """One exporter on one sample of one op; ``sample`` is None for records about the whole op."""

    op: str
    sample: int | None
    exporter: str
    status: str
    inputs: str | None = None
    error: str | None = None
    cause: str | None = None
    seconds: float | None = None


# -- one op, in process ----------------------------------------------------------------------------


def op_key(opinfo: Any) -> str:
    return f"{opinfo.name}.{opinfo.variant_test_name}" if opinfo.variant_test_name else opinfo.name


def op_infos() -> dict[str, Any]:
    """OpInfos by ``name[.variant]``, in op_db's order."""
    from torch.testing._internal.common_methods_invocations import op_db

    return {op_key(opinfo): opinfo for opinfo in op_db}


def skip_reason(opinfo: Any, dtype: torch.dtype) -> str | None:
    key = op_key(opinfo)
    for pattern, reason in _NONDETERMINISTIC:
        if pattern.search(key):
            return reason
    if dtype not in opinfo.supported_dtypes("cpu"):
        return f"no {str(dtype).removeprefix('torch.')} samples on CPU"
    return None


def tolerance(dtype: torch.dtype) -> tuple[float, float]:
    if dtype.is_floating_point or dtype.is_complex:
        return _TOLERANCES.get(dtype, _DEFAULT_FLOAT_TOLERANCE)
    return 0.0, 0.0


_ORT_SOURCE = re.compile(r"/onnxruntime_src/\S+:\d+ ")


def _without_ort_location(text: str) -> str:
    """Drop the ``file.cc:123 Status ns::Function(const Arg&, ...)`` ONNX Runtime puts before its message."""
    found = _ORT_SOURCE.search(text)
    if found is None:
        return text
    depth = 0
    for i in range(found.end(), len(text)):
        if text[i] == "(":
            depth += 1
        elif text[i] == ")":
            depth -= 1
            if depth == 0:
                return text[: found.start()] + text[i + 1 :].lstrip()
    return text


def _first_line(text: str) -> str:
    text = re.sub(r"\x1b\[[0-9;]*m", "", text)  # torch.onnx colours its messages
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return _without_ort_location(lines[0])[:400] if lines else ""


def describe_exception(exc: BaseException) -> tuple[str, str | None]:
    """``Type: first line`` of the exception, and of its innermost cause when it wraps one."""
    top = f"{type(exc).__name__}: {_first_line(str(exc))}"
    root, seen = exc, {id(exc)}
    while root.__cause__ is not None or (root.__context__ is not None and not root.__suppress_context__):
        root = root.__cause__ or root.__context__  # type: ignore[assignment]
        if id(root) in seen:
            break
        seen.add(id(root))
    return top, (f"{type(root).__name__}: {_first_line(str(root))}" if root is not exc else None)


class OpCall(torch.nn.Module):
    """``op(input, *args, **kwargs)`` of one sample, its tensors as the module's inputs.

    The sample's (input, args, kwargs) is flattened with pytree; tensor leaves are taken from
    ``forward``'s arguments in order, every other leaf is a constant of the module.
    """

    def __init__(self, op: Callable[..., Any], sample: Any):
        super().__init__()
        leaves, self.spec = pytree.tree_flatten((sample.input, sample.args, sample.kwargs))
        self.op = op
        self.is_input = [isinstance(leaf, torch.Tensor) for leaf in leaves]
        self.constants = [None if is_input else leaf for leaf, is_input in zip(leaves, self.is_input)]
        self.example = tuple(leaf for leaf, is_input in zip(leaves, self.is_input) if is_input)

    def forward(self, *tensors: torch.Tensor) -> Any:
        given = iter(tensors)
        leaves = [next(given) if is_input else constant for is_input, constant in zip(self.is_input, self.constants)]
        sample_input, args, kwargs = pytree.tree_unflatten(leaves, self.spec)
        return self.op(sample_input, *args, **kwargs)

    def fresh_inputs(self) -> tuple[torch.Tensor, ...]:
        """Copies of the sample's tensors: an op that writes to its inputs cannot change the next run."""
        return tuple(t.detach().clone() for t in self.example)


def describe_sample(sample: Any, limit: int = 160) -> str:
    def one(value: Any) -> str:
        if isinstance(value, torch.Tensor):
            return f"{str(value.dtype).removeprefix('torch.')}{list(value.shape)}"
        if isinstance(value, (list, tuple)):
            inner = ", ".join(one(v) for v in value)
            return f"[{inner}]" if isinstance(value, list) else f"({inner})"
        return repr(value)

    parts = [one(sample.input), *(one(a) for a in sample.args), *(f"{k}={one(v)}" for k, v in sample.kwargs.items())]
    text = ", ".join(parts)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _ort_session(model: str | bytes) -> Any:
    """One thread per session: the inputs are tiny and the sweep runs ops side by side."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    options.log_severity_level = 3
    return ort.InferenceSession(model, sess_options=options, providers=["CPUExecutionProvider"])


def _export(exporter: str, program: torch.export.ExportedProgram, args: tuple[torch.Tensor, ...], opset: int | None = None) -> Any:
    """Export with ``exporter`` at ``opset`` (each exporter's default when None)."""
    if exporter == OURS:
        import torch_onnx_fx

        return torch_onnx_fx.export(program, args, verbose=False, opset_version=opset)
    if opset is None:
        return torch.onnx.export(program, args, dynamo=True, verbose=False)
    return torch.onnx.export(program, args, dynamo=True, verbose=False, opset_version=opset)


def compare(expected: Any, actual: Sequence[torch.Tensor]) -> None:
    """Raise AssertionError unless the ONNX outputs match eager in dtype, shape and value.

    Every output is compared, one to one: the counts must match.
    Complex outputs given in ONNX's real form (a trailing dim of 2) are viewed as complex first:
    torch_onnx_fx's ONNXProgram does that itself, torch.onnx's does not.
    """
    flat = flat_tensors(expected)
    if len(actual) != len(flat):
        raise AssertionError(f"{len(actual)} ONNX outputs for {len(flat)} eager outputs")
    actual = list(actual)
    for i, (exp, act) in enumerate(zip(flat, actual)):
        if exp.is_complex() and not act.is_complex() and tuple(act.shape) == (*exp.shape, 2):
            act = torch.view_as_complex(act.contiguous())
        rtol, atol = tolerance(exp.dtype)
        try:
            assert_close_outputs(exp, [act], rtol, atol)
        except AssertionError as exc:
            # assert_close spreads its verdict over lines (mismatched count, greatest differences):
            # one line keeps it whole in the record.
            where = f"output {i} of {len(flat)}: " if len(flat) > 1 else ""
            lines = [line.strip() for line in str(exc).removeprefix("output 0: ").splitlines() if line.strip()]
            raise AssertionError(where + "; ".join(lines)) from None


# Order statistics whose index output is not determined when values tie (ATen's selection
# algorithm picks one of the tied positions; torch documents no rule): opinfo name -> whether the
# values keep the reduced dim. Their indices are checked by what they select.
_TIED_INDICES = {"topk": True, "kthvalue": False, "sort": True, "argsort": True}


# Dtypes below double precision, whose results can be checked against a double computation.
_DOUBLE = {torch.float16: torch.float64, torch.bfloat16: torch.float64, torch.float32: torch.float64, torch.complex64: torch.complex128}
_BELOW_DOUBLE = tuple(_DOUBLE)


def _as_double(value: Any) -> Any:
    return value.to(_DOUBLE[value.dtype]) if isinstance(value, torch.Tensor) and value.dtype in _BELOW_DOUBLE else value


def closer_than_eager(opinfo: Any, sample: Any, compare_outputs: Callable[[Any, Sequence[torch.Tensor]], None]) -> Callable[[Any, Sequence[torch.Tensor]], None]:
    """For float16/bfloat16/float32/complex64 samples: outputs outside the tolerance of eager still pass
    where they are at least as close to the float64 result as eager is (NaN in eager's output
    where the float64 result is a number counts as farthest). ATen's CPU kernels compute some
    half-precision ops (conv_transpose3d, addbmm, grid_sample) with half-precision accumulation,
    and iterative float32 ones (matrix_exp) take another series than ONNX's composition; an
    exporter closer to the exact result than eager is more exact, not wrong."""

    def compare_half(expected: Any, actual: Sequence[torch.Tensor]) -> None:
        try:
            compare_outputs(expected, actual)
            return
        except AssertionError:
            flat_expected = flat_tensors(expected)
            if len(flat_expected) != len(actual) or not any(e.dtype in _BELOW_DOUBLE for e in flat_expected):
                raise
        leaves, spec = pytree.tree_flatten((sample.input, sample.args, sample.kwargs))
        sample_input, args, kwargs = pytree.tree_unflatten([_as_double(leaf) for leaf in leaves], spec)
        try:
            with torch.no_grad():
                reference = flat_tensors(opinfo.op(sample_input, *args, **kwargs))
        except Exception:  # noqa: BLE001 - no float64 reference: the plain verdict stands
            compare_outputs(expected, actual)
            return
        for exp, act, ref in zip(flat_expected, actual, reference):
            if exp.dtype not in _BELOW_DOUBLE or act.shape != exp.shape or act.dtype != exp.dtype:
                compare(exp, [act])  # other outputs (indices, counts) are compared as they are
                continue
            rtol, atol = tolerance(exp.dtype)
            ours = (_as_double(act) - ref).abs()
            # NaN where the float64 result is finite is eager's error too (float16 matrix_exp).
            theirs = (_as_double(exp) - ref).abs().nan_to_num(nan=float("inf"), posinf=float("inf"))
            allowed = theirs + atol + rtol * ref.abs()
            if not bool((ours <= allowed).all()):
                compare_outputs(expected, actual)  # raises with the plain comparison's message

    return compare_half


def comparison(opinfo: Any, sample: Any) -> Callable[[Any, Sequence[torch.Tensor]], None]:
    """How this sample's outputs are compared: ``compare``, except for the order statistics of
    ``_TIED_INDICES``, whose values are compared and whose indices must select those values, the
    eigenvectors of ``_EIGENVECTORS`` (up to sign/phase), and samples below float64 (see
    ``closer_than_eager``)."""
    chosen = _comparison(opinfo, sample)
    return closer_than_eager(opinfo, sample, chosen)


# Eigen decompositions whose eigenvectors (output 1) are determined only up to a sign (a unit
# phase for complex ones): each column is compared after aligning it with eager's.
_EIGENVECTORS = frozenset({"linalg.eigh"})


def _same_eigenvectors(expected: Any, actual: Sequence[torch.Tensor]) -> None:
    if len(actual) != 2:
        raise AssertionError(f"{len(actual)} ONNX outputs for 2 eager outputs")
    values, vectors = actual
    compare(expected[0], [values])
    if vectors.shape != expected[1].shape or vectors.dtype != expected[1].dtype:
        raise AssertionError(f"eigenvectors {vectors.dtype}{list(vectors.shape)}, eager {expected[1].dtype}{list(expected[1].shape)}")
    overlap = (expected[1].conj() * vectors).sum(dim=-2, keepdim=True)
    phase = overlap / overlap.abs().clamp_min(torch.finfo(values.dtype).tiny)
    compare(expected[1] * phase, [vectors])


def _comparison(opinfo: Any, sample: Any) -> Callable[[Any, Sequence[torch.Tensor]], None]:
    if opinfo.name in _EIGENVECTORS:
        return _same_eigenvectors
    keeps_dim = _TIED_INDICES.get(opinfo.name)
    source = sample.input
    if keeps_dim is None or not isinstance(source, torch.Tensor) or source.dim() == 0 or sample.kwargs.get("stable"):
        return compare
    args = list(sample.args)
    if opinfo.name in ("sort", "argsort"):
        dim = sample.kwargs.get("dim", args[0] if args and isinstance(args[0], int) else -1)
    else:
        dim = sample.kwargs.get("dim", args[1] if len(args) > 1 else -1)
    keepdim = keeps_dim or bool(sample.kwargs.get("keepdim", args[2] if len(args) > 2 else False))

    if opinfo.name == "argsort":
        def same_order(expected: Any, actual: Sequence[torch.Tensor]) -> None:
            if len(actual) != 1 or actual[0].shape != expected.shape or actual[0].dtype != expected.dtype:
                raise AssertionError(f"argsort: {[f'{a.dtype}{list(a.shape)}' for a in actual]}, eager {expected.dtype}{list(expected.shape)}")
            compare(torch.take_along_dim(source, expected, dim), [torch.take_along_dim(source, actual[0].long(), dim)])

        return same_order

    def tie_tolerant(expected: Any, actual: Sequence[torch.Tensor]) -> None:
        if len(actual) != 2:
            raise AssertionError(f"{len(actual)} ONNX outputs for 2 eager outputs")
        values, indices = actual
        compare(expected[0], [values])
        index = indices if keepdim else indices.unsqueeze(dim)
        picked = torch.take_along_dim(source, index.long(), dim)
        compare(values if keepdim else values.unsqueeze(dim), [picked])
        if indices.dtype != expected[1].dtype or indices.shape != expected[1].shape:
            raise AssertionError(f"indices {indices.dtype}{list(indices.shape)}, eager {expected[1].dtype}{list(expected[1].shape)}")

    return tie_tolerant


def _run_exporter(
    record: Record, exporter: str, module: OpCall, program: torch.export.ExportedProgram, expected: Any,
    on_stage: Callable[[str], None], opset: int | None = None,
    compare_outputs: Callable[[Any, Sequence[torch.Tensor]], None] = compare,
) -> None:
    """Export, run and compare; fills ``record.status`` and the error fields."""
    status_of = {"export": "export_failed", "check": "invalid_model", "onnxruntime": "ort_failed", "compare": "mismatch"}
    stage = "export"
    try:
        on_stage(stage)
        onnx_program = _export(exporter, program, module.fresh_inputs(), opset)
        produced = onnx_program.model.opset_imports.get("")
        if opset is not None and produced != opset:
            # torch.onnx keeps opset 18 when its version converter fails: not what was asked for.
            raise ValueError(f"asked for opset {opset}, the model has opset {produced}")
        stage = "check"
        on_stage(stage)
        # Valid ONNX, not just a graph one runtime accepts: types, shapes and opset of every node.
        onnx.checker.check_model(onnx_program.model_proto, full_check=True)
        stage = "onnxruntime"
        on_stage(stage)
        onnx_program.initialize_inference_session(_ort_session)
        actual = onnx_program(*module.fresh_inputs())
        stage = "compare"
        on_stage(stage)
        compare_outputs(expected, actual)
        record.status = "pass"
    except Exception as exc:  # noqa: BLE001 - every failure is a result to record
        record.status = status_of[stage]
        record.error, record.cause = describe_exception(exc)


def _first_samples(opinfo: Any, dtype: torch.dtype, samples: int) -> tuple[list[Any], str | None]:
    """The op's first sample inputs, or why there are none."""
    torch.manual_seed(0)
    generator = opinfo.sample_inputs("cpu", dtype, requires_grad=False)
    try:
        chosen = list(itertools.islice(generator, samples))
    except Exception as exc:  # noqa: BLE001 - a broken generator skips the op, with its error
        return [], "sample_inputs raised " + describe_exception(exc)[0]
    finally:
        # Closed now, not at garbage collection: a generator's no_grad exit inside a trace breaks it.
        close = getattr(generator, "close", None)
        if close is not None:
            close()
    return chosen, None if chosen else "no sample inputs"


def sweep_op(
    opinfo: Any,
    dtype: torch.dtype = torch.float32,
    samples: int = 3,
    exporters: Sequence[str] = EXPORTERS,
    *,
    on_record: Callable[[Record], None] | None = None,
    on_stage: Callable[[int | None, str | None, str], None] | None = None,
    opset: int | None = None,
) -> list[Record]:
    """All records of one op: its first ``samples`` sample inputs through each exporter.

    ``on_record`` sees each record as soon as it is complete and ``on_stage(sample, exporter,
    stage)`` each step before it starts, so a supervisor can tell where a killed worker was.
    """
    key = op_key(opinfo)
    records: list[Record] = []

    def emit(record: Record) -> None:
        records.append(record)
        if on_record is not None:
            on_record(record)

    def stage(sample: int | None, exporter: str | None, name: str) -> None:
        if on_stage is not None:
            on_stage(sample, exporter, name)

    stage(None, None, "sample inputs")
    chosen: list[Any] = []
    reason = skip_reason(opinfo, dtype)
    if reason is None:
        chosen, reason = _first_samples(opinfo, dtype, samples)
    if reason is not None:
        for exporter in exporters:
            emit(Record(key, None, exporter, "skipped", error=reason))
        return records

    for index, sample in enumerate(chosen):
        module = OpCall(opinfo.op, sample)
        inputs = describe_sample(sample)
        sample_status, error, cause, program, expected = eager_and_capture(module, stage, index)
        for exporter in exporters:
            record = Record(key, index, exporter, sample_status or "", inputs=inputs, error=error, cause=cause)
            if program is not None:
                start = time.perf_counter()
                _run_exporter(
                    record, exporter, module, program, expected, lambda name: stage(index, exporter, name), opset,
                    comparison(opinfo, sample),
                )
                record.seconds = round(time.perf_counter() - start, 3)
            emit(record)
    return records


def draws_random(program: torch.export.ExportedProgram) -> bool:
    """Whether the captured program draws random numbers: an op tagged ``nondeterministic_seeded``
    that its own arguments do not switch off. OpInfo seeds eager's random ops, so eager's numbers
    look fixed, but an export draws its own: comparing them would measure chance. Dropout, the
    recurrent ops (``aten.lstm``, ``gru``, ``rnn_tanh``) and ``scaled_dot_product_attention``
    carry the tag for their dropout, off when ``train`` is False or the probability (``p``,
    ``dropout``, ``dropout_p``, defaults included) is 0, as in every eval-mode module."""
    for node in program.graph.nodes:
        target = node.target
        if node.op != "call_function" or not isinstance(target, torch._ops.OpOverload):
            continue
        if torch.Tag.nondeterministic_seeded not in target.tags:
            continue
        arguments = target._schema.arguments
        given = {a.name: a.default_value for a in arguments if a.has_default_value()}
        given.update(zip([a.name for a in arguments][: len(node.args)], node.args, strict=True), **node.kwargs)
        if given.get("train") is False or any(given.get(name) == 0 for name in ("p", "dropout", "dropout_p")):
            continue
        return True
    return False


def eager_and_capture(call: Any, stage: Callable[[int | None, str | None, str], None], index: int) -> tuple[str | None, str | None, str | None, Any, Any]:
    """Run ``call`` eagerly, then capture it: ``(status, error, cause, program, expected)``, the
    status None when both worked and the program draws no random numbers."""
    status, error, cause, program, expected = None, None, None, None, None
    stage(index, None, "eager")
    try:
        with torch.no_grad():
            expected = call(*call.fresh_inputs())
    except Exception as exc:  # noqa: BLE001
        status = "eager_failed"
        error, cause = describe_exception(exc)
    if status is None:
        stage(index, None, "capture")
        try:
            program = torch.export.export(call, call.fresh_inputs(), strict=False)
        except Exception as exc:  # noqa: BLE001
            status = "capture_failed"
            error, cause = describe_exception(exc)
    if program is not None and draws_random(program):
        status, error, program = "random", "the captured program draws random numbers", None
    return status, error, cause, program, expected


# -- many ops, each in a worker process --------------------------------------------------------------

# Imported once by the fork server, so every worker starts warm instead of paying ~5 s of imports.
_PRELOAD = [
    "torch", "torch.testing._internal.common_methods_invocations", "onnxruntime", "onnxscript",
    "torch.onnx._internal.exporter._core", "torch_onnx_fx", "tools.sweeps.opsweep",
]


def _worker(
    key: str, dtype_name: str, samples: int, exporters: Sequence[str], events_path: str, log_path: str, opset: int | None = None
) -> None:
    """Entry of a worker process: one op's records, appended to ``events_path`` as they come."""
    log_fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    os.dup2(log_fd, 1)
    os.dup2(log_fd, 2)
    warnings.simplefilter("ignore")
    logging.disable(logging.WARNING)
    torch.set_num_threads(1)
    with open(events_path, "a", buffering=1) as events:

        def write(kind: str, payload: dict[str, Any]) -> None:
            events.write(json.dumps({"kind": kind, **payload}) + "\n")
            events.flush()

        sweep_op(
            op_infos()[key], DTYPES[dtype_name], samples, exporters,
            on_record=lambda record: write("record", dataclasses.asdict(record)),
            on_stage=lambda sample, exporter, stage: write("stage", {"sample": sample, "exporter": exporter, "stage": stage}),
            opset=opset,
        )


@dataclasses.dataclass
class _Job:
    key: str
    process: Any
    started: float
    events_path: Path
    log_path: Path


def _collect(job: _Job, exporters: Sequence[str], timed_out: float | None) -> list[Record]:
    """The worker's records; a timeout or a crash adds one for the step it was killed in."""
    records: list[Record] = []
    where: dict[str, Any] = {"sample": None, "exporter": None, "stage": "start"}
    if job.events_path.exists():
        for line in job.events_path.read_text().splitlines():
            event = json.loads(line)
            kind = event.pop("kind")
            if kind == "record":
                records.append(Record(**event))
            else:
                where = event
    if timed_out is None and job.process.exitcode == 0:
        return records
    if timed_out is not None:
        status, error = "timeout", f"killed after {timed_out:.0f} s during {where['stage']}; later samples not run"
    else:
        tail = [line for line in job.log_path.read_text(errors="replace").splitlines() if line.strip()][-1:]
        status = "crashed"
        error = f"exit code {job.process.exitcode} during {where['stage']}" + (f": {tail[0][:300]}" if tail else "")
    done = {(r.sample, r.exporter) for r in records}
    for exporter in [where["exporter"]] if where["exporter"] else exporters:
        if (where["sample"], exporter) not in done:
            records.append(Record(job.key, where["sample"], exporter, status, error=error))
    return records


def run_sweep(
    keys: Sequence[str], dtype_name: str, samples: int, exporters: Sequence[str], jobs: int, timeout_s: float,
    opset: int | None = None,
) -> Iterator[list[Record]]:
    """Yield each op's records as its worker finishes (in completion order)."""
    opinfos = op_infos()
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(_PRELOAD)
    # Start the fork server (it imports _PRELOAD) before any op's clock runs.
    warm_up = context.Process(target=time.sleep, args=(0,))
    warm_up.start()
    warm_up.join()
    pending = collections.deque(keys)
    running: list[_Job] = []
    with tempfile.TemporaryDirectory(prefix="opsweep-") as scratch:
        while pending or running:
            while pending and len(running) < jobs:
                key = pending.popleft()
                reason = skip_reason(opinfos[key], DTYPES[dtype_name])
                if reason is not None:
                    yield [Record(key, None, exporter, "skipped", error=reason) for exporter in exporters]
                    continue
                stem = f"{len(keys) - len(pending)}"
                job = _Job(key, None, time.monotonic(), Path(scratch, stem + ".jsonl"), Path(scratch, stem + ".log"))
                job.process = context.Process(
                    target=_worker, args=(key, dtype_name, samples, tuple(exporters), str(job.events_path), str(job.log_path), opset)
                )
                job.process.start()
                running.append(job)
            time.sleep(0.05)
            for job in list(running):
                elapsed = time.monotonic() - job.started
                if job.process.is_alive() and elapsed < timeout_s:
                    continue
                timed_out = None
                if job.process.is_alive():
                    job.process.kill()
                    timed_out = elapsed
                job.process.join()
                running.remove(job)
                yield _collect(job, exporters, timed_out)


# -- the page -------------------------------------------------------------------------------------


_MISSING = re.compile(r"^MissingTranslationError: \d+ operator\(s\) have no ONNX translation and no decomposition: (.*?)\.?$")


def normalize_cause(text: str) -> str:
    """An error's first line with what varies between samples (numbers, node names) blanked."""
    text = re.sub(r"0x[0-9a-fA-F]+", "0x…", text)
    text = re.sub(r"\b([A-Za-z]\w*?)(_\d+)+\b", r"\1_N", text)  # FX/ONNX value names: add_3, val_12
    text = re.sub(r"(?<![\w.])-?\d+(\.\d+)?(e[-+]?\d+)?\b", "N", text)
    return text[:240]


def missing_operators(record: Record) -> list[str]:
    """The operators a MissingTranslationError names; empty for any other failure."""
    found = _MISSING.match(record.error or "")
    return found.group(1).split(", ") if found else []


def cause_key(record: Record) -> str:
    """What failures are grouped by: exception type and normalized first line.

    A value mismatch keeps only assert_close's verdict, not this sample's differences; missing
    translations are one cause, broken down by operator in a table of their own.
    """
    if missing_operators(record):
        return "MissingTranslationError: operators with no ONNX translation and no decomposition (table below)"
    cause = record.error or record.status
    if record.status == "mismatch":
        cause = cause.split(";")[0]
    return normalize_cause(cause)


def _cell(text: str | None) -> str:
    return (text or "").replace("|", "\\|").replace("\n", " ")


def _counts(records: Iterable[Record]) -> str:
    counter = collections.Counter(r.status for r in records)
    return ", ".join(f"{status} {n}" for status, n in counter.most_common())


def in_page_order(header: dict[str, Any], records: Iterable[Record]) -> list[Record]:
    """Records in the order of the run's ops, each op's whole-op records first, then by sample."""
    order = {key: i for i, key in enumerate(header["ops"])}
    return sorted(records, key=lambda r: (order.get(r.op, len(order)), -1 if r.sample is None else r.sample, r.exporter))


def status_counts(records: Iterable[Record], exporters: Sequence[str]) -> dict[str, collections.Counter[str]]:
    """Per exporter, its number of samples of each status of ``STATUSES`` (other records not counted)."""
    counted = [r for r in records if r.status in STATUSES]
    return {e: collections.Counter(r.status for r in counted if r.exporter == e) for e in exporters}


def failures_of(records: Iterable[Record], exporter: str) -> list[Record]:
    """The counted samples ``exporter`` does not pass."""
    return [r for r in records if r.exporter == exporter and r.status in STATUSES and r.status != "pass"]


def failures_by_cause(failures: Iterable[Record]) -> list[tuple[str, list[Record]]]:
    """Failures grouped by :func:`cause_key`, most frequent first; ties keep their first appearance."""
    groups: dict[str, list[Record]] = {}
    for record in failures:
        groups.setdefault(cause_key(record), []).append(record)
    return sorted(groups.items(), key=lambda item: -len(item[1]))


def render_markdown(header: dict[str, Any], records: Sequence[Record]) -> str:
    exporters = [e for e in EXPORTERS if e in header["exporters"]]
    records = in_page_order(header, records)
    by_sample: dict[tuple[str, int | None], dict[str, Record]] = {}
    for record in records:
        by_sample.setdefault((record.op, record.sample), {})[record.exporter] = record
    counted = [r for r in records if r.status in STATUSES]
    limited = "" if header["samples"] >= DEFAULT_SAMPLES else (
        f" The sweep's default is {DEFAULT_SAMPLES} samples per op; this run took only the first {header['samples']} "
        "to keep it under about 50 minutes on the machine below."
    )
    out = [
        f"# Operator coverage: OpInfo sweep, {header['dtype']}" + (f", opset {header['opset']}" if header.get("opset") else ""),
        "",
        "Generated by `tools/sweeps/opsweep.py`; do not edit by hand. Regenerate with:",
        "",
        "```bash",
        regeneration_command(header),
        "```",
        "",
        f"or rewrite it from the committed results with `{regeneration_command(header, render_only=True)}`. "
        f"This page's run: `{header['command']}`.",
        "",
        (f"Machine: {describe_machine(header)}, " if "cores" in header else "")
        + f"{describe_versions(header, ('torch', 'onnxscript', 'onnxruntime'))}; "
        f"{header['date']}, commit {header['commit']}; {header['minutes']:.0f} min with {header['jobs']} job(s).",
        "",
        f"Every OpInfo of PyTorch's `op_db` ({len(header['ops'])} ops), its **first {header['samples']} sample "
        f"inputs** in {header['dtype']} on CPU.{limited} Each sample's call is captured once with "
        "`torch.export.export(strict=False)` and that ExportedProgram is exported by both exporters, run "
        "in ONNX Runtime and compared with eager PyTorch: same dtype and shape, then `assert_close` "
        "(float32 rtol 1e-3/atol 1e-5, float16 1e-2/1e-3, bfloat16 5e-2/1e-2, integers and bool exact, "
        "NaNs equal). Complex outputs in ONNX's real form are viewed as complex before comparing. "
        "Random ops and ops without CPU samples of this dtype are skipped; samples torch.export cannot "
        "capture are counted apart.",
        "",
        f"The charts are drawn by `tools/pages/plots.py` from the same results; redraw them after regenerating "
        f"this page with `{PLOTS_COMMAND}`.",
        "",
        "## Totals over capturable samples",
        "",
        image("Samples of each status per exporter", OPSWEEP_STATUS_PNG),
        "",
        "| status | " + " | ".join(exporters) + " |",
        "|---|" + "---:|" * len(exporters),
    ]
    per_exporter = status_counts(counted, exporters)
    for status in STATUSES:
        out.append(f"| {status} | " + " | ".join(str(per_exporter[e][status]) for e in exporters) + " |")
    totals = {e: sum(per_exporter[e].values()) for e in exporters}
    out.append("| **total** | " + " | ".join(f"**{totals[e]}**" for e in exporters) + " |")
    out.append(
        "| **pass rate** | "
        + " | ".join(f"**{100 * per_exporter[e]['pass'] / totals[e]:.1f}%**" if totals[e] else "–" for e in exporters)
        + " |"
    )
    first = exporters[0]
    apart = collections.Counter(r.status for r in records if r.exporter == first and r.status in APART)
    skipped_reasons = collections.Counter(r.error for r in records if r.exporter == first and r.status == "skipped")
    out += [
        "",
        f"Not counted: {apart['capture_failed']} samples torch.export cannot capture, "
        f"{apart['eager_failed']} samples eager PyTorch rejects, {apart['random']} samples whose eager "
        f"results are random, {apart['skipped']} ops skipped ("
        + "; ".join(f"{reason}: {n}" for reason, n in skipped_reasons.most_common())
        + ").",
    ]

    regressed: set[str] = set()
    if OURS in exporters and THEIRS in exporters:
        section, regressed = _comparison_section(by_sample)
        out += section
    if OURS in exporters:
        failures = failures_of(counted, OURS)
        out += _causes_section(failures) + _missing_section(failures)
    capture = [r for r in records if r.exporter == first and r.status in ("capture_failed", "eager_failed")]
    out += _details(
        f"Samples not captured ({len(capture)})",
        ["| op | sample | status | error |", "|---|---:|---|---|"]
        + [f"| {r.op} | {r.sample} | {r.status} | {_cell(r.error)} |" for r in capture],
    )
    rows = ["| op | " + " | ".join(exporters) + " | not counted |", "|---|" + "---|" * (len(exporters) + 1)]
    for key in dict.fromkeys(r.op for r in records):
        mine = [r for r in records if r.op == key]
        cells = [_counts(r for r in mine if r.exporter == e and r.status in STATUSES) for e in exporters]
        skipped = next((r.error for r in mine if r.status == "skipped"), None)
        other = f"skipped: {_cell(skipped)}" if skipped else _counts(r for r in mine if r.exporter == first and r.status in APART)
        name = f"**{key}**" if key in regressed else key
        rows.append(f"| {name} | " + " | ".join(cells) + f" | {other} |")
    out += _details(
        f"Per-op results ({len(set(header['ops']))} ops; counts of samples; ops in bold have samples torch.onnx passes and torch_onnx_fx fails)",
        rows,
    )
    return "\n".join(out) + "\n"


def _details(summary: str, lines: list[str]) -> list[str]:
    return ["", "<details>", f"<summary>{summary}</summary>", "", *lines, "", "</details>"]


def _comparison_section(by_sample: dict[tuple[str, int | None], dict[str, Record]]) -> tuple[list[str], set[str]]:
    """The samples one exporter passes and the other fails, and the ops where we are behind."""
    we_fail, they_fail = [], []
    for pair in by_sample.values():
        ours, theirs = pair.get(OURS), pair.get(THEIRS)
        if ours is None or theirs is None or ours.status not in STATUSES or theirs.status not in STATUSES:
            continue
        if theirs.status == "pass" and ours.status != "pass":
            we_fail.append(ours)
        elif ours.status == "pass" and theirs.status != "pass":
            they_fail.append(theirs)
    out = [
        "",
        f"## torch.onnx passes, torch_onnx_fx fails: {len(we_fail)} samples",
        "",
        "The regressions against the exporter we replace; fix these first.",
        "",
        "| op | sample | inputs | status | error |",
        "|---|---:|---|---|---|",
    ]
    out += [f"| {r.op} | {r.sample} | `{_cell(r.inputs)}` | {r.status} | {_cell(r.error)} |" for r in we_fail]
    if not we_fail:
        out[-2:] = ["None."]
    out += _details(
        f"torch_onnx_fx passes, torch.onnx fails: {len(they_fail)} samples",
        ["| op | sample | status | torch.onnx error (innermost cause) |", "|---|---:|---|---|"]
        + [f"| {r.op} | {r.sample} | {r.status} | {_cell(r.cause or r.error)} |" for r in they_fail],
    )
    return out, {r.op for r in we_fail}


def _causes_section(failures: Sequence[Record]) -> list[str]:
    groups = failures_by_cause(failures)
    out = [
        "",
        f"## torch_onnx_fx failures by cause: {len(failures)} samples, {len(groups)} causes",
        "",
        image("torch_onnx_fx's most frequent failure causes", OPSWEEP_CAUSES_PNG),
        "",
        "Exception type and first line, with numbers and value names blanked; most frequent first.",
        "",
        "| samples | status | cause | ops |",
        "|---:|---|---|---|",
    ]
    for cause, members in groups:
        ops = list(dict.fromkeys(r.op for r in members))
        shown = ", ".join(ops[:12]) + (f", … ({len(ops)} ops)" if len(ops) > 12 else "")
        out.append(f"| {len(members)} | {members[0].status} | {_cell(cause)} | {shown} |")
    return out


def _missing_section(failures: Sequence[Record]) -> list[str]:
    by_operator: dict[str, list[Record]] = {}
    for record in failures:
        for operator in missing_operators(record):
            by_operator.setdefault(operator, []).append(record)
    out = [
        "",
        f"### Operators without a translation or decomposition: {len(by_operator)}",
        "",
        "| operator | samples | ops |",
        "|---|---:|---|",
    ]
    for operator, members in sorted(by_operator.items(), key=lambda item: (-len(item[1]), item[0])):
        out.append(f"| `{operator}` | {len(members)} | {', '.join(dict.fromkeys(r.op for r in members))} |")
    return out


# -- the driver ----------------------------------------------------------------------------------


def _header(options: argparse.Namespace, keys: Sequence[str], command: str) -> dict[str, Any]:
    """The run's settings, with the machine and versions as every tool records them."""
    header = machine_info(command)
    header.update(
        kind="header", dtype=options.dtype, opset=options.opset, samples=options.samples, exporters=list(options.exporters),
        jobs=options.jobs, minutes=0.0, ops=list(keys),
    )
    return header


def read_results(path: Path) -> tuple[dict[str, Any], list[Record]]:
    """The run's header and records; an op run again after a ``resume`` line keeps only its new records."""
    header: dict[str, Any] = {}
    by_op: dict[str, tuple[int, list[Record]]] = {}
    segment = 0
    for kind, entry in read_entries(path):
        if kind == "header":
            header.update(entry)
        elif kind == "elapsed":
            header["minutes"] = entry["minutes"]
        elif kind == "resume":
            segment += 1
            header["commit"] += f", resumed at {entry['commit']} ({entry['date']})"
        else:
            record = Record(**entry)
            seen, records = by_op.get(record.op, (segment, []))
            by_op[record.op] = (segment, (records if seen == segment else []) + [record])
    return header, [record for _, records in by_op.values() for record in records]


def canonical_paths(dtype: str, opset: int | None = None) -> tuple[Path, Path]:
    """Where the committed results and the page of a sweep of ``dtype`` (at ``opset``) live."""
    suffix = dtype + (f"_opset{opset}" if opset else "")
    if opset:
        page = f"coverage_opset{opset}.md" if dtype == "float32" else f"coverage_{suffix}.md"
    else:
        page = "coverage.md" if dtype == "float32" else f"coverage_{dtype}.md"
    return REPO / "tools" / "results" / f"opsweep_{suffix}.jsonl", REPO / "docs" / page


def regeneration_command(header: dict[str, Any], *, render_only: bool = False) -> str:
    """The command that rewrites a page like the one ``header`` describes, as run from the
    repository's root: the full sweep into the committed results and page, or (``render_only``)
    the page from those results. Runs as written from a fresh clone, unlike the command of a run
    that wrote elsewhere (a partial rerun merged into the results later)."""
    json_path, page = (path.relative_to(REPO) for path in canonical_paths(header["dtype"], header.get("opset")))
    if render_only:
        return f"python tools/sweeps/opsweep.py --render-only --dtype {header['dtype']}" + (
            f" --opset {header['opset']}" if header.get("opset") else "") + f" --json {json_path} --out {page}"
    opset = f" --opset {header['opset']}" if header.get("opset") else ""
    return (
        f"python tools/sweeps/opsweep.py --jobs 2 --samples {header['samples']} --dtype {header['dtype']}{opset} "
        f"--json {json_path} --out {page}"
    )


# Where tools/sweeps/dtypesweep.py's section of docs/coverage.md starts.
DTYPES_MARKER = "<!-- dtypesweep:start -->"


def _write_page(path: Path, page: str) -> None:
    """Write the page, keeping the sections ``tools/sweeps/dtypesweep.py`` and ``tools/sweeps/modelsweep.py`` add to it."""
    from tools.sweeps.modelsweep import START_MARKER

    previous = path.read_text() if path.exists() else ""
    # Everything from the first generated section on: every-dtype summary, model corpus.
    found = [i for i in (previous.find(DTYPES_MARKER), previous.find(START_MARKER)) if i >= 0]
    start = min(found) if found else -1
    path.write_text(page + ("\n" + previous[start:] if start >= 0 else ""))


def _select(parser: argparse.ArgumentParser, wanted: str | None, known: Sequence[str]) -> list[str]:
    """``--ops`` names, each an exact ``name[.variant]`` or a name standing for all its variants."""
    if not wanted:
        return list(known)
    chosen: list[str] = []
    for name in wanted.split(","):
        matches = [key for key in known if key == name or key.startswith(name + ".")]
        if not matches:
            parser.error(f"unknown op {name!r}; see the OpInfo names in torch's common_methods_invocations")
        chosen += [key for key in matches if key not in chosen]
    return chosen


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ops", help="comma-separated OpInfo names (name or name.variant; default: all)")
    parser.add_argument("--samples", type=int, default=DEFAULT_SAMPLES, help="sample inputs per op (the first N)")
    parser.add_argument("--dtype", choices=sorted(DTYPES), default="float32")
    parser.add_argument("--opset", type=int, help="opset_version for both exporters (default: each one's default)")
    parser.add_argument("--exporters", type=lambda s: s.split(","), default=list(EXPORTERS), help="comma-separated")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds per op (all its samples and exporters)")
    parser.add_argument("--jobs", type=int, default=1, help="ops run side by side")
    parser.add_argument("--quick", action="store_true", help="only QUICK_OPS, one sample each")
    parser.add_argument("--json", type=Path, help="JSON-lines results (default: the committed ones of --dtype and --opset; none with --quick)")
    parser.add_argument("--out", type=Path, help="Markdown page (default: the committed one of --dtype and --opset; none with --quick)")
    parser.add_argument("--render-only", action="store_true", help="rewrite --out from --json, run nothing")
    parser.add_argument(
        "--resume", action="store_true",
        help="continue the interrupted run in --json with its settings: the ops it lacks, and --ops again",
    )
    options = parser.parse_args(argv)
    unknown = [e for e in options.exporters if e not in EXPORTERS]
    if unknown:
        parser.error(f"unknown exporters {unknown}; known: {list(EXPORTERS)}")
    # --quick is a smoke test: it writes files only when asked to, never over the full sweep's.
    committed_json, committed_page = canonical_paths(options.dtype, options.opset)
    json_path = options.json or (None if options.quick else committed_json)
    out_path = options.out or (None if options.quick else committed_page)
    if options.render_only:
        if json_path is None or out_path is None:
            parser.error("--render-only needs the results to read: drop --quick or give --json and --out")
        header, records = read_results(json_path)
        _write_page(out_path, render_markdown(header, records))
        return 0

    everything: list[Record] = []
    if options.resume:
        if json_path is None or not json_path.exists():
            parser.error("--resume needs the JSON-lines file of the interrupted run (--json)")
        header, everything = read_results(json_path)
        again = set(_select(parser, options.ops, header["ops"])) if options.ops else set()
        everything = [r for r in everything if r.op not in again]
        finished = {r.op for r in everything}
        keys = [key for key in header["ops"] if key not in finished]
        options.dtype, options.samples, options.exporters = header["dtype"], header["samples"], header["exporters"]
        options.opset = header.get("opset")
        now = machine_info("")
        with json_path.open("a") as jsonl:
            jsonl.write(json.dumps({"kind": "resume", "commit": now["commit"], "date": now["date"]}) + "\n")
        header["commit"] += f", resumed at {now['commit']} ({now['date']})"
    else:
        keys = list(QUICK_OPS) if options.quick else _select(parser, options.ops, list(op_infos()))
        if options.quick:
            options.samples = 1
        command = shlex.join(["python", "tools/sweeps/opsweep.py", *(sys.argv[1:] if argv is None else argv)])
        header = _header(options, keys, command)
        if json_path is not None:
            json_path.parent.mkdir(parents=True, exist_ok=True)
            json_path.write_text(json.dumps(header) + "\n")
    start, earlier_minutes = time.monotonic(), header["minutes"]
    for done, records in enumerate(run_sweep(keys, options.dtype, options.samples, options.exporters, options.jobs, options.timeout, options.opset), 1):
        everything += records
        header["minutes"] = earlier_minutes + (time.monotonic() - start) / 60
        if json_path is not None:
            # The running total after every op, so an interrupted run still knows how long it took.
            with json_path.open("a") as jsonl:
                jsonl.writelines(json.dumps({"kind": "record", **dataclasses.asdict(r)}) + "\n" for r in records)
                jsonl.write(json.dumps({"kind": "elapsed", "minutes": round(header["minutes"], 2)}) + "\n")
        op = records[0].op if records else "?"
        summary = "; ".join(f"{e}: {_counts(r for r in records if r.exporter == e)}" for e in options.exporters)
        print(f"[{done}/{len(keys)} {time.monotonic() - start:6.0f} s] {op}: {summary}", flush=True)
    if out_path is not None:
        out_path.parent.mkdir(parents=True, exist_ok=True)
        _write_page(out_path, render_markdown(header, everything))
    failing = [r for r in everything if r.status in STATUSES and r.status != "pass"]
    print(f"{len(everything)} records, {len(failing)} failing: " + _counts(everything))
    return 0


if __name__ == "__main__":
    # Run as the module tools.sweeps.opsweep, so worker processes unpickle its functions by that name.
    from tools.sweeps.opsweep import main as _main

    sys.exit(_main())
