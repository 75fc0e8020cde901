"""Module sweep: every ModuleInfo of PyTorch's test database through both ONNX exporters.

The operator sweep (``tools/sweeps/opsweep.py``) checks ATen ops one call at a time; this sweep
checks what the ``torch.nn`` modules compose of them, in models nobody here built for. For each
ModuleInfo of ``torch.testing._internal.common_modules.module_db`` and its first ``--samples``
ModuleInputs of one dtype (``training=False``), the module is built from the input's constructor
arguments, moved to the dtype, put in ``eval()`` mode (dropout off, batch norm on its running
statistics) and, when lazy, materialized by one eager call. Its forward call is wrapped as
opsweep wraps an op's call: the forward input's tensors (wherever they sit, keyword arguments
included) are the inputs, every other argument is baked in. That call is captured once with
``torch.export.export(strict=False)`` and the same ExportedProgram goes through each exporter; the
ONNX Runtime outputs are compared with eager's, all of them, flattened, with a strict count, by
opsweep's ``compare`` (dtype, shape, then values within ``opsweep.tolerance``). Below float64 a
value outside the tolerance still passes where it is at least as close to the module's float64
result as eager is (opsweep's ``closer_than_eager``).

A ``mismatch`` is the finding this sweep exists for: an export that succeeds and computes other
numbers than eager PyTorch. The other statuses are opsweep's: ``export_failed``,
``invalid_model`` (ONNX's full check), ``ort_failed``, ``timeout``, ``crashed`` are counted;
``capture_failed``, ``eager_failed``, ``random`` (an op that draws random numbers with a nonzero
probability) and ``skipped`` (no inputs of the dtype) are not. Records and most of the page are
opsweep's too: a record's ``op`` holds the module's name (``nn.Conv2d``), its ``sample`` the
ModuleInput's index, and the header's ``ops`` the modules run.

    python tools/sweeps/modulesweep.py --samples 8 --dtype float32 --jobs 2 --json tools/results/nn_modules_float32.jsonl --out docs/coverage_nn_modules.md
    python tools/sweeps/modulesweep.py --samples 8 --dtype float64 --jobs 2 --json tools/results/nn_modules_float64.jsonl --out docs/coverage_nn_modules_float64.md
    python tools/sweeps/modulesweep.py --dtype float32 --samples 4 --json /tmp/m.jsonl --out /tmp/m.md
    python tools/sweeps/modulesweep.py --dtype float64 --exporters torch_onnx_fx --modules nn.Conv2d,nn.LSTM
    python tools/sweeps/modulesweep.py --render-only --json /tmp/m.jsonl --out /tmp/m.md

Each module runs in a worker forked from a warm server, with ``--timeout`` seconds for all its
samples and exporters; a worker that hangs or dies costs that module's remaining records.
"""

from __future__ import annotations

import argparse
import collections
import copy
import dataclasses
import json
import logging
import multiprocessing
import os
import shlex
import sys
import tempfile
import time
import types
import warnings
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from collections.abc import Callable, Iterator, Sequence
from typing import Any

REPO = Path(__file__).resolve().parents[2]
for _path in (REPO, REPO / "tests"):
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

import torch  # noqa: E402
from helpers import flat_tensors  # noqa: E402

from tools._common import describe_machine, describe_versions, machine_info, run_in_worker  # noqa: E402
from tools.sweeps.opsweep import (  # noqa: E402
    APART, DTYPES, EXPORTERS, OURS, STATUSES, THEIRS, OpCall, Record, _cell, _comparison_section, _counts, _details,
    _missing_section, _run_exporter, closer_than_eager, compare, describe_exception, describe_sample, eager_and_capture,
    failures_by_cause, failures_of, in_page_order, read_results, status_counts,
)

__all__ = ["DEFAULT_SAMPLES", "module_infos", "skip_reason", "build_module", "sweep_module", "run_sweep", "render_markdown", "main"]

DEFAULT_SAMPLES = 4


def module_infos() -> dict[str, Any]:
    """ModuleInfos by name (``nn.Conv2d``), in module_db's order."""
    from torch.testing._internal.common_modules import module_db

    return {info.name: info for info in module_db}


def skip_reason(info: Any, dtype: torch.dtype) -> str | None:
    if dtype not in info.dtypes:
        return f"no {str(dtype).removeprefix('torch.')} inputs"
    return None


class _Unpacked(torch.nn.Module):
    """``module(*args, **kwargs)`` called as ``op(args, **kwargs)``: the shape of call ``OpCall`` makes,
    with the module registered beneath it so its parameters and buffers stay the program's own."""

    def __init__(self, module: torch.nn.Module):
        super().__init__()
        self.module = module

    def forward(self, args: tuple[Any, ...], **kwargs: Any) -> Any:
        return self.module(*args, **kwargs)


def build_module(info: Any, module_input: Any, dtype: torch.dtype) -> OpCall:
    """The ModuleInput's module in eval mode, wrapped so the forward input's tensors are its inputs.

    Lazy modules are materialized by one eager call on copies of the inputs, so the program
    captured holds ordinary parameters.
    """
    torch.manual_seed(0)
    constructor, forward = module_input.constructor_input, module_input.forward_input
    module = info.module_cls(*constructor.args, **constructor.kwargs).to(dtype).eval()
    call = OpCall(_Unpacked(module), types.SimpleNamespace(input=tuple(forward.args), args=(), kwargs=dict(forward.kwargs)))
    if info.is_lazy:
        with torch.no_grad():
            call(*call.fresh_inputs())
    return call


def _describe_input(module_input: Any) -> str:
    """``Cls(constructor arguments) <- forward inputs``, modules among the arguments by class name."""

    def short(value: Any) -> str:
        if isinstance(value, torch.Tensor):
            return f"{str(value.dtype).removeprefix('torch.')}{list(value.shape)}"
        return type(value).__name__ if isinstance(value, torch.nn.Module) else repr(value)

    constructor, forward = module_input.constructor_input, module_input.forward_input
    built = ", ".join([*(short(a) for a in constructor.args), *(f"{k}={short(v)}" for k, v in constructor.kwargs.items())])
    args = tuple(forward.args)
    called = describe_sample(types.SimpleNamespace(input=args[0] if args else (), args=args[1:], kwargs=forward.kwargs), limit=120)
    text = f"({built}) <- {called}" + (f" [{module_input.desc}]" if module_input.desc else "")
    return text if len(text) <= 240 else text[:239] + "…"


def _float64_reference(call: OpCall, forward: Any, dtype: torch.dtype, compare_outputs: Callable[..., None]) -> Callable[..., None]:
    """opsweep's ``closer_than_eager`` with a float64 copy of the module as the op it recomputes."""
    if dtype not in (torch.float16, torch.bfloat16, torch.float32):
        return compare_outputs
    double = copy.deepcopy(call.op).to(torch.float64)
    sample = types.SimpleNamespace(input=tuple(forward.args), args=(), kwargs=dict(forward.kwargs))
    return closer_than_eager(types.SimpleNamespace(op=double), sample, compare_outputs)


def _captured_differs(program: torch.export.ExportedProgram, call: OpCall, expected: Any, compare_outputs: Callable[..., None]) -> str | None:
    """Why the captured program, run in PyTorch, gives other numbers than eager, if it does.

    A mismatch is the exporter's only when the program it was given computes eager's numbers:
    eager modules may take paths the capture does not (``TransformerEncoder``'s nested-tensor
    fast path in eval mode zeroes padded positions; the traced slow path does not).
    """
    try:
        with torch.no_grad():
            compare_outputs(expected, flat_tensors(program.module()(*call.fresh_inputs())))
    except Exception as exc:  # noqa: BLE001 - the verdict is the message
        return "the captured program differs from eager in PyTorch too: " + describe_exception(exc)[0]
    return None


def _module_inputs(info: Any, dtype: torch.dtype, samples: int) -> tuple[list[Any], str | None]:
    torch.manual_seed(0)
    try:
        chosen = list(info.module_inputs_func(info, device="cpu", dtype=dtype, requires_grad=False, training=False))[:samples]
    except Exception as exc:  # noqa: BLE001 - a broken generator skips the module, with its error
        return [], "module_inputs_func raised " + describe_exception(exc)[0]
    return chosen, None if chosen else "no inputs for eval mode"


def sweep_module(
    info: Any,
    dtype: torch.dtype = torch.float32,
    samples: int = DEFAULT_SAMPLES,
    exporters: Sequence[str] = EXPORTERS,
    *,
    on_record: Callable[[Record], None] | None = None,
    on_stage: Callable[[int | None, str | None, str], None] | None = None,
) -> list[Record]:
    """All records of one module: its first ``samples`` ModuleInputs through each exporter."""
    records: list[Record] = []
    stage = on_stage or (lambda sample, exporter, name: None)

    def emit(record: Record) -> None:
        records.append(record)
        if on_record is not None:
            on_record(record)

    stage(None, None, "module inputs")
    chosen: list[Any] = []
    reason = skip_reason(info, dtype)
    if reason is None:
        chosen, reason = _module_inputs(info, dtype, samples)
    if reason is not None:
        for exporter in exporters:
            emit(Record(info.name, None, exporter, "skipped", error=reason))
        return records

    for index, module_input in enumerate(chosen):
        inputs = _describe_input(module_input)
        try:
            call = build_module(info, module_input, dtype)
        except Exception as exc:  # noqa: BLE001 - the module's constructor or a lazy module's first call
            error, cause = describe_exception(exc)
            for exporter in exporters:
                emit(Record(info.name, index, exporter, "eager_failed", inputs=inputs, error=error, cause=cause))
            continue
        status, error, cause, program, expected = eager_and_capture(call, stage, index)
        compare_outputs = _float64_reference(call, module_input.forward_input, dtype, compare) if program is not None else compare
        captured_differs = _captured_differs(program, call, expected, compare_outputs) if program is not None else None
        for exporter in exporters:
            record = Record(info.name, index, exporter, status or "", inputs=inputs, error=error, cause=cause)
            if program is not None:
                start = time.perf_counter()
                _run_exporter(record, exporter, call, program, expected, lambda name, index=index, exporter=exporter: stage(index, exporter, name), None, compare_outputs)
                record.seconds = round(time.perf_counter() - start, 3)
                if record.status == "mismatch" and captured_differs:
                    record.cause = captured_differs
            emit(record)
    return records


# -- many modules, each in a worker process ---------------------------------------------------------

_PRELOAD = [
    "torch", "torch.testing._internal.common_modules", "onnxruntime", "onnxscript",
    "torch.onnx._internal.exporter._core", "torch_onnx_fx", "tools.sweeps.modulesweep",
]


@dataclasses.dataclass
class _Progress:
    """What a worker has done so far: the message ``tools._common.run_in_worker`` passes on."""

    module: str
    stage: str = "start"
    sample: int | None = None
    exporter: str | None = None
    status: str = ""
    error: str | None = None
    records: list[dict[str, Any]] = dataclasses.field(default_factory=list)


def _worker(name: str, dtype_name: str, samples: int, exporters: Sequence[str], connection: Any, log_path: str) -> None:
    log = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    os.dup2(log, 1)
    os.dup2(log, 2)
    warnings.simplefilter("ignore")
    logging.disable(logging.WARNING)
    torch.set_num_threads(1)
    progress = _Progress(name)

    def send(kind: str) -> None:
        connection.send((kind, dataclasses.asdict(progress)))

    def on_stage(sample: int | None, exporter: str | None, stage: str) -> None:
        progress.sample, progress.exporter, progress.stage = sample, exporter, stage
        send("stage")

    sweep_module(
        module_infos()[name], DTYPES[dtype_name], samples, exporters,
        on_record=lambda record: progress.records.append(dataclasses.asdict(record)), on_stage=on_stage,
    )
    send("done")


def _records_of(progress: _Progress, exporters: Sequence[str]) -> list[Record]:
    """The worker's records; a timeout or crash adds one for the step it was stopped in."""
    records = [Record(**r) for r in progress.records]
    if progress.status in ("timeout", "crashed"):
        done = {(r.sample, r.exporter) for r in records}
        error = progress.error + ("; later samples not run" if progress.status == "timeout" else "")
        for exporter in [progress.exporter] if progress.exporter else exporters:
            if (progress.sample, exporter) not in done:
                records.append(Record(progress.module, progress.sample, exporter, progress.status, error=error))
    return records


def run_sweep(names: Sequence[str], dtype_name: str, samples: int, exporters: Sequence[str], jobs: int, timeout_s: float) -> Iterator[list[Record]]:
    """Yield each module's records in ``names``' order."""
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(_PRELOAD)
    warm_up = context.Process(target=time.sleep, args=(0,))  # the server's imports, before any clock runs
    warm_up.start()
    warm_up.join()
    with tempfile.TemporaryDirectory(prefix="modulesweep-") as scratch, ThreadPoolExecutor(jobs) as pool:

        def one(name: str) -> list[Record]:
            progress = run_in_worker(
                context, _worker, (name, dtype_name, samples, tuple(exporters)), Path(scratch) / f"{name}.log", timeout_s, _Progress(name)
            )
            return _records_of(progress, exporters)

        yield from pool.map(one, names)


# -- the page ---------------------------------------------------------------------------------------


def render_markdown(header: dict[str, Any], records: Sequence[Record]) -> str:
    exporters = [e for e in EXPORTERS if e in header["exporters"]]
    records = in_page_order(header, records)
    counted = [r for r in records if r.status in STATUSES]
    per_exporter = status_counts(counted, exporters)
    out = [
        f"# Module sweep: ModuleInfo database, {header['dtype']}",
        "",
        f"Generated by `tools/sweeps/modulesweep.py`; do not edit by hand. This page's run: `{header['command']}`.",
        "",
        (f"Machine: {describe_machine(header)}, {describe_versions(header, ('torch', 'onnxscript', 'onnxruntime'))}; "
         f"{header['date']}, commit {header['commit']}; {header['minutes']:.0f} min with {header['jobs']} job(s)."),
        "",
        (f"Every ModuleInfo of PyTorch's `module_db` ({len(header['ops'])} modules), its first {header['samples']} "
        f"ModuleInputs in {header['dtype']} on CPU, the module in eval mode. Each forward call is captured once with "
        "`torch.export.export(strict=False)`, exported by each exporter, run in ONNX Runtime and compared with eager "
        "PyTorch as the operator sweep compares (every output, dtype, shape, then values)."),
        "",
        "| status | " + " | ".join(exporters) + " |",
        "|---|" + "---:|" * len(exporters),
    ]
    out += [f"| {s} | " + " | ".join(str(per_exporter[e][s]) for e in exporters) + " |" for s in STATUSES]
    out.append("| **total** | " + " | ".join(f"**{sum(per_exporter[e].values())}**" for e in exporters) + " |")
    first = exporters[0]
    apart = collections.Counter(r.status for r in records if r.exporter == first and r.status in APART)
    skipped = collections.Counter(r.error for r in records if r.exporter == first and r.status == "skipped")
    out += [
        "",
        f"Not counted: {apart['capture_failed']} inputs torch.export cannot capture, {apart['eager_failed']} that eager "
        f"PyTorch rejects, {apart['random']} whose programs draw random numbers, {apart['skipped']} modules skipped"
        + "".join(f"; {reason}: {n}" for reason, n in skipped.most_common()) + ".",
    ]
    if OURS in exporters:
        mismatches = [r for r in counted if r.exporter == OURS and r.status == "mismatch"]
        out += ["", f"## Silent wrong numbers: {len(mismatches)} torch_onnx_fx mismatches", ""]
        out += ["Where torch.export's program itself differs from eager, the last column says so: not the exporter's.", ""]
        out += ["| module | input | sample | difference | captured program |", "|---|---|---:|---|---|"] if mismatches else ["None."]
        out += [f"| {r.op} | `{_cell(r.inputs)}` | {r.sample} | {_cell(r.error)} | {_cell(r.cause) or 'same as eager'} |" for r in mismatches]
    if OURS in exporters and THEIRS in exporters:
        by_sample: dict[tuple[str, int | None], dict[str, Record]] = {}
        for record in records:
            by_sample.setdefault((record.op, record.sample), {})[record.exporter] = record
        out += _comparison_section(by_sample)[0]
    if OURS in exporters:
        failures = failures_of(counted, OURS)
        groups = failures_by_cause(failures)
        out += ["", f"## torch_onnx_fx failures by cause: {len(failures)} inputs, {len(groups)} causes", "",
                "| inputs | status | cause | modules |", "|---:|---|---|---|"]
        out += [f"| {len(members)} | {members[0].status} | {_cell(cause)} | {', '.join(dict.fromkeys(r.op for r in members))} |"
                for cause, members in groups]
        out += _missing_section(failures)
    rows = ["| module | " + " | ".join(exporters) + " | not counted |", "|---|" + "---|" * (len(exporters) + 1)]
    for name in dict.fromkeys(r.op for r in records):
        mine = [r for r in records if r.op == name]
        reason = next((r.error for r in mine if r.status == "skipped"), None)
        other = f"skipped: {_cell(reason)}" if reason else _counts(r for r in mine if r.exporter == first and r.status in APART)
        rows.append(f"| {name} | " + " | ".join(_counts(r for r in mine if r.exporter == e and r.status in STATUSES) for e in exporters) + f" | {other} |")
    out += _details(f"Per-module results ({len(header['ops'])} modules; counts of inputs)", rows)
    return "\n".join(out) + "\n"


# -- the driver -------------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--modules", help="comma-separated ModuleInfo names, e.g. nn.Conv2d (default: all)")
    parser.add_argument("--samples", type=int, default=DEFAULT_SAMPLES, help="ModuleInputs per module (the first N)")
    parser.add_argument("--dtype", choices=("float64", "float32", "float16", "bfloat16"), default="float32")
    parser.add_argument("--exporters", type=lambda s: s.split(","), default=list(EXPORTERS), help="comma-separated")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds per module (all its inputs and exporters)")
    parser.add_argument("--jobs", type=int, default=1, help="modules run side by side")
    parser.add_argument("--json", type=Path, required=True, help="JSON-lines results (first line: the run's settings)")
    parser.add_argument("--out", type=Path, help="Markdown page rendered from the results")
    parser.add_argument("--render-only", action="store_true", help="rewrite --out from --json, run nothing")
    options = parser.parse_args(argv)
    unknown = [e for e in options.exporters if e not in EXPORTERS]
    if unknown:
        parser.error(f"unknown exporters {unknown}; known: {list(EXPORTERS)}")
    if options.render_only:
        if options.out is None:
            parser.error("--render-only needs --out")
        options.out.write_text(render_markdown(*read_results(options.json)))
        return 0

    known = list(module_infos())
    names = options.modules.split(",") if options.modules else known
    if missing := [n for n in names if n not in known]:
        parser.error(f"unknown modules {missing}; see the names in torch's common_modules.module_db")
    header = machine_info(shlex.join(["python", "tools/sweeps/modulesweep.py", *(sys.argv[1:] if argv is None else argv)]))
    header.update(kind="header", dtype=options.dtype, samples=options.samples, exporters=list(options.exporters),
                  jobs=options.jobs, minutes=0.0, ops=names)
    options.json.parent.mkdir(parents=True, exist_ok=True)
    options.json.write_text(json.dumps(header) + "\n")
    start, everything = time.monotonic(), []
    for done, records in enumerate(run_sweep(names, options.dtype, options.samples, options.exporters, options.jobs, options.timeout), 1):
        everything += records
        header["minutes"] = (time.monotonic() - start) / 60
        with options.json.open("a") as jsonl:
            jsonl.writelines(json.dumps({"kind": "record", **dataclasses.asdict(r)}) + "\n" for r in records)
            jsonl.write(json.dumps({"kind": "elapsed", "minutes": round(header["minutes"], 2)}) + "\n")
        summary = "; ".join(f"{e}: {_counts(r for r in records if r.exporter == e)}" for e in options.exporters)
        print(f"[{done}/{len(names)} {time.monotonic() - start:6.0f} s] {records[0].op if records else '?'}: {summary}", flush=True)
    if options.out is not None:
        options.out.parent.mkdir(parents=True, exist_ok=True)
        options.out.write_text(render_markdown(header, everything))
    print(f"{len(everything)} records: " + _counts(everything))
    return 0


if __name__ == "__main__":
    # Run as the module tools.sweeps.modulesweep, so worker processes unpickle its functions by that name.
    from tools.sweeps.modulesweep import main as _main

    sys.exit(_main())
