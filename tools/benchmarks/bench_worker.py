"""One measured export, run in a fresh process that ``tools/benchmarks/bench.py`` starts per model, exporter
and repeat, so that peak RSS is the export's own and a crash or hang costs one record.

The worker builds the corpus model, exports it and measures, writing its :class:`Record` to a JSON
file after every stage (a timeout still reports what was done):

- export wall time, cold (the first export in the process) and warm (a second export after it);
- peak RSS increase during the export: the peak is reset (``/proc/self/clear_refs``) once the model
  is built, so ``ru_maxrss`` after the export minus the RSS before it is the export's own peak;
- ONNX node count, top level and recursively through subgraphs and local functions;
- ONNX Runtime latency: median of timed runs after warm-up, CPU provider, one intra-op thread, the
  session created from ``model_proto.SerializeToString()``;
- max abs difference from eager PyTorch on the example inputs, and on the corpus's second inputs
  of other dynamic sizes when it has them.

Usage (normally through ``tools/benchmarks/bench.py``)::

    python tools/benchmarks/bench_worker.py MODEL {torch_onnx_fx,torch.onnx} RESULT.json
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import json
import math
import os
import re
import resource
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Sequence

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

__all__ = ["OURS", "THEIRS", "EXPORTERS", "Record", "corpus", "run_worker", "main"]

OURS = "torch_onnx_fx"
THEIRS = "torch.onnx"
EXPORTERS = (OURS, THEIRS)


@dataclasses.dataclass
class Record:
    """One measurement of one exporter on one model; ``None`` where a stage did not get that far."""

    model: str
    family: str
    exporter: str
    repeat: int = 0
    status: str = "not run"
    stage: str = "start"
    error: str | None = None
    cause: str | None = None
    export_s: float | None = None
    warm_export_s: float | None = None
    peak_rss_mb: float | None = None
    nodes: int | None = None
    nodes_total: int | None = None
    functions: int | None = None
    proto_mb: float | None = None
    ort_ms: float | None = None
    ort_runs: int | None = None
    max_abs_diff: float | None = None
    max_abs_diff_second: float | None = None
    note: str | None = None


def _first_line(text: str) -> str:
    text = re.sub(r"\x1b\[[0-9;]*m", "", text)  # torch.onnx colours its messages
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[0][:400] if lines else ""


def _describe(exc: BaseException) -> tuple[str, str | None]:
    """The exception's first line, and that of its innermost cause when it wraps one."""
    top = f"{type(exc).__name__}: {_first_line(str(exc))}"
    root = exc
    while root.__cause__ is not None or (root.__context__ is not None and not root.__suppress_context__):
        root = root.__cause__ or root.__context__  # type: ignore[assignment]
    cause = f"{type(root).__name__}: {_first_line(str(root))}" if root is not exc else None
    return top, cause


def _current_rss_bytes() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _reset_peak_rss() -> bool:
    """Reset the kernel's peak-RSS mark (Linux >= 4.0) so ru_maxrss measures from here on."""
    try:
        with open("/proc/self/clear_refs", "w") as clear_refs:
            clear_refs.write("5")
        return True
    except OSError:
        return False


def _export(exporter: str, model: Any, args: tuple, kwargs: dict, dynamic_shapes: Any) -> Any:
    if exporter == OURS:
        import torch_onnx_fx

        return torch_onnx_fx.export(model, args, kwargs=kwargs, dynamic_shapes=dynamic_shapes, verbose=False)
    import torch

    return torch.onnx.export(model, args, kwargs=kwargs, dynamic_shapes=dynamic_shapes, dynamo=True, verbose=False)


def _count_nodes(model: Any) -> tuple[int, int, int]:
    """Top-level nodes, all nodes (subgraphs and local functions included), local functions."""
    import onnx_ir as ir

    total = sum(1 for _ in ir.traversal.RecursiveGraphIterator(model.graph))
    for function in model.functions.values():
        total += sum(1 for _ in ir.traversal.RecursiveGraphIterator(function))
    return len(model.graph), total, len(model.functions)


class _RecordingSession:
    """Wraps an InferenceSession to keep the feeds ONNXProgram.__call__ builds, for timing."""

    def __init__(self, session: Any):
        self.session = session
        self.last_call: tuple[Any, Any] | None = None

    def run_with_ort_values(self, output_names: Any, feeds: Any, *args: Any, **kwargs: Any) -> Any:
        self.last_call = (output_names, feeds)
        return self.session.run_with_ort_values(output_names, feeds, *args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.session, name)


def _single_thread_session(model: str | bytes) -> _RecordingSession:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    options.log_severity_level = 3
    return _RecordingSession(ort.InferenceSession(model, sess_options=options, providers=["CPUExecutionProvider"]))


def _flat_outputs(value: Any) -> list[Any]:
    import torch
    import torch.utils._pytree as pytree

    return [torch.as_tensor(x) for x in pytree.tree_leaves(value) if isinstance(x, (torch.Tensor, int, float, bool))]


def _max_abs_diff(expected: Any, actual: Sequence[Any]) -> tuple[float, str | None]:
    """Max abs difference of the ONNX outputs from eager's, one to one; raises when the counts or
    shapes differ (both exporters' graphs have the model's outputs only)."""
    import torch

    flat_expected = _flat_outputs(expected)
    actual = list(actual)
    if len(actual) != len(flat_expected):
        raise ValueError(f"{len(actual)} ONNX outputs for {len(flat_expected)} eager outputs")
    worst, notes = 0.0, []
    for i, (exp, act) in enumerate(zip(flat_expected, actual)):
        exp = exp.detach()
        # ONNX has no complex outputs: a runner returns the real view, or converts it back.
        if exp.is_complex():
            exp = torch.view_as_real(exp)
        if act.is_complex():
            act = torch.view_as_real(act)
        if tuple(act.shape) != tuple(exp.shape):
            raise ValueError(f"output {i}: shape {tuple(act.shape)} != eager {tuple(exp.shape)}")
        if act.dtype != exp.dtype:
            notes.append(f"output {i}: dtype {act.dtype} != eager {exp.dtype}")
        if exp.numel() == 0:
            continue
        exp64, act64 = exp.to(torch.float64), act.to(torch.float64)
        diff = (exp64 - act64).abs()
        both_nan = exp64.isnan() & act64.isnan()
        same_inf = exp64.isinf() & (exp64 == act64)
        diff = torch.where(both_nan | same_inf, torch.zeros_like(diff), diff)
        worst = max(worst, math.inf if diff.isnan().any() else float(diff.max()))
    return worst, "; ".join(notes) or None


def _time_session(session: _RecordingSession, runs: int, budget_s: float) -> tuple[float, int]:
    """Median milliseconds of replaying the recorded call: 3 warm-up runs, then up to ``runs``
    timed ones, at least 3, stopping early once ``budget_s`` is spent."""
    assert session.last_call is not None, "the program must have been called once"
    names, feeds = session.last_call
    inner = session.session
    for _ in range(3):
        inner.run_with_ort_values(names, feeds)
    times: list[float] = []
    deadline = time.perf_counter() + budget_s
    while len(times) < runs and (len(times) < 3 or time.perf_counter() < deadline):
        start = time.perf_counter()
        inner.run_with_ort_values(names, feeds)
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000, len(times)


def run_worker(model_name: str, exporter: str, result_path: Path, ort_runs: int, ort_budget_s: float) -> None:
    """Measure one export in this (fresh) process; the record is rewritten after every stage."""
    import torch

    # Import both exporters' modules first, so neither pays the other's imports in its peak RSS.
    import onnxruntime  # noqa: F401
    import onnxscript  # noqa: F401
    import torch.onnx._internal.exporter._core  # noqa: F401
    import torch_onnx_fx  # noqa: F401

    case = {c.name: c for c in corpus()}[model_name]
    record = Record(model=model_name, family=case.family, exporter=exporter)

    def stage(name: str) -> None:
        record.stage = name
        result_path.write_text(json.dumps(dataclasses.asdict(record)))

    def note(text: str) -> None:
        record.note = f"{record.note}; {text}" if record.note else text

    def fail(status: str, exc: BaseException) -> None:
        record.status = status
        record.error, record.cause = _describe(exc)
        stage(record.stage)

    stage("build")
    try:
        model, args, kwargs, dynamic_shapes = case.build()
    except Exception as exc:  # noqa: BLE001 - any failure is a result to record
        return fail("build failed", exc)
    gc.collect()
    peak_was_reset = _reset_peak_rss()
    baseline = _current_rss_bytes()

    stage("export")
    start = time.perf_counter()
    try:
        program = _export(exporter, model, args, kwargs, dynamic_shapes)
    except Exception as exc:  # noqa: BLE001
        record.export_s = time.perf_counter() - start
        return fail("export failed", exc)
    record.export_s = time.perf_counter() - start
    record.peak_rss_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 - baseline) / 2**20
    if not peak_was_reset:
        note("peak RSS not reset before export: an upper bound")
    record.nodes, record.nodes_total, record.functions = _count_nodes(program.model)

    # A second export in the same process: the per-model cost without one-time initialisation.
    stage("warm export")
    start = time.perf_counter()
    try:
        _export(exporter, model, args, kwargs, dynamic_shapes)
        record.warm_export_s = time.perf_counter() - start
    except Exception as exc:  # noqa: BLE001
        note(f"the second export failed: {_describe(exc)[0]}")

    stage("onnxruntime")
    try:
        record.proto_mb = program.model_proto.ByteSize() / 2**20
        program.initialize_inference_session(_single_thread_session)
        actual = program(*args, **kwargs)
        record.ort_ms, record.ort_runs = _time_session(program._inference_session, ort_runs, ort_budget_s)
    except Exception as exc:  # noqa: BLE001
        return fail("onnxruntime failed", exc)
    stage("onnxruntime, second inputs")
    second = case.second_inputs() if getattr(case, "second_inputs", None) else None
    try:
        actual_second = program(*second[0], **second[1]) if second is not None else None
    except Exception as exc:  # noqa: BLE001
        return fail("onnxruntime failed", exc)

    stage("compare")
    try:
        with torch.no_grad():
            record.max_abs_diff, dtype_note = _max_abs_diff(model(*args, **kwargs), actual)
            if dtype_note:
                note(dtype_note)
            if second is not None:
                stage("compare, second inputs")
                record.max_abs_diff_second, _ = _max_abs_diff(model(*second[0], **second[1]), actual_second)
    except Exception as exc:  # noqa: BLE001
        return fail("mismatch", exc)
    record.status = "ok"
    stage("done")



def corpus() -> list[Any]:
    """The benchmark corpus: ``tools.corpus.models.CORPUS``."""
    from tools.corpus.models import CORPUS

    return list(CORPUS)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model", help="a corpus model name")
    parser.add_argument("exporter", choices=EXPORTERS)
    parser.add_argument("result", type=Path, help="the JSON file the record is written to")
    parser.add_argument("--ort-runs", type=int, default=200, help="timed ONNX Runtime runs at most")
    parser.add_argument("--ort-budget", type=float, default=5.0, help="seconds of timed ORT runs at most")
    options = parser.parse_args(argv)
    run_worker(options.model, options.exporter, options.result, options.ort_runs, options.ort_budget)
    return 0


if __name__ == "__main__":
    sys.exit(main())
