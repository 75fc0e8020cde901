"""Benchmark ``torch_onnx_fx.export`` against ``torch.onnx.export(..., dynamo=True)`` on the corpus.

For every model of ``tools.corpus.models.CORPUS``, each exporter and each repeat, one fresh process
(``tools/benchmarks/bench_worker.py``, with a timeout) exports the model and measures export time (cold and
warm), peak RSS during the export, ONNX node count, ONNX Runtime latency and the max abs
difference from eager PyTorch. Results go to a JSON-lines file (first line: the machine) and a
generated Markdown page with per-model results, ours/theirs ratios with their geometric means, and
the failures of either exporter.

Regenerate the page (about 40 minutes on 2 cores)::

    python tools/benchmarks/bench.py --out docs/benchmarks.md --json tools/results/bench.jsonl

``--render-only`` rewrites the page from an existing JSON-lines file without exporting anything;
``--models a,b --merge`` re-runs only those models (say, one that failed for an outside reason)
and keeps the other models' runs, noting the re-run on the page. The page shows the chart of the
ratios that ``tools/pages/plots.py`` draws from the same JSON-lines file.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import shlex
import signal
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from tools._common import (  # noqa: E402
    BENCH_RATIOS_PNG, PLOTS_COMMAND, compile_package, describe_machine, describe_versions, image, machine_info, read_entries,
)
from tools.benchmarks.bench_worker import EXPORTERS, OURS, THEIRS, Record, corpus  # noqa: E402

__all__ = [
    "measure", "combine", "combine_runs", "RATIOS", "pairs_by_model", "handled_by_both", "ratio_columns", "geomean",
    "render_markdown", "read_results", "main",
]

WORKER = Path(__file__).resolve().parent / "bench_worker.py"
# Results are flagged in the page when they differ from eager by more than this.
DIFF_FLAG = 1e-3
# Ratios of peak RSS are left out below this denominator: a few MB is allocator noise.
MIN_RSS_MB_FOR_RATIO = 1.0
# The package versions a run records, in the page's order; --merge needs them unchanged.
_VERSIONS = ("torch", "onnxscript", "onnxruntime", "onnx")


def measure(
    case: Any, exporter: str, repeat: int, timeout_s: float, ort_runs: int, ort_budget_s: float, log_dir: Path
) -> Record:
    """Run one worker process and read back its record; a timeout or crash keeps partial results."""
    result_path = log_dir / f"{case.name}.{exporter}.{repeat}.json"
    log_path = log_dir / f"{case.name}.{exporter}.{repeat}.log"
    command = [
        sys.executable, str(WORKER), case.name, exporter, str(result_path),
        "--ort-runs", str(ort_runs), "--ort-budget", str(ort_budget_s),
    ]
    compile_package()
    with open(log_path, "w") as log:
        process = subprocess.Popen(command, cwd=REPO, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        returncode: int | None = None
        try:
            returncode = process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            pass
        finally:
            # The worker runs in its own session: end it on a timeout and when the driver is
            # interrupted, so no export is left running.
            if returncode is None:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
    try:
        record = Record(**json.loads(result_path.read_text()))
    except (OSError, ValueError):
        record = Record(model=case.name, family=case.family, exporter=exporter)
    record.repeat = repeat
    if returncode is None:
        record.status = "timeout"
        record.error = f"killed after {timeout_s:.0f} s during {record.stage}"
    elif record.status in ("not run", "ok") and (returncode != 0 or record.stage != "done"):
        tail = [line for line in log_path.read_text(errors="replace").splitlines() if line.strip()][-1:]
        record.status = "crashed"
        record.error = f"exit code {returncode} during {record.stage}" + (f": {tail[0][:300]}" if tail else "")
    return record


# Other work on a shared machine only ever adds time (on 2 shared cores, whole processes were seen
# running ONNX Runtime ~1.7x slower), so timings take the best repeat; the rest the median.
_BEST_OF = ("export_s", "warm_export_s", "ort_ms")
_MEDIAN_OF = ("peak_rss_mb", "max_abs_diff", "max_abs_diff_second")


def combine(records: Sequence[Record]) -> Record:
    """One record from the repeats of a model and exporter: the status and counts of the first
    successful repeat (else the first), the best of the timings and the median of the rest."""
    ok = [r for r in records if r.status == "ok"]
    combined = dataclasses.replace((ok or records)[0])
    failed = [r for r in records if r.status != "ok"]
    if ok and failed:
        combined.note = "; ".join(
            filter(None, [combined.note, f"{len(failed)} of {len(records)} repeats failed: {failed[0].status}: {failed[0].error}"])
        )
    for fields, pick in ((_BEST_OF, min), (_MEDIAN_OF, statistics.median)):
        for field in fields:
            values = [getattr(r, field) for r in records if getattr(r, field) is not None]
            setattr(combined, field, pick(values) if values else None)
    return combined


def combine_runs(runs: Iterable[Record]) -> list[Record]:
    """Combine the repeats of each (model, exporter), in the order they first ran."""
    grouped: dict[tuple[str, str], list[Record]] = {}
    for run in runs:
        grouped.setdefault((run.model, run.exporter), []).append(run)
    return [combine(group) for group in grouped.values()]


# -- the page ------------------------------------------------------------------------------------


def _fmt(value: float | None, digits: int = 2) -> str:
    if value is None:
        return "–"
    if isinstance(value, float) and math.isinf(value):
        return "inf"
    return f"{value:.{digits}f}"


def _fmt_diff(value: float | None) -> str:
    if value is None:
        return "–"
    text = "0" if value == 0 else f"{value:.1e}"
    return f"**{text}**" if value > DIFF_FLAG else text


def _nodes(record: Record) -> str:
    if record.nodes is None:
        return "–"
    if record.nodes_total != record.nodes:
        return f"{record.nodes} ({record.nodes_total})"
    return str(record.nodes)


def _ratio(ours: float | None, theirs: float | None, floor: float = 0.0) -> float | None:
    if ours is None or theirs is None or theirs <= floor or ours <= 0:
        return None
    return ours / theirs


def geomean(values: Iterable[float | None]) -> tuple[float | None, int]:
    """The geometric mean of the values that are not None, and how many there are."""
    kept = [v for v in values if v is not None]
    if not kept:
        return None, 0
    return math.exp(sum(math.log(v) for v in kept) / len(kept)), len(kept)


def _status(record: Record) -> str:
    if record.status == "ok":
        return "ok"
    detail = (record.error or "").replace("|", "\\|")
    return f"{record.status}: {detail[:120]}"


# The compared metrics: name, how to read it from a record, and the smallest torch.onnx value a
# ratio is taken over.
RATIOS: tuple[tuple[str, Callable[[Record], float | None], float], ...] = (
    ("export time", lambda r: r.export_s, 0.0),
    ("warm export time", lambda r: r.warm_export_s, 0.0),
    ("peak RSS", lambda r: r.peak_rss_mb, MIN_RSS_MB_FOR_RATIO),
    ("nodes", lambda r: r.nodes_total, 0.0),
    ("ORT latency", lambda r: r.ort_ms, 0.0),
)


def pairs_by_model(records: Iterable[Record]) -> dict[str, dict[str, Record]]:
    """Each model's record per exporter, models in the order they first appear."""
    pairs: dict[str, dict[str, Record]] = {}
    for record in records:
        pairs.setdefault(record.model, {})[record.exporter] = record
    return pairs


def handled_by_both(pairs: dict[str, dict[str, Record]]) -> dict[str, dict[str, Record]]:
    """The models both exporters export and run end to end: the only ones ratios are taken over."""
    return {m: p for m, p in pairs.items() if all(p.get(e) and p[e].status == "ok" for e in EXPORTERS)}


def ratio_columns(pairs: dict[str, dict[str, Record]]) -> dict[str, dict[str, float | None]]:
    """For each metric of ``RATIOS``, torch_onnx_fx / torch.onnx per model of ``pairs`` (None where
    either value is missing or torch.onnx's is below the metric's floor)."""
    return {
        name: {model: _ratio(get(pair[OURS]), get(pair[THEIRS]), floor) for model, pair in pairs.items()}
        for name, get, floor in RATIOS
    }


def _inaccurate(record: Record) -> bool:
    return any(d is not None and d > DIFF_FLAG for d in (record.max_abs_diff, record.max_abs_diff_second))


def render_markdown(machine: dict[str, Any], records: Sequence[Record]) -> str:
    """The page: per-model results, ours/theirs ratios with geometric means, failures, notes."""
    repeats = machine.get("repeat", 1)
    by_model = pairs_by_model(records)
    out = [
        "# Benchmarks: torch_onnx_fx vs torch.onnx (dynamo=True)",
        "",
        "Generated by `tools/benchmarks/bench.py`; do not edit by hand. Regenerate with:",
        "",
        "```bash",
        machine["command"],
        "```",
        "",
        f"Machine: {describe_machine(machine)}, {describe_versions(machine, _VERSIONS)}; "
        f"commit {machine['commit']}, {machine['date']}.",
        "",
        *(f"Later: {rerun}." for rerun in machine.get("reruns", [])),
        *([""] if machine.get("reruns") else []),
        "Each export runs in a fresh process with default options (`optimize=True`). *Export s*: wall "
        "time of the export call, cold (first export in the process); *warm s*: a second export of the same "
        "model in the same process, without one-time initialisation. *Peak RSS MB*: peak resident memory "
        "during the export above what the process held before it. *Nodes*: top-level ONNX nodes, with "
        "all nodes including subgraphs and functions in parentheses when different. *ORT ms*: median "
        "latency of ONNX Runtime (CPU, 1 intra-op thread) on the example inputs. *Diff*: max abs "
        "difference from eager PyTorch on the example inputs; *diff 2*: on the corpus's second inputs "
        f"of other dynamic sizes. Differences above {DIFF_FLAG:g} are in bold. Each "
        f"measurement ran {repeats} time{'s' if repeats != 1 else ''} in fresh processes: timings are the best repeat (other "
        "work on this shared machine only adds time), the other numbers the median.",
        "",
        "## Results",
        "",
        "| model | family | exporter | export s | warm s | peak RSS MB | nodes | ORT ms | diff | diff 2 | status |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for model, pair in by_model.items():
        for exporter in EXPORTERS:
            r = pair.get(exporter)
            if r is None:
                continue
            out.append(
                f"| {model} | {r.family} | {exporter} | {_fmt(r.export_s)} | {_fmt(r.warm_export_s)} | {_fmt(r.peak_rss_mb, 0)} | "
                f"{_nodes(r)} | {_fmt(r.ort_ms, 3)} | {_fmt_diff(r.max_abs_diff)} | "
                f"{_fmt_diff(r.max_abs_diff_second)} | {_status(r)} |"
            )

    both_ok = handled_by_both(by_model)
    columns = ratio_columns(both_ok)
    out += [
        "",
        "## Ratios torch_onnx_fx / torch.onnx",
        "",
        image("Ratios torch_onnx_fx / torch.onnx per model: export time, peak RSS, nodes and ORT latency", BENCH_RATIOS_PNG),
        "",
        "Below 1 means torch_onnx_fx is faster, smaller or leaner. Only models both exporters "
        f"handle; peak-RSS ratios only where torch.onnx's peak is at least {MIN_RSS_MB_FOR_RATIO:g} MB; "
        "node ratios count all nodes. The chart, drawn by `tools/pages/plots.py` from the same results, shows "
        "each model's ratio on a log scale with the geometric mean marked; redraw it after regenerating "
        f"this page with `{PLOTS_COMMAND}`.",
        "",
        "| model | " + " | ".join(columns) + " |",
        "|---|" + "---:|" * len(columns),
    ]
    for model in both_ok:
        out.append(f"| {model} | " + " | ".join(_fmt(column[model]) for column in columns.values()) + " |")
    means = [geomean(column.values()) for column in columns.values()]
    out.append("| **geometric mean** | " + " | ".join(f"**{_fmt(m)}** (n={n})" for m, n in means) + " |")

    def exported(r: Record | None) -> bool:
        return r is not None and r.nodes is not None

    we_fail = [m for m, p in by_model.items() if exported(p.get(THEIRS)) and not exported(p.get(OURS))]
    they_fail = [m for m, p in by_model.items() if exported(p.get(OURS)) and not exported(p.get(THEIRS))]
    out += [
        "",
        "## Failures",
        "",
        f"- Models torch.onnx exports that torch_onnx_fx fails to export: **{len(we_fail)}**"
        + (f" ({', '.join(we_fail)})" if we_fail else ""),
        f"- Models torch_onnx_fx exports that torch.onnx fails to export: **{len(they_fail)}**"
        + (f" ({', '.join(they_fail)})" if they_fail else ""),
        f"- Models both exporters handle end to end: **{len(both_ok)}** of {len(by_model)}",
    ]
    for exporter in EXPORTERS:
        wrong = [m for m, p in by_model.items() if p.get(exporter) and _inaccurate(p[exporter])]
        out.append(
            f"- Models whose {exporter} export runs but differs from eager by more than {DIFF_FLAG:g}: "
            f"**{len(wrong)}**" + (f" ({', '.join(wrong)})" if wrong else "")
        )
    failures = [r for pair in by_model.values() for r in pair.values() if r.status != "ok"]
    if failures:
        out += ["", "| model | exporter | status | error | innermost cause |", "|---|---|---|---|---|"]
        for r in failures:
            cells = [(text or "").replace("|", "\\|") for text in (r.error, r.cause)]
            out.append(f"| {r.model} | {r.exporter} | {r.status} | {cells[0]} | {cells[1]} |")
    notes = [r for pair in by_model.values() for r in pair.values() if r.note]
    if notes:
        out += ["", "Notes:", ""] + [f"- {r.model} / {r.exporter}: {r.note}" for r in notes]
    return "\n".join(out) + "\n"


def read_results(path: Path) -> tuple[dict[str, Any], list[Record]]:
    """The machine line and the runs (one per model, exporter and repeat) of a results file."""
    machine: dict[str, Any] = {}
    runs: list[Record] = []
    for kind, entry in read_entries(path):
        if kind == "machine":
            machine = {"kind": "machine", **entry}
        else:
            runs.append(Record(**entry))
    return machine, runs


def _run_entry(record: Record) -> dict[str, Any]:
    return {"kind": "run", **dataclasses.asdict(record)}


def _merge_into(path: Path, machine: dict[str, Any], rerun: set[str]) -> tuple[dict[str, Any] | None, list[Record]]:
    """The existing results without the models to re-run, under their original machine line with
    the re-run recorded; ``None`` for the machine when the package versions differ."""
    previous, runs = read_results(path)
    if any(previous.get(key) != machine[key] for key in _VERSIONS):
        return None, []
    note = f"{', '.join(sorted(rerun))} re-run on {machine['date']} at {machine['commit']} with `{machine['command']}`"
    return {**previous, "reruns": [*previous.get("reruns", []), note]}, [r for r in runs if r.model not in rerun]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", help="comma-separated corpus names (default: all)")
    parser.add_argument("--repeat", type=int, default=3, help="fresh-process runs per model and exporter")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per worker process")
    parser.add_argument("--ort-runs", type=int, default=200, help="timed ONNX Runtime runs at most")
    parser.add_argument("--ort-budget", type=float, default=5.0, help="seconds of timed ORT runs at most")
    parser.add_argument("--out", type=Path, default=REPO / "docs" / "benchmarks.md")
    parser.add_argument("--json", type=Path, default=REPO / "tools" / "results" / "bench.jsonl")
    parser.add_argument("--render-only", action="store_true", help="rewrite --out from --json, no exports")
    parser.add_argument(
        "--merge", action="store_true",
        help="with --models: re-run only these and keep the other models' runs already in --json",
    )
    options = parser.parse_args(argv)

    if options.render_only:
        machine, runs = read_results(options.json)
        options.out.write_text(render_markdown(machine, combine_runs(runs)))
        return 0

    cases = corpus()
    position = {case.name: i for i, case in enumerate(cases)}
    if options.merge and not options.models:
        parser.error("--merge re-runs the models given with --models")
    if options.models:
        wanted = options.models.split(",")
        known = {case.name: case for case in cases}
        unknown = [name for name in wanted if name not in known]
        if unknown:
            parser.error(f"unknown models {unknown}; known: {sorted(known)}")
        cases = [known[name] for name in wanted]

    shown = ["python", "tools/benchmarks/bench.py", *(sys.argv[1:] if argv is None else argv)]
    machine = {**machine_info(shlex.join(shown)), "repeat": options.repeat}
    runs: list[Record] = []
    if options.merge:
        machine, runs = _merge_into(options.json, machine, {case.name for case in cases})
        if machine is None:
            parser.error(f"{options.json} was measured with other package versions: re-run all models")
    options.json.parent.mkdir(parents=True, exist_ok=True)
    options.out.parent.mkdir(parents=True, exist_ok=True)
    options.json.write_text("".join(json.dumps(entry) + "\n" for entry in [machine, *map(_run_entry, runs)]))
    with tempfile.TemporaryDirectory(prefix="bench-") as log_dir:
        for case in cases:
            for repeat in range(options.repeat):
                # Alternate the order so neither exporter always runs on a warmer machine.
                order = EXPORTERS if repeat % 2 == 0 else EXPORTERS[::-1]
                for exporter in order:
                    record = measure(case, exporter, repeat, options.timeout, options.ort_runs, options.ort_budget, Path(log_dir))
                    runs.append(record)
                    with options.json.open("a") as jsonl:
                        jsonl.write(json.dumps(_run_entry(record)) + "\n")
                    print(
                        f"{case.name:>14} {exporter:>13} #{repeat}: {record.status:<18} "
                        f"export {_fmt(record.export_s)} s, RSS {_fmt(record.peak_rss_mb, 0)} MB, "
                        f"nodes {_nodes(record)}, ORT {_fmt(record.ort_ms, 3)} ms, diff {_fmt_diff(record.max_abs_diff)}"
                        + (f" | {record.error}" if record.error else ""),
                        flush=True,
                    )
            # Rewrite the page after every model so a long run shows its progress.
            in_corpus_order = sorted(runs, key=lambda run: position.get(run.model, len(position)))
            options.out.write_text(render_markdown(machine, combine_runs(in_corpus_order)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
