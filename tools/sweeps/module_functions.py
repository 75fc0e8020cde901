"""Module-functions sweep: every corpus model exported with ``export_modules_as_functions=True``.

For each model the same inputs and dynamic shapes are exported twice by torch_onnx_fx, inlined
and with functions; both run in ONNX Runtime (default session options) on the model's example
inputs and its second input set, and the function export must give the inlined export's outputs
the same numbers (the functions hold the same nodes). Each model gets one status:

* ``same``: functions were made; with ONNX Runtime's basic graph optimizations the outputs are
  identical to the inlined export's, bit for bit (the same nodes), and with its default options
  (all optimizations) within the case's tolerance of them (``default_max_diff``): ORT fuses
  ``Add`` + ``LayerNormalization`` into ``SkipLayerNormalization`` within a function but not
  across a call's boundary, which moves the last bits where a block ends in a residual sum;
* ``no_blocks``: no repeated block (a class side by side in a ModuleList/Sequential) was found,
  so the export is the inlined one;
* ``differs`` (not identical at the basic level, or past the tolerance at the default),
  ``export_failed``, ``invalid_model``, ``ort_failed``: the function export against
  the inlined one; ``inlined_failed``: the inlined export itself fails (the model sweep's business);
* ``timeout``, ``crashed``, ``build_failed`` (the model cannot be built or run in eager).

It records the functions and calls made, the main graph's nodes against the inlined graph's, the
saved model's size without weights, and ONNX Runtime's session creation time for both.

    python tools/sweeps/module_functions.py                      # the hand-picked corpus (~10 min)
    python tools/sweeps/module_functions.py --corpus transformers --jobs 2
    python tools/sweeps/module_functions.py --render-only

Results: ``tools/results/module_functions*.jsonl``; page: the sweep section of ``docs/functions.md``.
"""

from __future__ import annotations

import argparse
import dataclasses
import multiprocessing
import os
import sys
import tempfile
import time
import warnings
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
for _path in (REPO, REPO / "tests"):
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

from tools._common import machine_info, read_records, write_section, run_in_worker, write_records  # noqa: E402
from tools.sweeps.modelsweep import GENERATED, check_valid, find_case, is_large, stage_tracking  # noqa: E402

PAGE = REPO / "docs" / "functions.md"
START, END = "<!-- functions-sweep:start -->", "<!-- functions-sweep:end -->"
STATUSES = ("same", "no_blocks", "differs", "export_failed", "invalid_model", "ort_failed", "inlined_failed", "timeout", "crashed", "build_failed")


def results_path(corpus: str) -> Path:
    return REPO / "tools" / "results" / ("module_functions.jsonl" if corpus == "hand" else f"module_functions_{corpus}.jsonl")


@dataclasses.dataclass
class Record:
    model: str
    family: str
    status: str = "crashed"
    stage: str = "start"
    error: str | None = None
    cause: str | None = None
    functions: int = 0
    calls: int = 0
    replayed: int = 0  # block instances copied from a traced one instead of traced
    nodes_inlined: int | None = None
    nodes_main: int | None = None
    bytes_inlined: int | None = None  # the saved model without its weights
    bytes_functions: int | None = None
    export_inlined_s: float | None = None
    export_functions_s: float | None = None
    session_inlined_s: float | None = None
    session_functions_s: float | None = None
    default_max_diff: float | None = None  # against the inlined export, ORT's default options


def _graph_bytes(program: Any) -> int:
    proto = program.model_proto
    for initializer in proto.graph.initializer:
        initializer.ClearField("raw_data")
    return proto.ByteSize()


def _session_seconds(program: Any) -> float:
    import onnxruntime as ort

    serialized = program.model_proto.SerializeToString()
    best = float("inf")
    for _ in range(2):
        start = time.perf_counter()
        ort.InferenceSession(serialized, providers=["CPUExecutionProvider"])
        best = min(best, time.perf_counter() - start)
    return round(best, 4)


def _identical(a: Any, b: Any) -> bool:
    import torch

    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.is_floating_point() or a.is_complex():
        return bool(torch.equal(a.isnan(), b.isnan()) and torch.equal(torch.nan_to_num(a), torch.nan_to_num(b)))
    return bool(torch.equal(a, b))


def _at_basic_level(program: Any) -> Any:
    """``program``, its ONNX Runtime session now at the basic optimization level (no fusions)."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
    program.initialize_inference_session(lambda model: ort.InferenceSession(model, options, providers=["CPUExecutionProvider"]))
    return program


def run_case(case: Any, on_stage: Any = lambda record: None) -> Record:
    import torch

    import torch_onnx_fx

    record = Record(case.name, case.family)
    stage, fail = stage_tracking(record, on_stage)
    stage("build")
    try:
        model, args, kwargs, dynamic_shapes = case.build()
        input_sets = [(args, kwargs)] + ([case.second_inputs()] if case.second_inputs is not None else [])
        with torch.no_grad():  # a model that does not run in eager is no export's failure
            model(*args, **kwargs)
    except Exception as exc:  # noqa: BLE001 - any failure is a result to record
        return fail("build_failed", exc)

    def export(**options: Any) -> Any:
        return torch_onnx_fx.export(model, args, kwargs=kwargs, dynamic_shapes=dynamic_shapes, verbose=False, **options)

    stage("export inlined")
    try:
        inlined = export()  # also the warm-up: the first export in a process loads the exporter
        expected = [inlined(*a, **k) for a, k in input_sets]
    except Exception as exc:  # noqa: BLE001
        return fail("inlined_failed", exc)
    stage("export with functions")
    try:
        start = time.perf_counter()
        program = export(export_modules_as_functions=True)
        record.export_functions_s = round(time.perf_counter() - start, 2)
        start = time.perf_counter()
        inlined = export()
        record.export_inlined_s = round(time.perf_counter() - start, 2)
    except Exception as exc:  # noqa: BLE001
        return fail("export_failed", exc)
    proto = program.model_proto
    record.functions = len(proto.functions)
    function_ids = {(f.domain, f.name) for f in proto.functions}
    record.calls = sum((n.domain, n.op_type) in function_ids for n in proto.graph.node)
    record.replayed = program.capture_blocks_replayed
    record.nodes_inlined, record.nodes_main = len(inlined.model.graph), len(program.model.graph)
    record.bytes_inlined, record.bytes_functions = _graph_bytes(inlined), _graph_bytes(program)
    stage("check")
    try:
        check_valid(program, model)
    except Exception as exc:  # noqa: BLE001
        return fail("invalid_model", exc)
    stage("onnxruntime")
    try:
        # A model past protobuf's 2 GB runs through ONNXProgram (which saves it first); its
        # session is not timed.
        if not is_large(model):
            record.session_inlined_s, record.session_functions_s = _session_seconds(inlined), _session_seconds(program)
        actual = [program(*a, **k) for a, k in input_sets]
        basic = [_at_basic_level(p) for p in (inlined, program)]
        identical = [[p(*a, **k) for a, k in input_sets] for p in basic]
    except Exception as exc:  # noqa: BLE001
        return fail("ort_failed", exc)
    for i, (want, got) in enumerate(zip(*identical)):
        if len(want) != len(got) or not all(_identical(w, g) for w, g in zip(want, got)):
            record.status, record.error = "differs", f"input set {i + 1}: not identical to the inlined export at ORT's basic level"
            return record
    diffs = [float((w.double() - g.double()).abs().max()) if w.numel() else 0.0 for ws, gs in zip(expected, actual) for w, g in zip(ws, gs) if w.is_floating_point()]
    record.default_max_diff = max(diffs, default=0.0)
    try:
        for want, got in zip(expected, actual):
            for w, g in zip(want, got, strict=True):
                torch.testing.assert_close(g, w, rtol=case.rtol, atol=case.atol, equal_nan=True)
    except (AssertionError, ValueError) as exc:
        return fail("differs", exc)
    record.status = "same" if record.functions else "no_blocks"
    stage("done")
    return record


_PRELOAD = ["torch", "transformers", "onnxruntime", "onnxscript", "torch_onnx_fx", "torch_onnx_fx.ops", "tools.corpus.models",
            "tools.corpus.generated_models", "tools.sweeps.modelsweep"]


def _worker(name: str, connection: Any, log_path: str) -> None:
    log = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    os.dup2(log, 1)
    os.dup2(log, 2)
    warnings.simplefilter("ignore")
    record = run_case(find_case(name), on_stage=lambda r: connection.send(("stage", dataclasses.asdict(r))))
    connection.send(("done", dataclasses.asdict(record)))


def sweep(cases: list[Any], timeout_s: float, jobs: int) -> list[Record]:
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(_PRELOAD)
    with tempfile.TemporaryDirectory(prefix="functions-sweep-") as scratch:

        def one(case: Any) -> Record:
            record = run_in_worker(context, _worker, (case.name,), Path(scratch) / f"{case.name}.log", timeout_s, Record(case.name, case.family))
            print(f"{record.model:50s} {record.status:14s} functions={record.functions} calls={record.calls} {record.error or ''}"[:220], flush=True)
            return record

        with ThreadPoolExecutor(jobs) as pool:
            return list(pool.map(one, cases))


def _ratio(values: list[float]) -> str:
    import math

    return f"{math.exp(sum(math.log(v) for v in values) / len(values)):.2f}" if values else "–"


def render(corpora: list[str]) -> str:
    lines = [START, "", "Generated by `python tools/sweeps/module_functions.py` (see its docstring for the statuses).", ""]
    for corpus in corpora:
        runs, records = read_records(results_path(corpus), Record)
        if not records:
            continue
        run = runs[-1] if runs else {}
        counts = {s: sum(r.status == s for r in records) for s in STATUSES}
        made = [r for r in records if r.status == "same"]
        lines += [
            f"### {'Hand-picked corpus' if corpus == 'hand' else GENERATED[corpus].title}",
            "",
            f"{len(records)} models; torch {run.get('torch', '?')}, commit {run.get('commit', '?')}.",
            "",
            "| status | models |",
            "|---|---:|",
            *[f"| {s} | {n} |" for s, n in counts.items() if n],
            "",
        ]
        if made:
            lines += [
                f"Over the {len(made)} models with functions (geometric means, functions export ÷ inlined export): "
                f"main-graph nodes {_ratio([r.nodes_main / r.nodes_inlined for r in made])}, "
                f"saved graph without weights {_ratio([r.bytes_functions / r.bytes_inlined for r in made])}, "
                f"export time {_ratio([r.export_functions_s / r.export_inlined_s for r in made])}, "
                f"ONNX Runtime session creation {_ratio([r.session_functions_s / r.session_inlined_s for r in made if r.session_inlined_s])}.",
                "",
            ]
        if any(r.replayed for r in made):  # runs before capture copied blocks have none
            lines += [
                f"Capture traced each distinct block once in {sum(r.replayed > 0 for r in made)} of them: "
                f"{sum(r.replayed for r in made)} of {sum(r.calls for r in made)} calls copied from a traced instance. "
                "Every one of those gives the inlined (fully traced) export's outputs bit for bit.",
                "",
            ]
        bad = [r for r in records if r.status not in ("same", "no_blocks", "inlined_failed", "build_failed")]
        if bad:
            lines += ["| model | status | error |", "|---|---|---|"]
            lines += [f"| {r.model} | {r.status} | {(r.error or '').replace('|', '/')[:160]} |" for r in bad]
            lines.append("")
    lines.append(END)
    return "\n".join(lines)


def write_page(corpora: list[str]) -> None:
    write_section(PAGE, START, END, render(corpora))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", default="hand", choices=["hand", *GENERATED])
    parser.add_argument("--models", help="comma-separated names (merged into the existing results)")
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--timeout", type=float, default=600)
    parser.add_argument("--render-only", action="store_true")
    options = parser.parse_args()
    corpora = ["hand", *[c for c in GENERATED if results_path(c).exists()]]
    if not options.render_only:
        import importlib

        from tools.corpus.models import CORPUS

        cases = CORPUS if options.corpus == "hand" else importlib.import_module(GENERATED[options.corpus].module).cases()
        wanted = set(options.models.split(",")) if options.models else None
        cases = [c for c in cases if wanted is None or c.name in wanted]
        records = sweep(cases, options.timeout, options.jobs)
        path = results_path(options.corpus)
        runs, old = read_records(path, Record) if wanted else ([], [])
        kept = [r for r in old if r.model not in {c.name for c in cases}]
        command = "python tools/sweeps/module_functions.py " + " ".join(sys.argv[1:])
        write_records(path, [*runs, {**machine_info(command), "kind": "run"}], [*kept, *records])
    write_page(corpora)


if __name__ == "__main__":
    main()
